"""Backend ``"scipy"``: :func:`scipy.optimize.linprog` (``method="highs"`` by default).

linprog always minimises, so a ``max`` problem is passed as ``min -c @ x``. Its marginals
are the sensitivities ``d(min objective) / d(b)``; for ``min`` these are the duals of the
:class:`~solvers.problem.LPResult` convention as they stand, for ``max`` they are negated.
Status codes are linprog's (the numbering :class:`~solvers.problem.LPStatus` copies).
A claimed optimum is verified as in :mod:`solvers.verify`; see :func:`solve` for the
presolve retry.
"""
from __future__ import annotations

import numpy as np

from solvers.capabilities import BackendCapabilities
from solvers.data import float_data
from solvers.problem import LinearProgram, LPResult, LPStatus
from solvers.result import no_variable_result, verified_result
from solvers.tolerances import FEASIBILITY_TOLERANCE

CAPABILITIES = BackendCapabilities(
    name="scipy",
    has_duals=True,
    exact=False,
    supports_sparse=True,
    max_variables=None,
    description="scipy.optimize.linprog (HiGHS inside scipy's own build)",
)


def solve(
    lp: LinearProgram,
    *,
    method: str = "highs",
    presolve: bool = True,
    retry_without_presolve: bool = True,
    solver_tolerance: float = FEASIBILITY_TOLERANCE,
    verify_tolerance: float = FEASIBILITY_TOLERANCE,
) -> LPResult:
    """Solve ``lp`` with ``scipy.optimize.linprog(method=method)``.

    ``presolve`` and ``solver_tolerance`` (primal and dual feasibility tolerance) are passed
    to linprog's HiGHS options. As in :mod:`solvers.highs`, an "infeasible" verdict of
    presolve is re-examined without presolve (``retry_without_presolve``): presolve judges
    rows that disagree by a rounding error infeasible although the solver's tolerance accepts
    a point; the optimum found then is returned only if it passes the certificate.
    """
    from scipy.optimize import linprog

    data = float_data(lp)
    if data.n == 0:
        return no_variable_result(data, "scipy", verify_tolerance)
    sign = -1.0 if data.maximize else 1.0
    bounds = np.column_stack([data.lower, data.upper])  # linprog reads +-inf as no bound
    has_eq, has_ub = data.b_eq.size > 0, data.b_ub.size > 0

    def run(with_presolve: bool):
        return linprog(
            sign * data.c,
            A_ub=data.A_ub if has_ub else None,
            b_ub=data.b_ub if has_ub else None,
            A_eq=data.A_eq if has_eq else None,
            b_eq=data.b_eq if has_eq else None,
            bounds=bounds,
            method=method,
            options={"presolve": with_presolve, "primal_feasibility_tolerance": solver_tolerance,
                     "dual_feasibility_tolerance": solver_tolerance},
        )

    res = run(presolve)
    note = ""
    if res.status == LPStatus.INFEASIBLE and presolve and retry_without_presolve:
        note = "linprog with presolve reported infeasible; re-solved with presolve off. "
        res = run(False)
    status = LPStatus(res.status) if res.status in iter(LPStatus) else LPStatus.NUMERICAL_ERROR
    message = note + f"linprog status {res.status}: {res.message}"
    if status != LPStatus.OPTIMAL:
        return LPResult(status, None, None, None, None, "scipy", message)
    y_eq = sign * res.eqlin.marginals if has_eq else np.zeros(0)
    y_ub = sign * res.ineqlin.marginals if has_ub else np.zeros(0)
    return verified_result(data, status, np.asarray(res.x, dtype=np.float64), np.asarray(y_eq, dtype=np.float64),
                           np.asarray(y_ub, dtype=np.float64), "scipy", message, verify_tolerance)
