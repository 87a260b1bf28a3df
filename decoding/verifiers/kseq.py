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

Bisection without a pass over the vocabulary per halving (our derivation): with
``r(x) = p(x) / q(x)``, ``beta(g) = q({r >= g}) + p({r < g}) / g`` (a token with
``q = 0`` adds nothing). The first ``b = HISTOGRAM_BITS`` halvings of ``[1, k]`` only
visit the grid ``e_m = 1 + m (k - 1) / 2^b``, and at a grid point
``beta(e_m) = q(bucket > m) + p(bucket <= m) / e_m`` for the bucket index
``floor((r - 1) 2^b / (k - 1)) + 1`` clamped to ``[0, 2^b + 1]``: one histogram of ``p``
and of ``q`` over these buckets (one pass each, after the passes for the index) gives
``beta`` at every grid point. After ``b`` halvings the bracket is one bucket
``[e_m, e_{m+1}]``; the tokens outside it keep their side for every ``g`` in it, so the
remaining halvings need only the tokens of that bucket (gathered once, a few dozen on
a real vocabulary) and two scalars. The decisions are those of the plain bisection
(the same midpoints, ``beta`` summed in a different order).

V-sized passes per row: 9 for ``g*`` (index, floor, clamp, two conversions, two
histograms, bucket mask, gather), plus ``8`` for each row that rejects all ``k``
drafts (gather ``p`` and ``q``, ``min(q, p / g)`` and its sum, residual, clamp,
inverse-CDF scan); the previous version made 3 passes per halving (``54 x 3`` in
float64) for every row.

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
    chunk_rows,
    first_draft_probs,
    gather_tokens,
    map_row_chunks,
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


def _accepted_mass_factor(beta: torch.Tensor, k: int) -> torch.Tensor:
    """``c(beta) = (1 - (1 - beta)^k) / beta = sum_{j<k} (1 - beta)^j`` (``= k`` at 0), by
    Horner's rule."""
    miss = 1.0 - beta
    one = torch.ones((), dtype=beta.dtype, device=beta.device)
    total = torch.ones_like(beta)
    for _ in range(k - 1):
        total = torch.addcmul(one, miss, total)
    return total


#: log2 of the buckets of the ratio histogram of :func:`optimal_division_factor` (at most;
#: a vocabulary of ``V`` tokens gets about ``V`` buckets).
HISTOGRAM_BITS = 14


def _bisection_steps(dtype: torch.dtype) -> int:
    """Halvings that shrink ``[1, k]`` below the dtype's resolution (54 in float64)."""
    return int(-math.log2(torch.finfo(dtype).eps)) + 2


def _bucket_bracket(
    target_probs: torch.Tensor,  # [n, vocab]
    draft_probs: torch.Tensor,  # [n, vocab]
    k: int,
    bits: int,
) -> tuple[torch.Tensor, ...]:
    """The first ``bits`` halvings from the ratio histogram (module docstring).

    Bucket coordinates: ``t = s r + (c - s)`` with ``s = 2^bits / (k - 1)`` and
    ``c = ceil(s)``, so that grid bucket ``[e_m, e_{m+1})`` is ``floor(t) = c + m``; the
    tokens with ``r < 1`` spread over ``[0, c)`` and those with ``r >= k`` over
    ``[c + 2^bits, c + 2^bits + c]`` (spreading them keeps the scatter-add from
    serialising on one accumulator; ``t`` is clamped to that range, a ``0 / 0`` ratio
    (no weight) lands anywhere valid).

    Returns ``(low, below, above, p_in, q_in, one_is_valid)``: ``low`` ``[n]`` the lower
    end ``e_m`` of the final bucket, ``below`` ``[n]`` = ``p(r < e_m)``, ``above`` ``[n]``
    = ``q(r >= e_{m+1})``, ``p_in``, ``q_in`` ``[n, w]`` the tokens of the bucket (zero
    padded) and ``one_is_valid`` ``[n]`` (``c(beta(1)) <= 1``).
    """
    n = target_probs.shape[0]
    buckets = 1 << bits
    scale = buckets / (k - 1)
    first = math.ceil(scale)  # the bucket of e_0 = 1
    top = 2 * first + buckets
    offset = torch.full((), first - scale, dtype=target_probs.dtype, device=target_probs.device)
    coordinate = torch.addcdiv(offset, target_probs, draft_probs, value=scale).clamp_(0, top)
    bucket = coordinate.int()  # floor (non-negative)
    index = bucket.long().clamp_(0, top)
    hist_p = target_probs.new_zeros(n, top + 1).scatter_add_(1, index, target_probs).double()
    hist_q = draft_probs.new_zeros(n, top + 1).scatter_add_(1, index, draft_probs).double()
    p_below = hist_p.cumsum(dim=1)  # p_below[j] = p(bucket <= j)
    q_below = hist_q.cumsum(dim=1)
    q_total = q_below[:, -1:]  # q(bucket >= j) = q_total - q_below[j - 1]
    step = (k - 1) / buckets  # e_m = 1 + m * step

    def too_small(m: torch.Tensor) -> torch.Tensor:  # [n]: c(beta(e_m)) > e_m
        j = (first - 1 + m).unsqueeze(1)
        g = (m * step + 1.0).double()
        beta = torch.addcdiv(q_total - q_below.gather(1, j), p_below.gather(1, j), g.unsqueeze(1)).squeeze(1)
        return _accepted_mass_factor(beta, k) > g

    lo = torch.zeros(n, dtype=torch.int64, device=target_probs.device)
    hi = torch.full_like(lo, buckets)
    one_is_valid = ~too_small(lo)
    for _ in range(bits):
        mid = (lo + hi) // 2
        below_root = too_small(mid)
        lo = torch.where(below_root, mid, lo)
        hi = torch.where(below_root, hi, mid)
    row, col = (bucket == (first + lo).to(bucket.dtype).unsqueeze(1)).nonzero(as_tuple=True)  # bucket lo's tokens
    counts = torch.bincount(row, minlength=n)
    width = int(counts.max()) if row.numel() else 0
    slot = torch.arange(row.numel(), device=row.device) - (counts.cumsum(0) - counts)[row]
    p_in = target_probs.new_zeros(n, width).index_put_((row, slot), target_probs[row, col])
    q_in = draft_probs.new_zeros(n, width).index_put_((row, slot), draft_probs[row, col])
    below = p_below.gather(1, (first + lo - 1).unsqueeze(1)).squeeze(1)
    above = (q_total - q_below.gather(1, (first + lo).unsqueeze(1))).squeeze(1)  # q(bucket > lo)
    return (lo * step + 1.0).double(), below, above, p_in, q_in, one_is_valid


