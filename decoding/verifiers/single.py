"""Single-draft speculative sampling (Leviathan et al.; Leviathan et al. 2023, Alg. 1), batched.

Draw ``x ~ q``; accept it if ``u < p(x) / q(x)``; otherwise return
``Y ~ norm(max(p - q, 0))``. Acceptance ``sum min(p, q) = 1 - TV(p, q)``. ``k`` must be 1.

Randomness (``uniforms_per_row(1) = 2``): column 0 is the acceptance uniform, column 1
drives the residual draw. This is :func:`decoding.verifiers.rrs.recursive_rejection`
with one draft (zero-mass residual when ``p = q``: rejection has probability 0 and the
row keeps ``p`` as its residual). V-sized passes per row: ``1 + 6 r`` with ``r`` the
rejection rate (the mass of ``p``; for a rejected row: gather ``p`` and divide by its
mass, gather ``q``, subtract, clamp, inverse-CDF scan): the residual is built for the
rejected rows only, as transformers' ``_speculative_sampling`` builds it only after a
rejection.
"""
from __future__ import annotations

import torch

from otm.errors import InvalidDraftCountError

from .base import VerifierOutput, check_k, sample_iid, verify_uniforms
from .rrs import recursive_rejection

draft_scheme = "iid"

__all__ = ["draft_scheme", "sample_drafts", "uniforms_per_row", "verify"]


def _only_one(k: int) -> int:
    if check_k(k) != 1:
        raise InvalidDraftCountError(f"the single-draft rule takes k=1 draft, got k={k}; use 'rrs' for k > 1")
    return k


def uniforms_per_row(k: int) -> int:
    """One acceptance uniform and one residual uniform."""
    return _only_one(k) + 1


def sample_drafts(draft_probs: torch.Tensor, k: int, generator: torch.Generator | None) -> torch.Tensor:
    """``[batch, 1]``: one draft from ``draft_probs`` ``[batch, vocab]``."""
    return sample_iid(draft_probs, _only_one(k), generator)


def verify(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, 1, vocab]
    draft_tokens: torch.Tensor,  # [batch, 1]
    generator: torch.Generator | None,
) -> VerifierOutput:
    """Leviathan et al. 2023, Alg. 1 on each row."""
    uniforms = verify_uniforms(target_probs, draft_probs, draft_tokens, generator, uniforms_per_row)
    return recursive_rejection(target_probs, draft_probs, draft_tokens, uniforms)
