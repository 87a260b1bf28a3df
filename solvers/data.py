"""Validation of a :class:`~solvers.problem.LinearProgram` and its float64 form.

Every float backend reads the problem through :func:`float_data`, so shapes, NaN/inf and
the sense are checked once, with errors that say which input is wrong.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from solvers.errors import InvalidProblemError
from solvers.problem import LinearProgram

SENSES = ("max", "min")


@dataclass(frozen=True)
class FloatData:
    """The problem in float64: CSR matrices (possibly with zero rows) and dense vectors."""

    c: np.ndarray  # [n]
    A_eq: sp.csr_matrix  # [m_eq, n]
    b_eq: np.ndarray  # [m_eq]
    A_ub: sp.csr_matrix  # [m_ub, n]
    b_ub: np.ndarray  # [m_ub]
    lower: np.ndarray  # [n], may hold -inf
    upper: np.ndarray  # [n], may hold +inf
    maximize: bool

    @property
    def n(self) -> int:
        return self.c.shape[0]


def _vector(name: str, value, length: int | None, allow_inf: str = "") -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidProblemError(f"{name} must be numeric: {exc}") from exc
    if arr.ndim != 1:
        raise InvalidProblemError(f"{name} must be 1-D, got shape {arr.shape}")
    if length is not None and arr.shape[0] != length:
        raise InvalidProblemError(f"{name} has length {arr.shape[0]}, expected {length}")
    if np.isnan(arr).any():
        raise InvalidProblemError(f"{name} contains NaN")
    if allow_inf != "-" and np.isneginf(arr).any():
        raise InvalidProblemError(f"{name} contains -inf")
    if allow_inf != "+" and np.isposinf(arr).any():
        raise InvalidProblemError(f"{name} contains +inf")
    return arr


def _matrix(name: str, value, n: int) -> sp.csr_matrix:
    try:
        mat = sp.csr_matrix(value if sp.issparse(value) else np.asarray(value, dtype=np.float64), dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidProblemError(f"{name} must be a numeric 2-D matrix: {exc}") from exc
    if mat.ndim != 2 or mat.shape[1] != n:
        raise InvalidProblemError(f"{name} has shape {mat.shape}, expected (rows, {n}) with n = len(c)")
    if not np.isfinite(mat.data).all():
        raise InvalidProblemError(f"{name} contains NaN or inf")
    return mat


def _rows(lp: LinearProgram, kind: str, n: int) -> tuple[sp.csr_matrix, np.ndarray]:
    A, b = getattr(lp, f"A_{kind}"), getattr(lp, f"b_{kind}")
    if (A is None) != (b is None):
        raise InvalidProblemError(f"give both A_{kind} and b_{kind}, or neither")
    if A is None:
        return sp.csr_matrix((0, n)), np.zeros(0)
    mat = _matrix(f"A_{kind}", A, n)
    return mat, _vector(f"b_{kind}", b, mat.shape[0])


def check_sense(lp: LinearProgram) -> bool:
    """Return ``True`` for ``"max"``; raise :class:`InvalidProblemError` for an unknown sense."""
    if lp.sense not in SENSES:
        raise InvalidProblemError(f"sense must be 'max' or 'min', got {lp.sense!r}")
    return lp.sense == "max"


def float_data(lp: LinearProgram) -> FloatData:
    """Validate ``lp`` and return it in float64 (exact Fraction data is rounded)."""
    maximize = check_sense(lp)
    c = _vector("c", lp.c, None)
    n = c.shape[0]
    A_eq, b_eq = _rows(lp, "eq", n)
    A_ub, b_ub = _rows(lp, "ub", n)
    lower = np.zeros(n) if lp.lower is None else _vector("lower", lp.lower, n, allow_inf="-")
    upper = np.full(n, np.inf) if lp.upper is None else _vector("upper", lp.upper, n, allow_inf="+")
    if (lower > upper).any():
        j = int(np.flatnonzero(lower > upper)[0])
        raise InvalidProblemError(f"lower[{j}] = {lower[j]} exceeds upper[{j}] = {upper[j]}")
    return FloatData(c, A_eq, b_eq, A_ub, b_ub, lower, upper, maximize)
