"""Compressed sparse arrays from coordinate entries without scipy's conversions (the float
LP path builds and hands over many tiny matrices, where those conversions dominate)."""
from __future__ import annotations

import numpy as np


def compressed_order(major: np.ndarray, minor: np.ndarray, n_major: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``(indptr [n_major + 1], order [nnz])`` of the entries ``(major[i], minor[i])`` sorted by
    ``major``, then ``minor`` (CSR: rows then columns; CSC: columns then rows): entry
    ``order[j]`` is the ``j``-th stored one and ``indptr`` delimits each major index. ``None``
    when two entries share a position (scipy would sum them: the caller falls back to it).
    The indices must lie in range (``major < n_major``)."""
    order = np.lexsort((minor, major))
    a, b = major[order], minor[order]
    if ((a[1:] == a[:-1]) & (b[1:] == b[:-1])).any():
        return None
    return np.concatenate([[0], np.cumsum(np.bincount(a, minlength=n_major))]), order


__all__ = ["compressed_order"]
