"""Recursive rejection sampling without replacement (RRSw), batched.

SpecHub (Sun et al. 2024), Alg. 1 with the red lines: the drafts ``x_1..x_k`` are distinct, drawn
successively from ``q`` renormalised over the tokens not yet drawn
(:func:`otm.draft_laws.without_replacement_law`); at step ``i`` the draft law is
``q_i = norm(q with x_1..x_{i-1} set to 0)``, ``x_i`` is accepted if
``u_i < p_i(x_i) / q_i(x_i)``, and on rejection ``p_{i+1} = norm(max(p_i - q_i, 0))``
(then ``q(x_i) <- 0; q <- norm(q)``). ``Y ~ p_{k+1}`` if every draft is rejected.
Lossless because, given the past, ``x_i ~ q_i`` exactly.

Exhausted support (a row with ``m < k`` tokens of positive ``q``, ``k <= V``; e.g. one-hot
``q`` at temperature 0, or a small top-p nucleus): drafts ``m+1..k`` are the lowest-index
tokens with ``q = 0`` (deterministic, as in :func:`otm.draft_laws.without_replacement_law`),
and such a draft is verified against its conditional law, the point mass ``delta_{x_i}``:
accepted with probability ``p_i(x_i)``, otherwise ``p_{i+1} = norm(p_i with x_i set to 0)``.
Still lossless (proof in :mod:`otm.rules.rrs_without_replacement`). ``k > V`` raises
:class:`otm.errors.InvalidDraftCountError`.

Implementation: the conditional laws ``q_1..q_k`` (``[batch, k, vocab]``, point masses
where the support is exhausted) are built up front, and the steps are then RRS with a
different draft law per step (:func:`decoding.verifiers.rrs.recursive_rejection`).
``draft_probs[:, 0]`` is the base ``q`` (the other rows
are expected to equal it and are not read).

Randomness and zero-mass fallback: as :mod:`decoding.verifiers.rrs` (``k + 1`` uniforms
per row); ``sample_drafts`` draws one ``torch.rand(batch, vocab)`` (exponential clocks).
"""
from __future__ import annotations

import torch

from .base import (
    VerifierOutput,
    sample_without_replacement,
    first_draft_probs,
    normalise,
    verify_uniforms,
    with_fallback,
)
from .rrs import recursive_rejection, uniforms_per_row

draft_scheme = "without_replacement"

__all__ = ["conditional_draft_laws", "draft_scheme", "sample_drafts", "uniforms_per_row", "verify"]


def sample_drafts(draft_probs: torch.Tensor, k: int, generator: torch.Generator | None) -> torch.Tensor:
    """``[batch, k]`` distinct drafts without replacement from ``draft_probs`` ``[batch, vocab]``,
    completed in index order when the support is exhausted
    (:func:`decoding.verifiers.base.sample_without_replacement`)."""
    return sample_without_replacement(draft_probs, k, generator)


def conditional_draft_laws(
    draft_probs: torch.Tensor,  # [batch, k, vocab]
    draft_tokens: torch.Tensor,  # [batch, k]
) -> torch.Tensor:  # [batch, k, vocab]
    """Row ``i``: the law of draft ``i`` given ``x_1..x_{i-1}``: ``norm(q with x_1..x_{i-1}
    set to 0)`` (``q = draft_probs[:, 0]``), or the point mass at ``x_i`` when that has
    no mass (exhausted support)."""
    picked = torch.zeros_like(draft_probs, dtype=torch.bool).scatter(2, draft_tokens.unsqueeze(2), True)
    drawn_before = (picked.cumsum(dim=1) - picked.long()) > 0  # x_1..x_{i-1}
    remaining = normalise(first_draft_probs(draft_probs).unsqueeze(1).masked_fill(drawn_before, 0.0))
    return with_fallback(remaining, picked.to(draft_probs.dtype))


def verify(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, k, vocab]
    draft_tokens: torch.Tensor,  # [batch, k]
    generator: torch.Generator | None,
) -> VerifierOutput:
    """RRSw (SpecHub, Sun et al. 2024, Alg. 1 with the red lines; exhausted support: module docstring)."""
    uniforms = verify_uniforms(target_probs, draft_probs, draft_tokens, generator, uniforms_per_row)
    conditional = conditional_draft_laws(draft_probs, draft_tokens)
    return recursive_rejection(target_probs, conditional, draft_tokens, uniforms)
