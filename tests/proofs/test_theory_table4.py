"""The toolkit's own results (proofs.theory), and the Table 4 reproduction's plumbing (2 pairs)."""
from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np

import otm

from otm.rules import water_levels
from proofs import table4, theory
from tests.proofs.proofs_support import rule_swapped

N = 5


def rng():
    return np.random.default_rng(5)


def test_min_cut():
    assert theory.check_min_cut(N, rng()).status == "holds"
    whole_set_only = lambda p, law: 1.0  # noqa: E731
    assert theory.check_min_cut(N, rng(), cut_fn=whole_set_only).status == "fails"


def test_prefix():
    assert theory.check_prefix(2 * N, rng()).status == "holds"

    def descending(p, q):
        for mask in theory.ratio_prefixes(p, q):
            yield ~mask

    assert theory.check_prefix(2 * N, rng(), prefixes_fn=descending).status == "fails"


def test_spechub_greedy():
    assert theory.check_spechub_greedy(N, rng()).status == "holds"
    assert theory.check_spechub_greedy(N, rng(), acceptance_fn=rule_swapped({"greedy": ("rrs", 2)})).status == "fails"


def test_no_rule_beats_optimum():
    assert theory.check_no_rule_beats_optimum(2, rng()).status == "holds"
    lowered = lambda p, law: theory.lp_optimum_for_law(p, law) - 0.05  # noqa: E731
    assert theory.check_no_rule_beats_optimum(2, rng(), optimum_for_law=lowered).status == "fails"


def test_optimal_verifier_holds_and_each_part_fails_on_a_broken_ingredient():
    assert theory.check_optimal_verifier(N, rng()).status == "holds"

    def rrs_instead(rule, p, q, k):  # lossless but not optimal
        return otm.rule_law("rrs" if rule == "optimal" else "rrs_wor", p, q, k)

    def draft_as_output(rule, p, q, k):  # optimal acceptance, but outputs q
        return dataclasses.replace(otm.rule_law(rule, p, q, k), output_distribution=np.asarray(q))

    def wor_optimum_lowered(p, q, k, draft_scheme):  # the latent verifier then "beats" it
        value = otm.optimal_acceptance(p, q, k, draft_scheme=draft_scheme)
        return value - Fraction(1, 10) if draft_scheme == "without_replacement" else value

    for broken in ({"law_fn": rrs_instead}, {"law_fn": draft_as_output}, {"optimum_fn": wor_optimum_lowered}):
        check = theory.check_optimal_verifier(N, rng(), **broken)
        assert check.status == "fails", broken


def test_table4_structure_and_paper_numbers():
    result = table4.reproduce_table4(pairs=2, seed=0)
    assert len(result["cells"]) == 6
    cell = result["cells"][0]
    assert set(cell["methods"]) == set(table4.METHODS)
    assert cell["methods"]["SpecHub"]["paper"] == 0.7402
    for c in result["cells"]:  # optimum >= RRS for the same draft law
        m = c["methods"]
        assert m["OTM"]["mean"] >= m["RRS"]["mean"] - 1e-12
        assert m["OTMw"]["mean"] >= m["RRSw"]["mean"] - 1e-12
    assert "SpecHub" in table4.table4_text(result)


def test_rrsw_monte_carlo_agrees_with_the_exact_law():
    u = table4.draw_logits(np.random.default_rng(0))
    p, q = table4.toy_pair(*u, 0.25, 0.5)
    exact = table4.acceptances(p, q)["RRSw"]
    estimate = table4.rrsw_monte_carlo(p, q, np.random.default_rng(1), repetitions=4000)
    assert abs(estimate - exact) < 4 * np.sqrt(exact * (1 - exact) / 4000)


def test_max_flow_certificate_counts_a_crash_as_a_failure():
    def crashing(p, law):
        raise KeyError("source")

    check = theory.check_max_flow_certificate(2, rng(), flow=crashing)
    assert check.status == "fails"
    assert "KeyError" in check.counterexample["error"]


