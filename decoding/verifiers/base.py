"""Shared output type and tensor helpers of the batched verifiers.

Every rule module in :mod:`decoding.verifiers` exposes

- ``draft_scheme``: ``"iid" | "without_replacement" | "hub" | "greedy" | "independent"``,
  the joint draft law ``Q`` of :mod:`otm.draft_laws` that ``sample_drafts`` draws from;
- ``sample_drafts(draft_probs, k, generator) -> draft_tokens``  ``# [batch, k]`` int64;
- ``verify(target_probs, draft_probs, draft_tokens, generator) -> VerifierOutput``;
- ``uniforms_per_row(k) -> int``: how many uniforms ``verify`` draws per row.

Randomness contract (what lets the plain-Python references in
:mod:`decoding.verifiers.reference` reproduce a batched run draw for draw): ``verify``
draws exactly one tensor ``torch.rand(batch, uniforms_per_row(k), generator=generator,
dtype=target_probs.dtype, device=target_probs.device)`` (see :func:`draw_uniforms` and
:func:`verify_uniforms`) and uses column ``j`` of row ``b`` for the ``j``-th random
decision of row ``b``, as documented in each rule. Rows never share randomness, so the
law of a row does not depend on the other rows.

Numerics: all comparisons are written without division (``u * q(x) < p(x)`` for
``u < p(x) / q(x)``), so a zero draft probability never produces a NaN; a residual of
zero mass is replaced by a documented fallback (it is only reached with probability 0
in exact arithmetic); sampling is by inverse CDF and can only return a token of
positive weight (:func:`sample_weighted`). Inputs are validated for shape only: a
NaN check would force a device synchronisation on every step.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from otm.errors import InvalidDistributionError, InvalidDraftCountError, ShapeMismatchError
from otm.rules.registry import DRAFT_SCHEMES  # noqa: F401  (re-exported: the schemes a verifier may draw from)


@dataclass(frozen=True)
class VerifierOutput:
    """What a verifier returns for a batch of rows.

    Attributes:
        tokens: ``[batch]`` int64, the output token ``Y`` of each row.
        accepted_index: ``[batch]`` int64, the 0-based index ``i`` of the accepted draft
            (``Y = x_i``), or ``-1`` when ``Y`` was drawn from a residual distribution
            (it may then still equal one of the drafts by chance; membership
            acceptance ``P(Y in S(X))`` counts it, this index does not).
    """

    tokens: torch.Tensor  # [batch]
    accepted_index: torch.Tensor  # [batch]


def check_probs_matrix(probs: torch.Tensor, name: str) -> torch.Tensor:
    """Check that ``probs`` is a floating ``[batch, vocab]`` tensor with ``vocab >= 1``."""
    if not isinstance(probs, torch.Tensor):
        raise InvalidDistributionError(f"{name} must be a torch.Tensor, got {type(probs).__name__}")
    if not probs.is_floating_point():
        raise InvalidDistributionError(f"{name} must be a floating tensor, got dtype {probs.dtype}")
    if probs.ndim != 2 or probs.shape[1] < 1:
        raise ShapeMismatchError(f"{name} must have shape [batch, vocab], got {tuple(probs.shape)}")
    return probs


def check_k(k) -> int:
    """``k`` as an int >= 1, else :class:`InvalidDraftCountError`."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidDraftCountError(f"the number of drafts k must be an integer >= 1, got {k!r}")
    return k


