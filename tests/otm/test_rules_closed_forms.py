"""Closed forms == enumeration, and each rule's own theorem, computed exactly (no Monte Carlo).

Run: .venv/bin/pytest tests/otm/test_rules_closed_forms.py -q
"""
from __future__ import annotations

import importlib.util
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from otm.distributions import total_variation
from otm.draft_laws import greedy_law, hub_law, hub_token
from otm.errors import NotApplicableError
from otm.rules import speculative_ensemble, greedy, kseq, rrs, rrs_wor, rule_law, spechub, specinfer
from otm.rules.enumeration import MAX_RULE_ENUMERATION, validate_pair
from otm.rules.registry import RULE_SPECS
from tests.otm.rules_support import (
    draft_counts,
    draw_exact_pair,
    exact,
    exact_distributions,
    min_cut_optimum,
    same_distribution,
)

#: The rules whose closed form covers every k they are defined for (the registry's).
CLOSED_FORM_RULES = tuple(spec.name for spec in RULE_SPECS.values() if spec.closed_form and spec.closed_form_ks is None)


@pytest.mark.parametrize("rule", CLOSED_FORM_RULES)
@settings(max_examples=30)
@given(data=st.data())
def test_closed_form_equals_enumeration(rule, data):
    p, q = draw_exact_pair(data)
    if rule == "ensemble_contrastive":
        q = exact(*[1 + int(w * 10) for w in q])  # q > 0 everywhere: r is defined
    counts = draft_counts(rule, q)
    assume(counts)  # two distinct drafts need two tokens
    k = data.draw(st.sampled_from(counts), label="k")
    enumerated = rule_law(rule, p, q, k, method="enumeration")
    closed = rule_law(rule, p, q, k, method="closed_form")
    assert enumerated.details["method"] == "enumeration"
    assert closed.details["method"] == "closed_form"
    if rule == "ensemble_contrastive":  # float64 by construction
        assert abs(enumerated.acceptance - closed.acceptance) < 1e-12
        return
    assert enumerated.acceptance == closed.acceptance
    assert enumerated.details["draft_accepted"] == closed.details["draft_accepted"]
    assert same_distribution(enumerated.output_distribution, closed.output_distribution)


@settings(max_examples=40)
@given(data=st.data())
def test_specinfer_with_different_drafts(data):
    V = data.draw(st.integers(1, 5), label="V")
    k = data.draw(st.integers(1, 3), label="k")
    p = data.draw(exact_distributions(V), label="p")
    qs = [data.draw(exact_distributions(V), label=f"q_{i}") for i in range(k)]
    law = specinfer.exact_law(p, qs, k, method="enumeration")
    assert same_distribution(law.output_distribution, p)
    assert law.acceptance == specinfer.exact_law(p, qs, k, method="closed_form").acceptance
    assert law.acceptance <= min_cut_optimum(p, law.draft_law)


def test_specinfer_with_one_q_is_rrs():
    p, q = exact(1, 4, 2, 3), exact(3, 1, 1, 5)
    for k in (1, 2, 3):
        a, b = specinfer.exact_law(p, [q] * k, k), rrs.exact_law(p, q, k)
        assert a.acceptance == b.acceptance
        assert same_distribution(a.details["coupling"].sum(axis=0), b.details["coupling"].sum(axis=0))


def test_rrs_closed_form_matches_design_formula():
    """1 - prod (1 - alpha_i), alpha_i = sum min(p_i, q), by hand for p=(1/2,1/3,1/6),
    q=(1/6,1/6,2/3): alpha_1 = 1/2, p_2 = (2/3,1/3,0), alpha_2 = 1/3, so k=2 gives 2/3."""
    p, q = exact(3, 2, 1), exact(1, 1, 4)
    assert rrs.exact_law(p, q, 2, method="enumeration").acceptance == Fraction(2, 3)


# ------------------------------------------------------------------------ SpecHub


