"""Node-by-node tree walks with registry rules: the dynamic programme against the exact law,
losslessness, the chain special case, depth one, typed refusals.

Run: .venv/bin/python -m pytest tests/otm/sequences/test_tree_rules.py -q
"""
from __future__ import annotations

import pytest
from hypothesis import given, settings

from otm.errors import NotApplicableError, UnknownNameError
from otm.rules import rule_law
from otm.sequences import (
    lossless_gap,
    optimal_node_rule,
    tokenwise_law,
    tree_walk_expected_accepted,
    tree_walk_law,
)
from otm.tolerances import AGREEMENT_TOLERANCE

from .support import degenerate_models, exact_model, exact_models

#: Lossless rules with enumerated laws at k = 2 (their node laws give accepted_per_token).
RULES = ("rrs", "rrs_wor", "kseq", "spechub", "greedy")


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("vocab_size, depth", [(2, 2), (3, 2), (2, 3)])
def test_walk_is_lossless_and_the_dp_matches_the_law(rule, vocab_size, depth):
    m = exact_model(vocab_size, depth + 1, seed=depth, concentration=2.0)
    law = tree_walk_law(m, depth, 2, rule)
    assert law.total() == 1
    assert lossless_gap(m, law, depth + 1) == 0
    assert law.expected_accepted() == tree_walk_expected_accepted(m, depth, 2, rule)


@settings(max_examples=20)
@given(exact_models(lengths=(2,)))
def test_random_instances(instance):
    m, depth = instance
    for rule in ("rrs", "rrs_wor"):
        law = tree_walk_law(m, depth, 2, rule)
        assert lossless_gap(m, law, depth + 1) == 0
        assert law.expected_accepted() == tree_walk_expected_accepted(m, depth, 2, rule)


@settings(max_examples=20)
@given(exact_models())
def test_single_draft_walk_is_tokenwise_verification(instance):
    m, g = instance
    assert tree_walk_law(m, g, 1, "single").masses == tokenwise_law(m, g).masses


@pytest.mark.parametrize("rule", RULES)
def test_depth_one_is_the_rule_itself(rule):
    m = exact_model(3, 2, seed=4)
    law = rule_law(rule, m.target(()), m.draft(()), 2)
    assert tree_walk_expected_accepted(m, 1, 2, rule) == law.acceptance


@pytest.mark.parametrize("draft", ["iid", "without_replacement"])
def test_optimal_node_rule_walk(draft):
    m = exact_model(3, 3, seed=8, concentration=1.0)
    rule = optimal_node_rule(draft)
    law = tree_walk_law(m, 2, 2, rule)
    assert lossless_gap(m, law, 3) == 0
    node_rule = "rrs" if draft == "iid" else "rrs_wor"
    assert law.expected_accepted() >= tree_walk_expected_accepted(m, 2, 2, node_rule)


@pytest.mark.parametrize("name", sorted(degenerate_models()))
def test_degenerate_instances(name):
    m = degenerate_models()[name]
    for rule in ("rrs", "rrs_wor"):
        assert lossless_gap(m, tree_walk_law(m, 2, 2, rule), 3) == 0


def test_float_path_agrees_with_the_exact_one():
    m = exact_model(3, 3, seed=2, concentration=2.0)
    exact = tree_walk_expected_accepted(m, 2, 2, "rrs_wor")
    floating = tree_walk_law(m.as_float(), 2, 2, "rrs_wor")
    assert abs(float(exact) - floating.expected_accepted()) < AGREEMENT_TOLERANCE
    assert lossless_gap(m.as_float(), floating, 3) < AGREEMENT_TOLERANCE


def test_refusals():
    m = exact_model(2, 3, seed=0)
    with pytest.raises(NotApplicableError, match="accepted_per_token"):
        tree_walk_law(m.as_float(), 2, 2, "importance_sampling")
    with pytest.raises(UnknownNameError):
        tree_walk_law(m, 2, 2, "no_such_rule")
