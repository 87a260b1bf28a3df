"""scripts/wor_end_keys.py: Lemma 15's end keys (one rank's residual each) equal the flux bookkeeping's
at every step and give the construction's levels; the accumulated polynomials equal the sum of the
steps' lowest-member laws; the queue of products equals the products made afresh; and a wrong level or
a wrong ``x`` is caught."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import wor_end_keys  # noqa: E402
from wor_end_peel import end_peel  # noqa: E402
from wor_nesting_spine import RunMasses  # noqa: E402

from tests.decoding.corpus_support import random_run, random_runs, synthetic_corpus, table_rows  # noqa: E402

#: Lemma 15's remaining flux against the flux bookkeeping's, relative to the cut's flux: the same
#: quantity summed in other orders (measured at most ``1e-14`` on these rows).
SAME_REMAINDER = 1e-11

#: Levels and laws computed along other float paths, on rows whose levels stay away from 1.
AGREEMENT = 1e-9


class _LevelZero(wor_end_keys.ResidualEnds):
    """Lemma 15 without its ``1 - s``: every run read as if at level 0."""

    def ends(self, f, t, level, chain, log, carried):
        return super().ends(f, t, 0.0, chain, log, carried)


@pytest.mark.parametrize("k", [3, 4])
def test_end_keys_are_the_flux_ones(k):
    """On 30 random rows per ``k``, every step's two ends agree with the flux bookkeeping, the levels
    with the construction's, and some rows split; read at level 0 instead, the ends disagree."""
    splits = 0
    for exact, flux, run, masses in random_runs(k, range(30)):
        run_masses = RunMasses(masses)
        ends = wor_end_keys.ResidualEnds(masses, flux, run_masses)
        levels, stats = end_peel(flux, run, run_masses, ends=ends)
        assert ends.gap <= SAME_REMAINDER
        cuts = slice(run[0] + 1, run[1] + 1)
        np.testing.assert_allclose(levels[cuts], exact[cuts], rtol=0, atol=AGREEMENT)
        splits += stats["splits"]
    assert splits > 0
    exact, flux, run, masses = random_run(0, k)
    broken = _LevelZero(masses, flux, RunMasses(masses))
    try:
        end_peel(flux, run, RunMasses(masses), ends=broken)
    except RuntimeError:
        pass  # a negative end at a run's start is one way to show it
    assert broken.gap > 1e-3


def test_a_wrong_x_is_caught():
    """``x`` raised at one rank inside the run by 1% of the run's largest flux: the ends no longer
    match the flux's."""
    exact, flux, run, masses = random_run(2, 3)
    run_masses = RunMasses(masses)
    ends = wor_end_keys.ResidualEnds(masses, flux, run_masses)
    ends.x = ends.x.copy()
    ends.x[(run[0] + run[1]) // 2] += 0.01 * flux[run[0]:run[1] + 1].max()
    try:
        end_peel(flux, run, run_masses, ends=ends)
    except RuntimeError:
        pass
    assert ends.gap > 1e-3


@pytest.mark.parametrize("k", [3, 5])
def test_accumulators_are_the_summed_lowest_laws(k):
    """Along a random chain of nested runs with random raises, what the accumulators say the steps
    selected at each end of the last run and at its middle rank equals the sum of ``theta`` times each run's lowest-member
    law there (the clock masses' own :meth:`lowest_law`)."""
    _, _, _, masses = random_run(5, k, (40, 60))
    rng = np.random.default_rng(k)
    clocks = wor_end_keys.Clocks(masses)
    f, t = 0, masses.n - 1
    chain = []
    residuals = wor_end_keys.Residuals(clocks, f, t)
    for _ in range(12):
        theta = float(rng.uniform(0, 0.1))
        residuals.step(f, t, theta)
        chain.append((f, t, theta))
        f, t = f + int(rng.integers(0, 3)), t - int(rng.integers(0, 3))
    residuals.moved(f, t)
    queue = wor_end_keys.ProductQueue(clocks)
    queue.at(f, t)
    inner = (f + t) // 2
    summed = {c: sum(theta * masses.lowest_law(a, b)[c - a] for a, b, theta in chain) for c in (f, inner, t)}
    assert residuals.selected(f, queue.without_first()) == pytest.approx(summed[f], rel=AGREEMENT)
    assert residuals.selected(inner, queue.range_of(inner + 1, t)) == pytest.approx(summed[inner], rel=AGREEMENT)
    assert residuals.selected(t, None) == pytest.approx(summed[t], rel=AGREEMENT)
    assert summed[f] > 0 and summed[t] > 0


@settings(max_examples=25, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=30), st.integers(0, 40))
def test_queue_equals_fresh_products(removals, jump):
    """Removals at either end (``True``: the left), and a jump to a range outside the one held: the
    queue's ``(f, t]`` and ``[f, t)`` equal the products multiplied out afresh."""
    _, _, _, masses = random_run(3, 3, (60, 61))
    clocks = wor_end_keys.Clocks(masses)
    queue = wor_end_keys.ProductQueue(clocks)
    f, t = 0, masses.n - 1
    for left in removals + [None, True]:
        if t - f < 2:
            break
        queue.at(f, t)
        for got, (a, b) in ((queue.without_first(), (f + 1, t)), (queue.without_last(), (f, t - 1))):
            E, D = clocks.empty()
            for r in range(a, b + 1):
                E, D = clocks.grown(E, D, r)
            np.testing.assert_allclose(got[0], E, rtol=1e-12, atol=1e-300)
            np.testing.assert_allclose(got[1], D, rtol=1e-12, atol=1e-300)
        if left is None:
            f, t = min(jump, t - 2), t
        elif left:
            f += 1
        else:
            t -= 1


def test_table(tmp_path, capsys):
    synthetic_corpus(tmp_path, seed=4, rows=4, vocab=120, scale=2.0)
    assert wor_end_keys.main(["--corpus", str(tmp_path / "corpus"), "--positions", "2", "--top", "120", "--ks", "3"]) == 0
    rows = table_rows(capsys.readouterr().out)
    assert rows and any(cells[3].strip().isdigit() for cells in rows)
    for cells in rows:
        if cells[3].strip().isdigit():
            assert float(cells[5]) <= SAME_REMAINDER
            same, _, length = cells[6].split()
            assert int(same) >= 0.9 * int(length)
            assert all(float(v) <= 1e-12 for v in cells[7].split("/"))
