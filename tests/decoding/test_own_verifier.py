"""Bring your own verifier (decoding.validation.own_verifier): the toolkit's verifiers pass, two realistic
bugs are caught, at the stated false-alarm rate, by enumeration and by sampling."""
import numpy as np
import pytest
import torch

from decoding.validation.own_verifier import (
    VerifierReport,
    example_unmasked_draft_probs_verifier,
    example_unnormalised_residual_verifier,
    validate_verifier,
    wilson_interval,
)
from decoding.validation.stats import DEFAULT_ALPHA
from otm.optimum import optimal_acceptance
from decoding.verifiers import get_verifier
from decoding.verifiers.base import VerifierOutput
from otm.distributions import logits_to_probs
from otm.errors import InvalidDistributionError, NotApplicableError, ShapeMismatchError, UnknownNameError
from otm.rules import rule_acceptance

P = np.array([0.30, 0.25, 0.20, 0.10, 0.10, 0.05])
Q_LOGITS = np.log(np.array([0.35, 0.30, 0.15, 0.10, 0.06, 0.04]))
Q = logits_to_probs(Q_LOGITS, 1.0)
TOP_P = 0.8
Q_MASKED = logits_to_probs(Q_LOGITS, 1.0, top_p=TOP_P)  # the law the drafts really come from

#: Samples for the small-vocabulary tests: each bug is caught with a p-value far below
#: DEFAULT_ALPHA = 1e-4 (the false-alarm rate every test here runs at).
SAMPLES = 10_000


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("rule", ["rrs", "rrs_wor", "kseq", "spechub", "greedy", "specinfer"])
def test_toolkit_verifiers_pass_by_enumeration(rule):
    # acceptance interval at level 1 - alpha: it misses the exact value with probability <= alpha
    report = validate_verifier(get_verifier(rule).verify, rule, P, Q, 2, samples=SAMPLES, confidence=1 - DEFAULT_ALPHA)
    assert isinstance(report, VerifierReport)
    assert report.mode == "enumeration"
    assert report.lossless, report.summary()
    assert report.passed, report.summary()
    assert report.law_test.alpha == DEFAULT_ALPHA
    lo, hi = report.acceptance_interval
    assert lo <= float(rule_acceptance(rule, P, Q, 2)) <= hi
    assert report.optimum == pytest.approx(float(optimal_acceptance(P, Q, 2, draft_scheme=report.scheme)))
    assert report.gap_interval[0] <= report.gap <= report.gap_interval[1]
    assert report.details["mismatched_accepted_index"] == 0
    assert not report.details["beats_optimum"]
    assert report.verifier_rows >= SAMPLES


@pytest.mark.parametrize("mode", ["enumeration", "sampling"])
def test_bug_unnormalised_residual_is_caught(mode):
    good = validate_verifier(get_verifier("rrs").verify, "rrs", P, Q, 2, mode=mode, samples=SAMPLES)
    bad = validate_verifier(example_unnormalised_residual_verifier, "rrs", P, Q, 2, mode=mode, samples=SAMPLES)
    assert good.lossless
    assert good.summary().startswith("PASS")
    assert not bad.lossless, bad.summary()
    assert bad.law_test.p_value < DEFAULT_ALPHA, bad.summary()
    assert bad.summary().startswith("FAIL: output law is not p")


@pytest.mark.parametrize("mode", ["enumeration", "sampling"])
def test_bug_draft_probs_before_top_p_is_caught(mode):
    good = validate_verifier(get_verifier("rrs").verify, "rrs", P, Q_MASKED, 2, mode=mode, samples=SAMPLES)
    bad = validate_verifier(example_unmasked_draft_probs_verifier(Q), "rrs", P, Q_MASKED, 2, mode=mode, samples=SAMPLES)
    assert good.lossless
    assert good.passed
    assert not bad.lossless
    assert bad.law_test.p_value < DEFAULT_ALPHA
    # it even "accepts" more than any lossless verifier can for this draft law
    assert bad.details["beats_optimum"]
    assert bad.acceptance_interval[0] > bad.optimum


def test_large_vocabulary_by_sampling():
    rng = np.random.default_rng(0)
    vocab = 512
    logits = 2.0 * rng.normal(size=vocab)
    draft_logits = logits + 0.8 * rng.normal(size=vocab)
    p, q = logits_to_probs(logits, 1.0), logits_to_probs(draft_logits, 1.0)
    q_masked = logits_to_probs(draft_logits, 1.0, top_p=0.9)
    kwargs = dict(samples=20_000)
    good = validate_verifier(get_verifier("rrs").verify, "rrs", p, q, 2, **kwargs)
    assert good.mode == "sampling", good.summary()
    assert good.lossless, good.summary()
    assert good.passed, good.summary()
    assert not validate_verifier(example_unnormalised_residual_verifier, "rrs", p, q, 2, **kwargs).lossless
    assert validate_verifier(get_verifier("rrs").verify, "rrs", p, q_masked, 2, **kwargs).lossless
    bad = validate_verifier(example_unmasked_draft_probs_verifier(q), "rrs", p, q_masked, 2, **kwargs)
    assert not bad.lossless
    assert bad.law_test.p_value < DEFAULT_ALPHA


