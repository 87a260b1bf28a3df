"""End-to-end losslessness of speculative decoding with draft trees
(tests/decoding/lossless_support.py).

Oracle: the exact law of the first ``L`` generated tokens under the target's autoregressive
sampling, by enumerating all ``V^L`` sequences (products of the target's conditional laws).
Sample: the first ``L`` tokens of ``N`` independent speculative decodes (one batch of ``N``
copies of the prompt, one seed). Test: Pearson chi-square, cells with expected count < 5
lumped into one, rejected at p-value < ``FALSE_ALARM`` (the false-alarm rate of each test
for a correct sampler; seeds are fixed, so the outcome is deterministic). A deliberately
broken verifier (residual ``p`` instead of ``norm(max(p - q, 0))``) must be rejected.
"""
import pytest
import torch

from decoding.runtime.loop import speculative_decode
from decoding.models.tiny import build_tiny_pair
from decoding.verifiers import get_verifier
from decoding.verifiers.base import VerifierOutput, draw_uniforms, sample_iid, sample_weighted
from tests.decoding.lossless_support import FALSE_ALARM, PROMPT, VOCAB, decode_law_pvalue, tiny_lossless_pair

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def pair():
    return tiny_lossless_pair()


@pytest.mark.parametrize(
    "rule, tree",
    [
        ("single", "chain:3"),
        ("rrs", "binary:2"),
        ("rrs", "chains:3,2"),
        ("rrs_wor", "ternary:2"),
        ("kseq", "chains:4,3"),
        ("specinfer", "branching:3;2,1"),
        ("spechub", "binary:2"),
        ("greedy", "kary:3,2"),
        pytest.param("importance_sampling_truncated", "binary:2", marks=pytest.mark.slow),  # its verifier solves a small LP per row
    ],
)
def test_first_tokens_follow_target_law(pair, rule, tree):
    pvalue, result = decode_law_pvalue(pair, rule, tree)
    assert pvalue > FALSE_ALARM, f"{rule} on {tree}: chi-square p-value {pvalue:.2e}"
    assert result.block_efficiency > 1.0  # drafts were accepted, so the tree was exercised


def test_top_p_law(pair):
    pvalue, _ = decode_law_pvalue(pair, "rrs", "binary:2", temperature=0.8, top_p=0.8, seed=1)
    assert pvalue > FALSE_ALARM


class _ResidualIsTarget:
    """Broken single/RRS-like rule: on rejection it samples from ``p`` instead of the
    renormalised residual ``max(p - q, 0)`` (so the output law is ``min(p, q) + (1 - a) p``)."""

    draft_scheme = "iid"
    name = "broken"

    def sample_drafts(self, draft_probs, k, generator):
        return sample_iid(draft_probs, k, generator)

    def verify(self, target_probs, draft_probs, draft_tokens, generator):
        batch, k = draft_tokens.shape
        u = draw_uniforms(generator, batch, k + 1, target_probs)
        accepted = torch.full((batch,), -1, dtype=torch.int64)
        for i in range(k - 1, -1, -1):
            x = draft_tokens[:, i]
            p_x = target_probs.gather(1, x[:, None])[:, 0]
            q_x = draft_probs[:, i].gather(1, x[:, None])[:, 0]
            accepted = torch.where(u[:, i] * q_x < p_x, i, accepted)
        residual = sample_weighted(target_probs, u[:, k])
        chosen = draft_tokens.gather(1, accepted.clamp(min=0)[:, None])[:, 0]
        return VerifierOutput(torch.where(accepted >= 0, chosen, residual), accepted)


def test_broken_residual_is_detected(pair):
    broken = _ResidualIsTarget()
    pvalue, _ = decode_law_pvalue(pair, broken, "chains:2,2", single_rule=broken)
    assert pvalue < FALSE_ALARM


def test_draft_equals_target_accepts_everything():
    same = build_tiny_pair(vocab_size=VOCAB, seed=0, draft_noise=0.0, dtype=torch.float64)
    result = speculative_decode(same, [PROMPT] * 50, "rrs", "binary:3", max_new_tokens=4,
                                generator=torch.Generator().manual_seed(0), progress=False)
    assert result.block_efficiency == 4.0
    assert result.acceptance_by_depth == [1.0, 1.0, 1.0]
    assert get_verifier("rrs").draft_scheme == "iid"
