"""Reference LPs run against every backend (tests/solvers/test_solvers_conformance.py).

Each instance has a hand-computed optimum (a Fraction) or a known status. Data that are not
binary floats (Beale's cycling example) are given as Fractions, so the exact backend solves
them exactly and float backends see the rounded values.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction as F

import numpy as np
import pytest
import scipy.sparse as sp

from solvers.problem import LinearProgram, LPStatus
from solvers.registry import BACKENDS


def objects(rows) -> np.ndarray:
    """A numpy object array of Fractions (dense exact data)."""
    arr = np.empty(np.shape(rows), dtype=object)
    arr[...] = [[F(v) for v in r] for r in rows] if np.ndim(rows) == 2 else [F(v) for v in rows]
    return arr


@dataclass(frozen=True)
class Reference:
    name: str
    lp: LinearProgram
    status: LPStatus
    optimum: F | None = None
    unique_duals: bool = False  # nondegenerate optimum: every backend must return the same duals


REFERENCE_LPS = [
    # Hillier-Lieberman's Wyndor example: max 3x + 5y, x <= 4, 2y <= 12, 3x + 2y <= 18 -> 36 at (2, 6).
    Reference("textbook_max", LinearProgram(
        c=np.array([3.0, 5.0]), A_ub=sp.csr_matrix([[1.0, 0.0], [0.0, 2.0], [3.0, 2.0]]),
        b_ub=np.array([4.0, 12.0, 18.0]), sense="max"), LPStatus.OPTIMAL, F(36), unique_duals=True),
    # min 2a + 3b + c, a + b + c = 10, b - a <= 2, c <= 4: c = 4 (cheapest), a = 6 -> 16.
    Reference("min_mixed_upper_bound", LinearProgram(
        c=np.array([2.0, 3.0, 1.0]), A_eq=np.array([[1.0, 1.0, 1.0]]), b_eq=np.array([10.0]),
        A_ub=np.array([[-1.0, 1.0, 0.0]]), b_ub=np.array([2.0]), upper=np.array([np.inf, np.inf, 4.0]),
        sense="min"), LPStatus.OPTIMAL, F(16), unique_duals=True),
    # Transport a = (1/2, 1/2) -> b = (1/4, 3/4), cost 1 off the diagonal: move 1/4 -> 1/4.
    # The four marginal rows are linearly dependent (sum a = sum b).
    Reference("transport_eq", LinearProgram(
        c=np.array([0.0, 1.0, 1.0, 0.0]),
        A_eq=sp.csr_matrix([[1.0, 1, 0, 0], [0, 0, 1, 1], [1, 0, 1, 0], [0, 1, 0, 1]]),
        b_eq=np.array([0.5, 0.5, 0.25, 0.75]), sense="min"), LPStatus.OPTIMAL, F(1, 4)),
    # Degenerate vertex: x <= 1, y <= 1, x + y <= 2 all active at (1, 1); duals not unique.
    Reference("degenerate", LinearProgram(
        c=np.array([1.0, 1.0]), A_ub=np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]),
        b_ub=np.array([1.0, 1.0, 2.0]), sense="max"), LPStatus.OPTIMAL, F(2)),
    # Beale (1955): the textbook simplex cycles on it without an anti-cycling rule; optimum -1/20.
    Reference("beale_cycling", LinearProgram(
        c=objects([F(-3, 4), 150, F(-1, 50), 6]),
        A_ub=objects([[F(1, 4), -60, F(-1, 25), 9], [F(1, 2), -90, F(-1, 50), 3], [0, 0, 1, 0]]),
        b_ub=objects([0, 0, 1]), sense="min"), LPStatus.OPTIMAL, F(-1, 20)),
    # Box bounds and a free variable: max a + 2b - c, a + b + c = 1, a in [-1, 2], b in [0, 1/2],
    # c free -> c = 1 - a - b, objective 2a + 3b - 1 -> 9/2 at a = 2, b = 1/2.
    Reference("bounds_and_free", LinearProgram(
        c=np.array([1.0, 2.0, -1.0]), A_eq=np.array([[1.0, 1.0, 1.0]]), b_eq=np.array([1.0]),
        lower=np.array([-1.0, 0.0, -np.inf]), upper=np.array([2.0, 0.5, np.inf]), sense="max"),
        LPStatus.OPTIMAL, F(9, 2), unique_duals=True),
    Reference("infeasible", LinearProgram(
        c=np.array([1.0, 1.0]), A_ub=np.array([[1.0, 1.0], [-1.0, -1.0]]), b_ub=np.array([1.0, -2.0]),
        sense="max"), LPStatus.INFEASIBLE),
    Reference("unbounded", LinearProgram(
        c=np.array([1.0, 0.0]), A_ub=np.array([[1.0, -1.0]]), b_ub=np.array([1.0]), sense="max"),
        LPStatus.UNBOUNDED),
    # No variables: 0 <= 1 holds, the optimum is the empty sum.
    Reference("no_variables", LinearProgram(
        c=np.zeros(0), A_ub=np.zeros((1, 0)), b_ub=np.array([1.0]), sense="max"), LPStatus.OPTIMAL, F(0)),
]


@pytest.fixture(params=REFERENCE_LPS, ids=[r.name for r in REFERENCE_LPS])
def reference(request) -> Reference:
    return request.param


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def reference_by_name() -> dict[str, Reference]:
    return {r.name: r for r in REFERENCE_LPS}
