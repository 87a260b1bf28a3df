"""The optimal verifier for i.i.d. drafts, batched: max-ratio priority with block
exchanges, then single-draft verification of the selected draft (:mod:`otm.rules.optimal`,
derivation and proofs in docs/optimal-verifier.md).

Per row (``p`` = target, ``q`` = draft, in float64, renormalised by their totals summed
in rank order; ranks are positions in the stable sort of ``p/q``, ``q = 0`` last):

1. ``C_j``, ``P_j`` = ``q``, ``p`` of the ranks ``< j``; ``sigma_j = C_{j+1}^k - C_j^k``
   (the max-ratio selection law); the cut ``m`` = first minimiser of ``P_m - C_m^k`` over
   ``m = 0..V``: the optimal prefix ``H``;
2. ``e = p - sigma``; ``G_j``, ``L_j`` = sums of ``max(e, 0)``, ``max(-e, 0)`` over the
   ranks ``<= j`` (``G_{-1} = 0``). In ``U`` (ranks ``>= m``) the surplus of every rank
   (``e < 0``) is matched first in first out, upward, to the slack (``e > 0``) of lower
   ranks: a rank's interval is
   ``[G_{j-1}, G_j)`` (slack) or ``[L_{j-1}, L_j)`` (surplus) shifted by ``G_H = G_{m-1}``
   (``L_H``) and cut at the flow ``F_U = min(G_U, L_U)``. In ``H`` the shortfall
   (``e > 0``) is matched downward from the top to the excess (``e < 0``) of higher
   ranks: intervals ``[G_H - G_j, G_H - G_{j-1})`` and ``[L_H - L_j, L_H - L_{j-1})``, cut at
   ``F_H = min(G_H, L_H)``. ``matched`` = interval length; ``x = sigma + matched`` for
   ``e > 0``, ``sigma - matched`` for ``e < 0``;
3. a draft position holding rank ``r`` with ``matched > 0`` takes the point
   ``start + u1 matched``, the partner rank ``b`` whose interval holds it (one binary
   search in ``L`` or ``G``), and moves its level block to ``b`` when
   ``u2 q_r |d_b - d_r| < matched`` (``d = sigma / q``); otherwise its block is ``r``;
4. the position of the highest block is selected, ties (equal blocks) by ``u3``: its
   token is ``Z``;
5. ``Z`` is accepted when its rank has ``e > 0`` (then ``x(Z) <= p(Z)`` in exact
   arithmetic: ``x = p`` in ``H``, ``x <= p`` in ``U``, so the test below always passes) or
   when ``u4 x(Z) < p(Z)``; the accepted index is then the holder of ``Z`` (a position
   whose draft is ``Z``) numbered ``floor(u5 c)`` among the ``c`` holders, in position
   order. Else ``Y`` is the rank
   whose ``G`` interval holds ``G_H + F_U + u5 (G_{V-1} - G_H - F_U)``: in exact
   arithmetic ``max(p - x, 0)`` is the unmatched slack of ``U`` and ``p`` on the ``q = 0``
   tokens, which is exactly that stretch of ``G`` (``p`` itself if it is empty, reached
   with probability 0).

Step 5's index has the law of the selected position's: positions holding the same token
are exchangeable (i.i.d. ``u1, u2``, a symmetric tie-break), so given the drafts and
``Z`` the selected position is uniform over the holders of ``Z``, and acceptance depends
on ``Z`` and ``u4`` only; ``u5`` is unused on acceptance. Steps 4-5 as written let
:mod:`decoding.verifiers.optimal.identical_drafts` decide a row of identical drafts without steps
1-3 when a bound on ``x`` makes the test certain (docs/optimal-verifier.md#lazy-rows-of-identical-drafts);
:func:`verify_tuples` sends every other row the full way.

Law: ``Y ~ p`` and ``P(Y in S(X)) = P(accepted) = alpha*(p, iid law)`` (exactly in exact
arithmetic; float64 here, so up to rounding of order 1e-16 per token).

Randomness (``uniforms_per_row(k) = 2k + 3``): columns ``0..k-1`` are ``u1`` of each
position, ``k..2k-1`` its ``u2``, ``2k`` the tie-break ``u3``, ``2k+1`` the acceptance
``u4``, ``2k+2`` the residual draw or the holder ``u5``. Work per row on the full path:
one stable sort of ``V`` keys (the int64 bit patterns of the float64 ratios, which sort like
the ratios; one row at a time on the CPU at long rows, :func:`stable_sort_rows`), about twenty O(V)
passes, and six binary searches per draft position (two for its rank in the sorted keys,
:func:`sorted_ranks`); a row of identical drafts whose acceptance is certain: the two sums
of :mod:`decoding.verifiers.optimal.identical_drafts` and no sort. On the CPU the rows go one per
chunk, with one :class:`decoding.verifiers.base.Scratch` of work arrays for the call; from
1,024 tokens on the CPU runs the full path on merged rows instead, without the sort
(:mod:`decoding.verifiers.optimal.unsorted`, each row in compiled code, numba). On a CUDA
device every row goes the full path in one batch, replayed from a CUDA graph once its
shapes have been seen (:mod:`decoding.verifiers.cuda_graphs`): up to tens of rows the cost
there is the kernel launches, and a row more costs little.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..base import (
    VerifierOutput,
    check_k,
    Scratch,
    cumsum_rows,
    first_draft_probs,
    map_row_chunks,
    sample_iid,
    verify_uniforms,
)
from ..cuda_graphs import GraphedFunction
from .identical_drafts import certified_acceptance, identical_drafts

draft_scheme = "iid"

#: Every quantity of the selection is computed in float64, whatever the input dtype.
WORK_DTYPE = torch.float64


#: Bytes of input rows per CPU chunk (:func:`decoding.verifiers.base.map_row_chunks`): one
#: row at ``V = 151,936``. The full path keeps about fifteen float64 work arrays per chunk,
#: so small chunks keep its :class:`decoding.verifiers.base.Scratch` small: timing
#: ``verify_tuples`` on the 64 Qwen rows of ``scripts/bench_verifier_cost.py`` (k = 2, one run
#: per value, 2026-11-25) with 1-2 rows per chunk took 160 ms, with 4 rows 180 ms and with 6
#: rows (the default 4 MiB) 210 ms.
CHUNK_BYTES = 1 << 20


def compile_seconds(device: torch.device) -> float:
    """About how long the first ``verify`` on ``device`` compiles code on this machine: 15 s
    on the CPU until numba's cache holds the merged rows
    (:func:`decoding.verifiers.optimal.unsorted.compiled_on_this_machine`), else 0. The
    optional hook that ``otm decode`` reads to say so before it starts."""
    if device.type != "cpu":
        return 0.0
    from . import unsorted  # numba only where the CPU path runs

    return 0.0 if unsorted.compiled_on_this_machine() else 15.0


def uniforms_per_row(k: int) -> int:
    """``u1`` and ``u2`` per draft position, then the tie-break, acceptance and residual."""
    return 2 * check_k(k) + 3


def sample_drafts(draft_probs: torch.Tensor, k: int, generator: torch.Generator | None) -> torch.Tensor:
    """``[batch, k]`` i.i.d. drafts from ``draft_probs`` ``[batch, vocab]``."""
    return sample_iid(draft_probs, k, generator)


def power(values: torch.Tensor, k: int, out: torch.Tensor | None = None, base: torch.Tensor | None = None) -> torch.Tensor:
    """``values**k`` by binary exponentiation (the references multiply in the same order).
    With ``out`` and ``base`` (arrays of the shape of ``values``, overlapping neither it nor
    each other) the result is written to ``out`` and the squares to ``base``; the same
    floats either way."""
    result, square = None, values
    while k:
        if k & 1:
            if result is None:
                result = square if out is None else out.copy_(square)
            else:
                result = result * square if out is None else torch.mul(result, square, out=out)
        k >>= 1
        if k:
            square = square * square if base is None else torch.mul(square, square, out=base)
    return result


@dataclass(frozen=True)
class RowParameters:
    """Per-row parameters (``[batch, vocab]`` by rank unless noted; module docstring).

    Attributes:
        order: int64, token id of each rank; keys: int64, the sorted ratio bits (the key of
            each rank: the float64 ``p / q`` of the unnormalised rows, ``inf`` where ``q = 0``).
        draft: ``q`` by rank, unnormalised; own: ``sigma`` by rank.
        gains: ``G``; losses: ``L``; target_cumulative: ``P``.
        cut: ``[batch]`` int64 ``m``; support: ``[batch]`` int64 ``n`` (tokens with ``q > 0``).
        gains_h, losses_h: ``[batch, 1]`` ``G_H``, ``L_H``; flow_u, flow_h: ``F_U``, ``F_H``.
        target_mass, draft_mass: ``[batch, 1]`` the totals of the unnormalised rows.
    """

    order: torch.Tensor
    keys: torch.Tensor
    draft: torch.Tensor
    own: torch.Tensor
    gains: torch.Tensor
    losses: torch.Tensor
    target_cumulative: torch.Tensor
    cut: torch.Tensor  # [batch]
    support: torch.Tensor  # [batch]
    gains_h: torch.Tensor  # [batch, 1]
    losses_h: torch.Tensor  # [batch, 1]
    flow_u: torch.Tensor  # [batch, 1]
    flow_h: torch.Tensor  # [batch, 1]
    target_mass: torch.Tensor  # [batch, 1]
    draft_mass: torch.Tensor  # [batch, 1]


#: From this vocabulary on, :func:`stable_sort_rows` sorts CPU rows one at a time; below it,
#: the whole batch in one call, whose per-row cost is far below the fixed cost of a call per
#: row on short rows (the two cross between 1,024 and 2,048 tokens).
SORT_ROW_BY_ROW_VOCAB = 2048


def stable_sort_rows(keys: torch.Tensor, scratch: Scratch | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.sort(keys, dim=-1, stable=True)`` of int64 ``keys`` ``[batch, vocab]``: the sorted
    keys and the order (in ``scratch`` buffers when given). On the CPU from
    :data:`SORT_ROW_BY_ROW_VOCAB` tokens on, one row at a time: torch sorts a single contiguous
    int64 row by radix sort and a batch with a comparison sort, about 4x slower per row at
    ``V = 151,936`` (docs/optimal-verifier.md#measured-cost). A stable sort has one result, so both
    give the same order."""
    if keys.device.type != "cpu":
        return torch.sort(keys, dim=-1, stable=True)
    scratch = Scratch() if scratch is None else scratch
    values = scratch.take("sorted_keys", keys.shape, keys.dtype, keys.device)
    order = scratch.take("order", keys.shape, torch.int64, keys.device)
    if keys.shape[1] < SORT_ROW_BY_ROW_VOCAB:
        torch.sort(keys, dim=-1, stable=True, out=(values, order))
        return values, order
    for row in range(keys.shape[0]):
        torch.sort(keys[row], stable=True, out=(values[row], order[row]))
    return values, order


