"""assert_lossless and assert_rule: correct verifiers pass, each kind of wrong one fails with a
message naming what is wrong; deterministic; any dtype; typed errors for bad input."""
import numpy as np
import pytest
import torch

from decoding.certify import (
    AcceptanceMismatch,
    Certificate,
    IndexMismatch,
    OutputLawMismatch,
    RuleMismatch,
    assert_lossless,
    assert_rule,
)
from decoding.validation.own_verifier import example_unmasked_draft_probs_verifier, example_unnormalised_residual_verifier
from decoding.verifiers import get_verifier
from decoding.verifiers.base import VerifierOutput
from otm.distributions import logits_to_probs
from otm.errors import InvalidArgumentError, InvalidDistributionError, NotApplicableError, UnknownNameError
from otm.optimum import optimal_acceptance
from otm.rules import rule_acceptance

from .conftest import N, P, Q


@pytest.mark.parametrize("rule", ["rrs", "rrs_wor", "spechub", "greedy", "optimal"])
def test_toolkit_verifiers_are_their_rule(rule):
    certificate = assert_rule(get_verifier(rule).verify, rule, P, Q, 2, n=N)
    assert isinstance(certificate, Certificate)
    assert certificate.mode == "enumeration" and certificate.rows >= N
    assert certificate.output_test.passed and certificate.position_test.passed and certificate.tuple_test["passed"]
    assert certificate.rule_acceptance == pytest.approx(float(rule_acceptance(rule, P, Q, 2)), abs=1e-6)
    lo, hi = certificate.acceptance_interval
    assert lo <= certificate.rule_acceptance <= hi
    assert certificate.optimum == pytest.approx(float(optimal_acceptance(P, Q, 2, draft_scheme=certificate.scheme)), abs=1e-6)
    assert "detected" in certificate.control


@pytest.mark.parametrize("scheme, rule", [("iid", "rrs"), ("without_replacement", "rrs_wor"), ("iid", "single")])
def test_lossless_verifiers_pass_assert_lossless(scheme, rule):
    k = 1 if rule == "single" else 3
    certificate = assert_lossless(get_verifier(rule).verify, P, Q, k, scheme, n=N)
    assert certificate.output_test.passed
    assert certificate.acceptance <= certificate.optimum + certificate.power.acceptance
    assert certificate.report().startswith("verifier on")


def test_sampled_drafts_when_the_tuples_are_many():
    certificate = assert_lossless(get_verifier("rrs").verify, P, Q, 2, n=N, max_tuples=10)
    assert certificate.mode == "sampling" and certificate.rows == N and certificate.tuples is None
    with pytest.raises(OutputLawMismatch):
        assert_lossless(example_unnormalised_residual_verifier, P, Q, 2, n=N, max_tuples=10)
    certificate = assert_rule(get_verifier("rrs").verify, "rrs", P, Q, 2, n=N, max_tuples=10)
    assert certificate.tuple_test is None and certificate.position_test.passed


def test_unnormalised_residual_fails_on_the_output_law():
    with pytest.raises(OutputLawMismatch) as failure:
        assert_lossless(example_unnormalised_residual_verifier, P, Q, 2, n=N)
    message = str(failure.value)
    assert message.startswith("FAIL: output law is not p: TV estimate")
    assert "worst tokens token" in message and "power: with probability >= 0.99" in message
    assert failure.value.certificate.tv_estimate > failure.value.certificate.power.tv


def first_draft_only(target_probs, draft_probs, draft_tokens, generator):  # [b, V], [b, k, V], [b, k]
    """Lossless (single-draft speculative sampling on x_1) but not RRS: it ignores x_2..x_k."""
    out = get_verifier("single").verify(target_probs, draft_probs[:, :1], draft_tokens[:, :1].contiguous(), generator)
    return VerifierOutput(out.tokens, out.accepted_index)


def test_a_lossless_verifier_that_is_not_the_rule_it_claims():
    assert_lossless(first_draft_only, P, Q, 2, n=N)  # lossless: passes
    with pytest.raises(RuleMismatch) as failure:
        assert_rule(first_draft_only, "rrs", P, Q, 2, n=N)
    message = str(failure.value)
    assert "not rule rrs" in message
    assert "draft tuples deviates from the rule's: tuple (" in message or "instead of" in message


