"""Rule 'optimal_wor' (docs/optimal-verifier.md#water-levels-for-drafts-without-replacement): the water levels of two
drafts carried over to k drafts without replacement. Exact in rationals: output p, acceptance
alpha*(p, Q_wor) = the max flow; the set masses are what they say; the checks fail on broken
pieces."""
from __future__ import annotations

import dataclasses
import itertools
from fractions import Fraction as F

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from otm.draft_laws import iid_law, without_replacement_law
from otm.errors import InvalidDistributionError, InvalidDraftCountError, NotApplicableError
from otm.formulations.max_flow import solve_max_flow
from otm.formulations.prefix_scan import prefix_scan, ratio_order
from otm.distributions import as_fractions
from otm.rules import optimal_wor as rule, rule_law, rule_spec, water_levels
from otm.rules.enumeration import canonical_output_law, enumerate_law
from otm.tolerances import AGREEMENT_TOLERANCE


@st.composite
def exact_instances(draw, max_vocab=6):
    """Exact ``(p, q, k)``, zeros allowed, ``k = 3..V-1`` and more than ``k`` tokens with ``q > 0``."""
    V = draw(st.integers(4, max_vocab))
    k = draw(st.integers(3, V - 1))
    p = draw(st.lists(st.integers(0, 9), min_size=V, max_size=V))
    q = draw(st.lists(st.integers(0, 9), min_size=V, max_size=V))
    assume(sum(p) > 0 and sum(1 for v in q if v > 0) > k)
    return (np.array([F(v, sum(p)) for v in p], dtype=object), np.array([F(v, sum(q)) for v in q], dtype=object), k)


def selection_of(params, law, chances_of=rule.selection_law) -> list:
    """The law of the selected draft, by enumeration of the draft tuples (exact)."""
    selected = [F(0)] * law.vocab_size
    for draft, prob in zip(law.tuples, law.probs):
        for token, chance in zip(draft, chances_of(params, draft)):
            selected[int(token)] += prob * chance
    return selected


@settings(max_examples=40, deadline=None)
@given(exact_instances())
def test_lossless_and_optimal_in_rationals(instance):
    p, q, k = instance
    law = rule.exact_law(p, q, k, method="enumeration")
    optimum = prefix_scan(p, q, k, "without_replacement").value
    assert list(law.output_distribution) == list(p)
    assert law.acceptance == optimum == solve_max_flow(p, without_replacement_law(q, k)).acceptance
    assert rule.exact_law(p, q, k, method="closed_form").acceptance == optimum


@settings(max_examples=40, deadline=None)
@given(exact_instances())
def test_the_construction_is_what_the_derivation_says(instance):
    """Levels in [0, 1], zero at the cut; x <= p on U and x >= p on H; the enumerated
    selection law is x; the chances depend on the set, not on the order of the drafts."""
    p, q, k = instance
    params = water_levels.wor_parameters(p, q, k)
    assert all(0 <= level <= 1 for level in params.levels) and params.levels[params.cut] == 0
    for token in range(len(p)):
        if params.rank[token] >= params.cut:
            assert params.selection[token] <= p[token]
        elif params.rank[token] >= 0:
            assert params.selection[token] >= p[token]
    law = without_replacement_law(q, k)
    for draft in law.tuples[:50]:
        reverse = draft[::-1]
        assert rule.selection_law(params, draft) == rule.selection_law(params, reverse)[::-1]
    assert selection_of(params, law) == list(params.selection)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 7).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.tuples(st.sets(st.integers(0, n - 1), min_size=1, max_size=n), st.integers(1, 9)),
                         min_size=1, max_size=12))))
def test_set_masses_are_what_they_say(case):
    """``across(f, j, t)`` equals its definition summed set by set, and ``sigma`` the mass of
    each highest member."""
    n, weighted = case
    masses = water_levels.set_masses.SetMasses([s for s, _ in weighted], [F(w) for _, w in weighted], n, F(0))
    for f in range(n):
        for t in range(f, n):
            for j in range(f + 1, t + 1):
                expected = sum((F(w) for s, w in weighted
                                if j <= max(s) <= t and any(r < j for r in s) and max(r for r in s if r < j) >= f), F(0))
                assert masses.across(f, j, t) == expected
    assert masses.sigma == [sum((F(w) for s, w in weighted if max(s) == a), F(0)) for a in range(n)]


