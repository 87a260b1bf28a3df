"""The per-token bound, and the optimum of SpecHub's hub law and of greedy drafts.

Any lossless rule accepts token ``y`` with probability at most ``min(p(y), M(y))``,
``M(y) = P(y in S(X))`` (``Y = y`` has probability ``p(y)``, and ``y`` is accepted only
when it is among the drafts), so

    alpha*(p, Q) <= sum_y min(p(y), M(y))                           for every joint law Q.

For SpecHub's hub law (Sun et al. 2024, Thm 2) and for greedy drafts (docs/theory.md) a
rule attains it (:mod:`otm.rules.spechub`, :mod:`otm.rules.greedy`), so there it *is* the
optimum, in O(V) from the membership probabilities (no tuple enumeration, any V):

    hub (k = 2):  M(a) = 1, M(x) = q(x) / (1 - q(a)),          a = argmax q;
    greedy:       M = 1 on F, M(x) = q(x) / (1 - q(F)) elsewhere,  F = the top k-1 of q.
"""
from __future__ import annotations

import numpy as np

from ..draft_laws import DraftLaw, check_scheme_draft_count, greedy_membership, hub_membership, valid_membership
from ..errors import NotApplicableError
from ..solution import OTMSolution

#: Draft laws for which the per-token bound is the optimum.
ATTAINED_FOR = ("hub", "greedy")


def per_token_bound(p, law: DraftLaw):
    """``sum_y min(p(y), P(y in S(X)))``: an upper bound on ``alpha*(p, Q)`` for any law."""
    return np.minimum(p, law.membership_probs()).sum()


def solve_per_token_bound(p, q, k: int, draft_scheme: str) -> OTMSolution:
    """The optimum for the hub law (``k = 2``) or greedy drafts by the per-token bound.

    >>> float(solve_per_token_bound(np.array([0.1, 0.6, 0.3]), np.array([0.5, 0.3, 0.2]), 2, "hub").value)
    1.0
    """
    if draft_scheme not in ATTAINED_FOR:
        raise NotApplicableError(f"the per-token bound is the optimum only for the {ATTAINED_FOR} laws, not {draft_scheme!r}")
    if draft_scheme == "hub":
        check_scheme_draft_count("hub", k, np.size(q))
        return _optimum(p, hub_membership(q), draft_scheme)
    return _optimum(p, greedy_membership(q, k), draft_scheme)


def per_token_optimum(p, q, k: int, draft_scheme: str) -> OTMSolution:
    """:func:`solve_per_token_bound` of checked inputs: ``p``, ``q`` validated, ``k`` checked
    for ``draft_scheme`` (:func:`otm.draft_laws.check_scheme_draft_count`); nothing checked again."""
    return _optimum(p, valid_membership(draft_scheme, q, k), draft_scheme)


def _optimum(p, membership: np.ndarray, draft_scheme: str) -> OTMSolution:
    exact = membership.dtype == object
    value = min(np.minimum(p, membership).sum(), 1)  # a float sum can round to 1 + 1 ulp
    return OTMSolution(value=value if exact else float(value), method="per_token_bound", exact=exact,
                       verified_gap=0 if exact else 0.0,
                       details={"draft_scheme": draft_scheme, "attained_by": "spechub" if draft_scheme == "hub" else "greedy"})


__all__ = ["ATTAINED_FOR", "per_token_bound", "per_token_optimum", "solve_per_token_bound"]
