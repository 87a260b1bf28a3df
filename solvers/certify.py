"""Exact certification of a float LP answer (:func:`certify`).

A float solver's ``x`` and duals point at an optimal basis; the optimum itself is a rational
function of the data. :func:`certify` guesses the active set from the floats, re-solves
complementary slackness for it in rationals, and checks the result exactly:

1. *Active set.* A variable within ``tolerance`` (scaled) of a finite bound is fixed there;
   the others are "basic". An inequality row within ``tolerance`` of its right-hand side is
   active; an inactive row gets dual 0.
2. *Primal.* Solve ``A_eq x = b_eq`` and the active rows of ``A_ub x = b_ub`` for the basic
   variables, exactly (free directions of an underdetermined system take the float values,
   rounded to nearby simple fractions).
3. *Dual.* Solve ``c_j = A_eq[:, j] @ y_eq + A_ub[active, j] @ y_ub`` for every basic ``j``
   (same rule for free directions).
4. *Check* exactly (:func:`solvers.rational.exact_check`): primal feasibility, dual signs,
   reduced costs only towards finite bounds, and equal objectives.

A certificate is sound whatever the guess: ``certified`` is ``True`` only if the exact pair
passes step 4, which proves the exact objective optimal (weak duality). A wrong guess, or a
float answer far from optimal, gives ``certified = False`` with the reason.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from solvers.data import float_data
from solvers.problem import LinearProgram, LPResult, LPStatus
from solvers.rational import Row, exact_check, exact_data, object_array, solve_linear_system

#: Free directions of an underdetermined system take the float value rounded to the
#: nearest fraction with at most this denominator (so 0.1 becomes 1/10, not its binary value).
MAX_GUESS_DENOMINATOR = 10**9

#: Active-set detection: a float value within this (times ``1 +`` its magnitude) of a bound
#: or right-hand side counts as on it. Looser than solvers.tolerances.FEASIBILITY_TOLERANCE because interior-point
#: answers sit ~1e-9 inside the bounds; a wrong guess can only cost certification, never soundness.
ACTIVE_TOLERANCE = 1e-7


@dataclass(frozen=True)
class Certificate:
    """Result of :func:`certify`. ``objective``, ``x``, ``dual_eq``, ``dual_ub`` are exact
    (Fractions; arrays of dtype object) when the equations could be solved, else ``None``."""

    certified: bool
    objective: Fraction | None
    primal_feasible: bool
    dual_feasible: bool
    x: np.ndarray | None  # [n]
    dual_eq: np.ndarray | None  # [m_eq]
    dual_ub: np.ndarray | None  # [m_ub]
    reason: str


def _guess(values) -> Row:
    return [Fraction(float(v)).limit_denominator(MAX_GUESS_DENOMINATOR) for v in values]


def _failed(reason: str) -> Certificate:
    return Certificate(False, None, False, False, None, None, None, reason)


def certify(lp: LinearProgram, result: LPResult, tolerance: float = ACTIVE_TOLERANCE) -> Certificate:
    """Certify ``result`` (an optimum of ``lp`` from any backend) exactly; see module docstring."""
    if result.status != LPStatus.OPTIMAL or result.x is None or result.dual_eq is None or result.dual_ub is None:
        return _failed(f"nothing to certify: status {result.status.name}, primal and duals needed")
    data, fdata = exact_data(lp), float_data(lp)
    x_float = np.asarray(result.x, dtype=np.float64)

    def near(value: float, target: float) -> bool:
        return abs(value - target) <= tolerance * (1.0 + abs(target))

    fixed: dict[int, Fraction] = {}
    for j, v in enumerate(x_float):
        lo, hi = data.lower[j], data.upper[j]
        if lo is not None and near(v, float(lo)):
            fixed[j] = lo
        elif hi is not None and near(v, float(hi)):
            fixed[j] = hi
    basic = [j for j in range(data.n) if j not in fixed]
    activity = fdata.A_ub @ x_float  # [m_ub]
    active = [i for i, b in enumerate(fdata.b_ub) if near(float(activity[i]), float(b))]
    rows_primal = data.A_eq + [data.A_ub[i] for i in active]
    rhs_primal = data.b_eq + [data.b_ub[i] for i in active]
    rhs_reduced = [b - sum((row[j] * v for j, v in fixed.items() if row[j]), Fraction(0))
                   for row, b in zip(rows_primal, rhs_primal)]
    x_basic = solve_linear_system([[row[j] for j in basic] for row in rows_primal], rhs_reduced,
                                  _guess(x_float[basic]))
    if x_basic is None:
        return _failed("the active constraints have no exact solution: wrong active set guess")
    x = [fixed.get(j, Fraction(0)) for j in range(data.n)]
    for j, v in zip(basic, x_basic):
        x[j] = v
    y_float = np.concatenate([np.asarray(result.dual_eq, dtype=np.float64),
                              np.asarray(result.dual_ub, dtype=np.float64)[active]])
    y = solve_linear_system([[row[j] for row in rows_primal] for j in basic], [data.c[j] for j in basic],
                            _guess(y_float))
    if y is None:
        return _failed("no exact duals make every basic variable's reduced cost zero")
    m_eq = len(data.A_eq)
    y_ub = [Fraction(0)] * len(data.A_ub)
    for i, v in zip(active, y[m_eq:]):
        y_ub[i] = v
    check = exact_check(data, x, y[:m_eq], y_ub)
    return Certificate(check.certified, check.objective, check.primal_feasible, check.dual_feasible,
                       object_array(x), object_array(y[:m_eq]), object_array(y_ub),
                       check.reason or "exact primal and dual feasible with equal objectives")
