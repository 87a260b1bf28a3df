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

Cost (:func:`rejection_chain`): the residual ``p_{i+1}`` is computed only for the rows
rejected at steps ``1..i``, gathered into a compact batch (a row accepted at step ``i``
never needs ``p_{i+1}``), and the last one is sampled without normalising it. With
``r_i`` the fraction of rows rejected at steps ``1..i``, V-sized passes per row:
``1`` (the mass of ``p``) ``+ 2 r_1`` (gather ``p``, divide by its mass)
``+ 6 (r_1 + .. + r_{k-1})`` (gather ``q_i``, subtract, clamp; normalise: sum, divide;
fallback check) ``+ (r_2 + .. + r_k)`` (compaction; skipped when every row goes on)
``+ 4 r_k`` (gather ``q_k``, subtract, clamp, inverse-CDF scan); the previous dense
version made ``9k + 4`` passes over every row.
"""
from __future__ import annotations

from typing import Protocol

import torch

from .base import (
    VerifierOutput,
    check_k,
    gather_tokens,
    map_row_chunks,
    normalise,
    sample_iid,
    sample_residual,
    take_rows,
    verify_uniforms,
    with_fallback,
)

draft_scheme = "iid"

__all__ = ["StepLaws", "draft_scheme", "recursive_rejection", "rejection_chain", "sample_drafts", "uniforms_per_row", "verify"]


def uniforms_per_row(k: int) -> int:
    """``k`` acceptance uniforms and one for the residual draw."""
    return check_k(k) + 1


def sample_drafts(draft_probs: torch.Tensor, k: int, generator: torch.Generator | None) -> torch.Tensor:
    """``[batch, k]`` i.i.d. drafts from ``draft_probs`` ``[batch, vocab]``."""
    return sample_iid(draft_probs, k, generator)


class StepLaws(Protocol):
    """The draft law ``q_i`` of each step of :func:`rejection_chain`, read lazily.

    ``rows`` (``[n]`` int64) are the batch rows still rejecting at step ``i``."""

    def at_draft(self, i: int, rows: torch.Tensor) -> torch.Tensor:
        """``[n]``: ``q_i(x_i)`` of each row."""

    def minus(self, i: int, rows: torch.Tensor, current: torch.Tensor) -> torch.Tensor:
        """``[n, vocab]``: ``current - q_i`` (``current`` is ``p_i`` of the rows, ``[n, vocab]``;
        the result is a new tensor the caller may overwrite)."""


class DraftRows:
    """``q_i = draft_probs[:, i]`` (RRS, SpecInfer, single-draft sampling)."""

    def __init__(self, draft_probs: torch.Tensor, draft_tokens: torch.Tensor):  # [batch, k, vocab], [batch, k]
        self.draft_probs, self.draft_tokens = draft_probs, draft_tokens

    def at_draft(self, i: int, rows: torch.Tensor) -> torch.Tensor:
        return self.draft_probs[rows, i, self.draft_tokens[rows, i]]

    def minus(self, i: int, rows: torch.Tensor, current: torch.Tensor) -> torch.Tensor:
        q_i = torch.index_select(self.draft_probs[:, i], 0, rows)  # a gathered copy, overwritten in place
        return torch.sub(current, q_i, out=q_i)


def rejection_chain(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_tokens: torch.Tensor,  # [batch, k]
    uniforms: torch.Tensor,  # [batch, k + 1]
    laws: StepLaws,
) -> VerifierOutput:
    """SpecHub (Sun et al. 2024), Alg. 1 on pre-drawn uniforms with the step laws ``laws``.

    ``p_1 = norm(p)``; at step ``i`` the rows still rejecting accept ``x_i`` when
    ``u_i q_i(x_i) < p_i(x_i)``; the rows that reject get ``p_{i+1} =
    norm(max(p_i - q_i, 0))`` (their own ``p_i`` when that has zero mass). Only those
    rows are carried on, as a compact ``[n, vocab]`` batch, so the V-sized work of a step
    is proportional to the rows that reach it."""
    batch, k = draft_tokens.shape
    tokens = torch.zeros(batch, dtype=torch.int64, device=target_probs.device)
    accepted_index = torch.full_like(tokens, -1)
    mass = target_probs.sum(dim=-1)  # [batch]
    mass = torch.where(mass > 0, mass, torch.ones_like(mass))  # an all-zero row stays zero, not NaN
    rows = torch.arange(batch, device=target_probs.device)  # the rows still rejecting
    residual = None  # [rows, vocab] p_i of those rows, once they rejected a draft
    for i in range(k):
        x = draft_tokens[rows, i]
        p_x = target_probs[rows, x] / mass[rows] if residual is None else gather_tokens(residual, x)
        accept = uniforms[rows, i] * laws.at_draft(i, rows) < p_x
        tokens[rows[accept]] = x[accept]
        accepted_index[rows[accept]] = i
        rejected = (~accept).nonzero().squeeze(1)  # positions in `rows`
        rows = rows[rejected]
        if rows.numel() == 0:
            return VerifierOutput(tokens=tokens, accepted_index=accepted_index)
        if residual is None:
            current = take_rows(target_probs, rows) / mass[rows].unsqueeze(1)
        else:
            current = take_rows(residual, rejected)
        difference = laws.minus(i, rows, current).clamp_(min=0.0)
        if i == k - 1:  # the final draw needs no normalised residual
            tokens[rows] = sample_residual(difference, current, uniforms[rows, k])
            break
        residual = with_fallback(normalise(difference), current)
    return VerifierOutput(tokens=tokens, accepted_index=accepted_index)


def recursive_rejection(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, k, vocab]
    draft_tokens: torch.Tensor,  # [batch, k]
    uniforms: torch.Tensor,  # [batch, k + 1]
) -> VerifierOutput:
    """SpecHub (Sun et al. 2024), Alg. 1 on pre-drawn uniforms (see the module docstring): draft ``i`` is
    checked against ``draft_probs[:, i]``; rows in CPU-sized chunks
    (:func:`decoding.verifiers.base.map_row_chunks`)."""
    return map_row_chunks(
        lambda p, qs, x, u: rejection_chain(p, x, u, DraftRows(qs, x)), target_probs, draft_probs, draft_tokens, uniforms
    )


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
