"""The per-row passes over the vocabulary of the optimal verifier on the CPU, compiled with
numba: the two sums of the lazy rows (:mod:`decoding.verifiers.optimal.identical_drafts`); for the
merged rows (:mod:`decoding.verifiers.optimal.unsorted_rows`) the ratio keys and their range, the
bucket ids with the histograms, the tokens of chosen buckets and the assembly of a merged
row; and the token-order sums of :mod:`decoding.verifiers.optimal_latent`.

Each is a plain loop over one row (NumPy views of the torch rows, no copies). The cut and
the gather compute what the torch operations they replace computed, bit for bit: the key of
a token is the int64 bit pattern of the float64 ``|p / q|`` (``inf`` or NaN where ``q = 0``,
both at least :data:`INF_KEY`), and the histograms add in token order, as ``scatter_add_``
does on the CPU. Tests: the cut and the gather against torch versions, and the two sums of
the lazy rows (which may add in any order) against their exact values within the bound of
docs/optimal-verifier-proofs.md#a-bound-on-the-mass-of-identical-drafts, in
``tests/decoding/test_verifier_optimal_numba.py``; the merge through the merged rows,
``tests/decoding/test_verifier_optimal_buckets.py``; the token-order sums against the last
float64 cumulative sum, ``tests/decoding/test_verifiers_fast_paths.py``. torch has no fused
operation for these passes: the cut of one row took about a dozen V-sized torch
operations (two float64 copies, the division, its range, the bucket ids, two scatters), slower
than these loops (``scripts/profile_optimal_rows.py``, docs/optimal-verifier.md#measured-cost).

``error_model="numpy"``: a float division by zero gives ``inf`` or NaN, as in torch, instead
of raising. ``cache=True``: compiled once per machine (with
:mod:`decoding.verifiers.optimal.unsorted_rows`, seconds at the first call of an optimal verifier on
the CPU, which ``otm decode`` announces), then loaded from numba's cache (``__pycache__``
beside this file, or ``NUMBA_CACHE_DIR``) by every later process. numba checks no bounds: the arrays
of one row (``p``, ``q``, its keys and bucket ids) have one length, and every other index a
kernel writes at is clamped into its array (or the write skipped).
"""
from __future__ import annotations

from pathlib import Path

import numba
import numpy as np

#: The bits of float64 ``inf``; keys at or above it (``q = 0``, overflowing ratios, NaN from
#: ``0 / 0``) go to the last bucket.
INF_KEY = int(np.array(np.inf).view(np.int64))

_compiled = numba.njit(cache=True, nogil=True, error_model="numpy")


def is_cached(function) -> bool:
    """Whether numba's cache on this machine already holds compiled code of ``function`` (a
    ``cache=True`` dispatcher), read from its cache index; ``False`` when that cannot be told
    (a numba whose cache is laid out otherwise)."""
    try:
        return Path(function._cache._cache_file._index_path).exists()
    except AttributeError:
        return False


@numba.njit(cache=True, nogil=True, fastmath={"reassoc"})
def row_sums(p, q):
    """``(sum q, sum p)`` in float64. ``reassoc`` lets the compiler add in any order (in
    vector lanes): every order is within the bound on the mass of identical drafts
    (docs/optimal-verifier-proofs.md#a-bound-on-the-mass-of-identical-drafts), which is all the
    lazy rows ask of these sums."""
    draft, target = 0.0, 0.0
    for i in range(p.shape[0]):
        target += np.float64(p[i])
        draft += np.float64(q[i])
    return draft, target


@numba.njit(cache=True, nogil=True, fastmath={"reassoc"})
def draft_mass_up_to(p, q, q_a, p_a_up):
    """The float64 sum of ``q[i]`` over the tokens with ``p[i] q_a <= q[i] p_a_up``, the
    products rounded in the row's dtype (``q_a``, ``p_a_up`` scalars of that dtype): the
    tie-widened ratio test of the bound on the mass of identical drafts
    (docs/optimal-verifier-proofs.md#a-bound-on-the-mass-of-identical-drafts), in any order of
    summation as :func:`row_sums`."""
    total = 0.0
    for i in range(p.shape[0]):
        if p[i] * q_a <= q[i] * p_a_up:
            total += np.float64(q[i])
    return total


@_compiled
def rows_sums(p, q, rows, out, start, step):
    """:func:`row_sums` of the rows ``rows[i]`` of ``p``, ``q`` into ``out[i]``, ``i = start,
    start + step, ...`` (one thread's share, :func:`decoding.verifiers.base.share_rows`)."""
    for i in range(start, rows.shape[0], step):
        out[i, 0], out[i, 1] = row_sums(p[rows[i]], q[rows[i]])


@_compiled
def rows_draft_mass_up_to(p, q, rows, q_a, p_a_up, out, start, step):
    """:func:`draft_mass_up_to` of the rows ``rows[i]`` with ``q_a[i]``, ``p_a_up[i]`` into
    ``out[i]``, ``i = start, start + step, ...``."""
    for i in range(start, rows.shape[0], step):
        out[i] = draft_mass_up_to(p[rows[i]], q[rows[i]], q_a[i], p_a_up[i])


