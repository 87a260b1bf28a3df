"""Bounds on a water level from the flux, k drafts (otm.rules.water_levels.bounds;
docs/optimal-verifier-proofs.md#bounds-on-a-water-level-from-the-flux): where the bounds from the flux and
the set masses decide the walk
of rule 'optimal_wor', they decide it as the water levels do, exactly in rationals; at u = 0
they always decide; with the set masses halved some decision is wrong."""
from __future__ import annotations

from fractions import Fraction as F

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from otm.formulations.prefix_scan import ratio_order
from otm.rules import optimal_wor as rule, water_levels
from otm.rules.water_levels.construction import flux_setup
from otm.rules.water_levels.bounds import span_decision, span_lower_bound, walk_decision


@st.composite
def exact_rows(draw, max_vocab=7):
    """Exact ``(p, q, k)``, ``k = 3..4``, zeros allowed, more than ``k`` tokens with ``q > 0``."""
    V = draw(st.integers(4, max_vocab))
    k = draw(st.integers(3, min(4, V - 1)))
    p = draw(st.lists(st.integers(0, 9), min_size=V, max_size=V))
    q = draw(st.lists(st.integers(0, 9), min_size=V, max_size=V))
    assume(sum(p) > 0 and sum(1 for v in q if v > 0) > k)
    return (np.array([F(v, sum(p)) for v in p], dtype=object), np.array([F(v, sum(q)) for v in q], dtype=object), k)


def selected(levels: list, ranks: list, u) -> int:
    """The walk of the rule with exact levels: the index into ``ranks`` of the last member
    reached going down while ``u < M_i`` (``M_i`` the least level between member ``i`` and the
    highest)."""
    descending = sorted(range(len(ranks)), key=lambda i: -ranks[i])
    chosen = descending[0]
    for lower in descending[1:]:
        if not u < min(levels[ranks[lower] + 1:ranks[descending[0]] + 1]):
            break
        chosen = lower
    return chosen


def walk_by_spans(flux, masses, ranks: list, u, windows=None):
    """The slow obvious walk from bounds: :func:`span_decision` afresh for every member, each
    over its whole span (what ``walk_decision`` computes with its first run and bound carried
    from step to step)."""
    descending = sorted(range(len(ranks)), key=lambda i: -ranks[i])
    chosen = descending[0]
    for lower in descending[1:]:
        verdict = span_decision(flux, masses, ranks[lower], ranks[descending[0]], u, windows=windows)
        if verdict is None:
            return None
        if not verdict:
            break
        chosen = lower
    return chosen


def _decisions(p, q, k: int, masses_scale=1, windows=(None,)):
    """``[(wrong, decided, total)]``, one per entry of ``windows``, over every draft set of the
    row and ``u`` at 0, at each ``M_i``, ``M_i -+ 1/1000``, ``1/2`` and ``999/1000`` (the row's
    levels, flux and draft sets built once for all of them)."""
    params = water_levels.wor_parameters(p, q, k)
    setup = flux_setup(p, q, ratio_order(p, q), water_levels.set_masses.set_masses(k))
    masses = setup.masses
    if masses_scale != 1:
        original = masses.across
        masses.across = lambda f, j, t: masses_scale * original(f, j, t)
    sets = water_levels.set_masses.draft_sets([q[t] for t in params.order], k)
    results = []
    for window in windows:
        wrong = decided = total = 0
        for members in sets:
            ranks = sorted(members)
            reaches = {min(params.levels[r + 1:ranks[-1] + 1]) for r in ranks[:-1]}
            grid = {F(0), F(1, 2), F(999, 1000)} | reaches | {max(F(0), v - F(1, 1000)) for v in reaches} \
                | {min(F(999, 1000), v + F(1, 1000)) for v in reaches}
            for u in grid:
                verdict = walk_decision(setup.flux, masses, ranks, u, windows=window)
                assert verdict == walk_by_spans(setup.flux, masses, ranks, u, windows=window)
                total += 1
                if verdict is not None:
                    decided += 1
                    wrong += verdict != selected(params.levels, ranks, u)
                if u == 0 and masses_scale == 1:
                    assert verdict == selected(params.levels, ranks, u)
        results.append((wrong, decided, total))
    return results


@settings(max_examples=40, deadline=None)
@given(exact_rows())
def test_the_walk_bounds_decide_as_the_levels_in_rationals(row):
    p, q, k = row
    for wrong, decided, total in _decisions(p, q, k, windows=(None, 1, 4)):
        assert wrong == 0 and decided > 0


def test_the_walk_bounds_decide_most_walks_on_a_fixed_family():
    """Not a vacuous check: on 30 random rows (V = 7, k = 3) the bounds decide most of the
    (set, u) pairs of the grid, none wrongly."""
    rng = np.random.default_rng(5)
    wrong = decided = total = 0
    for _ in range(30):
        p, q = (rng.integers(1, 10, size=7) for _ in range(2))
        p, q = (np.array([F(int(v), int(r.sum())) for v in r], dtype=object) for r in (p, q))
        ((w, d, t),) = _decisions(p, q, 3)
        wrong, decided, total = wrong + w, decided + d, total + t
    assert wrong == 0 and decided > total / 2


def test_the_walk_bounds_check_fails_on_halved_set_masses():
    """With every set mass halved the lower bounds double: some decision is then wrong."""
    rng = np.random.default_rng(3)
    wrong = 0
    for _ in range(30):
        p, q = (rng.integers(1, 10, size=7) for _ in range(2))
        p, q = (np.array([F(int(v), int(r.sum())) for v in r], dtype=object) for r in (p, q))
        wrong += _decisions(p, q, 3, masses_scale=F(1, 2))[0][0]
    assert wrong > 0


@pytest.mark.parametrize("k", [3, 4])
def test_a_set_across_the_optimal_cut_selects_its_highest_member(k):
    """A set whose highest member alone lies above the optimal cut (no flux across it) selects
    it for every ``u``, decided without the levels."""
    rng = np.random.default_rng(k)
    while True:  # a row whose cut leaves at least k - 1 ranks below it and one above
        p, q = (rng.integers(1, 10, size=8) for _ in range(2))
        p, q = (np.array([F(int(v), int(r.sum())) for v in r], dtype=object) for r in (p, q))
        setup = flux_setup(p, q, ratio_order(p, q), water_levels.set_masses.set_masses(k))
        if k - 1 <= setup.cut < len(setup.order):
            break
    assert setup.flux[setup.cut] == 0
    ranks = list(range(setup.cut - k + 1, setup.cut + 1))
    for u in (F(0), F(1, 10**9), F(1, 2)):
        assert walk_decision(setup.flux, setup.masses, ranks, u) == k - 1


def test_a_mass_rounded_to_zero_bounds_nothing():
    """A cut whose set mass is 0 (which claim (d) of "water levels are probabilities" rules out in exact arithmetic, so only by
    rounding) gives the lower bound 0 rather than a division by zero, in lists and in arrays:
    no walk goes down on it."""
    class Zero:
        def across(self, f, j, t):
            return 0.0

        def across_cuts(self, f, lo, hi, t):
            return np.zeros(hi - lo + 1)

    flux = [0.0, 0.5, 0.5, 0.0]
    for masses in (Zero(), type("ListsOnly", (), {"across": Zero.across})()):
        for values in (flux, np.asarray(flux)):
            assert span_lower_bound(values, masses, (0, 2), 0, 2) == 0
            assert walk_decision(values, masses, [2, 0], 0.25) is None  # neither down nor stopped
