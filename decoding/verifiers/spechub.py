"""SpecHub (Sun et al. 2024, Alg. 3 with Alg. 2 GetResidual), k = 2, batched.

Draft law (:func:`otm.draft_laws.hub_law`): with the hub ``a = argmax q`` (ties to the
lowest index), the pairs ``(x, a)`` have probability ``q(x)`` and ``(a, x)`` probability
``Q(a, x) = q(a) q(x) / (1 - q(a))`` for ``x != a``; a one-hot ``q`` gives ``(a, a)``.
:func:`sample_drafts` draws ``x_1 ~ q``; if ``x_1 != a`` then ``x_2 = a``, else ``x_2``
is drawn from ``q`` restricted to the other tokens (two uniforms per row).

Verification (reconstructed from the garbled Alg. 3 and the proof of Thm 2):

1. pair ``(x, a)``, ``x != a``: accept ``x`` if ``u_0 < p(x) / q(x)``.
   GetResidual: ``p'(x) = max(p(x) - q(x), 0)``, leftover ``Q'(x, a) = max(q(x) - p(x), 0)``
   for ``x != a``; ``p'(a) = p(a)``.
2. pair ``(a, x)``, ``x != a``: accept ``x`` if ``u_0 < p'(x) / Q(a, x)``.
   ``p''(x) = max(p'(x) - Q(a, x), 0)``, leftover ``Q'(a, x) = max(Q(a, x) - p'(x), 0)``.
3. the hub: with ``M_1 = sum_x Q'(a, x)`` (plus 1 for the one-hot pair ``(a, a)``) and
   ``M_2 = sum_x Q'(x, a)`` (the rejected masses of the two pair families), a rejected
   ``(a, x)`` pair returns ``a`` if ``u_1 < p(a) / M_1``; a rejected ``(x, a)`` pair
   returns ``a`` if ``u_1 < max(p(a) - M_1, 0) / M_2``.
4. otherwise ``Y ~ norm(p'')`` with ``p''(a) = max(p(a) - M_1 - M_2, 0)``.

Each token ``x != a`` is output by acceptance with probability
``min(p, q) + min(p', Q(a, .))`` and ``a`` with ``min(p(a), M_1 + M_2)``; ``p''`` is what
remains of ``p``, so ``Y ~ p`` (Thm 2). Membership acceptance
``p(a) + sum_{x != a} min(p(x), q(x) / (1 - q(a)))`` (docs/theory.md).

Randomness: ``uniforms_per_row(2) = 3`` - column 0 the draft acceptance, column 1 the
hub acceptance, column 2 the residual draw. Zero-mass residual (every pair always
accepted, e.g. ``p = q`` with ``q(a) >= 1/2``): fallback ``p``, never reached.
``verify`` assumes the drafts follow the hub law (every pair contains ``a``).
"""
from __future__ import annotations

import torch

from otm.errors import InvalidDraftCountError

from .base import (
    VerifierOutput,
    check_k,
    check_probs_matrix,
    draw_uniforms,
    first_draft_probs,
    gather_tokens,
    sample_residual,
    sample_weighted,
    verify_uniforms,
    with_fallback,
)

draft_scheme = "hub"

__all__ = ["draft_scheme", "hub_tokens", "sample_drafts", "uniforms_per_row", "verify"]


def _only_two(k: int) -> int:
    if check_k(k) != 2:
        raise InvalidDraftCountError(f"SpecHub is defined for k=2 drafts (SpecHub, Sun et al. 2024, §4), got k={k}")
    return k


def uniforms_per_row(k: int) -> int:
    """Draft acceptance, hub acceptance, residual draw."""
    return _only_two(k) + 1


def hub_tokens(draft_probs: torch.Tensor) -> torch.Tensor:
    """``[batch]``: ``a = argmax q`` of each row of ``draft_probs`` ``[batch, vocab]``
    (the first maximum, as :func:`otm.draft_laws.hub_token`)."""
    return torch.argmax(draft_probs, dim=-1)


def _without_hub(q: torch.Tensor, hub: torch.Tensor) -> torch.Tensor:
    """``q`` ``[batch, vocab]`` with the hub column set to 0."""
    return q.scatter(1, hub.unsqueeze(1), 0.0)


