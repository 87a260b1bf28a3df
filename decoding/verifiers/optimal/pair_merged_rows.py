"""The water-level verifier without the sort: one row on a merged row of ratio buckets
(docs/optimal-verifier-proofs.md#merged-rows-for-two-drafts), compiled with numba.

The verifier of :mod:`decoding.verifiers.optimal.pair` needs the ranks by ``p / q`` only
through sums over blocks of consecutive ranks, except at a few ranks. Cut the ratio keys
into buckets (the layout of :mod:`decoding.verifiers.optimal.unsorted_rows`: one histogram pass,
no sort) and keep a bucket as one *entry* of a merged row when every rank in it has
``e = p - sigma`` of one sign, which the bucket's ratio range decides (the sign test below);
the other buckets, and those of the drafts and of a token with ``q > 1/2``, are refined into
their tokens, sorted by key. On the merged row:

- ``sigma`` of an entry is ``w C + q W`` plus the pair mass inside it (``w(E) q(E) - sum
  w q``): ``T``, the probability that both drafts fall below a cut, is exact at every cut
  between entries;
- the cut ``m`` lies between entries: ``f(j) = P_j + 1 - T_j`` is monotone through a block
  of one sign, so its first minimiser is at one end (strictly signed blocks);
- the flux walks step over a block as over one rank (``max(0, F + e)`` summed over ranks of
  one sign is ``max(0, F + sum e)``), so ``F`` is exact at every cut between entries and
  monotone inside a block;
- the drafts are single entries, so their ``x`` is exact, and so is the residual mass of a
  block on ``U`` (``p(E) - x(E)``; none on ``H``);
- the tests of docs/optimal-verifier-proofs.md#bounds-on-a-water-level-from-the-flux
  read ``F`` at the cuts between entries and bound the cuts inside a block
  (:func:`decoding.verifiers.optimal.pair_levels.yield_decision` with ``blocks``; claim
  (d) of docs/optimal-verifier-proofs.md#merged-rows-for-two-drafts); they prove ``u < Y`` or ``Y <= u`` or
  leave the pair undecided.

In exact arithmetic every value the draw reads is the sorted path's, so the draw is the
sorted path's: the selected draft, its test and the residual rank (inverse CDF over the
ranks, the ``q = 0`` tokens last by id, :mod:`decoding.verifiers.optimal.pair`). When the
residual draw lands in a block, that block alone is gathered, sorted and walked (its ``sigma``
from the sums below it, its flux from its upper end), and the draw goes on inside it
(:func:`_block_draw`). When the bounds leave the pair undecided, or the residual has no mass
left by rounding, the row goes back to the sorted path (:func:`merged_row` says why). Tests:
``tests/decoding/test_verifier_optimal_pair_wor_merged.py`` (draw for draw against the
sorted path on rows with few buckets, the bounds inside blocks against the exact ones, and a
broken sign test and raised bounds caught).

**The sign test.** In a bucket of ratios ``[r_lo, r_hi]`` with ``C``, ``W`` the sums of ``q``
and ``w`` below it and ``C'``, ``W'`` through it, a rank ``a`` has ``sigma_a / q_a = C_a /
(1 - q_a) + W_a`` with ``C <= C_a <= C'`` and ``W <= W_a <= W'``, so ``e_a > 0`` at every rank
when ``r_lo > C' / (1 - max q) + W'`` and ``e_a < 0`` when ``r_hi < C + W``, with ``max q``
at most the bucket's ``q`` mass, the bound used (each with a relative margin, and only for keys of normal floats, where the float ratio is within a
relative ``2^-53`` of the exact one). The bucket of the ratio 0 (``p = 0``) has ``e = -sigma
<= 0`` (zero only at the lowest rank of all, where ``f`` is flat: its first minimiser is
still at an end).

``cache=True``, ``nogil=True``: rows run on several threads at once; the caller passes the
keys and bucket ids (``V`` entries each) as work arrays reused across rows.
"""
from __future__ import annotations

import numba
import numpy as np

from .unsorted_rows import NORMAL_KEY, bucket_layout, gather
from .unsorted_rows import merged_row as merge_entries
from .row_passes import INF_KEY
from .pair_levels import _add, first_run, ranked_setup, yield_decision