@_compiled
def ratio_key_range(p, q, keys):
    """Write ``keys[i]`` = bits of float64 ``|p[i] / q[i]|``; return the smallest positive key
    below :data:`INF_KEY` (``INF_KEY`` when none) and the largest key below ``INF_KEY`` (0
    when none)."""
    ratio = keys.view(np.float64)
    for i in range(p.shape[0]):
        ratio[i] = abs(np.float64(p[i]) / np.float64(q[i]))
    smallest, largest = INF_KEY, 0
    for i in range(keys.shape[0]):
        key = keys[i]
        if key < INF_KEY:
            largest = max(largest, key)
            if key > 0:
                smallest = min(smallest, key)
    return smallest, largest


@_compiled
def bucket_histograms(p, q, keys, first, step, count, bucket, target, draft, sizes):
    """Bucket of every key (0 for key 0, ``((key - first) >> step) + 1`` for positive keys
    below :data:`INF_KEY`, within ``1..count``, ``count + 1`` from ``INF_KEY`` on) into
    ``bucket``, and add ``p``, ``q`` and 1 per token into ``target``, ``draft``, ``sizes`` at
    its bucket, in token order (``count`` at most ``len(target) - 2``)."""
    count = min(count, target.shape[0] - 2)
    for i in range(keys.shape[0]):
        key = keys[i]
        if key >= INF_KEY:
            b = count + 1
        elif key == 0:
            b = 0
        else:
            b = min(max(((key - first) >> step) + 1, 1), count)
        bucket[i] = b
    for i in range(keys.shape[0]):
        b = bucket[i]
        target[b] += np.float64(p[i])
        draft[b] += np.float64(q[i])
        sizes[b] += 1


@_compiled
def chosen_members(p, q, bucket, chosen, ids, keys, target, draft, buckets):
    """Write the tokens whose bucket is ``chosen``, in ascending id order: ``ids``, their
    keys as the sorted path takes them (:data:`INF_KEY` where ``q <= 0``), ``p`` and ``q`` in
    float64 and the bucket of each, up to the length of the outputs (the caller sizes them
    from the chosen buckets' ``sizes``); return how many tokens there are."""
    ratio = keys.view(np.float64)
    n = 0
    for i in range(bucket.shape[0]):
        b = bucket[i]
        if chosen[b]:
            if n < ids.shape[0]:
                p_i, q_i = np.float64(p[i]), np.float64(q[i])
                ids[n], target[n], draft[n], buckets[n], ratio[n] = i, p_i, q_i, b, abs(p_i / q_i)
                if not q_i > 0:
                    keys[n] = INF_KEY
            n += 1
    return n


@_compiled
def merge_row(keep, lower_keys, target_sums, draft_sums, ids, keys, target, draft, buckets,
              order_out, keys_out, target_out, draft_out, buckets_out):
    """One merged row in rank order (for :func:`decoding.verifiers.optimal.unsorted_rows.merged_row`):
    by bucket, a kept bucket as one entry (token -1, its lower key, its sums), a refined
    bucket's members (``ids``, ``keys``, ``target``, ``draft``, ``buckets``, in any order of
    buckets, by ascending id within one) sorted by key, ties by id; written up to the length
    of the outputs. Return the length of the merged row."""
    by_key = np.argsort(keys, kind="mergesort")
    n, m, room = 0, 0, order_out.shape[0]
    for b in range(keep.shape[0]):
        if keep[b]:
            if n < room:
                order_out[n], keys_out[n], buckets_out[n] = -1, lower_keys[b], b
                target_out[n], draft_out[n] = target_sums[b], draft_sums[b]
            n += 1
        while m < by_key.shape[0] and buckets[by_key[m]] == b:
            j = by_key[m]
            if n < room:
                order_out[n], keys_out[n], buckets_out[n] = ids[j], keys[j], b
                target_out[n], draft_out[n] = target[j], draft[j]
            n += 1
            m += 1
    return n


@_compiled
def token_order_sums(rows, out):
    """``out[r]`` = the float64 sum of ``rows[r]`` added left to right in token order (the last
    entry of its float64 cumulative sum, bit for bit), four rows at a time: four independent
    chains of additions hide the latency of one, the order within each row is unchanged."""
    n, v = rows.shape
    r = 0
    while r + 4 <= n:
        a0, a1, a2, a3 = 0.0, 0.0, 0.0, 0.0
        x0, x1, x2, x3 = rows[r], rows[r + 1], rows[r + 2], rows[r + 3]
        for i in range(v):
            a0 += np.float64(x0[i])
            a1 += np.float64(x1[i])
            a2 += np.float64(x2[i])
            a3 += np.float64(x3[i])
        out[r], out[r + 1], out[r + 2], out[r + 3] = a0, a1, a2, a3
        r += 4
    while r < n:
        total = 0.0
        for i in range(v):
            total += np.float64(rows[r, i])
        out[r] = total
        r += 1