def _pair_rule_selection(params, draft) -> list:
    """The two-draft water-level rule as first defined (the rule ``optimal_pair_wor``): the
    higher-ranked member is selected, except that on one side of the cut the lower one is
    selected with probability ``yield_probability``; a pair with a ``q = 0`` draft (exhausted
    support) selects by ``x``."""
    a, b = (int(params.rank[int(t)]) for t in draft)
    if min(a, b) < 0:
        return [params.selection[int(t)] for t in draft]
    low, high = min(a, b), max(a, b)
    take_low = 0 if low < params.cut <= high else water_levels.pair.yield_probability(params, low, high)
    return [take_low, 1 - take_low] if a == low else [1 - take_low, take_low]


@settings(max_examples=40, deadline=None)
@given(exact_instances(max_vocab=7).map(lambda i: i[:2]))
def test_two_drafts_from_sets_are_the_pair_rule(pair):
    """At ``k = 2`` the set masses give the pair masses' levels exactly (those masses are the
    closed form of the same sums), and the rule selects as the pair rule did."""
    p, q = pair
    from_sets = water_levels.water_level_parameters(p, q, ratio_order(p, q), water_levels.set_masses.set_masses(2))
    pair_rule = water_levels.pair_parameters(p, q)
    assert from_sets.levels == pair_rule.levels and list(from_sets.selection) == list(pair_rule.selection)
    assert water_levels.wor_parameters(p, q, 2).levels == pair_rule.levels
    for draft in without_replacement_law(q, 2).tuples:
        assert rule.selection_law(pair_rule, draft) == _pair_rule_selection(pair_rule, draft)


@pytest.mark.parametrize("p, q", [
    ([F(1, 2), F(1, 3), F(1, 6)], [F(1, 6), F(1, 3), F(1, 2)]),
    ([F(1, 10), F(2, 5), F(1, 5), F(3, 10)], [F(2, 5), F(1, 10), F(3, 10), F(1, 5)]),
    ([F(1, 4), F(1, 4), F(1, 2), F(0)], [F(1, 2), F(0), F(1, 2), F(0)]),
    ([F(1, 3), F(1, 3), F(1, 3)], [F(1), F(0), F(0)]),  # one token of q > 0: the exhausted support
])
def test_optimal_pair_wor_is_optimal_wor_at_two_drafts(p, q):
    """The old name ``optimal_pair_wor`` resolves to ``optimal_wor``, and at ``k = 2`` the law is
    the pair rule's exactly: the same coupling of draft tuples and outputs, built from the pair
    rule's selection."""
    assert rule_spec("optimal_pair_wor") is rule_spec("optimal_wor")
    p, q = np.array(p, dtype=object), np.array(q, dtype=object)
    params = water_levels.pair_parameters(p, q)
    by_pair_rule = enumerate_law(p, without_replacement_law(q, 2), lambda draft: canonical_output_law(
        p, params.selection, draft, _pair_rule_selection(params, draft)))
    law = rule_law("optimal_pair_wor", p, q, 2, method="enumeration")
    assert (law.details["coupling"] == by_pair_rule["coupling"]).all() and list(law.output_distribution) == list(p)
    assert law.acceptance == rule_law("optimal_wor", p, q, 2, method="closed_form").acceptance


#: A float64 set mass against the exact one: the rounding of a sum of up to ``k!`` products of ``k``
#: factors (at most 1.1e-15 seen on 400 random rows of 4-6 tokens).
SET_MASS_ROUNDING = 1e-14


@settings(max_examples=25, deadline=None)
@given(exact_instances())
def test_draft_sets_in_floats_are_the_exact_ones_rounded(instance):
    """The float64 set masses of :func:`draft_sets` against the exact ones, both draft laws."""
    _, q, k = instance
    for law in (without_replacement_law, iid_law):
        exact = water_levels.set_masses.draft_sets(list(q), k, law)
        floats = water_levels.set_masses.draft_sets([float(v) for v in q], k, law)
        assert exact.keys() == floats.keys()
        assert all(isinstance(floats[s], float) and abs(floats[s] - float(exact[s])) <= SET_MASS_ROUNDING for s in exact)


