"""The sequence-level checks (proofs.sequences) hold on the real laws and FAIL on a
deliberately broken ingredient: block verification emitting from the token-wise residual,
token-wise verification's value claimed as the optimum, a verifier emitting one target token,
traversal verification whose residual is not updated between siblings, the token-wise law
claimed as traversal's on a chain, recursive rejection sampling with one coin shared by the
siblings, and a lossy "always accept the first draft" verifier that beats the tree optimum.

Run: .venv/bin/python -m pytest tests/proofs/test_sequences.py -q
"""
from __future__ import annotations

import ast
import json
from fractions import Fraction as F

import numpy as np

from otm.sequences import tokenwise_expected_accepted, tokenwise_law, traversal, tree_walk_law
from proofs import sequences
from proofs.registry import PAPERS, registry
from tests.otm.sequences.support import block_law_with_tokenwise_residual, shared_coin_rrs

N = 6


def rng():
    return np.random.default_rng(3)



def test_registered_under_sequences_with_the_other_papers_unchanged():
    assert PAPERS[:6] == ("spechub", "khisti", "spectr", "leviathan", "ensemble", "theory")
    assert PAPERS[-1] == "sequences"
    assert list(registry("sequences")) == list(sequences.CHECKS)
    assert all(cid.startswith("sequences.") for cid in sequences.CHECKS)


def test_block_lossless_holds_and_fails_with_the_tokenwise_residual():
    check = sequences.check_block_lossless(N, rng())
    assert check.status == "holds" and check.worst_slack == 0 and check.tolerance == 0
    broken = sequences.check_block_lossless(N, rng(), law_fn=block_law_with_tokenwise_residual)
    assert broken.status == "fails" and broken.counterexample["target"]
    saved = json.loads(json.dumps(broken.as_dict()))["counterexample"]  # the model's exact tables, JSON-ready
    tables = {side: {ast.literal_eval(prefix): row for prefix, row in saved[side].items()} for side in ("target", "draft")}
    assert sequences.model_of(tables).exact


def test_block_optimal_holds_and_fails_on_tokenwise_value():
    check = sequences.check_block_optimal(N, rng())
    assert check.status == "holds" and "LP was solved on" in check.note
    assert sequences.check_block_optimal(N, rng(), value_fn=tokenwise_expected_accepted).status == "fails"


def test_block_never_worse_holds_and_fails_for_one_target_token_per_step():
    check = sequences.check_block_vs_tokenwise(N, rng())
    assert check.status == "holds" and "Strictly better on" in check.note
    assert sequences.check_block_vs_tokenwise(N, rng(), value_fn=lambda model, g: F(0)).status == "fails"


def test_traversal_lossless_holds_and_fails_when_the_residual_is_not_updated(monkeypatch):
    assert sequences.check_traversal_lossless(N, rng()).status == "holds"
    real = traversal.updated_after_rejection
    monkeypatch.setattr(traversal, "updated_after_rejection",
                        lambda alpha, target_law, proposal: (real(alpha, target_law, proposal)[0], target_law))
    assert sequences.check_traversal_lossless(N, rng()).status == "fails"


def test_traversal_chain_is_block_holds_and_fails_on_the_tokenwise_law():
    assert sequences.check_traversal_is_block_on_chains(N, rng()).status == "holds"
    assert sequences.check_traversal_is_block_on_chains(N, rng(), law_fn=tokenwise_law).status == "fails"


def test_tree_walks_lossless_hold_and_fail_with_a_shared_coin():
    check = sequences.check_tree_walks_lossless(N, rng())
    assert check.status == "holds" and check.instances == 7 * len(sequences.TREE_WALK_RULES)

    def with_shared_coin(model, depth, k, rule):
        return tree_walk_law(model, depth, k, shared_coin_rrs if rule == "rrs" else rule)

    broken = sequences.check_tree_walks_lossless(N, rng(), law_fn=with_shared_coin, rules=("rrs",))
    assert broken.status == "fails" and broken.counterexample["rule"] == "rrs"


def test_tree_gap_holds_reports_the_gaps_and_fails_on_a_lossy_verifier():
    check = sequences.check_tree_optimum_gaps(N, rng())
    assert check.status == "holds" and check.worst_slack >= 0
    for name in (*sequences.TREE_WALK_RULES, "traversal (iid)", "traversal (without_replacement)"):
        assert f"{name} " in check.note
    # "always accept the first draft down the tree": E[tau] = depth, above the optimum unless it is the depth
    broken = sequences.check_tree_optimum_gaps(N, rng(), value_fn=lambda model, depth, k, name, scheme: F(depth),
                                               rules=("rrs",))
    assert broken.status == "fails" and broken.counterexample["value"] == 2

