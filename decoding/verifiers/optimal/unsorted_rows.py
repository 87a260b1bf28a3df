"""The merged rows of the optimal verifier (docs/optimal-verifier.md#merged-rows-without-the-sort), one row at
a time in compiled code (numba): the cut into ratio buckets, the sign test, the gathering
of the refined buckets' tokens, the merged row, its parameters and the draw, repeated while
the draw reads a merged entry. :mod:`decoding.verifiers.optimal.unsorted` calls
:func:`verify_rows` on the rows a call leaves to the full path.

A bucket to refine with more than :data:`SPLIT_TOKENS` tokens is not gathered but split into
runs of consecutive ranks (:func:`split_runs`, by finer key bits, or by id where all its keys
are equal, as the stable sort orders ties): on degenerate rows one bucket holds most of the
vocabulary (``p = 0`` of a one-hot target, ``q = 0`` of a one-hot draft, every ratio equal
when ``p = q``), and gathering it would sort it. The runs are merged entries like buckets:
one of one sign stays merged (a sub-run of a run of one sign has that sign), a mixed one or
one holding a draft or read by the draw is refined again, so a row costs a few passes over
the vocabulary whatever its family.

Every step is the batched torch code of :mod:`decoding.verifiers.optimal.iid` written for one
row, in the same floating-point operations in the same order: :func:`ranked_parameters` is
:func:`decoding.verifiers.optimal.iid.ranked_parameters` (cumulative sums left to right, as
torch's on the CPU; powers by the same binary exponentiation; the first minimiser) and
:func:`draw` is :func:`decoding.verifiers.optimal.iid.verify_rows` (steps 3-5: the
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
index is in range by construction (bucket ids in ``0..buckets + 1``, the new runs of a split
by clamps, entries of the merged row by the searches' clamps).
"""
from __future__ import annotations

import numba
import numpy as np

from .row_passes import INF_KEY, bucket_histograms, chosen_members, merge_row, ratio_key_range

#: The bits of the smallest normal float64: below it a float ratio can be off by more than a
#: relative ``2^-53``, so the sign test leaves those buckets mixed.
NORMAL_KEY = 1 << 52

_compiled = numba.njit(cache=True, nogil=True, error_model="numpy")


@_compiled
def power(value, k):
    """``value**k`` by binary exponentiation, multiplying in the order of
    :func:`decoding.verifiers.optimal.iid.power` (the same float)."""
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
def run_sign(key_lo, key_hi, ratio_lo, ratio_hi, target, draft, scale, d_start, d_end, margin):
    """The sign test (docs/optimal-verifier-proofs.md#the-sign-test-of-a-bucket) of a run of consecutive ranks whose
    keys lie in ``[key_lo, key_hi]`` (``ratio_lo``, ``ratio_hi`` the same bits as floats), with
    sums ``target`` and ``draft`` of ``p`` and ``q``, ``scale = M / T`` and ``d`` bounded by
    ``[d_start, d_end]`` (``k C^(k-1)`` at its ends): 1 where ``e > 0`` at every rank (``e >= 0``
    for keys ``inf`` and no ``q > 0`` token), -1 where ``e < 0`` at every rank, 0 (mixed)
    elsewhere."""
    if key_hi == 0:
        return -1 if target == 0 else 0  # keys 0: p = 0, e = -sigma < 0
    if key_lo >= INF_KEY:
        return 1 if draft == 0 else 0  # keys inf, q = 0 only: e = p >= 0
    if key_lo >= NORMAL_KEY:  # the float ratio is within a relative 2^-53 of the exact one
        if ratio_lo * scale >= d_end * (1 + margin):
            return 1
        if ratio_hi * scale <= d_start * (1 - margin):  # never both when margin >= 0
            return -1
    return 0


