"""Float certificate of an LP answer: primal feasibility, dual feasibility, duality gap.

Dual sign convention (the one documented on :class:`~solvers.problem.LPResult`): with
reduced costs ``d = c - A_eq.T @ y_eq - A_ub.T @ y_ub``,

    objective = b_eq @ y_eq + b_ub @ y_ub + sum_j d_j * (upper_j if d_j "pushes up" else lower_j)

For ``max``: ``y_ub >= 0`` and each ``d_j > 0`` needs a finite ``upper_j`` (``d_j < 0`` a
finite ``lower_j``); the right-hand side is then an upper bound on ``c @ x`` for every feasible
``x`` (weak duality), and equality certifies optimality. For ``min`` every sign flips:
``y_ub <= 0``, ``d_j > 0`` uses ``lower_j`` and the bound is a lower bound.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from solvers.data import FloatData


@dataclass(frozen=True)
class FloatCheck:
    """Scaled violations of a primal-dual pair (0 for an exact optimum)."""

    primal_violation: float
    dual_violation: float
    gap: float  # |c @ x - dual objective| / (1 + |c @ x|)
    objective: float  # c @ x
    dual_objective: float

    def passes(self, tolerance: float) -> bool:
        return max(self.primal_violation, self.dual_violation, self.gap) <= tolerance


def primal_violation(data: FloatData, x: np.ndarray) -> float:  # x: [n]
    """Largest violation of equalities, inequalities and bounds, over ``1 + max |b|, |x|``."""
    parts = [0.0]
    if data.b_eq.size:
        parts.append(np.abs(data.A_eq @ x - data.b_eq).max())
    if data.b_ub.size:
        parts.append(np.maximum(data.A_ub @ x - data.b_ub, 0.0).max())
    if x.size:
        parts.append(np.maximum(data.lower - x, 0.0).max())
        parts.append(np.maximum(x - data.upper, 0.0).max())
    scale = 1.0 + max([np.abs(v).max() for v in (data.b_eq, data.b_ub, x) if v.size] or [0.0])
    return float(max(parts) / scale)


def transpose_matvec(A: sp.csr_matrix, y: np.ndarray) -> np.ndarray:  # A: [m, n], y: [m] -> [n]
    """``A.T @ y`` for a CSR ``A``, summed entry by entry in the stored order (what scipy's
    transpose product sums) by one ``bincount``, without building the transpose; float64, and
    ``ValueError`` for a ``y`` of the wrong length, as ``A.T @ y``."""
    y = np.asarray(y)
    if y.shape != (A.shape[0],):
        raise ValueError(f"A.T @ y needs y of shape ({A.shape[0]},), got {y.shape}")
    return np.bincount(A.indices, weights=A.data * np.repeat(y, np.diff(A.indptr)), minlength=A.shape[1]).astype(np.float64, copy=False)


def reduced_costs(data: FloatData, y_eq: np.ndarray, y_ub: np.ndarray) -> np.ndarray:  # [n]
    return data.c - transpose_matvec(data.A_eq, y_eq) - transpose_matvec(data.A_ub, y_ub)


def dual_bound(data: FloatData, y_eq: np.ndarray, y_ub: np.ndarray, tolerance: float) -> tuple[float, float]:
    """``(dual objective, scaled dual violation)`` of multipliers ``y_eq [m_eq]``, ``y_ub [m_ub]``.

    A reduced cost that pushes towards an infinite bound counts as a violation (its
    contribution to the bound is dropped); one within ``tolerance * (1 + max|c|)`` of zero
    contributes nothing.
    """
    sign = 1.0 if data.maximize else -1.0
    scale = 1.0 + (np.abs(data.c).max() if data.n else 0.0)
    d = sign * reduced_costs(data, y_eq, y_ub)  # > 0: pushes towards the upper bound
    tiny = np.abs(d) <= tolerance * scale
    bound = np.where(d > 0, data.upper, data.lower)
    infinite = ~np.isfinite(bound) & ~tiny
    terms = np.where(tiny | infinite, 0.0, d * np.where(np.isfinite(bound), bound, 0.0))
    violation = [0.0]
    if infinite.any():
        violation.append(np.abs(d[infinite]).max())
    if y_ub.size:
        violation.append(np.maximum(-sign * y_ub, 0.0).max())
    value = data.b_eq @ y_eq + data.b_ub @ y_ub + sign * terms.sum()
    return float(value), float(max(violation) / scale)


def check_float(data: FloatData, x: np.ndarray, y_eq: np.ndarray, y_ub: np.ndarray, tolerance: float) -> FloatCheck:
    """Certificate of the pair ``(x, (y_eq, y_ub))`` for ``data`` (see module docstring)."""
    objective = float(data.c @ x)
    dual_objective, dual_violation = dual_bound(data, y_eq, y_ub, tolerance)
    gap = abs(objective - dual_objective) / (1.0 + abs(objective))
    return FloatCheck(primal_violation(data, x), dual_violation, gap, objective, dual_objective)
