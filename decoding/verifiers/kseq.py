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

``g*`` (:func:`optimal_division_factor`) is the smallest ``g`` in ``[1, k]`` with
``f(g) = 1 - (1 - beta(g))^k - g beta(g) <= 0``, to the dtype's resolution; the upper
end of the final bracket is used, so ``g >= g*`` up to rounding and the residual is a
valid law (it is clamped at 0 against rounding). ``g* = 1`` exactly when ``f(1) <= 0``,
and ``f(k) <= 0`` always (Bernoulli's inequality); as
:func:`otm.rules.kseq.optimal_division_factor`, whose bisection finds the same point
when ``f`` changes sign once on ``[1, k]``.

Finding ``g*`` without a pass over the vocabulary per halving (our derivation): with
``r(x) = p(x) / q(x)``, ``beta(g) = q({r >= g}) + p({r < g}) / g`` (a token with
``q = 0`` adds nothing). On the grid ``e_m = 1 + m (k - 1) / 2^b`` (``m = 0..2^b``,
``b = HISTOGRAM_BITS``), ``beta(e_m) = q(r >= e_m) + p(r < e_m) / e_m``, and both masses
are prefix sums of one histogram of ``p`` and one of ``q`` over the grid buckets
``[e_m, e_{m+1})`` (one scatter-add each, after five passes for the bucket index). So
``f`` is known at every grid point at once, and ``g*`` lies in the bucket
``[e_{m-1}, e_m]`` below the first grid point ``e_m`` where ``f <= 0``. Inside it the
tokens outside that bucket keep their side of ``g`` (``q`` above, ``p / g`` below), so
the remaining ``-log2(eps) + 2 - b`` halvings need only the tokens of that bucket
(gathered once, a few dozen to a few hundred on a real vocabulary) and two scalars.

``verify`` needs ``g*`` itself only where the bucket leaves a decision open: the test
of draft ``i`` is ``u_i g q(x_i) < p(x_i)``, so with ``g*`` in ``[e_m, e_{m+1}]`` it is
surely passed when it passes at ``e_{m+1}`` and surely failed when it fails at
``e_m``. The halvings (and the bucket's tokens) are computed only for the rows whose
first draft not surely rejected is not surely accepted, or that surely reject every
draft (the residual needs ``g*``); every other row is verified with ``g = e_{m+1}``,
which gives the decisions of ``g*`` (the products are rounded monotonically), so the
draws are those of ``g*`` for every row.

V-sized passes per row: 7 for the bracket (bucket coordinate, clamp, two conversions, a
clamp, two histograms), 3 more (their bucket rows, the mask, its ``nonzero``) for the
rows that need ``g*``, and
8 for each row that rejects all ``k`` drafts (gather ``p`` and ``q``, ``min(q, p / g)``
and its sum, residual, clamp, inverse-CDF scan); the previous version made 3 passes per
halving (``54 x 3`` in float64) for every row.

Zero-mass residual: ``p_res`` has mass ``1 - p_acc``, zero only when ``beta = 1``
(then every draft is accepted with probability 1 and the residual is never reached);
such rows fall back to ``p``.

Randomness: ``k + 1`` uniforms per row (``u_1..u_k``, then the residual draw).
"""
from __future__ import annotations

import math
from typing import Callable

import torch

from .base import (
    VerifierOutput,
    check_k,
    chunk_rows,
    first_draft_probs,
    map_row_chunks,
    sample_iid,
    sample_residual,
    take_rows,
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


def _too_small(beta: torch.Tensor, g: torch.Tensor, k: int) -> torch.Tensor:
    """``f(g) = 1 - (1 - beta)^k - g beta > 0``: the residual at ``g`` would be negative
    somewhere (the form of :func:`otm.rules.kseq.gap`)."""
    return 1.0 - torch.pow(1.0 - beta, k) > g * beta


#: Buckets above ``e_{2^b} = k`` over which the tokens of ratio ``>= k`` are spread by
#: token id (:func:`_grid_bracket`); a power of 2.
SPREAD = 1024

#: log2 of the buckets of the ratio histogram of :func:`optimal_division_factor` (at most;
#: a vocabulary of ``V`` tokens gets about ``V`` buckets).
HISTOGRAM_BITS = 12


def _bisection_steps(dtype: torch.dtype) -> int:
    """Halvings that shrink ``[1, k]`` below the dtype's resolution (54 in float64)."""
    return int(-math.log2(torch.finfo(dtype).eps)) + 2


def _grid_bracket(
    target_probs: torch.Tensor,  # [n, vocab]
    draft_probs: torch.Tensor,  # [n, vocab]
    k: int,
    bits: int,
    spread: torch.Tensor,  # [vocab]: token id mod SPREAD, in the dtype of the rows
    needs_exact: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> tuple[torch.Tensor, ...]:
    """The grid bucket ``[e_m, e_{m+1}]`` that holds ``g*``, from the ratio histogram
    (module docstring), and the tokens of that bucket for the rows where
    ``needs_exact(e_m, e_{m+1})`` (``[n]`` bool) asks for ``g*`` itself.

    Bucket coordinates: ``t = s r + (c - s)`` with ``s = 2^bits / (k - 1)`` and
    ``c = ceil(s)``, so that grid bucket ``[e_m, e_{m+1})`` is ``floor(t) = c + m``; the
    tokens with ``r < 1`` fall in ``[0, c)``, and those with ``r >= k`` are clamped to
    ``c + 2^bits + spread`` (``spread``: the token id mod :data:`SPREAD`), so that the
    many tokens of a large ratio (tail tokens the draft all but excludes) do not
    serialise the scatter-add on one accumulator. A ``0 / 0`` ratio (no weight) lands
    anywhere valid.

    Returns ``(low, below, above, p_in, q_in, one_is_valid, exact)``: ``low`` ``[n]`` the
    lower end ``e_m`` of the bucket, ``below`` ``[n]`` = ``p(r < e_m)``, ``above`` ``[n]`` =
    ``q(r >= e_{m+1})``, ``one_is_valid`` ``[n]`` (``f(1) <= 0``, then ``g* = 1``),
    ``exact`` ``[n]`` the rows that asked for ``g*`` (never those with ``g* = 1``) and
    ``p_in``, ``q_in`` ``[n, w]`` the tokens of their bucket (zero padded; none elsewhere).
    Masses are float64 and divided by the row totals (the last histogram sums), as the exact
    :func:`otm.rules.kseq.optimal_division_factor` normalises its input: ``g = 1`` is valid
    with equality when ``p = q``, so an unnormalised ``beta(1)`` of ``1 - 1e-16`` would move
    ``g*`` off 1 by the bracket's width.
    """
    n = target_probs.shape[0]
    buckets = 1 << bits
    scale = buckets / (k - 1)
    first = math.ceil(scale)  # the bucket of e_0 = 1
    top = first + buckets + SPREAD - 1
    offset = torch.full((), first - scale, dtype=target_probs.dtype, device=target_probs.device)
    coordinate = torch.addcdiv(offset, target_probs, draft_probs, value=scale)
    coordinate = torch.clamp(coordinate, min=offset.new_zeros(()), max=spread + (first + buckets), out=coordinate)
    bucket = coordinate.int()  # floor (non-negative)
    index = bucket.long().clamp_(0, top)
    grid = slice(first - 1, first + buckets)  # column first - 1 + m of a prefix sum: the buckets below e_m
    p_below = target_probs.new_zeros(n, top + 1).scatter_add_(1, index, target_probs).double().cumsum(dim=1)
    q_below = draft_probs.new_zeros(n, top + 1).scatter_add_(1, index, draft_probs).double().cumsum(dim=1)
    p_total, q_total = p_below[:, -1:].clone(), q_below[:, -1:].clone()
    p_below /= p_total  # normalised: with p = q every ratio is 1 and beta(1) = q(r >= 1) / q_total = 1 exactly
    q_below /= q_total
    p_low = p_below[:, grid]  # [n, 2^bits + 1]: p(r < e_m)
    q_high = q_below[:, -1:] - q_below[:, grid]  # q(r >= e_m)
    g = torch.arange(buckets + 1, dtype=torch.float64, device=p_low.device) * ((k - 1) / buckets) + 1.0
    valid = ~_too_small(q_high + p_low / g, g, k)
    valid[:, -1] = True  # f(k) <= 0 (Bernoulli), whatever the rounding
    m = valid.to(torch.uint8).argmax(dim=1)  # the first grid point where f <= 0
    one_is_valid = m == 0
    lo = (m - 1).clamp(min=0)  # the bucket below it
    exact = ~one_is_valid & needs_exact(g[lo], g[lo + 1])
    rows = exact.nonzero().squeeze(1)
    row, col = (torch.index_select(bucket, 0, rows) == (first + lo[rows]).to(bucket.dtype).unsqueeze(1)).nonzero(as_tuple=True)
    row = rows[row]
    counts = torch.bincount(row, minlength=n)
    width = int(counts.max()) if row.numel() else 0
    slot = torch.arange(row.numel(), device=row.device) - (counts.cumsum(0) - counts)[row]
    p_in = target_probs.new_zeros(n, width).index_put_((row, slot), target_probs[row, col]).double() / p_total
    q_in = draft_probs.new_zeros(n, width).index_put_((row, slot), draft_probs[row, col]).double() / q_total
    below = p_low.gather(1, lo.unsqueeze(1)).squeeze(1)
    above = q_high.gather(1, (lo + 1).unsqueeze(1)).squeeze(1)
    return g[lo], below, above, p_in, q_in, one_is_valid, exact


def _padded_cat(parts: list[torch.Tensor]) -> torch.Tensor:
    """``[n_1 + .., max w]``: the ``[n_j, w_j]`` parts, zero padded on the right."""
    width = max(t.shape[1] for t in parts)
    return torch.cat([torch.nn.functional.pad(t, (0, width - t.shape[1])) for t in parts])


def _division_factors(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, vocab]
    k: int,
    needs_exact: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
) -> torch.Tensor:  # [batch]
    """``g*`` for the rows where ``needs_exact(rows, e_m, e_{m+1})`` (``[n]`` bool, given the
    batch rows of a chunk and its grid brackets of ``g*``) asks for it, the upper end
    ``e_{m+1} >= g*`` of the bracket for the other rows, exactly 1 where ``f(1) <= 0``
    (:func:`_grid_bracket`, then the halvings inside the bucket for the rows that need them).
    The result is rounded up to the dtype of the rows, so it stays ``>= g*``."""
    batch, vocab = target_probs.shape
    if k == 1 or batch == 0:
        return torch.ones(batch, dtype=target_probs.dtype, device=target_probs.device)
    steps = _bisection_steps(target_probs.dtype)
    bits = min(HISTOGRAM_BITS, steps, vocab.bit_length())  # about as many buckets as tokens at most
    # a histogram row has < 3 * 2^bits + 2 buckets, and the bucket index is int64
    size = chunk_rows(batch, max(vocab, 3 << bits) * 8 // target_probs.element_size(), target_probs)
    spread = (torch.arange(vocab, device=target_probs.device) & (SPREAD - 1)).to(target_probs.dtype)
    parts = []
    for start in range(0, batch, size):
        rows = torch.arange(start, min(start + size, batch), device=target_probs.device)
        parts.append(_grid_bracket(target_probs[start : start + size], draft_probs[start : start + size], k, bits, spread,
                                   lambda lo, hi, rows=rows: needs_exact(rows, lo, hi)))
    low, below, above, p_in, q_in, one_is_valid, exact = (
        _padded_cat([part[j] for part in parts]) if j in (3, 4) else torch.cat([part[j] for part in parts]) for j in range(7)
    )
    high = low + (k - 1) / (1 << bits)
    rows = exact.nonzero().squeeze(1)
    if rows.numel():
        low_in, high_in = low[rows], high[rows]
        below, above = below[rows], above[rows]
        p_in, q_in = p_in[rows], q_in[rows]
        for _ in range(steps - bits):
            mid = 0.5 * (low_in + high_in)
            beta = torch.minimum(q_in, p_in / mid.unsqueeze(1)).sum(dim=1).add_(above).add_(below / mid)
            too_small = _too_small(beta, mid, k)
            low_in = torch.where(too_small, mid, low_in)
            high_in = torch.where(too_small, high_in, mid)
        high[rows] = high_in
    high = torch.where(one_is_valid, torch.ones_like(high), high)
    return _rounded(high, target_probs.dtype, up=True)  # so that it stays >= g*


def _rounded(values: torch.Tensor, dtype: torch.dtype, up: bool) -> torch.Tensor:
    """``values`` (float64) in ``dtype``, rounded up (``up``) or down rather than to nearest."""
    out = values.to(dtype)
    off = out.double() < values if up else out.double() > values
    return torch.where(off, torch.nextafter(out, torch.full_like(out, math.inf if up else -math.inf)), out)


def optimal_division_factor(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, vocab]
    k: int,
) -> torch.Tensor:
    """``[batch]``: the smallest valid division factor ``g*`` of each row (SpecTr, Sun et al. 2023,
    eq. 6): the upper end of a bracket of the dtype's resolution, or exactly 1 when
    ``g = 1`` is valid. The grid bucket comes from a ratio histogram, the halvings inside
    it from the bucket's tokens (module docstring)."""
    return _division_factors(target_probs, draft_probs, check_k(k), lambda rows, lo, hi: torch.ones_like(lo, dtype=torch.bool))


def _residual_draw(
    target_probs: torch.Tensor,  # [n, vocab]
    q: torch.Tensor,  # [n, vocab]
    factor: torch.Tensor,  # [n]
    uniforms: torch.Tensor,  # [n]
    k: int,
) -> VerifierOutput:
    """Tokens from ``p_res`` (eq. 5, clamped at 0; fallback ``p``) for rows that rejected
    every draft."""
    scaled = target_probs / factor.unsqueeze(1)
    scaled = torch.minimum(q, scaled, out=scaled)  # min(q, p / g)
    c = _accepted_mass_factor(scaled.sum(dim=-1), k)
    residual = torch.addcmul(target_probs, c.unsqueeze(1), scaled, value=-1.0, out=scaled).clamp_(min=0.0)
    tokens = sample_residual(residual, target_probs, uniforms)
    return VerifierOutput(tokens=tokens, accepted_index=torch.full_like(tokens, -1))


def _kseq(
    target_probs: torch.Tensor,  # [batch, vocab]
    q: torch.Tensor,  # [batch, vocab]
    draft_tokens: torch.Tensor,  # [batch, k]
    factor: torch.Tensor,  # [batch]
    uniforms: torch.Tensor,  # [batch, k + 1]
) -> VerifierOutput:
    """SpecTr (Sun et al. 2023), Alg. 2 on pre-drawn uniforms: the ``k`` tests on the
    whole batch (gathers), the residual only for the rows that reject every draft."""
    batch, k = draft_tokens.shape
    p_x, q_x = target_probs.gather(1, draft_tokens), q.gather(1, draft_tokens)  # [batch, k]
    accept = uniforms[:, :k] * factor.unsqueeze(1) * q_x < p_x  # [batch, k]
    any_accept = accept.any(dim=1)
    first = accept.to(torch.uint8).argmax(dim=1)  # the first accepted draft
    tokens = torch.where(any_accept, draft_tokens.gather(1, first.unsqueeze(1)).squeeze(1), 0)
    accepted_index = torch.where(any_accept, first, -1)
    rows = (~any_accept).nonzero().squeeze(1)
    if rows.numel():
        drawn = map_row_chunks(
            lambda p, qq, g, u: _residual_draw(p, qq, g, u, k),
            take_rows(target_probs, rows), take_rows(q, rows), factor[rows], uniforms[rows, k],
        )
        tokens[rows] = drawn.tokens
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
    k = draft_tokens.shape[1]
    scaled_q, p_x = uniforms[:, :k], target_probs.gather(1, draft_tokens)  # [batch, k]
    q_x = q.gather(1, draft_tokens)

    def needs_exact(rows: torch.Tensor, low: torch.Tensor, high: torch.Tensor) -> torch.Tensor:
        """Rows whose tests the bracket ``[low, high]`` of ``g`` leaves open: the first
        draft not surely rejected (``u low q(x) >= p(x)``) is not surely accepted
        (``u high q(x) < p(x)``), or every draft is surely rejected (the residual needs
        ``g*``). Products in the order of :func:`_kseq`, so rounding keeps them monotone;
        ``low`` rounded down and ``high`` rounded up to the rows' dtype (that of the factor the
        row is then verified with; the uniforms are float64), so the bracket still holds ``g*``
        after rounding."""
        u, p_rows, q_rows = scaled_q[rows], p_x[rows], q_x[rows]
        sure_reject = u * _rounded(low, p_rows.dtype, up=False).unsqueeze(1) * q_rows >= p_rows
        sure_accept = u * _rounded(high, p_rows.dtype, up=True).unsqueeze(1) * q_rows < p_rows
        open_test = ~sure_reject.all(dim=1)
        first_open = (~sure_reject).to(torch.uint8).argmax(dim=1)
        return ~open_test | ~sure_accept.gather(1, first_open.unsqueeze(1)).squeeze(1)

    factor = _division_factors(target_probs, q, k, needs_exact)
    return _kseq(target_probs, q, draft_tokens, factor, uniforms)
