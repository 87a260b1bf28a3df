"""Recursive rejection sampling without replacement (RRSw), batched.

Seed 000 Alg. 1 with the red lines: the drafts ``x_1..x_k`` are distinct, drawn
successively from ``q`` renormalised over the tokens not yet drawn
(:func:`otm.draft_laws.without_replacement_law`); at step ``i`` the draft law is
``q_i = norm(q with x_1..x_{i-1} set to 0)``, ``x_i`` is accepted if
``u_i < p_i(x_i) / q_i(x_i)``, and on rejection ``p_{i+1} = norm(max(p_i - q_i, 0))``
(then ``q(x_i) <- 0; q <- norm(q)``). ``Y ~ p_{k+1}`` if every draft is rejected.
Lossless because, given the past, ``x_i ~ q_i`` exactly.

``draft_probs[:, 0]`` is the base ``q`` (the other rows are expected to equal it and
are not read).

Fewer positive-``q`` tokens than ``k``: :func:`sample_drafts` raises
:class:`otm.errors.InvalidDraftCountError`, matching
:func:`otm.draft_laws.without_replacement_law`.

Randomness and zero-mass fallback: as :mod:`decoding.verifiers.rrs` (``k + 1`` uniforms
per row, shared code :func:`decoding.verifiers.rrs.recursive_rejection`).
"""
from __future__ import annotations

import torch

from .base import VerifierOutput, sample_without_replacement, verify_uniforms
from .rrs import recursive_rejection, uniforms_per_row

draft_scheme = "without_replacement"

__all__ = ["draft_scheme", "sample_drafts", "uniforms_per_row", "verify"]


def sample_drafts(draft_probs: torch.Tensor, k: int, generator: torch.Generator | None) -> torch.Tensor:
    """``[batch, k]`` distinct drafts drawn successively without replacement from
    ``draft_probs`` ``[batch, vocab]`` (see :func:`decoding.verifiers.base.sample_without_replacement`)."""
    return sample_without_replacement(draft_probs, k, generator)


def verify(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, k, vocab]
    draft_tokens: torch.Tensor,  # [batch, k]
    generator: torch.Generator | None,
) -> VerifierOutput:
    """RRSw (seed 000 Alg. 1 with the red lines)."""
    uniforms = verify_uniforms(target_probs, draft_probs, draft_tokens, generator, uniforms_per_row)
    return recursive_rejection(target_probs, draft_probs, draft_tokens, uniforms, without_replacement=True)
