"""Token-wise verification of a draft block (Leviathan et al. 2023): the node recursion
against the literal algorithm, losslessness, the closed form, the paper's example.

Run: .venv/bin/python -m pytest tests/otm/sequences/test_chain_tokenwise.py -q
"""
from __future__ import annotations

from fractions import Fraction as F

import pytest
from hypothesis import given, settings

from otm.errors import InvalidDraftCountError, NotApplicableError
from otm.sequences import (
    context_independent_model,
    lossless_gap,
    tokenwise_expected_accepted,
    tokenwise_law,
    tokenwise_law_by_enumeration,
)
from otm.tolerances import AGREEMENT_TOLERANCE

from .support import (
    context_switch_model,
    degenerate_models,
    exact_model,
    exact_models,
    paper_model,
)


@pytest.mark.parametrize("vocab_size, g", [(2, 2), (2, 3), (3, 2), (3, 3)])
@pytest.mark.parametrize("seed", range(2))
def test_recursion_equals_the_literal_algorithm_and_is_lossless(vocab_size, g, seed):
    m = exact_model(vocab_size, g + 1, seed)
    law = tokenwise_law(m, g)
    assert law.masses == tokenwise_law_by_enumeration(m, g).masses
    assert law.total() == 1
    assert lossless_gap(m, law, g + 1) == 0
    assert law.expected_accepted() == tokenwise_expected_accepted(m, g)


@settings(max_examples=30)
@given(exact_models())
def test_random_instances(instance):
    m, g = instance
    law = tokenwise_law(m, g)
    assert lossless_gap(m, law, g + 1) == 0
    assert law.expected_accepted() == tokenwise_expected_accepted(m, g)


def test_paper_example_and_leviathan_closed_form():
    assert tokenwise_expected_accepted(paper_model(), 2) == F(10, 9)
    p, q = [F(1, 2), F(1, 3), F(1, 6)], [F(1, 6), F(1, 2), F(1, 3)]
    a = sum(min(x, y) for x, y in zip(p, q))
    m = context_independent_model(p, q, 5)
    for g in range(1, 5):
        assert tokenwise_expected_accepted(m, g) == sum(a**i for i in range(1, g + 1))
        assert tokenwise_law(m, g).expected_tokens() == (1 - a ** (g + 1)) / (1 - a)


def test_context_dependent_example_by_hand():
    m = context_switch_model()
    # R(u) = prod min(p, q) along u
    r0, r1 = F(1, 4), F(1, 3)
    expected = r0 + r1 + r0 * (F(1, 5) + F(1, 2)) + r1 * (F(1, 2) + F(1, 6))
    assert tokenwise_expected_accepted(m, 2) == expected


@pytest.mark.parametrize("name", sorted(degenerate_models()))
def test_degenerate_instances(name):
    m = degenerate_models()[name]
    law = tokenwise_law(m, 2)
    assert lossless_gap(m, law, 3) == 0 and law.masses == tokenwise_law_by_enumeration(m, 2).masses
    if name == "p equals q":
        assert law.expected_accepted() == 2
    if name == "disjoint supports":
        assert law.expected_accepted() == 0


def test_float_path_agrees_with_the_exact_one():
    m = exact_model(3, 4, seed=5, concentration=2.0)
    exact, floating = tokenwise_law(m, 3), tokenwise_law(m.as_float(), 3)
    assert abs(float(exact.expected_accepted()) - floating.expected_accepted()) < AGREEMENT_TOLERANCE
    assert lossless_gap(m.as_float(), floating, 4) < AGREEMENT_TOLERANCE


def test_bad_block_lengths():
    m = context_switch_model()
    with pytest.raises(InvalidDraftCountError, match="g must be"):
        tokenwise_law(m, 0)
    with pytest.raises(NotApplicableError, match="length >= 4"):
        tokenwise_expected_accepted(m, 3)