def _at(values: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``values[b, index[b, j]]``, and 0 where ``index < 0`` (the empty prefix)."""
    picked = values.gather(1, index.clamp(min=0))
    return torch.where(index >= 0, picked, torch.zeros_like(picked))


def row_parameters(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, vocab]
    k: int,
    scratch: Scratch | None = None,
) -> RowParameters:
    """Steps 1-2 of the module docstring, batched over rows: the stable sort of the ratio
    keys (:func:`ratio_keys`), then :func:`ranked_parameters`. The ``[batch, vocab]`` arrays
    live in ``scratch`` (:class:`decoding.verifiers.base.Scratch`; a new one by default): the
    parameters are valid until the next call with the same scratch."""
    scratch = Scratch() if scratch is None else scratch

    def work(name: str, dtype: torch.dtype = WORK_DTYPE) -> torch.Tensor:
        return scratch.take(name, tuple(target_probs.shape), dtype, target_probs.device)

    p, q = work("p").copy_(target_probs), work("q").copy_(draft_probs)
    ratio = torch.div(p, q, out=work("ratio")).abs_()  # -0.0 / q -> +0.0: every key >= 0
    ratio.masked_fill_(torch.le(q, 0, out=work("zero", torch.bool)), torch.inf)
    keys, order = stable_sort_rows(ratio.view(torch.int64), scratch)  # non-negative doubles sort as their bits
    p_r, q_r = torch.gather(p, 1, order, out=work("p_rank")), torch.gather(q, 1, order, out=work("q_rank"))
    return ranked_parameters(order, keys, p_r, q_r, k, scratch)


def ranked_parameters(
    order: torch.Tensor,  # [batch, n] int64 token of each rank
    keys: torch.Tensor,  # [batch, n] int64 ratio key of each rank, non-decreasing
    p_r: torch.Tensor,  # [batch, n] float64 p by rank (overwritten)
    q_r: torch.Tensor,  # [batch, n] float64 q by rank (kept as ``draft``)
    k: int,
    scratch: Scratch | None = None,
) -> RowParameters:
    """Step 1's sums, the cut and step 2, given the rows by rank (``n`` = the vocabulary).
    :func:`decoding.verifiers.optimal.unsorted_rows.ranked_parameters` is this function for one row,
    in the same floating-point operations, on the merged rows of
    :mod:`decoding.verifiers.optimal.unsorted`, where runs of ranks are one entry (their
    summed ``p`` and ``q``)."""
    scratch = Scratch() if scratch is None else scratch

    def work(name: str) -> torch.Tensor:
        return scratch.take(name, tuple(p_r.shape), WORK_DTYPE, p_r.device)

    draft_total = cumsum_rows(q_r, out=work("ratio"))
    draft_mass = draft_total[:, -1:].clone()
    c_power = power(draft_total.div_(draft_mass), k, out=work("power"), base=work("p"))  # C_j^k
    own = work("own").copy_(c_power)
    own[:, 1:] -= c_power[:, :-1]  # sigma
    target_cumulative = cumsum_rows(p_r, out=work("target_cumulative"))
    target_mass = target_cumulative[:, -1:].clone()
    target_cumulative.div_(target_mass)
    scores = torch.sub(target_cumulative, c_power, out=work("q"))  # f(H_{j+1}) - 1
    best = scores.argmin(dim=-1, keepdim=True)  # first minimiser
    cut = torch.where(scores.gather(1, best) < 0, best + 1, torch.zeros_like(best)).squeeze(1)
    excess = p_r.div_(target_mass).sub_(own)
    gains = cumsum_rows(torch.clamp(excess, min=0.0, out=work("ratio")), out=work("gains"))
    losses = cumsum_rows(excess.neg_().clamp_(min=0.0), out=work("losses"))
    support = (q_r > 0).sum(dim=-1)
    before_cut = (cut - 1).unsqueeze(1)
    gains_h, losses_h = _at(gains, before_cut), _at(losses, before_cut)
    gains_u = gains.gather(1, (support - 1).unsqueeze(1)) - gains_h
    losses_u = losses[:, -1:] - losses_h
    return RowParameters(
        order=order,
        keys=keys,
        draft=q_r,
        own=own,
        gains=gains,
        losses=losses,
        target_cumulative=target_cumulative,
        cut=cut,
        support=support,
        gains_h=gains_h,
        losses_h=losses_h,
        flow_u=torch.minimum(gains_u, losses_u),
        flow_h=torch.minimum(gains_h, losses_h),
        target_mass=target_mass,
        draft_mass=draft_mass,
    )


def token_ranks(order: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """``[batch, m]`` rank of each of ``tokens`` ``[batch, m]`` under ``order`` ``[batch, vocab]``,
    by the inverse permutation (the reference for :func:`sorted_ranks`)."""
    inverse = torch.empty_like(order)
    inverse.scatter_(1, order, torch.arange(order.shape[1], device=order.device).expand_as(order))
    return inverse.gather(1, tokens)


def ratio_keys(p_tokens: torch.Tensor, q_tokens: torch.Tensor) -> torch.Tensor:
    """The sort keys of :func:`row_parameters` at given tokens: the int64 bits of the float64
    ``p / q`` of the unnormalised rows (``p_tokens``, ``q_tokens`` in the input dtype), ``inf``
    where ``q = 0``."""
    p, q = p_tokens.to(WORK_DTYPE), q_tokens.to(WORK_DTYPE)
    return torch.where(q > 0, (p / q).abs(), torch.inf).view(torch.int64)


def sorted_ranks(params: RowParameters, tokens: torch.Tensor, token_keys: torch.Tensor) -> torch.Tensor:
    """``[batch, m]`` rank of each of ``tokens`` (keys ``token_keys``, :func:`ratio_keys`), the
    same as :func:`token_ranks`. In a row where none of ``tokens`` shares its key with another
    token, its rank is the number of smaller keys (a binary search in the sorted keys), without
    the V-sized inverse permutation; the rows where one does (``p = q``, tokens with ``p = 0``
    or ``q = 0``, equal masses: common) all at once by :func:`token_ranks`, the stable sort
    having ordered each block of equal keys by id. Off the CPU every row by
    :func:`token_ranks` (one scatter, no host synchronisation; the same ranks), so that a CUDA
    graph can hold the full path (:func:`verify_tuples`)."""
    if params.order.device.type != "cpu":  # selecting the tied rows would wait for the device
        return token_ranks(params.order, tokens)
    ranks = torch.searchsorted(params.keys, token_keys, right=False)
    last = torch.searchsorted(params.keys, token_keys, right=True)
    tied = (last - ranks > 1).any(dim=1).nonzero().squeeze(1)
    if tied.numel():
        ranks[tied] = token_ranks(params.order[tied], tokens[tied])
    return ranks


@dataclass(frozen=True)
class Positions:
    """What a row needs to know about its draft positions (``[batch, k]``).

    Attributes:
        selection: ``x`` at each position's rank.
        blocks: the rank of the block each position's level falls in.
        gains: ``e > 0`` at each position's rank (a shortfall or slack rank).
    """

    selection: torch.Tensor
    blocks: torch.Tensor
    gains: torch.Tensor  # [batch, k] bool: e > 0 at the position's rank


def position_blocks(
    params: RowParameters,
    p_tokens: torch.Tensor,  # [batch, k] p of each position's token
    q_tokens: torch.Tensor,  # [batch, k] q of each position's token
    ranks: torch.Tensor,  # [batch, k]
    u1: torch.Tensor,  # [batch, k]
    u2: torch.Tensor,  # [batch, k]
) -> Positions:
    """Step 3 (and ``x`` at each position's rank)."""
    vocab = params.order.shape[1]
    own = params.own.gather(1, ranks)
    excess = p_tokens - own
    lower, upper = excess > 0, excess < 0
    in_u = ranks >= params.cut.unsqueeze(1)
    g_hi, g_lo = _at(params.gains, ranks), _at(params.gains, ranks - 1)
    l_hi, l_lo = _at(params.losses, ranks), _at(params.losses, ranks - 1)
    g_h, l_h = params.gains_h, params.losses_h
    start_u = torch.where(lower, g_lo - g_h, l_lo - l_h)
    end_u = torch.where(lower, g_hi - g_h, l_hi - l_h)
    start_h = torch.where(lower, g_h - g_hi, l_h - l_hi)
    end_h = torch.where(lower, g_h - g_lo, l_h - l_lo)
    start = torch.where(in_u, start_u, start_h)
    end = torch.minimum(torch.where(in_u, end_u, end_h), torch.where(in_u, params.flow_u, params.flow_h))
    matched = torch.where(lower | upper, (end - start).clamp(min=0.0), torch.zeros_like(start))
    point = start + u1 * matched
    partner = torch.where(
        in_u,
        torch.where(
            lower,
            torch.searchsorted(params.losses, point + l_h, right=True),
            torch.searchsorted(params.gains, point + g_h, right=True),
        ),
        torch.where(
            lower,
            torch.searchsorted(params.losses, l_h - point, right=False),
            torch.searchsorted(params.gains, g_h - point, right=False),
        ),
    ).clamp(0, vocab - 1)
    valid = (partner != ranks) & ((partner >= params.cut.unsqueeze(1)) == in_u) & (partner < params.support.unsqueeze(1))
    partner_q = params.draft.gather(1, partner) / params.draft_mass
    gap = (params.own.gather(1, partner) / partner_q - own / q_tokens).abs()
    move = (matched > 0) & valid & (u2 * q_tokens * gap < matched)
    selection = (own + torch.where(lower, matched, -matched)).clamp(min=0.0)
    return Positions(
        selection=selection,
        blocks=torch.where(move, partner, ranks),
        gains=lower,
    )


def highest_block(blocks: torch.Tensor, u3: torch.Tensor) -> torch.Tensor:
    """Step 4: ``[batch]`` index of the position with the highest block, ties by ``u3``."""
    top = blocks == blocks.amax(dim=1, keepdim=True)
    count = top.sum(dim=1)
    pick = torch.minimum((u3 * count).floor().long(), count - 1)  # which of the tied positions
    return _numbered(top, pick)


def _numbered(members: torch.Tensor, pick: torch.Tensor) -> torch.Tensor:
    """``[batch]`` index of member number ``pick`` (from 0, in position order) of ``members`` ``[batch, k]``."""
    return (members & (members.cumsum(dim=1) == (pick + 1).unsqueeze(1))).long().argmax(dim=1)


def accepted_holder(
    draft_tokens: torch.Tensor,  # [batch, k]
    chosen: torch.Tensor,  # [batch] the accepted token
    u5: torch.Tensor,  # [batch] float64
) -> torch.Tensor:
    """Step 5's accepted index: ``[batch]`` the holder of ``chosen`` numbered ``floor(u5 c)``
    among its ``c`` holders."""
    holders = draft_tokens == chosen.unsqueeze(1)
    count = holders.sum(dim=1)
    return _numbered(holders, torch.minimum((u5 * count).floor().long(), count - 1))


def residual_ranks(params: RowParameters, u5: torch.Tensor) -> torch.Tensor:
    """Step 5's draw: ``[batch]`` rank from ``max(p - x, 0)`` (the unmatched stretch of ``G``)."""
    vocab = params.order.shape[1]
    g_end = params.gains[:, -1:]
    low = params.gains_h + params.flow_u
    total = g_end - low
    below_end = torch.nextafter(g_end, torch.full_like(g_end, -torch.inf))
    point = torch.minimum(low + u5.unsqueeze(1) * total, below_end)
    p_end = params.target_cumulative[:, -1:]
    fallback = torch.minimum(u5.unsqueeze(1) * p_end, torch.nextafter(p_end, torch.full_like(p_end, -torch.inf)))
    from_gains = torch.searchsorted(params.gains, point, right=True)
    from_target = torch.searchsorted(params.target_cumulative, fallback, right=True)
    return torch.where(total > 0, from_gains, from_target).clamp(max=vocab - 1).squeeze(1)


def verify_rows(
    params: RowParameters,
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, vocab]
    draft_tokens: torch.Tensor,  # [batch, k]
    uniforms: torch.Tensor,  # [batch, 2k + 3]
) -> VerifierOutput:
    """Steps 3-5 of the module docstring for the rows of ``params`` (the drafts' ranks found
    by :func:`sorted_ranks`)."""
    k = draft_tokens.shape[1]
    p_drafted, q_drafted = target_probs.gather(1, draft_tokens), draft_probs.gather(1, draft_tokens)
    u = uniforms.to(WORK_DTYPE)
    p_tokens = p_drafted.to(WORK_DTYPE) / params.target_mass
    q_tokens = q_drafted.to(WORK_DTYPE) / params.draft_mass
    ranks = sorted_ranks(params, draft_tokens, ratio_keys(p_drafted, q_drafted))
    positions = position_blocks(params, p_tokens, q_tokens, ranks, u[:, :k], u[:, k : 2 * k])
    at = highest_block(positions.blocks, u[:, 2 * k]).unsqueeze(1)
    passes = u[:, 2 * k + 1 : 2 * k + 2] * positions.selection.gather(1, at) < p_tokens.gather(1, at)
    accept = (positions.gains.gather(1, at) | passes).squeeze(1)
    drawn = params.order.gather(1, residual_ranks(params, u[:, 2 * k + 2]).unsqueeze(1)).squeeze(1)
    chosen = draft_tokens.gather(1, at).squeeze(1)
    holder = accepted_holder(draft_tokens, chosen, u[:, 2 * k + 2])
    return VerifierOutput(
        tokens=torch.where(accept, chosen, drawn),
        accepted_index=torch.where(accept, holder, torch.full_like(holder, -1)),
    )


def verify_tuples(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, vocab] q
    draft_tokens: torch.Tensor,  # [batch, k]
    uniforms: torch.Tensor,  # [batch, 2k + 3]
) -> VerifierOutput:
    """Steps 1-5 for every row, lazily: a row of identical drafts whose acceptance
    :func:`decoding.verifiers.optimal.identical_drafts.certified_acceptance` proves is accepted at
    once (holder ``floor(u5 k)``); the other rows go the full way: on the CPU at a vocabulary
    of at least :data:`decoding.verifiers.optimal.unsorted.MIN_VOCAB` through its merged rows
    (no sort of the vocabulary), else through :func:`verify_sorted`. The
    same draw as :func:`verify_rows` on every row (in exact arithmetic; draw for draw in
    floats except where a uniform falls within rounding of a boundary). On a CUDA device
    every row goes through :func:`verify_sorted` in one batch, from a CUDA graph
    (:data:`graphed_full_path`): the lazy rows' test would wait for the device."""
    if target_probs.device.type == "cuda":
        return VerifierOutput(*graphed_full_path(target_probs, draft_probs, draft_tokens, uniforms))
    from . import unsorted  # numba only where the CPU path runs

    batch, k = draft_tokens.shape
    u = uniforms.to(WORK_DTYPE)
    sure = torch.zeros(batch, dtype=torch.bool, device=draft_tokens.device)
    same = identical_drafts(draft_tokens).nonzero().squeeze(1)
    if same.numel():
        sure[same] = certified_acceptance(target_probs, draft_probs, draft_tokens[same, 0], u[same, 2 * k + 1], k, same, CHUNK_BYTES)
    tokens = draft_tokens[:, 0].clone()
    accepted_index = accepted_holder(draft_tokens, tokens, u[:, 2 * k + 2])
    rest = (~sure).nonzero().squeeze(1)
    if not rest.numel():
        return VerifierOutput(tokens=tokens, accepted_index=accepted_index)
    if target_probs.device.type == "cpu" and target_probs.shape[1] >= unsorted.MIN_VOCAB:
        out = unsorted.verify_rows(target_probs, draft_probs, draft_tokens, uniforms, rows=rest)
    else:
        out = verify_sorted(target_probs, draft_probs, draft_tokens, uniforms, rows=rest)
    tokens[rest], accepted_index[rest] = out.tokens, out.accepted_index
    return VerifierOutput(tokens=tokens, accepted_index=accepted_index)


