"""The rule registry (otm.rules): names, dispatch, typed errors, doctests.

Run: .venv/bin/pytest tests/otm/test_rules_registry.py -q
"""
from __future__ import annotations

import doctest
import importlib
import math
from fractions import Fraction

import numpy as np
import pytest

import otm.rules as rules
from otm.errors import (
    InvalidDistributionError,
    InvalidDraftCountError,
    NotApplicableError,
    ShapeMismatchError,
    UnknownNameError,
)
from otm.optimum import optimal_acceptance
from otm.rules import ALIASES, RULE_SPECS, RULES, estimated_seconds, rule_acceptance, rule_law, rule_output_distribution, rule_spec
from otm.draft_laws import DRAFT_SCHEMES
from otm.tolerances import AGREEMENT_TOLERANCE
from tests.otm.rules_support import exact, same_distribution

#: The modules of the rules' exact laws, and the registry's own.
OUR_MODULES = ("enumeration", "registry", *sorted({spec.module for spec in RULE_SPECS.values()}))


def test_rule_names():
    """Every rule is listed once, under its own name; an old name never hides a current one."""
    assert RULES == tuple(RULE_SPECS) == tuple(spec.name for spec in RULE_SPECS.values())
    assert all(name.isidentifier() and name == name.lower() for name in RULES)
    assert not set(ALIASES) & set(RULES)
    assert all(rule_spec(alias).name == name for alias, name in ALIASES.items())


def test_unknown_rule_lists_the_names():
    with pytest.raises(UnknownNameError, match="unknown rule 'rrsw'; choose one of single, rrs, rrs_wor"):
        rule_law("rrsw", [1.0], [1.0], 1)


@pytest.mark.parametrize("spec", list(RULE_SPECS.values()), ids=lambda s: s.name)
def test_every_spec_points_at_an_exact_law(spec):
    module = importlib.import_module(f"otm.rules.{spec.module}")
    assert callable(getattr(module, spec.law_function))
    assert spec.draft_scheme in DRAFT_SCHEMES
    assert spec.reference_optimum is None or spec.reference_optimum in ("iid", "without_replacement", "hub", "greedy")
    assert spec.lossless == (spec.reference_optimum is not None)


@pytest.mark.parametrize("spec", list(RULE_SPECS.values()), ids=lambda s: s.name)
def test_every_spec_states_facts_about_other_specs_consistently(spec):
    """A rule computed as its law's optimum attains it; the report's baselines are rules whose
    optimum is no higher (each is compared on its own draft law)."""
    if spec.computed_as_optimum:
        assert spec.attains_own_optimum and spec.reference_optimum is not None
    for baseline in spec.gain_baselines:
        assert spec.attains_own_optimum and rule_spec(baseline).name == baseline != spec.name
    assert not spec.in_report or spec.lossless


@pytest.mark.parametrize("spec", [s for s in RULE_SPECS.values() if s.computed_as_optimum], ids=lambda s: s.name)
def test_a_rule_computed_as_its_optimum_has_that_acceptance(spec):
    p, q = exact(1, 4, 2, 3, 6), exact(3, 1, 1, 5, 2)
    for k in range(spec.ks[0], (spec.ks[1] or 3) + 1):
        assert rule_acceptance(spec.name, p, q, k) == optimal_acceptance(p, q, k, draft_scheme=spec.reference_optimum)


def test_optimal_wor_answers_by_its_water_levels_beyond_enumeration():
    """The registry gives optimal_wor its closed form at k >= 3: rule_acceptance answers at
    V = 400, k = 3 by the water levels, where enumerating the draft tuples would take half an
    hour (it was refused as having no closed form); at k = 2 it is priced as an enumeration."""
    rng = np.random.default_rng(400)
    p, q = rng.dirichlet(np.ones(400)), rng.dirichlet(np.ones(400))
    spec = rule_spec("optimal_wor")
    assert spec.has_closed_form(3) and not spec.has_closed_form(2)
    assert estimated_seconds(spec, 400, 3) > 0.0 and estimated_seconds(spec, 400, 2) > 0.0
    law = rule_law("optimal_wor", p, q, 3)
    assert law.details["method"] == "closed_form"
    optimum = optimal_acceptance(p, q, 3, draft_scheme="without_replacement")
    assert abs(law.acceptance - optimum) <= AGREEMENT_TOLERANCE


