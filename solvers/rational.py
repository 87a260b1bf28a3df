"""Rational-arithmetic helpers shared by the exact simplex and :func:`solvers.certify`.

Float data converts to :class:`fractions.Fraction` exactly (``Fraction(0.1)`` is the binary
value of the float ``0.1``, not ``1/10``): the exact backend solves the LP *as given*.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
import math

import numpy as np
import scipy.sparse as sp

from solvers.data import check_sense
from solvers.errors import InvalidProblemError
from solvers.problem import LinearProgram

Row = list[Fraction]


def to_fraction(value, name: str) -> Fraction:
    """``value`` (int, float, numpy scalar, Fraction) as an exact Fraction; NaN/inf rejected."""
    if isinstance(value, Fraction):
        return value
    if isinstance(value, (int, np.integer)):
        return Fraction(int(value))
    try:
        number = float(value)
    except (TypeError, ValueError) as exc:
        raise InvalidProblemError(f"{name} holds a non-numeric entry {value!r}") from exc
    if not math.isfinite(number):
        raise InvalidProblemError(f"{name} holds {number}; only bounds may be infinite")
    return Fraction(number)


@dataclass(frozen=True)
class ExactData:
    """The LP in rationals; an infinite bound is ``None``."""

    c: Row  # [n]
    A_eq: list[Row]  # [m_eq][n]
    b_eq: Row  # [m_eq]
    A_ub: list[Row]  # [m_ub][n]
    b_ub: Row  # [m_ub]
    lower: list[Fraction | None]  # [n]
    upper: list[Fraction | None]  # [n]
    maximize: bool

    @property
    def n(self) -> int:
        return len(self.c)


def _vector(name: str, value, length: int | None) -> Row:
    arr = np.asarray(value, dtype=object)
    if arr.ndim != 1 or (length is not None and arr.shape[0] != length):
        raise InvalidProblemError(f"{name} must be 1-D of length {length}, got shape {arr.shape}")
    return [to_fraction(v, name) for v in arr]


def _matrix(name: str, value, n: int) -> list[Row]:
    arr = value.toarray() if sp.issparse(value) else np.asarray(value, dtype=object)
    if arr.ndim != 2 or arr.shape[1] != n:
        raise InvalidProblemError(f"{name} has shape {arr.shape}, expected (rows, {n}) with n = len(c)")
    return [[to_fraction(v, name) for v in row] for row in arr]


def _bounds(name: str, value, n: int, default: Fraction | None, infinite_sign: int) -> list[Fraction | None]:
    if value is None:
        return [default] * n
    arr = np.asarray(value, dtype=object)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise InvalidProblemError(f"{name} must be 1-D of length {n}, got shape {arr.shape}")
    out: list[Fraction | None] = []
    for v in arr:
        if not isinstance(v, Fraction) and isinstance(v, (float, np.floating)) and math.isinf(v):
            if np.sign(v) != infinite_sign:
                raise InvalidProblemError(f"{name} contains {v}")
            out.append(None)
        else:
            out.append(to_fraction(v, name))
    return out


def exact_data(lp: LinearProgram) -> ExactData:
    """Validate ``lp`` and convert it to rationals (dense)."""
    maximize = check_sense(lp)
    c = _vector("c", lp.c, None)
    n = len(c)
    parts = {}
    for kind in ("eq", "ub"):
        A, b = getattr(lp, f"A_{kind}"), getattr(lp, f"b_{kind}")
        if (A is None) != (b is None):
            raise InvalidProblemError(f"give both A_{kind} and b_{kind}, or neither")
        rows = [] if A is None else _matrix(f"A_{kind}", A, n)
        parts[kind] = (rows, [] if b is None else _vector(f"b_{kind}", b, len(rows)))
    lower = _bounds("lower", lp.lower, n, Fraction(0), -1)
    upper = _bounds("upper", lp.upper, n, None, +1)
    for j, (lo, hi) in enumerate(zip(lower, upper)):
        if lo is not None and hi is not None and lo > hi:
            raise InvalidProblemError(f"lower[{j}] = {lo} exceeds upper[{j}] = {hi}")
    return ExactData(c, *parts["eq"], *parts["ub"], lower, upper, maximize)


def object_array(values: Row) -> np.ndarray:  # [len(values)], dtype object
    """A 1-D numpy object array of Fractions (also when ``values`` is empty)."""
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def dot(row, vec) -> Fraction:
    return sum((a * b for a, b in zip(row, vec) if a), Fraction(0))


def solve_linear_system(rows: list[Row], rhs: Row, guess: Row) -> Row | None:
    """One exact solution of ``rows @ z = rhs`` (``[m][k] @ [k] = [m]``), or ``None`` if the
    system is inconsistent. Gauss-Jordan elimination; each free unknown takes its value from
    ``guess`` (``[k]``), so a determined system ignores ``guess``."""
    k = len(guess)
    aug = [list(r) + [b] for r, b in zip(rows, rhs)]
    pivots: list[int] = []
    r = 0
    for col in range(k):
        p = next((i for i in range(r, len(aug)) if aug[i][col] != 0), None)
        if p is None:
            continue
        aug[r], aug[p] = aug[p], aug[r]
        inv = 1 / aug[r][col]
        aug[r] = [v * inv for v in aug[r]]
        for i in range(len(aug)):
            if i != r and aug[i][col] != 0:
                f = aug[i][col]
                aug[i] = [a - f * b for a, b in zip(aug[i], aug[r])]
        pivots.append(col)
        r += 1
    if any(row[k] != 0 for row in aug[r:]):
        return None
    z = list(guess)
    for i, col in enumerate(pivots):
        z[col] = aug[i][k] - sum((aug[i][j] * z[j] for j in range(k) if j not in pivots and aug[i][j]), Fraction(0))
    return z


@dataclass(frozen=True)
class ExactCheck:
    """Exact optimality certificate of a primal-dual pair."""

    primal_feasible: bool
    dual_feasible: bool
    objective: Fraction  # c @ x
    dual_objective: Fraction | None  # None when the duals are infeasible
    reason: str

    @property
    def certified(self) -> bool:
        return self.primal_feasible and self.dual_feasible and self.objective == self.dual_objective


def exact_check(data: ExactData, x: Row, y_eq: Row, y_ub: Row) -> ExactCheck:
    """Check ``x`` (``[n]``) and duals exactly, in the convention of :mod:`solvers.verify`:
    primal feasibility, dual signs / reduced costs towards finite bounds only, and
    ``c @ x == b_eq @ y_eq + b_ub @ y_ub + bound terms``."""
    problems = []
    for i, (row, b) in enumerate(zip(data.A_eq, data.b_eq)):
        if dot(row, x) != b:
            problems.append(f"equality row {i}: {dot(row, x)} != {b}")
    for i, (row, b) in enumerate(zip(data.A_ub, data.b_ub)):
        if dot(row, x) > b:
            problems.append(f"inequality row {i}: {dot(row, x)} > {b}")
    for j, (v, lo, hi) in enumerate(zip(x, data.lower, data.upper)):
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            problems.append(f"x[{j}] = {v} outside [{lo}, {hi}]")
    primal_ok = not problems
    sign = 1 if data.maximize else -1
    dual_problems = [f"dual_ub[{i}] = {y} has the wrong sign" for i, y in enumerate(y_ub) if sign * y < 0]
    bound_terms = Fraction(0)
    for j in range(data.n):
        d = data.c[j] - sum((row[j] * y for row, y in zip(data.A_eq, y_eq) if row[j]), Fraction(0)) \
            - sum((row[j] * y for row, y in zip(data.A_ub, y_ub) if row[j]), Fraction(0))
        if d == 0:
            continue
        bound = data.upper[j] if sign * d > 0 else data.lower[j]
        if bound is None:
            dual_problems.append(f"reduced cost {d} of x[{j}] pushes towards an infinite bound")
        else:
            bound_terms += d * bound
    dual_ok = not dual_problems
    dual_objective = dot(data.b_eq, y_eq) + dot(data.b_ub, y_ub) + bound_terms if dual_ok else None
    objective = dot(data.c, x)
    if primal_ok and dual_ok and objective != dual_objective:
        problems.append(f"duality gap {objective - dual_objective}")
    return ExactCheck(primal_ok, dual_ok, objective, dual_objective, "; ".join(problems + dual_problems))
