"""Number-type-preserving vector helpers: exact inputs (numpy object arrays of
:class:`fractions.Fraction`) stay exact, float inputs stay float64."""
from __future__ import annotations

from fractions import Fraction

import numpy as np


def zero_of(values: np.ndarray):
    """``0`` in the number type of ``values`` (``Fraction(0)`` for object arrays)."""
    return Fraction(0) if values.dtype == object else 0.0


def one_of(values: np.ndarray):
    """``1`` in the number type of ``values``."""
    return Fraction(1) if values.dtype == object else 1.0


def positive_part(values: np.ndarray) -> np.ndarray:
    """``[V]`` ``max(v, 0)`` elementwise, same number type."""
    return np.where(values > 0, values, zero_of(values)).astype(values.dtype)


def total(values: np.ndarray):
    """``sum(values)`` starting from the right zero (an empty sum is ``Fraction(0)`` or 0.0)."""
    return sum(values.tolist(), zero_of(values))


def normalised(values: np.ndarray) -> np.ndarray:
    """``values / sum(values)``; a zero vector stays zero (it is only ever used with weight 0)."""
    mass = total(values)
    return values / mass if mass > 0 else values.copy()


def clip_to_one(value):
    """``min(value, 1)`` keeping the number type."""
    return value if value < 1 else (Fraction(1) if isinstance(value, Fraction) else 1.0)
