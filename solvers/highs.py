"""Backend ``"highs"``: the HiGHS solver through ``highspy``'s ``Highs`` object.

The LP is passed once with :meth:`Highs.passModel` as column-wise (CSC) numpy arrays;
equality rows get ``row_lower = row_upper = b_eq``, inequality rows ``(-inf, b_ub]``.
HiGHS' row duals satisfy ``c = A.T @ row_dual + col_dual`` for either sense, which is the
convention of :class:`~solvers.problem.LPResult` as it stands (checked by the tests).

Robustness: HiGHS' presolve decides infeasibility on the data as given, so rows that are
inconsistent by one rounding error (transport marginals summing to 1 and 1 + 2e-16) are
reported infeasible although a point within the solver's feasibility tolerance exists. When
presolve says infeasible (or cannot tell infeasible from unbounded) the model is solved again
with presolve off; an optimum found then is returned only if it passes the float certificate
of :mod:`solvers.verify`, with the presolve verdict recorded in ``message``. Every optimum is
verified the same way; one that fails is returned as ``NUMERICAL_ERROR``, never as optimal.
"""
from __future__ import annotations

import functools
import threading

import numpy as np
import scipy.sparse as sp

from solvers.capabilities import BackendCapabilities
from solvers.data import FloatData, float_data
from solvers.problem import LinearProgram, LPResult, LPStatus
from solvers.result import no_variable_result, verified_result
from solvers.sparse import compressed_order
from solvers.tolerances import FEASIBILITY_TOLERANCE

CAPABILITIES = BackendCapabilities(
    name="highs",
    has_duals=True,
    exact=False,
    supports_sparse=True,
    max_variables=None,
    description="HiGHS dual simplex / IPM via highspy (sparse, fast, float64)",
)


