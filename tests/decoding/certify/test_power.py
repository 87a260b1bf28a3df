"""The bounds behind the assertions: the set statistic is the maximum over every set, the
power is met in simulation, power() and samples_needed() agree, and every message states
the power; detect_tv raises Undetectable rather than pass."""
import itertools
import math

import numpy as np
import pytest
import torch

from decoding.certify import Undetectable, assert_lossless, assert_rule, power, samples_needed
from decoding.certify.assertions import dtype_tolerance
from decoding.certify.bounds import (
    binary_kl,
    chernoff_interval,
    detectable_shift,
    detectable_tv,
    set_statistic,
    set_test,
    set_threshold,
)
from decoding.validation.own_verifier import example_unnormalised_residual_verifier
from decoding.verifiers import get_verifier

from .conftest import N, P, Q

#: Monte Carlo repetitions of the power check; a guaranteed 0.99 power misses at most
#: 1% of them, so more than MISSES_ALLOWED misses (a Binomial(300, 0.01) tail of 1e-6)
#: would contradict the bound.
REPETITIONS, MISSES_ALLOWED = 300, 12


def test_binary_kl_edges():
    assert binary_kl(0.5, 0.5) == 0
    assert binary_kl(0.0, 0.3) == pytest.approx(-math.log(0.7))
    assert math.isinf(binary_kl(0.1, 0.0))


@pytest.mark.parametrize("rows", [200, 213])  # weights all one; weights below one (an enumeration)
def test_the_hull_maximum_is_the_maximum_over_every_set(rows):
    rng = np.random.default_rng(rows)
    n, cells = 200, 6
    for _ in range(50):
        probs = rng.dirichlet(np.ones(cells))
        counts = rng.multinomial(n, rng.dirichlet(np.ones(cells))).astype(float)
        statistic, deviating, observed, expected, _ = set_statistic(counts, probs, n, rows)
        brute = max(rows * binary_kl(counts[list(a)].sum() / rows, n * probs[list(a)].sum() / rows)
                    for size in range(1, cells) for a in itertools.combinations(range(cells), size))
        assert statistic == pytest.approx(brute, rel=1e-12)
        assert observed == pytest.approx(counts[deviating].sum() / n)
        assert expected == pytest.approx(probs[deviating].sum())


def test_threshold_is_the_union_bound():
    assert set_threshold(2, 1e-3) == pytest.approx(math.log(2 / 1e-3))
    assert set_threshold(10, 1e-9) == pytest.approx(math.log((2**10 - 2) / 1e-9))
    assert set_threshold(10, 1e-9, weighted=True) == pytest.approx(math.log(2 * (2**10 - 2) / 1e-9))
    assert set_threshold(1, 1e-9) == math.inf
    assert set_test([5.0, 0.0, 1.0], [0.5, 0.5, 0.0], 6, 6, 1e-9).statistic == math.inf  # probability-0 outcome


def test_power_is_met_in_simulation():
    """The hardest deviation (mass moved between two halves of p) at the stated power's TV
    is detected in at least 99% of draws (rows of weight one: a multinomial)."""
    rng = np.random.default_rng(1)
    probs = np.full(6, 1 / 6)
    n, alpha = 3000, 1e-3
    tv = detectable_tv(n, n, 6, alpha)
    shifted = probs + tv / 3 * np.array([1, 1, 1, -1, -1, -1])
    misses = sum(set_test(rng.multinomial(n, shifted), probs, n, n, alpha).passed for _ in range(REPETITIONS))
    assert misses <= MISSES_ALLOWED
    below = probs + 0.4 * tv / 3 * np.array([1, 1, 1, -1, -1, -1])  # far below the power: usually missed
    assert sum(set_test(rng.multinomial(n, below), probs, n, n, alpha).passed for _ in range(50)) > 25


