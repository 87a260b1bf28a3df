"""Shared test settings: a deterministic hypothesis profile (no wall-clock deadline,
derandomised so CI and every developer see the same examples), and scripts/ on the path: the
benchmark and figure scripts run as files (``python scripts/NAME.py``) and import each other by
name, and the tests import them the same way (``import bench_verifier_cost``)."""
import sys
from pathlib import Path

from hypothesis import HealthCheck, settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

settings.register_profile(
    "deterministic",
    derandomize=True,
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.load_profile("deterministic")