@_compiled
def cut(p, q, k, buckets, margin, keys, ids):
    """The cut of one row into at most ``buckets`` ratio buckets and the sign test
    (docs/optimal-verifier-proofs.md#the-sign-test-of-a-bucket).

    Writes the keys and the bucket ids (``ids``) of every token; returns per bucket (arrays of
    ``buckets + 2``) the sums of ``p`` and ``q`` (float64, in token order), the number of
    tokens, the smallest and the largest key a bucket can hold and its sign
    (:func:`run_sign`). Bucket 0 holds the keys 0, buckets ``1..count`` the positive finite
    keys, ``((key - smallest) >> step) + 1``, bucket ``count + 1`` the keys from ``inf`` on."""
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
        if b == count + 1:
            lower[b], upper[b] = INF_KEY, INF_KEY
        elif b > 0:
            lower[b] = first + ((b - 1) << step)
            upper[b] = first + (b << step) - 1  # the largest key of the bucket
        sign[b] = run_sign(lower[b], upper[b], low_ratio[b], high_ratio[b], target[b], draft[b], scale, d_start, d_end,
                           margin)
        d_start = d_end
    return target, draft, sizes, lower, upper, sign


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
    """Step 1's sums, the cut and step 2 of :mod:`decoding.verifiers.optimal.iid` for one row by
    rank (``p_r``, ``q_r`` float64, unnormalised): returns ``own`` (``sigma``), ``gains``
    (``G``), ``losses`` (``L``), ``target_cumulative`` (``P`` normalised) and the scalars
    ``cut``, ``support``, ``G_H``, ``L_H``, ``F_U``, ``F_H``, the two masses; the floats of
    :func:`decoding.verifiers.optimal.iid.ranked_parameters`."""
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
    every rank that a merged entry stands for (docs/optimal-verifier-proofs.md#a-partner-in-a-merged-entry, a partner in a
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
    """Steps 3-5 of :mod:`decoding.verifiers.optimal.iid` for one row, given its parameters
    (:func:`ranked_parameters`), its entries' tokens ``order`` and ``q`` (``q_r``), ``p`` and
    ``q`` at the drafts (input dtype), the drafts, their ranks and the row's ``2k + 3``
    uniforms: returns the token, the accepted index (-1 on rejection) and ``reads``, ``k + 1``
    entries whose exact ranks the draw may need: per position, its partner when that is a
    merged entry (``order < 0``) and the bounds on ``d`` over its ranks
    (:func:`block_mean_bounds`) leave the move open, or a moved block ties there with another
    highest one (a partner in a merged entry, there); then the residual rank on rejection; -1 elsewhere. The caller
    refines the merged entries among them and draws again. The floats are those of
    :func:`decoding.verifiers.optimal.iid.verify_rows`."""
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
    """The tokens of the ``chosen`` buckets (:func:`decoding.verifiers.optimal.row_passes.chosen_members`):
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
    """The merged row (:func:`decoding.verifiers.optimal.row_passes.merge_row`): the ``keep``
    buckets one entry each, the ``members`` (:func:`gather`) one entry each, by key; returns
    each entry's token (-1 for a bucket entry), key, ``p``, ``q`` and bucket."""
    n = keep.sum() + members[0].shape[0]
    row = (np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n), np.empty(n), np.empty(n, np.int32))
    merge_row(keep, lower, target, draft, *members, *row)
    return row


#: A bucket (or run) to refine with more tokens than this is split into at most
#: :data:`SPLIT_FANOUT` runs of consecutive ranks instead of entering the merged row token by
#: token (docs/optimal-verifier.md#merged-rows-without-the-sort): one pass over the row instead
#: of a sort of its tokens.
SPLIT_TOKENS = 4096
#: Runs per split bucket, at most.
SPLIT_FANOUT = 1024

