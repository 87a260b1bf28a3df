"""Toy families of ``(p, q)`` pairs from the papers, and their tables.

Our letters throughout (p = target, q = draft):

- similarity: ``p = softmax(z / T)``, ``q = softmax((lam z + (1 - lam) z') / T)``;
  ``lam = 1`` gives ``q = p``.
- SpecTr Fig. 1 (Sun et al. 2023, App. B.2): ``p = U(d / r)`` (target), ``q = U(d)``
  (draft), nested supports.
- SpecTr Figs. 2-3: ``p = Ber(a)`` (target), ``q = Ber(0.25)`` (draft; SpecTr's letters
  are swapped, its "p = Ber(0.25)" is the draft).
- Khisti et al. 2025, Example 1 / Fig. 2: ``q = U(3)`` (draft), ``p = (p_1, t, 1 - p_1 -
  t)`` (target), ``k = 2`` (the numbers are reconstructed, see :func:`three_token_pair`).
"""
from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from .distributions import check_draft_count, logits_to_probs
from .errors import InvalidDistributionError
from .formulations.spectr_bounds import bernoulli_optimum, uniform_optimum
from .tables import LOSSLESS_RULES, OPTIMUM_COLUMNS, AcceptanceTable, _logit_pair, _suffix, acceptance_sweep

#: Column of :func:`three_token_table` holding the single-draft rule at its own k = 1.
SINGLE_AT_K1 = "single (k = 1)"