def test_spechub_greedy_one_hot_q_is_the_degenerate_case():
    from otm.rules import rule_acceptance

    p, q = np.array([0.5, 0.5]), np.array([1.0, 0.0])
    assert float(rule_acceptance("spechub", p, q, 2)) == 0.5
    assert float(rule_acceptance("greedy", p, q, 2)) == 1.0


def test_table4_readings():
    rng_ = np.random.default_rng(0)
    u_p, u_q = table4.draw_logits(rng_, "gaussian_logits")
    assert u_p.shape == (table4.VOCAB_SIZE,)
    assert (u_p < 0).any()  # normal, not uniform on (0, 1)
    for reading in ("stated", "gaussian_logits", "probability_mix", "temperature_times"):
        p, q = table4.toy_pair(u_p, u_q, 0.25, 0.5, reading)
        assert abs(p.sum() - 1) < 1e-12
        assert abs(q.sum() - 1) < 1e-12
    import pytest

    with pytest.raises(ValueError):
        table4.toy_pair(u_p, u_q, 0.25, 0.5, "nope")


def test_optimal_pair_wor_holds_and_each_part_fails_on_a_broken_ingredient():
    assert theory.check_optimal_pair_wor(N, rng()).status == "holds"

    def latent_instead(rule, p, q, k, **params):  # lossless, only the i.i.d. optimum, no levels
        return otm.rule_law("optimal_latent", p, q, k)

    def draft_as_output(rule, p, q, k, **params):  # optimal acceptance, but outputs q
        return dataclasses.replace(otm.rule_law(rule, p, q, k, **params), output_distribution=np.asarray(q))

    def levels_above_one(rule, p, q, k, **params):  # the same law with a level that is no probability
        law = otm.rule_law(rule, p, q, k, **params)
        return dataclasses.replace(law, details={**law.details, "levels": [*law.details["levels"], Fraction(11, 10)]})

    for broken in ({"law_fn": latent_instead}, {"law_fn": draft_as_output}, {"law_fn": levels_above_one}):
        check = theory.check_optimal_pair_wor(N, rng(), **broken)
        assert check.status == "fails", broken


def test_water_levels_at_most_one_holds_and_fails_out_of_the_ratio_order():
    assert theory.check_water_levels_at_most_one(N, rng()).status == "holds"

    def top_two_swapped(p, q):  # the ratio order with its two highest support ranks exchanged
        order = theory.ratio_order(p, q).copy()
        n = sum(1 for v in q if v > 0)
        order[[n - 2, n - 1]] = order[[n - 1, n - 2]]
        return order

    check = theory.check_water_levels_at_most_one(N, rng(), order_fn=top_two_swapped)
    assert check.status == "fails" and "levels in [0, 1]" in check.counterexample["part"]


def test_wor_walk_bounds_hold_and_each_part_fails_on_a_broken_ingredient():
    from otm.rules.water_levels import bounds

    assert theory.check_wor_walk_bounds(N, rng()).status == "holds"

    def doubled_lower(flux, masses, run, low, high):  # twice Lemma 9 (i)'s bound: above M somewhere
        return 2 * bounds.span_lower_bound(flux, masses, run, low, high)

    def always_at_most(flux, masses, run, low, high, u):  # "M <= u" claimed for every u
        return True

    for broken in ({"lower_fn": doubled_lower}, {"at_most_fn": always_at_most}):
        check = theory.check_wor_walk_bounds(N, rng(), **broken)
        assert check.status == "fails", broken


def test_pair_wor_yield_bounds_hold_and_each_part_fails_on_a_broken_ingredient():
    assert theory.check_pair_wor_yield_bounds(N, rng()).status == "holds"

    def doubled_lower(params, q, low, high):  # twice Lemma 9 (i)'s bound: above Y somewhere
        return 2 * water_levels.pair.yield_lower_bound(params, q, low, high)

    def always_at_most(params, q, low, high, u):  # "Y <= u" claimed for every u
        return True

    for broken in ({"lower_fn": doubled_lower}, {"at_most_fn": always_at_most}):
        check = theory.check_pair_wor_yield_bounds(N, rng(), **broken)
        assert check.status == "fails", broken