_compiled = numba.njit(cache=True, nogil=True, error_model="numpy")

#: Ratio buckets of a row (the merged row has at most this many blocks).
BUCKETS = 4096

#: Relative margin of the sign test (far above the rounding of the bucket sums).
SIGN_MARGIN = 1e-9

#: Outcomes of :func:`merged_row`: drawn, or back to the sorted path because the flux bounds
#: left the pair undecided, the residual had no mass (rounding), or a ``q > 0`` token's ratio
#: overflowed.
DRAWN, UNDECIDED, NO_RESIDUAL, OVERFLOW = 1, 0, 2, 3


@_compiled
def bucket_weights(q, ids, count, draft, w_sums, wq_sums):
    """Per bucket of the ranked tokens (ids ``0..count``): the sums of ``w = q / (1 - q)`` and
    of ``w q``; returns the token with ``q > 1/2`` (-1 if none) and its ``w``: ``q`` over the
    others' mass, the other buckets' sums of ``q`` (``draft``) and the others of its own
    bucket added with compensation (the sorted path sums them with compensation in rank
    order, :func:`decoding.verifiers.optimal.pair_levels.draft_weights`)."""
    big = -1
    for i in range(q.shape[0]):
        b = ids[i]
        if q[i] > 0.5:
            big = i
        elif q[i] > 0.0 and b <= count:
            w = q[i] / (1.0 - q[i])
            w_sums[b] += w
            wq_sums[b] += w * q[i]
    if big < 0:
        return big, 0.0
    own = ids[big]
    hi, lo = 0.0, 0.0
    for b in range(count + 1):
        if b != own:
            hi, lo = _add(hi, lo, draft[b])
    for i in range(q.shape[0]):
        if ids[i] == own and i != big:
            hi, lo = _add(hi, lo, q[i])
    w_big = q[big] / (hi + lo)
    w_sums[own] += w_big
    wq_sums[own] += w_big * q[big]
    return big, w_big


@_compiled
def signs(draft, w_sums, first, step, count, margin):
    """The sign test (module docstring) of buckets ``0..count``: 1 where ``e > 0`` at every
    rank, -1 where ``e < 0`` (``<= 0`` for bucket 0), 0 (mixed) elsewhere; and every
    bucket's smallest key."""
    sign = np.zeros(count + 2, np.int8)
    lower = np.zeros(count + 2, np.int64)
    bounds = np.zeros(2, np.int64)
    ratio = bounds.view(np.float64)
    c, w = 0.0, 0.0
    for b in range(count + 1):
        c_end, w_end = c + draft[b], w + w_sums[b]
        if b == 0:
            sign[b] = -1
        else:
            bounds[0], bounds[1] = first + ((b - 1) << step), first + (b << step) - 1
            lower[b] = bounds[0]
            if bounds[0] >= NORMAL_KEY and draft[b] < 1.0:  # a member's q is at most the bucket's
                if ratio[0] >= (c_end / (1.0 - draft[b]) + w_end) * (1.0 + margin):
                    sign[b] = 1
                elif ratio[1] <= (c + w) * (1.0 - margin):
                    sign[b] = -1
        c, w = c_end, w_end
    lower[count + 1] = INF_KEY
    return sign, lower


