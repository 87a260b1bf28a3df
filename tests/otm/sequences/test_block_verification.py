"""Block verification (Sun et al. 2025): exact law, losslessness, the closed form of E[tau],
the paper's example, never worse than token-wise, degenerate inputs, float vs exact.

Run: .venv/bin/python -m pytest tests/otm/sequences/test_block_verification.py -q
"""
from __future__ import annotations

from fractions import Fraction as F

import pytest
from hypothesis import given, settings

from otm.sequences import (
    block_expected_accepted,
    block_verification_law,
    block_weights,
    lossless_gap,
    stop_probabilities,
    tokenwise_expected_accepted,
)
from otm.tolerances import AGREEMENT_TOLERANCE

from .support import (
    context_switch_model,
    degenerate_models,
    exact_model,
    exact_models,
    paper_model,
)


def test_paper_example():
    m = paper_model()
    law = block_verification_law(m, 2)
    assert law.expected_accepted() == F(11, 9) == block_expected_accepted(m, 2)
    assert lossless_gap(m, law, 3) == 0
    # weights and stop probabilities along the block (a, b): w = (1, 1/2, 1), h_2 = w_2
    assert block_weights(m, (0, 1)) == [1, F(1, 2), 1]
    h = stop_probabilities(m, (0, 1))
    assert h[0] == 1 and h[2] == 1


@pytest.mark.parametrize("vocab_size, g", [(2, 2), (2, 3), (3, 2), (3, 3)])
@pytest.mark.parametrize("seed", range(3))
def test_lossless_and_closed_form(vocab_size, g, seed):
    m = exact_model(vocab_size, g + 1, seed)
    law = block_verification_law(m, g)
    assert law.total() == 1
    assert lossless_gap(m, law, g + 1) == 0
    assert law.expected_accepted() == block_expected_accepted(m, g)
    assert law.expected_accepted() >= tokenwise_expected_accepted(m, g)


@settings(max_examples=40)
@given(exact_models())
def test_random_instances(instance):
    m, g = instance
    law = block_verification_law(m, g)
    assert lossless_gap(m, law, g + 1) == 0
    assert law.expected_accepted() == block_expected_accepted(m, g) >= tokenwise_expected_accepted(m, g)


def test_conditional_survival_is_the_weight():
    """E[P(tau >= i | X) | X_<=i = u] = w(u), the step of the closed form (docs/sequences.md 2)."""
    m = context_switch_model()
    g = 2
    law = block_verification_law(m, g)
    through = law.through_masses()  # A(u) = P(tau >= |u|, X starts with u)
    for n in (1, 2):
        for u in m.sequences(n):
            if m.draft_prob(u):
                assert through.get(u, 0) == m.draft_prob(u) * block_weights(m, u)[-1]


@pytest.mark.parametrize("name", sorted(degenerate_models()))
def test_degenerate_instances(name):
    m = degenerate_models()[name]
    law = block_verification_law(m, 2)
    assert lossless_gap(m, law, 3) == 0
    assert law.expected_accepted() == block_expected_accepted(m, 2)
    if name == "p equals q":
        assert law.expected_accepted() == 2
    if name == "disjoint supports":
        assert law.expected_accepted() == 0


def test_strictly_better_than_tokenwise_somewhere():
    m = context_switch_model()
    assert block_expected_accepted(m, 2) > tokenwise_expected_accepted(m, 2)


def test_float_path_agrees_with_the_exact_one():
    m = exact_model(3, 4, seed=9, concentration=2.0)
    exact, floating = block_verification_law(m, 3), block_verification_law(m.as_float(), 3)
    assert abs(float(exact.expected_accepted()) - floating.expected_accepted()) < AGREEMENT_TOLERANCE
    assert abs(float(block_expected_accepted(m, 3)) - block_expected_accepted(m.as_float(), 3)) < AGREEMENT_TOLERANCE
    assert lossless_gap(m.as_float(), floating, 4) < AGREEMENT_TOLERANCE
