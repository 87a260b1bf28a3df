"""Set masses of k drafts without replacement by the clock integral (otm.rules.water_levels.clock_masses):
against the enumerated law (sigma, every interval mass, every lowest-member law), the levels
they give against the enumerated construction, their certificate, the rule's use of them past
the tuple enumeration, and what breaks them."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otm.draft_laws import without_replacement_law
from otm.errors import NotApplicableError
from otm.formulations.prefix_scan import prefix_scan, ratio_order
from otm.distributions import as_fractions
from otm.rules import optimal_wor, water_levels
from otm.rules.water_levels import clock_masses as clock
from otm.rules.water_levels.construction import water_level_parameters

#: Relative agreement of the clock integral with the enumerated law (measured: a few 1e-14).
CLOCK_TOLERANCE = 1e-12


@st.composite
def ranked_rows(draw):
    """``(q by rank, k)``: float rows with a tiny token and a dominant one sometimes."""
    n = draw(st.integers(5, 8))
    k = draw(st.integers(3, min(5, n - 1)))
    exponents = draw(st.lists(st.floats(-9.0, 0.0), min_size=n, max_size=n))
    q = 10.0 ** np.asarray(exponents)
    return q / q.sum(), k


def enumerated_sets(q: np.ndarray, k: int) -> list:
    law = without_replacement_law(q, k)
    return [(set(int(r) for r in ranks), float(mass)) for ranks, mass in zip(law.tuples, law.probs)]


def relative(a, b) -> float:
    return abs(a - b) / b if b > 0 else abs(a)


@settings(max_examples=25, deadline=None)
@given(ranked_rows())
def test_every_mass_is_the_enumerated_one(row):
    q, k = row
    masses, sets = clock.ClockSetMasses(q, k), enumerated_sets(q, k)
    n = len(q)
    sigma = np.zeros(n)
    for members, mass in sets:
        sigma[max(members)] += mass
    assert max(relative(a, b) for a, b in zip(masses.sigma, sigma)) <= CLOCK_TOLERANCE
    for f in range(n - 1):
        for t in range(f + 1, n):
            lowest = np.zeros(t - f + 1)
            for members, mass in sets:
                if f <= max(members) <= t:
                    lowest[min(r for r in members if r >= f) - f] += mass
            assert max(relative(a, b) for a, b in zip(masses.lowest_law(f, t), lowest)) <= CLOCK_TOLERANCE
            for j in range(f + 1, t + 1):
                across = sum(mass for members, mass in sets
                             if max(members) <= t and any(f <= r < j for r in members) and any(j <= r for r in members))
                assert relative(masses.across(f, j, t), across) <= CLOCK_TOLERANCE


def test_a_coarse_quadrature_is_caught(monkeypatch):
    """The agreement above fails with a step of 0.5 in log s (the step is 0.16 at k = 3)."""
    q = np.array([0.45, 0.3, 0.15, 0.07, 0.03])
    sigma_3 = sum(mass for members, mass in enumerated_sets(q, 3) if max(members) == 3)
    assert relative(clock.ClockSetMasses(q, 3).sigma[3], sigma_3) <= CLOCK_TOLERANCE
    monkeypatch.setattr(clock, "BASE_STEP", 0.5)
    assert relative(clock.ClockSetMasses(q, 3).sigma[3], sigma_3) > CLOCK_TOLERANCE


@pytest.mark.parametrize("k", [4, 8, 16])
def test_the_lower_end_leaves_out_no_mass_that_counts(monkeypatch, k):
    """Every ``sigma`` and interval mass with the quadrature from :func:`clock.lower_end` is
    the one from ``1e-10 / k`` (the same step) within the tolerance, on a row over 12 decades;
    with the lower end at ``k``, inside the integrands' mass (the ``k``-th arrival takes a time
    of ``k`` or more: the total rate is 1), the comparison fails."""
    q = 10.0 ** np.random.default_rng(k).uniform(-12, 0, 30)
    q /= q.sum()
    masses = clock.ClockSetMasses(q, k)
    monkeypatch.setattr(clock, "lower_end", lambda k: 1e-10 / k)
    far = clock.ClockSetMasses(q, k)
    assert far.s.size > masses.s.size

    def largest_difference(a, b) -> float:
        cuts = [(f, j, 29) for f in (0, 7) for j in range(f + 1, 30)]
        return max([relative(x, y) for x, y in zip(a.sigma, b.sigma)] + [relative(a.across(*c), b.across(*c)) for c in cuts])

    assert largest_difference(masses, far) <= CLOCK_TOLERANCE
    monkeypatch.setattr(clock, "lower_end", lambda k: float(k))
    assert largest_difference(clock.ClockSetMasses(q, k), far) > CLOCK_TOLERANCE


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000), st.integers(3, 4))
def test_the_levels_are_the_enumerated_construction_and_certified(seed, k):
    rng = np.random.default_rng(seed)
    n = 8
    p, q = rng.dirichlet(np.full(n, 0.5)), rng.dirichlet(np.full(n, 0.5))
    order = ratio_order(p, q)
    enumerated = water_level_parameters(p, q, order, water_levels.set_masses.set_masses(k))
    by_clock = water_level_parameters(p, q, order, clock.clock_set_masses(k))
    assert np.max(np.abs(np.asarray(enumerated.levels, float) - np.asarray(by_clock.levels, float))) <= 1e-10
    assert water_levels.parameters.clock_realised_error(by_clock, q, k) <= water_levels.CERTIFICATE_TOLERANCE
    assert water_levels.parameters.realised_error(by_clock, q, k) <= water_levels.CERTIFICATE_TOLERANCE  # and by enumeration


def test_the_certificate_catches_broken_levels():
    rng = np.random.default_rng(4)
    p, q = rng.dirichlet(np.full(9, 0.3)), rng.dirichlet(np.full(9, 0.3))
    params = water_level_parameters(p, q, ratio_order(p, q), clock.clock_set_masses(3))
    assert max(params.levels) > 0.01
    halved = dataclasses.replace(params, levels=[level / 2 for level in params.levels])
    assert water_levels.parameters.clock_realised_error(params, q, 3) <= water_levels.CERTIFICATE_TOLERANCE
    assert water_levels.parameters.clock_realised_error(halved, q, 3) > 1e-4


def test_the_rule_takes_them_past_the_enumeration(monkeypatch):
    """With the enumeration limit set low, float rows go through the clock integral: the same
    levels, certified, the prefix scan's optimum; exact rows are still refused."""
    rng = np.random.default_rng(5)
    p, q = rng.dirichlet(np.full(8, 0.4)), rng.dirichlet(np.full(8, 0.4))
    enumerated = water_levels.wor_parameters(p, q, 4)
    monkeypatch.setattr(water_levels.parameters, "MAX_ENUMERATED_TUPLES", 10)
    by_clock = water_levels.wor_parameters(p, q, 4)
    assert "clock integral" in by_clock.arithmetic and "clock integral" not in enumerated.arithmetic
    assert np.max(np.abs(np.asarray(enumerated.levels, float) - np.asarray(by_clock.levels, float))) <= 1e-10
    assert abs(by_clock.acceptance - prefix_scan(p, q, 4, "without_replacement").value) <= 1e-12
    law = optimal_wor.exact_law(p, q, 4)  # the rule's own entry point, past the limit
    assert abs(law.acceptance - by_clock.acceptance) <= 1e-12


