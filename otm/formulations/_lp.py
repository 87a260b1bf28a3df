"""Shared plumbing of the LP formulations: input checks, LP assembly, LP certificates.

Every LP built here has variables ``x >= 0`` with no upper bound, so an optimality
certificate is just ``(x, dual_eq, dual_ub)`` with (for ``sense="max"``)

    primal:  A_eq x = b_eq,  A_ub x <= b_ub,  x >= 0
    dual:    dual_ub >= 0,   c - A_eq^T dual_eq - A_ub^T dual_ub <= 0   (reduced costs)
    gap:     c @ x == b_eq @ dual_eq + b_ub @ dual_ub

(weak duality makes the last line a proof of optimality). This is the sign convention of
:class:`solvers.problem.LPResult`.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import scipy.sparse as sp

import solvers
from solvers.problem import LinearProgram, LPResult

from ..draft_laws import DraftLaw
from ..distributions import as_distribution
from ..errors import InvalidDistributionError, ShapeMismatchError, SolverError
from ..exact import as_exact_distribution
from ..tolerances import FEASIBILITY_TOLERANCE


def target_for(p, law: DraftLaw) -> tuple[np.ndarray, bool]:
    """Validate the target ``p`` against ``law`` and decide the number type.

    Returns ``(p, exact)``: exact (Fraction object arrays) only when both ``p`` and the
    law's probabilities are exact; otherwise both are used in float64.
    """
    if not isinstance(law, DraftLaw):
        raise TypeError(f"law must be an otm.draft_laws.DraftLaw, got {type(law).__name__}")
    arr = np.asarray(p)
    exact = arr.dtype == object and law.is_exact
    p = as_exact_distribution(arr, "p (target)") if exact else as_distribution(
        arr.astype(np.float64) if arr.dtype == object else arr, "p (target)"
    )
    if p.size != law.vocab_size:
        raise ShapeMismatchError(
            f"p (target) has {p.size} tokens but the draft law is over {law.vocab_size}"
        )
    return p, exact


def law_probs(law: DraftLaw, exact: bool) -> np.ndarray:
    """``[n]`` the law's probabilities as Fractions (exact) or float64."""
    return law.probs if exact else law.probs.astype(np.float64)


def zero(exact: bool):
    return Fraction(0) if exact else 0.0


def distinct_positions(law: DraftLaw) -> tuple[np.ndarray, np.ndarray]:
    """``(tuple_index, token)`` of every distinct token of every tuple (``S(x)`` listed),
    in row-major order of ``law.tuples``."""
    rows, cols = np.nonzero(law.first_occurrence())
    return rows, law.tuples[rows, cols]


class LPBuilder:
    """Collects sparse constraint rows and assembles a :class:`LinearProgram`.

    Exact problems get dense object matrices (what the rational backend reads, see
    :class:`solvers.problem.LinearProgram`); float problems get CSR matrices.
    """

    def __init__(self, num_variables: int, exact: bool):
        self.n = num_variables
        self.exact = exact
        self._rows = {"eq": ([], [], [], []), "ub": ([], [], [], [])}  # rows, cols, vals, rhs

    def add(self, kind: str, cols, vals, rhs) -> None:
        """Add the row ``sum vals * x[cols] (= or <=) rhs``."""
        rows, cs, vs, b = self._rows[kind]
        rows.extend([len(b)] * len(cols))
        cs.extend(int(c) for c in cols)
        vs.extend(vals)
        b.append(rhs)

    def _matrix(self, kind: str):
        rows, cols, vals, rhs = self._rows[kind]
        if not rhs:
            return None, None
        if self.exact:
            mat = np.empty((len(rhs), self.n), dtype=object)
            mat[...] = Fraction(0)
            for r, c, v in zip(rows, cols, vals):
                mat[r, c] += Fraction(v)
            return mat, np.array([Fraction(v) for v in rhs], dtype=object)
        mat = sp.csr_matrix(
            (np.asarray(vals, dtype=np.float64), (rows, cols)), shape=(len(rhs), self.n)
        )
        return mat, np.asarray(rhs, dtype=np.float64)

    def build(self, c) -> LinearProgram:
        A_eq, b_eq = self._matrix("eq")
        A_ub, b_ub = self._matrix("ub")
        c = np.array([Fraction(v) for v in c], dtype=object) if self.exact else np.asarray(c, dtype=np.float64)
        return LinearProgram(c=c, A_eq=A_eq, b_eq=b_eq, A_ub=A_ub, b_ub=b_ub, sense="max")


