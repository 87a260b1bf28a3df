"""Shared plumbing of the LP formulations: LP assembly and LP certificates (the checks of
the instance, shared with the max flow, are in :mod:`otm.formulations._instance`).

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

from solvers.data import float_data
from solvers.problem import LinearProgram, LPResult
from solvers.rational import exact_check, exact_data
from solvers.registry import solve
from solvers.sparse import compressed_order
from solvers.verify import check_float

from ..draft_laws import DraftLaw
from ..errors import SolverError
from ..solution import OTMSolution
from ..tolerances import FEASIBILITY_TOLERANCE
from ._instance import law_probs
from .max_flow import solve_max_flow


def zero(exact: bool):
    return Fraction(0) if exact else 0.0


def csr_from_entries(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, shape: tuple[int, int]) -> sp.csr_matrix:
    """The CSR matrix with ``vals[i]`` at ``(rows[i], cols[i])``: the matrix of
    ``scipy.sparse.csr_matrix((vals, (rows, cols)), shape)``, column indices ascending in each
    row, built from one sort of the entries (:func:`solvers.sparse.compressed_order`) instead
    of scipy's COO conversion. Entries that share a position (which scipy sums) or lie
    outside ``shape`` go through scipy."""
    inside = not rows.size or (0 <= rows.min() and rows.max() < shape[0] and 0 <= cols.min() and cols.max() < shape[1])
    compressed = compressed_order(rows, cols, shape[0]) if inside else None
    if compressed is None:
        return sp.csr_matrix((vals, (rows, cols)), shape=shape)
    indptr, order = compressed
    index = np.int32 if max(*shape, rows.size) < 2**31 - 1 else np.int64  # scipy's choice
    return sp.csr_matrix((vals[order], cols[order].astype(index), indptr.astype(index)), shape=shape)


def _python(values) -> list:
    """``values`` as a list of Python numbers (a Fraction of a numpy integer does not hash)."""
    return values.tolist() if isinstance(values, np.ndarray) else values


class LPBuilder:
    """Collects sparse constraint rows and assembles a :class:`LinearProgram`.

    Exact problems get dense object matrices (what the rational backend reads, see
    :class:`solvers.problem.LinearProgram`); float problems get CSR matrices.
    Rows are kept as blocks ``(rows, cols, vals, rhs)`` in the order they were added: the
    rows of successive :meth:`add` calls share a block of lists, each :meth:`add_rows` call
    is a block of arrays; row numbers count all rows of the kind.
    """

    def __init__(self, num_variables: int, exact: bool):
        self.n = num_variables
        self.exact = exact
        self._blocks = {"eq": [], "ub": []}
        self._count = {"eq": 0, "ub": 0}

    def add(self, kind: str, cols, vals, rhs) -> None:
        """Add the row ``sum vals * x[cols] (= or <=) rhs``."""
        blocks = self._blocks[kind]
        if not blocks or not isinstance(blocks[-1][3], list):
            blocks.append(([], [], [], []))
        rows, cs, vs, b = blocks[-1]
        rows.extend([self._count[kind]] * len(cols))
        cs.extend(int(c) for c in cols)
        vs.extend(vals)
        b.append(rhs)
        self._count[kind] += 1

    def add_rows(self, kind: str, rows, cols, vals, rhs) -> None:
        """Add ``len(rhs)`` rows at once (no per-row Python): entry ``i`` is the term
        ``vals[i] * x[cols[i]]`` of the new row ``rows[i]`` (counted from 0 among the added
        rows), whose bound is ``rhs[rows[i]]``; the same rows as :meth:`add` called once per row."""
        rhs = np.asarray(rhs)
        self._blocks[kind].append((np.asarray(rows, dtype=np.int64) + self._count[kind],
                                   np.asarray(cols, dtype=np.int64), np.asarray(vals), rhs))
        self._count[kind] += len(rhs)

    def _matrix(self, kind: str):
        blocks = self._blocks[kind]
        if not self._count[kind]:
            return None, None
        if self.exact:
            mat = np.empty((self._count[kind], self.n), dtype=object)
            mat[...] = Fraction(0)
            for rows, cols, vals, _ in blocks:
                for r, c, v in zip(rows, cols, _python(vals)):
                    mat[r, c] += Fraction(v)
            return mat, np.array([Fraction(v) for *_, rhs in blocks for v in _python(rhs)], dtype=object)
        rows, cols, vals, rhs = (np.concatenate([np.asarray(block[i], dtype=dtype) for block in blocks])
                                 for i, dtype in enumerate((np.int64, np.int64, np.float64, np.float64)))
        return csr_from_entries(rows, cols, vals, (self._count[kind], self.n)), rhs

    def build(self, c) -> LinearProgram:
        A_eq, b_eq = self._matrix("eq")
        A_ub, b_ub = self._matrix("ub")
        c = np.array([Fraction(v) for v in c], dtype=object) if self.exact else np.asarray(c, dtype=np.float64)
        return LinearProgram(c=c, A_eq=A_eq, b_eq=b_eq, A_ub=A_ub, b_ub=b_ub, sense="max")


def solve_lp(lp: LinearProgram, backend: str) -> LPResult:
    """Solve with :func:`solvers.solve` (imported from its module, not the package); an OTM LP always has an optimum, so anything
    else raises :class:`SolverError`."""
    result = solve(lp, backend=backend)
    if not result.success:
        raise SolverError(
            f"backend {backend!r} returned {result.status.name} on an OTM LP, which is always "
            f"feasible and bounded: {result.message}"
        )
    return result


def verify_lp_certificate(
    lp: LinearProgram, x, dual_eq, dual_ub, tolerance: float = FEASIBILITY_TOLERANCE
) -> list[str]:
    """Check primal feasibility, dual feasibility and a zero duality gap of
    ``(x, dual_eq, dual_ub)`` for ``lp`` (see the module docstring).

    Returns the violations found (empty when the triple proves ``x`` optimal). Exact
    (Fraction) data is checked exactly (:func:`solvers.rational.exact_check`); float data
    with :func:`solvers.verify.check_float`
    at ``tolerance`` (scaled as documented there).
    """
    m_eq = 0 if lp.b_eq is None else len(lp.b_eq)
    m_ub = 0 if lp.b_ub is None else len(lp.b_ub)
    if (m_eq and dual_eq is None) or (m_ub and dual_ub is None):
        return ["no duals: the backend returned none, so optimality is not certified"]
    y = np.asarray(dual_eq) if m_eq else np.zeros(0)
    z = np.asarray(dual_ub) if m_ub else np.zeros(0)
    if np.asarray(lp.c).dtype == object:
        check = exact_check(exact_data(lp), list(x), list(y), list(z))
        return [] if check.certified else [check.reason or "not certified"]
    check = check_float(float_data(lp), np.asarray(x, dtype=np.float64),
                        y.astype(np.float64), z.astype(np.float64), tolerance)
    problems = []
    if check.primal_violation > tolerance:
        problems.append(f"primal violation {check.primal_violation:.3g}")
    if check.dual_violation > tolerance:
        problems.append(f"dual violation {check.dual_violation:.3g}")
    if check.gap > tolerance:
        problems.append(f"duality gap {check.gap:.3g} (primal {check.objective}, dual {check.dual_objective})")
    return problems


def lp_certificate(lp: LinearProgram, result: LPResult) -> dict:
    """The duals of an LP solve, checked (:func:`verify_lp_certificate`; a failing check
    raises :class:`SolverError`): ``dual_eq``, ``dual_ub``, both objectives and their gap."""
    y = result.dual_eq
    z = result.dual_ub
    problems = verify_lp_certificate(lp, result.x, y, z)
    if problems:
        raise SolverError(f"the {result.backend} solution fails its LP certificate: {'; '.join(problems)}")
    primal = np.asarray(lp.c).dot(result.x)
    dual = (lp.b_eq.dot(y) if lp.b_eq is not None else 0) + (lp.b_ub.dot(z) if lp.b_ub is not None else 0)
    if not isinstance(primal, Fraction):
        primal, dual = float(primal), float(dual)
    return {
        "dual_eq": y,
        "dual_ub": z,
        "primal_objective": primal,
        "dual_objective": dual,
        "gap": dual - primal,
    }


def feasible_accepted_value(p, law: DraftLaw, accepted: dict, exact: bool):
    """A certified lower bound on ``alpha*`` from an accepted plan ``{(t, y): mass}``: the
    plan is scaled down row by row to ``sum_y <= Q(t)``, then column by column to
    ``sum_t <= p(y)``, which makes it a feasible flow of the max-flow network (docs/theory.md),
    and its total is returned. For an exact plan that is already feasible it is the plan's value."""
    if not accepted:
        return Fraction(0) if exact else 0.0
    keys = np.array(list(accepted), dtype=np.int64).reshape(-1, 2)
    mass = np.array(list(accepted.values()), dtype=object if exact else np.float64)
    if not exact:
        mass = np.maximum(mass, 0.0)
    Q = law_probs(law, exact)
    for axis, limit in ((0, Q), (1, p)):
        totals = np.zeros(len(limit), dtype=mass.dtype) if not exact else np.array([Fraction(0)] * len(limit), dtype=object)
        np.add.at(totals, keys[:, axis], mass)
        over = totals > limit
        if over.any():
            scale = np.ones(len(limit), dtype=mass.dtype) if not exact else np.array([Fraction(1)] * len(limit), dtype=object)
            scale[over] = limit[over] / totals[over]
            mass = mass * scale[keys[:, axis]]
    return mass.sum()