def test_optimal_wor_is_priced_by_its_cost_model():
    """At k >= 3 optimal_wor's closed form is priced by what it computes, not as free: the
    enumerated draft tuples of a small support, the clock integral's tables (up to their limit)
    of a large one; the other closed forms stay free."""
    from otm.rules.water_levels import clock_masses, parameters

    spec = rule_spec("optimal_wor")
    assert estimated_seconds(spec, 20, 3) == parameters.ENUMERATED_SECONDS_PER_DRAFT * 3 * math.perm(20, 3)
    limit = clock_masses.MAX_TABLE_FLOATS // 2
    for vocab in (5_000, 151_936):
        assert estimated_seconds(spec, vocab, 3) == parameters.CLOCK_SECONDS_PER_ENTRY * 3 * limit
    assert estimated_seconds(spec, 5_000, 8) > estimated_seconds(spec, 5_000, 3) > 2.0 > estimated_seconds(spec, 20, 3)
    assert estimated_seconds(spec, 3, 3) == 0.0  # every token drafted: no construction
    assert all(estimated_seconds(s, 5_000, 3) == 0.0 for s in RULE_SPECS.values() if s.has_closed_form(3) and s.cost_model is None)


def test_optimal_wor_refuses_in_milliseconds_past_its_closed_form():
    """Past the clock integral's tables (k = 3 over 5,000 tokens) the closed form refuses, with
    what to do instead, rather than enumerate."""
    rng = np.random.default_rng(0)
    p, q = rng.dirichlet(np.ones(5_000)), rng.dirichlet(np.ones(5_000))
    with pytest.raises(NotApplicableError, match="optimal_latent"):
        rule_acceptance("optimal_wor", p, q, 3)


def test_old_names_resolve_to_the_current_rule():
    assert rule_spec("is_optimal").name == "importance_sampling"
    assert rule_spec("is_truncated").name == "importance_sampling_truncated"
    p, q = [0.6, 0.4], [0.3, 0.7]
    assert rule_acceptance("is_optimal", p, q, 2) == rule_acceptance("importance_sampling", p, q, 2)


@pytest.mark.parametrize("spec", list(RULE_SPECS.values()), ids=lambda s: s.name)
def test_allowed_k_in_the_registry_is_what_the_law_accepts(spec):
    """The registry's ``ks`` is a fact about the rule: the law must refuse a k outside it
    and accept the smallest k inside it."""
    p, q = [0.5, 0.3, 0.2], [0.2, 0.3, 0.5]
    low, high = spec.ks
    rule_law(spec.name, p, q, low)
    if high is not None:
        with pytest.raises(InvalidDraftCountError):
            rule_law(spec.name, p, q, high + 1)
    if low > 1:
        with pytest.raises(InvalidDraftCountError):
            rule_law(spec.name, p, q, low - 1)


@pytest.mark.parametrize("spec", list(RULE_SPECS.values()), ids=lambda s: s.name)
@pytest.mark.parametrize("k", [2.5, 2.0, True, "2", None])
def test_every_rule_refuses_a_k_that_is_not_an_integer(spec, k):
    """A non-integer ``k`` (a float, a bool, a string, nothing) is a typed error, never a TypeError
    from deep inside a law."""
    with pytest.raises(InvalidDraftCountError, match="integer"):
        rule_law(spec.name, [0.5, 0.3, 0.2], [0.2, 0.3, 0.5], k)


@pytest.mark.parametrize("spec", [s for s in RULE_SPECS.values() if s.closed_form], ids=lambda s: s.name)
def test_closed_forms_in_the_registry_exist_and_agree_with_enumeration(spec):
    p, q = exact(1, 4, 2, 3), exact(3, 1, 1, 5)
    for k in range(spec.ks[0], 4 if spec.ks[1] is None else spec.ks[1] + 1):
        if not spec.has_closed_form(k):
            continue
        closed = rule_law(spec.name, p, q, k, method="closed_form")
        enumerated = rule_law(spec.name, p, q, k, method="enumeration")
        assert closed.acceptance == enumerated.acceptance, (spec.name, k)