@settings(max_examples=60)
@given(data=st.data())
def test_spechub_reaches_the_per_token_bound(data):
    """Per token: P(Y = x, x in S(X)) = min(p(x), q(x)/(1 - q(a))) for x != a and p(a)
    for the hub (Cor. 1); summed: p(a) + sum_{x != a} min(p(x), q(x)/(1 - q(a)))."""
    p, q = draw_exact_pair(data)
    law = spechub.exact_law(p, q, 2, method="enumeration")
    a = hub_token(q)
    per_token = law.details["accepted_per_token"]
    assert per_token[a] == p[a]  # Cor. 1
    for x in range(q.size):
        if x != a:
            expected = min(p[x], q[x] / (1 - q[a])) if q[x] > 0 else 0
            assert per_token[x] == expected
    assert law.acceptance == spechub.closed_form_acceptance(p, q)
    assert law.acceptance == min_cut_optimum(p, hub_law(q))  # optimal for its own law
    assert law.details["draft_accepted"] == law.acceptance


def test_spechub_seed_example_and_one_hot_q():
    assert spechub.exact_law(exact(1, 6, 3), exact(5, 3, 2)).acceptance == 1  # SpecHub (Sun et al. 2024), Fig. 5
    law = spechub.exact_law(exact(1, 2, 1), exact(0, 1, 0))  # q(a) = 1: no division by zero
    assert law.acceptance == Fraction(1, 2)
    assert same_distribution(law.output_distribution, exact(1, 2, 1))


# ------------------------------------------------------------------------- greedy


def _max_flow_value(p, law):
    """The other engineer's max-flow optimum, when their module exists."""
    if importlib.util.find_spec("otm.formulations.max_flow") is None:
        return None
    from otm.formulations.max_flow import solve_max_flow

    return solve_max_flow(p, law).acceptance


@settings(max_examples=60)
@given(data=st.data())
def test_greedy_is_optimal_for_its_law(data):
    p, q = draw_exact_pair(data)
    k = data.draw(st.integers(1, q.size), label="k")
    law = greedy.exact_law(p, q, k, method="enumeration")
    draft_law = greedy_law(q, k)
    bound = np.minimum(p, draft_law.membership_probs())
    assert same_distribution(law.details["accepted_per_token"], bound)
    assert law.acceptance == min_cut_optimum(p, draft_law)
    flow = _max_flow_value(p.astype(float), greedy_law(q.astype(float), k))
    if flow is not None:
        assert abs(float(flow) - float(law.acceptance)) < 1e-9


# -------------------------------------------------------------------------- k-SEQ


@settings(max_examples=60)
@given(data=st.data())
def test_kseq_division_factor(data):
    """g* in [1, min(k, max p/q)], f(g*) <= 0, and f > 0 just below g* (Lemma 3)."""
    p, q = draw_exact_pair(data)
    k = data.draw(st.integers(1, 4), label="k")
    g = kseq.optimal_division_factor(p, q, k)
    assert 1 <= g <= kseq.upper_bracket(p, q, k)
    assert kseq.gap(p, q, k, g) <= 0
    if g > 1:
        assert kseq.gap(p, q, k, g - Fraction(1, 10**9)) > 0
    law = kseq.exact_law(p, q, k, method="enumeration")
    assert law.details["draft_accepted"] == law.details["lower_bound"]  # SpecTr Thm 2
    assert law.acceptance >= law.details["lower_bound"]


def test_kseq_membership_exceeds_the_bound_above_g_star():
    """Above g* the residual can output a rejected draft token: membership acceptance
    > 1 - (1 - beta)^k, and the rule stays lossless."""
    p, q = validate_pair(exact(6, 3, 1), exact(1, 1, 4))
    k = 3
    g = kseq.optimal_division_factor(p, q, k) + Fraction(1, 2)
    law = kseq.exact_law(p, q, k, g=g, method="enumeration")
    assert same_distribution(law.output_distribution, p)
    assert law.acceptance > law.details["lower_bound"] == law.details["draft_accepted"]
    assert law.acceptance == kseq.exact_law(p, q, k, g=g, method="closed_form").acceptance