@_compiled
def merged_parameters(p, q, refine, buckets, margin, keys, ids):
    """The merged row of one row (module docstring; ``p``, ``q`` as :func:`merged_row`) with
    the buckets of the tokens ``refine`` (int64) refined, and its parameters: ``(overflow,
    token, bucket, e_p, n, sizes, flux, flux_lo, selection, qt, qe, wt, we, m, blocks)``.
    ``token``, ``bucket``, ``e_p`` describe every entry (token -1 for a block); the first
    ``n`` are the ranked ones (``q > 0``), the rest the ``q = 0`` tokens; ``sizes`` the tokens
    per bucket; then :func:`decoding.verifiers.optimal.pair_levels.ranked_setup` of the
    ranked entries (the flux by cut between entries, ``x`` per entry, the running sums, the
    cut ``m``) and the blocks' parameters for the flux bounds (``yield_decision``'s ``blocks``).
    ``overflow``: a token with ``q > 0`` and an overflowing ratio, the merged row not built
    (the other values empty)."""
    first, step, count, target, draft, sizes = bucket_layout(p, q, buckets, keys, ids)
    size = count + 2
    target, draft, sizes = target[:size], draft[:size], sizes[:size]
    if draft[count + 1] > 0.0:  # a q > 0 token with an overflowing ratio
        empty = np.empty(0)
        return (True, np.empty(0, np.int64), np.empty(0, np.int32), empty, 0, sizes, empty, empty, empty, empty, empty,
                empty, empty, 0, np.empty((0, 3)))
    w_sums, wq_sums = np.zeros(size), np.zeros(size)
    big, w_big = bucket_weights(q, ids, count, draft, w_sums, wq_sums)
    sign, lower = signs(draft, w_sums, first, step, count, margin)
    lowest = lower.view(np.float64)  # the least ratio of each bucket
    chosen = np.zeros(size, np.bool_)
    for b in range(count + 1):
        chosen[b] = sign[b] == 0 and sizes[b] > 0
    for t in refine:
        chosen[ids[t]] = True
    if big >= 0:
        chosen[ids[big]] = True
    keep = np.zeros(size, np.bool_)
    for b in range(size):
        keep[b] = sizes[b] > 0 and not chosen[b]
    token, _, e_p, e_q, bucket = merge_entries(gather(p, q, ids, chosen, sizes), keep, lower, target, draft)
    n = 0  # the ranked entries (q > 0), before the bucket of q = 0
    while n < token.shape[0] and bucket[n] <= count:
        n += 1
    e_w, within, blocks = np.empty(n), np.zeros(n), np.zeros((n, 3))
    for e in range(n):
        if token[e] < 0:
            blocks[e, 0] = 1.0 / (1.0 - e_q[e])  # w / q of a member: at most 1 / (1 - q(block))
            blocks[e, 1] = lowest[bucket[e]] * (1.0 - 2.0 ** -50)  # below every exact ratio of the bucket
            e_w[e] = w_sums[bucket[e]]
            within[e] = max(w_sums[bucket[e]] * e_q[e] - wq_sums[bucket[e]], 0.0)
        else:
            e_w[e] = w_big if token[e] == big else e_q[e] / (1.0 - e_q[e])
    flux, flux_lo, selection = np.empty(n + 1), np.empty(n + 1), np.empty(n)
    qt, qe, wt, we, m, _ = ranked_setup(e_p[:n], e_q[:n], e_w, within, 2.0 ** -52, flux, flux_lo, selection)
    for e in range(min(m, n)):
        if token[e] < 0 and sign[bucket[e]] < 0:
            blocks[e, 2] = 1.0
    return False, token, bucket, e_p, n, sizes, flux, flux_lo, selection, qt, qe, wt, we, m, blocks