def test_estimated_cost_skips_lp_rules_at_scale_and_never_overflows():
    assert estimated_seconds(rule_spec("rrs"), 151_936, 8) == 0.0
    assert estimated_seconds(rule_spec("importance_sampling"), 1_000, 3) > 60
    assert estimated_seconds(rule_spec("importance_sampling"), 151_936, 10**6) == float("inf")


def test_unknown_parameter_names_the_accepted_ones():
    with pytest.raises(UnknownNameError, match="accepts"):
        rule_law("rrs", [0.5, 0.5], [0.5, 0.5], 2, lam=0.5)


def test_acceptance_and_output_shortcuts():
    p, q = exact(1, 4, 2, 3), exact(3, 1, 1, 5)
    for rule in ("single", "rrs", "kseq", "spechub", "greedy", "rrs_wor", "specinfer"):
        k = 2 if rule != "single" else 1
        law = rule_law(rule, p, q, k)
        assert rule_acceptance(rule, p, q, k) == law.acceptance
        assert isinstance(law.acceptance, Fraction)
        assert same_distribution(rule_output_distribution(rule, p, q, k), p)
        assert law.draft_law is not None
        assert law.draft_law.k == k


@pytest.mark.parametrize(
    ("rule", "k", "q", "error", "message"),
    [
        ("single", 2, [0.5, 0.5], InvalidDraftCountError, "exactly one draft"),
        ("spechub", 3, [0.5, 0.5], InvalidDraftCountError, "k=2"),
        ("ensemble_weighted", 2, [0.5, 0.5], InvalidDraftCountError, "k=1"),
        ("rrs", 0, [0.5, 0.5], InvalidDraftCountError, "integer >= 1"),
        ("rrs_wor", 3, [0.5, 0.5], InvalidDraftCountError, "without replacement"),
        ("greedy", 3, [0.5, 0.5], InvalidDraftCountError, "greedy drafts"),
        ("rrs", 2, [[0.5, 0.5], [1.0, 0.0]], NotApplicableError, "use rule 'specinfer'"),
        ("kseq", 2, [[0.5, 0.5], [1.0, 0.0]], NotApplicableError, "one q"),
        ("specinfer", 3, [[0.5, 0.5], [1.0, 0.0]], ShapeMismatchError, "2 draft distributions for k=3"),
        ("rrs", 2, [0.2, 0.3, 0.5], ShapeMismatchError, "same vocabulary"),
        ("rrs", 2, [0.7, 0.7], InvalidDistributionError, "sums to"),
        ("kseq", 2, [float("nan"), 1.0], InvalidDistributionError, "NaN"),
    ],
)
def test_bad_inputs_raise_typed_errors(rule, k, q, error, message):
    with pytest.raises(error, match=message):
        rule_law(rule, [0.5, 0.5], q, k)


def test_bad_parameters():
    with pytest.raises(UnknownNameError, match="unknown method 'lp'"):
        rule_law("rrs", [0.5, 0.5], [0.5, 0.5], 2, method="lp")
    with pytest.raises(InvalidDistributionError, match="lam must lie in"):
        rule_law("ensemble_weighted", [0.5, 0.5], [0.5, 0.5], 1, lam=1.5)
    with pytest.raises(NotApplicableError, match="g >= g\\*"):
        rule_law("kseq", [0.9, 0.1], [0.1, 0.9], 2, g=1.0)


def test_degenerate_inputs_never_give_nan():
    for rule in RULES:
        try:
            law = rule_law(rule, [1.0, 0.0], [0.0, 1.0], 2 if rule in ("rrs", "kseq", "greedy") or rule_spec(rule).ks[0] == 2 else 1)
        except NotApplicableError as exc:  # contrastive: undefined where q = 0 < p
            assert rule == "ensemble_contrastive", exc
            continue
        assert np.isfinite(float(law.acceptance))
        assert np.all(np.isfinite(np.asarray(law.output_distribution, dtype=float)))


@pytest.mark.parametrize("module", OUR_MODULES)
def test_doctests(module):
    result = doctest.testmod(importlib.import_module(f"otm.rules.{module}"), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_registry_doctest():
    assert doctest.testmod(rules).failed == 0
