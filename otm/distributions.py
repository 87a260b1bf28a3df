"""Probability vectors: validation (float and exact rational), logits to probabilities, distances.

Notation (docs/theory.md): ``p`` is the target distribution, ``q`` the draft distribution,
both vectors over a vocabulary of ``V`` tokens.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from .errors import InvalidDistributionError, InvalidDraftCountError, ShapeMismatchError
from .tolerances import DTYPE_EPSILON, sum_tolerance


def input_dtype(values) -> str:
    """The floating dtype an input was computed in: ``"float32"``, ``"bfloat16"``,
    ``"float16"`` or ``"float64"`` (also for lists and integers). Works for numpy arrays and,
    without importing torch, for torch tensors."""
    dtype = getattr(values, "dtype", None)
    name = str(dtype).replace("torch.", "") if dtype is not None else "float64"
    return name if name in DTYPE_EPSILON else "float64"


def as_float64(values, name: str) -> np.ndarray:
    """``values`` as a float64 numpy array (torch tensors of any float dtype included);
    complex, string or object data is refused, never silently truncated."""
    if hasattr(values, "detach") and hasattr(values, "cpu"):  # a torch tensor, duck-typed
        if values.is_complex():
            raise InvalidDistributionError(f"{name} is complex ({values.dtype}); probabilities are real numbers")
        values = values.detach().cpu().double().numpy()
    arr = np.asarray(values)
    if arr.dtype.kind == "c":
        raise InvalidDistributionError(f"{name} is complex ({arr.dtype}); probabilities are real numbers: pass the real part explicitly if that is meant")
    if arr.dtype.kind not in "biuf" and arr.dtype.name != "bfloat16":
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise InvalidDistributionError(f"{name} is not a numeric vector ({arr.dtype}): {exc}") from None
        if arr.dtype.kind == "c":
            raise InvalidDistributionError(f"{name} holds complex numbers; probabilities are real numbers")
    return arr.astype(np.float64)


def is_exact_input(values) -> bool:
    """True for exact rational input: a numpy object array (of Fractions), or a list or
    tuple holding a Fraction or a string like ``"3/10"``. Tensors and float arrays are not."""
    if isinstance(values, np.ndarray):
        return values.dtype == object
    if isinstance(values, (list, tuple)):
        return any(is_exact_input(v) if isinstance(v, (list, tuple, np.ndarray)) else isinstance(v, (Fraction, str)) for v in values)
    return False


def as_distribution(values, name: str = "p") -> np.ndarray:
    """Validate a probability vector and return it as a float64 array summing to 1.

    Accepts lists, numpy arrays and torch tensors in float64, float32, bfloat16 or float16.
    Zero entries are normal. The sum must be within
    :func:`otm.tolerances.sum_tolerance` of 1 for the input's dtype and length (what that
    dtype's softmax can produce, e.g. 4.6e-5 for float32 at ``V = 151,936``); the vector
    is then renormalised in float64 (:func:`normalisation_note` says by how much).
    Raises :class:`InvalidDistributionError` for a non-1-D, empty, complex or non-numeric
    input, NaN or inf, a negative entry, or a sum further from 1.

    >>> as_distribution([0.25, 0.75]).tolist()
    [0.25, 0.75]
    """
    dtype = input_dtype(values)
    arr = as_float64(values, name)
    if arr.ndim != 1:
        raise InvalidDistributionError(f"{name} must be a 1-D probability vector, got shape {arr.shape}")
    if arr.size == 0:
        raise InvalidDistributionError(f"{name} is empty: a vocabulary has at least one token")
    bad = ~np.isfinite(arr)
    if bad.any():
        raise InvalidDistributionError(f"{name} has {int(bad.sum())} NaN/inf entries (first at index {int(np.argmax(bad))})")
    if (arr < 0).any():
        i = int(np.argmin(arr))
        raise InvalidDistributionError(f"{name} has negative entries (smallest {arr[i]!r} at index {i}); probabilities must be >= 0")
    total = float(arr.sum())
    tolerance = sum_tolerance(dtype, arr.size)
    if not abs(total - 1.0) <= tolerance:
        raise InvalidDistributionError(
            f"{name} sums to {total!r}, off from 1 by {abs(total - 1.0):.3g}, more than a {dtype} softmax over "
            f"{arr.size} tokens can be (tolerance {tolerance:.3g}, otm.tolerances.sum_tolerance); "
            "normalise it, or pass logits through otm.logits_to_probs"
        )
    return arr / total


def normalisation_note(values, name: str = "p") -> dict:
    """How an input is treated by :func:`as_distribution`: its dtype, how far its sum is
    from 1 and the tolerance for it; ``renormalised`` is true when the sum was not exactly 1
    (the float64 copy was divided by it). For the ``details`` of results."""
    dtype = input_dtype(values)
    arr = as_float64(values, name)
    total = float(arr.sum())
    return {"dtype": dtype, "sum_error": total - 1.0, "tolerance": sum_tolerance(dtype, max(arr.size, 1)),
            "renormalised": total != 1.0}


def as_exact_distribution(values, name: str = "p") -> np.ndarray:
    """An object array of :class:`Fraction` summing to exactly 1.

    Accepts ints, Fractions, strings like ``"3/10"``, or floats (converted with
    :meth:`Fraction.limit_denominator` to at most 10**6, then required to sum to 1 exactly).
    """
    try:
        fracs = [Fraction(v).limit_denominator(10**6) if isinstance(v, float) else Fraction(v) for v in values]
    except (TypeError, ValueError, ZeroDivisionError) as exc:
        raise InvalidDistributionError(f"{name}: not convertible to exact rationals: {exc}") from None
    if not fracs:
        raise InvalidDistributionError(f"{name} is empty")
    if any(f < 0 for f in fracs):
        raise InvalidDistributionError(f"{name} has negative entries")
    if sum(fracs) != 1:
        raise InvalidDistributionError(f"{name} sums to {sum(fracs)}, not exactly 1")
    return np.array(fracs, dtype=object)


def as_fractions(values: np.ndarray) -> np.ndarray:
    """Float inputs as rationals (exactly), renormalised to sum to 1 (the zeros, most of a
    truncated row at a real vocabulary, are not converted one by one): the exact instance a
    float computation falls back to."""
    floats = np.asarray(values, dtype=np.float64)
    exact = np.full(floats.shape, Fraction(0), dtype=object)
    nonzero = np.flatnonzero(floats)
    parts = [Fraction(float(v)) for v in floats[nonzero]]
    total = sum(parts)
    exact[nonzero] = [v / total for v in parts]
    return exact


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
    ``k`` vectors (SpecInfer with different drafts, Khisti et al. 2025, Remark 1).
    """
    return draft_distributions(q, check_draft_count(k), vocab_size)