def test_the_same_levels_reach_the_iid_optimum_on_iid_draft_sets():
    """The construction on the sets of ``k`` i.i.d. drafts attains the i.i.d. optimum (the
    evidence of ``python -m research.optimal_wor.wor_water_levels --law iid``; the rule 'optimal' is another
    construction)."""
    rng = np.random.default_rng(5)
    for _ in range(12):
        V, k = int(rng.integers(3, 6)), int(rng.integers(2, 4))
        p, q = (np.array([F(int(v), int(r.sum())) for v in r], dtype=object) for r in rng.integers(1, 10, size=(2, V)))
        params = water_levels.water_level_parameters(p, q, ratio_order(p, q), water_levels.set_masses.set_masses(k, iid_law))
        assert params.acceptance == prefix_scan(p, q, k, "iid").value
        by_ranks = lambda params, draft: rule.member_chances(params.levels, [int(params.rank[t]) for t in draft])  # noqa: E731
        assert selection_of(params, iid_law(q, k), by_ranks) == list(params.selection)  # repeated drafts too


def test_wrong_levels_and_masses_are_caught(monkeypatch):
    """Halved levels: the output is no longer p; levels all 0 (the max-ratio rule): the
    acceptance falls below the optimum; halved set masses: the levels no longer carry the
    flux, so the selection law is no longer x."""
    p = np.array([F(1, 10), F(1, 5), F(3, 10), F(1, 4), F(3, 20)], dtype=object)
    q = np.array([F(3, 10), F(1, 4), F(1, 5), F(1, 10), F(3, 20)], dtype=object)
    k = 3
    params = water_levels.wor_parameters(p, q, k)
    assert max(params.levels) > 0
    law = without_replacement_law(q, k)

    def output(parameters):
        return enumerate_law(p, law, lambda draft: rule.conditional_output_law(parameters, draft))["output"]

    assert list(output(params)) == list(p)
    assert list(output(dataclasses.replace(params, levels=[v / 2 for v in params.levels]))) != list(p)
    none = dataclasses.replace(params, levels=[F(0)] * len(params.levels))
    assert sum(min(a, b) for a, b in zip(p, selection_of(none, law))) < params.acceptance
    across = water_levels.set_masses.SetMasses.across
    monkeypatch.setattr(water_levels.set_masses.SetMasses, "across", lambda self, f, j, t: across(self, f, j, t) / 2)
    broken = water_levels.wor_parameters(p, q, k)
    assert selection_of(broken, law) != list(broken.selection)


def test_member_chances_go_down_from_the_highest_member():
    levels = [F(0), F(1, 2), F(3, 4), F(0), F(1, 3), F(0)]  # cut at 3
    assert rule.member_chances(levels, [2, 0, 1]) == [F(1, 4), F(1, 2), F(1, 4)]  # M = 1, 3/4, 1/2
    assert rule.member_chances(levels, [4, 2, 3]) == [F(2, 3), F(0), F(1, 3)]  # level 0 at the cut: H never selected
    assert sum(rule.member_chances(levels, [0, 4])) == 1


@pytest.mark.parametrize("p, q, k, expected", [
    ([0.25, 0.25, 0.25, 0.25], [0.25, 0.25, 0.25, 0.25], 3, 1.0),  # p = q
    ([0.0, 1.0, 0.0, 0.0], [0.4, 0.3, 0.2, 0.1], 3,  # one-hot p: 1 - P(the drafts are {0, 2, 3}), six orders
     1 - (.4 * .2 / .6 * .1 / .4 + .4 * .1 / .6 * .2 / .5 + .2 * .4 / .8 * .1 / .4 + .2 * .1 / .8 * .4 / .7
          + .1 * .4 / .9 * .2 / .5 + .1 * .2 / .9 * .4 / .7)),
    ([0.5, 0.5, 0.0, 0.0, 0.0], [0.0, 0.0, 0.2, 0.3, 0.5], 3, 0.0),  # disjoint supports
    ([0.2, 0.3, 0.5, 0.0], [0.0, 1.0, 0.0, 0.0], 3, 1.0),  # one-hot q: drafts 1, 0, 2 always
    ([0.1, 0.2, 0.3, 0.4], [0.5, 0.5, 0.0, 0.0], 3, 0.6),  # q on two tokens: drafts 0, 1, 2 always
    ([0.1, 0.2, 0.3, 0.4], [0.2, 0.3, 0.5, 0.0], 3, 0.6),  # q on exactly k tokens: that set always
])
def test_degenerate_inputs(p, q, k, expected):
    law = rule.exact_law(p, q, k, method="enumeration")
    assert abs(law.acceptance - expected) <= AGREEMENT_TOLERANCE
    assert np.allclose(law.output_distribution, p, atol=AGREEMENT_TOLERANCE, rtol=0)
    assert abs(law.acceptance - solve_max_flow(np.asarray(p), without_replacement_law(q, k)).acceptance) <= AGREEMENT_TOLERANCE


