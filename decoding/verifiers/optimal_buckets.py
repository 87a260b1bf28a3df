"""The optimal verifier's full path without the sort, for the CPU at large vocabularies
(our derivation, docs/optimal-verifier.md section 5.2).

:func:`decoding.verifiers.optimal.row_parameters` sorts all ``V`` ratio keys of a row and
computes every cumulative sum by rank; the draw then reads them at the drafts' ranks, at
their partners' and at the residual rank only. Here the keys are cut into at most
:data:`BUCKETS` runs of consecutive ranks by their high bits (``(key - smallest positive
key) >> s``; the keys of ``p / q`` order like the ratios, so every bucket is a run of
ranks), with two histogram passes for the sums of ``p`` and ``q`` per bucket. In a bucket
where ``e_j = p_j - sigma_j`` has one strict sign at every rank, the whole bucket can be
merged into one entry of ``p``, ``q`` equal to its sums (Lemma 6 of the doc):

- ``C``, ``P`` at the bucket's ends are the same sums, and ``sigma`` summed over the bucket
  telescopes to ``C_end^k - C_start^k``, the merged entry's own ``sigma``;
- ``max(e, 0)`` and ``max(-e, 0)`` summed over it are ``max(E, 0)`` and ``max(-E, 0)`` of
  the merged ``E = sum e``, so ``G`` and ``L`` at every rank outside it are unchanged;
- ``f(j) = P_j - C_j^k`` is strictly monotone inside it (``f(j + 1) - f(j) = e_j``), so the
  first minimiser of ``f``, the cut, is not inside it;
- a search in ``G``, ``L`` or ``P`` lands on the merged entry exactly when the full row's
  lands inside the bucket.

A bucket has one strict sign when ``r_low >= d_high (1 + margin)`` (all ``e > 0``) or
``r_high <= d_low (1 - margin)`` (all ``e < 0``), where ``r_low, r_high`` bound the
normalised ratios its keys can hold and ``d`` (the mean of ``k v^(k-1)`` over a rank's
block) lies in ``[k C_start^(k-1), k C_end^(k-1)]`` (Lemma 7); the last bucket (keys
``inf``: ``q = 0``) has ``e = p >= 0`` when it holds no ``q > 0`` token. Every other bucket
holding a token, and the buckets of the drafts, are *refined*: their tokens are gathered
(one pass over the bucket ids) and sorted by key, ties by id as in the full sort. On that
shorter row :func:`decoding.verifiers.optimal.ranked_parameters` computes the same
parameters as the full path at every refined rank (exactly in exact arithmetic; in floats
the sums run in another order). If the draw reads a merged entry (a partner or the residual
rank), its bucket is refined too and the draw repeated with the same uniforms; each
repetition refines at least one more bucket, so this ends, at the latest with every bucket
refined, which is the full row (Theorem 4 of the doc).

Cost per row: about ten ``V``-sized passes (two copies to float64, the ratio, its range, the
bucket ids, two histogram passes, one gather-and-select of the refined buckets per round,
usually two rounds) and no sort of ``V`` keys; the rows are cut one at a time, the merged
rows (a few thousand entries) are batched.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .base import Scratch, VerifierOutput
from .optimal import WORK_DTYPE, RowParameters, ranked_parameters, ratio_keys, verify_rows_reading
from .optimal_lazy import relative_slack

#: Buckets of positive finite ratio keys per row, at most (plus one for the keys 0 and one
#: for the keys ``inf``).
BUCKETS = 4096

#: The smallest vocabulary for which :func:`decoding.verifiers.optimal.verify_tuples` takes
#: the merged rows on the CPU. They pay off when the vocabulary is much larger than the
#: number of buckets; below, the full path sorts short rows quickly and batches many of them
#: in one chunk (the two cross near 12k tokens: ``scripts/bench_optimal_verifier.py
#: --vocabs``, docs/optimal-verifier.md section 9).
MIN_VOCAB = 4 * BUCKETS

#: The bits of float64 ``inf``: the key of the tokens with ``q = 0`` (and of ratios that
#: overflow), the largest key.
INF_KEY = int(torch.tensor(float("inf"), dtype=torch.float64).view(torch.int64))

#: The bits of the smallest normal float64: below it a float ratio can be off by more than a
#: relative ``2^-53``, so the sign test leaves those buckets mixed.
NORMAL_KEY = 1 << 52

#: The key of the padding entries of a merged row: above every ratio key, ``inf`` included.
PAD_KEY = torch.iinfo(torch.int64).max


def sign_margin(vocab: int, k: int) -> float:
    """Relative margin of the sign test: ``2^-20``, or more when ``(k + 3) LAMBDA(V, k)``
    (:func:`decoding.verifiers.optimal_lazy.relative_slack`, a bound on the relative error of
    the floats it compares: sums of at most ``V`` terms, powers of degree ``k - 1``) is
    larger; the margin only decides how many buckets are refined."""
    return max(2.0**-20, (k + 3) * relative_slack(vocab, k))


@dataclass(frozen=True)
class Buckets:
    """Rows cut into ratio buckets (``B = BUCKETS + 2`` entries per row, padded): bucket 0
    holds the keys 0 (``p = 0``), buckets ``1..finite`` the positive finite keys,
    ``(key - smallest positive key) >> s`` plus one, bucket ``finite + 1`` the keys ``inf``.

    Attributes:
        rows: ``[n]`` the rows of the batch, in the order of the other fields.
        bucket: ``[n, V]`` int32 bucket of each token.
        target, draft: ``[n, B]`` float64 sums of ``p`` and ``q`` per bucket.
        lower_keys: ``[n, B]`` int64 the smallest key a bucket can hold (``inf`` for the
            last; padding above it).
        present: ``[n, B]`` bool, the bucket holds a token.
        sign: ``[n, B]`` int8, 1 where ``e > 0`` at every rank of the bucket (``e >= 0``
            for the bucket of the keys ``inf``), -1 where ``e < 0`` at every rank, else 0:
            the sign test on the normal range of keys, ``p = 0`` throughout for bucket 0,
            ``q = 0`` throughout for the last.
    """

    rows: torch.Tensor
    bucket: torch.Tensor
    target: torch.Tensor
    draft: torch.Tensor
    lower_keys: torch.Tensor
    present: torch.Tensor
    sign: torch.Tensor


def bucket_rows(target_probs: torch.Tensor, draft_probs: torch.Tensor, rows: torch.Tensor, k: int, scratch: Scratch) -> Buckets:
    """Cut ``rows`` of the batch (``[batch, V]`` each, read in place) into ratio buckets and
    classify the buckets (module docstring): per row the ratio keys, their range, the bucket
    ids and the two histogram passes; then the sign test for all rows at once."""
    picked, vocab = rows.tolist(), target_probs.shape[1]
    rows = len(picked)
    size = BUCKETS + 2

    def work(name: str, dtype: torch.dtype = WORK_DTYPE) -> torch.Tensor:
        return scratch.take(name, (vocab,), dtype, target_probs.device)

    bucket = scratch.take("bucket ids", (rows, vocab), torch.int32, target_probs.device)
    target = torch.zeros(rows, size, dtype=WORK_DTYPE)
    draft = torch.zeros(rows, size, dtype=WORK_DTYPE)
    low, shift, finite, infinite = (torch.zeros(rows, dtype=torch.int64) for _ in range(4))
    for row, source in enumerate(picked):
        p, q = work("p").copy_(target_probs[source]), work("q").copy_(draft_probs[source])
        keys = torch.div(p, q, out=work("ratio")).abs_().view(torch.int64)  # q = 0: inf or NaN, keys >= INF_KEY
        first, last = (int(v) for v in torch.aminmax(keys))
        infinite[row] = last >= INF_KEY
        if last >= INF_KEY and first < INF_KEY:  # the largest finite key
            last = int(torch.where(keys >= INF_KEY, first, keys).max())
        if first == 0 and 0 < last < INF_KEY:  # the smallest positive key
            first = int(torch.where(keys > 0, keys, INF_KEY).min())
        if 0 < first < INF_KEY:
            step = ((last - first) // BUCKETS).bit_length()  # (last - first) >> step < BUCKETS
            count = ((last - first) >> step) + 1  # buckets of positive finite keys
        else:  # no positive finite key: keys 0 go to bucket 0, the others to bucket 1
            first, step, count = INF_KEY, 0, 0
        ids = torch.sub(keys, first, out=work("ids", torch.int64)).bitwise_right_shift_(step).add_(1).clamp_(0, count + 1)
        target[row].scatter_add_(0, ids, p)
        draft[row].scatter_add_(0, ids, q)
        bucket[row].copy_(ids)
        low[row], shift[row], finite[row] = first, step, count
    index = torch.arange(size)
    last_bucket = index == finite.unsqueeze(1) + 1
    lower_keys = low.unsqueeze(1) + ((index - 1).clamp(min=0) << shift.unsqueeze(1))
    upper_keys = low.unsqueeze(1) + (index << shift.unsqueeze(1)) - 1  # the largest key of a bucket of positive keys
    lower_keys = torch.where(last_bucket, INF_KEY, torch.where(index == 0, 0, lower_keys))
    present = torch.where(last_bucket, infinite.bool().unsqueeze(1), draft > 0) & (index <= finite.unsqueeze(1) + 1)

    mass, total = draft.sum(dim=1, keepdim=True), target.sum(dim=1, keepdim=True)
    c_end = draft.cumsum(dim=1) / mass
    c_start = torch.cat([c_end.new_zeros(rows, 1), c_end[:, :-1]], dim=1)
    margin = sign_margin(vocab, k)
    scale = mass / total
    normal = lower_keys >= NORMAL_KEY  # the float ratio is within a relative 2^-53 of the exact one
    positive = normal & (lower_keys.view(WORK_DTYPE) * scale >= k * c_end ** (k - 1) * (1 + margin))
    negative = normal & (upper_keys.view(WORK_DTYPE) * scale <= k * c_start ** (k - 1) * (1 - margin))
    sign = positive.to(torch.int8) - negative.to(torch.int8)
    sign = torch.where(index == 0, -(target == 0).to(torch.int8), sign)  # keys 0: p = 0, e = -sigma < 0
    sign = torch.where(last_bucket, (draft == 0).to(torch.int8), sign)  # keys inf, q = 0 only: e = p >= 0
    return Buckets(rows=torch.tensor(picked, dtype=torch.int64), bucket=bucket, target=target, draft=draft,
                   lower_keys=lower_keys, present=present, sign=sign)


def bucket_members(bucket: torch.Tensor, chosen: torch.Tensor) -> torch.Tensor:
    """Ascending ids of the tokens of one row (bucket ids ``[V]``) in the ``chosen``
    (``[B]`` bool) buckets: one pass."""
    return torch.index_select(chosen, 0, bucket).nonzero().squeeze(1)


@dataclass(frozen=True)
class MergedRows:
    """Merged rows and what each entry stands for (``[m, n_entries]``, padded).

    Attributes:
        params: :func:`decoding.verifiers.optimal.ranked_parameters` of the merged rows.
        bucket: the bucket of each entry (its own or its token's); -1 for padding.
        draft_ranks: ``[m, k]`` the entry of each draft.
    """

    params: RowParameters
    bucket: torch.Tensor
    draft_ranks: torch.Tensor


def merged_rows(
    buckets: Buckets,
    rows: torch.Tensor,  # [m] the rows of ``buckets`` to merge (positions in ``buckets.rows``)
    refined: torch.Tensor,  # [n, B] bool: buckets whose tokens are entries
    members: list[torch.Tensor],  # per row of ``buckets``: ascending ids of its refined buckets' tokens
    target_probs: torch.Tensor,  # [batch, V]
    draft_probs: torch.Tensor,  # [batch, V]
    drafts: torch.Tensor,  # [m, k] the drafted tokens of ``rows``
    k: int,
) -> MergedRows:
    """:func:`decoding.verifiers.optimal.ranked_parameters` on the merged ``rows``: every
    present bucket that is not refined is one entry (``order = -1``, its lower key, the
    sums of ``p`` and ``q``), every token of a refined bucket an entry of its own, placed
    among them by key (ties by id); the rows are padded to one length with entries of key
    :data:`PAD_KEY` and ``p = q = 0``, which change no sum."""
    count, size = rows.numel(), buckets.present.shape[1]
    keep = buckets.present[rows] & ~refined[rows]  # [m, B] bucket entries
    tokens = [members[row] for row in rows.tolist()]
    sizes = torch.tensor([t.numel() for t in tokens], dtype=torch.int64)
    flat = torch.cat(tokens)
    owner = torch.repeat_interleave(torch.arange(count), sizes)
    column = torch.arange(flat.numel()) - torch.repeat_interleave(sizes.cumsum(0) - sizes, sizes)
    source = buckets.rows[rows][owner]
    p_flat, q_flat = target_probs[source, flat], draft_probs[source, flat]
    width = int(sizes.max())

    def by_row(values: torch.Tensor, fill: int | float) -> torch.Tensor:  # [m, width], padded
        out = torch.full((count, width), fill, dtype=values.dtype)
        out[owner, column] = values
        return out

    member_keys, by_key = torch.sort(by_row(ratio_keys(p_flat, q_flat), PAD_KEY), dim=1, stable=True)
    member_ids = by_row(flat, -1).gather(1, by_key)
    member_buckets = by_row(buckets.bucket[rows[owner], flat].long(), size).gather(1, by_key)  # padding: bucket B
    kept_before = torch.cat([keep.new_zeros(count, 1, dtype=torch.int64), keep.cumsum(dim=1)], dim=1)  # [m, B + 1]
    per_bucket = torch.zeros(count, size + 1, dtype=torch.int64).scatter_add_(1, member_buckets, torch.ones_like(member_buckets))
    members_before = per_bucket.cumsum(dim=1) - per_bucket
    length = int((kept_before[:, -1] + sizes).max())
    keep_rows, keep_buckets = keep.nonzero(as_tuple=True)
    keep_at = kept_before[keep_rows, keep_buckets] + members_before[keep_rows, keep_buckets]
    real_rows, real_columns = (member_ids >= 0).nonzero(as_tuple=True)
    real_at = real_columns + kept_before[real_rows, member_buckets[real_rows, real_columns]]

    def placed(of_buckets: torch.Tensor, of_members: torch.Tensor, fill: int | float) -> torch.Tensor:  # [m, length]
        out = torch.full((count, length), fill, dtype=of_members.dtype)
        out[keep_rows, keep_at] = of_buckets.to(of_members.dtype)
        out[real_rows, real_at] = of_members[real_rows, real_columns]
        return out

    order = placed(torch.full_like(keep_rows, -1), member_ids, -1)
    kept = rows[keep_rows], keep_buckets
    p_r = placed(buckets.target[kept], by_row(p_flat.to(WORK_DTYPE), 0.0).gather(1, by_key), 0.0)
    q_r = placed(buckets.draft[kept], by_row(q_flat.to(WORK_DTYPE), 0.0).gather(1, by_key), 0.0)
    return MergedRows(
        params=ranked_parameters(order, placed(buckets.lower_keys[kept], member_keys, PAD_KEY), p_r, q_r, k),
        bucket=placed(keep_buckets, member_buckets, -1),
        draft_ranks=(order.unsqueeze(1) == drafts.unsqueeze(2)).long().argmax(dim=2),
    )


def verify_rows(
    target_probs: torch.Tensor,  # [batch, V]
    draft_probs: torch.Tensor,  # [batch, V]
    draft_tokens: torch.Tensor,  # [batch, k]
    uniforms: torch.Tensor,  # [batch, 2k + 3]
    rows: torch.Tensor | None = None,  # [n] the rows to verify (default: all)
    scratch: Scratch | None = None,
) -> VerifierOutput:
    """Steps 1-5 of :mod:`decoding.verifiers.optimal` on merged rows (module docstring) for
    ``rows`` of the batch (``[n]`` outputs): the draw of the full path in exact arithmetic.
    A row whose draw read a bucket entry has that bucket refined and is drawn again."""
    scratch = Scratch() if scratch is None else scratch
    rows = torch.arange(draft_tokens.shape[0]) if rows is None else rows
    count, k = rows.numel(), draft_tokens.shape[1]
    tokens = draft_tokens.new_empty(count)
    accepted_index = draft_tokens.new_empty(count)
    if not count:
        return VerifierOutput(tokens=tokens, accepted_index=accepted_index)
    drafts, uniforms = draft_tokens[rows], uniforms[rows]
    buckets = bucket_rows(target_probs, draft_probs, rows, k, scratch)
    refined = buckets.present & (buckets.sign == 0)
    refined.scatter_(1, buckets.bucket.gather(1, drafts).long(), True)
    members = [bucket_members(buckets.bucket[row], refined[row]) for row in range(count)]
    p_drafted, q_drafted = target_probs[rows.unsqueeze(1), drafts], draft_probs[rows.unsqueeze(1), drafts]
    active = torch.arange(count)
    while active.numel():
        merged = merged_rows(buckets, active, refined, members, target_probs, draft_probs, drafts[active], k)
        output, reads = verify_rows_reading(
            merged.params, p_drafted[active], q_drafted[active], drafts[active], uniforms[active], merged.draft_ranks
        )
        tokens[active], accepted_index[active] = output.tokens, output.accepted_index
        at = reads.clamp(min=0)
        hit = (reads >= 0) & (merged.params.order.gather(1, at) < 0) & (merged.bucket.gather(1, at) >= 0)
        again = hit.any(dim=1).nonzero().squeeze(1)
        for i in again.tolist():
            row = int(active[i])
            more = torch.zeros_like(refined[row])
            more[merged.bucket[i, at[i][hit[i]]]] = True
            refined[row] |= more
            members[row] = torch.cat([members[row], bucket_members(buckets.bucket[row], more)]).sort().values
        active = active[again]
    return VerifierOutput(tokens=tokens, accepted_index=accepted_index)