def _stacked_csc(A_eq: sp.csr_matrix, A_ub: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(start [n + 1], index [nnz], value [nnz])``: the CSC arrays of ``[A_eq; A_ub]``,
    equal to those of ``scipy.sparse.vstack([A_eq, A_ub], format="csc")`` (row indices
    ascending in each column, duplicates summed) without its conversions
    (:func:`solvers.sparse.compressed_order` of the entries by column, then row). Only a
    matrix with a repeated entry goes through ``vstack``. Blocks of different widths raise
    ``ValueError``, as ``vstack`` does."""
    if A_eq.shape[1] != A_ub.shape[1]:
        raise ValueError(f"cannot stack blocks of {A_eq.shape[1]} and {A_ub.shape[1]} columns")
    rows = np.concatenate([np.repeat(np.arange(A.shape[0]) + offset, np.diff(A.indptr))
                           for A, offset in ((A_eq, 0), (A_ub, A_eq.shape[0]))])
    compressed = compressed_order(np.concatenate([A_eq.indices, A_ub.indices]), rows, A_eq.shape[1])
    if compressed is None:
        A = sp.vstack([A_eq, A_ub], format="csc")
        return A.indptr, A.indices, A.data
    start, order = compressed
    return start, rows[order], np.concatenate([A_eq.data, A_ub.data])[order]


def _pass_model(h, data: FloatData) -> None:
    """Hand ``data`` to the ``Highs`` object ``h`` as a column-wise LP through the
    numpy-array form of ``passModel`` (no per-entry conversion of Python lists; about 0.04 ms
    less per small LP than building a ``HighsLp`` from lists, the same model: same solutions
    bit for bit, ``tests/solvers/test_highs_reuse.py``). ``integrality`` is all continuous: an
    empty array is read as garbage in this form. A model HiGHS refuses shows in the status
    of the run that follows."""
    import highspy

    inf = highspy.kHighsInf
    start, index, value = _stacked_csc(data.A_eq, data.A_ub)
    num_row = data.A_eq.shape[0] + data.A_ub.shape[0]
    sense = highspy.ObjSense.kMaximize if data.maximize else highspy.ObjSense.kMinimize
    h.passModel(
        data.n, num_row, len(value), int(highspy.MatrixFormat.kColwise), int(sense), 0.0,
        np.ascontiguousarray(data.c, dtype=np.float64),
        np.where(np.isneginf(data.lower), -inf, data.lower).astype(np.float64),
        np.where(np.isposinf(data.upper), inf, data.upper).astype(np.float64),
        np.concatenate([data.b_eq, np.full(data.b_ub.shape[0], -inf)]).astype(np.float64),
        np.concatenate([data.b_eq, data.b_ub]).astype(np.float64),
        np.asarray(start, dtype=np.int32), np.asarray(index, dtype=np.int32), np.asarray(value, dtype=np.float64),
        np.zeros(data.n, dtype=np.int32),
    )


_THREAD = threading.local()


def _solver():
    """This thread's ``Highs`` object, created once: a new object per solve costs about
    0.13 ms of the 0.9 ms of a pair-stage LP of truncated IS (model, solve and certificate;
    ``python scripts/bench_highs_reuse.py``, docs/benchmarks.md section (c)).
    :func:`_run` calls ``clearModel`` before each model, which drops the previous model, its
    solution and its basis, so every solve starts cold and returns what a new object returns
    (``tests/solvers/test_highs_reuse.py``). One per thread: a Dask worker's threads never
    share one."""
    h = getattr(_THREAD, "highs", None)
    if h is None:
        h = _THREAD.highs = new_highs()
    return h


def new_highs():
    """A new ``highspy.Highs`` object that never writes to the console.

    ``Highs()`` prints a two-line banner on the process's C-level stdout while it is
    constructed (its ``enableCallbacks`` runs before any option can be set), which would
    break every ``--json`` output and fill notebooks and Dask workers' logs. The subclass
    turns ``output_flag`` off first, inside construction."""
    return _silent_highs_class()()


@functools.cache
def _silent_highs_class():
    import highspy

    class SilentHighs(highspy.Highs):
        def enableCallbacks(self):
            self.silent()
            super().enableCallbacks()

    return SilentHighs


def _run(data: FloatData, presolve: str, time_limit: float | None, solver_tolerance: float):
    import highspy

    h = _solver()
    h.clearModel()
    h.setOptionValue("presolve", presolve)
    h.setOptionValue("primal_feasibility_tolerance", solver_tolerance)
    h.setOptionValue("dual_feasibility_tolerance", solver_tolerance)
    h.setOptionValue("time_limit", highspy.kHighsInf if time_limit is None else float(time_limit))
    _pass_model(h, data)
    h.run()
    return h, h.getModelStatus()


_STATUS = {
    "kOptimal": LPStatus.OPTIMAL,
    "kInfeasible": LPStatus.INFEASIBLE,
    "kUnbounded": LPStatus.UNBOUNDED,
    "kIterationLimit": LPStatus.ITERATION_LIMIT,
    "kTimeLimit": LPStatus.ITERATION_LIMIT,
}


def solve(
    lp: LinearProgram,
    *,
    presolve: str = "choose",
    retry_without_presolve: bool = True,
    time_limit: float | None = None,
    solver_tolerance: float = FEASIBILITY_TOLERANCE,
    verify_tolerance: float = FEASIBILITY_TOLERANCE,
) -> LPResult:
    """Solve ``lp`` with HiGHS; see the module docstring for the retry and verification.

    ``presolve``: HiGHS' option (``"choose"``, ``"on"``, ``"off"``); ``solver_tolerance``:
    HiGHS' primal and dual feasibility tolerances; ``verify_tolerance``: the certificate
    an optimum must pass (:mod:`solvers.verify`).
    """
    data = float_data(lp)
    if data.n == 0:
        return no_variable_result(data, "highs", verify_tolerance)
    h, model_status = _run(data, presolve, time_limit, solver_tolerance)
    name = model_status.name
    note = ""
    if name in ("kInfeasible", "kUnboundedOrInfeasible") and retry_without_presolve and presolve != "off":
        note = f"HiGHS with presolve reported {name}; re-solved with presolve off. "
        h, model_status = _run(data, "off", time_limit, solver_tolerance)
        name = model_status.name
    status = _STATUS.get(name, LPStatus.NUMERICAL_ERROR)
    message = note + f"HiGHS model status {name}"
    if status != LPStatus.OPTIMAL:
        return LPResult(status, None, None, None, None, "highs", message)
    sol = h.getSolution()
    x = np.asarray(sol.col_value, dtype=np.float64)
    row_dual = np.asarray(sol.row_dual, dtype=np.float64)
    m_eq = data.b_eq.shape[0]
    return verified_result(data, status, x, row_dual[:m_eq], row_dual[m_eq:], "highs", message, verify_tolerance)
