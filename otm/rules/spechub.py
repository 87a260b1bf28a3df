"""SpecHub (Sun et al. 2024, §4, Alg. 3, proof of Thm 2, Cor. 1), k = 2 drafts.

Hub ``a = argmax q`` (:func:`otm.draft_laws.hub_token`); draft pairs from the hub law
(:func:`otm.draft_laws.hub_law`): ``Q(x, a) = q(x)``, ``Q(a, x) = q(a) q(x) / (1 - q(a))``
for ``x != a``. Verification (Alg. 3, GetResidual = Alg. 2), for ``x != a``:

1. pair ``(x, a)``: accept ``x`` with ``min(1, p(x) / q(x))``;
2. pair ``(a, x)``: accept ``x`` with ``min(1, p'(x) / Q(a, x))``, ``p'(x) = max(p(x) - q(x), 0)``;
3. the rejected masses are ``Q'(x, a) = max(q(x) - p(x), 0)`` and
   ``Q'(a, x) = max(Q(a, x) - p'(x), 0)``; pair ``(a, x)`` then accepts ``a`` with
   ``min(1, p(a) / sum Q'(a, .))`` and, with ``p'(a) = max(p(a) - sum Q'(a, .), 0)``,
   pair ``(x, a)`` accepts ``a`` with ``min(1, p'(a) / sum Q'(., a))``;
4. otherwise ``Y ~ norm(p'')``, ``p''(x) = max(p'(x) - Q(a, x), 0)`` for ``x != a`` and
   ``p''(a) = 0`` (the proof shows ``p(a) <= sum Q'(a, .) + sum Q'(., a)``).

Token ``x != a`` is output through a draft with probability
``min(p(x), q(x) + Q(a, x)) = min(p(x), q(x) / (1 - q(a)))``, token ``a`` with ``p(a)``
(Cor. 1): every token reaches the per-token bound ``min(p(y), P(y in S(X)))``, so

    acceptance = p(a) + sum_{x != a} min(p(x), q(x) / (1 - q(a)))     (docs/theory.md)

and SpecHub is optimal for its own law. The residual puts mass only on tokens ``x``
with ``p(x) > q(x) / (1 - q(a))``, whose pairs always accept ``x``: it never outputs a
draft token, so membership = "a draft was accepted".

One-hot ``q`` (``q(a) = 1``): the law is the single pair ``(a, a)``; the rule accepts
``a`` with probability ``p(a)`` and otherwise samples ``norm(p without a)`` (no division
by ``1 - q(a)``).
"""
from __future__ import annotations

import numpy as np

from ..distributions import check_draft_count
from ..draft_laws import hub_law, hub_token
from ..errors import InvalidDraftCountError
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
    zeros_like,
)


def closed_form_acceptance(p: np.ndarray, q: np.ndarray):
    """``p(a) + sum_{x != a} min(p(x), q(x) / (1 - q(a)))`` (``p(a)`` for one-hot ``q``)."""
    a = hub_token(q)
    others = np.asarray(q > 0, dtype=bool)
    others[a] = False
    if not others.any():
        return p[a]
    rest = q[others].sum()  # = 1 - q(a), without the cancellation when q(a) rounds to 1
    return min(p[a] + np.minimum(p[others], q[others] / rest).sum(), 1)  # a float sum can round to 1 + 1 ulp


def kernel(p: np.ndarray, q: np.ndarray):
    """``K(y | pair)`` of Alg. 3 for the pairs of :func:`otm.draft_laws.hub_law`."""
    a = hub_token(q)
    others = [x for x in range(p.size) if x != a and q[x] > 0]
    if not others:  # one-hot q: the pair (a, a), a single-draft rule
        rest = p.copy()
        rest[a] = 0
        final = normalise(rest)

        def single(pair):
            row = p[a] * one_hot(a, p) + (1 - p[a]) * final
            return row, p[a]

        return single
    rest = q[others].sum()  # 1 - q(a), summed over the others: no cancellation
    second = zeros_like(q)  # Q(a, x), x != a: q(x) / (1 - q(a)) <= 1 first (q(a) / (1 - q(a)) overflows
    second[others] = q[others] / rest * q[a]  # where 1 - q(a) is denormal)
    first_left = p - np.minimum(p, q)  # p'(x) = max(p - q, 0)
    rejected_first = positive_part(q - p)  # Q'(x, a)
    rejected_second = positive_part(second - first_left)  # Q'(a, x)
    for table in (rejected_first, rejected_second):
        table[a] = 0
    mass_second = rejected_second.sum()  # sum_x Q'(a, x)
    mass_first = rejected_first.sum()  # sum_x Q'(x, a)
    hub_via_second = min(1, p[a] / mass_second) if mass_second > 0 else 0
    hub_left = max(p[a] - mass_second, 0)  # p'(a)
    hub_via_first = min(1, hub_left / mass_first) if mass_first > 0 else 0
    final_mass = positive_part(first_left - second)  # p''(x), x != a
    final_mass[a] = 0
    final = normalise(final_mass)

    def pair_kernel(pair):
        x1, x2 = pair
        if x2 == a:  # pair (x, a)
            x, take_x = x1, accept_probability(p[x1], q[x1])
            take_hub = hub_via_first
        else:  # pair (a, x)
            x, take_x = x2, accept_probability(first_left[x2], second[x2])
            take_hub = hub_via_second
        rejected = (1 - take_x) * (1 - take_hub)
        row = take_x * one_hot(x, p) + (1 - take_x) * take_hub * one_hot(a, p) + rejected * final
        return row, 1 - rejected

    return pair_kernel


def exact_law(p, q, k: int = 2, *, method: str = "auto") -> RuleLaw:
    """Exact law of SpecHub (k = 2 only; other ``k`` raise
    :class:`otm.errors.InvalidDraftCountError`).

    ``details``: ``hub`` (the token ``a``), ``draft_accepted``; by enumeration also
    ``accepted_per_token`` and ``coupling``.

    >>> round(float(exact_law([0.1, 0.6, 0.3], [0.5, 0.3, 0.2]).acceptance), 12)
    1.0
    """
    if check_draft_count(k) != 2:
        raise InvalidDraftCountError(f"SpecHub is defined for k=2 drafts (SpecHub, Sun et al. 2024, §4), got k={k}")
    p, q = validate_one_q(p, q, "rule 'spechub' builds its draft pairs from one q ([V] vector)")
    n_tuples = max(2 * (support_size(q) - 1), 1)
    method = resolve_method(method, n_tuples, True, "spechub", len(p))
    details = {"method": method, "hub": hub_token(q)}
    if method == "closed_form":
        acceptance = closed_form_acceptance(p, q)
        details["draft_accepted"] = acceptance
        return RuleLaw(acceptance, p.copy(), None, details)
    return enumerated_rule_law(p, hub_law(q), kernel(p, q), details)