def test_float_inputs_are_built_in_certified_float64():
    """Float rows take the float64 construction, whose levels agree with the exact construction
    from the same floats and realise ``x`` within the certificate's tolerance."""
    rng = np.random.default_rng(1)
    for _ in range(10):
        V = int(rng.integers(5, 9))
        p, q = rng.dirichlet(np.ones(V) * 0.3), rng.dirichlet(np.ones(V) * 0.3)
        q = np.maximum(q, 1e-9)
        q /= q.sum()
        k = int(rng.integers(3, 5))
        params = water_levels.wor_parameters(p, q, k)
        assert params.arithmetic == "float64"
        assert water_levels.parameters.realised_error(params, q, k) <= water_levels.CERTIFICATE_TOLERANCE
        exact = water_levels.wor_parameters(as_fractions(p), as_fractions(q), k)
        assert np.allclose([float(v) for v in exact.levels], params.levels, atol=1e-9, rtol=0)
        assert abs(params.acceptance - prefix_scan(p, q, k, "without_replacement").value) <= AGREEMENT_TOLERANCE


def test_the_certificate_catches_wrong_float_levels_and_falls_back_to_rationals(monkeypatch):
    p = np.array([0.1, 0.2, 0.3, 0.25, 0.15])
    q = np.array([0.3, 0.25, 0.2, 0.1, 0.15])
    params = water_levels.wor_parameters(p, q, 3)
    assert max(params.levels) > 0 and water_levels.parameters.realised_error(params, q, 3) <= water_levels.CERTIFICATE_TOLERANCE
    halved = dataclasses.replace(params, levels=[v / 2 for v in params.levels])
    assert water_levels.parameters.realised_error(halved, q, 3) > 1e-3
    monkeypatch.setattr(water_levels.parameters, "realised_error", lambda params, q, k: 1.0)  # as if float64 had failed
    redone = water_levels.wor_parameters(p, q, 3)
    assert redone.arithmetic == "exact rationals from the float inputs (float64 levels did not realise x)"
    assert np.allclose(redone.levels, params.levels, atol=1e-12, rtol=0)


def test_past_the_rational_limit_the_fallback_is_wide_floats_certified_again(monkeypatch):
    """Above MAX_RULE_ENUMERATION draft tuples a failed certificate redoes the construction in
    256-bit floats on the float64 set masses and certifies it again; a second failure is a
    typed refusal, not a silently wrong rule."""
    p = np.array([0.1, 0.2, 0.3, 0.25, 0.15])
    q = np.array([0.3, 0.25, 0.2, 0.1, 0.15])
    monkeypatch.setattr(water_levels.parameters, "MAX_RULE_ENUMERATION", 10)  # 60 tuples count as many
    real = water_levels.parameters.realised_error
    calls = []

    def first_fails(params, q, k):
        calls.append(params.arithmetic)
        return 1.0 if len(calls) == 1 else real(params, q, k)

    monkeypatch.setattr(water_levels.parameters, "realised_error", first_fails)
    redone = water_levels.wor_parameters(p, q, 3)
    assert redone.arithmetic == "256-bit floats (float64 levels did not realise x)"
    assert calls == ["float64", redone.arithmetic] and real(redone, q, 3) <= water_levels.CERTIFICATE_TOLERANCE
    monkeypatch.setattr(water_levels.parameters, "realised_error", lambda params, q, k: 1.0)
    with pytest.raises(NotApplicableError, match="do not realise x"):
        water_levels.wor_parameters(p, q, 3)


