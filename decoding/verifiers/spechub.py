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

Cost: each step runs on the rows that reach it (gathered): ``argmax q`` over every row
(blocked, :func:`hub_tokens`); ``q`` off the hub and its sum for the rows not accepted at
step 1; the two residuals for the rows not accepted at step 2, each in one buffer
updated in place, with ``M_2`` and ``M_1`` read off sums (for ``v = p - q`` and
``v = p' - Q(a, .)``, ``sum_{x != a} max(-v, 0) = sum max(v, 0) - sum v``, the hub
entry ``p(a)`` cancelling); the inverse-CDF scan for the rows not accepted at step 3.
V-sized passes per row: ``1 + 2 f_1 + 9 f_2 + 2 f_3`` with ``f_j`` the fraction of rows
that reach step ``j + 1`` (gather ``q`` with the hub zeroed, sum; gather ``p``,
subtract, sum, clamp, sum, residual, sum, clamp, sum; compaction, scan); the previous
dense version made about 30 for every row.

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
    map_row_chunks,
    sample_residual,
    sample_weighted,
    take_rows,
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


#: Tokens per block of :func:`hub_tokens`.
ARGMAX_BLOCK = 128


def hub_tokens(draft_probs: torch.Tensor) -> torch.Tensor:
    """``[batch]``: ``a = argmax q`` of each row of ``draft_probs`` ``[batch, vocab]``
    (the first maximum, as :func:`otm.draft_laws.hub_token`). Blocked: the maximum of each
    block of :data:`ARGMAX_BLOCK` tokens (a vectorised reduction), the first block that
    holds the row's maximum, then the first maximum inside it; the same token as
    ``torch.argmax`` (first maximum), which reduces the vocabulary about 10x slower."""
    batch, vocab = draft_probs.shape
    main = vocab - vocab % ARGMAX_BLOCK
    if main == 0:
        return torch.argmax(draft_probs, dim=-1)
    block_max = draft_probs[:, :main].reshape(batch, main // ARGMAX_BLOCK, ARGMAX_BLOCK).amax(dim=-1)
    if main < vocab:
        block_max = torch.cat([block_max, draft_probs[:, main:].amax(dim=-1, keepdim=True)], dim=1)
    start = torch.argmax(block_max, dim=-1) * ARGMAX_BLOCK
    offsets = torch.arange(ARGMAX_BLOCK, device=draft_probs.device)
    window = draft_probs.gather(1, (start.unsqueeze(1) + offsets).clamp_(max=vocab - 1))  # the tail block repeats its last token
    return start + torch.argmax(window, dim=-1)


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


def _spechub(
    p: torch.Tensor,  # [batch, vocab]
    q: torch.Tensor,  # [batch, vocab]
    draft_tokens: torch.Tensor,  # [batch, 2]
    u: torch.Tensor,  # [batch, 3]
) -> VerifierOutput:
    """Steps 1-4 of the module docstring on pre-drawn uniforms, each on the rows that reach it."""
    hub = hub_tokens(q)
    x1, x2 = draft_tokens[:, 0], draft_tokens[:, 1]
    hub_first = x1 == hub
    tokens = torch.zeros_like(x1)
    accepted_index = torch.full_like(x1, -1)

    # 1. pairs (x, a): accept x against q(x).
    accept_first = ~hub_first & (u[:, 0] * gather_tokens(q, x1) < gather_tokens(p, x1))
    tokens[accept_first] = x1[accept_first]
    accepted_index[accept_first] = 0
    rows = (~accept_first).nonzero().squeeze(1)
    if rows.numel() == 0:
        return VerifierOutput(tokens=tokens, accepted_index=accepted_index)

    # 2. pairs (a, x): accept x against Q(a, x) = q(a) q(x) / (1 - q(a)).
    a = hub[rows]
    q_off = torch.index_select(q, 0, rows).scatter_(1, a.unsqueeze(1), 0.0)  # q off the hub (a gathered copy)
    rest = q_off.sum(dim=-1)  # 1 - q(a), summed over the other tokens (exactly 0 for a one-hot q)
    one_hot = rest <= 0
    rest = torch.where(one_hot, torch.ones_like(rest), rest)
    q_hub, y = q[rows, a], x2[rows]
    q_y = q[rows, y]
    second_y = q_hub * (q_y / rest)  # q(y) <= 1 - q(a): no overflow where 1 - q(a) is denormal
    first_hub = hub_first[rows]
    accept_second = first_hub & ~one_hot & (u[rows, 0] * second_y < torch.clamp(p[rows, y] - q_y, min=0.0))
    tokens[rows[accept_second]] = y[accept_second]
    accepted_index[rows[accept_second]] = 1
    keep = (~accept_second).nonzero().squeeze(1)
    rows, a, q_off, rest, one_hot, q_hub, first_hub = (
        take_rows(t, keep) for t in (rows, a, q_off, rest, one_hot, q_hub, first_hub)
    )
    if rows.numel() == 0:
        return VerifierOutput(tokens=tokens, accepted_index=accepted_index)

    # GetResidual twice, with the leftover masses M_2 (pairs (x, a)) and M_1 (pairs (a, x)).
    # Negative parts by sums: sum max(-v, 0) = sum max(v, 0) - sum v (the hub entry, p(a) >= 0 in
    # both, cancels), so each residual is one buffer, updated in place.
    p_rows = take_rows(p, rows)
    d = p_rows - q_off  # p - q off the hub, p(a) at the hub
    total = d.sum(dim=-1)
    p1 = d.clamp_(min=0.0)  # p' (p(a) at the hub)
    leftover_first = torch.clamp(p1.sum(dim=-1) - total, min=0.0)  # M_2 = sum_{x != a} max(q - p, 0)
    # Q(a, x) = q(x) / (rest / q(a)), x != a (q_off is 0 on a one-hot row); not q(x) * (q(a) / rest),
    # whose factor overflows where 1 - q(a) is denormal (below about 1e-308, 1e-38 in float32)
    e = torch.addcdiv(p1, q_off, (rest / q_hub).unsqueeze(1), value=-1.0, out=q_off)  # p' - Q(a, .) (p(a) at the hub)
    total = e.sum(dim=-1)
    p2 = e.clamp_(min=0.0)  # p'' (p(a) at the hub, set below)
    leftover_second = torch.clamp(p2.sum(dim=-1) - total, min=0.0) + one_hot.to(p.dtype)  # M_1 (+1: the pair (a, a))

    # 3. the hub, first for rejected (a, x) pairs, then for rejected (x, a) pairs.
    p_hub = gather_tokens(p_rows, a)
    p_hub_after = torch.clamp(p_hub - leftover_second, min=0.0)
    u_hub = u[rows, 1]
    accept_hub = torch.where(first_hub, u_hub * leftover_second < p_hub, u_hub * leftover_first < p_hub_after)
    tokens[rows[accept_hub]] = a[accept_hub]
    accepted_index[rows[accept_hub]] = torch.where(first_hub[accept_hub], 0, 1)

    # 4. residual p'' (max(p(a) - M_1 - M_2, 0) at the hub).
    rejected = (~accept_hub).nonzero().squeeze(1)
    if rejected.numel():
        a = a[rejected]
        residual = take_rows(p2, rejected)  # p2 is our own
        hub_mass = torch.clamp(p_hub_after[rejected] - leftover_first[rejected], min=0.0)
        residual.scatter_(1, a.unsqueeze(1), hub_mass.unsqueeze(1))
        rows = rows[rejected]
        tokens[rows] = sample_residual(residual, p_rows, u[rows, 2], fallback_rows=rejected)
    return VerifierOutput(tokens=tokens, accepted_index=accepted_index)


def verify(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, 2, vocab]
    draft_tokens: torch.Tensor,  # [batch, 2]
    generator: torch.Generator | None,
) -> VerifierOutput:
    """SpecHub's verification (SpecHub, Sun et al. 2024, Alg. 3); ``draft_probs[:, 0]`` is ``q``."""
    u = verify_uniforms(target_probs, draft_probs, draft_tokens, generator, uniforms_per_row)
    return map_row_chunks(_spechub, target_probs, first_draft_probs(draft_probs), draft_tokens, u)