# The columns of a row's run table (:func:`verify_row`): one row per bucket or run of ranks.
SIZE, KEY_LO, KEY_HI, ID_LO, ID_HI, FIRST_KEY, FIRST_ID, SIGN, STATE = range(9)
#: ``SIGN`` of a run not yet tested (a run of a mixed bucket).
UNTESTED = 2
#: ``STATE``: one entry of the merged row, its tokens entries of their own, or split into runs.
KEPT, EXPANDED, SPLIT = 0, 1, 2
_NO_KEY = np.iinfo(np.int64).max


@_compiled
def _no_members():
    """No gathered tokens (as :func:`gather`)."""
    return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0), np.empty(0), np.empty(0, np.int32)


@_compiled
def bucket_runs(lower, upper, sizes, sign, target, draft, vocab):
    """The run table of a cut (:func:`cut`): per bucket its size, its key bounds, the id bounds
    ``0..V-1``, its place in rank order (its lower key, before every token of that key), its
    sign and state; and its sums of ``p`` and ``q``."""
    n = lower.shape[0]
    table = np.zeros((n, 9), np.int64)
    sums = np.empty((n, 2))
    for b in range(n):
        table[b, SIZE], table[b, KEY_LO], table[b, KEY_HI] = sizes[b], lower[b], upper[b]
        table[b, ID_LO], table[b, ID_HI], table[b, FIRST_KEY], table[b, FIRST_ID] = 0, vocab - 1, lower[b], -1
        table[b, SIGN], table[b, STATE] = sign[b], KEPT
        sums[b, 0], sums[b, 1] = target[b], draft[b]
    return table, sums


@_compiled
def _id_intervals(table, chosen):
    """The id ranges ``[ID_LO, ID_HI]`` of the ``chosen`` runs, overlapping ones merged, in
    order: ``[m, 2]``."""
    picked = np.nonzero(chosen)[0]
    starts = table[picked, ID_LO]
    ends = table[picked, ID_HI]
    by_start = np.argsort(starts)
    out = np.empty((picked.shape[0], 2), np.int64)
    m = -1
    for j in by_start:
        if m >= 0 and starts[j] <= out[m, 1] + 1:
            out[m, 1] = max(out[m, 1], ends[j])
        else:
            m += 1
            out[m, 0], out[m, 1] = starts[j], ends[j]
    return out[: m + 1]


@_compiled
def _move_tokens(p, q, keys, run_ids, run, first_new, origin, shift, fanout, start, end, size, id_lo, id_hi, key_lo,
                 key_hi, first_id, p_sum, q_sum):
    """The pass of :func:`split_runs` for one run split by key: its tokens (ids ``start..end``,
    among others') to new runs ``first_new + c``, ``c = (key - origin) >> shift``, and the
    sums, key and id ranges of each new run (arrays by ``c``). One branch per stretch of tokens
    of one new run, not per token (a random mix of runs would mispredict one branch in two):
    the selections are arithmetic, the other runs' tokens add 0, and a stretch's sums stay in
    registers."""
    current, count, p_run, q_run, low, high, first, last = -1, 0, 0.0, 0.0, _NO_KEY, -1, 0, 0
    for i in range(start, end + 1):
        g, p_i, q_i = run_ids[i], np.float64(p[i]), np.float64(q[i])  # loaded before any selection
        moved = g == run
        key = min(keys[i], INF_KEY)  # the key the sorted path gives the token (q <= 0: inf or NaN, at least INF_KEY)
        c = min(max((key - origin) >> shift, 0), fanout - 1)
        c = current + moved * (c - current)
        if c != current:  # a new stretch, at a token of the run
            if current >= 0:
                _close_stretch(current, count, p_run, q_run, low, high, first, last, size, id_lo, id_hi, key_lo, key_hi,
                               first_id, p_sum, q_sum)
            current, count, p_run, q_run, low, high, first = c, 0, 0.0, 0.0, _NO_KEY, -1, i
            id_lo[c] = min(id_lo[c], i)
        run_ids[i] = g + moved * (first_new + c - g)
        count += moved
        p_run += p_i * moved
        q_run += q_i * moved
        last += moved * (i - last)
        mine = low + moved * (key - low)
        below = mine < low
        first += below * (i - first)  # the stretch's first token in rank order: (key, id) smallest
        low += below * (mine - low)
        high = max(high, key * moved)
    if current >= 0:
        _close_stretch(current, count, p_run, q_run, low, high, first, last, size, id_lo, id_hi, key_lo, key_hi, first_id,
                       p_sum, q_sum)