def test_kseq_with_one_draft_is_the_single_rule():
    p, q = exact(1, 4, 2, 3), exact(3, 1, 1, 5)
    law = kseq.exact_law(p, q, 1)
    assert law.details["g"] == 1
    assert law.acceptance == rule_law("single", p, q, 1).acceptance


def test_kseq_float_g_star_is_feasible():
    p, q = np.array([0.6, 0.3, 0.1]), np.array([0.1, 0.1, 0.8])
    for k in (2, 3, 4):
        g = kseq.optimal_division_factor(p, q, k)
        assert kseq.gap(p, q, k, g) <= 1e-15
        assert kseq.gap(p, q, k, g * (1 - 1e-9)) > 0


# ------------------------------------------------------------------ RRS w/o replacement


def test_rrs_wor_seed_example():
    """SpecHub (Sun et al. 2024), Fig. 5: p = (0.1, 0.6, 0.3), q = (0.5, 0.3, 0.2): RRSw loses 0.06."""
    law = rrs_wor.exact_law(exact(1, 6, 3), exact(5, 3, 2), 2)
    assert law.acceptance == Fraction(94, 100)
    assert law.acceptance == law.details["draft_accepted"]


def test_rrs_wor_has_no_closed_form_above_two_drafts_and_an_enumeration_limit():
    with pytest.raises(NotApplicableError, match="no closed form"):
        rrs_wor.exact_law(exact(1, 1, 1), exact(1, 1, 1), 3, method="closed_form")
    V = 200
    assert V * (V - 1) * (V - 2) > MAX_RULE_ENUMERATION
    with pytest.raises(NotApplicableError, match="MAX_RULE_ENUMERATION"):
        rrs_wor.exact_law(np.full(V, 1 / V), np.full(V, 1 / V), 3)


def test_rrs_wor_equals_rrs_for_one_draft():
    p, q = exact(1, 4, 2, 3), exact(3, 1, 1, 5)
    assert rrs_wor.exact_law(p, q, 1).acceptance == rrs.exact_law(p, q, 1).acceptance


# ------------------------------------------------------------------------ large V


def test_auto_uses_closed_forms_at_large_vocabularies():
    rng = np.random.default_rng(0)
    V = 50_000
    p, q = rng.dirichlet(np.ones(V)), rng.dirichlet(np.ones(V))
    for rule, k in (("rrs", 4), ("kseq", 4), ("spechub", 2), ("greedy", 4), ("single", 1)):
        law = rule_law(rule, p, q, k)
        assert law.details["method"] == "closed_form"
        assert 0 <= law.acceptance <= 1
    assert rule_law("rrs", p, q, 4).acceptance >= rule_law("single", p, q, 1).acceptance


# ----------------------------------------------------------------------- ensemble


@settings(max_examples=60)
@given(data=st.data())
def test_weighted_ensemble_acceptance(data):
    """Acceptance = 1 - TV(q, r) (eq. (7), normalised TV) and >= lam (Thm 3.2)."""
    p, q = draw_exact_pair(data)
    lam = Fraction(data.draw(st.integers(0, 10), label="lam10"), 10)
    law = speculative_ensemble.exact_law_weighted(p, q, lam=lam)
    r = lam * q + (1 - lam) * p
    assert same_distribution(law.output_distribution, r)
    assert law.acceptance == 1 - sum(abs(q - r)) / 2
    assert law.acceptance >= lam


def test_contrastive_ensemble_acceptance():
    p, q = np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.2, 0.6])
    law = speculative_ensemble.exact_law_contrastive(p, q, mu=0.1)
    r = p * q**-0.1 / (p * q**-0.1).sum()
    assert same_distribution(law.output_distribution, r)
    assert abs(law.acceptance - (1 - total_variation(q, r))) < 1e-12
    assert same_distribution(speculative_ensemble.exact_law_contrastive(p, q, mu=0.0).output_distribution, p)


def test_weighted_ensemble_with_lam_zero_is_the_single_rule():
    p, q = exact(1, 4, 2, 3), exact(3, 1, 1, 5)
    assert speculative_ensemble.exact_law_weighted(p, q, lam=0).acceptance == rule_law("single", p, q, 1).acceptance
