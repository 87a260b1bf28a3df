"""Every rule's exact law: output law == p (== r for the ensembles), no rule beats the
optimum for its own draft law, the per-token bound holds; and the checks catch broken rules.

Run: .venv/bin/pytest tests/otm/test_rules_lossless.py -q
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from otm.draft_laws import greedy_order, iid_law, without_replacement_law
from otm.errors import NotApplicableError
from otm.rules import ENSEMBLE_RULES, RULE_SPECS, RULES, rule_function, rule_law
from otm.rules import kseq, rrs_wor, specinfer
from otm.rules.enumeration import (
    accept_probability,
    enumerate_law,
    normalise,
    positive_part,
    residual,
    sequential_kernel,
    validate_pair,
)
from tests.otm.rules_support import (
    EDGE_CASES,
    draft_counts,
    draw_exact_pair,
    exact,
    min_cut_optimum,
    same_distribution,
    within_optimum,
)

#: Rules computed by LP (another module): float inputs, since their default backend is float.
LP_RULES = tuple(spec.name for spec in RULE_SPECS.values() if spec.seconds_per_lp_tuple)


def require(rule: str) -> None:
    """Skip a rule whose module is not there yet (the two importance-sampling rules)."""
    try:
        rule_function(rule)
    except NotApplicableError as exc:
        pytest.skip(f"{rule}: {exc}")


def expected_output(rule: str, p, q):
    """The law the rule must output, computed here independently of otm.rules."""
    if rule == "ensemble_weighted":
        return Fraction(1, 2) * q + Fraction(1, 2) * p  # default lam = 1/2
    if rule == "ensemble_contrastive":
        pf, qf = p.astype(float), q.astype(float)
        weights = np.where(pf > 0, pf * np.where(qf > 0, qf, 1.0) ** -0.1, 0.0)  # default mu = 0.1
        return weights / weights.sum()
    return p


def inputs_for(rule: str, p, q):
    return (p.astype(float), q.astype(float)) if rule in LP_RULES else (p, q)


def check_rule(rule: str, p, q, k: int) -> None:
    """The three exactness checks on one instance."""
    p_in, q_in = inputs_for(rule, p, q)
    if rule == "ensemble_contrastive" and any(qq == 0 < pp for pp, qq in zip(p, q)):
        with pytest.raises(NotApplicableError, match="undefined where q = 0"):
            rule_law(rule, p_in, q_in, k)
        return
    law = rule_law(rule, p_in, q_in, k)
    target = expected_output(rule, p, q)
    # (1) the output law
    assert same_distribution(law.output_distribution, target), (rule, k, law.output_distribution, target)
    # (2) no rule beats the optimum for its own draft law
    assert within_optimum(law.acceptance, min_cut_optimum(target, law.draft_law)), (rule, k)
    # membership >= "a draft was accepted"; per-token bound min(target(y), P(y in S(X)))
    if "draft_accepted" in law.details:  # every rule of ours; the LP rules may not report it
        assert within_optimum(law.details["draft_accepted"], law.acceptance)
    if "accepted_per_token" in law.details:
        bound = np.minimum(target, law.draft_law.membership_probs())
        for got, most in zip(law.details["accepted_per_token"], bound):
            assert within_optimum(got, most)
        coupling = law.details["coupling"]
        assert same_distribution(coupling.sum(axis=1), law.draft_law.probs)


@pytest.mark.parametrize("rule", RULES)
@settings(max_examples=25)
@given(data=st.data())
def test_random_instances(rule, data):
    require(rule)
    p, q = draw_exact_pair(data)
    counts = draft_counts(rule, q)
    assume(counts)  # two drafts without replacement need two tokens
    k = data.draw(st.sampled_from(counts), label="k")
    check_rule(rule, p, q, k)


@pytest.mark.parametrize("case", sorted(EDGE_CASES))
@pytest.mark.parametrize("rule", RULES)
def test_edge_cases(rule, case):
    require(rule)
    p, q = EDGE_CASES[case]
    for k in draft_counts(rule, q):
        check_rule(rule, p, q, k)


def test_float_inputs_agree_with_exact_ones():
    p, q = exact(1, 4, 2, 3), exact(3, 1, 1, 5)
    for rule in RULES:
        if rule in LP_RULES + ("ensemble_contrastive",):
            continue
        k = draft_counts(rule, q)[-1]
        exact_law, float_law = rule_law(rule, p, q, k), rule_law(rule, p.astype(float), q.astype(float), k)
        assert isinstance(exact_law.acceptance, Fraction)
        assert abs(float(exact_law.acceptance) - float_law.acceptance) < 1e-12
        assert same_distribution(float_law.output_distribution, exact_law.output_distribution.astype(float))


@pytest.mark.parametrize("complement", [3.4e-311, 4.5e-309, 1e-300])
def test_a_dominant_draft_with_a_denormal_complement(complement):
    """A draft token of ``q = 1`` in float64 beside others whose mass is denormal (a logit gap
    of about 710 nats): ``q / (1 - q)`` of that token overflows, which made SpecHub's kernel
    NaN and the water-level pair rule (``optimal_pair_wor``, ``optimal_wor`` at ``k = 2``)
    accept 0.805 where the optimum is 0.919, silently. Every rule's float law must be the law
    in exact rationals of the same floats, within 1e-12."""
    from otm.distributions import as_fractions

    p = np.array([0.2, 0.1, 0.3, 0.1, 0.2, 0.1])
    q = np.array([0.0, 0.06, 1.0, 0.88, 0.06, 0.0]) * complement
    q[2] = 1.0
    for rule in RULES:
        if rule in LP_RULES + ENSEMBLE_RULES:
            continue
        for k in draft_counts(rule, q):
            float_law, exact_law = rule_law(rule, p, q, k), rule_law(rule, as_fractions(p), as_fractions(q), k)
            assert abs(float(exact_law.acceptance) - float(float_law.acceptance)) < 1e-12, (rule, k)
            assert same_distribution(float_law.output_distribution, exact_law.output_distribution.astype(float)), (rule, k)


def test_ensemble_outputs_r_not_p():
    p, q = exact(2, 1, 1), exact(1, 2, 5)
    for rule in ENSEMBLE_RULES:
        law = rule_law(rule, p, q, 1)
        assert not same_distribution(np.asarray(law.output_distribution, dtype=float), p.astype(float))


# ---------------------------------------------------------------- the checks can fail


def _rrs_without_renormalisation(p, q, k):
    """RRS whose residual is max(p_i - q, 0) without norm(): not lossless."""

    def step(current, i, x):
        return accept_probability(current[x], q[x]), positive_part(current - q)

    law = iid_law(q, k)
    return enumerate_law(p, law, sequential_kernel(p, p, step, lambda current: current / current.sum()))


def test_broken_rrs_residual_is_caught():
    p, q = validate_pair(exact(1, 4, 2, 3), exact(3, 1, 1, 5))
    broken = _rrs_without_renormalisation(p, q, 3)
    assert not same_distribution(broken["output"], p)
    assert same_distribution(specinfer.exact_law(p, q, 3).output_distribution, p)


def test_kseq_below_g_star_is_caught():
    p, q = validate_pair(exact(6, 3, 1), exact(1, 1, 4))
    k = 3
    g_star = kseq.optimal_division_factor(p, q, k)
    assert g_star > 1
    g = Fraction(1)
    raw = kseq.residual_distribution(p, q, k, g)
    assert min(raw) < 0  # eq. (5) is not a distribution below g*
    clipped = positive_part(raw)
    clipped = clipped / clipped.sum()
    broken = enumerate_law(p, iid_law(q, k), kseq.kernel(p, q, k, g, clipped))
    assert not same_distribution(broken["output"], p)
    with pytest.raises(NotApplicableError, match="g >= g\\*"):
        kseq.exact_law(p, q, k, g=g)


def test_min_cut_check_catches_an_impossible_acceptance():
    """The per-token bound sum min(p, P(y in S)) is not reachable for i.i.d. drafts here:
    the optimum check rejects it (so check (2) can fail)."""
    p, q = exact(1, 6, 3), exact(5, 3, 2)
    law = iid_law(q, 2)
    per_token = np.minimum(p, law.membership_probs()).sum()
    assert not within_optimum(per_token, min_cut_optimum(p, law))
    assert within_optimum(rule_law("rrs", p, q, 2).acceptance, min_cut_optimum(p, law))


def test_same_distribution_sees_one_ulp_of_exact_difference():
    p = exact(1, 2, 3)
    nudged = p.copy()
    nudged[0] += Fraction(1, 10**30)
    nudged[1] -= Fraction(1, 10**30)
    assert not same_distribution(nudged, p)


# ------------------------------------------ rrs_wor with k above the support of q

#: ``(p, q, k)`` with fewer than ``k`` tokens of positive ``q``: one-hot q, support 1 or
#: 2 < k, p = q, disjoint supports.
EXHAUSTED = {
    "one_hot_q": (exact(1, 2, 1), exact(0, 0, 1), 2),
    "one_hot_q_k3": (exact(1, 2, 1), exact(0, 0, 1), 3),
    "temperature_zero": (exact(0, 1, 0, 0), exact(0, 0, 0, 1), 3),
    "support_two": (exact(3, 1, 2, 0, 4), exact(0, 1, 0, 2, 0), 4),
    "p_equals_q_support_two": (exact(0, 1, 0, 2, 0), exact(0, 1, 0, 2, 0), 3),
    "disjoint_supports": (exact(2, 1, 0, 0, 1), exact(0, 0, 1, 3, 0), 4),
}


@pytest.mark.parametrize("case", sorted(EXHAUSTED))
def test_rrs_wor_exhausted_support_is_lossless_and_optimal(case):
    """Output law == p exactly; every tuple holds S = supp(q) + the greedy tail, so the
    acceptance is p(S), the optimum of the law, and every accepted output is a draft."""
    p, q, k = EXHAUSTED[case]
    law = rule_law("rrs_wor", p, q, k)
    assert same_distribution(law.output_distribution, p)
    drafted = set(greedy_order(q)[:k].tolist())
    assert {frozenset(t) for t in law.draft_law.tuples.tolist()} == {frozenset(drafted)}
    p_drafted = sum(p[list(drafted)])
    assert law.acceptance == p_drafted == min_cut_optimum(p, law.draft_law)
    assert law.details["draft_accepted"] == p_drafted


def _rrs_wor_accepting_fixed_drafts_surely(p, q, k):
    """RRSw whose deterministic drafts (support exhausted) are accepted with probability
    1 whenever p_res(x) > 0 (the naive ``u * 0 < p_res(x)``): not lossless."""

    def step(state, i, x):
        target, not_drawn = state
        without_x = not_drawn.copy()
        without_x[x] = 0
        if not_drawn.sum() == 0:
            accept = Fraction(1) if target[x] > 0 else Fraction(0)
            return accept, (target, not_drawn)
        return accept_probability(target[x], not_drawn[x]), (residual(target, not_drawn), normalise(without_x))

    return enumerate_law(p, without_replacement_law(q, k), sequential_kernel(p, (p, q), step, lambda state: state[0]))


@pytest.mark.parametrize("case", ["one_hot_q", "support_two", "disjoint_supports"])
def test_rrs_wor_accepting_fixed_drafts_surely_is_caught(case):
    p, q, k = EXHAUSTED[case]
    broken = _rrs_wor_accepting_fixed_drafts_surely(p, q, k)
    assert not same_distribution(broken["output"], p)
    correct = enumerate_law(p, without_replacement_law(q, k), rrs_wor.kernel(p, q))
    assert same_distribution(correct["output"], p)
