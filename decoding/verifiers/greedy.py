"""The optimal verifier for greedy drafts, batched (:mod:`otm.rules.greedy`).

Drafts (:func:`otm.draft_laws.greedy_law`): the top ``k-1`` tokens ``F`` of ``q`` (sorted by
``q`` descending, ties to the lower index) are always proposed as ``x_1..x_{k-1}``; the
last draft ``z = x_k`` is drawn from ``q_R``, ``q`` restricted to the other tokens ``R``
and renormalised, or is the next token in the order when ``q(R) = 0``.

Verification: accept ``z`` if ``u_0 < p(z) / q_R(z)``; otherwise draw ``Y`` from
``r = norm(p on F, max(p - q_R, 0) on R)``. Output law ``p``; acceptance
``p(F) + sum_R min(p, q_R)``, the per-token bound (optimal for this draft law).

``accepted_index``: ``k-1`` when ``z`` is accepted; a residual token in ``F`` is a
proposed draft that the rule outputs, so it gets its draft position (as in
:mod:`otm.rules.greedy`, where it counts as "a draft was accepted"); other residual
tokens get ``-1``. ``verify`` reads ``F`` from ``draft_tokens[:, :k-1]`` and ``q`` from
``draft_probs[:, 0]``.

Randomness: ``uniforms_per_row(k) = 2`` (acceptance, residual draw); ``sample_drafts``
draws one uniform per row. Zero-mass residual (``z`` surely accepted and ``p(F) = 0``):
fallback ``p``, never reached.
"""
from __future__ import annotations

import torch

from otm.errors import InvalidDraftCountError

from .base import (
    VerifierOutput,
    check_k,
    check_probs_matrix,
    check_verify_inputs,
    draw_uniforms,
    first_draft_probs,
    gather_tokens,
    normalise,
    sample_residual,
    sample_weighted,
    with_fallback,
)

draft_scheme = "greedy"

__all__ = ["draft_scheme", "sample_drafts", "uniforms_per_row", "verify"]


def uniforms_per_row(k: int) -> int:
    """Acceptance of the sampled draft and the residual draw."""
    check_k(k)
    return 2


def _check_vocab(k: int, vocab: int) -> int:
    if check_k(k) > vocab:
        raise InvalidDraftCountError(f"k={k} distinct greedy drafts from a vocabulary of {vocab} tokens")
    return k


def _fixed_mask(like: torch.Tensor, fixed: torch.Tensor) -> torch.Tensor:
    """``[batch, vocab]`` bool, True at the ``[batch, k-1]`` fixed tokens."""
    return torch.zeros_like(like, dtype=torch.bool).scatter(1, fixed, True)


def sample_drafts(draft_probs: torch.Tensor, k: int, generator: torch.Generator | None) -> torch.Tensor:
    """``[batch, k]``: the top ``k-1`` tokens of each row of ``draft_probs`` ``[batch, vocab]``,
    then one draft from the rest (see the module docstring)."""
    check_probs_matrix(draft_probs, "draft_probs")
    _check_vocab(k, draft_probs.shape[1])
    order = torch.sort(draft_probs, dim=-1, descending=True, stable=True).indices
    fixed = order[:, : k - 1]
    rest = draft_probs.masked_fill(_fixed_mask(draft_probs, fixed), 0.0)
    u = draw_uniforms(generator, draft_probs.shape[0], 1, draft_probs)[:, 0]
    sampled = sample_weighted(with_fallback(rest, draft_probs), u)
    no_rest = rest.sum(dim=-1) <= 0
    last = torch.where(no_rest, order[:, k - 1], sampled)
    return torch.cat([fixed, last.unsqueeze(1)], dim=1)


def verify(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, k, vocab]
    draft_tokens: torch.Tensor,  # [batch, k]
    generator: torch.Generator | None,
) -> VerifierOutput:
    """The greedy-draft verifier of :mod:`otm.rules.greedy`."""
    batch, k, vocab = check_verify_inputs(target_probs, draft_probs, draft_tokens)
    _check_vocab(k, vocab)
    u = draw_uniforms(generator, batch, uniforms_per_row(k), target_probs)
    p = target_probs
    fixed = draft_tokens[:, : k - 1]
    z = draft_tokens[:, k - 1]
    is_fixed = _fixed_mask(p, fixed)
    surely_z = torch.zeros_like(p).scatter(1, z.unsqueeze(1), 1.0)
    q_rest = with_fallback(normalise(first_draft_probs(draft_probs).masked_fill(is_fixed, 0.0)), surely_z)  # q_R
    accept = u[:, 0] * gather_tokens(q_rest, z) < gather_tokens(p, z)
    residual = torch.where(is_fixed, p, torch.clamp(p - q_rest, min=0.0))
    from_residual = sample_residual(residual, p, u[:, 1])
    tokens = torch.where(accept, z, from_residual)
    fixed_index = torch.full_like(z, -1)
    for i in range(k - 1):
        fixed_index = torch.where(fixed[:, i] == from_residual, torch.full_like(z, i), fixed_index)
    accepted_index = torch.where(accept, torch.full_like(z, k - 1), fixed_index)
    return VerifierOutput(tokens=tokens, accepted_index=accepted_index)
