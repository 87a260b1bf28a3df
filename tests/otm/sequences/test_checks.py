"""Every check of otm.sequences.checks holds on the real verifiers and FAILS on a
deliberately broken one: block verification with the token-wise residual, a residual or a
weight not updated between siblings in traversal verification, a coin shared across
siblings in a node rule, a lossy rule that beats the tree optimum.

Run: .venv/bin/python -m pytest tests/otm/sequences/test_checks.py -q
"""
from __future__ import annotations

from fractions import Fraction as F

import pytest

from otm.errors import UnknownNameError
from otm.rules.base import RuleLaw
from otm.sequences import (
    check_block_attains_chain_optimum,
    check_block_never_worse_than_tokenwise,
    check_block_verification_lossless,
    check_traversal_lossless,
    check_traversal_on_chain_is_block_verification,
    check_tree_rule_within_optimum,
    check_tree_walk_lossless,
    context_independent_model,
    tokenwise_expected_accepted,
    tokenwise_law,
    traversal,
)

from .support import (
    block_law_with_tokenwise_residual,
    context_switch_model,
    exact_model,
    paper_model,
    shared_coin_rrs,
)

INSTANCES = [paper_model(), context_switch_model(), exact_model(3, 3, seed=0), exact_model(2, 4, seed=1)]



def first_draft_always(p, q, k):
    """Emit the first draft: acceptance 1, output law q (lossy)."""
    return RuleLaw(1, q, None, {"accepted_per_token": q})


@pytest.mark.parametrize("index", range(len(INSTANCES)))
def test_block_checks_hold(index):
    m = INSTANCES[index]
    g = m.length - 1
    for verdict in (check_block_verification_lossless(m, g), check_block_attains_chain_optimum(m, g),
                    check_block_never_worse_than_tokenwise(m, g), check_traversal_on_chain_is_block_verification(m, g)):
        assert verdict.holds and verdict.tolerance == 0, verdict


def test_block_checks_fail_on_broken_inputs():
    m = exact_model(3, 3, seed=4)  # with V = 2 (and on many V = 3 rows) both residuals coincide
    broken = check_block_verification_lossless(m, 2, law=block_law_with_tokenwise_residual(m, 2))
    assert not broken.holds and broken.slack < 0
    assert not check_block_attains_chain_optimum(m, 2, value=tokenwise_expected_accepted(m, 2)).holds
    assert not check_block_never_worse_than_tokenwise(m, 2, value=F(0)).holds  # one target token per step
    assert not check_traversal_on_chain_is_block_verification(m, 2, law=tokenwise_law(m, 2)).holds


@pytest.mark.parametrize("draft", ["without_replacement", "iid"])
def test_traversal_check_holds(draft):
    for m in INSTANCES[:3]:
        assert check_traversal_lossless(m, 2, 2, draft).holds


@pytest.mark.parametrize("broken", ["residual not updated", "weight not updated"])
def test_traversal_check_fails_when_siblings_are_not_updated(monkeypatch, broken):
    real = traversal.updated_after_rejection

    def not_updated(alpha, target_law, proposal):
        alpha_next, target_next = real(alpha, target_law, proposal)
        return (alpha_next, target_law) if broken == "residual not updated" else (alpha, target_next)

    monkeypatch.setattr(traversal, "updated_after_rejection", not_updated)
    m = exact_model(3, 3, seed=0)
    verdict = check_traversal_lossless(m, 2, 2)
    assert not verdict.holds and verdict.slack < 0


def test_tree_walk_checks_hold():
    m = exact_model(3, 3, seed=0)
    for rule in ("rrs", "rrs_wor", "kseq"):
        assert check_tree_walk_lossless(m, 2, 2, rule).holds
        within = check_tree_rule_within_optimum(m, 2, 2, rule)
        assert within.holds and within.details["gap"] >= 0


def test_tree_walk_lossless_check_fails_on_a_shared_coin():
    # the second test only differs from an independent coin when 0 < r_2 < 1, i.e. when the
    # residual norm((p - q)^+) is not a point mass and is below q somewhere: here
    # p_2 = (0, 1/3, 2/3) and r_2(1) = 20/27
    m = context_independent_model([F(1, 5), F(1, 2), F(3, 10)], [F(7, 20), F(9, 20), F(1, 5)], 3)
    assert check_tree_walk_lossless(m, 2, 2, "rrs").holds
    verdict = check_tree_walk_lossless(m, 2, 2, shared_coin_rrs)
    assert not verdict.holds


def test_tree_optimum_check_fails_on_a_lossy_rule_that_beats_it():
    m = exact_model(3, 3, seed=0)
    verdict = check_tree_rule_within_optimum(m, 2, 2, first_draft_always, draft="iid")
    assert not verdict.holds and verdict.details["value"] == 2


def test_a_callable_rule_needs_its_draft_scheme():
    with pytest.raises(UnknownNameError, match="draft="):
        check_tree_rule_within_optimum(exact_model(2, 3, seed=0), 2, 2, first_draft_always)


def test_float_checks_use_the_agreement_tolerance():
    m = exact_model(3, 3, seed=4).as_float()
    verdict = check_block_verification_lossless(m, 2)
    assert verdict.holds and verdict.tolerance > 0
    assert not check_block_verification_lossless(m, 2, law=block_law_with_tokenwise_residual(m, 2)).holds
