"""The merged rows of the optimal verifier (docs/optimal-verifier.md section 5.2), one row at
a time in compiled code (numba): the cut into ratio buckets, the sign test, the gathering
of the refined buckets' tokens, the merged row, its parameters and the draw, repeated while
the draw reads a merged entry. :mod:`decoding.verifiers.optimal_buckets` calls
:func:`verify_rows` on the rows a call leaves to the full path.

Every step is the batched torch code of :mod:`decoding.verifiers.optimal` written for one
row, in the same floating-point operations in the same order: :func:`ranked_parameters` is
:func:`decoding.verifiers.optimal.ranked_parameters` (cumulative sums left to right, as
torch's on the CPU; powers by the same binary exponentiation; the first minimiser) and
:func:`draw` is :func:`decoding.verifiers.optimal.verify_rows` (steps 3-5: the
positions' intervals, partners and moves, the highest block, the test, the residual and the
holder). Tests: on full sorted rows, :func:`power` and :func:`ranked_parameters` equal the
torch functions bit for bit and :func:`draw` equals the torch draw draw for draw
(``tests/decoding/test_verifier_optimal_merged.py``, ``test_every_bucket_refined_is_the_full_path``
in ``tests/decoding/test_verifier_optimal_buckets.py``); the whole path equals the sorted
path draw for draw (``tests/decoding/test_verifier_optimal_buckets.py``); the cut and the
gather equal torch versions bit for bit (``tests/decoding/test_verifier_optimal_numba.py``).

A row runs start to end in one call, so its keys and bucket ids (``V`` entries each, in
the caller's scratch) are still in cache when the gather reads them, and no torch
operation of fixed cost runs per round. The calls release the GIL (``nogil``): the caller
runs rows on several threads at once. numba checks no bounds: the arrays of one row share
its length, the draft tokens are checked to lie in ``[0, V)`` by the caller, and every other
index is in range by construction (bucket ids in ``0..buckets + 1``, entries of the merged
row by the searches' clamps).
"""
from __future__ import annotations

import numba
import numpy as np

from .optimal_numba import INF_KEY, bucket_histograms, chosen_members, merge_row, ratio_key_range

#: The bits of the smallest normal float64: below it a float ratio can be off by more than a
#: relative ``2^-53``, so the sign test leaves those buckets mixed.
NORMAL_KEY = 1 << 52

_compiled = numba.njit(cache=True, nogil=True, error_model="numpy")


@_compiled
def power(value, k):
    """``value**k`` by binary exponentiation, multiplying in the order of
    :func:`decoding.verifiers.optimal.power` (the same float)."""
    result, square, started = 1.0, value, False
    while k:
        if k & 1:
            result = result * square if started else square
            started = True
        k >>= 1
        if k:
            square = square * square
    return result


@_compiled
def bucket_layout(p, q, buckets, keys, ids):
    """The ratio keys of one row cut into at most ``buckets`` buckets: writes the keys and the
    bucket ids (``ids``) of every token; returns the smallest positive finite key ``first``,
    the ``step`` (bucket ``b`` in ``1..count`` holds the keys ``first + ((b - 1) << step)``
    up to the next bucket's), ``count``, and per bucket (arrays of ``buckets + 2``) the sums
    of ``p`` and ``q`` (float64, in token order) and the number of tokens. Bucket 0 holds the
    keys 0, bucket ``count + 1`` the keys from ``inf`` on."""
    first, last = ratio_key_range(p, q, keys)
    step, count = 0, 0
    if first < INF_KEY:  # a positive finite key
        span = (last - first) // buckets
        while span:  # step = bit length of span: (last - first) >> step < buckets
            step += 1
            span >>= 1
        count = ((last - first) >> step) + 1
    size = buckets + 2
    target, draft = np.zeros(size), np.zeros(size)
    sizes = np.zeros(size, np.int64)
    bucket_histograms(p, q, keys, first, step, count, ids, target, draft, sizes)
    return first, step, count, target, draft, sizes