@_compiled
def _close_stretch(c, count, p_run, q_run, low, high, first, last, size, id_lo, id_hi, key_lo, key_hi, first_id, p_sum,
                   q_sum):
    """Add a stretch's count, sums and key and id ranges to new run ``c``."""
    size[c] += count
    p_sum[c] += p_run
    q_sum[c] += q_run
    id_hi[c] = max(id_hi[c], last)
    if low < key_lo[c]:  # an earlier stretch has the smaller ids: it keeps a tie
        key_lo[c], first_id[c] = low, first
    key_hi[c] = max(key_hi[c], high)


@_compiled
def _tighten_key_ranges(keys, run_ids, table, loose):
    """Set ``KEY_LO``, ``KEY_HI`` of the ``loose`` runs to the smallest and largest key of their
    tokens (one pass; a bucket's bounds can hold a single key: ratios of few values)."""
    low, high = np.full(table.shape[0], _NO_KEY), np.full(table.shape[0], -1)
    for i in range(run_ids.shape[0]):
        g, key = run_ids[i], min(keys[i], INF_KEY)
        low[g], high[g] = min(low[g], key), max(high[g], key)
    for g in np.nonzero(loose)[0]:
        table[g, KEY_LO], table[g, KEY_HI] = low[g], high[g]


@_compiled
def _move_by_id(p, q, run_ids, slot_of, slot_base, n, shift, start, end, size, p_sum, q_sum):
    """The pass of :func:`split_runs` for runs of one key each with the same id range
    ``start..end``, all at once (``slot_of``: run -> its slot, ``len(slot_base)`` for other
    runs): a token of slot ``s`` to new run ``n + slot_base[s] + ((id - start) >> shift)``,
    summed into ``size``, ``p_sum``, ``q_sum`` at ``slot_base[s] + c``. Per token a few additions
    into a slot of small arrays, and one branch per ``2^shift`` ids (where the new runs change)."""
    slots = slot_base.shape[0]
    count, p_run, q_run = np.zeros(slots + 1, np.int64), np.zeros(slots + 1), np.zeros(slots + 1)
    current = 0
    for i in range(start, end + 1):
        g, p_i, q_i = run_ids[i], np.float64(p[i]), np.float64(q[i])
        c = (i - start) >> shift
        if c != current:
            _close_slots(current, count, p_run, q_run, slot_base, size, p_sum, q_sum)
            current = c
        s = slot_of[g]
        run_ids[i] = g + (s < slots) * (n + slot_base[min(s, slots - 1)] + c - g)
        count[s] += 1
        p_run[s] += p_i
        q_run[s] += q_i
    _close_slots(current, count, p_run, q_run, slot_base, size, p_sum, q_sum)


@_compiled
def _close_slots(c, count, p_run, q_run, slot_base, size, p_sum, q_sum):
    """Add the slots' counts and sums to their new runs ``slot_base + c`` and empty them."""
    for s in range(slot_base.shape[0]):
        size[slot_base[s] + c] += count[s]
        p_sum[slot_base[s] + c] += p_run[s]
        q_sum[slot_base[s] + c] += q_run[s]
    count[:] = 0
    p_run[:] = 0.0
    q_run[:] = 0.0


