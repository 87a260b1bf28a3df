"""Khisti et al.'s canonical decomposition: the weight LP reaches the OTM optimum, its weights
drive a two-step scheme whose exact law is p, and the seeded sampler follows that law."""
from fractions import Fraction as F

import numpy as np
import pytest
from scipy.stats import chisquare

from otm.draft_laws import hub_law, independent_law, iid_law, table_law, without_replacement_law
from otm.errors import InvalidDistributionError, ShapeMismatchError
from otm.distributions import as_exact_distribution
from otm.formulations.canonical_lp import (
    canonical_two_step_law,
    sample_canonical_two_step,
    solve_canonical_lp,
    two_step_law_from_selection,
)
from otm.formulations.max_flow import solve_max_flow
from otm.tolerances import AGREEMENT_TOLERANCE

#: A seeded chi-square test rejects a correct sampler with this probability.
CHI_SQUARE_LEVEL = 1e-3

P = np.array([0.2, 0.3, 0.5])
Q = np.array([0.5, 0.3, 0.2])

LAWS = {
    "iid_k1": iid_law(Q, 1),
    "iid_k2": iid_law(Q, 2),
    "iid_k3": iid_law(Q, 3),
    "without_replacement": without_replacement_law(Q, 2),
    "hub": hub_law(Q),
    "independent": independent_law([Q, [0.1, 0.1, 0.8]]),
    "table": table_law([[0, 1], [2, 2], [1, 0]], [0.5, 0.25, 0.25], 3),
}


@pytest.mark.parametrize("name", LAWS)
def test_canonical_weights_reach_the_optimum_and_output_p(name):
    law = LAWS[name]
    solution = solve_canonical_lp(P, law)
    optimum = float(solve_max_flow(P, law).acceptance)
    assert abs(float(solution.acceptance) - optimum) <= AGREEMENT_TOLERANCE
    weights = solution.details["weights"]
    assert weights.shape == law.tuples.shape
    assert np.allclose(weights.sum(axis=1), 1, atol=AGREEMENT_TOLERANCE)
    assert (weights[~law.first_occurrence()] == 0).all()  # one weight per distinct token
    two_step = canonical_two_step_law(P, law, weights)
    assert np.abs(two_step.output_distribution - P).max() <= AGREEMENT_TOLERANCE
    assert abs(two_step.selection_acceptance - optimum) <= AGREEMENT_TOLERANCE
    assert abs(two_step.acceptance - optimum) <= AGREEMENT_TOLERANCE
    accepted_total = sum(solution.plan.values())
    assert abs(accepted_total - optimum) <= AGREEMENT_TOLERANCE


def test_canonical_lp_is_exact_in_rationals():
    p = as_exact_distribution(["1/5", "3/10", "1/2"])
    law = iid_law(as_exact_distribution(["1/2", "3/10", "1/5"]), 2)
    solution = solve_canonical_lp(p, law, backend="exact")
    assert solution.acceptance == F(43, 50)
    assert solution.duals["gap"] == 0
    assert solution.verified_gap == 0
    two_step = canonical_two_step_law(p, law, solution.details["weights"])
    assert list(two_step.output_distribution) == list(p)
    assert two_step.selection_acceptance == two_step.acceptance == F(43, 50)


def test_uniform_weights_are_lossless_but_suboptimal():
    """Any weights give output p (step 2 uses the true law of Z); the acceptance drops."""
    law = iid_law(Q, 2)
    uniform = law.first_occurrence() / law.first_occurrence().sum(axis=1, keepdims=True)
    two_step = canonical_two_step_law(P, law, uniform)
    assert np.abs(two_step.output_distribution - P).max() <= AGREEMENT_TOLERANCE
    optimum = float(solve_max_flow(P, law).acceptance)
    assert two_step.selection_acceptance < optimum - 1e-3
    assert two_step.selection_acceptance <= two_step.acceptance <= optimum + AGREEMENT_TOLERANCE


def test_a_broken_second_step_is_detected():
    """Skipping the residual renormalisation (outputting the unnormalised excess) is not p."""
    law = iid_law(Q, 2)
    two_step = canonical_two_step_law(P, law, solve_canonical_lp(P, law).details["weights"])
    excess = P - np.minimum(P, two_step.selection_law)
    broken = np.minimum(P, two_step.selection_law) + (1 - two_step.selection_acceptance) * excess
    assert np.abs(broken - P).max() > AGREEMENT_TOLERANCE
    assert np.abs(two_step.output_distribution - P).max() <= AGREEMENT_TOLERANCE


def test_bad_weights_are_typed_errors():
    law = iid_law(Q, 2)
    good = solve_canonical_lp(P, law).details["weights"]
    with pytest.raises(ShapeMismatchError):
        canonical_two_step_law(P, law, good[:, :1])
    with pytest.raises(InvalidDistributionError, match="sum to"):
        canonical_two_step_law(P, law, good * 0.5)
    with pytest.raises(InvalidDistributionError, match=">= 0"):
        canonical_two_step_law(P, law, good - 1)
    with pytest.raises(InvalidDistributionError, match="not one of its tuple"):
        two_step_law_from_selection(P, law, [0], [2], [1.0])  # tuple 0 is (0, 0)


@pytest.mark.parametrize("name", ["iid_k2", "hub", "iid_k3"])
def test_sampler_matches_the_exact_law(name):
    law = LAWS[name]
    weights = solve_canonical_lp(P, law).details["weights"]
    exact = canonical_two_step_law(P, law, weights)
    drafts, outputs = sample_canonical_two_step(P, law, weights, np.random.default_rng(7), 20_000)
    counts = np.bincount(outputs, minlength=3)
    assert chisquare(counts, exact.output_distribution * counts.sum()).pvalue > CHI_SQUARE_LEVEL
    hits = int((drafts == outputs[:, None]).any(axis=1).sum())
    expected = float(exact.acceptance)
    assert chisquare([hits, len(outputs) - hits], [expected * len(outputs), (1 - expected) * len(outputs)]).pvalue > CHI_SQUARE_LEVEL


def test_sampler_is_reproducible():
    law = LAWS["iid_k2"]
    weights = solve_canonical_lp(P, law).details["weights"]
    a = sample_canonical_two_step(P, law, weights, np.random.default_rng(3), 100)
    b = sample_canonical_two_step(P, law, weights, np.random.default_rng(3), 100)
    assert all((x == y).all() for x, y in zip(a, b))


@pytest.mark.parametrize("p, q", [([1.0], [1.0]), ([0.0, 1.0], [1.0, 0.0]), ([0.25, 0.75], [0.25, 0.75])])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_degenerate_instances(p, q, k):
    law = iid_law(q, k)
    solution = solve_canonical_lp(p, law)
    two_step = canonical_two_step_law(p, law, solution.details["weights"])
    assert np.isfinite(two_step.output_distribution).all()
    assert np.abs(two_step.output_distribution - np.asarray(p)).max() <= AGREEMENT_TOLERANCE
    assert abs(float(solution.acceptance) - float(solve_max_flow(p, law).acceptance)) <= AGREEMENT_TOLERANCE
