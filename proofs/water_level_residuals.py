"""The proof that the water levels are probabilities, followed step by step on one instance.

docs/optimal-verifier-proofs.md#water-levels-are-probabilities (our derivation) proves ``0 <= L <= 1``
for the water-level rule (:mod:`otm.rules.optimal_wor`; its engine :mod:`otm.rules.water_levels`)
by following the nesting level by level. This module recomputes, from the final levels alone
(not from the construction's own bookkeeping), every quantity the proof speaks of, so that
each of its steps can be checked in exact rationals (the theorem check
``theory.water_levels_at_most_one`` and tests/proofs/test_water_level_residuals.py).

Notation (ranks ``0..n-1`` by ``p/q`` ascending, ``q > 0``; ``g(B) = P(S ⊆ B)`` for the draft
set ``S``; ``x`` the rule's target selection law). At level ``u`` the walk selects, in the
component of the highest member (the maximal interval of ranks joined by cuts of level
``> u``), its lowest member: a priority rule. A *run* at level ``s`` is a component with an
inner cut; the sets whose highest member lies in ``R = [f, t]`` select inside ``R`` at every
level from ``s`` on, and ``R`` still has to receive its *residual*

    y = x - int_0^s (what level u selects in R) du.

The proof's claims, at every run ``R = [f, t]`` and level ``s``:

(a) ``y / q`` is nondecreasing along ``R`` (it holds for ``x`` on each side of the cut, and a
    raise subtracts ``theta * l`` with ``l / q`` nonincreasing, claim (e));
(b) the residual flux ``rem(j) = y([f, j)) - (1 - s) P(highest member in [f, j))`` is ``>= 0``
    at the inner cuts and ``0`` at ``t + 1``;
(c) every suffix ``[j, t]`` receives at least what must select in it,
    ``y([j, t]) >= (1 - s) (g([0, f) ∪ [j, t]) - g([0, f)))`` (from (a), (b) and the
    exchange lemma of :mod:`otm.formulations.prefix_scan`);
(d) so ``rem(j) <= (1 - s) M_R(j)``, ``M_R(j) = P(S ⊆ [0, t], S meets [f, j) and [j, t])``:
    the level at which cut ``j`` would empty, ``s + rem(j) / M_R(j)``, is at most 1;
(e) the lowest-member law of ``R``, ``l_c = g([0, f) ∪ [c, t]) - g([0, f) ∪ (c, t])``, has
    ``l / q`` nonincreasing along ``R``.

At level 1 nothing is left: the residual is 0 (the levels realise ``x``).
"""
from __future__ import annotations

from dataclasses import dataclass

from otm.rules.water_levels.construction import PairParameters, level_components


@dataclass(frozen=True)
class ResidualRun:
    """One run of the nesting at one level (module docstring).

    Attributes:
        level: ``s``.
        first: ``f``, its lowest rank.
        last: ``t``, its highest rank.
        residual: ``[t - f + 1]`` ``y`` on its ranks.
    """

    level: object
    first: int
    last: int
    residual: list


@dataclass(frozen=True)
class RunSlacks:
    """The least slack of each claim of the module docstring on one run (``>= 0`` where the
    claim holds; ``total`` must be exactly 0)."""

    sorted_ratio: object  # (a): least y_{c+1}/q_{c+1} - y_c/q_c
    flux: object  # (b): least rem(j) over the inner cuts
    total: object  # (b): rem(t + 1), which must be 0
    suffixes: object  # (c): least y([j, t]) - (1 - s) (g([0, f) ∪ [j, t]) - g([0, f)))
    key: object  # (d): least (1 - s) M_R(j) - rem(j)
    lowest_law: object  # (e): least l_c/q_c - l_{c+1}/q_{c+1}


def residual_runs(params: PairParameters, sets: dict) -> tuple[list, list]:
    """Every run of the nesting at every level where a level changes, with its residual, and
    the residual left at level 1 (``[n]``, all 0 when the levels realise ``x``), from
    ``params.levels`` and the draft sets alone."""
    n = len(params.order)
    residual = [params.selection[int(t)] for t in params.order]
    runs = []
    for base, top, components in level_components(params.levels, n):
        low = [0] * n  # the lowest rank of each rank's component
        for f, t in components:
            low[f:t + 1] = [f] * (t - f + 1)
            if t > f:
                runs.append(ResidualRun(base, f, t, residual[f:t + 1]))
        for members, mass in sets.items():  # the priority rule of level ``base``: lowest member in the top's component
            top_member = max(members)
            chosen = min(r for r in members if r >= low[top_member])
            residual[chosen] -= (top - base) * mass
    return runs, residual


def run_slacks(run: ResidualRun, q_ranked: list, sets: dict) -> RunSlacks:
    """The slacks of claims (a)-(e) of the module docstring on ``run``."""
    f, t, s, y = run.first, run.last, run.level, run.residual
    qs = q_ranked[f:t + 1]

    def g(allowed) -> object:  # P(S ⊆ allowed)
        return sum((mass for members, mass in sets.items() if members <= allowed), s * 0)

    below = frozenset(range(f))
    ratios = [a / b for a, b in zip(y, qs)]
    sorted_ratio = min(b - a for a, b in zip(ratios, ratios[1:]))
    rems, suffixes, keys = [], [], []
    for j in range(f + 1, t + 2):
        rem = sum(y[:j - f], s * 0) - (1 - s) * (g(frozenset(range(j))) - g(below))
        rems.append(rem)
        if j <= t:
            upper = frozenset(range(j, t + 1))
            suffixes.append(sum(y[j - f:], s * 0) - (1 - s) * (g(below | upper) - g(below)))
            across = sum((mass for members, mass in sets.items()
                          if j <= max(members) <= t and any(f <= r < j for r in members)), s * 0)
            keys.append((1 - s) * across - rem)
    lowest = [g(below | frozenset(range(c, t + 1))) - g(below | frozenset(range(c + 1, t + 1)))
              for c in range(f, t + 1)]
    lowest_ratios = [a / b for a, b in zip(lowest, qs)]
    return RunSlacks(sorted_ratio, min(rems[:-1]), rems[-1], min(suffixes), min(keys),
                     min(a - b for a, b in zip(lowest_ratios, lowest_ratios[1:])))


__all__ = ["ResidualRun", "RunSlacks", "residual_runs", "run_slacks"]