@_compiled
def split_runs(p, q, keys, run_ids, table, sums, chosen, split_tokens, fanout):
    """Refine the ``chosen`` runs of a row (module docstring, large buckets): one of at most
    ``split_tokens`` tokens is gathered (its tokens become entries, ``STATE`` = ``EXPANDED``);
    a larger one is split into at most ``fanout`` runs of
    consecutive ranks, by the high bits of ``key - KEY_LO`` when its keys differ, else (all its
    ranks one key, ordered by id as the stable sort orders them) by those of ``id - ID_LO``.
    A bucket's key bounds are first narrowed to its tokens' keys (:func:`_tighten_key_ranges`),
    so a bucket of one key is split by id at once. The gather reads the ids the gathered runs
    span (``[ID_LO, ID_HI]``: the whole row for a bucket, a short stretch for a run split by
    id); a split by key is one pass over the ids of its run (:func:`_move_tokens`), the splits by
    id of runs with one id range one pass for all (:func:`_move_by_id`). A new run inherits the sign of a one-sign run (a sub-run of a run of
    one sign has that sign); the runs of a mixed one are ``UNTESTED``. Returns the grown table
    and sums and the gathered tokens (as :func:`gather`)."""
    n = table.shape[0]
    base, shift, origin = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
    by_id, expand = np.zeros(n, np.bool_), np.zeros(n, np.bool_)
    large = chosen & (table[:, SIZE] > split_tokens)
    loose = large & (table[:, FIRST_ID] < 0) & (table[:, KEY_LO] < table[:, KEY_HI])  # a bucket's bounds
    if loose.any():
        _tighten_key_ranges(keys, run_ids, table, loose)
    extra, gathered = 0, 0
    for g in range(n):
        if not chosen[g]:
            continue
        if table[g, SIZE] <= split_tokens:
            expand[g] = True
            gathered += table[g, SIZE]
            table[g, STATE] = EXPANDED
            continue
        by_id[g] = table[g, KEY_LO] == table[g, KEY_HI]
        origin[g] = table[g, ID_LO] if by_id[g] else table[g, KEY_LO]
        span = ((table[g, ID_HI] if by_id[g] else table[g, KEY_HI]) - origin[g]) // fanout
        while span:  # (full span) >> shift < fanout
            shift[g] += 1
            span >>= 1
        base[g] = extra
        extra += fanout
        table[g, STATE] = SPLIT
    ids, member_keys, target, draft, runs = (np.empty(gathered, np.int64), np.empty(gathered, np.int64),
                                             np.empty(gathered), np.empty(gathered), np.empty(gathered, np.int32))
    size, id_lo, id_hi = np.zeros(extra, np.int64), np.full(extra, _NO_KEY), np.zeros(extra, np.int64)
    key_lo, key_hi, first_id = np.full(extra, _NO_KEY), np.full(extra, -1), np.zeros(extra, np.int64)
    p_sum, q_sum = np.zeros(extra), np.zeros(extra)
    m = 0
    for stretch in _id_intervals(table, expand):
        for i in range(stretch[0], stretch[1] + 1):
            g = run_ids[i]
            if expand[g] and m < gathered:
                ids[m], member_keys[m], target[m], draft[m], runs[m] = i, min(keys[i], INF_KEY), p[i], q[i], g
                m += 1
    moved = chosen & ~expand
    for g in np.nonzero(moved & ~by_id)[0]:
        at = base[g]
        _move_tokens(p, q, keys, run_ids, g, n + at, origin[g], shift[g], fanout, table[g, ID_LO], table[g, ID_HI],
                     size[at:], id_lo[at:], id_hi[at:], key_lo[at:], key_hi[at:], first_id[at:], p_sum[at:], q_sum[at:])
    for g in np.nonzero(moved & by_id)[0]:
        if not moved[g]:
            continue
        group = np.nonzero(moved & by_id & (table[:, ID_LO] == table[g, ID_LO]) & (table[:, ID_HI] == table[g, ID_HI]))[0]
        slot_of = np.full(n + extra, group.shape[0], np.int64)  # tokens already moved are in new runs
        slot_of[group] = np.arange(group.shape[0])
        start, end = table[g, ID_LO], table[g, ID_HI]
        _move_by_id(p, q, run_ids, slot_of, base[group], n, shift[g], start, end, size, p_sum, q_sum)
        for h in group:
            moved[h] = False
            for c in range(fanout):
                at = base[h] + c
                id_lo[at], id_hi[at] = start + (c << shift[g]), min(start + ((c + 1) << shift[g]) - 1, end)
                key_lo[at], key_hi[at], first_id[at] = table[h, KEY_LO], table[h, KEY_LO], id_lo[at]
    grown, grown_sums = np.zeros((n + extra, 9), np.int64), np.zeros((n + extra, 2))
    grown[:n], grown_sums[:n] = table, sums
    for g in range(n):
        if table[g, STATE] != SPLIT or not chosen[g]:
            continue
        for c in range(base[g], base[g] + fanout):
            row = n + c
            grown[row, SIZE], grown[row, KEY_LO], grown[row, KEY_HI] = size[c], key_lo[c], key_hi[c]
            grown[row, ID_LO], grown[row, ID_HI] = id_lo[c], id_hi[c]
            grown[row, FIRST_KEY], grown[row, FIRST_ID] = key_lo[c], first_id[c]
            grown[row, SIGN], grown[row, STATE] = table[g, SIGN] if table[g, SIGN] != 0 else UNTESTED, KEPT
            grown_sums[row, 0], grown_sums[row, 1] = p_sum[c], q_sum[c]
    return grown, grown_sums, (ids, member_keys, target, draft, runs)


