"""The HiGHS backend reuses one ``Highs`` object per thread (:func:`solvers.highs._solver`):
every solve must return what a new object returns, bit for bit, whatever was solved before
and with whatever options. Checked on a sequence of the reference LPs and of pair-stage LPs
of truncated IS (the LPs the reuse is for), with presolve alternating on and off; a reused
object that keeps the options of its first solve is shown to fail the same check."""
from __future__ import annotations

import threading

import highspy
import numpy as np
import pytest

import solvers.highs as highs
from otm.rules import importance_sampling_truncated
from tests.fast_path_support import same_floats
from tests.solvers.conftest import REFERENCE_LPS


def _pair_stage_lps(instances: int, seed: int) -> list:
    """The LPs :func:`otm.rules.importance_sampling_truncated.pair_stage` solves on random
    instances (12 tokens, 6 free)."""
    captured = []
    solve_lp = importance_sampling_truncated.solve_lp

    def capture(lp, backend):
        captured.append(lp)
        return solve_lp(lp, backend)

    rng = np.random.default_rng(seed)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(importance_sampling_truncated, "solve_lp", capture)
        for _ in range(instances):
            p, q = rng.dirichlet(np.full(12, 0.3)), rng.dirichlet(np.full(12, 0.3))
            importance_sampling_truncated.pair_stage(p, q, q, 6)
    return captured


def _results(lps: list) -> list:
    return [highs.solve(lp, presolve="off" if i % 2 else "choose") for i, lp in enumerate(lps)]


def _same(got: list, ref: list) -> bool:
    def vector(v):
        return [] if v is None else v

    return all(
        a.status == b.status and same_floats(vector(a.x), vector(b.x))
        and same_floats(vector(a.dual_eq), vector(b.dual_eq)) and same_floats(vector(a.dual_ub), vector(b.dual_ub))
        for a, b in zip(got, ref, strict=True)
    )


def _fresh():
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    return h


@pytest.fixture(scope="module")
def lps() -> list:
    return [r.lp for r in REFERENCE_LPS] + _pair_stage_lps(20, seed=1)


def test_a_reused_object_solves_as_a_new_one(lps, monkeypatch):
    reused = _results(lps)
    monkeypatch.setattr(highs, "_solver", _fresh)
    assert _same(reused, _results(lps))


def test_a_reused_object_that_keeps_its_first_options_is_detected(lps, monkeypatch):
    """Deliberately broken: the options are set when the object is created and never again,
    so presolve stays as the first solve asked."""
    h = _fresh()
    h.setOptionValue("presolve", "choose")

    def stale_run(data, presolve, time_limit, solver_tolerance):
        h.clearModel()
        h.passModel(highs._highs_lp(data))
        h.run()
        return h, h.getModelStatus()

    reference = _results(lps)
    monkeypatch.setattr(highs, "_run", stale_run)
    assert not _same(_results(lps), reference)


def test_each_thread_has_its_own_object():
    mine, theirs = highs._solver(), []
    thread = threading.Thread(target=lambda: theirs.append(highs._solver()))
    thread.start()
    thread.join()
    assert highs._solver() is mine and theirs[0] is not mine


def test_the_reuse_benchmark_runs_and_restores_the_backend():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "bench_highs_reuse.py"
    spec = importlib.util.spec_from_file_location("bench_highs_reuse", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    solver = highs._solver
    result = bench.main(["--instances", "3", "--alphabet", "12", "--free", "4", "--repeats", "1"])
    assert set(result) == {"new object per solve", "reused object"} and all(v > 0 for v in result.values())
    assert highs._solver is solver