def test_kseq_is_not_rrs():
    with pytest.raises(RuleMismatch, match="not rule rrs"):
        assert_rule(get_verifier("kseq").verify, "rrs", P, Q, 2, n=N // 3)  # k-SEQ's verifier is slow on the CPU


def test_draft_probabilities_the_drafts_did_not_come_from():
    logits = np.log(Q)
    masked = logits_to_probs(logits, 1.0, top_k=3)  # the drafts come from top-3 q, the verifier gets all of q
    with pytest.raises((OutputLawMismatch, AcceptanceMismatch)) as failure:
        assert_lossless(example_unmasked_draft_probs_verifier(Q), P, masked, 2, n=N)
    assert "FAIL:" in str(failure.value)


def wrong_index(target_probs, draft_probs, draft_tokens, generator):
    out = get_verifier("rrs").verify(target_probs, draft_probs, draft_tokens, generator)
    return VerifierOutput(out.tokens, torch.where(out.accepted_index >= 0, 1 - out.accepted_index, out.accepted_index))


def test_accepted_index_that_points_elsewhere():
    with pytest.raises(IndexMismatch, match="accepted_index points at a draft other than the output token"):
        assert_lossless(wrong_index, P, Q, 2, n=N)


def test_deterministic_for_a_seed():
    first = assert_rule(get_verifier("rrs").verify, "rrs", P, Q, 2, n=N, seed=3)
    second = assert_rule(get_verifier("rrs").verify, "rrs", P, Q, 2, n=N, seed=3)
    other = assert_rule(get_verifier("rrs").verify, "rrs", P, Q, 2, n=N, seed=4)
    assert first.report() == second.report()
    assert first.acceptance != other.acceptance


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16])
def test_runs_unchanged_in_other_dtypes(dtype):
    certificate = assert_rule(get_verifier("rrs").verify, "rrs", P, Q, 2, n=N, dtype=dtype)
    assert certificate.dtype == str(dtype).replace("torch.", "")
    assert (certificate.cast_tv == 0) == (dtype == torch.float64)
    with pytest.raises(OutputLawMismatch):
        assert_lossless(example_unnormalised_residual_verifier, P, Q, 2, n=N, dtype=dtype)


#: Instances where the exact rule accepts surely for some tuples (cells of probability 0) and
#: bfloat16 rounding puts a little mass there: without the dtype's tolerance every seed failed.
ROUNDING_CASES = {
    "greedy": (np.array([0.0865, 0.0009, 0.9126]), np.array([0.0452, 0.4794, 0.4754])),
    "spechub": (np.array([0.0156, 0.145, 0.22, 0.0238, 0.007, 0.4546, 0.134]),
                np.array([0.1045, 0.1618, 0.2163, 0.0588, 0.0775, 0.253, 0.128])),
}


@pytest.mark.parametrize("rule", sorted(ROUNDING_CASES))
def test_bfloat16_rounding_is_not_a_rule_mismatch(rule):
    p, q = (x / x.sum() for x in ROUNDING_CASES[rule])
    certificate = assert_rule(get_verifier(rule).verify, rule, p, q, 2, n=N, dtype=torch.bfloat16)
    assert certificate.power.tolerance == pytest.approx(2.0**-7, rel=1e-3)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_cuda():
    certificate = assert_rule(get_verifier("rrs").verify, "rrs", P, Q, 2, n=N, device="cuda", dtype=torch.bfloat16)
    assert certificate.device.startswith("cuda")
    with pytest.raises(OutputLawMismatch):
        assert_lossless(example_unnormalised_residual_verifier, P, Q, 2, n=N, device="cuda")


def test_bad_input_is_a_typed_error():
    verify = get_verifier("rrs").verify
    with pytest.raises(UnknownNameError):
        assert_lossless(verify, P, Q, 2, "sorted", n=N)
    with pytest.raises(InvalidArgumentError):
        assert_lossless(verify, P, Q, 2, n=0)
    with pytest.raises(InvalidArgumentError):
        assert_lossless(verify, P, Q, 2, alpha=1.5)
    with pytest.raises(InvalidDistributionError):
        assert_lossless(verify, np.full(8, np.nan), Q, 2)
    with pytest.raises(NotApplicableError, match="own q_i"):
        assert_rule(verify, "specinfer", P, Q, 2)
    with pytest.raises(UnknownNameError):
        assert_rule(verify, "no_such_rule", P, Q, 2)