def check_verify_inputs(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, k, vocab]
    draft_tokens: torch.Tensor,  # [batch, k]
) -> tuple[int, int, int]:
    """Shape checks shared by every ``verify``; returns ``(batch, k, vocab)``."""
    check_probs_matrix(target_probs, "target_probs")
    batch, vocab = target_probs.shape
    if not isinstance(draft_probs, torch.Tensor) or draft_probs.ndim != 3:
        raise ShapeMismatchError(
            f"draft_probs must have shape [batch, k, vocab], got "
            f"{tuple(draft_probs.shape) if isinstance(draft_probs, torch.Tensor) else type(draft_probs).__name__}"
        )
    if draft_probs.dtype != target_probs.dtype or draft_probs.device != target_probs.device:
        raise InvalidDistributionError(
            f"draft_probs ({draft_probs.dtype}, {draft_probs.device}) and target_probs "
            f"({target_probs.dtype}, {target_probs.device}) must share dtype and device"
        )
    k = draft_probs.shape[1]
    if draft_probs.shape[0] != batch or draft_probs.shape[2] != vocab or k < 1:
        raise ShapeMismatchError(
            f"draft_probs has shape {tuple(draft_probs.shape)}, expected [batch={batch}, k>=1, vocab={vocab}]"
        )
    if not isinstance(draft_tokens, torch.Tensor) or draft_tokens.shape != (batch, k):
        raise ShapeMismatchError(
            f"draft_tokens must have shape [batch={batch}, k={k}], got "
            f"{tuple(draft_tokens.shape) if isinstance(draft_tokens, torch.Tensor) else type(draft_tokens).__name__}"
        )
    if draft_tokens.dtype != torch.int64:
        raise ShapeMismatchError(f"draft_tokens must be int64 token ids, got dtype {draft_tokens.dtype}")
    return batch, k, vocab


def draw_uniforms(generator: torch.Generator | None, batch: int, n: int, like: torch.Tensor) -> torch.Tensor:
    """``[batch, n]`` uniforms in ``[0, 1)`` with the dtype and device of ``like`` (the one
    random draw of a ``verify`` call; see the module docstring)."""
    return torch.rand(batch, n, generator=generator, dtype=like.dtype, device=like.device)


def verify_uniforms(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, k, vocab]
    draft_tokens: torch.Tensor,  # [batch, k]
    generator: torch.Generator | None,
    uniforms_per_row: Callable[[int], int],
) -> torch.Tensor:
    """The start of a ``verify``: :func:`check_verify_inputs`, then its one random draw,
    ``[batch, uniforms_per_row(k)]`` (:func:`draw_uniforms`). ``uniforms_per_row`` is the
    rule's own, so a ``k`` the rule does not take raises before anything is drawn."""
    batch, k, _ = check_verify_inputs(target_probs, draft_probs, draft_tokens)
    return draw_uniforms(generator, batch, uniforms_per_row(k), target_probs)


