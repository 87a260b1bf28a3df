"""The tree-level optimum: the chain case is block verification, depth one is the node OTM
optimum, the optimal kernel's output law is lossless, every node-wise walk and traversal
verification stay below it, exact simplex and certified HiGHS agree.

Run: .venv/bin/python -m pytest tests/otm/sequences/test_tree_lp.py -q
"""
from __future__ import annotations

import pytest

from otm.optimum import optimal_acceptance
from otm.sequences import (
    block_expected_accepted,
    lossless_gap,
    optimal_node_rule,
    path_set_law,
    solve_tree_optimum,
    traversal_law,
    tree_walk_expected_accepted,
)
from otm.sequences.tree_lp import optimum_output_law
from otm.tolerances import AGREEMENT_TOLERANCE

from .support import degenerate_models, exact_model, paper_model


@pytest.mark.parametrize("vocab_size, depth", [(2, 2), (3, 2), (2, 3)])
def test_chain_optimum_is_block_verification(vocab_size, depth):
    m = exact_model(vocab_size, depth + 1, seed=1, concentration=2.0)
    result = solve_tree_optimum(m, depth, 1, backend="exact")
    assert result.value == block_expected_accepted(m, depth)


@pytest.mark.parametrize("draft", ["iid", "without_replacement"])
@pytest.mark.parametrize("seed", range(3))
def test_depth_one_is_the_node_optimum(draft, seed):
    m = exact_model(3, 2, seed, concentration=1.0)
    result = solve_tree_optimum(m, 1, 2, draft, backend="exact")
    assert result.value == optimal_acceptance(m.target(()), m.draft(()), 2, draft)


@pytest.mark.parametrize("draft, vocab_size", [("iid", 2), ("without_replacement", 3)])
@pytest.mark.parametrize("seed", range(2))
def test_exact_simplex_and_certified_highs_agree_and_the_optimal_law_is_lossless(draft, vocab_size, seed):
    m = exact_model(vocab_size, 3, seed, concentration=1.0)
    exact = solve_tree_optimum(m, 2, 2, draft, backend="exact")
    certified = solve_tree_optimum(m, 2, 2, draft)
    assert exact.exact and certified.exact and exact.value == certified.value
    law = optimum_output_law(m, 2, 2, draft, exact)
    assert lossless_gap(m, law, 3) == 0 and law.expected_accepted() == exact.value


@pytest.mark.parametrize("draft, rules", [("without_replacement", ("rrs_wor",)), ("iid", ("rrs", "kseq"))])
@pytest.mark.parametrize("seed", range(3))
def test_walks_and_traversal_stay_within_the_optimum(draft, rules, seed):
    m = exact_model(3, 3, seed, concentration=1.0)
    optimum = solve_tree_optimum(m, 2, 2, draft)
    values = [tree_walk_expected_accepted(m, 2, 2, rule) for rule in rules]
    values.append(tree_walk_expected_accepted(m, 2, 2, optimal_node_rule(draft)))
    values.append(traversal_law(m, 2, 2, draft).expected_accepted())
    slack = -AGREEMENT_TOLERANCE if not optimum.exact else 0
    assert all(optimum.value - v >= slack for v in values)


def test_a_full_vocabulary_without_replacement_accepts_everything():
    m = exact_model(2, 3, seed=5)
    assert path_set_law(m, 2, 2) == {frozenset({(0,), (1,), (0, 0), (0, 1), (1, 0), (1, 1)}): 1}
    assert solve_tree_optimum(m, 2, 2, backend="exact").value == 2


@pytest.mark.parametrize("name", sorted(degenerate_models()))
def test_degenerate_instances(name):
    m = degenerate_models()[name]
    result = solve_tree_optimum(m, 2, 2, "iid")
    law = optimum_output_law(m, 2, 2, "iid", result)
    assert lossless_gap(m, law, 3) == 0
    if name == "p equals q":
        assert result.value == 2


def test_path_set_law_is_a_law():
    m = exact_model(3, 3, seed=0, concentration=1.0)
    for draft in ("iid", "without_replacement"):
        assert sum(path_set_law(m, 2, 2, draft).values()) == 1


def test_float_model():
    m = exact_model(3, 3, seed=3, concentration=2.0)
    floating = solve_tree_optimum(m.as_float(), 2, 2)
    assert not floating.exact
    assert abs(floating.value - float(solve_tree_optimum(m, 2, 2).value)) < AGREEMENT_TOLERANCE


def test_paper_example_tree():
    """Two i.i.d. drafts per node on Sun et al. 2025's example: the tree optimum exceeds the
    chain's 11/9 and stays below the depth."""
    m = paper_model()
    value = solve_tree_optimum(m, 2, 2, "iid", backend="exact").value
    assert block_expected_accepted(m, 2) < value <= 2
