"""Negative controls: the broken twins are detected at the same n on correct verifiers, and
a run that could not have seen a bug raises NoPower instead of passing."""
import numpy as np
import pytest
import torch

from decoding.certify import NoPower, assert_lossless, assert_rule
from decoding.certify.assertions import _target_twin
from decoding.verifiers import get_verifier
from otm.distributions import total_variation

from .conftest import N, P, Q


def test_the_target_twin_is_at_the_stated_distance():
    for tv in (0.01, 0.1, 0.3):
        twin = _target_twin(P, tv)
        assert total_variation(twin, P) == pytest.approx(tv, rel=1e-12)
    assert _target_twin(P, 0.99) is None
    assert _target_twin(np.array([1.0, 0.0]), 0.1) is None


def test_controls_fire_on_correct_verifiers():
    certificate = assert_rule(get_verifier("rrs").verify, "rrs", P, Q, 2, n=N)
    assert certificate.control.startswith("a target at TV ")
    assert "an acceptance changed by" in certificate.control
    for part in certificate.control.split("; "):
        statistic, threshold = part.split("(T=")[1].rstrip(")").split(" >= ")
        assert float(statistic) >= float(threshold)


def frozen_target_verifier(p):
    """A verifier that reads p from a buffer filled once (a static CUDA-graph input never
    refreshed): lossless for that p, blind to the target it is given."""
    frozen = torch.as_tensor(p, dtype=torch.float32)
    rrs = get_verifier("rrs").verify

    def verify(target_probs, draft_probs, draft_tokens, generator):  # [b, V], [b, k, V], [b, k]
        return rrs(frozen.to(target_probs).expand_as(target_probs), draft_probs, draft_tokens, generator)

    return verify


def test_a_verifier_blind_to_its_target_has_no_power():
    with pytest.raises(NoPower, match="no power here: the same verifier given a target at TV .* was not detected"):
        assert_lossless(frozen_target_verifier(P), P, Q, 2, n=N)
    certificate = assert_lossless(frozen_target_verifier(P), P, Q, 2, n=N, control=False)  # what a test without controls says
    assert certificate.output_test.passed and certificate.control == "not run"


def test_too_few_rows_have_no_power():
    with pytest.raises(NoPower, match="cannot be built"):
        assert_lossless(get_verifier("rrs").verify, P, Q, 2, n=20)


def test_the_acceptance_control_at_acceptance_zero():
    p = np.array([0.5, 0.5, 0.0, 0.0])
    q = np.array([0.0, 0.0, 0.5, 0.5])  # disjoint: acceptance 0, the control must move outputs into the drafts
    certificate = assert_rule(get_verifier("rrs").verify, "rrs", p, q, 2, n=N)
    assert certificate.rule_acceptance == 0 and "an acceptance changed by" in certificate.control
