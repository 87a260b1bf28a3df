"""SpecTr's upper bound (SpecTr, Sun et al. 2023, Thm 1) and its closed forms (SpecTr, Sun et al. 2023, App. B.2).

SpecTr writes p for the draft and q for the target; everything here is translated to
our letters (p target, q draft, k i.i.d. drafts).

Thm 1 (App. B.3), our letters: for every token set ``Omega_0``,

    alpha* <= sum_{y in Omega_0} min(p(y), 1 - (1 - q(y))^k)
              + sum_{x in V^k} min(Q(x), p(S(x) \\ Omega_0)).

``Omega_0 = V`` gives the per-token bound ``sum_y min(p(y), P(y in S(X)))``
(docs/theory.md), O(V).
"""
from __future__ import annotations

from fractions import Fraction
from math import comb

import numpy as np

from ..distributions import as_distribution_pair, check_draft_count
from ..draft_laws import iid_law
from ..errors import InvalidDistributionError, InvalidDraftCountError, UnknownNameError


def spectr_upper_bound(p, q, k: int, kept=None) -> float:
    """SpecTr (Sun et al. 2023), Thm 1 for the token set ``kept`` (``Omega_0``); default: every token,
    which is the O(V) per-token bound ``sum_y min(p(y), 1 - (1 - q(y))^k)``.

    A smaller ``kept`` enumerates the ``V^k`` i.i.d. tuples (small vocabularies only).

    >>> spectr_upper_bound([0.5, 0.5], [1.0, 0.0], 3)
    0.5
    """
    p, q = as_distribution_pair(p, q)
    k = check_draft_count(k)
    mask = np.ones(p.size, dtype=bool)
    if kept is not None:
        mask = np.zeros(p.size, dtype=bool)
        mask[np.asarray(kept, dtype=np.int64)] = True
    with np.errstate(divide="ignore"):  # q = 1: log1p(-1) = -inf, member = 1
        member = -np.expm1(k * np.log1p(-np.minimum(q, 1.0)))  # 1 - (1 - q)^k, accurate for tiny q
    bound = float(np.minimum(p, member)[mask].sum())
    if mask.all():
        return bound
    law = iid_law(q, k)
    first = law.first_occurrence()
    outside = np.where(mask, 0.0, p)[law.tuples] * first  # [n, k] p of each distinct token not kept
    return bound + float(np.minimum(law.probs, outside.sum(axis=1)).sum())


def bernoulli_optimum(target_one: float, draft_one: float, k: int) -> float:
    """Optimal acceptance for ``p = Ber(target_one)``, ``q = Ber(draft_one)`` and k i.i.d.
    drafts (SpecTr, Sun et al. 2023, App. B.2, Figures 2-3; letters swapped):

        alpha* = min(a, 1 - (1 - b)^k) + min(1 - a, 1 - b^k),   a = p(1), b = q(1).

    Token 0 has probabilities ``1 - a`` / ``1 - b``. (Derivation: on two tokens the min cut
    is over ``{}, {0}, {1}, {0, 1}``; the formula is its minimum since both "other"
    branches together would need ``b^k + (1 - b)^k > 1``.)

    >>> bernoulli_optimum(0.25, 0.25, 4)
    1.0
    """
    k = check_draft_count(k)
    for name, v in (("target_one", target_one), ("draft_one", draft_one)):
        if not 0 <= v <= 1:
            raise InvalidDistributionError(f"{name} must be a probability in [0, 1], got {v!r}")
    a, b = target_one, draft_one
    return min(a, 1 - (1 - b) ** k) + min(1 - a, 1 - b**k)


def uniform_optimum(target_size: int, draft_size: int, k: int, draft_scheme: str = "iid") -> Fraction:
    """Optimal acceptance for ``p = U(target_size)``, ``q = U(draft_size)``, both uniform on
    the FIRST tokens of the vocabulary (nested supports), exact.

    SpecTr (Sun et al. 2023), App. B.2, Figure 1 (their ``q = U(d/r)`` target, ``p = U(d)`` draft, letters
    swapped): ``alpha* = 1 - (1 - m/n)^k`` for ``m = target_size <= n = draft_size``.
    Derived here as well: without replacement ``1 - C(n - m, k) / C(n, k)``; and for
    ``m > n`` (target wider than the draft) ``alpha* = n / m`` for both schemes (the min
    cut over prefixes ``j`` of the draft tokens is concave in ``j``, so it sits at an end).

    >>> uniform_optimum(60, 120, 2)
    Fraction(3, 4)
    """
    k = check_draft_count(k)
    m, n = int(target_size), int(draft_size)
    if m < 1 or n < 1:
        raise InvalidDistributionError(f"uniform supports need at least one token, got {m} and {n}")
    if draft_scheme not in ("iid", "without_replacement"):
        raise UnknownNameError(f"unknown draft scheme {draft_scheme!r}; choose 'iid' or 'without_replacement'")
    if draft_scheme == "without_replacement" and k > n:
        raise InvalidDraftCountError(f"k={k} distinct drafts from a uniform draft on {n} tokens")
    if m > n:
        return Fraction(n, m)
    if draft_scheme == "iid":
        return 1 - (1 - Fraction(m, n)) ** k
    return 1 - Fraction(comb(n - m, k), comb(n, k))
