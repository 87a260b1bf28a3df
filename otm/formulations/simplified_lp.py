"""SpecHub's simplified OTM LP over the accepted entries only, and the plan reconstruction.

SpecHub (Sun et al. 2024) §3.2, Theorem 1, in our letters (p = target): only the entries
``pi(x, y)`` with ``y in S(x)`` enter the objective, so the LP can keep just those,

    maximise    sum_x sum_{y in S(x)} pi(x, y)
    subject to  sum_{y in S(x)} pi(x, y) <= Q(x)       for every draft tuple x
                sum_{x : y in S(x)} pi(x, y) <= p(y)   for every token y
                pi >= 0,

(``sum_k |S(x)|`` variables instead of ``n_tuples * V``). Theorem 1: its optimum equals
the full LP's. The proof completes any feasible ``pi`` to a transport plan by matching
the leftover masses ``r(x) = Q(x) - sum_y pi(x, y)`` and ``c(y) = p(y) - sum_x pi(x, y)``
(equal totals), e.g. with the product ``r(x) c(y) / sum c`` (the reconstruction after
Thm 1; the paper's text leaves the choice open, the product is ours). Completion only adds
non-negative mass, so the plan accepts at least as much; at an optimum it accepts exactly
as much (a product entry on some ``y in S(x)`` could otherwise be moved into the LP).
"""
from __future__ import annotations

import numpy as np

from ..draft_laws import DraftLaw
from ..solution import OTMSolution
from ..tolerances import FEASIBILITY_TOLERANCE
from ._instance import distinct_positions, law_probs, target_for
from ._lp import LPBuilder, lp_solution, solve_lp, zero
from .max_flow import check_flow_size


def solve_simplified_lp(p, law: DraftLaw, backend: str = "highs") -> OTMSolution:
    """Optimal acceptance by SpecHub's simplified LP (SpecHub, Sun et al. 2024, §3.2, Theorem 1).

    Always feasible (``pi = 0``), and with ``<=`` on both marginals it is immune to the
    float mismatch between ``sum p`` and ``sum Q``.

    Returns:
        :class:`OTMSolution` with ``accepted = {(tuple_index, token): mass}`` (the LP
        variables) and the LP duals and gap in ``certificate``. Complete it to a plan with
        :func:`reconstruct_coupling`.

    >>> from otm.draft_laws import iid_law
    >>> round(float(solve_simplified_lp([0.5, 0.5], iid_law([0.5, 0.5], 2)).acceptance), 9)
    1.0
    """
    check_flow_size(law)  # the max flow certifies the value
    p, exact = target_for(p, law, backend)
    Q = law_probs(law, exact)
    rows, tokens = distinct_positions(law)
    builder = LPBuilder(len(rows), exact)
    for t in range(len(Q)):
        cols = np.flatnonzero(rows == t)
        builder.add("ub", cols, [1] * len(cols), Q[t])
    for y in range(law.vocab_size):
        cols = np.flatnonzero(tokens == y)
        if len(cols):
            builder.add("ub", cols, [1] * len(cols), p[y])
    lp = builder.build([1] * len(rows))
    result = solve_lp(lp, backend)
    values = result.x if exact else np.maximum(result.x, 0.0)
    accepted = {(int(t), int(y)): v for t, y, v in zip(rows, tokens, values) if v > 0}
    return lp_solution(p, law, "simplified_lp", lp, result, accepted, exact, {"backend": result.backend})


def reconstruct_coupling(p, law: DraftLaw, accepted: dict) -> np.ndarray:
    """Complete accepted masses to a full transport plan (SpecHub, after Thm 1).

    ``pi = A + r c^T / sum(c)`` where ``A[t, y]`` holds ``accepted``, ``r = Q - A 1`` and
    ``c = p - A^T 1`` are the leftover masses (clipped at 0 against float noise). The
    result has marginals ``Q`` and ``p`` whenever ``accepted`` is feasible for the
    simplified LP.

    Returns:
        ``[n_tuples, V]`` plan (Fractions when ``p`` and ``law`` are exact).
    """
    p, exact = target_for(p, law)
    Q = law_probs(law, exact)
    plan = np.empty((len(Q), law.vocab_size), dtype=object if exact else np.float64)
    plan[...] = zero(exact)
    for (t, y), mass in accepted.items():
        plan[t, y] += mass
    row_left = Q - plan.sum(axis=1)
    col_left = p - plan.sum(axis=0)
    if not exact:
        row_left, col_left = np.maximum(row_left, 0.0), np.maximum(col_left, 0.0)
    total = col_left.sum()
    if total > 0:
        plan = plan + np.outer(row_left, col_left) / total
    return plan


def is_valid_coupling(pi, p, law: DraftLaw, tolerance: float = FEASIBILITY_TOLERANCE) -> bool:
    """True when ``pi`` (``[n_tuples, V]``) is a transport plan between ``law`` and ``p``:
    non-negative, row sums ``Q(x)``, column sums ``p(y)`` (each to ``tolerance``; exactly
    for Fraction data)."""
    p, exact = target_for(p, law)
    Q = law_probs(law, exact)
    pi = np.asarray(pi)
    if pi.shape != (len(Q), law.vocab_size):
        return False
    tol = 0 if pi.dtype == object else tolerance
    return bool(
        (pi >= -tol).all()
        and (np.abs(pi.sum(axis=1) - Q) <= tol).all()
        and (np.abs(pi.sum(axis=0) - p) <= tol).all()
    )


def coupling_acceptance(pi, law: DraftLaw):
    """``sum_{x, y in S(x)} pi(x, y)``: the membership acceptance of a plan ``[n_tuples, V]``."""
    rows, tokens = distinct_positions(law)
    return np.asarray(pi)[rows, tokens].sum()
