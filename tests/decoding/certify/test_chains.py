"""assert_chain_lossless: the toolkit's block verification passes; emitted prefixes that are
not the drafts, malformed outputs and a verifier blind to its target are named."""
import pytest
import torch

from decoding.certify import IndexMismatch, NoPower
from decoding.certify.chains import assert_chain_lossless, block_emitted
from decoding.verifiers import block
from otm.errors import InvalidDistributionError, InvalidDraftCountError, ShapeMismatchError

from .conftest import N, P, Q

correct = block_emitted(block.verify)


def test_block_verification_passes_with_its_control():
    certificate = assert_chain_lossless(correct, P, Q, 2, n=N)
    assert certificate.pair_test.passed and certificate.control.startswith("targets at pair TV")
    assert certificate.tv < 0.06


def test_an_emitted_prefix_that_is_not_the_drafts():
    def shifted(target_probs, draft_probs, draft_tokens, generator):
        emitted = correct(target_probs, draft_probs, draft_tokens, generator)
        long = emitted[:, 1] >= 0  # two tokens or more: the first is an accepted draft
        emitted[long, 0] = (emitted[long, 0] + 1) % target_probs.shape[-1]
        return emitted

    with pytest.raises(IndexMismatch, match="the accepted prefix is not the drafted chain"):
        assert_chain_lossless(shifted, P, Q, 2, n=N)


def test_malformed_outputs_and_inputs():
    with pytest.raises(ShapeMismatchError):
        assert_chain_lossless(lambda t, d, x, g: torch.zeros(3, dtype=torch.int64), P, Q, 2, n=100)
    with pytest.raises(InvalidDistributionError, match="-1 padding"):
        assert_chain_lossless(lambda t, d, x, g: torch.full((x.shape[0], 3), -1), P, Q, 2, n=100)
    with pytest.raises(InvalidDraftCountError):
        assert_chain_lossless(correct, P, Q, 0)


def test_a_chain_verifier_blind_to_its_target_has_no_power():
    frozen = torch.as_tensor(P, dtype=torch.float32)

    def blind(target_probs, draft_probs, draft_tokens, generator):
        return correct(frozen.expand_as(target_probs), draft_probs, draft_tokens, generator)

    with pytest.raises(NoPower, match="was not detected"):
        assert_chain_lossless(blind, P, Q, 2, n=N)