def verify_sorted(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, vocab] q
    draft_tokens: torch.Tensor,  # [batch, k]
    uniforms: torch.Tensor,  # [batch, 2k + 3]
    rows: torch.Tensor | None = None,  # [n] the rows to verify (default: all)
    scratch: Scratch | None = None,
) -> VerifierOutput:
    """Steps 1-5 the full way with the sort, for ``rows`` of the batch (``[n]`` outputs):
    :func:`row_parameters` and :func:`verify_rows` on chunks of rows
    (:data:`CHUNK_BYTES`), one ``scratch`` of work arrays for every chunk (a new one by
    default)."""
    scratch = Scratch() if scratch is None else scratch
    k = draft_tokens.shape[1]
    return map_row_chunks(
        lambda p, q, x, w: verify_rows(row_parameters(p, q, k, scratch), p, q, x, w),
        target_probs, draft_probs, draft_tokens, uniforms, rows=rows, chunk_bytes=CHUNK_BYTES,
    )


def _full_path(p: torch.Tensor, q: torch.Tensor, drafts: torch.Tensor, uniforms: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    out = verify_sorted(p, q, drafts, uniforms)
    return out.tokens, out.accepted_index


#: :func:`verify_sorted` on all rows, as ``(tokens, accepted_index)``, replayed from a CUDA
#: graph per input shape (:mod:`decoding.verifiers.cuda_graphs`; eager off CUDA).
graphed_full_path = GraphedFunction(_full_path)


def verify(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, k, vocab]
    draft_tokens: torch.Tensor,  # [batch, k]
    generator: torch.Generator | None,
) -> VerifierOutput:
    """The optimal verifier for i.i.d. drafts from ``draft_probs[:, 0]`` (module docstring)."""
    uniforms = verify_uniforms(target_probs, draft_probs, draft_tokens, generator, uniforms_per_row)
    return verify_tuples(target_probs, first_draft_probs(draft_probs), draft_tokens, uniforms)