def lp_solution(p, law: DraftLaw, method: str, lp: LinearProgram, result: LPResult, accepted: dict,
                exact: bool, details: dict) -> OTMSolution:
    """The :class:`OTMSolution` of an LP formulation: its value (the primal objective), its
    checked duals, and a verified gap that does not trust the solver. The optimum lies in
    ``[lower, cut_value]``: ``lower`` is the value of the plan made exactly feasible
    (:func:`feasible_accepted_value`), ``cut_value`` the min cut of the same law
    (:func:`otm.formulations.max_flow.solve_max_flow`) evaluated on the instance; so
    ``|value - alpha*| <= verified_gap = max(cut_value - value, value - lower)``."""
    duals = lp_certificate(lp, result)
    cut = solve_max_flow(p, law)
    lower = feasible_accepted_value(p, law, accepted, exact)
    value = duals["primal_objective"]
    if exact:
        gap = max(cut.cut_value - value, value - lower)
    else:
        gap = max(float(cut.cut_value) - float(value), float(value) - float(lower), 0.0)
    return OTMSolution(value=value, method=method, exact=exact, cut=cut.cut, cut_value=cut.cut_value,
                       all_in=cut.all_in, verified_gap=gap, plan=accepted, duals=duals,
                       details=dict(details, feasible_plan_value=lower, lp=lp, x=result.x))
