"""Recursive rejection sampling (RRS) with i.i.d. drafts, batched.

SpecHub (Sun et al. 2024), Alg. 1 (black lines; also SpecTr's and SpecInfer's baseline): draw
``x_1..x_k`` i.i.d. from ``q``; for ``i = 1..k`` accept ``x_i`` if
``u_i < p_i(x_i) / q_i(x_i)``, otherwise ``p_{i+1} = norm(max(p_i - q_i, 0))``; if every
draft is rejected, return ``Y ~ p_{k+1}``. Here ``q_i = draft_probs[:, i]`` (identical
rows for RRS; different rows give SpecInfer, :mod:`decoding.verifiers.specinfer`).
RRSw (:mod:`decoding.verifiers.rrs_wor`) runs the same steps with ``q_i`` the draft law
conditional on the earlier drafts.

Acceptance with i.i.d. drafts: ``1 - prod_i (1 - alpha_i)``, ``alpha_i = sum min(p_i, q)``
(docs/theory.md).

Randomness (``uniforms_per_row(k) = k + 1``): column ``i`` is ``u_i`` of draft ``i``,
column ``k`` drives the final residual draw (inverse CDF).

Zero-mass residual: ``max(p_i - q_i, 0)`` has zero mass only when ``p_i = q_i``, and
then draft ``i`` is rejected with probability ``sum max(q_i - p_i, 0) = 0``; such a
row keeps ``p_{i+1} = p_i`` (any choice keeps the law exact, this one is never NaN).
"""
from __future__ import annotations

import torch

from .base import (
    VerifierOutput,
    check_k,
    gather_tokens,
    normalise,
    sample_iid,
    sample_weighted,
    verify_uniforms,
    with_fallback,
)

draft_scheme = "iid"


def uniforms_per_row(k: int) -> int:
    """``k`` acceptance uniforms and one for the residual draw."""
    return check_k(k) + 1


def sample_drafts(draft_probs: torch.Tensor, k: int, generator: torch.Generator | None) -> torch.Tensor:
    """``[batch, k]`` i.i.d. drafts from ``draft_probs`` ``[batch, vocab]``."""
    return sample_iid(draft_probs, k, generator)


def recursive_rejection(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, k, vocab]
    draft_tokens: torch.Tensor,  # [batch, k]
    uniforms: torch.Tensor,  # [batch, k + 1]
) -> VerifierOutput:
    """SpecHub (Sun et al. 2024), Alg. 1 on pre-drawn uniforms (see the module docstring): draft ``i`` is
    checked against ``draft_probs[:, i]``."""
    batch, k, _ = draft_probs.shape
    residual = normalise(target_probs)
    tokens = torch.zeros(batch, dtype=torch.int64, device=target_probs.device)
    accepted_index = torch.full_like(tokens, -1)
    pending = torch.ones(batch, dtype=torch.bool, device=target_probs.device)
    for i in range(k):
        x = draft_tokens[:, i]
        q_i = draft_probs[:, i, :]
        accept = pending & (uniforms[:, i] * gather_tokens(q_i, x) < gather_tokens(residual, x))
        tokens = torch.where(accept, x, tokens)
        accepted_index = torch.where(accept, torch.full_like(accepted_index, i), accepted_index)
        pending = pending & ~accept
        next_residual = normalise(torch.clamp(residual - q_i, min=0.0))
        residual = torch.where(pending.unsqueeze(1), with_fallback(next_residual, residual), residual)
    drawn_from_residual = sample_weighted(residual, uniforms[:, k])
    tokens = torch.where(pending, drawn_from_residual, tokens)
    return VerifierOutput(tokens=tokens, accepted_index=accepted_index)


def verify(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, k, vocab]
    draft_tokens: torch.Tensor,  # [batch, k]
    generator: torch.Generator | None,
) -> VerifierOutput:
    """RRS (SpecHub, Sun et al. 2024, Alg. 1): draft ``i`` is checked against ``draft_probs[:, i]``; with a
    different ``q_i`` per draft this is SpecInfer's verification (the ``verify`` of
    :mod:`decoding.verifiers.specinfer`)."""
    uniforms = verify_uniforms(target_probs, draft_probs, draft_tokens, generator, uniforms_per_row)
    return recursive_rejection(target_probs, draft_probs, draft_tokens, uniforms)
