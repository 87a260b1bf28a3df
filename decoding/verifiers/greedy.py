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

Cost: ``q`` off ``F`` and its sum ``q(R)`` for every row (summed over the tokens, so it is
exactly 0 when ``F`` covers the support); ``q_R = q / q(R)`` off ``F`` is never
materialised, the residual ``max(p - q_R, 0)`` (with ``p`` on ``F`` and the point-mass
case at ``z`` set by index) is built only for the rows that reject ``z``. V-sized passes
per row: ``2 + 5 f`` with ``f`` the rejection rate (``q`` off ``F`` and its sum; gather
``p`` and ``q`` off ``F``, residual, clamp, inverse-CDF scan; the two gathers are skipped
in a chunk whose rows all reject); the previous dense version made about 14.

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
    map_row_chunks,
    take_rows,
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


def _greedy(
    p: torch.Tensor,  # [batch, vocab]
    q: torch.Tensor,  # [batch, vocab]
    draft_tokens: torch.Tensor,  # [batch, k]
    u: torch.Tensor,  # [batch, 2]
) -> VerifierOutput:
    """The greedy-draft verifier on pre-drawn uniforms; the residual only for the rows
    that reject ``z``."""
    k = draft_tokens.shape[1]
    fixed, z = draft_tokens[:, : k - 1], draft_tokens[:, k - 1]
    q_rest = q.scatter(1, fixed, 0.0)  # q on R (a copy)
    rest = q_rest.sum(dim=-1)  # q(R), exactly 0 when F covers the support of q
    exhausted = rest <= 0  # then q_R is the point mass at z
    rest = torch.where(exhausted, torch.ones_like(rest), rest)
    q_rest_z = torch.where(exhausted, torch.ones_like(rest), gather_tokens(q, z) / rest)  # q_R(z)
    accept = u[:, 0] * q_rest_z < gather_tokens(p, z)
    tokens = torch.where(accept, z, torch.zeros_like(z))
    accepted_index = torch.where(accept, torch.full_like(z, k - 1), torch.full_like(z, -1))
    rows = (~accept).nonzero().squeeze(1)
    if rows.numel() == 0:
        return VerifierOutput(tokens=tokens, accepted_index=accepted_index)
    p_rows, fixed, z = take_rows(p, rows), fixed[rows], z[rows]
    q_rest = take_rows(q_rest, rows)  # our own copy; all 0 on an exhausted row, whose rest is 1 here
    # p - q_R off F (p on F); a division by q(R), not a product with 1 / q(R), which overflows
    # where q(R) is denormal (a dominant top token: below about 1e-308, 1e-38 in float32)
    residual = torch.addcdiv(p_rows, q_rest, rest[rows].unsqueeze(1), value=-1.0, out=q_rest)
    residual.scatter_(1, z.unsqueeze(1), (gather_tokens(p_rows, z) - q_rest_z[rows]).unsqueeze(1))
    y = sample_residual(residual.clamp_(min=0.0), p_rows, u[rows, 1])
    tokens[rows] = y
    fixed_index = torch.full_like(y, -1)
    for i in range(k - 1):
        fixed_index = torch.where(fixed[:, i] == y, torch.full_like(y, i), fixed_index)
    accepted_index[rows] = fixed_index
    return VerifierOutput(tokens=tokens, accepted_index=accepted_index)


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
    return map_row_chunks(_greedy, target_probs, first_draft_probs(draft_probs), draft_tokens, u)