@_compiled
def cut(p, q, k, buckets, margin, keys, ids):
    """The cut of one row into at most ``buckets`` ratio buckets and the sign test
    (docs/optimal-verifier.md, Lemma 7).

    Writes the keys and the bucket ids (``ids``) of every token; returns per bucket (arrays of
    ``buckets + 2``) the sums of ``p`` and ``q`` (float64, in token order), the number of
    tokens, the smallest key a bucket can hold and its sign: 1 where ``e > 0`` at every rank
    (``e >= 0`` for the bucket of the keys ``inf`` holding no ``q > 0`` token), -1 where
    ``e < 0`` at every rank, 0 (mixed) elsewhere. Bucket 0 holds the keys 0, buckets
    ``1..count`` the positive finite keys, ``((key - smallest) >> step) + 1``, bucket
    ``count + 1`` the keys from ``inf`` on."""
    first, step, count, target, draft, sizes = bucket_layout(p, q, buckets, keys, ids)
    size = buckets + 2
    lower, upper = np.zeros(size, np.int64), np.zeros(size, np.int64)
    low_ratio, high_ratio = lower.view(np.float64), upper.view(np.float64)  # the keys as floats
    sign = np.zeros(size, np.int8)
    mass, total = draft.sum(), target.sum()
    scale = mass / total
    running, d_start = 0.0, 0.0 if k > 1 else 1.0
    for b in range(count + 2):
        running += draft[b]
        d_end = k * power(running / mass, k - 1) if k > 1 else 1.0  # k C_end^(k-1)
        if b == 0:
            sign[b] = -1 if target[b] == 0 else 0  # keys 0: p = 0, e = -sigma < 0
        elif b == count + 1:
            lower[b] = INF_KEY
            sign[b] = 1 if draft[b] == 0 else 0  # keys inf, q = 0 only: e = p >= 0
        else:
            lower[b] = first + ((b - 1) << step)
            upper[b] = first + (b << step) - 1  # the largest key of the bucket
            if lower[b] >= NORMAL_KEY:  # the float ratio is within a relative 2^-53 of the exact one
                if low_ratio[b] * scale >= d_end * (1 + margin):
                    sign[b] = 1
                elif high_ratio[b] * scale <= d_start * (1 - margin):  # never both when margin >= 0
                    sign[b] = -1
        d_start = d_end
    return target, draft, sizes, lower, sign


@_compiled
def _cumulative(values, out):
    """``out[j] = values[0] + ... + values[j]``, added left to right (torch's CPU ``cumsum``)."""
    total = 0.0
    for j in range(values.shape[0]):
        total += values[j]
        out[j] = total
    return out


@_compiled
def ranked_parameters(p_r, q_r, k):
    """Step 1's sums, the cut and step 2 of :mod:`decoding.verifiers.optimal` for one row by
    rank (``p_r``, ``q_r`` float64, unnormalised): returns ``own`` (``sigma``), ``gains``
    (``G``), ``losses`` (``L``), ``target_cumulative`` (``P`` normalised) and the scalars
    ``cut``, ``support``, ``G_H``, ``L_H``, ``F_U``, ``F_H``, the two masses; the floats of
    :func:`decoding.verifiers.optimal.ranked_parameters`."""
    n = p_r.shape[0]
    c_power = _cumulative(q_r, np.empty(n))
    draft_mass = c_power[n - 1]
    for j in range(n):
        c_power[j] = power(c_power[j] / draft_mass, k)  # C_j^k
    own = np.empty(n)
    own[0] = c_power[0]
    for j in range(1, n):
        own[j] = c_power[j] - c_power[j - 1]  # sigma
    target_cumulative = _cumulative(p_r, np.empty(n))
    target_mass = target_cumulative[n - 1]
    best, lowest = 0, np.inf
    for j in range(n):
        target_cumulative[j] /= target_mass
        score = target_cumulative[j] - c_power[j]  # f(H_{j+1}) - 1
        if score < lowest or j == 0:
            best, lowest = j, score  # the first minimiser
    cut = best + 1 if lowest < 0 else 0
    gains, losses = np.empty(n), np.empty(n)
    gain, loss, support = 0.0, 0.0, 0
    for j in range(n):
        excess = p_r[j] / target_mass - own[j]
        gain += max(excess, 0.0)
        loss += max(-excess, 0.0)
        gains[j], losses[j] = gain, loss
        support += q_r[j] > 0
    gains_h = gains[cut - 1] if cut > 0 else 0.0
    losses_h = losses[cut - 1] if cut > 0 else 0.0
    flow_u = min(gains[support - 1] - gains_h, losses[n - 1] - losses_h)
    flow_h = min(gains_h, losses_h)
    return own, gains, losses, target_cumulative, cut, support, gains_h, losses_h, flow_u, flow_h, target_mass, draft_mass


@_compiled
def _numbered(members, pick):
    """Index of member number ``pick`` (from 0, in position order) of the bool ``members``."""
    seen = -1
    for j in range(members.shape[0]):
        if members[j]:
            seen += 1
            if seen == pick:
                return j
    return 0


