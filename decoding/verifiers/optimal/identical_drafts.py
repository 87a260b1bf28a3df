"""Lazy acceptance for the optimal verifiers: rows whose ``k`` drafts are one token ``a``
and whose acceptance test is certain from a bound on ``sigma_a``, decided with one
masked sum instead of the sort of :mod:`decoding.verifiers.optimal.iid` (our derivation,
docs/optimal-verifier.md#lazy-rows-of-identical-drafts).

The full path accepts the selected draft ``Z`` without a test when its rank has
``e > 0`` (then ``x(Z) <= p(Z)`` in exact arithmetic), and otherwise when
``u4 x(Z) < p(Z)``, where its float ``x`` is ``sigma - matched <= sigma`` (``matched >= 0``).
With all drafts equal to ``a``, ``Z = a`` whatever the exchanges, and ``sigma_a =
C'^k - C^k`` with ``C`` the ``q`` mass of the ranks before ``a`` and ``C' = C + q_a``
(normalised). ``sigma`` increases with ``C`` (``k >= 1``), so an upper bound on ``C``
bounds it: ``S`` = the ``q`` mass of the tokens with ``p q_a <= p_a (1 + TAU) q``, a
superset of the ranks ``<= a`` whatever the rounding of the ratios (products rounded
monotonically), gives ``C <= (S - q_a) / M``. Every float the full path computes from
sums over ``V`` tokens (``M``, ``T``, the cumulative sums, the powers) is within the
relative error ``LAMBDA(V, k)`` of its exact value (Higham, "Accuracy and Stability of
Numerical Algorithms", 2002, eq. 4.4: a float sum of ``n`` non-negative terms in any
order is within ``gamma_n = n u / (1 - n u)`` of the exact one), so

    sigma_up = (((C_up + w_up)(1 + LAMBDA))^k - (C_up (1 - LAMBDA))^k) (1 + LAMBDA),
    C_up = (S (1 + LAMBDA) - q_a) (1 + LAMBDA) / M,   w_up = q_a (1 + LAMBDA) / M,
    p_low = p_a (1 - LAMBDA) / T

bound the full path's float ``x(a)`` from above and its float ``p(a)`` from below, and
``u4 sigma_up < p_low`` (rounded monotonically) implies the full path accepts ``a``. The
accepted position is then the full path's: the holder of ``a`` numbered
``floor(u5 k)`` (:func:`decoding.verifiers.optimal.iid.accepted_holder`). Every other row
goes the full way, so the lazy verifier equals the full one draw for draw.

Cost for a row of identical drafts: two float64 sums (``T``, ``M``), then, only when the
first tier (``S = M``, :func:`certified_acceptance`) leaves it open, the tie-widened masked
sum of ``q``; on the CPU each is one compiled pass over the row
(:mod:`decoding.verifiers.optimal.row_passes`), elsewhere two and five torch passes (products,
comparison, masked ``q``, its sum); against the full path's cut or sort.
"""
from __future__ import annotations

import numpy as np
import torch

from ..base import Scratch, map_row_chunks, share_rows

#: Relative widening of ``p_a`` in the tie test: larger than any rounding of the
#: products in float32 or float64, so every token ranked before ``a`` passes it (in
#: bfloat16 and float16 it rounds away and is not needed:
#: docs/optimal-verifier-proofs.md#a-bound-on-the-mass-of-identical-drafts).
TAU = 2.0**-16

#: Unit roundoff of float64.
_UNIT = 2.0**-53


def relative_slack(vocab: int, k: int) -> float:
    """``LAMBDA(V, k) = 4 (V + 2k + 8) u``, ``u = 2^-53``: at least twice the relative error
    ``2 gamma_V + 3u`` of every normalised cumulative sum and power of the full path
    (module docstring), the rest covering the roundings of the bounds themselves."""
    return 4.0 * (vocab + 2 * k + 8) * _UNIT


def identical_drafts(draft_tokens: torch.Tensor) -> torch.Tensor:  # [batch, k] -> [batch] bool
    """Rows whose ``k`` drafts are all the same token."""
    return (draft_tokens == draft_tokens[:, :1]).all(dim=1)


