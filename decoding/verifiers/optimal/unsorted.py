"""The optimal verifier's full path without the sort, for the CPU from 1,024 tokens
(our derivation, docs/optimal-verifier.md#merged-rows-without-the-sort).

:func:`decoding.verifiers.optimal.iid.row_parameters` sorts all ``V`` ratio keys of a row and
computes every cumulative sum by rank; the draw then reads them at the drafts' ranks, at
their partners' and at the residual rank only. Here the keys are cut into at most
:data:`BUCKETS` runs of consecutive ranks by their high bits (``(key - smallest positive
key) >> s``; the keys of ``p / q`` order like the ratios, so every bucket is a run of
ranks), with a histogram pass for the sums of ``p`` and ``q`` per bucket. In a bucket
where ``e_j = p_j - sigma_j`` has one strict sign at every rank, the whole bucket can be
merged into one entry of ``p``, ``q`` equal to its sums (docs/optimal-verifier-proofs.md#merging-a-run-of-one-sign):

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
block) lies in ``[k C_start^(k-1), k C_end^(k-1)]`` (the sign test of a bucket there); the last bucket (keys
``inf``: ``q = 0``) has ``e = p >= 0`` when it holds no ``q > 0`` token. Every other bucket
holding a token, and the buckets of the drafts, are *refined*: their tokens are gathered
(one pass over the bucket ids) and sorted by key, ties by id as in the full sort. On that
shorter row :func:`decoding.verifiers.optimal.unsorted_rows.ranked_parameters` (the floating-point
operations of :func:`decoding.verifiers.optimal.iid.ranked_parameters`) computes the same
parameters as the full path at every refined rank (exactly in exact arithmetic; in floats
the sums run in another order). If the draw reads a merged entry (a partner or the residual
rank), its bucket is refined too and the draw repeated with the same uniforms; each
repetition refines at least one more bucket, so this ends, at the latest with every bucket
refined, which is the full row (merged rows equal the full path,
docs/optimal-verifier-proofs.md#merged-rows-equal-the-full-path).

Cost per row: the ratio keys with their range, then the bucket ids with the histograms (two
compiled passes over the vocabulary, :mod:`decoding.verifiers.optimal.row_passes`), the sign test
on the bucket sums, one compiled gather of the refined buckets' tokens per round (usually one or two rounds) and the merged
row's parameters and draw (a few thousand entries), with no sort of ``V`` keys: the whole
row in one compiled call (:func:`decoding.verifiers.optimal.unsorted_rows.verify_row`). The rows
of a call are shared among ``torch.get_num_threads()`` threads (the compiled code releases
the GIL); each row's draw is the same whatever the number of threads.
"""
from __future__ import annotations

import numpy as np
import torch

from otm.errors import ShapeMismatchError

from . import unsorted_rows as compiled
from ..base import Scratch, VerifierOutput, row_parts, share_rows
from .identical_drafts import numpy_batch, relative_slack
from .row_passes import is_cached

#: Buckets of positive finite ratio keys per row, at most (plus one for the keys 0 and one
#: for the keys ``inf``).
BUCKETS = 4096

#: The smallest vocabulary for which :func:`decoding.verifiers.optimal.iid.verify_tuples` takes
#: the merged rows on the CPU. Below, the full path sorts short rows quickly and batches many
#: of them in one chunk; the two cross between 512 and 1,024 tokens
#: (``scripts/bench_optimal_verifier.py --vocabs 256,512,1024,2048,4096,8192 --ks 2 --vocab
#: 8192``, docs/optimal-verifier.md#measured-cost).
MIN_VOCAB = 1024


def compiled_on_this_machine() -> bool:
    """Whether numba's cache already holds the merged rows' compiled entry point
    (:func:`decoding.verifiers.optimal.unsorted_rows.verify_rows`). Without it, the first call of an
    optimal verifier on the CPU compiles the per-row code (seconds; loaded from the cache
    after that): :func:`decoding.verifiers.optimal.row_passes.is_cached`."""
    return is_cached(compiled.verify_rows)


def sign_margin(vocab: int, k: int) -> float:
    """Relative margin of the sign test: ``2^-20``, or more when ``(k + 3) LAMBDA(V, k)``
    (:func:`decoding.verifiers.optimal.identical_drafts.relative_slack`, a bound on the relative error of
    the floats it compares: sums of at most ``V`` terms, powers of degree ``k - 1``) is
    larger; the margin only decides how many buckets are refined."""
    return max(2.0**-20, (k + 3) * relative_slack(vocab, k))


def verify_rows(
    target_probs: torch.Tensor,  # [batch, V]
    draft_probs: torch.Tensor,  # [batch, V]
    draft_tokens: torch.Tensor,  # [batch, k]
    uniforms: torch.Tensor,  # [batch, 2k + 3]
    rows: torch.Tensor | None = None,  # [n] the rows to verify (default: all)
    scratch: Scratch | None = None,
    buckets: int = BUCKETS,
    margin: float | None = None,  # the sign test's (default: sign_margin(V, k))
    split_tokens: int = compiled.SPLIT_TOKENS,
    fanout: int = compiled.SPLIT_FANOUT,
) -> VerifierOutput:
    """Steps 1-5 of :mod:`decoding.verifiers.optimal.iid` on merged rows (module docstring) for
    ``rows`` of the batch (``[n]`` outputs): the draw of the full path in exact arithmetic,
    each row by :func:`decoding.verifiers.optimal.unsorted_rows.verify_row`, the rows shared among
    ``torch.get_num_threads()`` threads. ``buckets``, ``margin``, ``split_tokens`` and
    ``fanout`` (:func:`decoding.verifiers.optimal.unsorted_rows.split_runs`) are there for the tests
    and the profile (coarse buckets, a broken margin, splits at a small vocabulary)."""
    scratch = Scratch() if scratch is None else scratch
    rows = torch.arange(draft_tokens.shape[0]) if rows is None else rows
    count, k, vocab = rows.numel(), draft_tokens.shape[1], target_probs.shape[1]
    tokens, accepted_index = np.empty(count, np.int64), np.empty(count, np.int64)
    if count:
        drafts, u = draft_tokens[rows], uniforms[rows].double()
        if int(drafts.min()) < 0 or int(drafts.max()) >= vocab:
            raise ShapeMismatchError(
                f"draft_tokens must be token ids in [0, {vocab}), got ids from {int(drafts.min())} to {int(drafts.max())}"
            )
        p, q, picked = numpy_batch(target_probs, draft_probs, rows)
        drafts, u = drafts.numpy(), u.numpy()
        margin = sign_margin(vocab, k) if margin is None else margin
        cpu = torch.device("cpu")
        work = [(scratch.take(f"keys {part}", (vocab,), torch.int64, cpu).numpy(),  # per thread
                 scratch.take(f"bucket ids {part}", (vocab,), torch.int32, cpu).numpy()) for part in range(row_parts(count))]

        def run(part: int, parts: int) -> None:
            compiled.verify_rows(p, q, picked, drafts, u, buckets, margin, split_tokens, fanout, *work[part], tokens,
                                 accepted_index, part, parts)

        share_rows(run, count)
    device = draft_tokens.device
    return VerifierOutput(tokens=torch.from_numpy(tokens).to(device), accepted_index=torch.from_numpy(accepted_index).to(device))
