"""Engine layouts: the adapters' packing, the plain implementations of vLLM's and
transformers' published algorithms certified through their adapters, and the plain
transformers implementation drawing like the shipped one (transformers' shipped
_speculative_sampling is certified, one draft and chains, by the copy-paste test file of
docs/certify-engine-sampler.md, run by test_doc_examples.py)."""
import numpy as np
import pytest
import torch

from decoding.certify import assert_lossless, assert_rule
from decoding.certify.chains import assert_chain_lossless, block_emitted
from decoding.certify.layouts.transformers import (
    speculative_sampling,
    transformers_chain_verifier,
    transformers_verifier,
)
from decoding.certify.layouts.vllm import (
    SpecDecodeMetadata,
    rejection_sampler,
    sentinel_law,
    vllm_chain_verifier,
    vllm_verifier,
)
from decoding.verifiers import block
from otm.errors import NotApplicableError, ShapeMismatchError

from .conftest import N, N_PER_ROW_CALLS, P, Q


def test_metadata_of_chains_follows_the_layout():
    metadata = SpecDecodeMetadata.from_chains(torch.tensor([[5, 6, 7], [1, 2, 3]]))
    assert metadata.draft_token_ids.tolist() == [5, 6, 7, 1, 2, 3]
    assert metadata.num_draft_tokens == [3, 3] and metadata.max_spec_len == 3
    assert metadata.cu_num_draft_tokens.tolist() == [3, 6]
    assert metadata.cu_num_sampled_tokens.tolist() == [4, 8]
    assert metadata.target_logits_indices.tolist() == [0, 1, 2, 4, 5, 6]
    assert metadata.bonus_logits_indices.tolist() == [3, 7]


def test_sentinel_differs_from_p():
    sentinel = sentinel_law(torch.tensor([[0.5, 0.2, 0.3], [0.2, 0.2, 0.6]]))
    assert sentinel.tolist() == [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_vllm_rejection_sampler_is_single_draft_speculative_sampling(temperature):
    certificate = assert_rule(vllm_verifier(rejection_sampler, temperature=temperature), "single", P, Q, 1, n=N)
    assert "detected" in certificate.control


def test_vllm_rejection_sampler_with_ngram_drafts():
    for token in (0, 3, 7):
        assert_lossless(vllm_verifier(rejection_sampler, ngram=True), P, np.eye(8)[token], 1, n=N)


def test_vllm_rejection_sampler_on_chains():
    certificate = assert_chain_lossless(vllm_chain_verifier(rejection_sampler), P, Q, 3, n=N)
    assert 1 < certificate.tokens_per_step < 4 and "detected" in certificate.control


def test_the_toolkit_block_verifier_on_chains():
    assert_chain_lossless(block_emitted(block.verify), P, Q, 3, n=N)


def test_transformers_algorithm_through_its_adapter():
    assert_rule(transformers_verifier(speculative_sampling), "single", P, Q, 1, n=N_PER_ROW_CALLS)


def test_the_adapters_refuse_what_their_layout_cannot_carry():
    with pytest.raises(NotApplicableError, match="k=1"):
        assert_lossless(vllm_verifier(rejection_sampler), P, Q, 2, n=100, control=False)
    with pytest.raises(NotApplicableError, match="one-hot"):
        assert_lossless(vllm_verifier(rejection_sampler, ngram=True), P, Q, 1, n=100, control=False)
    with pytest.raises(ShapeMismatchError, match="output_token_ids"):
        assert_lossless(vllm_verifier(lambda *args: torch.zeros(3, dtype=torch.int32)), P, Q, 1, n=100, control=False)


transformers_utils = pytest.importorskip("transformers.generation.utils")
shipped = getattr(transformers_utils, "_speculative_sampling", None)


@pytest.mark.skipif(shipped is None, reason="this transformers has no _speculative_sampling")
def test_the_plain_implementation_draws_like_the_shipped_one():
    """Same contract, same use of the global generator: the same tokens for the same seed."""
    rows = torch.as_tensor(np.stack([P, P, P]), dtype=torch.float32).unsqueeze(0).expand(200, 3, 8)
    drafts_law = torch.as_tensor(np.stack([Q, Q]), dtype=torch.float32).unsqueeze(0).expand(200, 2, 8)
    drafts = torch.multinomial(torch.as_tensor(Q), 400, replacement=True, generator=torch.Generator().manual_seed(1)).view(200, 2)
    ours = transformers_chain_verifier(speculative_sampling)(rows, drafts_law, drafts, torch.Generator().manual_seed(2))
    theirs = transformers_chain_verifier(shipped)(rows, drafts_law, drafts, torch.Generator().manual_seed(2))
    assert torch.equal(ours, theirs)