@_compiled
def run_row(members, table, sums):
    """The merged row of a run table: every ``KEPT`` run holding a token one entry (token -1,
    its sums), every gathered token (``members``, :func:`gather`) one entry, in rank order
    (the runs and tokens are disjoint stretches of the order by key, then id; a run sorts at
    its first token). Returns each entry's token, ``p``, ``q`` and run."""
    ids, keys, target, draft, runs = members
    kept = np.nonzero((table[:, STATE] == KEPT) & (table[:, SIZE] > 0))[0]
    m, n = kept.shape[0], ids.shape[0]
    order_key, order_id = np.empty(m + n, np.int64), np.empty(m + n, np.int64)
    order_key[:m], order_id[:m] = table[kept, FIRST_KEY], table[kept, FIRST_ID]
    order_key[m:], order_id[m:] = keys, ids
    by_id = np.argsort(order_id, kind="mergesort")
    rank = by_id[np.argsort(order_key[by_id], kind="mergesort")]  # by key, ties by id
    tokens, p_r, q_r, entry_run = np.empty(m + n, np.int64), np.empty(m + n), np.empty(m + n), np.empty(m + n, np.int64)
    for j in range(m + n):
        e = rank[j]
        if e < m:
            g = kept[e]
            tokens[j], p_r[j], q_r[j], entry_run[j] = -1, sums[g, 0], sums[g, 1], g
        else:
            tokens[j], p_r[j], q_r[j], entry_run[j] = ids[e - m], target[e - m], draft[e - m], runs[e - m]
    return tokens, p_r, q_r, entry_run


@_compiled
def sign_runs(order, p_r, q_r, entry_run, table, k, margin):
    """The sign test (:func:`run_sign`) of every ``UNTESTED`` run entry of a merged row, from its
    key bounds and the ``C`` at its ends; returns the runs found mixed."""
    mixed = np.zeros(table.shape[0], np.bool_)
    mass, total = q_r.sum(), p_r.sum()
    scale = mass / total
    bits = np.empty(2, np.int64)
    ratio = bits.view(np.float64)
    running, d_start = 0.0, 0.0 if k > 1 else 1.0
    for j in range(order.shape[0]):
        running += q_r[j]
        d_end = k * power(running / mass, k - 1) if k > 1 else 1.0
        g = entry_run[j]
        if order[j] < 0 and table[g, SIGN] == UNTESTED:
            bits[0], bits[1] = table[g, KEY_LO], table[g, KEY_HI]
            table[g, SIGN] = run_sign(bits[0], bits[1], ratio[0], ratio[1], p_r[j], q_r[j], scale, d_start, d_end, margin)
            mixed[g] = table[g, SIGN] == 0
        d_start = d_end
    return mixed


