"""The optimal verifier for i.i.d. drafts, batched: max-ratio priority with block
exchanges, then single-draft verification of the selected draft (:mod:`otm.rules.optimal`,
derivation and proofs in docs/optimal-verifier.md).

Per row (``p`` = target, ``q`` = draft, both renormalised in float64 by their
sequential sums; ranks are positions in the stable sort of ``p/q``, ``q = 0`` last):

1. ``C`` = cumulative ``q`` by rank, ``d_j`` the mean of ``k v^(k-1)`` over block
   ``[C_j, C_{j+1})``, ``sigma = q d``; the cut ``m`` = first minimiser of
   ``p(ranks < m) - C_m^k`` (the optimal prefix ``H``; ``alpha* = 1 + that minimum``);
2. ``U`` (ranks ``>= m``): the surplus ``sigma - p > 0`` of each rank is matched first
   in first out (upward) to the slack ``p - sigma > 0`` of the lower ranks; ``H``: the
   shortfall ``p - sigma > 0`` to the excess ``sigma - p > 0`` of higher ranks, downward
   from the top of ``H``. Each rank gets an interval ``[start, start + matched)`` of its
   group's matching coordinate; ``x = sigma +- matched`` (the lower rank of a pair gains);
3. a draft position holding rank ``r`` with ``matched > 0`` picks the partner rank ``b``
   whose interval contains ``start + u1 matched`` and moves its level block to ``b`` when
   ``u2 q_r |d_b - d_r| < matched`` (probability ``t / q_r`` per exchanged amount);
   otherwise its block is ``r``;
4. the position of the highest block is selected, ties (equal blocks) by ``u3``;
5. the selected draft ``Z`` is accepted when ``u4 x(Z) < p(Z)``, else ``Y`` is drawn
   from ``max(p - x, 0)`` by inverse CDF with ``u5`` (``p`` if that is empty, reached
   with probability 0).

Law: ``Y ~ p`` and ``P(Y in S(X)) = P(accepted) = alpha*(p, iid law)`` (exactly in exact
arithmetic; float64 here, so up to rounding of order 1e-16 per token).

Randomness (``uniforms_per_row(k) = 2k + 3``): columns ``0..k-1`` are ``u1`` of each
position, ``k..2k-1`` its ``u2``, ``2k`` the tie-break ``u3``, ``2k+1`` the acceptance
``u4``, ``2k+2`` the residual draw ``u5``. Work per row: one ``argsort`` of ``V`` and
O(kV) elementwise passes; per position four binary searches.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .base import (
    VerifierOutput,
    check_k,
    first_draft_probs,
    gather_tokens,
    sample_iid,
    sample_weighted,
    verify_uniforms,
)

draft_scheme = "iid"

#: Every quantity of the selection is computed in float64, whatever the input dtype.
WORK_DTYPE = torch.float64


def uniforms_per_row(k: int) -> int:
    """``u1`` and ``u2`` per draft position, then the tie-break, acceptance and residual."""
    return 2 * check_k(k) + 3


def sample_drafts(draft_probs: torch.Tensor, k: int, generator: torch.Generator | None) -> torch.Tensor:
    """``[batch, k]`` i.i.d. drafts from ``draft_probs`` ``[batch, vocab]``."""
    return sample_iid(draft_probs, k, generator)


@dataclass(frozen=True)
class RowParameters:
    """The per-row selection parameters, indexed by rank (``[batch, vocab]`` unless noted).

    Attributes:
        order: int64, token id of each rank.
        target: ``p`` by rank; ``draft``: ``q`` by rank; ``density``: ``d``.
        matched: exchanged amount of each rank; ``start``: start of its interval.
        moves_up: bool, the rank is the lower member of its pairs.
        upper: bool, the rank is in ``U`` (``>= cut``).
        cut: ``[batch]`` int64, ``|H|``.
        u_lower_ends, u_upper_ends: cumulative interval ends of the lower / upper ranks of
            ``U`` by rank (nondecreasing); h_lower_ends, h_upper_ends: the same for ``H``
            by reversed rank (index ``V-1-r``).
        selection: ``x``, the selection law by rank.
    """

    order: torch.Tensor
    target: torch.Tensor
    draft: torch.Tensor
    density: torch.Tensor
    matched: torch.Tensor
    start: torch.Tensor
    moves_up: torch.Tensor
    upper: torch.Tensor
    cut: torch.Tensor  # [batch]
    u_lower_ends: torch.Tensor
    u_upper_ends: torch.Tensor
    h_lower_ends: torch.Tensor
    h_upper_ends: torch.Tensor
    selection: torch.Tensor


def normalised_rows(probs: torch.Tensor) -> torch.Tensor:
    """Rows divided by their sequential (``cumsum``) totals, in float64."""
    probs = probs.to(WORK_DTYPE)
    return probs / probs.cumsum(dim=-1)[:, -1:]


def _shifted(ends: torch.Tensor) -> torch.Tensor:
    """``[batch, n]``: ``0, e_0, ..., e_{n-2}`` (the start of each interval)."""
    return torch.cat([torch.zeros_like(ends[:, :1]), ends[:, :-1]], dim=-1)


def _intervals(amounts: torch.Tensor, flow: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(ends, start, matched)`` of consecutive intervals of lengths ``amounts``
    ``[batch, n]`` from 0, truncated at ``flow`` ``[batch, 1]``."""
    ends = amounts.cumsum(dim=-1)
    start = _shifted(ends)
    matched = (torch.minimum(ends, flow) - start).clamp(min=0.0)
    return ends, start, matched