@_compiled
def merged_row(p, q, d0, d1, u, buckets, margin, keys, ids):
    """One row of the water-level verifier on a merged row (module docstring): ``p``, ``q``
    ``[V]`` float64 normalised with at least two tokens of positive ``q``, the distinct drafts
    ``d0``, ``d1`` (both ``q > 0``), the row's 3 uniforms, the bucket count, the sign test's
    margin and two int64 work arrays ``[V]``. Returns ``(token, accepted index, outcome)``:
    the index is -1 for the residual; the outcome is :data:`DRAWN`, or why the row goes back
    to the sorted path (then the token is -1)."""
    refine = np.empty(2, np.int64)
    refine[0], refine[1] = d0, d1
    overflow, token, bucket, e_p, n, _, flux, flux_lo, selection, qt, qe, wt, we, m, blocks = \
        merged_parameters(p, q, refine, buckets, margin, keys, ids)
    if overflow:
        return -1, -1, OVERFLOW
    n_all = token.shape[0]
    r0, r1 = -1, -1
    for e in range(n):
        if token[e] == d0:
            r0 = e
        elif token[e] == d1:
            r1 = e
    # the selection (the higher member, unless the pair yields) and its test
    low, high = min(r0, r1), max(r0, r1)
    lower_wins = False
    if not low < m <= high:
        carried = True
        for j in range(low + 1, high + 1):
            if flux[j] <= 0.0:
                carried = False
        if carried:
            f, t_end = first_run(flux, low, high)
            verdict, _ = yield_decision(flux, qt, qe, wt, we, f, t_end, low, high, u[0], blocks)
            if verdict == 0:
                return -1, -1, UNDECIDED
            lower_wins = verdict == 1
    chosen_entry = low if lower_wins else high
    if u[1] * selection[chosen_entry] < e_p[chosen_entry]:
        return token[chosen_entry], 0 if token[chosen_entry] == d0 else 1, DRAWN
    # the residual by inverse CDF over the entries: blocks on H have none, blocks on U
    # p(E) - x(E), tokens max(p - x, 0), the q = 0 tokens their p
    cumulative = np.empty(n_all)
    total = 0.0
    for e in range(n_all):
        if e >= n:
            total += e_p[e]
        elif token[e] >= 0 or e >= m:
            total += max(e_p[e] - selection[e], 0.0)
        cumulative[e] = total
    if not total > 0.0:
        return -1, -1, NO_RESIDUAL
    mass = u[2] * total
    e = 0
    while e < n_all and not cumulative[e] > mass:
        e += 1
    if e == n_all:  # a rounding overshoot: the first entry at which the CDF reaches its total
        e = 0
        while cumulative[e] < total:
            e += 1
    if token[e] >= 0:
        return token[e], -1, DRAWN
    before = cumulative[e - 1] if e > 0 else 0.0
    if e >= n:  # the tokens with q = 0, by id
        return _block_draw(p, q, ids, keys, bucket[e], False, 0.0, 0.0, 0.0, before, mass), -1, DRAWN
    return _block_draw(p, q, ids, keys, bucket[e], True, qt[e] + qe[e], wt[e] + we[e], flux[e + 1] + flux_lo[e + 1],
                       before, mass), -1, DRAWN


@_compiled
def _block_draw(p, q, ids, keys, b, ranked, below_q, below_w, flux_top, before, mass):
    """The residual draw inside the block of bucket ``b`` (on ``U``, or the ``q = 0`` tokens):
    its tokens by rank (by id for ``q = 0``), their residual ``max(p - x, 0)`` (``x = sigma +
    F(a + 1) - F(a)``, ``sigma`` from the sums below the block, the flux walked down from the
    block's upper end, as the sorted path's; ``p`` for ``q = 0``), added to ``before`` (the
    CDF below the block) until it passes ``mass``; a rounding overshoot goes to the block's
    last token of positive residual."""
    size = 0
    for i in range(ids.shape[0]):
        size += ids[i] == b
    members = np.empty(size, np.int64)
    k = 0
    for i in range(ids.shape[0]):
        if ids[i] == b:
            members[k] = i
            k += 1
    residual = np.empty(size)
    if ranked:
        members = members[np.argsort(keys[members], kind="mergesort")]  # by key, ties by id
        sigma = np.empty(size)
        c, w = below_q, below_w
        for j in range(size):
            a = members[j]
            w_a = q[a] / (1.0 - q[a])  # the token with q > 1/2 is never in a block
            sigma[j] = w_a * c + q[a] * w
            c += q[a]
            w += w_a
        f = flux_top
        for j in range(size - 1, -1, -1):
            a = members[j]
            f_below = max(0.0, f - (p[a] - sigma[j]))
            residual[j] = max(p[a] - (sigma[j] + f - f_below), 0.0)
            f = f_below
    else:
        for j in range(size):
            residual[j] = p[members[j]]
    total, last = before, size - 1
    for j in range(size):
        if residual[j] > 0.0:
            total += residual[j]
            last = j
            if total > mass:
                return members[j]
    return members[last]


__all__ = ["BUCKETS", "DRAWN", "NO_RESIDUAL", "OVERFLOW", "SIGN_MARGIN", "UNDECIDED", "bucket_weights",
           "merged_parameters", "merged_row", "signs"]
