"""Probability vectors: validation, logits to probabilities, distances.

Notation (DESIGN.md): ``p`` is the target distribution, ``q`` the draft distribution,
both vectors over a vocabulary of ``V`` tokens.
"""
from __future__ import annotations

import numpy as np

from .errors import InvalidDistributionError, InvalidDraftCountError, ShapeMismatchError
from .tolerances import SUM_TOLERANCE


def as_distribution(values, name: str = "p") -> np.ndarray:
    """Validate a probability vector and return it as a float64 array summing to 1.

    Zero entries are normal. Raises :class:`InvalidDistributionError` for a non-1-D or
    empty input, NaN or inf, a negative entry, or a sum off from 1 by more than
    :data:`SUM_TOLERANCE`.

    >>> as_distribution([0.25, 0.75]).tolist()
    [0.25, 0.75]
    """
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidDistributionError(f"{name} is not a numeric vector: {exc}") from None
    if arr.ndim != 1:
        raise InvalidDistributionError(
            f"{name} must be a 1-D probability vector, got shape {arr.shape}"
        )
    if arr.size == 0:
        raise InvalidDistributionError(f"{name} is empty: a vocabulary has at least one token")
    bad = ~np.isfinite(arr)
    if bad.any():
        raise InvalidDistributionError(
            f"{name} has {int(bad.sum())} NaN/inf entries (first at index {int(np.argmax(bad))})"
        )
    if (arr < 0).any():
        i = int(np.argmin(arr))
        raise InvalidDistributionError(
            f"{name} has negative entries (smallest {arr[i]!r} at index {i}); "
            "probabilities must be >= 0"
        )
    total = float(arr.sum())
    if abs(total - 1.0) > SUM_TOLERANCE:
        raise InvalidDistributionError(
            f"{name} sums to {total!r}, off from 1 by more than SUM_TOLERANCE={SUM_TOLERANCE}; "
            "normalise it, or pass logits through otm.logits_to_probs"
        )
    return arr / total


def as_distribution_pair(p, q) -> tuple[np.ndarray, np.ndarray]:
    """Validate the target ``p`` and draft ``q`` and check they share a vocabulary."""
    return check_same_vocabulary(as_distribution(p, "p (target)"), as_distribution(q, "q (draft)"))


def check_same_vocabulary(p: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return the validated 1-D target ``p`` and draft ``q`` (float or exact), or raise
    :class:`ShapeMismatchError` if they have different numbers of tokens."""
    if p.size != q.size:
        raise ShapeMismatchError(
            f"p (target) has {p.size} tokens but q (draft) has {q.size}: "
            "both must be over the same vocabulary"
        )
    return p, q


def as_draft_distributions(q, k: int, vocab_size: int) -> list[np.ndarray]:
    """The k per-draft distributions ``q_1..q_k``.

    ``q`` is one vector (all drafts share it) or a sequence / 2-D array of exactly
    ``k`` vectors (SpecInfer with different drafts, seed 001 Remark 1).
    """
    k = check_draft_count(k)
    try:
        arr = np.asarray(q, dtype=np.float64)
    except (TypeError, ValueError):
        raise ShapeMismatchError("the k draft distributions must all have the same length") from None
    if arr.ndim == 1:
        qs = [as_distribution(arr, "q (draft)")] * k
    elif arr.ndim == 2:
        qs = [as_distribution(qi, f"q_{i + 1} (draft {i + 1})") for i, qi in enumerate(arr)]
    else:
        raise InvalidDistributionError(f"q must be one vector or k vectors, got shape {arr.shape}")
    if len(qs) != k:
        raise ShapeMismatchError(f"got {len(qs)} draft distributions for k={k} drafts")
    for i, qi in enumerate(qs):
        if qi.size != vocab_size:
            raise ShapeMismatchError(
                f"draft distribution {i + 1} has {qi.size} tokens but p (target) has {vocab_size}"
            )
    return qs


def check_draft_count(k) -> int:
    """Return ``k`` as an int, or raise :class:`InvalidDraftCountError` if it is not >= 1."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise InvalidDraftCountError(f"the number of drafts k must be an integer >= 1, got {k!r}")
    return int(k)


def logits_to_probs(
    logits,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> np.ndarray:
    """Softmax of ``logits / temperature``, then top-k, then top-p (the order of
    Hugging Face's sampling warpers), renormalised.

    - ``temperature == 0`` gives the one-hot of the argmax; ties go to the lowest
      token index (``np.argmax``).
    - ``top_k`` keeps the ``top_k`` most probable tokens (ties broken by lower index).
    - ``top_p`` keeps the smallest set of most probable tokens whose mass reaches
      ``top_p`` (at least one token).
    ``-inf`` logits are allowed (a masked token); NaN and ``+inf`` are not.
    """
    try:
        z = np.asarray(logits, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidDistributionError(f"logits are not numeric: {exc}") from None
    if z.ndim != 1 or z.size == 0:
        raise InvalidDistributionError(f"logits must be a non-empty 1-D vector, got shape {z.shape}")
    if np.isnan(z).any() or np.isposinf(z).any():
        raise InvalidDistributionError("logits contain NaN or +inf")
    if np.isneginf(z).all():
        raise InvalidDistributionError("every logit is -inf: no token can be sampled")
    if not np.isfinite(temperature) or temperature < 0:
        raise InvalidDistributionError(f"temperature must be finite and >= 0, got {temperature!r}")
    if temperature == 0:
        probs = np.zeros_like(z)
        probs[int(np.argmax(z))] = 1.0
        return probs
    scaled = z / temperature
    probs = np.exp(scaled - scaled.max())
    probs /= probs.sum()
    if top_k is not None:
        if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 1:
            raise InvalidDistributionError(f"top_k must be an integer >= 1, got {top_k!r}")
        if top_k < probs.size:
            order = np.argsort(-probs, kind="stable")
            probs[order[top_k:]] = 0.0
            probs /= probs.sum()
    if top_p is not None:
        if not (0 < top_p <= 1):
            raise InvalidDistributionError(f"top_p must be in (0, 1], got {top_p!r}")
        order = np.argsort(-probs, kind="stable")
        cumulative = np.cumsum(probs[order])
        keep = int(np.searchsorted(cumulative, top_p - 1e-12)) + 1
        probs[order[keep:]] = 0.0
        probs /= probs.sum()
    return probs


def total_variation(p, q) -> float:
    """Total variation distance ``TV(p, q) = 1/2 sum |p - q|`` (normalised; seed 004's
    eq. 7 writes the unnormalised sum)."""
    p, q = as_distribution_pair(p, q)
    return 0.5 * float(np.abs(p - q).sum())