def row_parameters(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, vocab]
    k: int,
) -> RowParameters:
    """Steps 1-2 of the module docstring, batched over rows."""
    p = normalised_rows(target_probs)
    q = normalised_rows(draft_probs)
    positive = q > 0
    ratio = torch.where(positive, p / torch.where(positive, q, torch.ones_like(q)), torch.full_like(q, torch.inf))
    order = torch.argsort(ratio, dim=-1, stable=True)
    del ratio
    p_r, q_r = p.gather(1, order), q.gather(1, order)
    total = q_r.cumsum(dim=-1)  # C_{j+1}
    below = _shifted(total)  # C_j
    density = torch.ones_like(total)
    power = torch.ones_like(total)
    for _ in range(k - 1):
        power = power * below
        density = density * total + power
    del power, below
    own = q_r * density  # sigma
    power = torch.ones_like(total)
    for _ in range(k):
        power = power * total
    cut_values = p_r.cumsum(dim=-1) - power  # f(H_{j+1}) - 1
    del power, total
    zero = torch.zeros_like(cut_values[:, :1])
    cut = torch.argmin(torch.cat([zero, cut_values], dim=-1), dim=-1)  # first minimiser, [batch]
    del cut_values
    ranks = torch.arange(p.shape[1], device=p.device).unsqueeze(0)
    upper = ranks >= cut.unsqueeze(1)
    excess = torch.where(upper, p_r - own, own - p_r)  # U: slack > 0; H: excess > 0
    excess = torch.where(positive.gather(1, order), excess, torch.zeros_like(excess))
    gains = torch.where(upper, excess, -excess).clamp(min=0.0)  # U slack, H shortfall: the lower ranks
    loses = torch.where(upper, -excess, excess).clamp(min=0.0)  # U surplus, H excess: the upper ranks
    del excess
    u_gain, u_lose = torch.where(upper, gains, zero), torch.where(upper, loses, zero)
    h_gain, h_lose = torch.where(upper, zero, gains).flip(-1), torch.where(upper, zero, loses).flip(-1)
    moves_up = gains > 0
    del gains, loses
    u_flow = torch.minimum(u_gain.cumsum(-1)[:, -1:], u_lose.cumsum(-1)[:, -1:])
    h_flow = torch.minimum(h_gain.cumsum(-1)[:, -1:], h_lose.cumsum(-1)[:, -1:])
    u_lower_ends, u_lower_start, u_lower_matched = _intervals(u_gain, u_flow)
    u_upper_ends, u_upper_start, u_upper_matched = _intervals(u_lose, u_flow)
    h_lower_ends, h_lower_start, h_lower_matched = _intervals(h_gain, h_flow)
    h_upper_ends, h_upper_start, h_upper_matched = _intervals(h_lose, h_flow)
    del u_gain, u_lose, h_gain, h_lose
    start = torch.where(
        upper,
        torch.where(moves_up, u_lower_start, u_upper_start),
        torch.where(moves_up, h_lower_start.flip(-1), h_upper_start.flip(-1)),
    )
    matched = torch.where(
        upper,
        torch.where(moves_up, u_lower_matched, u_upper_matched),
        torch.where(moves_up, h_lower_matched.flip(-1), h_upper_matched.flip(-1)),
    )
    del u_lower_start, u_upper_start, h_lower_start, h_upper_start
    del u_lower_matched, u_upper_matched, h_lower_matched, h_upper_matched
    selection = (own + torch.where(moves_up, matched, -matched)).clamp(min=0.0)
    return RowParameters(
        order=order,
        target=p_r,
        draft=q_r,
        density=density,
        matched=matched,
        start=start,
        moves_up=moves_up,
        upper=upper,
        cut=cut,
        u_lower_ends=u_lower_ends,
        u_upper_ends=u_upper_ends,
        h_lower_ends=h_lower_ends,
        h_upper_ends=h_upper_ends,
        selection=selection,
    )