def test_power_grows_with_n_and_samples_needed_inverts_it():
    small, large = power(20_000, 64, 2), power(200_000, 64, 2)
    assert large.tv < small.tv < 0.1
    assert large.acceptance < small.acceptance
    needed = samples_needed(large.tv, 64, large.alpha / 2)
    assert abs(needed - 200_000) <= 0.01 * 200_000
    assert power(10, 8, 2).tv == math.inf or power(10, 8, 2).tv > 0.5


def test_acceptance_power_at_an_exact_value_and_in_the_worst_case():
    worst = detectable_shift(None, 10_000, 10_000, 20.0)
    at_half = detectable_shift(0.5, 10_000, 10_000, 20.0)
    at_edge = detectable_shift(0.02, 10_000, 10_000, 20.0, upward_only=True)
    assert at_edge < at_half <= worst * (1 + 1e-3)


def test_chernoff_interval_covers():
    lo, hi = chernoff_interval(0.3, 1.0, 1000, 0.99)
    assert lo < 0.3 < hi and hi - lo < 0.1


def test_power_in_the_certificate_and_in_every_failure():
    certificate = assert_lossless(get_verifier("rrs").verify, P, Q, 2, n=N)
    tolerance = dtype_tolerance(torch.float32, 8)
    assert certificate.power == power(N, 8, 2, acceptance=certificate.optimum, rows=certificate.rows, tolerance=tolerance)
    with pytest.raises(AssertionError, match=r"power: with probability >= 0.99, an output law at TV >= 0\.0"):
        assert_lossless(example_unnormalised_residual_verifier, P, Q, 2, n=N)
    rule = assert_rule(get_verifier("rrs").verify, "rrs", P, Q, 2, n=N)
    assert rule.power.assertion == "rule" and rule.power.acceptance_at == pytest.approx(rule.rule_acceptance)


def test_a_deviation_below_the_power_is_undetectable_not_a_pass():
    tv = power(N, 8, 2).tv
    with pytest.raises(Undetectable) as failure:
        assert_lossless(get_verifier("rrs").verify, P, Q, 2, n=N, detect_tv=tv / 2)
    message = str(failure.value)
    assert message.startswith(f"undetectable at n={N:,}: a deviation of TV")
    needed = int(message.rsplit("n >= ", 1)[1].replace(",", ""))
    assert needed > 3 * N
    assert assert_lossless(get_verifier("rrs").verify, P, Q, 2, n=N, detect_tv=tv * 1.01).output_test.passed


def test_a_law_within_the_tolerance_is_not_a_deviation():
    """The composite null: any law within TV tau of p passes (its statistic is 0 on the exact
    counts), one beyond it does not, and the power is stated above tau."""
    probs = np.array([0.4, 0.3, 0.2, 0.1])
    tau = 0.01
    inside = probs + tau * np.array([1, 0, 0, -1])
    outside = probs + 3 * tau * np.array([1, 0, 0, -1])
    n = 1_000_000
    assert set_statistic(inside * n, probs, n, n, tau)[0] < 1e-12  # 0 up to rounding
    assert not set_test(outside * n, probs, n, n, 1e-9, tau).passed
    assert set_test(np.array([0.0, 0.0, 0.0, 1.0]) * 10, np.array([0.5, 0.5, 0.0, 0.0]), 10, 10, 1e-3, tau,
                    strict_zeros=False).statistic < math.inf
    assert detectable_tv(n, n, 4, 1e-9, tolerance=tau) > tau > detectable_tv(n, n, 4, 1e-9)


def test_false_alarms_at_the_edge_of_the_tolerance():
    """Multinomial draws from a law exactly tau away from p fail no more often than alpha allows."""
    rng = np.random.default_rng(3)
    probs, tau, n, alpha = np.array([0.4, 0.3, 0.2, 0.1]), 0.02, 5000, 1e-2
    edge = probs + tau * np.array([1, 0, 0, -1])
    failures = sum(not set_test(rng.multinomial(n, edge), probs, n, n, alpha, tau).passed for _ in range(REPETITIONS))
    assert failures <= MISSES_ALLOWED
