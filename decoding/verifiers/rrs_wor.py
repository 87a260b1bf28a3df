"""Recursive rejection sampling without replacement (RRSw), batched.

SpecHub (Sun et al. 2024), Alg. 1 with the red lines: the drafts ``x_1..x_k`` are distinct, drawn
successively from ``q`` renormalised over the tokens not yet drawn
(:func:`otm.draft_laws.without_replacement_law`); at step ``i`` the draft law is
``q_i = norm(q with x_1..x_{i-1} set to 0)``, ``x_i`` is accepted if
``u_i < p_i(x_i) / q_i(x_i)``, and on rejection ``p_{i+1} = norm(max(p_i - q_i, 0))``
(then ``q(x_i) <- 0; q <- norm(q)``). ``Y ~ p_{k+1}`` if every draft is rejected.
Lossless because, given the past, ``x_i ~ q_i`` exactly.

Exhausted support (a row with ``m < k`` tokens of positive ``q``, ``k <= V``; e.g. one-hot
``q`` at temperature 0, or a small top-p nucleus): drafts ``m+1..k`` are the lowest-index
tokens with ``q = 0`` (deterministic, as in :func:`otm.draft_laws.without_replacement_law`),
and such a draft is verified against its conditional law, the point mass ``delta_{x_i}``:
accepted with probability ``p_i(x_i)``, otherwise ``p_{i+1} = norm(p_i with x_i set to 0)``.
Still lossless (proof in :mod:`otm.rules.rrs_wor`). ``k > V`` raises
:class:`otm.errors.InvalidDraftCountError`.

Implementation: RRS with a different draft law per step
(:func:`decoding.verifiers.rrs.rejection_chain`, which only touches the rows still
rejecting), where ``q_i`` is never materialised over the vocabulary. Off the drafts,
``q_i`` is ``q`` times a scalar: a token ``t`` outside ``D = {x_1..x_k}`` has
``q_i(t) = q(t) / S_i`` with ``S_i = q(V minus D) + sum_{j >= i} q(x_j)`` (the mass not
yet drawn). So ``q_i`` is its *reduced law* on the ``k + 1`` cells ``x_1, .., x_k, rest``
(:func:`reduced_conditional_laws`): ``norm(q(x_1), .., q(x_k), q(V minus D))`` with the
cells of ``x_1..x_{i-1}`` set to 0, or the point mass on cell ``i`` when that has zero
mass (exhausted support). Then ``p_i - q_i = p_i - q_rest / S_i`` off ``D``
(``q_rest`` = ``q`` with ``D`` set to 0; a division, not a product with ``1 / S_i``, which
overflows where the mass not yet drawn is denormal: a dominant first draft whose complement
is below about ``1e-308``, or ``1e-38`` in float32), corrected on the ``k`` cells of ``D`` by index. ``q(V minus D)`` is summed once per
row, over ``q_rest``, so it is exactly 0 when ``D`` covers the support (a subtraction
``1 - sum_j q(x_j)`` would leave a rounding residue and break the point-mass case).
Step 1 uses ``q`` as given (``q_1 = q``), as the reference does.

V-sized passes per row: those of :mod:`decoding.verifiers.rrs` (with ``r_i`` the
fraction of rows rejected at steps ``1..i``: ``1 + 2 r_1 + 6 (r_1 + .. + r_{k-1}) +
(r_2 + .. + r_k) + 4 r_k``, the subtraction ``p_i - q_rest / S_i`` in place of
``p_i - q_i``) plus ``r_1`` for the sum of ``q_rest``; the previous version built the
``k`` conditional laws of every row (``[batch, k, vocab]``, about ``6k`` passes) before
the chain.

Randomness and zero-mass fallback: as :mod:`decoding.verifiers.rrs` (``k + 1`` uniforms
per row); ``sample_drafts`` draws one ``torch.rand(batch, vocab)`` (exponential clocks).
"""
from __future__ import annotations

import torch

from .base import (
    VerifierOutput,
    first_draft_probs,
    map_row_chunks,
    normalise,
    sample_without_replacement,
    verify_uniforms,
    with_fallback,
)
from .rrs import rejection_chain, uniforms_per_row