def draft_distributions(q, k: int, vocab_size: int) -> list[np.ndarray]:
    """:func:`as_draft_distributions` for a ``k`` checked already (an int ``>= 1``)."""
    assert isinstance(k, int) and k >= 1, k
    if hasattr(q, "ndim"):
        ndim = int(q.ndim)
    elif isinstance(q, (list, tuple)) and q and all(hasattr(row, "__len__") for row in q):
        if len({len(row) for row in q}) != 1:
            raise ShapeMismatchError("the k draft distributions must all have the same length")
        ndim = 2
    else:
        ndim = 1
    if ndim == 1:
        qs = [as_distribution(q, "q (draft)")] * k  # the original keeps its dtype (its sum tolerance)
    elif ndim == 2:
        qs = [as_distribution(qi, f"q_{i + 1} (draft {i + 1})") for i, qi in enumerate(q)]
    else:
        raise InvalidDistributionError(f"q must be one vector or k vectors, got {ndim} dimensions")
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
    name: str = "logits",
) -> np.ndarray:
    """Softmax of ``logits / temperature``, then top-k, then top-p (the order of
    Hugging Face's sampling warpers), renormalised, in float64.

    - ``temperature == 0`` gives the one-hot of the argmax; ties go to the lowest
      token index (``np.argmax``). A positive temperature however small gives the limit
      law (uniform over tied maxima), never NaN: the logits are shifted by their maximum
      before the division.
    - ``top_k`` keeps the ``top_k`` most probable tokens (ties broken by lower index).
    - ``top_p`` keeps the smallest set of most probable tokens whose mass reaches
      ``top_p`` (at least one token).
    ``-inf`` logits are allowed (a masked token); NaN and ``+inf`` are not. Finite logits
    of any size (``+-1e308``) are fine.

    >>> logits_to_probs([0.0, 1e308, -1e308]).tolist()
    [0.0, 1.0, 0.0]
    >>> logits_to_probs([1.0, 3.0, 3.0], temperature=1e-300).tolist()
    [0.0, 0.5, 0.5]
    """
    z = as_float64(logits, name)
    if z.ndim != 1 or z.size == 0:
        raise InvalidDistributionError(f"{name} must be a non-empty 1-D vector, got shape {z.shape}")
    if np.isnan(z).any() or np.isposinf(z).any():
        raise InvalidDistributionError(f"{name} contain NaN or +inf (first at index {int(np.argmax(np.isnan(z) | np.isposinf(z)))})")
    if np.isneginf(z).all():
        raise InvalidDistributionError(f"every entry of {name} is -inf: no token can be sampled")
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float, np.integer, np.floating)) or not (
        np.isfinite(temperature) and temperature >= 0
    ):
        raise InvalidDistributionError(f"temperature must be a finite number >= 0 (0 = argmax), got {temperature!r}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 1):
        raise InvalidDistributionError(f"top_k must be an integer >= 1 (or None for no top-k), got {top_k!r}")
    if top_p is not None and (isinstance(top_p, bool) or not isinstance(top_p, (int, float, np.integer, np.floating)) or not (0 < top_p <= 1)):
        raise InvalidDistributionError(f"top_p must be a number in (0, 1] (or None for no top-p), got {top_p!r}")
    if temperature == 0:
        probs = np.zeros_like(z)
        probs[int(np.argmax(z))] = 1.0
        return probs
    with np.errstate(over="ignore", under="ignore"):
        shifted = (z - z.max()) / temperature  # <= 0, the maximum at exactly 0; overflow goes to -inf
        probs = np.exp(shifted)
    probs /= probs.sum()
    if top_k is not None and top_k < probs.size:
        order = np.argsort(-probs, kind="stable")
        probs[order[top_k:]] = 0.0
        probs /= probs.sum()
    if top_p is not None:
        order = np.argsort(-probs, kind="stable")
        cumulative = np.cumsum(probs[order])
        keep = int(np.searchsorted(cumulative, top_p - 1e-12)) + 1
        probs[order[keep:]] = 0.0
        probs /= probs.sum()
    return probs


def total_variation(p, q) -> float:
    """Total variation distance ``TV(p, q) = 1/2 sum |p - q|`` (normalised; Fu et al.'s
    eq. 7 writes the unnormalised sum)."""
    p, q = as_distribution_pair(p, q)
    return 0.5 * float(np.abs(p - q).sum())
