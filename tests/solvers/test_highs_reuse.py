"""The HiGHS backend reuses one ``Highs`` object per thread (:func:`solvers.highs._solver`):
every solve must return what a new object returns, bit for bit, whatever was solved before
and with whatever options. Checked on a sequence of the reference LPs and of pair-stage LPs
of truncated IS (the LPs the reuse is for), with presolve alternating on and off; a reused
object that keeps the options of its first solve is shown to fail the same check. The model
is passed as numpy arrays (:func:`solvers.highs._pass_model`), checked the same way against
a ``HighsLp`` built from lists (the slow obvious form)."""
from __future__ import annotations

import threading

import highspy
import numpy as np
import pytest

import solvers.highs as highs
from tests.fast_path_support import same_floats
from tests.solvers.conftest import REFERENCE_LPS

import bench_highs_reuse  # (the LPs and the new-object factory of the benchmark)


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


@pytest.fixture(scope="module")
def lps() -> list:
    return [r.lp for r in REFERENCE_LPS] + bench_highs_reuse.pair_stage_lps(20, alphabet=12, free=6, seed=1)


def test_a_reused_object_solves_as_a_new_one(lps, monkeypatch):
    reused = _results(lps)
    monkeypatch.setattr(highs, "_solver", bench_highs_reuse.fresh_solver)
    assert _same(reused, _results(lps))


def test_a_reused_object_that_keeps_its_first_options_is_detected(lps, monkeypatch):
    """Deliberately broken: the options are set when the object is created and never again,
    so presolve stays as the first solve asked."""
    h = bench_highs_reuse.fresh_solver()
    h.setOptionValue("presolve", "choose")

    def stale_run(data, presolve, time_limit, solver_tolerance):
        h.clearModel()
        highs._pass_model(h, data)
        h.run()
        return h, h.getModelStatus()

    reference = _results(lps)
    monkeypatch.setattr(highs, "_run", stale_run)
    assert not _same(_results(lps), reference)


def _pass_model_by_lists(h, data) -> None:
    """The reference: a ``HighsLp`` filled from Python lists, passed whole."""
    inf = highspy.kHighsInf
    start, index, value = highs._stacked_csc(data.A_eq, data.A_ub)
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = data.n, data.A_eq.shape[0] + data.A_ub.shape[0]
    lp.sense_ = highspy.ObjSense.kMaximize if data.maximize else highspy.ObjSense.kMinimize
    lp.col_cost_ = data.c.tolist()
    lp.col_lower_ = np.where(np.isneginf(data.lower), -inf, data.lower).tolist()
    lp.col_upper_ = np.where(np.isposinf(data.upper), inf, data.upper).tolist()
    lp.row_lower_ = np.concatenate([data.b_eq, np.full(data.b_ub.shape[0], -inf)]).tolist()
    lp.row_upper_ = np.concatenate([data.b_eq, data.b_ub]).tolist()
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = lp.num_col_, lp.num_row_
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = start.tolist(), index.tolist(), value.tolist()
    h.passModel(lp)


def test_the_model_passed_as_arrays_solves_as_one_passed_as_lists(lps, monkeypatch):
    arrays = _results(lps)
    monkeypatch.setattr(highs, "_pass_model", _pass_model_by_lists)
    assert _same(arrays, _results(lps))


def test_a_model_passed_with_inequalities_as_equalities_is_detected(lps, monkeypatch):
    """Deliberately broken: the ``<=`` rows passed with ``b_ub`` as their lower bound too."""
    def pinned(h, data):
        start, index, value = highs._stacked_csc(data.A_eq, data.A_ub)
        bounds = np.concatenate([data.b_eq, data.b_ub]).astype(np.float64)
        h.passModel(data.n, data.A_eq.shape[0] + data.A_ub.shape[0], len(value), int(highspy.MatrixFormat.kColwise),
                    int(highspy.ObjSense.kMaximize if data.maximize else highspy.ObjSense.kMinimize), 0.0,
                    data.c.astype(np.float64), np.where(np.isneginf(data.lower), -highspy.kHighsInf, data.lower),
                    np.where(np.isposinf(data.upper), highspy.kHighsInf, data.upper), bounds, bounds,
                    start.astype(np.int32), index.astype(np.int32), value.astype(np.float64),
                    np.zeros(data.n, dtype=np.int32))

    reference = _results(lps)
    monkeypatch.setattr(highs, "_pass_model", pinned)
    assert not _same(_results(lps), reference)


def test_each_thread_has_its_own_object():
    mine, theirs = highs._solver(), []
    thread = threading.Thread(target=lambda: theirs.append(highs._solver()))
    thread.start()
    thread.join()
    assert highs._solver() is mine and theirs[0] is not mine


def test_the_reuse_benchmark_runs_and_restores_the_backend():
    solver = highs._solver
    result = bench_highs_reuse.main(["--instances", "3", "--alphabet", "12", "--free", "4", "--repeats", "1"])
    assert set(result) == {"new object per solve", "reused object"} and all(v > 0 for v in result.values())
    assert highs._solver is solver
