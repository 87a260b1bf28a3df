"""The latent-i.i.d. verifier for drafts without replacement, batched
(:mod:`otm.rules.optimal`, ``draft_scheme="without_replacement"``; docs/optimal-verifier.md).

``k`` distinct drafts drawn successively from ``q`` are the first ``k`` distinct terms
of an i.i.d. sequence from ``q``. Given the drafts ``x_1..x_k``, the first ``k`` terms of
that sequence are rebuilt: the first is ``x_1``; after ``c`` distinct ones ``A_c``, the
next term repeats a member ``a`` of ``A_c`` with probability ``q(a)`` and is ``x_{c+1}``
with probability ``1 - q(A_c)`` (i.i.d. draws are memoryless, and which new token comes
next does not depend on how many repeats came before). These ``k`` latent terms are
exactly i.i.d. from ``q`` and every one of them is a draft, so the optimal i.i.d.
verifier (:mod:`decoding.verifiers.optimal.iid`) applied to them outputs ``Y ~ p`` and
accepts a draft with probability ``alpha*(p, iid law)``. It is lossless and at least as
good as the i.i.d. optimum, but NOT optimal for the without-replacement law, whose
``alpha*`` is larger (docs/optimal-verifier.md#water-levels-for-drafts-without-replacement).

A second module rather than a parameter: the draft scheme (``sample_drafts``) and the
randomness contract differ from the i.i.d. verifier's.

Randomness (``uniforms_per_row(k) = 3k + 2``): columns ``0..2k+2`` are those of the
i.i.d. verifier applied to the latent tuple; column ``2k+2+s`` (``s = 1..k-1``) builds
latent term ``s``: a repeat when ``u < q(A_c)`` (or when ``x_{c+1}`` has ``q = 0``, the
exhausted-support tail of :func:`otm.draft_laws.without_replacement_law`), the member
``a`` being the first with cumulative ``q(x_1) + ... + q(x_a) > u`` (``q`` normalised by
its total summed in token order, so that the latent terms need no sort). The latent
tuple is then verified lazily (:func:`decoding.verifiers.optimal.iid.verify_tuples`): when
its ``k`` terms are one draft, its acceptance is often certain without the sort.
"""
from __future__ import annotations

import torch

from ..base import (
    VerifierOutput,
    check_k,
    cumsum_rows,
    first_draft_probs,
    sample_without_replacement,
    verify_uniforms,
)
from .iid import WORK_DTYPE, verify_tuples
from .iid import compile_seconds as compile_seconds  # the same compiled rows: otm decode's hook

draft_scheme = "without_replacement"


def uniforms_per_row(k: int) -> int:
    """The i.i.d. verifier's ``2k + 3`` and ``k - 1`` for the latent terms."""
    return 3 * check_k(k) + 2


def sample_drafts(draft_probs: torch.Tensor, k: int, generator: torch.Generator | None) -> torch.Tensor:
    """``[batch, k]`` distinct drafts from ``draft_probs`` ``[batch, vocab]``."""
    return sample_without_replacement(draft_probs, k, generator)


def latent_positions(
    draft_q: torch.Tensor,  # [batch, k] normalised q of each draft
    uniforms: torch.Tensor,  # [batch, k - 1]
) -> torch.Tensor:
    """``[batch, k]``: for each latent i.i.d. term, the index of the draft it equals
    (module docstring)."""
    batch, k = draft_q.shape
    cumulative = draft_q.cumsum(dim=1)
    u = uniforms.to(cumulative.dtype)
    positions = torch.zeros(batch, k, dtype=torch.int64, device=draft_q.device)
    seen = torch.ones(batch, dtype=torch.int64, device=draft_q.device)
    for s in range(1, k):
        mass = cumulative.gather(1, (seen - 1).unsqueeze(1)).squeeze(1)  # q(A_c)
        fresh_q = draft_q.gather(1, seen.clamp(max=k - 1).unsqueeze(1)).squeeze(1)
        repeat = (u[:, s - 1] < mass) | (fresh_q <= 0)
        member = torch.minimum(torch.searchsorted(cumulative, u[:, s - 1 : s].contiguous(), right=True).squeeze(1), seen - 1)
        positions[:, s] = torch.where(repeat, member, seen)
        seen = seen + (~repeat).long()
    return positions


def token_order_sums(probs: torch.Tensor) -> torch.Tensor:
    """``[batch, 1]`` float64 sum of each row, added left to right in token order, as the
    reference does (the last entry of the float64 cumulative sum). On the CPU one compiled
    pass over the batch (:func:`decoding.verifiers.optimal.row_passes.token_order_sums`, four rows
    at a time; a half-precision batch widened to float32 first, exactly): converting the
    whole ``[batch, V]`` batch to float64 and scanning it costs a fresh float64 copy and a
    scan whose additions wait on each other; a row-at-a-time scan through one buffer avoids
    both (``scripts/bench_verifier_cost.py``)."""
    if probs.device.type != "cpu":
        return cumsum_rows(probs.to(WORK_DTYPE))[:, -1:]
    from . import row_passes  # numba only where the CPU path runs

    rows = probs if probs.dtype in (torch.float32, torch.float64) else probs.float()
    out = torch.empty(probs.shape[0], dtype=WORK_DTYPE)
    row_passes.token_order_sums(rows.numpy(), out.numpy())
    return out.unsqueeze(1)


def verify(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, k, vocab]
    draft_tokens: torch.Tensor,  # [batch, k]
    generator: torch.Generator | None,
) -> VerifierOutput:
    """The latent-i.i.d. verifier for distinct drafts from ``draft_probs[:, 0]``."""
    uniforms = verify_uniforms(target_probs, draft_probs, draft_tokens, generator, uniforms_per_row)
    k = draft_tokens.shape[1]
    q = first_draft_probs(draft_probs)
    draft_mass = token_order_sums(q)
    draft_q = q.gather(1, draft_tokens).to(WORK_DTYPE) / draft_mass
    positions = latent_positions(draft_q, uniforms[:, 2 * k + 3 :])
    out = verify_tuples(target_probs, q, draft_tokens.gather(1, positions), uniforms[:, : 2 * k + 3])
    accepted = out.accepted_index >= 0
    index = positions.gather(1, out.accepted_index.clamp(min=0).unsqueeze(1)).squeeze(1)
    return VerifierOutput(tokens=out.tokens, accepted_index=torch.where(accepted, index, torch.full_like(index, -1)))
