"""k-sequential selection (k-SEQ, SpecTr = SpecTr (Sun et al. 2023), Alg. 2), batched.

In our letters (p = target, q = draft; SpecTr swaps them): with a division factor
``g >= 1`` let ``beta(g) = sum_x min(q(x), p(x) / g)`` and
``p_acc = 1 - (1 - beta)^k``. Draw ``x_1..x_k`` i.i.d. from ``q``; for ``i = 1..k``
accept ``x_i`` if ``u_i < min(1, p(x_i) / (g q(x_i)))``; if all are rejected return
``Y ~ p_res`` with

    p_res(x) = (p(x) - min(q(x), p(x) / g) * p_acc / beta) / (1 - p_acc)        (SpecTr, Sun et al. 2023, eq. 5)

Derivation (the extracted eq. 5 is garbled): a token ``x`` is output by an acceptance
with probability ``sum_i (1 - beta)^(i-1) min(q(x), p(x)/g) = min(q, p/g) p_acc / beta``,
so ``p_res`` is what remains of ``p``; it is non-negative iff ``c = p_acc / beta <= g``.
Writing ``c(beta) = p_acc / beta = sum_{j<k} (1 - beta)^j`` (no division, and ``= k``
at ``beta = 0``), ``c(beta(g))`` increases with ``g`` while ``c(1) >= 1`` and
``c(k) <= k``, so the smallest valid factor ``g*`` solves ``c(beta(g)) = g``, i.e.
``1 - (1 - beta)^k = g beta`` (SpecTr, Sun et al. 2023, eq. 6, Thm 2), in ``[1, k]``.

``g*`` is found per row by bisection on ``[1, k]`` (:func:`optimal_division_factor`,
``-log2(eps) + 2`` halvings, a fixed count so there is no data-dependent loop); the
upper end of the final bracket is used, so ``g >= g*`` up to rounding and the residual
is a valid law (it is clamped at 0 against rounding). ``g* = 1`` exactly when
``c(beta(1)) <= 1`` (as :func:`otm.rules.kseq.optimal_division_factor`).

Zero-mass residual: ``p_res`` has mass ``1 - p_acc``, zero only when ``beta = 1``
(then every draft is accepted with probability 1 and the residual is never reached);
such rows fall back to ``p``.

Randomness: ``k + 1`` uniforms per row (``u_1..u_k``, then the residual draw).
"""
from __future__ import annotations

import math

import torch

from .base import (
    VerifierOutput,
    check_k,
    first_draft_probs,
    gather_tokens,
    sample_iid,
    sample_residual,
    verify_uniforms,
)

draft_scheme = "iid"

__all__ = [
    "draft_scheme",
    "optimal_division_factor",
    "sample_drafts",
    "uniforms_per_row",
    "verify",
    "verify_with_factor",
]


def uniforms_per_row(k: int) -> int:
    """``k`` acceptance uniforms and one for the residual draw."""
    return check_k(k) + 1


def sample_drafts(draft_probs: torch.Tensor, k: int, generator: torch.Generator | None) -> torch.Tensor:
    """``[batch, k]`` i.i.d. drafts from ``draft_probs`` ``[batch, vocab]``."""
    return sample_iid(draft_probs, k, generator)


