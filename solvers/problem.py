"""The generic linear program and the result every backend returns.

Knows nothing of speculative decoding (docs/theory.md: ``solvers`` is the bottom layer).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp


class LPStatus(enum.IntEnum):
    """Status codes, numbered like ``scipy.optimize.linprog``'s."""

    OPTIMAL = 0
    ITERATION_LIMIT = 1
    INFEASIBLE = 2
    UNBOUNDED = 3
    NUMERICAL_ERROR = 4


@dataclass(frozen=True, eq=False)
class LinearProgram:
    """``optimise c @ x  s.t.  A_eq x = b_eq,  A_ub x <= b_ub,  lower <= x <= upper``.

    ``sense`` is ``"max"`` or ``"min"``. Matrices are scipy sparse (or ``None``); vectors
    are 1-D arrays. Data may be float64, or exact (numpy object arrays of
    :class:`fractions.Fraction`, with the matrices then given as dense object arrays),
    for the rational backend; float backends convert exact data to float.
    ``upper`` entries may be ``inf``.
    """

    c: np.ndarray  # [n]
    A_eq: sp.spmatrix | np.ndarray | None = None  # [m_eq, n]
    b_eq: np.ndarray | None = None  # [m_eq]
    A_ub: sp.spmatrix | np.ndarray | None = None  # [m_ub, n]
    b_ub: np.ndarray | None = None  # [m_ub]
    lower: np.ndarray | None = None  # [n], default 0
    upper: np.ndarray | None = None  # [n], default +inf
    sense: str = "max"
    names: tuple[str, ...] | None = field(default=None, repr=False)

    @property
    def num_variables(self) -> int:
        return int(np.asarray(self.c).shape[0])


@dataclass(frozen=True, eq=False)
class LPResult:
    """What every backend returns.

    ``status`` is an :class:`LPStatus`; ``objective``, ``x`` and the duals are set when it is
    ``OPTIMAL`` (float backends also keep them on ``NUMERICAL_ERROR``, for inspection, when
    a claimed optimum failed verification). The ``"exact"`` backend returns Fractions
    (``x`` and duals as numpy object arrays).

    **Dual sign convention** (every backend, checked by ``tests/solvers``):
    ``dual_eq`` / ``dual_ub`` are the constraint multipliers ``y`` for the problem's own
    sense, with reduced costs ``d = c - A_eq.T @ dual_eq - A_ub.T @ dual_ub``, such that

        objective = b_eq @ dual_eq + b_ub @ dual_ub + sum_j d_j * bound_j

    where ``bound_j`` is ``upper_j`` if ``d_j`` pushes ``x_j`` up (``d_j > 0`` for ``max``,
    ``d_j < 0`` for ``min``) and ``lower_j`` otherwise (the "bound terms"). Dual
    feasibility: ``dual_ub >= 0`` for ``max`` and ``<= 0`` for ``min`` (``dual_eq`` free),
    and no ``d_j != 0`` pushes towards an infinite bound. Hence ``dual_eq[i]`` is
    ``d objective / d b_eq[i]``. ``None`` where the backend has no duals.
    """

    status: LPStatus
    objective: float | None
    x: np.ndarray | None  # [n]
    dual_eq: np.ndarray | None
    dual_ub: np.ndarray | None
    backend: str
    message: str = ""

    @property
    def success(self) -> bool:
        return self.status == LPStatus.OPTIMAL