@_compiled
def verify_row(p, q, drafts, u, buckets, margin, keys, ids, split_tokens=SPLIT_TOKENS, fanout=SPLIT_FANOUT):
    """The optimal verifier's draw for one row on merged rows
    (docs/optimal-verifier-proofs.md#merged-rows-equal-the-full-path): the cut; the mixed
    buckets and the drafts' refined and every large bucket split into runs (:func:`split_runs`:
    the runs of one id range in one pass; the draw would often read a large bucket of one sign,
    such as the ``q = 0`` tokens on a rejection), until every draft is an entry of its own and no
    run is mixed; the
    merged row, its parameters and the draw; while the draw read a merged entry, that run
    refined and the draw repeated with the same uniforms. ``keys`` (int64) and ``ids`` (int32,
    then the run of each token) are work arrays of the row's length; ``split_tokens`` and
    ``fanout`` are :func:`split_runs`'. Returns the token, the accepted index and the number of
    draws."""
    k = drafts.shape[0]
    target, draft, sizes, lower, upper, sign = cut(p, q, k, buckets, margin, keys, ids)
    table, sums = bucket_runs(lower, upper, sizes, sign, target, draft, p.shape[0])
    chosen = ((sizes > 0) & (sign == 0)) | (sizes > split_tokens)  # every large bucket split in one pass
    for j in range(k):
        chosen[ids[drafts[j]]] = True
    members = _no_members()
    p_drafted, q_drafted = np.empty(k, p.dtype), np.empty(k, q.dtype)
    for j in range(k):
        p_drafted[j], q_drafted[j] = p[drafts[j]], q[drafts[j]]
    rounds = 0
    while True:
        if chosen.any():
            table, sums, found = split_runs(p, q, keys, ids, table, sums, chosen, split_tokens, fanout)
            members = (np.concatenate((members[0], found[0])), np.concatenate((members[1], found[1])),
                       np.concatenate((members[2], found[2])), np.concatenate((members[3], found[3])),
                       np.concatenate((members[4], found[4])))
        order, p_r, q_r, entry_run = run_row(members, table, sums)
        chosen = sign_runs(order, p_r, q_r, entry_run, table, k, margin)
        for j in range(k):
            if table[ids[drafts[j]], STATE] != EXPANDED:  # a draft still inside a run
                chosen[ids[drafts[j]]] = True
        if chosen.any():
            continue
        rounds += 1
        ranks = np.empty(k, np.int64)
        for j in range(k):
            ranks[j] = np.nonzero(order == drafts[j])[0][0]
        token, index, reads = draw(*ranked_parameters(p_r, q_r, k), order, q_r, p_drafted, q_drafted, drafts, ranks, u)
        for read in reads:
            if read >= 0 and order[read] < 0:
                chosen[entry_run[read]] = True
        if not chosen.any():
            return token, index, rounds


@_compiled
def verify_rows(p, q, rows, drafts, uniforms, buckets, margin, split_tokens, fanout, keys, ids, tokens, accepted_index,
                start, step):
    """:func:`verify_row` for the rows ``rows[i]`` of ``p`` and ``q``, ``i = start, start +
    step, ...``, with the drafts and uniforms ``[i]``, into ``tokens[i]`` and
    ``accepted_index[i]`` (one thread's share of a call)."""
    for i in range(start, rows.shape[0], step):
        row = rows[i]
        tokens[i], accepted_index[i], _ = verify_row(p[row], q[row], drafts[i], uniforms[i], buckets, margin, keys, ids,
                                                     split_tokens, fanout)