def _beta(target_probs: torch.Tensor, q: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """``beta(g) = sum min(q, p / g)`` per row; ``factor`` is ``[batch]``."""
    return torch.minimum(q, target_probs / factor.unsqueeze(1)).sum(dim=-1)


def _accepted_mass_factor(beta: torch.Tensor, k: int) -> torch.Tensor:
    """``c(beta) = (1 - (1 - beta)^k) / beta = sum_{j<k} (1 - beta)^j`` (``= k`` at 0)."""
    miss = 1.0 - beta
    total = torch.ones_like(beta)
    power = torch.ones_like(beta)
    for _ in range(k - 1):
        power = power * miss
        total = total + power
    return total


def optimal_division_factor(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, vocab]
    k: int,
) -> torch.Tensor:
    """``[batch]``: the smallest valid division factor ``g*`` of each row (SpecTr, Sun et al. 2023,
    eq. 6), by bisection on ``[1, k]``; returns the upper end of the final bracket, or
    exactly 1 when ``g = 1`` is valid."""
    k = check_k(k)
    batch = target_probs.shape[0]
    low = torch.ones(batch, dtype=target_probs.dtype, device=target_probs.device)
    high = torch.full_like(low, float(k))
    if k == 1:
        return high
    for _ in range(_bisection_steps(target_probs.dtype)):
        mid = 0.5 * (low + high)
        too_small = _accepted_mass_factor(_beta(target_probs, draft_probs, mid), k) > mid
        low = torch.where(too_small, mid, low)
        high = torch.where(too_small, high, mid)
    one_is_valid = _accepted_mass_factor(_beta(target_probs, draft_probs, low.new_ones(batch)), k) <= 1.0
    return torch.where(one_is_valid, torch.ones_like(high), high)


def _bisection_steps(dtype: torch.dtype) -> int:
    """Halvings that shrink ``[1, k]`` below the dtype's resolution (54 in float64)."""
    return int(-math.log2(torch.finfo(dtype).eps)) + 2


def _kseq(
    target_probs: torch.Tensor,  # [batch, vocab]
    q: torch.Tensor,  # [batch, vocab]
    draft_tokens: torch.Tensor,  # [batch, k]
    factor: torch.Tensor,  # [batch]
    uniforms: torch.Tensor,  # [batch, k + 1]
) -> VerifierOutput:
    batch, k = draft_tokens.shape
    tokens = torch.zeros(batch, dtype=torch.int64, device=target_probs.device)
    accepted_index = torch.full_like(tokens, -1)
    pending = torch.ones(batch, dtype=torch.bool, device=target_probs.device)
    for i in range(k):
        x = draft_tokens[:, i]
        accept = pending & (uniforms[:, i] * factor * gather_tokens(q, x) < gather_tokens(target_probs, x))
        tokens = torch.where(accept, x, tokens)
        accepted_index = torch.where(accept, torch.full_like(accepted_index, i), accepted_index)
        pending = pending & ~accept
    scaled = torch.minimum(q, target_probs / factor.unsqueeze(1))
    c = _accepted_mass_factor(scaled.sum(dim=-1), k)
    residual = torch.clamp(target_probs - c.unsqueeze(1) * scaled, min=0.0)
    tokens = torch.where(pending, sample_residual(residual, target_probs, uniforms[:, k]), tokens)
    return VerifierOutput(tokens=tokens, accepted_index=accepted_index)


def verify_with_factor(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, k, vocab]
    draft_tokens: torch.Tensor,  # [batch, k]
    factor: torch.Tensor,  # [batch]
    generator: torch.Generator | None,
) -> VerifierOutput:
    """SpecTr (Sun et al. 2023), Alg. 2 with a given division factor ``g`` per row. Lossless only for
    ``g >= g*``; with ``g < g*`` the residual would be negative somewhere and clamping
    it breaks the law (the tests use this to show the exactness check can fail)."""
    uniforms = verify_uniforms(target_probs, draft_probs, draft_tokens, generator, uniforms_per_row)
    factor = factor.to(dtype=target_probs.dtype, device=target_probs.device).expand(uniforms.shape[0])
    return _kseq(target_probs, first_draft_probs(draft_probs), draft_tokens, factor, uniforms)


def verify(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, k, vocab]
    draft_tokens: torch.Tensor,  # [batch, k]
    generator: torch.Generator | None,
) -> VerifierOutput:
    """k-SEQ with ``g = g*`` (:func:`optimal_division_factor`); ``draft_probs[:, 0]`` is
    the shared ``q``."""
    uniforms = verify_uniforms(target_probs, draft_probs, draft_tokens, generator, uniforms_per_row)
    q = first_draft_probs(draft_probs)
    factor = optimal_division_factor(target_probs, q, draft_tokens.shape[1])
    return _kseq(target_probs, q, draft_tokens, factor, uniforms)
