"""OutputLaw: accepted lengths, through masses and the losslessness identity (L).

Run: .venv/bin/python -m pytest tests/otm/sequences/test_output_law.py -q
"""
from __future__ import annotations

from fractions import Fraction as F

import pytest

from otm.errors import InvalidDistributionError
from otm.sequences import OutputLaw, extended_law, lossless_gap

from .support import context_switch_model


def target_prefix_law(model, n):
    """Emitting n target tokens: lossless by definition."""
    return OutputLaw({z: model.target_prob(z) for z in model.sequences(n) if model.target_prob(z)})


def test_target_samples_of_any_length_are_lossless():
    m = context_switch_model()
    for n in (1, 2, 3):
        law = target_prefix_law(m, n)
        assert lossless_gap(m, law) == 0 and lossless_gap(m, law, 3) == 0
        assert law.expected_tokens() == n and law.expected_accepted() == n - 1 and law.total() == 1


def test_a_mixture_of_lengths_from_a_stopping_rule_is_lossless():
    m = context_switch_model()
    # stop after the first token when it is 0, else take two target tokens
    masses = {(0,): m.target_prob((0,))}
    masses.update({(1, y): m.target_prob((1, y)) for y in (0, 1)})
    law = OutputLaw(masses)
    assert lossless_gap(m, law, 3) == 0
    assert law.accepted_length_distribution() == {0: F(1, 4), 1: F(3, 4)}
    assert law.through_masses() == {(1,): F(3, 4)}


def test_a_biased_output_is_caught():
    m = context_switch_model()
    law = OutputLaw({(0,): F(1, 2), (1,): F(1, 2)})  # the target has (1/4, 3/4)
    assert lossless_gap(m, law) == F(1, 4)
    extended = extended_law(m, law, 2)
    assert sum(extended.values()) == 1 and extended[(0, 0)] == F(1, 4)


def test_horizon_shorter_than_the_output_is_refused():
    m = context_switch_model()
    with pytest.raises(InvalidDistributionError, match="horizon"):
        lossless_gap(m, target_prefix_law(m, 2), 1)
