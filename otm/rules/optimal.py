"""The optimal verifier for i.i.d. drafts: max-ratio priority with block exchanges.

Derived here (proofs in docs/optimal-verifier.md). Notation: ``p`` target, ``q`` draft,
``k`` drafts. Support tokens (``q > 0``) get ranks ``0..n-1`` by ``p/q`` ascending
(:func:`otm.formulations.prefix_scan.ratio_order`, ties by token id); ``C_j`` is the
draft mass of ranks ``< j`` and the unit interval is cut into blocks
``I_j = [C_j, C_{j+1})``, one per rank. ``H`` = ranks ``< m`` is the optimal prefix cut
(``alpha* = p(H) + 1 - C_m^k``, docs/theory.md 1.3 and 2.1), ``U`` the other ranks.

**Selection (levels).** Every draft position holds an independent uniform *level* on
``[0, 1)``; the token of a position is the owner of the block its level falls in, so
the positions are i.i.d. from ``q``. Selecting the position of highest level selects
the member of highest ``p/q`` (the "max-ratio" priority); its selection law is
``sigma_j = C_{j+1}^k - C_j^k = q_j d_j`` with ``d_j = sum_{a<k} C_{j+1}^a C_j^{k-1-a}``
the mean of the density ``k v^(k-1)`` of the highest of ``k`` levels over ``I_j``.

**Exchanges.** ``sigma`` exceeds ``p`` at some ranks of ``U`` and falls short of it at
some ranks of ``H``. Pairs of ranks ``lo < hi`` on the same side of the cut exchange
equal amounts ``t`` of their blocks: a position holding ``lo`` draws its level in ``I_hi``
with probability ``t / q_lo``, one holding ``hi`` draws it in ``I_lo`` with probability
``t / q_hi``. Levels stay i.i.d. uniform, so the highest one still has density
``k v^(k-1)``, and the exchange moves selection mass ``D = t (d_hi - d_lo)`` from ``hi``
to ``lo`` and changes nothing else. In ``U`` the surplus ``sigma_v - p_v`` of every rank
is matched first-in-first-out to the slack ``p_i - sigma_i`` of lower ranks; in ``H``
the shortfall ``p_v - sigma_v`` to the excess ``sigma_i - p_i`` of higher ranks, from the
top. Optimality of the cut (``f(H) <= f`` of every prefix) is exactly what makes both
matchings complete, and ``t <= q`` follows from the ratio order. The selection law ``x``
then has ``x <= p`` on ``U``, ``x >= p`` on ``H``, and a ``U`` member is selected
whenever there is one, so ``sum_y min(p_y, x_y) = 1 - C_m^k + p(H) = alpha*``.

**Verification.** The selected draft ``Z`` is checked by single-draft speculative
sampling against ``x`` (canonical decomposition, Khisti et al., "Multi-Draft Speculative
Sampling: Canonical Decomposition and Theoretical Limits", ICLR 2025, arXiv:2410.18234):
accept with ``min(1, p(Z) / x(Z))``, else draw from ``norm(max(p - x, 0))``. The output
law is ``p`` for any selection rule; the acceptance is ``sum min(p, x) = alpha*``, the
max-flow optimum, so this is an optimal lossless rule. Per row: one sort and O(V) scans
(:func:`selection_parameters`); per draft position: one binary search.

**Without replacement** (``draft_scheme="without_replacement"``): the ``k`` distinct drafts
are the first ``k`` distinct tokens of an i.i.d. sequence from ``q``; given them, the
first ``k`` terms of that sequence (:func:`latent_iid_tuples`) are exactly i.i.d., and
every one of them is a draft. The i.i.d. rule applied to them is lossless and accepts
a draft with probability at least ``alpha*(p, iid)``; this is NOT the optimum of the
without-replacement law (``alpha*`` without replacement is larger), see
docs/optimal-verifier.md#water-levels-for-drafts-without-replacement (:mod:`otm.rules.optimal_wor`). The rule
``"optimal_latent"`` is this construction (:mod:`otm.rules.optimal_latent`).

Hub and greedy draft laws: SpecHub's verifier (:mod:`otm.rules.spechub`) and the
greedy-draft verifier (:mod:`otm.rules.greedy`) already reach the per-token bound, the
optimum of their own laws (docs/theory.md 2.3); they are the optimal rules there.

Number types are kept: exact Fraction inputs give exact laws (tests/otm/test_rule_optimal.py
checks output ``== p`` and acceptance ``== alpha*`` exactly).
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..distributions import as_fractions, check_draft_count
from ..draft_laws import iid_law, without_replacement_law
from ..errors import NotApplicableError, UnknownNameError
from ..formulations.prefix_scan import ratio_order
from .base import RuleLaw
from .enumeration import (
    canonical_output_law,
    count_iid,
    count_without_replacement,
    enumerated_rule_law,
    is_exact,
    resolve_method,
    validate_one_q,
    zeros_like,
)

#: The draft schemes the rule covers: ``draft_scheme=`` of :func:`exact_law` and
#: :func:`selection_parameters`.
COVERED_SCHEMES = ("iid", "without_replacement")


@dataclass(frozen=True, eq=False)
class SelectionParameters:
    """Everything the selection needs, computed once per ``(p, q, k)`` (module docstring).

    Ranks are positions in ``order``; arrays indexed by rank have length ``n``.

    Attributes:
        k: number of drafts.
        draft_scheme: ``"iid"`` or ``"without_replacement"`` (the i.i.d. parameters serve both).
        order: ``[n]`` token ids with ``q > 0``, ``p/q`` ascending.
        rank: ``[V]`` rank of each token, ``-1`` where ``q = 0``.
        cut: ``m``, the number of ranks in the optimal prefix ``H``.
        draft: ``[n]`` ``q`` by rank.
        density: ``[n]`` ``d_j``, mean density of the highest level over block ``j``.
        matched: ``[n]`` selection mass each rank exchanges (0: none).
        moves_up: ``[n]`` bool, True for the lower rank of its pairs.
        flow_start: ``[n]`` start of the rank's interval in the matching coordinate.
        lower_ends, lower_ranks: ends and ranks of the lower ranks' intervals, in
            matching order (``U`` ascending, then ``H`` descending).
        upper_ends, upper_ranks: the same for the upper ranks.
        target: ``[V]`` ``p``.
        selection: ``[V]`` ``x``, the law of the selected draft ``Z``.
        acceptance: ``sum min(p, x)``, equal to ``alpha*(p, iid law)``.
    """

    k: int
    draft_scheme: str
    order: np.ndarray  # [n]
    rank: np.ndarray  # [V]
    cut: int
    draft: np.ndarray  # [n]
    density: np.ndarray  # [n]
    matched: np.ndarray  # [n]
    moves_up: np.ndarray  # [n]
    flow_start: np.ndarray  # [n]
    lower_ends: np.ndarray  # [L]
    lower_ranks: np.ndarray  # [L]
    upper_ends: np.ndarray  # [U]
    upper_ranks: np.ndarray  # [U]
    target: np.ndarray  # [V]
    selection: np.ndarray  # [V]
    acceptance: object


def _power(values: np.ndarray, k: int) -> np.ndarray:
    """``values**k`` by repeated multiplication (identical rounding in every implementation)."""
    out = values * 0 + 1
    for _ in range(k):
        out = out * values
    return out


def _mean_density(upper: np.ndarray, lower: np.ndarray, k: int) -> np.ndarray:
    """``(upper^k - lower^k) / (upper - lower) = sum_{a<k} upper^a lower^(k-1-a)`` without
    cancellation (Horner: ``d <- d upper + lower^a``)."""
    d = upper * 0 + 1
    power = upper * 0 + 1
    for _ in range(k - 1):
        power = power * lower
        d = d * upper + power
    return d


def _cumulative(values: np.ndarray) -> np.ndarray:
    """``[len + 1]``: ``0, v_0, v_0 + v_1, ...`` in the number type of ``values``."""
    head = np.zeros(1, dtype=values.dtype)
    if values.dtype == object:
        head[0] = Fraction(0)
    return np.concatenate([head, np.cumsum(values)])


def _intervals(amounts: np.ndarray, total) -> tuple[np.ndarray, np.ndarray]:
    """``(start, matched)`` of consecutive intervals of lengths ``amounts`` from 0,
    truncated at ``total`` (the matched flow)."""
    ends = np.cumsum(amounts) if amounts.size else amounts
    starts = _cumulative(amounts)[:-1]
    matched = np.minimum(ends, total) - starts
    return starts, np.where(matched > 0, matched, matched * 0)


def selection_parameters(p, q, k: int, draft_scheme: str = "iid", *, cut: int | None = None) -> SelectionParameters:
    """Precompute the selection of the optimal rule (module docstring): one sort and
    O(V k) arithmetic; exact Fractions in, exact Fractions out.

    Args:
        p: ``[V]`` target distribution.
        q: ``[V]`` draft distribution.
        k: number of drafts.
        draft_scheme: one of :data:`COVERED_SCHEMES`.
        cut: the number of ranks in ``H``; ``None`` (default) is the optimal prefix cut.
            The construction is valid only for an optimal cut: the matchings pair every
            surplus with lower ranks (and every shortfall with higher ones) exactly because
            ``f(H) <= f(H')`` for every prefix ``H'``. Another cut ``0..n`` gives, in
            general, negative "probabilities" and a rule that is not lossless;
            tests/otm/test_rule_optimal.py uses it to check that the exact checks catch a
            wrong cut.

    >>> params = selection_parameters([0.5, 0.5], [0.5, 0.5], 2)
    >>> params.cut, [float(v) for v in params.selection], float(params.acceptance)
    (0, [0.5, 0.5], 1.0)
    """
    if draft_scheme not in COVERED_SCHEMES:
        raise UnknownNameError(f"unknown draft scheme {draft_scheme!r} for rule 'optimal'; choose one of {COVERED_SCHEMES}")
    k = check_draft_count(k)
    p, q = validate_one_q(p, q, "rule 'optimal' builds its drafts from one q ([V] vector)")
    exact = is_exact(p)
    order = ratio_order(p, q)
    n = int(sum(1 for v in q if v > 0))
    order = np.asarray(order[:n], dtype=np.int64)
    rank = np.full(p.size, -1, dtype=np.int64)
    rank[order] = np.arange(n)
    q_r, p_r = q[order], p[order]
    total = _cumulative(q_r)  # [n+1] C_j
    density = _mean_density(total[1:], total[:-1], k)  # [n]
    own = q_r * density  # sigma_j
    if cut is None:
        cut = int(np.argmin(_cumulative(p_r) - _power(total, k)))  # first minimiser of f(H_m) - 1
    elif not 0 <= cut <= n:
        raise NotApplicableError(f"cut must be a number of ranks in 0..{n} (the tokens with q > 0), got {cut!r}; pass None for the optimal cut")

    # U (ranks >= cut): lower = slack p - sigma > 0, upper = surplus sigma - p > 0, FIFO upward.
    excess_u = p_r[cut:] - own[cut:]
    slack_u = np.where(excess_u > 0, excess_u, excess_u * 0)
    surplus_u = np.where(excess_u < 0, -excess_u, excess_u * 0)
    flow_u = min(_cumulative(slack_u)[-1], _cumulative(surplus_u)[-1])
    # H (ranks < cut): lower = shortfall p - sigma > 0, upper = excess sigma - p > 0, FIFO downward.
    excess_h = (own[:cut] - p_r[:cut])[::-1]
    slack_h = np.where(excess_h > 0, excess_h, excess_h * 0)
    short_h = np.where(excess_h < 0, -excess_h, excess_h * 0)
    flow_h = min(_cumulative(slack_h)[-1], _cumulative(short_h)[-1])

    start = own * 0
    matched = own * 0
    moves_up = np.zeros(n, dtype=bool)
    s_lo, m_lo = _intervals(slack_u, flow_u)
    s_hi, m_hi = _intervals(surplus_u, flow_u)
    s_h_lo, m_h_lo = _intervals(short_h, flow_h)
    s_h_hi, m_h_hi = _intervals(slack_h, flow_h)
    u_ranks = np.arange(cut, n)
    h_ranks = np.arange(cut)[::-1]
    is_lo_u, is_hi_u = slack_u > 0, surplus_u > 0
    is_lo_h, is_hi_h = short_h > 0, slack_h > 0
    start[u_ranks[is_lo_u]], matched[u_ranks[is_lo_u]] = s_lo[is_lo_u], m_lo[is_lo_u]
    start[u_ranks[is_hi_u]], matched[u_ranks[is_hi_u]] = s_hi[is_hi_u], m_hi[is_hi_u]
    start[h_ranks[is_lo_h]], matched[h_ranks[is_lo_h]] = s_h_lo[is_lo_h] + flow_u, m_h_lo[is_lo_h]
    start[h_ranks[is_hi_h]], matched[h_ranks[is_hi_h]] = s_h_hi[is_hi_h] + flow_u, m_h_hi[is_hi_h]
    moves_up[u_ranks[is_lo_u]] = True
    moves_up[h_ranks[is_lo_h]] = True
    keep = matched > 0
    lower = np.concatenate([u_ranks[is_lo_u], h_ranks[is_lo_h]])
    upper = np.concatenate([u_ranks[is_hi_u], h_ranks[is_hi_h]])
    lower, upper = lower[keep[lower]], upper[keep[upper]]

    selection_r = own + np.where(moves_up, matched, -matched)
    selection_r = np.where(selection_r > 0, selection_r, selection_r * 0)  # float rounding below 0
    selection = zeros_like(p)
    selection[order] = selection_r
    acceptance = np.minimum(p, selection).sum()
    return SelectionParameters(
        k=k,
        draft_scheme=draft_scheme,
        order=order,
        rank=rank,
        cut=cut,
        draft=q_r,
        density=density,
        matched=matched,
        moves_up=moves_up,
        flow_start=start,
        lower_ends=start[lower] + matched[lower],
        lower_ranks=lower,
        upper_ends=start[upper] + matched[upper],
        upper_ranks=upper,
        target=p,
        selection=selection,
        acceptance=acceptance if exact else min(float(acceptance), 1.0),
    )


def block_distribution(params: SelectionParameters, rank: int) -> dict:
    """``{block rank: probability}`` of the level block of a position holding ``rank``:
    its own block, or a partner's with probability ``t / q_rank``,
    ``t = D / |d_partner - d_rank|`` for each exchanged amount ``D``."""
    out = {rank: params.draft[rank] * 0 + 1}
    amount = params.matched[rank]
    if not amount > 0:
        return out
    lo, hi = params.flow_start[rank], params.flow_start[rank] + amount
    ends, ranks = (params.upper_ends, params.upper_ranks) if params.moves_up[rank] else (params.lower_ends, params.lower_ranks)
    first = int(np.searchsorted(ends, lo, side="right"))
    last = int(np.searchsorted(ends, hi, side="left"))
    for j in range(first, min(last, len(ends) - 1) + 1):
        begin = ends[j - 1] if j > 0 else ends[j] * 0
        overlap = min(ends[j], hi) - max(begin, lo)
        if overlap > 0:
            partner = int(ranks[j])
            moved = overlap / (params.draft[rank] * abs(params.density[partner] - params.density[rank]))
            out[partner] = out.get(partner, 0) + moved
            out[rank] = out[rank] - moved
    return out


def _mass_below(dist: dict, zero):
    """``block -> P(< block)`` of a block distribution: prefix sums over its sorted blocks
    and a bisection (a position can move to tens of thousands of blocks on a real row, so a
    sum per query would make the selection quadratic in them)."""
    blocks = sorted(dist)
    sums = [zero]
    for block in blocks:
        sums.append(sums[-1] + dist[block])
    return lambda block: sums[bisect.bisect_left(blocks, block)]


def _iid_selection(params: SelectionParameters, ranks: list[int]) -> list:
    """``P(position j is selected)`` for an i.i.d. tuple of ranks: the highest level wins,
    ties within a block split uniformly:
    ``sum_b P_j(b) int_0^1 prod_{l != j} (P_l(< b) + z P_l(b)) dz``."""
    if not is_exact(params.target):
        return _iid_selection_floats(params, ranks)
    dists = [block_distribution(params, r) for r in ranks]
    one = dists[0][ranks[0]] * 0 + 1
    below_of = [_mass_below(dist, one * 0) for dist in dists]
    out = []
    for j, own in enumerate(dists):
        total = one * 0
        for block, weight in own.items():
            poly = [one]
            for l, other in enumerate(dists):
                if l == j:
                    continue
                below = below_of[l](block)
                tied = other.get(block, one * 0)
                poly = [a * below + b * tied for a, b in zip(poly + [one * 0], [one * 0] + poly)]
            total = total + weight * sum(c / (i + 1) for i, c in enumerate(poly))
        out.append(total)
    return out


def _iid_selection_floats(params: SelectionParameters, ranks: list[int]) -> list[float]:
    """:func:`_iid_selection` of float parameters on arrays, the same operations in the same
    order, so the same floats: each distinct rank's block distribution is built once, and each
    position's blocks are swept together (a merged node of a decoding tree has up to 8 drafts,
    each with up to tens of thousands of blocks)."""
    tables = {}
    for rank in set(ranks):
        dist = block_distribution(params, rank)
        blocks = np.fromiter(dist, dtype=np.int64, count=len(dist))  # insertion order
        weights = np.fromiter(dist.values(), dtype=np.float64, count=len(dist))
        order = np.argsort(blocks, kind="stable")
        below = np.concatenate([[0.0], np.cumsum(weights[order])])  # P(< block), summed as _mass_below does
        tables[rank] = (blocks, weights, blocks[order], weights[order], below)
    out = []
    for j, rank in enumerate(ranks):
        blocks, weights = tables[rank][:2]
        poly = [np.ones(blocks.size)]
        for l, other in enumerate(ranks):
            if l == j:
                continue
            _, _, sorted_blocks, sorted_weights, below_sums = tables[other]
            at = np.searchsorted(sorted_blocks, blocks, side="left")
            below = below_sums[at]
            inside = np.minimum(at, sorted_blocks.size - 1)
            tied = np.where((at < sorted_blocks.size) & (sorted_blocks[inside] == blocks), sorted_weights[inside], 0.0)
            zero = np.zeros(blocks.size)
            poly = [a * below + b * tied for a, b in zip(poly + [zero], [zero] + poly)]
        integral = np.zeros(blocks.size)
        for i, c in enumerate(poly):
            integral = integral + c / (i + 1)
        out.append(float(np.cumsum(weights * integral)[-1]))  # summed in the blocks' order, as the loop does
    return out


def latent_iid_tuples(params: SelectionParameters, draft_tuple) -> list[tuple[tuple, object]]:
    """The first ``k`` terms of the i.i.d. sequence behind a without-replacement tuple,
    with their conditional probabilities: ``[(positions, probability)]``, ``positions``
    the indices into ``draft_tuple`` of the ``k`` latent draws.

    After ``c`` distinct drafts ``A_c``, the next term repeats a member ``a`` of ``A_c``
    with probability ``q(a)`` and is the next distinct draft with ``1 - q(A_c)``
    (memorylessness of i.i.d. draws; q = 0 tail drafts are never reached)."""
    q = params.target * 0
    q[params.order] = params.draft
    total = q.sum()
    states = [((0,), total * 0 + 1, 1)]
    for _ in range(1, len(draft_tuple)):
        grown = []
        for positions, prob, seen in states:
            for a in range(seen):
                if q[draft_tuple[a]] > 0:
                    grown.append((positions + (a,), prob * q[draft_tuple[a]], seen))
            fresh = total - sum((q[draft_tuple[a]] for a in range(seen)), total * 0)
            if fresh > 0:
                grown.append((positions + (seen,), prob * fresh, seen + 1))
        states = grown
    return [(positions, prob) for positions, prob, _ in states]


def selection_law(params: SelectionParameters, draft_tuple) -> np.ndarray:  # [k]
    """``P(Z = x_j | x)`` for each position ``j`` of the drafted tuple ``x``
    (i.i.d.: the levels rule; without replacement: averaged over the latent i.i.d.
    tuples, each latent draw crediting the position it repeats)."""
    draft_tuple = [int(t) for t in draft_tuple]
    out = zeros_like(np.empty(len(draft_tuple), dtype=params.target.dtype))
    if params.draft_scheme == "iid":
        for j, prob in enumerate(_iid_selection(params, [int(params.rank[t]) for t in draft_tuple])):
            out[j] = out[j] + prob
        return out
    for positions, weight in latent_iid_tuples(params, draft_tuple):
        ranks = [int(params.rank[draft_tuple[a]]) for a in positions]
        for a, prob in zip(positions, _iid_selection(params, ranks)):
            out[a] = out[a] + weight * prob
    return out


def conditional_output_law(params: SelectionParameters, draft_tuple):
    """``(K(. | x) [V], P(a draft is accepted | x))``: select ``Z`` by
    :func:`selection_law`, accept it with ``min(1, p(Z) / x(Z))``, else draw from
    ``norm(max(p - x, 0))`` (``p`` itself where that is empty, reached with probability 0)."""
    return canonical_output_law(params.target, params.selection, draft_tuple, selection_law(params, draft_tuple))


def exact_law(p, q, k: int, draft_scheme: str = "iid", *, method: str = "auto") -> RuleLaw:
    """Exact law of the optimal verifier (module docstring).

    ``draft_scheme="iid"``: acceptance ``alpha*(p, iid law)`` (``method="closed_form"``:
    :func:`selection_parameters`, O(V log V); ``"enumeration"``: the coupling over
    every draft tuple). ``draft_scheme="without_replacement"``: the latent i.i.d. rule,
    by enumeration only; ``details["draft_accepted"] = alpha*(p, iid law)`` and the
    membership acceptance lies between it and ``alpha*`` without replacement.

    ``details``: ``method``, ``cut`` (|H|), ``selection`` (``x``), ``draft_accepted``;
    by enumeration also ``accepted_per_token`` and ``coupling``.

    >>> law = exact_law([0.1, 0.6, 0.3], [0.5, 0.3, 0.2], 2)
    >>> round(float(law.acceptance), 12)  # = alpha* = min over prefixes
    0.85
    """
    if draft_scheme not in COVERED_SCHEMES:
        raise UnknownNameError(
            f"rule 'optimal' covers the draft schemes {COVERED_SCHEMES}, got {draft_scheme!r}; for the hub and greedy "
            "draft laws the rules 'spechub' and 'greedy' are already optimal"
        )
    p, q = validate_one_q(p, q, "rule 'optimal' builds its drafts from one q ([V] vector)")
    params = selection_parameters(p, q, k, draft_scheme)
    count = count_iid if draft_scheme == "iid" else count_without_replacement
    n_tuples = count(q, params.k)
    method = resolve_method(method, n_tuples, draft_scheme == "iid", "optimal", len(p))
    details = {"method": method, "cut": params.cut, "selection": params.selection, "draft_accepted": params.acceptance}
    if method == "closed_form":
        return RuleLaw(params.acceptance, p.copy(), None, details)
    if not is_exact(p) and not kernel_is_probability(params):
        return _law_in_rationals(p, q, k, draft_scheme)
    law = iid_law(q, params.k) if draft_scheme == "iid" else without_replacement_law(q, params.k)
    result = enumerated_rule_law(p, law, lambda draft_tuple: conditional_output_law(params, draft_tuple), details)
    if not is_exact(p):
        return result
    if result.details["draft_accepted"] != params.acceptance:
        raise AssertionError("the enumerated acceptance differs from sum min(p, x)")
    return result


#: How far outside ``[0, 1]`` a float64 block law may round (:func:`kernel_is_probability`).
KERNEL_TOLERANCE = 1e-9


def kernel_is_probability(params: SelectionParameters) -> bool:
    """Whether every rank's block law (:func:`block_distribution`) is a probability vector,
    within :data:`KERNEL_TOLERANCE`. In exact arithmetic it always is. In float64 the cut, the
    first minimiser of ``P_j - C_j^k``, can tie by rounding with the exact one when tokens of
    ``p`` and ``q`` below a rounding of the prefix sums lie there (a token of ``q = 1e-30`` and
    ``p = 0`` beside two of ``q = 1/2``); the construction then exchanges a rounding's worth of
    mass between ranks whose densities differ by as little, and a block law comes out with
    ``-1`` and ``2`` (``k = 2``) or infinities (``k = 1``, where the densities are equal: a NaN
    law). The selection law ``x`` is right to rounding either way; the kernel is not."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for rank in np.flatnonzero(params.matched > 0):
            for weight in block_distribution(params, int(rank)).values():
                if not (np.isfinite(weight) and -KERNEL_TOLERANCE <= weight <= 1 + KERNEL_TOLERANCE):
                    return False
    return True