def _padded_cat(parts: list[torch.Tensor]) -> torch.Tensor:
    """``[n_1 + .., max w]``: the ``[n_j, w_j]`` parts, zero padded on the right."""
    width = max(t.shape[1] for t in parts)
    return torch.cat([torch.nn.functional.pad(t, (0, width - t.shape[1])) for t in parts])


def optimal_division_factor(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, vocab]
    k: int,
) -> torch.Tensor:
    """``[batch]``: the smallest valid division factor ``g*`` of each row (SpecTr, Sun et al. 2023,
    eq. 6), by bisection on ``[1, k]``; returns the upper end of the final bracket, or
    exactly 1 when ``g = 1`` is valid. The first :data:`HISTOGRAM_BITS` halvings read a
    ratio histogram, the others the tokens of the last bucket (module docstring)."""
    k = check_k(k)
    batch, vocab = target_probs.shape
    if k == 1:
        return torch.ones(batch, dtype=target_probs.dtype, device=target_probs.device)
    steps = _bisection_steps(target_probs.dtype)
    bits = min(HISTOGRAM_BITS, steps, vocab.bit_length())  # about as many buckets as tokens at most
    size = chunk_rows(batch, max(vocab, 3 << bits), target_probs)  # a histogram row has < 3 * 2^bits + 2 buckets
    parts = [_bucket_bracket(target_probs[s : s + size], draft_probs[s : s + size], k, bits) for s in range(0, batch, size)]
    low, below, above, p_in, q_in, one_is_valid = (
        _padded_cat([part[j] for part in parts]) if j in (3, 4) else torch.cat([part[j] for part in parts]) for j in range(6)
    )
    p_in, q_in = p_in.double(), q_in.double()
    high = low + (k - 1) / (1 << bits)
    for _ in range(steps - bits):
        mid = 0.5 * (low + high)
        beta = torch.minimum(q_in, p_in / mid.unsqueeze(1)).sum(dim=1).add_(above).add_(below / mid)
        too_small = _accepted_mass_factor(beta, k) > mid
        low = torch.where(too_small, mid, low)
        high = torch.where(too_small, high, mid)
    high = torch.where(one_is_valid, torch.ones_like(high), high)
    factor = high.to(target_probs.dtype)  # rounded up, so that it stays >= g*
    return torch.where(factor.double() < high, torch.nextafter(factor, torch.full_like(factor, math.inf)), factor)


def _kseq(
    target_probs: torch.Tensor,  # [batch, vocab]
    q: torch.Tensor,  # [batch, vocab]
    draft_tokens: torch.Tensor,  # [batch, k]
    factor: torch.Tensor,  # [batch]
    uniforms: torch.Tensor,  # [batch, k + 1]
) -> VerifierOutput:
    """SpecTr (Sun et al. 2023), Alg. 2 on pre-drawn uniforms; the residual only for the
    rows that reject every draft."""
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
    rows = pending.nonzero().squeeze(1)
    if rows.numel():
        p_rows = torch.index_select(target_probs, 0, rows)
        scaled = p_rows / factor[rows].unsqueeze(1)
        scaled = torch.minimum(torch.index_select(q, 0, rows), scaled, out=scaled)  # min(q, p / g)
        c = _accepted_mass_factor(scaled.sum(dim=-1), k)
        residual = torch.addcmul(p_rows, c.unsqueeze(1), scaled, value=-1.0, out=scaled).clamp_(min=0.0)
        tokens[rows] = sample_residual(residual, p_rows, uniforms[rows, k])
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
    return map_row_chunks(_kseq, target_probs, first_draft_probs(draft_probs), draft_tokens, factor, uniforms)


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
    return map_row_chunks(_kseq, target_probs, q, draft_tokens, factor, uniforms)
