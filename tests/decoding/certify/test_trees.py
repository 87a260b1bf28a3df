"""assert_tree_lossless: the stream law is P for every lossless tree rule (exactly, by
otm.sequences), the toolkit's tree verifiers pass with their controls, a lossy one fails naming
the sequences, a verifier blind to its targets has no power, bad input raises typed errors."""
from fractions import Fraction as F

import numpy as np
import pytest
import torch

from decoding.certify import NoPower, OutputLawMismatch, Undetectable
from decoding.certify.bounds import set_test
from decoding.certify.trees import MAX_SEQUENCES, assert_tree_lossless, sequence_law, stream_law
from decoding.runtime.trees import InvalidTreeSpecError
from decoding.validation.own_tree_verifier import example_stale_residual_tree_verifier, node_walk_verifier
from decoding.verifiers import traversal
from otm.errors import (
    InvalidArgumentError,
    InvalidDistributionError,
    NotApplicableError,
    ShapeMismatchError,
    UnknownNameError,
)
from otm.sequences import context_independent_model, random_model, traversal_law, tree_walk_law

from .conftest import N

#: V = 3, length 3: trees up to depth 2, p changing from node to node.
MODEL = random_model(3, 3, np.random.default_rng(0))

#: Exact laws agree to this.
EXACT = 1e-12


def test_stream_law_of_a_lossless_rule_is_the_sequence_law_at_every_horizon():
    exact = context_independent_model([F(1, 3), F(2, 3)], [F(2, 3), F(1, 3)], 3)
    for model, law in ((MODEL, tree_walk_law(MODEL, 2, 2, "rrs")), (exact, traversal_law(exact, 2, 2, "iid"))):
        for horizon in (1, 2, 3):
            assert stream_law(model, law, horizon) == pytest.approx(sequence_law(model, horizon), abs=EXACT)


def test_stream_law_of_a_lossy_output_differs():
    wrong = {(y,): float(p) for y, p in enumerate(MODEL.draft(()))}  # one token from q
    assert 0.5 * np.abs(stream_law(MODEL, wrong, 2) - sequence_law(MODEL, 2)).sum() > 0.1


@pytest.mark.parametrize("verify, scheme", [(node_walk_verifier("rrs"), "iid"),
                                            (traversal.verify, "without_replacement")])
def test_the_toolkit_tree_verifiers_pass_with_their_controls(verify, scheme):
    certificate = assert_tree_lossless(verify, "kary:2,2", MODEL, scheme=scheme, n=N)
    assert certificate.stream_test.passed and certificate.control.startswith("a root target at TV")
    assert certificate.mode == "enumeration" and certificate.horizon == 3 and certificate.tv < 0.06
    assert 0 < certificate.expected_accepted < 2


def test_sampled_trees_and_a_shorter_horizon():
    verify = node_walk_verifier("rrs")
    sampled = assert_tree_lossless(verify, "kary:2,2", MODEL, n=N, max_trees=1)
    assert sampled.mode == "sampling" and sampled.rows == N
    short = assert_tree_lossless(verify, "kary:2,2", MODEL, n=N, horizon=1)
    assert short.stream_estimate.size == 3 and short.tv < sampled.tv


def test_fractional_counts_summing_past_n_by_a_rounding_are_not_impossible():
    """The stream counts are sums of exact continuation probabilities: their total can pass
    n by an ulp, which the set test must not read as a fraction above 1."""
    probs = np.array([0.5, 0.5 - 1e-7, 1e-7])
    counts = np.array([0.5, 0.5 + 3e-16, 0.0]) * 1_000
    assert set_test(counts, probs, 1_000, 1_000, 1e-9, tolerance=1e-6).passed


def test_a_lossy_tree_verifier_fails_naming_the_sequences_and_first_tokens():
    with pytest.raises(OutputLawMismatch, match="the emitted tokens, continued by the target, are not P") as failure:
        assert_tree_lossless(example_stale_residual_tree_verifier(), "kary:2,1", MODEL, n=N)
    message = str(failure.value)
    assert "sequences of 2 tokens carry" in message and "first token: token" in message
    assert failure.value.certificate.first_tv_estimate > 0.01


def test_an_output_of_target_probability_zero_fails_outright():
    zero = random_model(3, 3, np.random.default_rng(1), denominator=4)  # rows with zeros
    impossible = [y for y in range(3) if zero.target(())[y] == 0]
    assert impossible

    def emit_impossible(tree, draft_tokens, target_probs, draft_probs, generator):
        rows = draft_tokens.shape[0]
        return torch.zeros(rows, dtype=torch.int64), torch.full((rows,), impossible[0], dtype=torch.int64)

    with pytest.raises(OutputLawMismatch, match="sequences of target probability 0"):
        assert_tree_lossless(emit_impossible, "chain:1", zero, n=1_000)


def test_a_tree_verifier_blind_to_its_targets_has_no_power():
    frozen = node_walk_verifier("rrs")
    fixed = {}

    def blind(tree, draft_tokens, target_probs, draft_probs, generator):
        first = fixed.setdefault("target", target_probs[:1].clone())
        return frozen(tree, draft_tokens, first.expand_as(target_probs), draft_probs, generator)

    with pytest.raises(NoPower, match="was not detected"):
        assert_tree_lossless(blind, "chain:1", context_independent_model(MODEL.target(()), MODEL.draft(()), 2), n=N)


def test_undetectable_deviations_are_refused_before_running():
    def never(*args):
        raise AssertionError("the verifier must not run")

    with pytest.raises(Undetectable, match=r"it needs n >= [\d,]+"):
        assert_tree_lossless(never, "kary:2,1", MODEL, n=1_000, detect_tv=0.01)
    near = sequence_law(MODEL, 2)
    near[[0, 1]] += [1e-3, -1e-3]
    with pytest.raises(Undetectable, match=r"deviation given \(a stream law at TV 0.001 from P\).*it needs n >= "):
        assert_tree_lossless(never, "kary:2,1", MODEL, n=1_000, detect_law=near)
    with pytest.raises(ShapeMismatchError, match="a stream law over 9 sequences"):
        assert_tree_lossless(never, "kary:2,1", MODEL, n=1_000, detect_law=[0.5, 0.5])


@pytest.mark.parametrize("tree, model, kwargs, error, match", [
    ("kary:2,1", MODEL.target_table, {}, InvalidDistributionError, "SequenceModel"),
    ("kary:2,3", MODEL, {}, NotApplicableError, "build the model with length >= 4"),
    ("kary:2,1", MODEL, {"horizon": 3}, NotApplicableError, "horizon must be an integer in 1..depth"),
    ("kary:2,1", MODEL, {"scheme": "sorted"}, UnknownNameError, "unknown draft scheme"),
    ("kary:2,1", MODEL, {"n": 0}, InvalidArgumentError, "n must be an integer >= 1"),
    ("kary:2,", MODEL, {}, InvalidTreeSpecError, "tree spec"),
    ("chain:1", random_model(300, 2, np.random.default_rng(0)), {}, NotApplicableError, "MAX_SEQUENCES"),
])
def test_bad_input_raises_typed_errors(tree, model, kwargs, error, match):
    with pytest.raises(error, match=match):
        assert_tree_lossless(node_walk_verifier("rrs"), tree, model, **kwargs)
    assert 300**2 > MAX_SEQUENCES