def test_false_alarm_rate_is_at_most_alpha():
    """The enumeration test is conservative (module docstring): over 200 seeds at
    alpha = 0.05 a lossless verifier fails at most about 5% of the time (3 standard
    errors allowed)."""
    alpha, runs = 0.05, 200
    p, q = np.array([0.4, 0.3, 0.2, 0.1]), np.array([0.1, 0.2, 0.3, 0.4])
    fails = sum(
        not validate_verifier(get_verifier("rrs").verify, "iid", p, q, 2, samples=2_000, alpha=alpha, seed=s).lossless
        for s in range(runs)
    )
    assert fails / runs <= alpha + 3 * np.sqrt(alpha * (1 - alpha) / runs)


def test_degenerate_inputs():
    one_hot = np.array([0.0, 1.0, 0.0])
    for p, q in [(P, P), (np.array([0.2, 0.3, 0.5]), one_hot), (np.array([0.5, 0.5, 0.0, 0.0]), np.array([0.0, 0.0, 0.5, 0.5]))]:
        report = validate_verifier(get_verifier("rrs").verify, "rrs", p, q, 2, samples=2_000)
        assert report.lossless
        assert np.isfinite(report.acceptance)
        assert np.isfinite(report.gap)
    assert validate_verifier(get_verifier("single").verify, "single", P, Q, 1, samples=2_000).lossless


def test_output_with_zero_target_probability_fails_outright():
    def always_last(target_probs, draft_probs, draft_tokens, generator):
        return torch.full((target_probs.shape[0],), target_probs.shape[1] - 1)

    report = validate_verifier(always_last, "iid", [0.5, 0.5, 0.0], [0.5, 0.25, 0.25], 2, samples=1_000)
    assert not report.lossless
    assert report.law_test.p_value == 0.0


def test_bad_inputs_raise_typed_errors():
    with pytest.raises(UnknownNameError):
        validate_verifier(get_verifier("rrs").verify, "no-such-rule", P, Q, 2)

    def wrong_shape(target_probs, draft_probs, draft_tokens, generator):
        return torch.zeros(target_probs.shape[0] + 1, dtype=torch.int64)

    with pytest.raises(ShapeMismatchError):
        validate_verifier(wrong_shape, "iid", P, Q, 2, samples=100)

    def float_tokens(target_probs, draft_probs, draft_tokens, generator):  # truncated to ids before
        return torch.full((target_probs.shape[0],), 0.7)

    def index_past_k(target_probs, draft_probs, draft_tokens, generator):  # an untyped IndexError before
        return VerifierOutput(draft_tokens[:, 0], torch.full((target_probs.shape[0],), 5))

    for mode in ("enumeration", "sampling"):
        with pytest.raises(ShapeMismatchError, match="integer token ids, got dtype torch.float32"):
            validate_verifier(float_tokens, "iid", P, Q, 2, mode=mode, samples=100)
        with pytest.raises(InvalidDistributionError, match=r"accepted_index outside -1..1 \(k = 2 drafts\)"):
            validate_verifier(index_past_k, "iid", P, Q, 2, mode=mode, samples=100)


def test_wilson_interval():
    lo, hi = wilson_interval(0.5, 10_000, 0.95)
    assert lo < 0.5 < hi
    assert hi - lo == pytest.approx(2 * 1.96 * 0.005, rel=1e-2)
    assert wilson_interval(1.0, 100, 0.99)[1] == 1.0


def test_a_rule_attaining_its_optimum_is_tested_against_it_when_its_law_is_too_costly(monkeypatch):
    """``optimal_pair_wor``'s exact law is not computed at the real vocabulary; the report
    then tests its acceptance against the optimum of its draft law, which it attains, and
    says so. The test catches a verifier that is lossless but not optimal (RRSw, 0.628 here
    against the optimum 0.685)."""
    from decoding.validation import own_verifier

    def too_costly(*args, **kwargs):
        raise NotApplicableError("too costly here")

    monkeypatch.setattr(own_verifier, "rule_acceptance", too_costly)
    p = np.array([0.30, 0.05, 0.25, 0.02, 0.18, 0.20])
    q = np.array([0.05, 0.40, 0.10, 0.25, 0.15, 0.05])
    kwargs = dict(mode="sampling", samples=SAMPLES, seed=3)
    good = validate_verifier(get_verifier("optimal_pair_wor").verify, "optimal_pair_wor", p, q, 2, **kwargs)
    assert good.expected_acceptance == good.optimum
    assert good.details["expected_acceptance_from"].startswith("the optimum of its draft law")
    assert good.passed, good.summary()
    bad = validate_verifier(get_verifier("rrs_wor").verify, "optimal_pair_wor", p, q, 2, **kwargs)
    assert bad.lossless and not bad.passed
    assert bad.acceptance_test.p_value < DEFAULT_ALPHA
    other = validate_verifier(get_verifier("optimal_latent").verify, "optimal_latent", p, q, 2, **kwargs)
    assert other.expected_acceptance is None and "too costly" in other.details["expected_acceptance_error"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("mode", ["enumeration", "sampling"])
def test_cuda_verifiers_are_validated_on_their_device(mode):
    """The entry point on CUDA tensors (``device="cuda"``, float32 as in decoding): the
    toolkit's RRS and optimal verifiers pass, the unnormalised-residual bug is caught."""
    for rule in ("rrs", "optimal"):
        report = validate_verifier(get_verifier(rule).verify, rule, P, Q, 2, mode=mode, samples=SAMPLES,
                                   dtype=torch.float32, device="cuda")
        assert report.lossless, report.summary()
    bad = validate_verifier(example_unnormalised_residual_verifier, "rrs", P, Q, 2, mode=mode, samples=SAMPLES,
                            dtype=torch.float32, device="cuda")
    assert not bad.lossless, bad.summary()
