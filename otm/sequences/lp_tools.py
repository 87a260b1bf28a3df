"""LP plumbing for the sequence-level optima: rows collected by label, a
:class:`solvers.LinearProgram` in exact or float data, a timed solve through
:func:`solvers.solve`, and an exact certificate (:func:`solvers.certify`) of a float optimum.

Every LP here is ``max c @ x  s.t.  A_eq x = b_eq,  A_ub x <= b_ub,  x >= 0``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import scipy.sparse as sp

from solvers import LinearProgram, LPStatus, backend_capabilities, certify, solve

from ..errors import SolverError


@dataclass(frozen=True, eq=False)
class SequenceLPResult:
    """The optimum of one sequence-level LP.

    Attributes:
        value: the optimal objective: a Fraction when ``exact`` (exact backend, or a float
            backend's answer certified exactly), else a float.
        exact: the value is an exact rational, proved optimal by an exact primal-dual pair.
        backend: the :func:`solvers.solve` backend used.
        num_variables, num_equalities, num_inequalities: the LP's size.
        seconds: wall time of the solve (and of the certification, if any).
        x: ``[n]`` the optimal point (Fractions when exact).
        labels: what each variable is (``labels[j]`` for ``x[j]``).
        lp: the :class:`solvers.LinearProgram` solved.
        note: how the value was obtained (backend status, certification outcome).
        verified: the value passed a certificate: exact, or the float backend's own check
            (:mod:`solvers.verify`). ``False`` only for a float optimum that failed that check
            on a badly scaled instance (probabilities spanning ~20 orders of magnitude); the
            value is then the solver's, within its tolerance, and ``note`` says by how much.
    """

    value: object
    exact: bool
    backend: str
    num_variables: int
    num_equalities: int
    num_inequalities: int
    seconds: float
    x: np.ndarray
    labels: list
    lp: LinearProgram
    note: str = ""
    verified: bool = True

    def plan(self) -> dict:
        """``{label: value}`` for the variables with a positive value."""
        return {label: v for label, v in zip(self.labels, self.x) if v > 0}


class LPRows:
    """Collects variables by label and sparse rows, then assembles the LP (dense object
    matrices for exact data, as the rational backend reads them; CSR for floats)."""

    def __init__(self, exact: bool):
        self.exact = exact
        self.labels: list = []
        self.index: dict = {}
        self.objective: list = []
        self._rows = {"eq": [], "ub": []}  # (coefficients {col: value}, rhs)

    def variable(self, label, cost) -> int:
        """Add variable ``label`` with objective coefficient ``cost``; returns its column."""
        self.index[label] = len(self.labels)
        self.labels.append(label)
        self.objective.append(cost)
        return self.index[label]

    def add(self, kind: str, coefficients: dict, rhs) -> None:
        """Add ``sum_j coefficients[j] x_j (= or <=) rhs`` (``kind`` is ``"eq"`` or ``"ub"``),
        divided by its largest coefficient (exact for Fractions): probabilities of long
        sequences are tiny, and an unscaled row would look active to the active-set guess of
        :func:`solvers.certify` whatever its slack."""
        scale = max((abs(v) for v in coefficients.values()), default=0)
        if scale:
            coefficients = {c: v / scale for c, v in coefficients.items()}
            rhs = rhs / scale
        self._rows[kind].append((coefficients, rhs))

    def _matrix(self, kind: str):
        rows = self._rows[kind]
        if not rows:
            return None, None
        n = len(self.labels)
        if self.exact:
            mat = np.empty((len(rows), n), dtype=object)
            mat[...] = Fraction(0)
            for r, (coefficients, _) in enumerate(rows):
                for c, v in coefficients.items():
                    mat[r, c] += Fraction(v)
            return mat, np.array([Fraction(rhs) for _, rhs in rows], dtype=object)
        entries = [(r, c, float(v)) for r, (coefficients, _) in enumerate(rows) for c, v in coefficients.items()]
        rr, cc, vv = zip(*entries) if entries else ((), (), ())
        mat = sp.csr_matrix((np.asarray(vv, dtype=np.float64), (rr, cc)), shape=(len(rows), n))
        return mat, np.array([float(rhs) for _, rhs in rows])

    def build(self) -> LinearProgram:
        A_eq, b_eq = self._matrix("eq")
        A_ub, b_ub = self._matrix("ub")
        if self.exact:
            c = np.array([Fraction(v) for v in self.objective], dtype=object)
        else:
            c = np.array([float(v) for v in self.objective])
        return LinearProgram(c=c, A_eq=A_eq, b_eq=b_eq, A_ub=A_ub, b_ub=b_ub, sense="max")


def solve_rows(rows: LPRows, backend: str = "highs", certified: bool | None = None) -> SequenceLPResult:
    """Solve the LP of ``rows`` with :func:`solvers.solve`.

    Exactness: the ``"exact"`` backend returns an exact optimum. For a float backend,
    ``certified=True`` re-derives the float optimum in rationals and checks it exactly
    (:func:`solvers.certify`), raising :class:`SolverError` if that fails; ``None`` (the
    default) tries when the data is exact and otherwise keeps the float value
    (``exact=False``, the reason in ``note``); ``False`` never tries. Certification can fail
    on badly scaled instances (path probabilities spanning many orders of magnitude, where a
    float optimum is optimal only within the solver's tolerance); the exact backend then
    remains. A float optimum that fails the backend's own check is returned with
    ``verified=False``; any other failure raises :class:`SolverError` (these LPs are always
    feasible and bounded).
    """
    lp = rows.build()
    start = time.perf_counter()
    result = solve(lp, backend=backend)
    unverified = result.status == LPStatus.NUMERICAL_ERROR and result.objective is not None
    if not result.success and not unverified:
        raise SolverError(f"backend {backend!r} returned {result.status.name} on a sequence LP, which is "
                          f"always feasible and bounded: {result.message}")
    value, x, exact, note = result.objective, result.x, backend_capabilities(backend).exact, result.message
    if not exact and (rows.exact if certified is None else certified):
        certificate = certify(lp, result)
        if certificate.certified:
            value, x, exact, note = certificate.objective, certificate.x, True, note + "; certified exactly"
            unverified = False
        elif certified:
            raise SolverError(f"the {backend} optimum could not be certified exactly: {certificate.reason}")
        else:
            note += f"; not certified ({certificate.reason[:200]}): the value is the float optimum"
    seconds = time.perf_counter() - start
    m_eq = 0 if lp.b_eq is None else len(lp.b_eq)
    m_ub = 0 if lp.b_ub is None else len(lp.b_ub)
    return SequenceLPResult(value, exact, backend, lp.num_variables, m_eq, m_ub, seconds, x, rows.labels, lp, note,
                            not unverified)
