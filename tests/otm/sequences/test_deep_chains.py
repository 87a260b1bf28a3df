"""Chains deeper than Python's recursion limit: every exact law and check of otm.sequences
runs (no recursion, otm.sequences.trampoline). A model over tables needs ``V**depth``
prefixes, so the deep model has one token (``p = q``): every draft is accepted and the
answers are known exactly.

Run: .venv/bin/python -m pytest tests/otm/sequences/test_deep_chains.py -q
"""
from __future__ import annotations

import sys
from fractions import Fraction as F

import pytest

from otm.sequences import (
    any_output_optimum,
    block_expected_accepted,
    block_verification_law,
    check_traversal_lossless,
    check_traversal_on_chain_is_block_verification,
    check_tree_walk_lossless,
    context_independent_model,
    draft_prefix_optimum,
    lossless_gap,
    path_set_law,
    tokenwise_expected_accepted,
    tokenwise_law,
    traversal_law,
    tree_walk_expected_accepted,
    tree_walk_law,
)
from otm.sequences.traversal import traversal_law_by_enumeration

DEPTH = sys.getrecursionlimit() + 100


@pytest.fixture(scope="module")
def model():
    return context_independent_model([F(1)], [F(1)], DEPTH + 1)


@pytest.mark.parametrize("law", [
    lambda m: block_verification_law(m, DEPTH),
    lambda m: tokenwise_law(m, DEPTH),
    lambda m: traversal_law(m, DEPTH, 1),
    lambda m: traversal_law(m, DEPTH, 1, "iid"),
    lambda m: traversal_law_by_enumeration(m, DEPTH, 1),
    lambda m: tree_walk_law(m, DEPTH, 1, "single"),
], ids=["block", "tokenwise", "traversal", "traversal-iid", "traversal-literal", "tree-walk"])
def test_every_law_accepts_the_whole_chain(model, law):
    output = law(model)
    assert output.masses == {(0,) * (DEPTH + 1): 1}
    assert lossless_gap(model, output) == 0


@pytest.mark.parametrize("value", [
    lambda m: block_expected_accepted(m, DEPTH),
    lambda m: tokenwise_expected_accepted(m, DEPTH),
    lambda m: tree_walk_expected_accepted(m, DEPTH, 1, "single"),
    lambda m: draft_prefix_optimum(m, DEPTH),
    lambda m: any_output_optimum(m, DEPTH),
], ids=["block", "tokenwise", "tree-walk", "draft-prefix-optimum", "any-output-optimum"])
def test_expected_lengths_and_optima(model, value):
    assert value(model) == DEPTH


def test_path_set_and_checks(model):
    assert path_set_law(model, DEPTH, 1) == {frozenset((0,) * n for n in range(1, DEPTH + 1)): 1}
    assert check_traversal_lossless(model, DEPTH, 1).holds
    assert check_traversal_on_chain_is_block_verification(model, DEPTH).holds
    assert check_tree_walk_lossless(model, DEPTH, 1, "single").holds
