"""Instance generators for the theorem checks: random pairs ``(p, q)`` of every shape the
standards ask for (peaked, flat, sparse with zeros, one-hot, nearly equal), exhaustive
grids of exact rational distributions, and random joint draft laws.

Every generator takes an explicit :class:`numpy.random.Generator`.
"""
from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np

from otm.draft_laws import DraftLaw, table_law

#: Dirichlet concentrations cycled through by :func:`random_distribution`: peaked, uniform, flat.
CONCENTRATIONS = (0.2, 1.0, 5.0)


def random_distribution(rng: np.random.Generator, vocab_size: int, kind: str | None = None) -> np.ndarray:
    """A random ``[V]`` probability vector. ``kind``: ``"dirichlet"`` (random concentration),
    ``"sparse"`` (some zeros), ``"onehot"``; ``None`` picks one at random (mostly dirichlet)."""
    if kind is None:
        kind = rng.choice(["dirichlet", "dirichlet", "dirichlet", "sparse", "onehot"], p=[0.3, 0.25, 0.25, 0.15, 0.05])
    if kind == "onehot":
        out = np.zeros(vocab_size)
        out[rng.integers(vocab_size)] = 1.0
        return out
    out = rng.dirichlet(np.full(vocab_size, rng.choice(CONCENTRATIONS)))
    if kind == "sparse" and vocab_size > 1:
        zeros = rng.random(vocab_size) < 0.4
        zeros[rng.integers(vocab_size)] = False  # keep at least one token
        out = np.where(zeros, 0.0, out)
    return out / out.sum()


def random_pair(rng: np.random.Generator, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
    """``(p, q)``: independent random distributions, or (one time in six) a nearly equal pair."""
    p = random_distribution(rng, vocab_size)
    if rng.random() < 1 / 6:
        q = 0.9 * p + 0.1 * random_distribution(rng, vocab_size, "dirichlet")
        return p, q / q.sum()
    return p, random_distribution(rng, vocab_size)


def compositions(total: int, parts: int):
    """All tuples of ``parts`` non-negative ints summing to ``total``."""
    for cuts in itertools.combinations(range(total + parts - 1), parts - 1):
        bounds = (-1,) + cuts + (total + parts - 1,)
        yield tuple(bounds[i + 1] - bounds[i] - 1 for i in range(parts))


def exact_grid(vocab_size: int, denominator: int) -> list[np.ndarray]:
    """Every distribution over ``V`` tokens with probabilities in ``(1/denominator) Z``, as
    Fraction object arrays (the exhaustive grids of the exact checks)."""
    return [
        np.array([Fraction(c, denominator) for c in comp], dtype=object)
        for comp in compositions(denominator, vocab_size)
    ]


def random_exact(rng: np.random.Generator, vocab_size: int, denominator: int) -> np.ndarray:
    """A random distribution with probabilities in ``(1/denominator) Z``, as Fractions."""
    counts = rng.multinomial(denominator, rng.dirichlet(np.ones(vocab_size)))
    return np.array([Fraction(int(c), denominator) for c in counts], dtype=object)


def random_table_law(rng: np.random.Generator, vocab_size: int, k: int, support: int | None = None) -> DraftLaw:
    """A random joint draft law ``Q`` over ``support`` random k-tuples (an arbitrary joint Q,
    for the claims stated for any Q)."""
    n_all = vocab_size**k
    support = support or int(rng.integers(1, min(n_all, 12) + 1))
    index = rng.choice(n_all, size=min(support, n_all), replace=False)
    tuples = np.array([np.unravel_index(i, (vocab_size,) * k) for i in index], dtype=np.int64)
    return table_law(tuples, rng.dirichlet(np.ones(len(tuples))), vocab_size)


def as_float(values) -> np.ndarray:
    """Fractions (or anything numeric) to float64."""
    return np.array([float(v) for v in values], dtype=np.float64)