@_compiled
def block_mean_bounds(q_r, entry, draft_mass, k):
    """``(k C_start^(k-1), k C_end^(k-1))`` at the ends of ``entry`` (``C`` its ``q`` mass before
    and through it, normalised, summed left to right as :func:`ranked_parameters` sums them):
    in exact arithmetic, bounds on ``d`` (the mean of ``k v^(k-1)`` over a rank's block) at
    every rank that a merged entry stands for (docs/optimal-verifier.md, Lemma 8, a partner in a
    merged entry)."""
    before = 0.0
    for j in range(entry):
        before += q_r[j]
    if k == 1:
        return 1.0, 1.0
    return k * power(before / draft_mass, k - 1), k * power((before + q_r[entry]) / draft_mass, k - 1)


@_compiled
def draw(own, gains, losses, target_cumulative, cut, support, gains_h, losses_h, flow_u, flow_h, target_mass,
         draft_mass, order, q_r, p_drafted, q_drafted, drafts, ranks, u):
    """Steps 3-5 of :mod:`decoding.verifiers.optimal` for one row, given its parameters
    (:func:`ranked_parameters`), its entries' tokens ``order`` and ``q`` (``q_r``), ``p`` and
    ``q`` at the drafts (input dtype), the drafts, their ranks and the row's ``2k + 3``
    uniforms: returns the token, the accepted index (-1 on rejection) and ``reads``, ``k + 1``
    entries whose exact ranks the draw may need: per position, its partner when that is a
    merged entry (``order < 0``) and the bounds on ``d`` over its ranks
    (:func:`block_mean_bounds`) leave the move open, or a moved block ties there with another
    highest one (Lemma 8 there); then the residual rank on rejection; -1 elsewhere. The caller
    refines the merged entries among them and draws again. The floats are those of
    :func:`decoding.verifiers.optimal.verify_rows`."""
    k, n = drafts.shape[0], order.shape[0]
    p_tokens = np.empty(k)
    selection = np.empty(k)
    lower = np.zeros(k, np.bool_)
    blocks = np.empty(k, np.int64)
    reads = np.full(k + 1, -1, np.int64)
    for j in range(k):
        r = ranks[j]
        p_t, q_t = np.float64(p_drafted[j]) / target_mass, np.float64(q_drafted[j]) / draft_mass
        p_tokens[j] = p_t
        own_r = own[r]
        excess = p_t - own_r
        gain, surplus, in_u = excess > 0, excess < 0, r >= cut
        g_hi, l_hi = gains[r], losses[r]
        g_lo = gains[r - 1] if r > 0 else 0.0
        l_lo = losses[r - 1] if r > 0 else 0.0
        if in_u:
            start = g_lo - gains_h if gain else l_lo - losses_h
            end = min(g_hi - gains_h if gain else l_hi - losses_h, flow_u)
        else:
            start = gains_h - g_hi if gain else losses_h - l_hi
            end = min(gains_h - g_lo if gain else losses_h - l_lo, flow_h)
        matched = max(end - start, 0.0) if gain or surplus else 0.0
        point = start + u[j] * matched
        if in_u:
            if gain:
                partner = np.searchsorted(losses, point + losses_h, side="right")
            else:
                partner = np.searchsorted(gains, point + gains_h, side="right")
        elif gain:
            partner = np.searchsorted(losses, losses_h - point, side="left")
        else:
            partner = np.searchsorted(gains, gains_h - point, side="left")
        partner = min(max(partner, 0), n - 1)
        valid = partner != r and (partner >= cut) == in_u and partner < support
        scaled = u[k + j] * q_t
        if order[partner] >= 0:  # a rank: d there is known
            gap = abs(own[partner] / (q_r[partner] / draft_mass) - own_r / q_t)
            move = matched > 0 and valid and scaled * gap < matched
        else:  # a merged entry: the move is decided when the bounds on d over its ranks decide it
            d_low, d_high = block_mean_bounds(q_r, partner, draft_mass, k)
            d_r = own_r / q_t
            gap_low, gap_high = max(d_low - d_r, d_r - d_high, 0.0), max(abs(d_high - d_r), abs(d_low - d_r))
            move = matched > 0 and valid and scaled * gap_high < matched
            if matched > 0 and valid and not move and scaled * gap_low < matched:
                reads[j] = partner  # undecided: its bucket is refined
        selection[j] = max(own_r + (matched if gain else -matched), 0.0)
        lower[j] = gain
        blocks[j] = partner if move else r
    top = blocks == blocks.max()
    count = top.sum()
    if count > 1 and order[blocks.max()] < 0:  # moved into one merged entry: their ranks there decide
        for j in range(k):
            if top[j]:
                reads[j] = blocks[j]
    at = _numbered(top, min(int(np.floor(u[2 * k] * count)), count - 1))
    accept = lower[at] or u[2 * k + 1] * selection[at] < p_tokens[at]
    u5 = u[2 * k + 2]
    if accept:
        chosen = drafts[at]
        holders = drafts == chosen
        count = holders.sum()
        return chosen, _numbered(holders, min(int(np.floor(u5 * count)), count - 1)), reads
    g_end, p_end = gains[n - 1], target_cumulative[n - 1]
    low = gains_h + flow_u
    total = g_end - low
    if total > 0:
        residual = np.searchsorted(gains, min(low + u5 * total, np.nextafter(g_end, -np.inf)), side="right")
    else:
        residual = np.searchsorted(target_cumulative, min(u5 * p_end, np.nextafter(p_end, -np.inf)), side="right")
    residual = min(residual, n - 1)
    reads[k] = residual
    return order[residual], -1, reads