def toy_logit_pair(rng: np.random.Generator, vocab_size: int, scale: float = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """Two independent ``[V]`` Gaussian logit vectors ``(z, z')`` with standard deviation
    ``scale``: the target's ``z`` and an unrelated ``z'`` to mix into the draft."""
    if vocab_size < 1:
        raise InvalidDistributionError(f"vocab_size must be >= 1, got {vocab_size}")
    return scale * rng.standard_normal(vocab_size), scale * rng.standard_normal(vocab_size)


def similarity_pair(target_logits, other_logits, similarity: float, temperature: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """``p = softmax(z / T)``, ``q = softmax((lam z + (1 - lam) z') / T)``, ``lam`` in [0, 1].

    >>> p, q = similarity_pair([0.0, 1.0], [5.0, -5.0], 1.0)
    >>> bool(np.allclose(p, q))
    True
    """
    if not 0 <= similarity <= 1:
        raise InvalidDistributionError(f"similarity must lie in [0, 1] (1 = identical models), got {similarity!r}")
    z, w = _logit_pair(target_logits, other_logits)
    return logits_to_probs(z, temperature), logits_to_probs(similarity * z + (1 - similarity) * w, temperature)


def three_token_pair(t, first=Fraction(1, 3)) -> tuple[np.ndarray, np.ndarray]:
    """Khisti et al.'s three-token family (Khisti et al. 2025, Example 1, Fig. 2; reconstructed: the
    extracted text lost the numbers): draft ``q = U(3)``, target ``p = (first, t, 1 - first - t)``.

    Example 1 (as checked in ``proofs.khisti``): ``alpha* = 1`` with ``k = 2`` iff
    ``p_(1) >= 1/9`` and ``p_(1) + p_(2) >= 4/9`` (``p`` sorted ascending), while one
    draft reaches 1 only at ``p = q``. Exact Fractions in, exact Fractions out.

    >>> p, q = three_token_pair(Fraction(1, 3))
    >>> p.tolist() == q.tolist()
    True
    """
    exact = isinstance(t, (Fraction, int)) and isinstance(first, (Fraction, int))
    last = 1 - first - t
    if min(first, t, last) < 0:
        raise InvalidDistributionError(f"three_token_pair needs 0 <= t <= 1 - first, got t={t}, first={first}")
    if exact:
        return np.array([Fraction(first), Fraction(t), Fraction(last)], dtype=object), np.array([Fraction(1, 3)] * 3, dtype=object)
    return np.array([float(first), float(t), float(last)]), np.full(3, 1 / 3)


def three_token_table(ts: Sequence[float], first: float = 1 / 3, k: int = 2, rules: Sequence[str] = ("single", "specinfer", "kseq", "spechub", "rrs_wor")) -> AcceptanceTable:
    """Khisti et al. 2025, Fig. 2 (reconstructed): acceptance against ``t = p_2`` for
    :func:`three_token_pair`, ``k = 2``; ``single`` is computed with its own ``k = 1``
    (column :data:`SINGLE_AT_K1`)."""
    def pair_at(t):
        return three_token_pair(float(t), float(first))

    title = f"Khisti's three-token example: q = U(3), p = ({float(first):.3g}, p_2, rest), k = {k}"
    table = acceptance_sweep(pair_at, ts, k, parameter="target p_2", unit="probability", rules=[r for r in rules if r != "single"], title=title)
    if "single" not in rules:
        return table
    single = acceptance_sweep(pair_at, ts, 1, parameter="target p_2", unit="probability", rules=["single"], optima=(), title=title)
    return AcceptanceTable(table.parameter, table.unit, table.values, {**table.columns, SINGLE_AT_K1: single.columns["single"]}, table.notes, title)


def uniform_table(draft_size: int, target_sizes: Sequence[int], ks: Sequence[int], draft_scheme: str = "iid") -> AcceptanceTable:
    """SpecTr Fig. 1 (SpecTr, Sun et al. 2023, App. B.2): ``alpha*`` for target ``U(m)``, draft ``U(d)``
    (nested supports) against ``k``, one column per ``m``."""
    ks = [check_draft_count(k) for k in ks]
    columns = {f"p = U({m}), r = {draft_size / m:g}": np.array([float(uniform_optimum(m, draft_size, k, draft_scheme)) for k in ks]) for m in target_sizes}
    return AcceptanceTable(
        "k", "drafts", np.asarray(ks, dtype=np.float64), columns, {},
        f"SpecTr Fig. 1: optimal acceptance vs k, draft q = U({draft_size}), target p = U(d/r) ({draft_scheme.replace('_', ' ')})",
    )


def bernoulli_table_vs_k(draft_one: float, target_ones: Sequence[float], ks: Sequence[int]) -> AcceptanceTable:
    """SpecTr Fig. 2 (our letters): ``alpha*`` for target ``Ber(a)``, draft ``Ber(draft_one)``
    against ``k``, one column per ``a``."""
    ks = [check_draft_count(k) for k in ks]
    columns = {f"p = Ber({a:g})": np.array([bernoulli_optimum(a, draft_one, k) for k in ks]) for a in target_ones}
    return AcceptanceTable(
        "k", "drafts", np.asarray(ks, dtype=np.float64), columns, {},
        f"SpecTr Fig. 2: optimal acceptance vs k, draft q = Ber({draft_one:g}), target p = Ber(a)",
    )


def bernoulli_table_vs_target(draft_one: float, target_ones: Sequence[float], ks: Sequence[int]) -> AcceptanceTable:
    """SpecTr Fig. 3 (our letters): ``alpha*`` against the target's ``a = p(1)``, one
    column per ``k``; draft ``Ber(draft_one)``."""
    target_ones = np.asarray(target_ones, dtype=np.float64)
    columns = {f"k = {k}": np.array([bernoulli_optimum(a, draft_one, check_draft_count(k)) for a in target_ones]) for k in ks}
    return AcceptanceTable(
        "target p(1)", "probability", target_ones, columns, {},
        f"SpecTr Fig. 3: optimal acceptance vs the target's p(1), draft q = Ber({draft_one:g})",
    )

def acceptance_vs_similarity(target_logits, other_logits, similarities: Sequence[float], k: int, temperature: float = 1.0, rules: Sequence[str] = LOSSLESS_RULES, optima: Sequence[str] = tuple(OPTIMUM_COLUMNS), label: str = "") -> AcceptanceTable:
    """Acceptance against the draft/target similarity ``lam`` of :func:`similarity_pair`."""
    z, w = _logit_pair(target_logits, other_logits)
    return acceptance_sweep(
        lambda lam: similarity_pair(z, w, lam, temperature), similarities, k,
        parameter="similarity lambda", unit="dimensionless, 1 = identical", rules=rules, optima=optima,
        title=f"Acceptance vs draft/target similarity (k = {k}, T = {temperature:g}): rules against the OTM optimum{_suffix(label)}",
    )


__all__ = [
    "SINGLE_AT_K1",
    "acceptance_vs_similarity",
    "bernoulli_table_vs_k",
    "bernoulli_table_vs_target",
    "similarity_pair",
    "three_token_pair",
    "three_token_table",
    "toy_logit_pair",
    "uniform_table",
]
