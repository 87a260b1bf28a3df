"""The i.i.d. optimum for many k from one sort (what per-position tables use) against the
exact prefix scan in rationals and the per-k optimum."""
from fractions import Fraction

import numpy as np
import pytest

from otm.distributions import logits_to_probs
from otm.formulations.prefix_scan import iid_optimum_for_ks
from otm.optimum import optimal_acceptance
from otm.tolerances import AGREEMENT_TOLERANCE


def _pair(rng, vocab, scale=2.0):
    return logits_to_probs(scale * rng.standard_normal(vocab)), logits_to_probs(scale * rng.standard_normal(vocab))


DEGENERATE = {
    "p = q": ([0.2, 0.3, 0.5], [0.2, 0.3, 0.5]),
    "one-hot p": ([0.0, 1.0, 0.0], [0.5, 0.25, 0.25]),
    "one-hot q": ([0.2, 0.3, 0.5], [0.0, 0.0, 1.0]),
    "disjoint": ([0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.5, 0.5]),
    "q zero where p positive": ([0.4, 0.4, 0.2], [0.5, 0.5, 0.0]),
    "V = 1": ([1.0], [1.0]),
}


@pytest.mark.parametrize("name", DEGENERATE)
def test_iid_optimum_for_ks_matches_exact_prefix_scan_on_degenerate_inputs(name):
    p, q = DEGENERATE[name]
    ks = [1, 2, 3, 5]
    fast = iid_optimum_for_ks(p, q, ks)
    exact = [optimal_acceptance(np.array([Fraction(v).limit_denominator() for v in p], dtype=object),
                                np.array([Fraction(v).limit_denominator() for v in q], dtype=object), k) for k in ks]
    assert np.all(np.isfinite(fast))
    np.testing.assert_allclose(fast, [float(e) for e in exact], atol=AGREEMENT_TOLERANCE, rtol=0)


def test_iid_optimum_for_ks_matches_optimal_acceptance_on_random_pairs():
    rng = np.random.default_rng(1)
    for vocab in (2, 7, 300):
        p, q = _pair(rng, vocab)
        ks = list(range(1, 9))
        np.testing.assert_allclose(iid_optimum_for_ks(p, q, ks), [optimal_acceptance(p, q, k) for k in ks], atol=AGREEMENT_TOLERANCE, rtol=0)


def test_iid_optimum_check_detects_a_perturbed_draft():
    rng = np.random.default_rng(2)
    p, q = _pair(rng, 50)
    q_bad = q.copy()
    top, bottom = np.argmax(q), np.argmin(q)
    q_bad[[top, bottom]] = q[[bottom, top]]  # a swap of two draft probabilities
    assert abs(iid_optimum_for_ks(p, q_bad, [2])[0] - optimal_acceptance(p, q, 2)) > AGREEMENT_TOLERANCE