def sharp_row(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """15 tokens at a low temperature: ``q`` spans 1e-56..1, as real rows at T = 0.6 do."""
    rng = np.random.default_rng(seed)
    logits_p = 24 * rng.normal(size=15)
    logits_q = logits_p + 12 * rng.normal(size=15)
    return tuple(np.exp(v - v.max()) / np.exp(v - v.max()).sum() for v in (logits_p, logits_q))


def test_a_level_above_one_by_rounding_is_set_to_one_and_certified(monkeypatch):
    """On this row float64 raises one cut to 3e13 (a remainder of rounding over ranks of tiny
    ``q``; the exact construction's levels stay below 0.83: water levels are probabilities). The clock path sets it
    to 1 and says so; the levels then realise ``x`` by the tuple enumeration too, ``x`` is the
    exact construction's, and the acceptance the prefix scan's. Capping a real level instead
    (every level above 0.5 set to 0.5) fails the certificate. (Uncapped, float64 refuses the row
    and 256-bit floats redo it; on real rows at T = 0.6 cut to 400 tokens even they did not.)"""
    p, q = sharp_row(13)
    order = ratio_order(p, q)
    uncapped = water_level_parameters(p, q, order, clock.clock_set_masses(3))  # float64 refuses it: redone wider
    assert uncapped.arithmetic == "256-bit floats (float64 not accurate enough)"
    float64 = water_levels.set_masses.set_masses(3)  # the enumerated float64 masses round the same way
    assert max(water_level_parameters(p, q, order, float64, clip_rounding=True).levels) == 1
    enumerated = water_levels.wor_parameters(p, q, 3)  # the tuples' path: capped too, certified by them
    assert enumerated.arithmetic == "float64, 1 level above 1 by rounding set to 1"
    assert water_levels.parameters.realised_error(enumerated, q, 3) <= water_levels.CERTIFICATE_TOLERANCE
    monkeypatch.setattr(water_levels.parameters, "MAX_ENUMERATED_TUPLES", 10)  # 2,730 triples count as many
    params = water_levels.wor_parameters(p, q, 3)
    assert params.arithmetic == "float64, 1 level above 1 by rounding set to 1, set masses by the clock integral"
    exact = water_levels.wor_parameters(as_fractions(p), as_fractions(q), 3)
    assert max(exact.levels) < 0.83
    assert np.abs(np.asarray(params.selection, float) - np.asarray(exact.selection, float)).max() <= 1e-12
    assert water_levels.parameters.realised_error(params, q, 3) <= water_levels.CERTIFICATE_TOLERANCE
    assert abs(params.acceptance - prefix_scan(p, q, 3, "without_replacement").value) <= 1e-12
    overcapped = dataclasses.replace(params, levels=[min(level, 0.5) for level in params.levels])
    assert water_levels.parameters.realised_error(overcapped, q, 3) > 1e-3
    assert water_levels.parameters.clock_realised_error(overcapped, q, 3) > 1e-3


def test_beyond_enumeration_at_a_few_hundred_tokens():
    """150 tokens, k = 3 (3.3 million ordered triples): levels in [0, 1], certified, the prefix
    scan's optimum (computed by another integral, otm.formulations.wor_all_in)."""
    rng = np.random.default_rng(6)
    p, q = rng.dirichlet(np.full(150, 0.3)), rng.dirichlet(np.full(150, 0.3))
    params = water_levels.wor_parameters(p, q, 3)
    assert "clock integral" in params.arithmetic
    assert 0 <= min(params.levels) and max(params.levels) <= 1
    assert water_levels.parameters.clock_realised_error(params, q, 3) <= water_levels.CERTIFICATE_TOLERANCE
    assert abs(params.acceptance - prefix_scan(p, q, 3, "without_replacement").value) <= 1e-12


def test_too_large_tables_are_refused():
    with pytest.raises(NotApplicableError, match="clock integral's tables"):
        water_levels.wor_parameters(np.ones(5000) / 5000, np.ones(5000) / 5000, 3)
    with pytest.raises(NotApplicableError, match="more than 1e[+]18 draft tuples"):  # the count is capped, and says so
        water_levels.wor_parameters(np.ones(60_000) / 60_000, np.ones(60_000) / 60_000, 8)