def _law_in_rationals(p, q, k: int, draft_scheme: str) -> RuleLaw:
    """The enumerated law from the same floats in exact rationals, rounded back to float64
    (``details["arithmetic"]`` says so): the float kernel was not a probability
    (:func:`kernel_is_probability`). It is enumerated on the tokens of ``p > 0`` or ``q > 0``
    alone (a token of neither is never drafted nor output: its columns are 0), which keeps a
    low-temperature row of a large vocabulary, a few tokens above 0, from costing rational
    arithmetic over every token (5 s at 5,000 tokens before)."""
    active = np.flatnonzero((p > 0) | (q > 0))
    exact = exact_law(as_fractions(p[active]), as_fractions(q[active]), k, draft_scheme, method="enumeration")

    def widened(values) -> np.ndarray:  # [..., len(active)] -> [..., V], float64
        out = np.zeros(np.shape(values)[:-1] + (p.size,))
        out[..., active] = np.asarray(values, dtype=np.float64)
        return out

    details = dict(exact.details, arithmetic="exact rationals from the floats (the float64 kernel was not a probability)")
    for key in ("selection", "accepted_per_token", "coupling"):
        if key in details:
            details[key] = widened(details[key])
    details["draft_accepted"] = float(details["draft_accepted"])
    law = iid_law(q, k) if draft_scheme == "iid" else without_replacement_law(q, k)
    return RuleLaw(float(exact.acceptance), widened(exact.output_distribution), law, details)


__all__ = [
    "COVERED_SCHEMES",
    "KERNEL_TOLERANCE",
    "SelectionParameters",
    "block_distribution",
    "conditional_output_law",
    "exact_law",
    "kernel_is_probability",
    "latent_iid_tuples",
    "selection_law",
    "selection_parameters",
]
