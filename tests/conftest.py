"""Shared test settings: a deterministic hypothesis profile (no wall-clock deadline,
derandomised so CI and every developer see the same examples), and scripts/ on the path: the
benchmark and figure scripts run as files (``python scripts/NAME.py``) and import each other by
name, and the tests import them the same way (``import bench_verifier_cost``); and the objects
alive after collection (the imported stack and the test modules) frozen out of the garbage
collector, whose full collections would otherwise walk them again and again while a test
allocates many small objects (rational references, rows as Python lists)."""
import gc
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


def pytest_collection_finish(session):
    """Freeze the collected process's objects (each pytest-xdist worker collects for itself):
    :func:`gc.freeze` keeps them out of every later collection; objects made by the tests are
    collected as before."""
    gc.collect()
    gc.freeze()
