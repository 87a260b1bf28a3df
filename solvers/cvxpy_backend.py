"""Backend ``"cvxpy"``: the LP stated as a cvxpy problem, solved by an installed conic
solver (default Clarabel, an interior-point method independent of HiGHS, with tightened
tolerances so that its answer passes the float certificate).

cvxpy reports the multiplier of ``A x <= b`` as ``>= 0`` in both senses; for ``max`` its
``dual_value``s (equalities too) are the duals of the :class:`~solvers.problem.LPResult`
convention as they stand, for ``min`` they are negated (checked by the conformance tests).
"""
from __future__ import annotations

import warnings

import numpy as np

from solvers.capabilities import BackendCapabilities
from solvers.data import float_data
from solvers.errors import BackendUnavailableError
from solvers.problem import LinearProgram, LPResult, LPStatus
from solvers.result import no_variable_result, verified_result
from solvers.tolerances import FEASIBILITY_TOLERANCE

CAPABILITIES = BackendCapabilities(
    name="cvxpy",
    has_duals=True,
    exact=False,
    supports_sparse=True,
    max_variables=200_000,
    description="cvxpy modelling layer, Clarabel interior point by default (independent of HiGHS)",
)

#: Clarabel's stopping tolerances (its defaults are 1e-8): tight enough that the iterate
#: passes the float certificate at FEASIBILITY_TOLERANCE.
_CLARABEL_OPTIONS = {"tol_gap_abs": 1e-12, "tol_gap_rel": 1e-12, "tol_feas": 1e-12, "tol_ktratio": 1e-10}

_STATUS = {
    "optimal": LPStatus.OPTIMAL,
    "optimal_inaccurate": LPStatus.OPTIMAL,  # kept only if it passes verification
    "infeasible": LPStatus.INFEASIBLE,
    "unbounded": LPStatus.UNBOUNDED,
    "user_limit": LPStatus.ITERATION_LIMIT,
}


def solve(
    lp: LinearProgram,
    *,
    solver: str = "CLARABEL",
    solver_options: dict | None = None,
    verify_tolerance: float = FEASIBILITY_TOLERANCE,
) -> LPResult:
    """Solve ``lp`` with ``cvxpy`` and ``solver`` (any of ``cvxpy.installed_solvers()``).

    ``solver_options`` are passed to ``Problem.solve``; for Clarabel they default to
    tolerances of 1e-12. ``*_inaccurate`` statuses other than ``optimal_inaccurate`` are
    reported as ``NUMERICAL_ERROR``.
    """
    try:
        import cvxpy as cp
    except ImportError as exc:
        raise BackendUnavailableError(
            f"the 'cvxpy' backend needs cvxpy ({exc}): pip install 'otm-toolkit[cvxpy]', or use backend='highs'"
        ) from None

    data = float_data(lp)
    if data.n == 0:
        return no_variable_result(data, "cvxpy", verify_tolerance)
    x = cp.Variable(data.n)
    eq = data.A_eq @ x == data.b_eq if data.b_eq.size else None
    ub = data.A_ub @ x <= data.b_ub if data.b_ub.size else None
    constraints = [con for con in (eq, ub) if con is not None]
    lo, hi = np.isfinite(data.lower), np.isfinite(data.upper)
    if lo.any():
        constraints.append(x[np.flatnonzero(lo)] >= data.lower[lo])
    if hi.any():
        constraints.append(x[np.flatnonzero(hi)] <= data.upper[hi])
    objective = (cp.Maximize if data.maximize else cp.Minimize)(data.c @ x)
    problem = cp.Problem(objective, constraints)
    options = dict(_CLARABEL_OPTIONS if solver == "CLARABEL" and solver_options is None else solver_options or {})
    try:
        with warnings.catch_warnings():  # "solution may be inaccurate": the status says it
            warnings.simplefilter("ignore", UserWarning)
            problem.solve(solver=solver, **options)
    except cp.error.SolverError as exc:
        return LPResult(LPStatus.NUMERICAL_ERROR, None, None, None, None, "cvxpy", f"cvxpy {solver} failed: {exc}")
    status = _STATUS.get(problem.status, LPStatus.NUMERICAL_ERROR)
    message = f"cvxpy {solver} status {problem.status}"
    if status != LPStatus.OPTIMAL:
        return LPResult(status, None, None, None, None, "cvxpy", message)
    sign = 1.0 if data.maximize else -1.0
    y_eq = sign * np.asarray(eq.dual_value, dtype=np.float64).ravel() if eq is not None else np.zeros(0)
    y_ub = sign * np.asarray(ub.dual_value, dtype=np.float64).ravel() if ub is not None else np.zeros(0)
    return verified_result(data, status, np.asarray(x.value, dtype=np.float64), y_eq, y_ub, "cvxpy", message,
                           verify_tolerance)
