"""SpecInfer: recursive rejection sampling with independent drafts from different
draft distributions, batched.

Draft ``i`` is drawn from its own ``q_i`` (``draft_probs[:, i]``), independently
(:func:`otm.draft_laws.independent_law`; Khisti et al. 2025, Remark 1, SpecInfer of Miao et al.
2024). Verification is SpecHub (Sun et al. 2024), Alg. 1 with ``q_i`` in place of ``q`` at step ``i``:
accept ``x_i`` if ``u_i < p_i(x_i) / q_i(x_i)``, else ``p_{i+1} = norm(max(p_i - q_i, 0))``;
``Y ~ p_{k+1}`` if all are rejected. Losslessness: at step ``i`` the draft is ``~ q_i``
independently of the past, so step ``i`` is a single-draft speculative sampling of
``p_i`` from ``q_i`` and its output is ``~ p_i``.

Randomness and zero-mass fallback: as :mod:`decoding.verifiers.rrs` (``k + 1`` uniforms
per row). ``verify`` is :func:`decoding.verifiers.rrs.verify`, which checks draft ``i``
against ``draft_probs[:, i]``: with a different ``q_i`` per row it is exactly the rule above.
"""
from __future__ import annotations

import torch

from otm.errors import ShapeMismatchError

from .base import check_k, check_probs_matrix, draw_uniforms, sample_weighted
from .rrs import uniforms_per_row, verify

draft_scheme = "independent"

__all__ = ["draft_scheme", "sample_drafts", "uniforms_per_row", "verify"]


def sample_drafts(draft_probs: torch.Tensor, k: int, generator: torch.Generator | None) -> torch.Tensor:
    """``[batch, k]``: draft ``i`` drawn from ``draft_probs[:, i]`` (``draft_probs`` is
    ``[batch, k, vocab]``; a ``[batch, vocab]`` input is shared by all k drafts)."""
    k = check_k(k)
    if draft_probs.ndim == 2:
        draft_probs = draft_probs.unsqueeze(1).expand(-1, k, -1)
    if draft_probs.ndim != 3 or draft_probs.shape[1] != k:
        raise ShapeMismatchError(
            f"specinfer draft_probs must have shape [batch, k={k}, vocab], got {tuple(draft_probs.shape)}"
        )
    batch, _, vocab = draft_probs.shape
    flat = check_probs_matrix(draft_probs.reshape(batch * k, vocab), "draft_probs")
    u = draw_uniforms(generator, batch, k, draft_probs)
    return sample_weighted(flat, u.reshape(batch * k)).reshape(batch, k)

