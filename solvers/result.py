"""Turn a float backend's claimed optimum into an honest :class:`LPResult`."""
from __future__ import annotations

import numpy as np

from solvers.data import FloatData
from solvers.problem import LPResult, LPStatus
from solvers.verify import check_float


def verified_result(
    data: FloatData,
    status: LPStatus,
    x: np.ndarray,  # [n]
    y_eq: np.ndarray,  # [m_eq]
    y_ub: np.ndarray,  # [m_ub]
    backend: str,
    message: str,
    tolerance: float,
) -> LPResult:
    """Check the primal-dual pair (:func:`solvers.verify.check_float`); a claimed optimum
    that fails becomes ``NUMERICAL_ERROR`` (its ``x`` and duals are kept for inspection)."""
    check = check_float(data, x, y_eq, y_ub, tolerance)
    summary = (f"certificate: primal violation {check.primal_violation:.2e}, dual violation "
               f"{check.dual_violation:.2e}, gap {check.gap:.2e}")
    if status == LPStatus.OPTIMAL and not check.passes(tolerance):
        status = LPStatus.NUMERICAL_ERROR
        summary = f"optimum failed verification at tolerance {tolerance:g}: " + summary
    return LPResult(status, check.objective, x, y_eq, y_ub, backend, f"{message}; {summary}".lstrip("; "))


def no_variable_result(data: FloatData, backend: str, tolerance: float) -> LPResult:
    """An LP with no variables: optimal with objective 0 (zero duals) if ``0 = b_eq`` and
    ``0 <= b_ub`` hold to ``tolerance``, else infeasible. Solvers disagree on this corner
    case, so every float backend answers it here."""
    y_eq, y_ub = np.zeros(data.b_eq.shape[0]), np.zeros(data.b_ub.shape[0])
    if np.abs(data.b_eq).max(initial=0.0) > tolerance or (-data.b_ub).max(initial=0.0) > tolerance:
        return LPResult(LPStatus.INFEASIBLE, None, None, None, None, backend, "no variables; 0 = b_eq or 0 <= b_ub fails")
    return verified_result(data, LPStatus.OPTIMAL, np.zeros(0), y_eq, y_ub, backend, "no variables", tolerance)
