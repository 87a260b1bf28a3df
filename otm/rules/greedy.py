"""The optimal verifier for greedy drafts (:func:`otm.draft_laws.greedy_law`).

Drafts: the top ``k-1`` tokens ``F`` of ``q`` are always proposed; the last draft ``z`` is
drawn from ``q_R``, ``q`` restricted to the other tokens ``R`` and renormalised (or is the
next token in the order, surely, when ``q(R) = 0``). So ``P(y in S(X)) = 1`` on ``F`` and
``q_R(y)`` on ``R``.

Rule (derived here, not from a seed): accept ``z`` with ``min(1, p(z) / q_R(z))``; on
rejection draw ``Y`` from

    r = norm(p on F, max(p - q_R, 0) on R).

Its mass before normalisation, ``p(F) + sum_R max(p - q_R, 0) = 1 - sum_R min(p, q_R)``,
is the rejection probability, so ``Y ~ p``. Every ``y in F`` is in ``S(X)``, and ``r`` is 0
at a rejected ``z`` (rejection needs ``p(z) < q_R(z)``), so

    acceptance = p(F) + sum_{y in R} min(p(y), q_R(y)) = sum_y min(p(y), P(y in S(X))),

the per-token bound (docs/theory.md): no rule does better for this law, so the rule is
optimal (it equals the max-flow / min-cut optimum). Every output in ``S(X)`` is a draft
token, so membership = "a draft was accepted". ``k = 1`` is the single-draft rule.
"""
from __future__ import annotations

import numpy as np

from ..distributions import check_draft_count
from ..draft_laws import greedy_law, greedy_membership, greedy_order
from .base import RuleLaw
from .enumeration import (
    accept_probability,
    enumerated_rule_law,
    normalise,
    one_hot,
    positive_part,
    resolve_method,
    support_size,
    validate_one_q,
)

#: ``details["fixed"]`` lists the always-drafted tokens up to this many (else ``None``).
MAX_LISTED_FIXED = 10_000


def exact_law(p, q, k: int, *, method: str = "auto") -> RuleLaw:
    """Exact law of the greedy-draft verifier (``k <= V``).

    ``details``: ``fixed`` (the ``k-1`` always-proposed tokens), ``draft_accepted``; by
    enumeration also ``accepted_per_token`` and ``coupling``.

    >>> round(float(exact_law([0.5, 0.3, 0.2], [0.2, 0.3, 0.5], 2).acceptance), 12)
    0.9
    """
    k = check_draft_count(k)
    p, q = validate_one_q(p, q, "rule 'greedy' takes one draft distribution q ([V] vector)")
    membership = greedy_membership(q, k)  # refuses k > V
    n_tuples = max(support_size(q) - (k - 1), 1)
    method = resolve_method(method, n_tuples, True, "greedy", len(p))
    fixed = [int(x) for x in greedy_order(q)[: k - 1]] if k <= MAX_LISTED_FIXED else None
    details = {"method": method, "fixed": fixed}
    if method == "closed_form":
        acceptance = min(np.minimum(p, membership).sum(), 1)  # a float sum can round to 1 + 1 ulp
        details["draft_accepted"] = acceptance
        return RuleLaw(acceptance, p.copy(), None, details)
    return enumerated_rule_law(p, greedy_law(q, k), kernel(p, q, k), details)


def kernel(p: np.ndarray, q: np.ndarray, k: int):
    """The rule's kernel for a validated ``p``, ``q`` (``[V]``) and ``k <= V`` (module
    docstring): ``kernel(draft tuple) -> (K(. | x) [V], P(a draft is the output))``. Built in
    O(V log V) (one sort of ``q``), each call O(V)."""
    fixed = greedy_order(q)[: k - 1]
    last = greedy_membership(q, k)  # 1 on F, q_R on R
    last[fixed] = 0  # q_R, the last draft's law
    leftover = positive_part(p - last)
    leftover[fixed] = p[fixed]
    final = normalise(leftover)
    final_fixed = final[fixed].sum()

    def kernel(draft_tuple):
        z = draft_tuple[-1]
        a = accept_probability(p[z], last[z])
        return a * one_hot(z, p) + (1 - a) * final, a + (1 - a) * final_fixed

    return kernel