def solve_lp(lp: LinearProgram, backend: str) -> LPResult:
    """Solve with :func:`solvers.solve`; an OTM LP always has an optimum, so anything
    else raises :class:`SolverError`."""
    result = solvers.solve(lp, backend=backend)
    if not result.success:
        raise SolverError(
            f"backend {backend!r} returned {result.status.name} on an OTM LP, which is always "
            f"feasible and bounded: {result.message}"
        )
    return result


def _dense(mat, n: int):
    if mat is None:
        return None
    return mat.toarray() if sp.issparse(mat) else np.asarray(mat)


def verify_lp_certificate(
    lp: LinearProgram, x, dual_eq, dual_ub, tolerance: float = FEASIBILITY_TOLERANCE
) -> list[str]:
    """Check primal feasibility, dual feasibility and a zero duality gap for the LP
    ``max c @ x`` with ``x >= 0`` (see the module docstring).

    Returns the list of violations (empty when ``(x, dual_eq, dual_ub)`` proves that
    ``x`` is optimal). Exact data is checked with ``tolerance = 0``; float data with
    ``tolerance * (1 + largest dual magnitude)``.
    """
    exact = np.asarray(lp.c).dtype == object
    tol = 0 if exact else tolerance
    A_eq, A_ub = _dense(lp.A_eq, lp.num_variables), _dense(lp.A_ub, lp.num_variables)
    x = np.asarray(x)
    m_eq = 0 if A_eq is None else A_eq.shape[0]
    m_ub = 0 if A_ub is None else A_ub.shape[0]
    y = np.asarray(dual_eq if dual_eq is not None else np.zeros(m_eq))
    z = np.asarray(dual_ub if dual_ub is not None else np.zeros(m_ub))
    if not exact:
        scale = 1.0 + max(np.abs(y).max(initial=0.0), np.abs(z).max(initial=0.0))
        tol = tolerance * scale
    problems = []
    if m_eq:
        res = np.abs(A_eq.dot(x) - lp.b_eq).max()
        if res > tol:
            problems.append(f"primal equality residual {float(res):.3g}")
    if m_ub:
        res = (A_ub.dot(x) - lp.b_ub).max()
        if res > tol:
            problems.append(f"primal inequality violated by {float(res):.3g}")
    if x.size and x.min() < -tol:
        problems.append(f"negative primal variable {float(x.min()):.3g}")
    if m_ub and z.min() < -tol:
        problems.append(f"negative inequality dual {float(z.min()):.3g}")
    reduced = np.asarray(lp.c) - (A_eq.T.dot(y) if m_eq else 0) - (A_ub.T.dot(z) if m_ub else 0)
    if np.size(reduced) and np.max(reduced) > tol:
        problems.append(f"dual infeasible: reduced cost {float(np.max(reduced)):.3g} > 0")
    primal = np.asarray(lp.c).dot(x)
    dual = (lp.b_eq.dot(y) if m_eq else 0) + (lp.b_ub.dot(z) if m_ub else 0)
    if abs(primal - dual) > tol:
        problems.append(f"duality gap {float(dual - primal):.3g} (primal {float(primal)}, dual {float(dual)})")
    return problems


def lp_certificate(lp: LinearProgram, result: LPResult) -> dict:
    """The certificate dict stored in :attr:`OTMSolution.certificate` for an LP solve:
    the duals, both objectives, the gap, and the verified violations list (empty)."""
    y = result.dual_eq
    z = result.dual_ub
    problems = verify_lp_certificate(lp, result.x, y, z)
    if problems:
        raise SolverError(f"the {result.backend} solution fails its LP certificate: {'; '.join(problems)}")
    primal = np.asarray(lp.c).dot(result.x)
    dual = (lp.b_eq.dot(y) if lp.b_eq is not None else 0) + (lp.b_ub.dot(z) if lp.b_ub is not None else 0)
    return {
        "dual_eq": y,
        "dual_ub": z,
        "primal_objective": primal,
        "dual_objective": dual,
        "gap": dual - primal,
        "lp": lp,
        "x": result.x,
    }
