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

Cost per row: three compiled passes over the vocabulary (:mod:`decoding.verifiers.optimal_numba`:
the ratio keys and their range; the bucket ids; the histograms), one compiled gather of the
refined buckets' tokens per round (usually one or two rounds) and no sort of ``V`` keys;
the rows are cut one at a time, the merged rows (a few thousand entries) are assembled one
at a time by a compiled merge and their parameters computed for all rows at once.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from . import optimal_numba as compiled
from .base import Scratch, VerifierOutput
from .optimal import WORK_DTYPE, RowParameters, power, ranked_parameters, verify_rows_reading
from .optimal_lazy import numpy_rows, relative_slack

#: Buckets of positive finite ratio keys per row, at most (plus one for the keys 0 and one
#: for the keys ``inf``).
BUCKETS = 4096

#: The smallest vocabulary for which :func:`decoding.verifiers.optimal.verify_tuples` takes
#: the merged rows on the CPU. They pay off when the vocabulary is larger than the number
#: of buckets; below, the full path sorts short rows quickly and batches many of them in
#: one chunk (the two cross between 4,096 and 8,192 tokens: ``scripts/bench_optimal_verifier.py
#: --vocabs``, docs/optimal-verifier.md section 9).
MIN_VOCAB = 2 * BUCKETS

#: The bits of float64 ``inf``: the key of the tokens with ``q = 0`` (and of ratios that
#: overflow), the largest key (:data:`decoding.verifiers.optimal_numba.INF_KEY`).
INF_KEY = compiled.INF_KEY

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
        sizes: ``[n, B]`` int64 tokens per bucket.
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
    sizes: torch.Tensor
    present: torch.Tensor
    sign: torch.Tensor