def token_ranks(order: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """``[batch, m]`` rank of each of ``tokens`` ``[batch, m]`` under ``order`` ``[batch, vocab]``."""
    inverse = torch.empty_like(order)
    inverse.scatter_(1, order, torch.arange(order.shape[1], device=order.device).expand_as(order))
    return inverse.gather(1, tokens)


def select_positions(
    params: RowParameters,
    ranks: torch.Tensor,  # [batch, k]
    uniforms: torch.Tensor,  # [batch, 2k + 1] (u1 per position, u2 per position, u3)
) -> torch.Tensor:
    """Steps 3-4: ``[batch]`` index of the selected draft position."""
    k = ranks.shape[1]
    vocab = params.order.shape[1]
    u1, u2, u3 = uniforms[:, :k], uniforms[:, k : 2 * k], uniforms[:, 2 * k]
    matched = params.matched.gather(1, ranks)
    point = params.start.gather(1, ranks) + u1 * matched
    up = params.moves_up.gather(1, ranks)
    in_u = params.upper.gather(1, ranks)
    u_partner = torch.where(
        up,
        torch.searchsorted(params.u_upper_ends, point, right=True),
        torch.searchsorted(params.u_lower_ends, point, right=True),
    )
    h_partner = vocab - 1 - torch.where(
        up,
        torch.searchsorted(params.h_upper_ends, point, right=True),
        torch.searchsorted(params.h_lower_ends, point, right=True),
    )
    partner = torch.where(in_u, u_partner, h_partner).clamp(0, vocab - 1)
    gap = (params.density.gather(1, partner) - params.density.gather(1, ranks)).abs()
    move = (matched > 0) & (u2 * params.draft.gather(1, ranks) * gap < matched)
    block = torch.where(move, partner, ranks)
    top = block == block.amax(dim=1, keepdim=True)
    count = top.sum(dim=1)
    pick = torch.minimum((u3 * count).floor().long(), count - 1)  # which of the tied positions
    return (top & (top.cumsum(dim=1) == (pick + 1).unsqueeze(1))).long().argmax(dim=1)


def verify_with_uniforms(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, vocab]
    draft_tokens: torch.Tensor,  # [batch, k]
    uniforms: torch.Tensor,  # [batch, 2k + 3]
) -> VerifierOutput:
    """The optimal verifier on pre-drawn uniforms (module docstring)."""
    k = draft_tokens.shape[1]
    params = row_parameters(target_probs, draft_probs, k)
    ranks = token_ranks(params.order, draft_tokens)
    u = uniforms.to(WORK_DTYPE)
    selected = select_positions(params, ranks, u[:, : 2 * k + 1])
    z_rank = ranks.gather(1, selected.unsqueeze(1)).squeeze(1)
    accept = u[:, 2 * k + 1] * gather_tokens(params.selection, z_rank) < gather_tokens(params.target, z_rank)
    residual = (params.target - params.selection).clamp(min=0.0)
    empty = residual.cumsum(dim=-1)[:, -1:] <= 0
    residual = torch.where(empty, params.target, residual)
    drawn = params.order.gather(1, sample_weighted(residual, u[:, 2 * k + 2]).unsqueeze(1)).squeeze(1)
    chosen = draft_tokens.gather(1, selected.unsqueeze(1)).squeeze(1)
    return VerifierOutput(
        tokens=torch.where(accept, chosen, drawn),
        accepted_index=torch.where(accept, selected, torch.full_like(selected, -1)),
    )


def verify(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, k, vocab]
    draft_tokens: torch.Tensor,  # [batch, k]
    generator: torch.Generator | None,
) -> VerifierOutput:
    """The optimal verifier for i.i.d. drafts from ``draft_probs[:, 0]`` (module docstring)."""
    uniforms = verify_uniforms(target_probs, draft_probs, draft_tokens, generator, uniforms_per_row)
    return verify_with_uniforms(target_probs, first_draft_probs(draft_probs), draft_tokens, uniforms)