def _bound(
    mass_up_to: torch.Tensor,  # [n] float64: a float sum of q over a set holding every rank <= a
    p_a: torch.Tensor,  # [n]
    q_a: torch.Tensor,  # [n]
    draft_mass: torch.Tensor,  # [n] float64 sum of q
    target_mass: torch.Tensor,  # [n] float64 sum of p
    k: int,
    slack: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(sigma_up, p_low)`` from ``S^ = mass_up_to`` (module docstring)."""
    q_a, p_a = q_a.double(), p_a.double()
    c_up = (mass_up_to * (1.0 + slack) - q_a).clamp(min=0.0) * (1.0 + slack) / draft_mass
    w_up = q_a * (1.0 + slack) / draft_mass
    sigma_up = (((c_up + w_up) * (1.0 + slack)) ** k - (c_up * (1.0 - slack)) ** k) * (1.0 + slack)
    ranked = (p_a / q_a).isfinite()  # q_a > 0 and a finite float64 ratio: no tie with q = 0 tokens
    sigma_up = torch.where(ranked, sigma_up, torch.full_like(sigma_up, torch.inf))
    return sigma_up, p_a * (1.0 - slack) / target_mass


def _masses(
    target_probs: torch.Tensor, draft_probs: torch.Tensor, scratch: Scratch | None = None, rows: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(M^, T^)`` ``[n]``: the float64 sums of ``q`` and ``p`` of ``rows`` (default: all).
    On the CPU one compiled pass per row over both
    (:func:`decoding.verifiers.optimal.row_passes.row_sums`, the rows shared among threads by
    :func:`decoding.verifiers.base.share_rows`); elsewhere each converted into a float64
    buffer of ``scratch`` and summed. Any order of summation is within the bound of
    docs/optimal-verifier-proofs.md#a-bound-on-the-mass-of-identical-drafts."""
    scratch = Scratch() if scratch is None else scratch
    if target_probs.device.type == "cpu":
        from . import row_passes  # numba only where the CPU path runs

        p, q, picked = numpy_batch(target_probs, draft_probs, rows)
        sums = np.empty((picked.shape[0], 2))
        share_rows(lambda part, parts: row_passes.rows_sums(p, q, picked, sums, part, parts), picked.shape[0])
        masses = torch.from_numpy(sums)
        return masses[:, 0], masses[:, 1]
    if rows is not None:
        target_probs, draft_probs = target_probs[rows], draft_probs[rows]

    def sums(probs: torch.Tensor) -> torch.Tensor:
        converted = scratch.take("masses", tuple(probs.shape), torch.float64, probs.device)
        return converted.copy_(probs).sum(dim=1)

    return sums(draft_probs), sums(target_probs)


def numpy_batch(
    target_probs: torch.Tensor, draft_probs: torch.Tensor, rows: torch.Tensor | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """NumPy views of ``p`` and ``q`` (CPU ``[batch, V]``) for the compiled passes of
    :mod:`decoding.verifiers.optimal.row_passes`, and where ``rows`` (default: all) are in them.
    Half precision (which NumPy and numba do not read): ``rows`` copied, widened to float32
    (exactly)."""
    rows = torch.arange(target_probs.shape[0]) if rows is None else rows
    if target_probs.dtype in (torch.float32, torch.float64):
        return target_probs.numpy(), draft_probs.numpy(), rows.numpy()
    return target_probs[rows].float().numpy(), draft_probs[rows].float().numpy(), np.arange(rows.numel())


def _draft_mass_up_to(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, vocab]
    p_a: torch.Tensor,  # [n] p of the token of each row
    q_a: torch.Tensor,  # [n] q of the token of each row
    scratch: Scratch,
    rows: torch.Tensor | None,  # [n] (default: all)
) -> torch.Tensor:
    """``S^`` ``[n]`` float64: the sum of ``q`` over the tokens with
    ``p q_a <= p_a (1 + TAU) q`` in the rows' dtype. On the CPU one compiled pass per row
    (:func:`decoding.verifiers.optimal.row_passes.draft_mass_up_to`, shared among threads; a
    half-precision row is widened to float32, where its products are exact), elsewhere in
    torch operations."""
    if target_probs.device.type == "cpu":
        from . import row_passes  # numba only where the CPU path runs

        p, q, picked = numpy_batch(target_probs, draft_probs, rows)
        dtype = torch.float64 if p.dtype == np.float64 else torch.float32
        q_a, p_a_up = q_a.to(dtype).numpy(), (p_a.to(dtype) * (1.0 + TAU)).numpy()
        sums = np.empty(picked.shape[0])
        share_rows(lambda part, parts: row_passes.rows_draft_mass_up_to(p, q, picked, q_a, p_a_up, sums, part, parts),
                   picked.shape[0])
        return torch.from_numpy(sums)
    if rows is not None:
        target_probs, draft_probs = target_probs[rows], draft_probs[rows]

    def work(name: str, dtype: torch.dtype) -> torch.Tensor:
        return scratch.take(name, tuple(target_probs.shape), dtype, target_probs.device)

    products = torch.mul(target_probs, q_a.unsqueeze(1), out=work("products", target_probs.dtype))
    bounds = torch.mul(draft_probs, (p_a * (1.0 + TAU)).unsqueeze(1), out=work("bounds", draft_probs.dtype))
    up_to = torch.le(products, bounds, out=work("up_to", torch.bool))
    return torch.mul(draft_probs, up_to, out=bounds).sum(dim=1, dtype=torch.float64)  # q where up_to, else +0


def selection_upper_bound(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, vocab]
    tokens: torch.Tensor,  # [n]
    k: int,
    scratch: Scratch | None = None,
    masses: tuple[torch.Tensor, torch.Tensor] | None = None,
    rows: torch.Tensor | None = None,  # [n] the rows of the batch (default: all)
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(sigma_up, p_low)`` ``[n]`` float64 (module docstring): an upper bound on the full
    path's float ``sigma`` (and so on its ``x``) at the rank of ``tokens`` and a lower bound
    on its float normalised ``p`` there, from ``S`` = the ``q`` mass of the tie-widened ratio
    test. Rows with ``q(token) = 0``, or a ratio ``p / q`` that overflows (it would tie with
    the ``q = 0`` tokens), get ``sigma_up = inf``. The temporaries live in ``scratch``
    (:class:`decoding.verifiers.base.Scratch`); ``masses`` = :func:`_masses` when already
    computed."""
    scratch = Scratch() if scratch is None else scratch
    index = torch.arange(target_probs.shape[0], device=tokens.device) if rows is None else rows
    p_a, q_a = target_probs[index, tokens], draft_probs[index, tokens]
    within = _draft_mass_up_to(target_probs, draft_probs, p_a, q_a, scratch, rows)
    draft_mass, target_mass = _masses(target_probs, draft_probs, scratch, rows) if masses is None else masses
    return _bound(within, p_a, q_a, draft_mass, target_mass, k, relative_slack(target_probs.shape[1], k))


def certified_acceptance(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, vocab]
    tokens: torch.Tensor,  # [n] the drafted token of each row (all k drafts equal)
    u4: torch.Tensor,  # [n] float64, the acceptance uniform
    k: int,
    rows: torch.Tensor | None = None,  # [n] sorted distinct rows of the batch (default: all)
    chunk_bytes: int | None = None,
) -> torch.Tensor:  # [n] bool
    """Rows where the full path surely accepts ``tokens``: ``u4 sigma_up < p_low``, in two
    tiers. First with ``S^ = M^``, the sum of all of ``q`` (every token is in the set, so
    the bound of docs/optimal-verifier-proofs.md#a-bound-on-the-mass-of-identical-drafts, holds a fortiori;
    ``sigma_up`` is then
    about the membership probability ``1 - (1 - q_a)^k``): the two sums per row (on the CPU
    one compiled pass per row, read in place; elsewhere on chunks of rows,
    :func:`decoding.verifiers.base.map_row_chunks`), then a few ``[n]`` operations for all rows
    at once. Then, for the rows left open only, the tie-widened ratio test of
    :func:`selection_upper_bound`. The work arrays of both live in one
    :class:`decoding.verifiers.base.Scratch`."""
    rows = torch.arange(target_probs.shape[0], device=tokens.device) if rows is None else rows
    scratch, cpu = Scratch(), target_probs.device.type == "cpu"
    if cpu:  # one compiled pass per row
        masses = torch.stack(_masses(target_probs, draft_probs, scratch, rows), dim=1)
    else:
        masses = map_row_chunks(lambda p, q: torch.stack(_masses(p, q, scratch), dim=1), target_probs, draft_probs, rows=rows,
                                chunk_bytes=chunk_bytes)
    draft_mass, target_mass = masses[:, 0], masses[:, 1]
    p_a, q_a = target_probs[rows, tokens], draft_probs[rows, tokens]
    sigma_up, p_low = _bound(draft_mass, p_a, q_a, draft_mass, target_mass, k, relative_slack(target_probs.shape[1], k))
    sure = u4 * sigma_up < p_low
    left = (~sure).nonzero().squeeze(1)
    if left.numel():
        open_rows = rows[left]
        if cpu:
            bounds = torch.stack(selection_upper_bound(target_probs, draft_probs, tokens[left], k, scratch,
                                                       (draft_mass[left], target_mass[left]), open_rows), dim=1)
        else:

            def ratio_test(p, q, t, m):
                return torch.stack(selection_upper_bound(p, q, t, k, scratch, (m[:, 0], m[:, 1])), dim=1)

            def by_batch_row(values: torch.Tensor) -> torch.Tensor:  # [n_left, ...] -> [batch, ...], for map_row_chunks
                return values.new_zeros((target_probs.shape[0], *values.shape[1:])).index_copy(0, open_rows, values)

            bounds = map_row_chunks(ratio_test, target_probs, draft_probs, by_batch_row(tokens[left]), by_batch_row(masses[left]),
                                    rows=open_rows, chunk_bytes=chunk_bytes)
        sure[left] = u4[left] * bounds[:, 0] < bounds[:, 1]
    return sure