def bucket_rows(target_probs: torch.Tensor, draft_probs: torch.Tensor, rows: torch.Tensor, k: int, scratch: Scratch) -> Buckets:
    """Cut ``rows`` of the batch (``[batch, V]`` each, read in place) into ratio buckets and
    classify the buckets (module docstring): per row the ratio keys and their range, then the
    bucket ids and the histograms (two compiled passes,
    :mod:`decoding.verifiers.optimal_numba`); then the sign test for all rows at once."""
    picked, vocab = rows.tolist(), target_probs.shape[1]
    rows = len(picked)
    size = BUCKETS + 2
    keys = scratch.take("keys", (vocab,), torch.int64, target_probs.device).numpy()
    bucket = scratch.take("bucket ids", (rows, vocab), torch.int32, target_probs.device)
    target = torch.zeros(rows, size, dtype=WORK_DTYPE)
    draft = torch.zeros(rows, size, dtype=WORK_DTYPE)
    sizes = torch.zeros(rows, size, dtype=torch.int64)
    outputs = bucket.numpy(), target.numpy(), draft.numpy(), sizes.numpy()  # views, indexed per row below
    ranges = []
    for row, source in enumerate(picked):
        p, q = numpy_rows(target_probs, draft_probs, source, scratch)
        first, last = compiled.ratio_key_range(p, q, keys)
        if first < INF_KEY:  # a positive finite key
            step = ((last - first) // BUCKETS).bit_length()  # (last - first) >> step < BUCKETS
            count = ((last - first) >> step) + 1  # buckets of positive finite keys
        else:  # none: keys 0 go to bucket 0, the others to bucket 1
            step, count = 0, 0
        compiled.bucket_histograms(p, q, keys, first, step, count, *(out[row] for out in outputs))
        ranges.append((first, step, count))
    low, shift, finite = torch.tensor(ranges, dtype=torch.int64).reshape(rows, 3).unbind(dim=1)
    index = torch.arange(size)
    last_bucket = index == finite.unsqueeze(1) + 1
    lower_keys = low.unsqueeze(1) + ((index - 1).clamp(min=0) << shift.unsqueeze(1))
    upper_keys = low.unsqueeze(1) + (index << shift.unsqueeze(1)) - 1  # the largest key of a bucket of positive keys
    lower_keys = torch.where(last_bucket, INF_KEY, torch.where(index == 0, 0, lower_keys))
    present = sizes > 0

    mass, total = draft.sum(dim=1, keepdim=True), target.sum(dim=1, keepdim=True)
    d_end = k * power(draft.cumsum(dim=1) / mass, k - 1) if k > 1 else torch.ones_like(draft)  # k C_end^(k-1)
    d_start = torch.cat([d_end.new_full((rows, 1), 0.0 if k > 1 else 1.0), d_end[:, :-1]], dim=1)  # k C_start^(k-1)
    margin = sign_margin(vocab, k)
    scale = mass / total
    normal = lower_keys >= NORMAL_KEY  # the float ratio is within a relative 2^-53 of the exact one
    positive = normal & (lower_keys.view(WORK_DTYPE) * scale >= d_end * (1 + margin))
    negative = normal & (upper_keys.view(WORK_DTYPE) * scale <= d_start * (1 - margin))
    sign = positive.to(torch.int8) - negative.to(torch.int8)
    sign = torch.where(index == 0, -(target == 0).to(torch.int8), sign)  # keys 0: p = 0, e = -sigma < 0
    sign = torch.where(last_bucket, (draft == 0).to(torch.int8), sign)  # keys inf, q = 0 only: e = p >= 0
    return Buckets(rows=torch.tensor(picked, dtype=torch.int64), bucket=bucket, target=target, draft=draft,
                   lower_keys=lower_keys, sizes=sizes, present=present, sign=sign)


@dataclass(frozen=True)
class Members:
    """The tokens of the refined buckets of one row (``[n]`` NumPy arrays, ascending id
    within each bucket): ``ids``; ``keys`` as the sorted path takes them; ``target``, ``draft``
    their ``p`` and ``q`` in float64; ``buckets`` the bucket of each."""

    ids: np.ndarray
    keys: np.ndarray
    target: np.ndarray
    draft: np.ndarray
    buckets: np.ndarray

    def __add__(self, other: Members) -> Members:
        return Members(*(np.concatenate([mine, theirs]) for mine, theirs in zip(self.fields(), other.fields())))

    def fields(self) -> tuple[np.ndarray, ...]:
        return self.ids, self.keys, self.target, self.draft, self.buckets


def bucket_members(
    buckets: Buckets,
    row: int,  # a position in ``buckets.rows``
    chosen: np.ndarray,  # [B] bool
    target_probs: torch.Tensor,  # [batch, V]
    draft_probs: torch.Tensor,  # [batch, V]
    scratch: Scratch,
) -> Members:
    """The tokens of ``row`` in the ``chosen`` buckets, with their keys, ``p`` and ``q``: one
    compiled pass over the row (:func:`decoding.verifiers.optimal_numba.chosen_members`)."""
    size, source = int(buckets.sizes.numpy()[row][chosen].sum()), int(buckets.rows[row])
    out = Members(np.empty(size, np.int64), np.empty(size, np.int64), np.empty(size), np.empty(size), np.empty(size, np.int32))
    p, q = numpy_rows(target_probs, draft_probs, source, scratch)
    assert compiled.chosen_members(p, q, buckets.bucket.numpy()[row], chosen, *out.fields()) == size
    return out


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
    members: list[Members],  # per row of ``buckets``: the tokens of its refined buckets
    drafts: torch.Tensor,  # [m, k] the drafted tokens of ``rows``
    k: int,
) -> MergedRows:
    """:func:`decoding.verifiers.optimal.ranked_parameters` on the merged ``rows``: every
    present bucket that is not refined is one entry (``order = -1``, its lower key, the
    sums of ``p`` and ``q``), every token of a refined bucket an entry of its own, placed
    among them by key (ties by id; :func:`decoding.verifiers.optimal_numba.merge_row`);
    the rows are padded to one length with entries of key :data:`PAD_KEY` and ``p = q = 0``,
    which change no sum."""
    picked = rows.tolist()
    keep = (buckets.present[rows] & ~refined[rows]).numpy()  # [m, B] bucket entries
    lengths = keep.sum(axis=1) + np.array([members[row].ids.size for row in picked])
    shape = (len(picked), int(lengths.max()))
    order, bucket = torch.full(shape, -1, dtype=torch.int64), torch.full(shape, -1, dtype=torch.int32)
    keys = torch.full(shape, PAD_KEY, dtype=torch.int64)
    p_r, q_r = torch.zeros(shape, dtype=WORK_DTYPE), torch.zeros(shape, dtype=WORK_DTYPE)
    sources = buckets.lower_keys.numpy(), buckets.target.numpy(), buckets.draft.numpy()
    outputs = order.numpy(), keys.numpy(), p_r.numpy(), q_r.numpy(), bucket.numpy()
    for i, row in enumerate(picked):
        written = compiled.merge_row(keep[i], *(a[row] for a in sources), *members[row].fields(), *(a[i] for a in outputs))
        assert written == lengths[i]
    return MergedRows(
        params=ranked_parameters(order, keys, p_r, q_r, k),
        bucket=bucket.long(),
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
    members = [bucket_members(buckets, row, refined.numpy()[row], target_probs, draft_probs, scratch) for row in range(count)]
    p_drafted, q_drafted = target_probs[rows.unsqueeze(1), drafts], draft_probs[rows.unsqueeze(1), drafts]
    active = torch.arange(count)
    while active.numel():
        merged = merged_rows(buckets, active, refined, members, drafts[active], k)
        output, reads = verify_rows_reading(
            merged.params, p_drafted[active], q_drafted[active], drafts[active], uniforms[active], merged.draft_ranks
        )
        tokens[active], accepted_index[active] = output.tokens, output.accepted_index
        at = reads.clamp(min=0)
        hit = (reads >= 0) & (merged.params.order.gather(1, at) < 0) & (merged.bucket.gather(1, at) >= 0)
        again = hit.any(dim=1).nonzero().squeeze(1)
        read = torch.where(hit, merged.bucket.gather(1, at), -1)[again].tolist()  # the buckets read, per row drawn again
        for row, buckets_read in zip(active[again].tolist(), read):
            more = np.zeros(refined.shape[1], dtype=bool)
            more[[b for b in buckets_read if b >= 0]] = True
            refined[row] |= torch.from_numpy(more)
            members[row] = members[row] + bucket_members(buckets, row, more, target_probs, draft_probs, scratch)
        active = active[again]
    return VerifierOutput(tokens=tokens, accepted_index=accepted_index)
