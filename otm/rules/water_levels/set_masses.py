"""The water-level masses of ``k`` drafts from the enumerated draft sets.

Every ordered draft tuple of the law, merged into its set of ranks; ``across(f, j, t)`` is the
mass of the sets whose highest member lies in ``[j, t]`` and whose highest member below ``j``
lies in ``[f, j)``: the sets an interval ``[f, t]``'s levels carry over cut ``j``
(:mod:`otm.rules.water_levels.construction`). Exact rationals stay exact; float inputs give
float64 masses. Cost: every ordered draft tuple, ``V!/(V-k)!`` without replacement.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from ...draft_laws import without_replacement_law


class SetMasses:
    """``across(f, j, t)``: the mass of the draft sets (ranks) whose highest member lies in
    ``[j, t]`` and whose highest member below ``j`` lies in ``[f, j)``, from a table per cut
    ``j`` of the mass of each (highest below ``j``, highest) pair, summed over rectangles."""

    def __init__(self, sets: list, masses: list, n: int, zero):
        # table[j][b][c]: mass with highest member c >= j, highest member below j equal to b
        table = [[[zero] * n for _ in range(n)] for _ in range(n + 1)]
        self.sigma = [zero] * n
        for members, mass in zip(sets, masses):
            ranks = sorted(members, reverse=True)
            self.sigma[ranks[0]] += mass
            for below, above in zip(ranks[1:], ranks):
                for j in range(below + 1, above + 1):  # the cuts whose highest member below is `below`
                    table[j][below][ranks[0]] += mass
        # corner[j][b][c] = sum of table[j][b'][c'] over b' >= b, c' <= c
        self._corner = []
        for j in range(n + 1):
            corner = [[zero] * (n + 1) for _ in range(n + 1)]
            for b in range(n - 1, -1, -1):
                for c in range(n):
                    corner[b][c + 1] = table[j][b][c] + corner[b + 1][c + 1] + corner[b][c] - corner[b + 1][c]
            self._corner.append(corner)

    def across(self, f: int, j: int, t: int):
        corner = self._corner[j]
        return corner[f][t + 1] - corner[j][t + 1] - corner[f][j] + corner[j][j]


class FloatSetMasses:
    """:class:`SetMasses` in float64 from arrays: ``across(f, j, t)`` sums the block of the
    per-cut table directly (positive terms, no cancellation; ``O((j - f)(t - j))``)."""

    def __init__(self, ranks: np.ndarray, masses: np.ndarray, n: int):
        # ranks [C, r] descending per row (a repeated rank adds an empty range), masses [C]
        self.sigma = np.bincount(ranks[:, 0], weights=masses, minlength=n)
        change = np.zeros((n + 2, n, n))  # along j: +mass where a (below, top) range starts, - where it ends
        top = ranks[:, 0]
        for i in range(1, ranks.shape[1]):
            below, above = ranks[:, i], ranks[:, i - 1]
            np.add.at(change, (below + 1, below, top), masses)
            np.add.at(change, (above + 1, below, top), -masses)
        self._table = np.maximum(np.cumsum(change, axis=0)[: n + 1], 0.0)  # clear the cumsum's roundings below 0

    def across(self, f: int, j: int, t: int):
        return float(self._table[j, f:j, j:t + 1].sum())


def set_masses(k: int, draft_law=without_replacement_law):
    """The ``masses_of`` of :func:`otm.rules.water_levels.construction.water_level_parameters` for
    ``k`` drafts from ``draft_law(q, k)`` (:func:`otm.draft_laws.without_replacement_law`;
    :func:`otm.draft_laws.iid_law` for the same construction on i.i.d. drafts, which
    ``python -m research.optimal_wor.wor_water_levels --law iid`` checks): every ordered tuple of ranks, merged
    into sets; :class:`SetMasses` for exact rationals, :class:`FloatSetMasses` for floats."""

    def masses_of(qs: list, zero):
        if not isinstance(zero, Fraction):  # float64 masses (also under a wider float arithmetic)
            law = draft_law(np.asarray([float(v) for v in qs], dtype=np.float64), k)
            ranks, inverse = np.unique(-np.sort(-law.tuples, axis=1), axis=0, return_inverse=True)
            masses = FloatSetMasses(ranks, np.bincount(inverse.ravel(), weights=law.probs), len(qs))
            return masses, [zero + float(v) for v in masses.sigma]
        sets = draft_sets(qs, k, draft_law)
        masses = SetMasses(list(sets), list(sets.values()), len(qs), zero)
        return masses, masses.sigma

    return masses_of


def draft_sets(q_ranked: list, k: int, draft_law=without_replacement_law) -> dict:
    """``{frozenset of ranks: P(S = set)}`` for ``k`` draws from ``q_ranked`` (the ``q > 0`` by
    rank) under ``draft_law``, every ordered tuple merged into its set (exact rationals stay
    exact; floats give float64 masses)."""
    exact = any(isinstance(v, Fraction) for v in q_ranked)
    law = draft_law(np.array(q_ranked, dtype=object if exact else np.float64), k)
    sets: dict = {}
    for ranks, mass in zip(law.tuples, law.probs):
        key = frozenset(int(r) for r in ranks)
        sets[key] = sets.get(key, 0) + mass
    return sets


__all__ = ["FloatSetMasses", "SetMasses", "draft_sets", "set_masses"]