def gather_tokens(probs: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """``probs[b, tokens[b]]``: ``probs`` ``[batch, vocab]``, ``tokens`` ``[batch]`` -> ``[batch]``."""
    return probs.gather(1, tokens.unsqueeze(1)).squeeze(1)


def normalise(weights: torch.Tensor) -> torch.Tensor:
    """Rows of ``weights`` ``[batch, vocab]`` divided by their sums; a zero row stays zero
    (no NaN). Callers replace zero rows with :func:`with_fallback`."""
    total = weights.sum(dim=-1, keepdim=True)
    return torch.where(total > 0, weights / torch.where(total > 0, total, torch.ones_like(total)), weights)


def with_fallback(weights: torch.Tensor, fallback: torch.Tensor) -> torch.Tensor:
    """Rows of ``weights`` ``[batch, vocab]`` with zero mass replaced by the same rows of
    ``fallback``. Used for residuals that are reached with probability 0 in exact
    arithmetic (for example ``max(p - q, 0)`` when ``p = q``), so that any fallback keeps
    the law exact and the output is never NaN."""
    empty = weights.sum(dim=-1, keepdim=True) <= 0
    return torch.where(empty, fallback, weights)


def sample_weighted(weights: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF sampling from unnormalised non-negative rows.

    Args:
        weights: ``[batch, vocab]`` non-negative, every row with positive mass.
        uniforms: ``[batch]`` or ``[batch, m]`` in ``[0, 1)``.

    Returns:
        int64 tokens of the shape of ``uniforms``: token ``t`` of row ``b`` is returned for
        ``uniforms`` in ``[cdf[t-1], cdf[t]) / cdf[-1]``, so it has probability
        ``weights[b, t] / sum(weights[b])`` and a zero-weight token is never returned
        (a rounding overshoot past the last bin goes to the last positive token).
    """
    squeeze = uniforms.ndim == 1
    u = uniforms.unsqueeze(1) if squeeze else uniforms
    cdf = weights.cumsum(dim=-1)
    target = u * cdf[:, -1:]
    idx = torch.searchsorted(cdf, target.contiguous(), right=True)
    vocab = weights.shape[-1]
    positions = torch.arange(vocab, device=weights.device)
    last_positive = torch.where(weights > 0, positions, torch.zeros_like(positions)).amax(dim=-1, keepdim=True)
    idx = torch.minimum(idx, last_positive)
    return idx.squeeze(1) if squeeze else idx


def sample_residual(residual: torch.Tensor, fallback: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """``[batch]`` tokens from ``norm(residual)`` (``[batch, vocab]``, non-negative), rows of
    zero mass replaced by ``fallback`` (:func:`normalise`, :func:`with_fallback`,
    :func:`sample_weighted` on ``uniforms`` ``[batch]``)."""
    return sample_weighted(with_fallback(normalise(residual), fallback), uniforms)


def sample_iid(draft_probs: torch.Tensor, k: int, generator: torch.Generator | None) -> torch.Tensor:
    """``[batch, k]`` i.i.d. draws from the rows of ``draft_probs`` ``[batch, vocab]``
    (one ``torch.rand(batch, k)`` draw)."""
    check_probs_matrix(draft_probs, "draft_probs")
    k = check_k(k)
    u = draw_uniforms(generator, draft_probs.shape[0], k, draft_probs)
    return sample_weighted(draft_probs, u)


def sample_without_replacement(draft_probs: torch.Tensor, k: int, generator: torch.Generator | None) -> torch.Tensor:
    """``[batch, k]`` distinct drafts, each drawn from ``q`` (``draft_probs`` ``[batch, vocab]``)
    renormalised over the tokens not yet drawn (the law of
    :func:`otm.draft_laws.without_replacement_law`), completed by the lowest-index ``q = 0``
    tokens when a row has fewer than ``k`` positive entries.

    Exponential clocks: token ``x`` rings at ``E_x / q(x)`` with ``E_x`` i.i.d. Exp(1);
    the order of the rings is exactly successive sampling without replacement (the first
    ring is ``x`` with probability ``q(x) / sum q`` and, by memorylessness, the remaining
    clocks restart). Rings are capped at the largest finite float so that a positive ``q``
    never ties with the ``q = 0`` tokens, which never ring and come after every positive
    one, in index order. ``k > vocab`` raises :class:`InvalidDraftCountError`.
    """
    check_probs_matrix(draft_probs, "draft_probs")
    k = check_k(k)
    batch, vocab = draft_probs.shape
    if k > vocab:
        raise InvalidDraftCountError(f"k={k} drafts without replacement from a vocabulary of {vocab} tokens")
    positive = draft_probs > 0
    u = torch.rand(draft_probs.shape, generator=generator, dtype=draft_probs.dtype, device=draft_probs.device)
    exponential = -torch.log1p(-u)  # Exp(1), finite since u < 1
    largest = torch.finfo(draft_probs.dtype).max
    ring = torch.where(positive, (exponential / torch.where(positive, draft_probs, 1.0)).clamp(max=largest), torch.inf)
    drawn = torch.topk(ring, k, dim=-1, largest=False, sorted=True).indices  # [batch, k]; first m are the draws
    index = torch.arange(vocab, device=draft_probs.device)
    zero_first = torch.topk(positive.long() * vocab + index, k, dim=-1, largest=False, sorted=True).indices  # [batch, k]
    m = positive.sum(dim=-1, keepdim=True)  # [batch, 1]
    slot = torch.arange(k, device=draft_probs.device).unsqueeze(0)  # [1, k]
    tail = zero_first.gather(1, (slot - m).clamp(min=0).expand(batch, k))
    return torch.where(slot < m, drawn, tail)


def first_draft_probs(draft_probs: torch.Tensor) -> torch.Tensor:
    """``draft_probs[:, 0, :]`` (``[batch, vocab]``): the shared ``q`` of the rules whose
    drafts all come from one distribution (the other rows are expected to equal it and
    are not read)."""
    return draft_probs[:, 0, :]