@_compiled
def gather(p, q, ids, chosen, sizes):
    """The tokens of the ``chosen`` buckets (:func:`decoding.verifiers.optimal_numba.chosen_members`):
    their ids, keys, ``p``, ``q`` and buckets."""
    size = 0
    for b in range(chosen.shape[0]):
        if chosen[b]:
            size += sizes[b]
    members = (np.empty(size, np.int64), np.empty(size, np.int64), np.empty(size), np.empty(size), np.empty(size, np.int32))
    chosen_members(p, q, ids, chosen, *members)
    return members


@_compiled
def merged_row(members, keep, lower, target, draft):
    """The merged row (:func:`decoding.verifiers.optimal_numba.merge_row`): the ``keep``
    buckets one entry each, the ``members`` (:func:`gather`) one entry each, by key; returns
    each entry's token (-1 for a bucket entry), key, ``p``, ``q`` and bucket."""
    n = keep.sum() + members[0].shape[0]
    row = (np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n), np.empty(n), np.empty(n, np.int32))
    merge_row(keep, lower, target, draft, *members, *row)
    return row


@_compiled
def verify_row(p, q, drafts, u, buckets, margin, keys, ids):
    """The optimal verifier's draw for one row on merged rows (docs/optimal-verifier.md,
    Theorem 4): the cut; the mixed buckets and the drafts' refined; the merged row, its
    parameters and the draw; while the draw read a merged entry, that bucket refined and the
    draw repeated with the same uniforms. ``keys`` (int64) and ``ids`` (int32) are work
    arrays of the row's length. Returns the token, the accepted index and the number of
    draws."""
    k = drafts.shape[0]
    target, draft, sizes, lower, sign = cut(p, q, k, buckets, margin, keys, ids)
    present = sizes > 0
    refined = present & (sign == 0)
    for j in range(k):
        refined[ids[drafts[j]]] = True
    members = gather(p, q, ids, refined, sizes)
    p_drafted, q_drafted = np.empty(k, p.dtype), np.empty(k, q.dtype)
    for j in range(k):
        p_drafted[j], q_drafted[j] = p[drafts[j]], q[drafts[j]]
    rounds = 0
    while True:
        rounds += 1
        order, _, p_r, q_r, entry_bucket = merged_row(members, present & ~refined, lower, target, draft)
        ranks = np.empty(k, np.int64)
        for j in range(k):
            ranks[j] = np.nonzero(order == drafts[j])[0][0]
        token, index, reads = draw(*ranked_parameters(p_r, q_r, k), order, q_r, p_drafted, q_drafted, drafts, ranks, u)
        more = np.zeros(refined.shape[0], np.bool_)
        for read in reads:
            if read >= 0 and order[read] < 0:
                more[entry_bucket[read]] = True
        if not more.any():
            return token, index, rounds
        refined |= more
        found = gather(p, q, ids, more, sizes)
        members = (np.concatenate((members[0], found[0])), np.concatenate((members[1], found[1])),
                   np.concatenate((members[2], found[2])), np.concatenate((members[3], found[3])),
                   np.concatenate((members[4], found[4])))


@_compiled
def verify_rows(p, q, rows, drafts, uniforms, buckets, margin, keys, ids, tokens, accepted_index, start, step):
    """:func:`verify_row` for the rows ``rows[i]`` of ``p`` and ``q``, ``i = start, start +
    step, ...``, with the drafts and uniforms ``[i]``, into ``tokens[i]`` and
    ``accepted_index[i]`` (one thread's share of a call)."""
    for i in range(start, rows.shape[0], step):
        row = rows[i]
        tokens[i], accepted_index[i], _ = verify_row(p[row], q[row], drafts[i], uniforms[i], buckets, margin, keys, ids)