def sample_drafts(draft_probs: torch.Tensor, k: int, generator: torch.Generator | None) -> torch.Tensor:
    """``[batch, 2]`` pairs from SpecHub's hub law for ``draft_probs`` ``[batch, vocab]``."""
    check_probs_matrix(draft_probs, "draft_probs")
    _only_two(k)
    u = draw_uniforms(generator, draft_probs.shape[0], 2, draft_probs)
    hub = hub_tokens(draft_probs)
    others = _without_hub(draft_probs, hub)
    first = sample_weighted(draft_probs, u[:, 0])
    other = sample_weighted(with_fallback(others, draft_probs), u[:, 1])  # one-hot q -> the hub
    second = torch.where(first == hub, other, hub)
    return torch.stack([first, second], dim=1)


def verify(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, 2, vocab]
    draft_tokens: torch.Tensor,  # [batch, 2]
    generator: torch.Generator | None,
) -> VerifierOutput:
    """SpecHub's verification (SpecHub, Sun et al. 2024, Alg. 3); ``draft_probs[:, 0]`` is ``q``."""
    u = verify_uniforms(target_probs, draft_probs, draft_tokens, generator, uniforms_per_row)
    p = target_probs
    q = first_draft_probs(draft_probs)
    hub = hub_tokens(q)
    x1, x2 = draft_tokens[:, 0], draft_tokens[:, 1]
    hub_first = x1 == hub

    q_others = _without_hub(q, hub)
    rest = q_others.sum(dim=-1, keepdim=True)
    one_hot = rest.squeeze(1) <= 0
    q_hub = gather_tokens(q, hub).unsqueeze(1)
    second_mass = q_hub * q_others / torch.where(rest > 0, rest, torch.ones_like(rest))  # Q(a, x)

    # 1. pairs (x, a): accept x against q(x).
    accept_first = ~hub_first & (u[:, 0] * gather_tokens(q, x1) < gather_tokens(p, x1))
    is_hub_col = torch.zeros_like(p, dtype=torch.bool).scatter(1, hub.unsqueeze(1), True)
    p1 = torch.where(is_hub_col, p, torch.clamp(p - q, min=0.0))
    leftover_first = torch.where(is_hub_col, 0.0, torch.clamp(q - p, min=0.0)).sum(dim=-1)  # M_2
    # 2. pairs (a, x): accept x against Q(a, x).
    accept_second = hub_first & ~one_hot & (u[:, 0] * gather_tokens(second_mass, x2) < gather_tokens(p1, x2))
    p2 = torch.where(is_hub_col, p, torch.clamp(p1 - second_mass, min=0.0))
    leftover_second = torch.clamp(second_mass - p1, min=0.0).masked_fill(is_hub_col, 0.0).sum(dim=-1)
    leftover_second = leftover_second + one_hot.to(p.dtype)  # M_1 (the pair (a, a) when q is one-hot)
    # 3. the hub, first for rejected (a, x) pairs, then for rejected (x, a) pairs.
    p_hub = gather_tokens(p, hub)
    p_hub_after = torch.clamp(p_hub - leftover_second, min=0.0)
    accept_hub = torch.where(
        hub_first,
        ~accept_second & (u[:, 1] * leftover_second < p_hub),
        ~accept_first & (u[:, 1] * leftover_first < p_hub_after),
    )
    # 4. residual.
    p_hub_final = torch.clamp(p_hub_after - leftover_first, min=0.0)
    residual = p2.scatter(1, hub.unsqueeze(1), p_hub_final.unsqueeze(1))
    from_residual = sample_residual(residual, p, u[:, 2])

    minus_one = torch.full_like(x1, -1)
    tokens = torch.where(accept_first, x1, torch.where(accept_second, x2, torch.where(accept_hub, hub, from_residual)))
    hub_index = torch.where(hub_first, torch.zeros_like(x1), torch.ones_like(x1))
    accepted_index = torch.where(
        accept_first,
        torch.zeros_like(x1),
        torch.where(accept_second, torch.ones_like(x1), torch.where(accept_hub, hub_index, minus_one)),
    )
    return VerifierOutput(tokens=tokens, accepted_index=accepted_index)
