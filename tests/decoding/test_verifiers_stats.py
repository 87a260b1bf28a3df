"""The goodness-of-fit helpers of decoding.validation.stats: they pass exact samples and fail
perturbed ones, with the stated false-alarm rate."""
from __future__ import annotations

import numpy as np
import pytest

from decoding.validation.stats import DEFAULT_ALPHA, binomial_z_test, chi_square_test, ratio_and_error
from otm.errors import InvalidDistributionError, ShapeMismatchError

LAW = np.array([0.5, 0.3, 0.15, 0.05, 0.0])


def test_exact_samples_pass_and_false_alarms_are_rare():
    rng = np.random.default_rng(0)
    p_values = [chi_square_test(rng.multinomial(5000, LAW), LAW).p_value for _ in range(300)]
    assert min(p_values) >= DEFAULT_ALPHA
    # p-values of a correct sampler are roughly uniform: about 10 % fall below 0.1
    assert 10 <= sum(v < 0.1 for v in p_values) <= 55


def test_a_perturbed_law_fails():
    rng = np.random.default_rng(1)
    wrong = np.array([0.48, 0.32, 0.15, 0.05, 0.0])
    result = chi_square_test(rng.multinomial(50_000, wrong), LAW)
    assert not result.passed
    assert "chi2" in result.reason


def test_an_impossible_outcome_fails_outright():
    counts = np.array([500, 300, 150, 49, 1])
    result = chi_square_test(counts, LAW)
    assert not result.passed
    assert result.p_value == 0.0
    assert "probability 0" in result.reason


def test_small_cells_are_pooled_and_one_cell_passes():
    assert chi_square_test([10, 0], [1.0, 0.0]).passed
    # expected 90, 5, 3, 2: the cells 3 and 2 are pooled into one of 5
    assert chi_square_test([88, 6, 4, 2], [0.9, 0.05, 0.03, 0.02]).dof == 2
    # expected 96, 2, 2: the pool (4) is still small and joins the big cell
    assert chi_square_test([95, 3, 2], [0.96, 0.02, 0.02]).dof == 0


def test_chi_square_input_errors():
    with pytest.raises(ShapeMismatchError):
        chi_square_test([1, 2], [1.0])
    with pytest.raises(InvalidDistributionError):
        chi_square_test([1, 2], [0.7, 0.7])
    with pytest.raises(ValueError, match="alpha"):
        chi_square_test([1, 2], [0.5, 0.5], alpha=0)


def test_binomial_z_test():
    assert binomial_z_test(5030, 10_000, 0.5).passed
    assert not binomial_z_test(5300, 10_000, 0.5).passed
    assert binomial_z_test(0, 100, 0.0).passed
    assert not binomial_z_test(1, 100, 0.0).passed
    assert binomial_z_test(100, 100, 1.0).passed
    assert not binomial_z_test(99, 100, 1.0).passed
    with pytest.raises(ValueError):
        binomial_z_test(3, 2, 0.5)
    with pytest.raises(InvalidDistributionError):
        binomial_z_test(1, 2, 1.5)


def test_ratio_and_error_is_exact_on_proportional_samples_and_matches_the_spread_of_ratios():
    denominator = np.array([1.0, 2.0, 3.0, 4.0])
    assert ratio_and_error(0.25 * denominator, denominator) == (0.25, 0.0)
    assert np.isnan(ratio_and_error([1.0], [2.0])[1])
    rng = np.random.default_rng(0)
    replicates = []
    for _ in range(2000):
        d = rng.uniform(1.0, 3.0, 200)
        replicates.append(ratio_and_error(0.1 * d + rng.normal(0.0, 0.2, 200), d))
    ratios, errors = np.array(replicates).T
    # the delta-method error is the spread of the ratio over replicate samples (to Monte Carlo precision)
    assert abs(np.median(errors) / ratios.std() - 1) < 0.1
