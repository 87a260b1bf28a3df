"""RRS without replacement beyond enumeration: the k = 2 closed form (exact, checked
against the enumeration in rationals and floats) and the Monte Carlo estimate for k > 2
(unbiased: its path products average to the exact law; within its error of it)."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from otm.draft_laws import iid_law, sample_without_replacement, without_replacement_law
from otm.errors import InvalidDraftCountError
from otm.rules import rule_acceptance
from otm.rules.rrs_wor import (
    closed_form_acceptance_k2,
    monte_carlo_acceptance,
    path_rejection_products,
    path_rejection_products_reference,
)
from otm.tolerances import AGREEMENT_TOLERANCE
from tests.otm.rules_support import exact

#: A Monte Carlo estimate may miss the exact value by this many standard errors
#: (two-sided false-alarm rate about 6e-5 per comparison).
MC_SIGMAS = 4.0


def _pair(rng, vocab, zeros=0):
    p, q = rng.dirichlet(np.ones(vocab) * 0.5), rng.dirichlet(np.ones(vocab) * 0.5)
    if zeros:
        q[rng.choice(vocab, zeros, replace=False)] = 0.0
        q /= q.sum()
    return p, q


@given(st.integers(2, 6), st.integers(0, 10**6), st.integers(0, 3))
def test_k2_closed_form_is_the_enumerated_law_in_floats(vocab, seed, zeros):
    rng = np.random.default_rng(seed)
    p, q = _pair(rng, vocab, zeros=min(zeros, vocab - 2))
    enumerated = float(rule_acceptance("rrs_wor", p, q, 2, method="enumeration"))
    assert abs(float(rule_acceptance("rrs_wor", p, q, 2, method="closed_form")) - enumerated) <= AGREEMENT_TOLERANCE


@pytest.mark.parametrize("p, q", [((1, 6, 3), (5, 3, 2)), ((1, 1, 2), (2, 1, 1)), ((1, 0, 0), (1, 1, 2)), ((1, 1), (1, 1)),
                                  ((3, 2, 0, 1), (0, 1, 4, 1))])
def test_k2_closed_form_is_the_enumerated_law_in_rationals(p, q):
    p, q = exact(*p), exact(*q)
    closed = rule_acceptance("rrs_wor", p, q, 2, method="closed_form")
    assert isinstance(closed, Fraction)
    assert closed == rule_acceptance("rrs_wor", p, q, 2, method="enumeration")


def test_k2_closed_form_detects_a_wrong_formula():
    """Without the renormalisation of q after removing x1 (c = 1) the formula is RRS with
    replacement: the enumeration tells them apart, and the closed form agrees with it."""
    p, q = exact(1, 6, 3), exact(5, 3, 2)
    enumerated = rule_acceptance("rrs_wor", p, q, 2, method="enumeration")
    assert rule_acceptance("rrs", p, q, 2, method="closed_form") != enumerated
    assert closed_form_acceptance_k2(p, q) == enumerated == Fraction(94, 100)


def test_k2_closed_form_runs_at_the_llm_vocabulary():
    rng = np.random.default_rng(0)
    p, q = rng.dirichlet(np.ones(151_936) * 0.1), rng.dirichlet(np.ones(151_936) * 0.1)
    value = rule_acceptance("rrs_wor", p, q, 2)
    assert np.minimum(p, q).sum() <= value <= rule_acceptance("rrs_wor", p, q, 2, method="closed_form") + 0.0
    assert value <= float(__import__("otm").optimal_acceptance(p, q, 2, draft_scheme="without_replacement")) + AGREEMENT_TOLERANCE


def test_one_positive_draft_token_falls_back_to_the_one_tuple_enumeration():
    """Support exhausted at the second draft: the acceptance is p(S), S = {the q token, the next}."""
    p, q = np.array([0.1, 0.6, 0.3]), np.array([0.0, 0.0, 1.0])
    assert abs(float(rule_acceptance("rrs_wor", p, q, 2)) - 0.4) <= AGREEMENT_TOLERANCE


@pytest.mark.parametrize("k", [1, 2, 3])
def test_path_products_average_to_the_exact_law(k):
    rng = np.random.default_rng(3)
    p, q = _pair(rng, 5)
    law = without_replacement_law(q, k)
    products = path_rejection_products(p, q, law.tuples)
    enumerated = float(rule_acceptance("rrs_wor", p, q, k, method="enumeration"))
    assert abs((1.0 - law.probs @ products[:, k - 1]) - enumerated) < AGREEMENT_TOLERANCE
    control = np.minimum(p, q).sum() + law.probs @ (products[:, 0] - products[:, k - 1])
    assert abs(control - enumerated) < AGREEMENT_TOLERANCE


def test_exactness_check_detects_wrong_path_weights():
    rng = np.random.default_rng(4)
    p, q = _pair(rng, 5)
    law = without_replacement_law(q, 3)
    products = path_rejection_products(p, q, law.tuples)
    uniform = np.full(len(law.probs), 1.0 / len(law.probs))
    assert abs((1.0 - uniform @ products[:, 2]) - float(rule_acceptance("rrs_wor", p, q, 3))) > 1e-3


def test_paths_with_a_repeated_token_are_refused():
    rng = np.random.default_rng(5)
    p, q = _pair(rng, 4)
    with pytest.raises(InvalidDraftCountError, match="without replacement"):
        path_rejection_products(p, q, iid_law(q, 2).tuples)  # contains (x, x)


def test_monte_carlo_is_within_its_error_of_the_exact_law():
    rng = np.random.default_rng(6)
    p, q = _pair(rng, 6)
    mean, error = monte_carlo_acceptance(p, q, 3, 4000, np.random.default_rng(7))
    assert error[0] == 0.0
    assert abs(mean[0] - np.minimum(p, q).sum()) < AGREEMENT_TOLERANCE
    for k in (2, 3):
        assert 0 < error[k - 1]
        assert abs(mean[k - 1] - float(rule_acceptance("rrs_wor", p, q, k))) < MC_SIGMAS * error[k - 1]


def _peaked_pair(vocab: int = 7):
    """``q`` almost all on token 0 and ``p`` below it there, proportional elsewhere (a
    low-temperature position where the draft is overconfident): the first draft is token 0
    on almost every path, and after its rejection the next draft is always accepted."""
    rest = np.linspace(1.0, 2.0, vocab - 1)
    rest /= rest.sum()
    return np.concatenate([[1 - 1e-2], 1e-2 * rest]), np.concatenate([[1 - 1e-3], 1e-3 * rest])


def test_monte_carlo_on_a_peaked_draft_stays_at_most_one_and_near_the_exact_law():
    p, q = _peaked_pair()
    mean, error = monte_carlo_acceptance(p, q, 4, 256, np.random.default_rng(11))
    assert (mean <= 1.0).all()
    for k in (2, 3, 4):
        exact_value = float(rule_acceptance("rrs_wor", p, q, k))
        assert abs(mean[k - 1] - exact_value) <= MC_SIGMAS * error[k - 1] + AGREEMENT_TOLERANCE


def test_the_control_variate_on_unconditioned_paths_fails_the_peaked_check():
    """The broken ingredient: the first draft drawn from ``q`` and its known mean used as a
    control variate (the estimator this module replaced) exceeds 1 with a zero error here."""
    p, q = _peaked_pair()
    products = path_rejection_products(p, q, sample_without_replacement(q, 4, 256, np.random.default_rng(11)))
    terms = products[:, :1] - products
    mean = np.minimum(p, q).sum() + terms.mean(axis=0)
    error = terms.std(axis=0, ddof=1) / np.sqrt(256)
    assert mean[3] > 1.0
    assert abs(mean[3] - float(rule_acceptance("rrs_wor", p, q, 4))) > MC_SIGMAS * error[3] + AGREEMENT_TOLERANCE


def test_paths_given_their_first_draw_follow_the_conditional_law():
    q = np.array([0.5, 0.3, 0.15, 0.05])
    n = 40000
    first = np.random.default_rng(12).choice(4, size=n, p=[0.1, 0.2, 0.3, 0.4])
    paths = sample_without_replacement(q, 3, n, np.random.default_rng(13), first=first)
    assert (paths[:, 0] == first).all()
    law = without_replacement_law(q, 3)
    for t, prob in zip(law.tuples.tolist(), law.probs):
        given_first = paths[:, 0] == t[0]
        expected = prob / q[t[0]]  # P(x_2, x_3 | x_1)
        observed = (paths[given_first] == t).all(axis=1).mean()
        assert abs(observed - expected) < MC_SIGMAS * np.sqrt(expected * (1 - expected) / given_first.sum())


def test_a_first_draw_outside_the_draft_support_is_refused():
    with pytest.raises(InvalidDraftCountError, match="first"):
        sample_without_replacement(np.array([0.5, 0.5, 0.0]), 2, 2, np.random.default_rng(0), first=[0, 2])


def test_sampled_paths_follow_the_without_replacement_law():
    q = np.array([0.5, 0.3, 0.15, 0.05])
    n = 40000
    paths = sample_without_replacement(q, 2, n, np.random.default_rng(8))
    law = without_replacement_law(q, 2)
    counts = {tuple(t): 0 for t in law.tuples.tolist()}
    for row in map(tuple, paths.tolist()):
        counts[row] += 1
    for t, prob in zip(law.tuples.tolist(), law.probs):
        assert abs(counts[tuple(t)] / n - prob) < MC_SIGMAS * np.sqrt(prob * (1 - prob) / n)


@given(st.integers(2, 40), st.integers(0, 10**6), st.integers(1, 6), st.sampled_from([0.3, 1.0, 3.0, 8.0]))
def test_fast_path_products_equal_the_reference(vocab, seed, k, scale):
    rng = np.random.default_rng(seed)
    p = otm_logits(rng, vocab, scale)
    q = otm_logits(rng, vocab, scale)
    k = min(k, int(np.count_nonzero(q)))
    paths = sample_without_replacement(q, k, 16, rng)
    fast, slow = path_rejection_products(p, q, paths), path_rejection_products_reference(p, q, paths)
    assert np.abs(fast - slow).max() <= AGREEMENT_TOLERANCE


def test_a_path_that_draws_all_but_a_sliver_of_q(monkeypatch):
    """Three tokens, the last with ``q = 1.5e-10``: after the first two draws ``1 - q(drawn)``
    is that sliver, which the difference of floats gets 1e-6 wrong; the fast path sums what is
    left instead and equals the reference (with the difference it is 5e-8 off)."""
    from otm.rules import rrs_wor

    p = np.array([2.01883851e-04, 9.19378441e-01, 8.04196754e-02])
    q = np.array([7.77571212e-04, 9.99222429e-01, 1.53786967e-10])
    p, q = p / p.sum(), q / q.sum()
    paths = np.array([[1, 0, 2]])
    slow = path_rejection_products_reference(p, q, paths)
    assert np.abs(path_rejection_products(p, q, paths) - slow).max() <= AGREEMENT_TOLERANCE
    monkeypatch.setattr(rrs_wor, "_CANCELLATION", 0.0)
    assert np.abs(path_rejection_products(p, q, paths) - slow).max() > 10 * AGREEMENT_TOLERANCE


def test_a_path_that_leaves_a_sliver_but_not_the_smallest_tokens():
    """All but 5e-7 of ``q`` drawn, but not the three largest: what is left is summed over the
    vocabulary (the tail sums of the sorted ``q`` hold only for the largest), and agrees with
    the reference; the path that did draw the three largest takes the tail sums."""
    p = np.array([0.1, 0.2, 0.3, 0.4])
    q = np.array([0.6, 0.3999995, 3e-7, 2e-7])
    paths = np.array([[0, 1, 3, 2], [0, 1, 2, 3]])
    slow = path_rejection_products_reference(p, q, paths)
    assert np.abs(path_rejection_products(p, q, paths) - slow).max() <= AGREEMENT_TOLERANCE


def test_path_products_are_not_those_of_rrs_with_replacement():
    """The residual scalars c_i (the draft law renormalised after each draw) matter: averaged
    over the law, the products are RRSw's and not RRS's (a version without them)."""
    rng = np.random.default_rng(9)
    p, q = _pair(rng, 6)
    paths = without_replacement_law(q, 3).tuples
    rrs_products = 1.0 - np.array([[float(rule_acceptance("rrs", p, q, j)) for j in (1, 2, 3)]])
    assert np.abs(law_mean(paths, path_rejection_products(p, q, paths), q) - rrs_products).max() > 1e-3


def law_mean(paths, products, q):
    law = without_replacement_law(q, paths.shape[1])
    return (law.probs @ products)[None, :]


def otm_logits(rng, vocab, scale):
    from otm.distributions import logits_to_probs

    return logits_to_probs(scale * rng.standard_normal(vocab))
