"""The rule registry (otm.rules): names, dispatch, typed errors, doctests.

Run: .venv/bin/pytest tests/otm/test_rules_registry.py -q
"""
from __future__ import annotations

import doctest
import importlib
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
from otm.rules import RULES, rule_acceptance, rule_law, rule_output_distribution
from tests.otm.rules_support import exact, same_distribution

OUR_MODULES = (
    "enumeration", "single", "rrs", "specinfer", "rrs_without_replacement", "kseq", "spechub", "greedy", "ensemble",
)


def test_rule_names():
    assert RULES == (
        "single", "rrs", "rrs_wor", "specinfer", "kseq", "spechub", "is_optimal", "is_truncated", "greedy",
        "ensemble_weighted", "ensemble_contrastive",
    )


def test_unknown_rule_lists_the_names():
    with pytest.raises(UnknownNameError, match="unknown rule 'rrsw'; choose one of single, rrs, rrs_wor"):
        rule_law("rrsw", [1.0], [1.0], 1)


def test_missing_module_is_not_applicable(monkeypatch):
    monkeypatch.setitem(rules._REGISTRY, "is_optimal", ("no_such_module_here", "exact_law"))
    with pytest.raises(NotApplicableError, match="otm.rules.no_such_module_here is missing"):
        rule_law("is_optimal", [1.0], [1.0], 1)


def test_acceptance_and_output_shortcuts():
    p, q = exact(1, 4, 2, 3), exact(3, 1, 1, 5)
    for rule in ("single", "rrs", "kseq", "spechub", "greedy", "rrs_wor", "specinfer"):
        k = 2 if rule != "single" else 1
        law = rule_law(rule, p, q, k)
        assert rule_acceptance(rule, p, q, k) == law.acceptance
        assert isinstance(law.acceptance, Fraction)
        assert same_distribution(rule_output_distribution(rule, p, q, k), p)
        assert law.draft_law is not None and law.draft_law.k == k


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
    with pytest.raises(TypeError):
        rule_law("rrs", [0.5, 0.5], [0.5, 0.5], 2, lam=0.5)


def test_degenerate_inputs_never_give_nan():
    for rule in RULES:
        try:
            law = rule_law(rule, [1.0, 0.0], [0.0, 1.0], 2 if rule in ("spechub", "rrs", "kseq", "greedy") else 1)
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