draft_scheme = "without_replacement"

__all__ = ["draft_scheme", "reduced_conditional_laws", "sample_drafts", "uniforms_per_row", "verify"]


def sample_drafts(draft_probs: torch.Tensor, k: int, generator: torch.Generator | None) -> torch.Tensor:
    """``[batch, k]`` distinct drafts without replacement from ``draft_probs`` ``[batch, vocab]``,
    completed in index order when the support is exhausted
    (:func:`decoding.verifiers.base.sample_without_replacement`)."""
    return sample_without_replacement(draft_probs, k, generator)


def reduced_conditional_laws(
    cells: torch.Tensor,  # [n, k + 1]: q(x_1), .., q(x_k), q(V minus D)
    i: int,
) -> torch.Tensor:  # [n, k + 1]
    """The law of draft ``i`` (0-based) given ``x_1..x_i`` on the cells ``x_1, .., x_k,
    rest``: ``norm(cells with cells 0..i-1 set to 0)``, or the point mass on cell ``i``
    when that has no mass (exhausted support)."""
    remaining = cells.clone()
    remaining[:, :i] = 0.0
    point = torch.zeros_like(cells)
    point[:, i] = 1.0
    return with_fallback(normalise(remaining), point)


class _ConditionalLaws:
    """The step laws of RRSw for :func:`decoding.verifiers.rrs.rejection_chain` (module
    docstring): ``q_1 = q``, then the reduced conditional laws."""

    def __init__(self, q: torch.Tensor, draft_tokens: torch.Tensor):  # [batch, vocab], [batch, k]
        self.q, self.draft_tokens = q, draft_tokens
        self.rest = torch.zeros(q.shape[0], dtype=q.dtype, device=q.device)  # q(V minus D), set at step 1

    def _cells(self, rows: torch.Tensor) -> torch.Tensor:  # [n, k + 1]
        return torch.cat([self.q.gather(1, self.draft_tokens)[rows], self.rest[rows].unsqueeze(1)], dim=1)

    def at_draft(self, i: int, rows: torch.Tensor) -> torch.Tensor:
        if i == 0:
            return self.q[rows, self.draft_tokens[rows, 0]]
        return reduced_conditional_laws(self._cells(rows), i)[:, i]

    def minus(self, i: int, rows: torch.Tensor, current: torch.Tensor) -> torch.Tensor:
        drafts = self.draft_tokens[rows]  # [n, k]
        q_rest = torch.index_select(self.q, 0, rows).scatter_(1, drafts, 0.0)  # q off D (a gathered copy)
        if i == 0:
            self.rest[rows] = q_rest.sum(dim=-1)
            on_drafts = self.q[rows.unsqueeze(1), drafts]
            out = torch.sub(current, q_rest, out=q_rest)
        else:
            cells = self._cells(rows)
            on_drafts = reduced_conditional_laws(cells, i)[:, :-1]
            undrawn = cells[:, i:].sum(dim=-1)  # S_i; off D, q_i = q / S_i (q_rest is 0 where S_i is)
            undrawn = torch.where(undrawn > 0, undrawn, torch.ones_like(undrawn))
            out = torch.addcdiv(current, q_rest, undrawn.unsqueeze(1), value=-1.0)  # not q * (1 / S_i): overflows
        return out.scatter_(1, drafts, current.gather(1, drafts) - on_drafts)


def verify(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, k, vocab]
    draft_tokens: torch.Tensor,  # [batch, k]
    generator: torch.Generator | None,
) -> VerifierOutput:
    """RRSw (SpecHub, Sun et al. 2024, Alg. 1 with the red lines; exhausted support: module docstring);
    ``draft_probs[:, 0]`` is the base ``q`` (the other rows are expected to equal it and
    are not read)."""
    uniforms = verify_uniforms(target_probs, draft_probs, draft_tokens, generator, uniforms_per_row)
    return map_row_chunks(
        lambda p, q, x, u: rejection_chain(p, x, u, _ConditionalLaws(q, x)),
        target_probs, first_draft_probs(draft_probs), draft_tokens, uniforms,
    )
