"""Shared test settings: a deterministic hypothesis profile (no wall-clock deadline,
derandomised so CI and every developer see the same examples)."""
from hypothesis import HealthCheck, settings

settings.register_profile(
    "deterministic",
    derandomize=True,
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.load_profile("deterministic")