def test_bad_input_is_a_typed_error():
    with pytest.raises(InvalidDraftCountError, match="k >= 2"):
        rule.exact_law([0.5, 0.5], [0.5, 0.5], 1)
    with pytest.raises(InvalidDraftCountError, match="vocabulary of 3"):
        rule.exact_law([0.2, 0.3, 0.5], [0.2, 0.3, 0.5], 4)
    with pytest.raises(InvalidDistributionError):
        rule.exact_law([0.5, float("nan"), 0.5], [0.2, 0.3, 0.5], 3)
    with pytest.raises(NotApplicableError, match="clock integral's tables for 5,000 tokens"):
        rule.exact_law(np.ones(5000) / 5000, np.ones(5000) / 5000, 4)  # beyond enumeration and the clock's tables
    with pytest.raises(NotApplicableError, match="above the limit of 200,000 for exact inputs"):
        rule.exact_law(np.array([F(1, 30)] * 30, dtype=object), np.array([F(1, 30)] * 30, dtype=object), 4)
    with pytest.raises(NotApplicableError, match="one q"):
        rule.exact_law([0.5, 0.5, 0.0], [[0.5, 0.5, 0.0]] * 3, 3)


def test_every_tuple_position_is_a_member():
    """The chances of a tuple sum to 1 and are nonnegative, whatever its order."""
    p = np.array([F(1, 10), F(1, 5), F(3, 10), F(1, 4), F(3, 20)], dtype=object)
    q = np.array([F(3, 10), F(1, 4), F(1, 5), F(1, 10), F(3, 20)], dtype=object)
    params = water_levels.wor_parameters(p, q, 4)
    for draft in itertools.permutations(range(5), 4):
        chances = rule.selection_law(params, draft)
        assert sum(chances) == 1 and min(chances) >= 0


@settings(max_examples=30, deadline=None)
@given(st.integers(5, 7).flatmap(lambda V: st.tuples(
    st.lists(st.sampled_from([0.0, 1e-300, 1e-12, 0.25, 1.0, 3.0]), min_size=V, max_size=V),
    st.lists(st.sampled_from([1e-300, 1e-12, 0.25, 1.0, 1.0, 3.0]), min_size=V, max_size=V),
    st.integers(3, 4))))
def test_awkward_float_rows(case):
    """Ties, ``q`` down to 1e-300, zeros in ``p``: the rule (certified float64, or rationals from
    the floats) attains the prefix scan and its levels are probabilities."""
    p, q, k = np.array(case[0]), np.array(case[1]), case[2]
    assume(p.sum() > 0)
    p, q = p / p.sum(), q / q.sum()
    law = rule.exact_law(p, q, k, method="closed_form")
    assert abs(law.acceptance - prefix_scan(p, q, k, "without_replacement").value) <= AGREEMENT_TOLERANCE
    assert all(0 <= level <= 1 for level in law.details["levels"])


def test_float_rows_with_an_exhausted_support_are_the_exact_ones_rounded():
    """At most ``k`` tokens with ``q > 0`` (frequent under top-p): the float64 parameters (no
    construction) equal the exact ones from the same floats, rounded, on rows of a large
    vocabulary that is mostly zeros; and the rationals of such a row are exact and sum to 1."""
    rng = np.random.default_rng(4)
    V = 2_000
    for n in (1, 2, 3):
        p, q = np.zeros(V), np.zeros(V)
        p[rng.choice(V, size=40, replace=False)] = rng.random(40)
        q[rng.choice(V, size=n, replace=False)] = rng.random(n)
        p, q = p / p.sum(), q / q.sum()
        params = water_levels.wor_parameters(p, q, 3)
        assert params.arithmetic == "float64" and len(params.order) == n
        exact_p, exact_q = as_fractions(p), as_fractions(q)
        total = sum(F(float(v)) for v in p)
        assert sum(exact_p) == 1 and all(exact_p[i] == F(float(p[i])) / total for i in range(V))
        exact = water_levels.wor_parameters(exact_p, exact_q, 3)
        assert np.max(np.abs(params.selection - np.array([float(v) for v in exact.selection]))) <= 4e-16
        assert abs(params.acceptance - float(exact.acceptance)) <= 4e-16
        assert list(params.order) == list(exact.order)
