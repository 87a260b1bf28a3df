"""Validation of probability vectors and logits."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from otm.distributions import (
    as_distribution,
    as_distribution_pair,
    as_draft_distributions,
    check_draft_count,
    logits_to_probs,
    total_variation,
)
from otm.errors import InvalidDistributionError, InvalidDraftCountError, ShapeMismatchError
from otm.tolerances import AGREEMENT_TOLERANCE, SUM_TOLERANCE


@pytest.mark.parametrize(
    "bad, message",
    [
        ([0.5, float("nan")], "NaN"),
        ([0.5, float("inf")], "NaN/inf"),
        ([1.2, -0.2], "negative"),
        ([0.5, 0.4], "sums to"),
        ([[0.5, 0.5]], "1-D"),
        ([], "empty"),
        (["a", "b"], "numeric"),
    ],
)
def test_bad_vectors_raise_typed_errors_that_say_what_is_wrong(bad, message):
    with pytest.raises(InvalidDistributionError, match=message):
        as_distribution(bad)


def test_sum_within_tolerance_is_renormalised_and_beyond_is_rejected():
    p = as_distribution([0.5, 0.5 + SUM_TOLERANCE / 2])
    assert p.sum() == pytest.approx(1.0, abs=1e-15)
    with pytest.raises(InvalidDistributionError):
        as_distribution([0.5, 0.5 + 2 * SUM_TOLERANCE])


def test_float_noise_sum_is_accepted():
    p = np.array([0.1] * 10)  # sums to 0.9999999999999999
    assert as_distribution(p).sum() == pytest.approx(1.0, abs=1e-15)


def test_zeros_and_one_hot_are_valid():
    assert as_distribution([0, 1, 0]).tolist() == [0.0, 1.0, 0.0]


def test_pair_length_mismatch():
    with pytest.raises(ShapeMismatchError, match="3 tokens.*2"):
        as_distribution_pair([0.2, 0.3, 0.5], [0.5, 0.5])


def test_draft_distributions_one_or_k():
    q = [0.25, 0.75]
    assert len(as_draft_distributions(q, 3, 2)) == 3
    qs = as_draft_distributions([[0.5, 0.5], [0.1, 0.9]], 2, 2)
    assert qs[1].tolist() == [0.1, 0.9]
    with pytest.raises(ShapeMismatchError):
        as_draft_distributions([[0.5, 0.5], [0.1, 0.9]], 3, 2)
    with pytest.raises(ShapeMismatchError):
        as_draft_distributions(q, 2, 3)


@pytest.mark.parametrize("k", [0, -1, 1.5, True, "2"])
def test_impossible_k(k):
    with pytest.raises(InvalidDraftCountError):
        check_draft_count(k)


def test_temperature_zero_is_argmax_with_lowest_index_ties():
    assert logits_to_probs([1.0, 3.0, 3.0], temperature=0).tolist() == [0.0, 1.0, 0.0]


def test_temperature_scales_logits():
    z = np.array([0.0, np.log(3.0)])
    assert logits_to_probs(z, 1.0) == pytest.approx([0.25, 0.75])
    assert logits_to_probs(z, 0.5) == pytest.approx([0.1, 0.9])


def test_top_k_and_top_p():
    probs = np.array([0.1, 0.4, 0.2, 0.3])
    z = np.log(probs)
    assert logits_to_probs(z, top_k=2) == pytest.approx([0, 4 / 7, 0, 3 / 7])
    # top_p = 0.7 keeps 0.4 + 0.3 exactly; 0.71 needs 0.2 as well
    assert logits_to_probs(z, top_p=0.7) == pytest.approx([0, 4 / 7, 0, 3 / 7])
    assert logits_to_probs(z, top_p=0.71) == pytest.approx([0, 4 / 9, 2 / 9, 3 / 9])


def test_masked_logits_are_allowed_but_not_nan():
    assert logits_to_probs([0.0, -np.inf]).tolist() == [1.0, 0.0]
    with pytest.raises(InvalidDistributionError):
        logits_to_probs([0.0, np.nan])
    with pytest.raises(InvalidDistributionError):
        logits_to_probs([-np.inf, -np.inf])
    with pytest.raises(InvalidDistributionError):
        logits_to_probs([0.0, 1.0], temperature=-1)


@given(st.lists(st.floats(-30, 30), min_size=1, max_size=12), st.floats(0.05, 5))
def test_logits_to_probs_is_a_distribution(logits, temperature):
    probs = logits_to_probs(logits, temperature)
    assert np.all(probs >= 0)
    assert abs(probs.sum() - 1) <= AGREEMENT_TOLERANCE


def test_total_variation():
    assert total_variation([1, 0], [0, 1]) == 1.0
    assert total_variation([0.5, 0.5], [0.5, 0.5]) == 0.0
