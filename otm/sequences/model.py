"""A target ``P`` and a draft ``Q`` over token sequences, given as explicit tables.

For every prefix ``s`` (a tuple of tokens in ``range(V)``) of length ``< length`` the model
holds the target's next-token law ``p(. | s)`` and the draft's ``q(. | s)``; the joint laws of
the first ``n <= length`` tokens are ``P(x_1..x_n) = prod_i p(x_i | x_<i)`` and likewise
``Q``. This is the context-dependent setting of speculative decoding with a draft block
(Leviathan, Kalman, Matias, ICML 2023, arXiv:2211.17192; Sun et al. 2025, "Block
Verification Accelerates Speculative Decoding", ICLR 2025, arXiv:2403.10444), small enough
to enumerate: ``V**length`` sequences.

Exactness policy of the toolkit: a model is **exact** when every row is exact (numpy object
arrays of :class:`fractions.Fraction`, or lists of Fractions / strings like ``"1/3"``); then
every quantity computed from it in :mod:`otm.sequences` is an exact rational. Otherwise all
rows are validated and used in float64.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..distributions import as_distribution, as_exact_distribution, is_exact_input
from ..errors import (
    InvalidDistributionError,
    InvalidDraftCountError,
    NotApplicableError,
    ShapeMismatchError,
)


@dataclass(frozen=True, eq=False)
class SequenceModel:
    """Next-token tables of the target and the draft for every prefix shorter than ``length``.

    Attributes:
        vocab_size: ``V``.
        length: ``L``: conditionals exist for prefixes of length ``0..L-1``, so the joint law
            of ``L`` tokens is defined. A draft block of ``g`` tokens needs ``L >= g + 1``
            (the target's law after the block gives the bonus token).
        target_table: ``{prefix: [V] p(. | prefix)}``.
        draft_table: ``{prefix: [V] q(. | prefix)}``.
    """

    vocab_size: int
    length: int
    target_table: dict
    draft_table: dict

    @property
    def exact(self) -> bool:
        """True when the tables hold exact rationals."""
        return self.target_table[()].dtype == object

    def zero(self):
        """``0`` in the model's number type."""
        return Fraction(0) if self.exact else 0.0

    def one(self):
        """``1`` in the model's number type."""
        return Fraction(1) if self.exact else 1.0

    def target(self, prefix: tuple) -> np.ndarray:
        """``[V]`` the target's next-token law ``p(. | prefix)``."""
        return self.target_table[tuple(prefix)]

    def draft(self, prefix: tuple) -> np.ndarray:
        """``[V]`` the draft's next-token law ``q(. | prefix)``."""
        return self.draft_table[tuple(prefix)]

    def target_prob(self, sequence: tuple):
        """``P(sequence) = prod_i p(x_i | x_<i)`` (1 for the empty sequence)."""
        return _path_probability(self.target_table, tuple(sequence), self.one())

    def draft_prob(self, sequence: tuple):
        """``Q(sequence) = prod_i q(x_i | x_<i)``."""
        return _path_probability(self.draft_table, tuple(sequence), self.one())

    def sequences(self, n: int):
        """Every sequence of ``n`` tokens, in lexicographic order."""
        return itertools.product(range(self.vocab_size), repeat=n)

    def require_length(self, needed: int, argument: str) -> None:
        """:class:`NotApplicableError` unless the model defines the law of ``needed`` tokens."""
        if needed > self.length:
            raise NotApplicableError(
                f"{argument} needs the law of {needed} tokens but the model defines only {self.length}; "
                f"build the model with length >= {needed}"
            )

    def as_float(self) -> SequenceModel:
        """The same model in float64 (for comparing the float path with the exact one)."""
        def conv(table):
            return {s: np.asarray(row, dtype=np.float64) for s, row in table.items()}
        return SequenceModel(self.vocab_size, self.length, conv(self.target_table), conv(self.draft_table))


def _path_probability(table: dict, sequence: tuple, one):
    prob = one
    for i, token in enumerate(sequence):
        prob = prob * table[sequence[:i]][token]
    return prob


def check_block_length(g: int, argument: str = "g") -> int:
    """``g`` as an int ``>= 1`` (the number of drafted tokens, or a tree's depth), else
    :class:`InvalidDraftCountError`."""
    if isinstance(g, bool) or not isinstance(g, (int, np.integer)) or g < 1:
        raise InvalidDraftCountError(f"{argument} must be an integer >= 1 (tokens drafted in a row), got {g!r}")
    return int(g)


def sequence_model(target: dict, draft: dict) -> SequenceModel:
    """A model from two tables ``{prefix tuple: [V] next-token law}``.

    Both tables must hold every prefix of length ``0..L-1`` for one ``L`` (the longest
    prefix plus one) over one vocabulary. Rows are validated like every distribution of the
    toolkit (:func:`otm.distributions.as_distribution`); the model is exact when every row of
    both tables is (:func:`otm.distributions.is_exact_input`).

    >>> m = sequence_model({(): [0.5, 0.5]}, {(): [1.0, 0.0]})
    >>> m.vocab_size, m.length, m.exact
    (2, 1, False)
    """
    if not isinstance(target, dict) or not isinstance(draft, dict) or () not in target or () not in draft:
        raise InvalidDistributionError("target and draft must be dicts {prefix tuple: next-token law} holding the empty prefix ()")
    exact = all(is_exact_input(row) for row in [*target.values(), *draft.values()])
    rows_t = _validated_table(target, "target", exact)
    rows_q = _validated_table(draft, "draft", exact)
    vocab_size = rows_t[()].size
    length = 1 + max(len(s) for s in rows_t)
    for name, rows in (("target", rows_t), ("draft", rows_q)):
        _check_complete(rows, vocab_size, length, name)
    return SequenceModel(vocab_size, length, rows_t, rows_q)


def _validated_table(table: dict, name: str, exact: bool) -> dict:
    rows = {}
    for prefix, row in table.items():
        if not isinstance(prefix, tuple) or not all(isinstance(t, (int, np.integer)) and t >= 0 for t in prefix):
            raise InvalidDistributionError(f"{name} table key {prefix!r} is not a tuple of token ids")
        label = f"{name}(. | {prefix})"
        rows[tuple(int(t) for t in prefix)] = as_exact_distribution(row, label) if exact else as_distribution(row, label)
    return rows


def _check_complete(rows: dict, vocab_size: int, length: int, name: str) -> None:
    for prefix, row in rows.items():
        if row.size != vocab_size:
            raise ShapeMismatchError(f"{name}(. | {prefix}) has {row.size} tokens, {name}(. | ()) has {vocab_size}")
        if any(t >= vocab_size for t in prefix):
            raise ShapeMismatchError(f"{name} table key {prefix} names a token outside range({vocab_size})")
    expected = sum(vocab_size**n for n in range(length))
    if len(rows) != expected:
        missing = next(s for n in range(length) for s in itertools.product(range(vocab_size), repeat=n) if s not in rows)
        raise InvalidDistributionError(
            f"the {name} table lacks the prefix {missing}: give a next-token law for every prefix "
            f"of length 0..{length - 1}"
        )


def from_level_arrays(target_levels, draft_levels) -> SequenceModel:
    """A model from per-level arrays: level ``n`` has shape ``(V,) * (n + 1)``, entry
    ``[s_1, .., s_n, y]`` = ``p(y | s)`` (resp. ``q``). Object arrays of Fractions give an
    exact model.

    >>> import numpy as np
    >>> m = from_level_arrays([np.array([0.5, 0.5]), np.array([[1.0, 0.0], [0.0, 1.0]])],
    ...                       [np.array([0.5, 0.5]), np.array([[0.5, 0.5], [0.5, 0.5]])])
    >>> m.length, float(m.target_prob((1, 1)))
    (2, 0.5)
    """
    if len(target_levels) != len(draft_levels) or not len(target_levels):
        raise ShapeMismatchError("target_levels and draft_levels must be non-empty lists of the same length")

    def table(levels, name):
        out = {}
        for n, level in enumerate(levels):
            arr = np.asarray(level, dtype=level.dtype if isinstance(level, np.ndarray) else None)
            if arr.ndim != n + 1 or len(set(arr.shape)) != 1:
                raise ShapeMismatchError(f"{name}_levels[{n}] must have shape (V,) * {n + 1}, got {arr.shape}")
            for prefix in itertools.product(range(arr.shape[0]), repeat=n):
                out[prefix] = arr[prefix]
        return out

    return sequence_model(table(target_levels, "target"), table(draft_levels, "draft"))


def context_independent_model(p, q, length: int) -> SequenceModel:
    """``p(. | s) = p`` and ``q(. | s) = q`` for every prefix (i.i.d. tokens): the toy setting
    of Leviathan et al. 2023 and of the motivating example of Sun et al. 2025 (block
    verification), where token-wise verification accepts 10/9 tokens, block verification
    11/9 and the block-level maximal coupling 12/9.

    >>> from fractions import Fraction as F
    >>> m = context_independent_model([F(1, 3), F(2, 3)], [F(2, 3), F(1, 3)], 3)
    >>> m.exact, m.target_prob((1, 1))
    (True, Fraction(4, 9))
    """
    length = check_block_length(length, "length")
    prefixes = [s for n in range(length) for s in itertools.product(range(len(p)), repeat=n)]
    return sequence_model({s: p for s in prefixes}, {s: q for s in prefixes})


def random_model(vocab_size: int, length: int, rng: np.random.Generator, concentration: float = 1.0,
                 denominator: int | None = None) -> SequenceModel:
    """Rows drawn from ``Dirichlet(concentration * 1)`` with the generator ``rng``.

    With ``denominator = N`` every row is rounded to multiples of ``1/N`` (largest-remainder
    rounding, so it sums to exactly 1; zeros appear, as in real top-k rows) and the model is
    exact.

    >>> m = random_model(2, 3, np.random.default_rng(0), denominator=6)
    >>> m.exact, m.length, sum(m.draft((1, 0)))
    (True, 3, Fraction(1, 1))
    """
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, (int, np.integer)) or vocab_size < 1:
        raise ShapeMismatchError(f"vocab_size must be an integer >= 1, got {vocab_size!r}")
    length = check_block_length(length, "length")
    if not concentration > 0:
        raise InvalidDistributionError(f"concentration must be > 0, got {concentration!r}")
    if denominator is not None and (isinstance(denominator, bool) or not isinstance(denominator, (int, np.integer)) or denominator < 1):
        raise InvalidDistributionError(f"denominator must be an integer >= 1 (or None for floats), got {denominator!r}")

    def row():
        w = rng.dirichlet(np.full(vocab_size, float(concentration)))
        return w if denominator is None else _rounded(w, int(denominator))

    prefixes = [s for n in range(length) for s in itertools.product(range(vocab_size), repeat=n)]
    target = {s: row() for s in prefixes}
    draft = {s: row() for s in prefixes}
    return sequence_model(target, draft)


def _rounded(weights: np.ndarray, denominator: int) -> np.ndarray:
    """``weights`` rounded to multiples of ``1/denominator`` summing to 1 (largest remainder)."""
    scaled = weights * denominator
    counts = np.floor(scaled).astype(np.int64)
    for i in np.argsort(-(scaled - counts), kind="stable")[: denominator - int(counts.sum())]:
        counts[i] += 1
    return np.array([Fraction(int(c), denominator) for c in counts], dtype=object)
