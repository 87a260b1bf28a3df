"""Exact rational probability vectors for small instances (sympy-style exact checks)."""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from .errors import InvalidDistributionError


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
