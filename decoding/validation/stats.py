"""Goodness-of-fit tests that hold a sampler to an exact law.

Two tests, each with a stated false-alarm rate ``alpha`` (the probability that a
correct sampler fails, up to the chi-square / normal approximation):

- :func:`chi_square_test`: Pearson's chi-square of observed token counts against an
  exact law (cells with small expected counts pooled; a count in a cell of probability
  zero fails outright, whatever ``alpha``);
- :func:`binomial_z_test`: a two-sided z-test of a success count against an exact
  success probability (membership acceptance against ``otm.rule_acceptance``).

With fixed seeds a test suite built on them is deterministic; ``alpha`` then states how
unlucky a seed would have to be to fail a correct sampler.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from otm.distributions import input_dtype
from otm.errors import InvalidDistributionError, ShapeMismatchError
from otm.tolerances import sum_tolerance

#: Default false-alarm rate per test: a correct sampler fails with probability 1e-4.
DEFAULT_ALPHA = 1e-4

#: Cells whose expected count is below this are pooled (Cochran's rule for the chi-square
#: approximation).
MIN_EXPECTED_COUNT = 5.0

#: An exact-law probability at or below this is treated as impossible: an exact law in
#: float64 carries rounding noise of order 1e-16 on tokens that have probability 0.
IMPOSSIBLE_PROBABILITY = 1e-12


@dataclass(frozen=True)
class GoodnessOfFit:
    """Outcome of one test.

    Attributes:
        statistic: chi-square statistic, or the z score.
        dof: degrees of freedom (chi-square), 0 for the z-test.
        p_value: probability, under the exact law, of a statistic at least as extreme.
        alpha: the false-alarm rate the test was run at.
        passed: ``p_value >= alpha`` and no impossible outcome observed.
        reason: a human-readable summary (why it failed, when it did).
    """

    statistic: float
    dof: int
    p_value: float
    alpha: float
    passed: bool
    reason: str


def _check_alpha(alpha: float) -> float:
    if not (0 < alpha < 1):
        raise ValueError(f"alpha (the false-alarm rate) must be in (0, 1), got {alpha!r}")
    return float(alpha)


def chi_square_test(counts, expected_probs, alpha: float = DEFAULT_ALPHA) -> GoodnessOfFit:
    """Pearson's chi-square goodness of fit of ``counts`` (``[V]`` non-negative integers)
    against the law ``expected_probs`` (``[V]``, summing to 1 within
    :func:`otm.tolerances.sum_tolerance` of its dtype and ``V``).

    Cells with probability at most :data:`IMPOSSIBLE_PROBABILITY` must be empty (else the
    test fails with ``p_value = 0``); the others with an expected count below
    :data:`MIN_EXPECTED_COUNT` are pooled into one cell, merged with the smallest other
    cell if still too small. One cell left: nothing to test, passes.
    """
    alpha = _check_alpha(alpha)
    counts = np.asarray(counts, dtype=np.float64)
    dtype = input_dtype(expected_probs)
    probs = np.asarray(expected_probs, dtype=np.float64)
    if counts.shape != probs.shape or counts.ndim != 1:
        raise ShapeMismatchError(f"counts {counts.shape} and expected_probs {probs.shape} must be equal 1-D shapes")
    if (probs < 0).any() or not abs(probs.sum() - 1) <= sum_tolerance(dtype, max(probs.size, 1)):
        raise InvalidDistributionError(f"expected_probs must be >= 0 and sum to 1, got sum {probs.sum()!r}")
    n = counts.sum()
    impossible = probs <= IMPOSSIBLE_PROBABILITY
    if counts[impossible].sum() > 0:
        cells = np.flatnonzero(impossible & (counts > 0)).tolist()
        return GoodnessOfFit(math.inf, 0, 0.0, alpha, False, f"outcomes of probability 0 observed in cells {cells}")
    observed, expected = counts[~impossible], n * probs[~impossible]
    small = expected < MIN_EXPECTED_COUNT
    if small.any():
        pooled_obs, pooled_exp = observed[small].sum(), expected[small].sum()
        observed, expected = observed[~small], expected[~small]
        if pooled_exp < MIN_EXPECTED_COUNT and len(expected):
            j = int(np.argmin(expected))
            observed[j] += pooled_obs
            expected[j] += pooled_exp
        else:
            observed, expected = np.append(observed, pooled_obs), np.append(expected, pooled_exp)
    dof = len(expected) - 1
    if dof < 1:
        return GoodnessOfFit(0.0, 0, 1.0, alpha, True, "a single cell: nothing to test")
    statistic = float(((observed - expected) ** 2 / expected).sum())
    p_value = float(stats.chi2.sf(statistic, dof))
    passed = p_value >= alpha
    reason = f"chi2={statistic:.2f}, dof={dof}, p={p_value:.3g} {'>=' if passed else '<'} alpha={alpha:g}"
    return GoodnessOfFit(statistic, dof, p_value, alpha, passed, reason)


def binomial_z_test(successes: int, trials: int, probability: float, alpha: float = DEFAULT_ALPHA) -> GoodnessOfFit:
    """Two-sided z-test of ``successes`` out of ``trials`` against the exact success
    ``probability``. At ``probability`` 0 or 1 (up to :data:`IMPOSSIBLE_PROBABILITY`) the
    count must be exactly 0 or ``trials``."""
    alpha = _check_alpha(alpha)
    if trials < 1 or not (0 <= successes <= trials):
        raise ValueError(f"need 0 <= successes <= trials and trials >= 1, got {successes}/{trials}")
    probability = float(probability)
    if not (-IMPOSSIBLE_PROBABILITY <= probability <= 1 + IMPOSSIBLE_PROBABILITY):
        raise InvalidDistributionError(f"probability must be in [0, 1], got {probability!r}")
    if probability <= IMPOSSIBLE_PROBABILITY or probability >= 1 - IMPOSSIBLE_PROBABILITY:
        expected = 0 if probability <= IMPOSSIBLE_PROBABILITY else trials
        passed = successes == expected
        return GoodnessOfFit(
            0.0 if passed else math.inf, 0, 1.0 if passed else 0.0, alpha, passed,
            f"{successes}/{trials} successes for a probability of {probability:g}",
        )
    z = (successes - trials * probability) / math.sqrt(trials * probability * (1 - probability))
    p_value = float(2 * stats.norm.sf(abs(z)))
    passed = p_value >= alpha
    reason = f"z={z:.2f}, p={p_value:.3g} {'>=' if passed else '<'} alpha={alpha:g} ({successes}/{trials} vs {probability:.6f})"
    return GoodnessOfFit(z, 0, p_value, alpha, passed, reason)


def ratio_and_error(numerator, denominator) -> tuple[float, float]:
    """``mean(numerator) / mean(denominator)`` over paired samples and its delta-method
    standard error ``sqrt(sum (n_i - r d_i)^2 / (n (n - 1))) / mean(d)`` (NaN with fewer
    than 2 samples)."""
    numerator, denominator = np.asarray(numerator, dtype=np.float64), np.asarray(denominator, dtype=np.float64)
    ratio = numerator.mean() / denominator.mean()
    n = numerator.size
    error = math.sqrt(((numerator - ratio * denominator) ** 2).sum() / (n * (n - 1))) / denominator.mean() if n > 1 else math.nan
    return float(ratio), float(error)
