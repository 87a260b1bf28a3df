"""The speculative decoding loop (decoding.runtime.loop) on tiny models: greedy agreement at
temperature 0, the sampling transform, counters, batching, errors."""
import pytest
import torch

from decoding.runtime.loop import autoregressive_decode, probs_from_logits, speculative_decode
from decoding.models.tiny import build_tiny_pair
from decoding.runtime.trees import parse_tree
from otm.errors import InvalidDistributionError, InvalidDraftCountError, UnknownNameError
from otm.tolerances import AGREEMENT_TOLERANCE


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def pair():
    return build_tiny_pair(vocab_size=8, seed=3, draft_noise=0.25, dtype=torch.float64)


def test_probs_from_logits():
    logits = torch.tensor([[2.0, 1.0, 1.0, -1.0]], dtype=torch.float64)
    assert probs_from_logits(logits, 0.0).tolist() == [[1.0, 0.0, 0.0, 0.0]]
    full = torch.softmax(logits, -1)
    assert torch.allclose(probs_from_logits(logits, 1.0), full, atol=AGREEMENT_TOLERANCE)
    top = probs_from_logits(logits, 1.0, top_p=0.6)  # p(0) ~ 0.53 < 0.6: keep tokens 0 and 1 (first of the tie)
    assert (top[0, 2:] == 0).all()
    assert abs(float(top.sum()) - 1) <= AGREEMENT_TOLERANCE
    assert torch.allclose(top[0, :2], full[0, :2] / full[0, :2].sum(), atol=AGREEMENT_TOLERANCE)
    with pytest.raises(InvalidDistributionError):
        probs_from_logits(logits, -1.0)
    with pytest.raises(InvalidDistributionError):
        probs_from_logits(logits, 1.0, top_p=0.0)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("bad, message", [(float("nan"), "a NaN"), (float("inf"), "[+]inf"),
                                          ("row", "only -inf")])
def test_logits_with_nan_inf_or_no_finite_entry_are_a_typed_error(temperature, dtype, bad, message):
    """A NaN or +inf logit (a model overflowing in half precision), or a row of -inf, is an
    InvalidDistributionError naming the row; -inf entries elsewhere are masked tokens."""
    logits = torch.randn(3, 2, 5000, generator=torch.Generator().manual_seed(0)).to(dtype)
    logits[..., :10] = -float("inf")  # masked tokens are fine
    probs = probs_from_logits(logits, temperature)
    assert torch.isfinite(probs).all() and (probs[..., :10] == 0).all()
    if bad == "row":
        logits[1, 0] = -float("inf")
    else:
        logits[1, 0, 4321] = bad
    with pytest.raises(InvalidDistributionError, match=f"row 2 .*{message}"):
        probs_from_logits(logits, temperature)


@pytest.mark.parametrize("rule, tree", [("rrs", "binary:3"), ("kseq", "chains:3,3"), ("specinfer", "branching:3;2,1;1"),
                                        ("spechub", "binary:2"), ("greedy", "ternary:2"), ("single", "chain:4"),
                                        ("rrs_wor", "binary:3"), ("rrs_wor", "ternary:2")])
def test_temperature_zero_is_target_greedy(pair, rule, tree):
    prompts = [[1, 2, 3], [4], [0, 7]]
    reference = autoregressive_decode(pair.target, prompts, temperature=0.0, max_new_tokens=12, progress=False)
    result = speculative_decode(pair, prompts, rule, tree, temperature=0.0, max_new_tokens=12,
                                generator=torch.Generator().manual_seed(0), progress=False)
    assert result.tokens == reference.tokens
    assert reference.target_calls == 12
    assert sum(result.accepts_by_depth) > 0


def test_counters_and_summary(pair):
    result = speculative_decode(pair, [2, 5], "rrs", "chains:2,3", max_new_tokens=20,
                                generator=torch.Generator().manual_seed(1), progress=True)
    tree = parse_tree("chains:2,3")
    assert len(result.tokens) == 1
    assert len(result.tokens[0]) == 20
    assert result.target_calls == len(result.steps_tokens)
    assert 1.0 <= result.block_efficiency <= tree.max_depth + 1
    assert sum(result.steps_tokens) >= 20 > sum(result.steps_tokens[:-1])
    assert result.draft_calls == result.target_calls * tree.max_depth
    summary = result.summary()
    for key in ("rule", "tree", "tokens_generated", "target_calls", "block_efficiency", "acceptance_by_depth", "wall_seconds"):
        assert key in summary
    assert summary["tokens_generated"] == 20
    assert summary["tree"] == "chains:2,3"
    assert all(a is None or 0 <= a <= 1 for a in result.acceptance_by_depth)


def test_rows_are_independent_of_batch_padding(pair):
    """A prompt decoded at temperature 0 gives the same tokens alone and left-padded in a batch."""
    alone = speculative_decode(pair, [3], "rrs", "binary:2", temperature=0.0, max_new_tokens=8, progress=False)
    batched = speculative_decode(pair, [[1, 2, 3, 4, 5, 6], [3]], "rrs", "binary:2", temperature=0.0,
                                 max_new_tokens=8, progress=False)
    assert batched.tokens[1] == alone.tokens[0]


def test_seeded_runs_repeat_and_eos_stops(pair):
    kwargs = dict(max_new_tokens=15, progress=False)
    a = speculative_decode(pair, [1, 2], "kseq", "binary:2", generator=torch.Generator().manual_seed(5), **kwargs)
    b = speculative_decode(pair, [1, 2], "kseq", "binary:2", generator=torch.Generator().manual_seed(5), **kwargs)
    assert a.tokens == b.tokens
    eos = a.tokens[0][3]
    c = speculative_decode(pair, [1, 2], "kseq", "binary:2", generator=torch.Generator().manual_seed(5),
                           eos_token_id=eos, **kwargs)
    assert c.tokens[0][-1] == eos
    assert eos not in c.tokens[0][:-1]


def test_bad_rule_or_tree(pair):
    with pytest.raises(UnknownNameError):
        speculative_decode(pair, [1], "nope", "binary:2", max_new_tokens=2, progress=False)
    with pytest.raises(InvalidDraftCountError):  # SpecHub exists for k = 2 only
        speculative_decode(pair, [1], "spechub", "ternary:1", max_new_tokens=2, progress=False)
    with pytest.raises(InvalidDistributionError):
        speculative_decode(pair, [], "rrs", "binary:2", max_new_tokens=2, progress=False)


def test_without_replacement_with_a_small_nucleus_runs(pair, monkeypatch):
    """top-p leaves fewer draft tokens than children: the drafts past the nucleus are
    fixed tokens (otm.draft_laws.without_replacement_law) and the decode goes on."""
    from decoding.verifiers import rrs_wor

    exhausted, sample = [], rrs_wor.sample_drafts
    monkeypatch.setattr(rrs_wor, "sample_drafts",
                        lambda q, k, g: exhausted.append(bool(((q > 0).sum(-1) < k).any())) or sample(q, k, g))
    result = speculative_decode(pair, [[1, 2], [5]], "rrs_wor", "ternary:2", temperature=1.0, top_p=0.3,
                                max_new_tokens=10, generator=torch.Generator().manual_seed(4), progress=False)
    assert [len(t) for t in result.tokens] == [10, 10]
    assert all(0 <= t < 8 for row in result.tokens for t in row)
    assert any(exhausted)


class TokensOnlyVerifier:
    """A user's verifier in the documented contract's short form: ``verify`` returns only
    the ``[batch]`` tokens (here: the toolkit's rrs, stripped of its accepted index)."""

    draft_scheme = "iid"

    def __init__(self):
        from decoding.verifiers import get_verifier

        self.inner = get_verifier("rrs")

    def sample_drafts(self, draft_probs, k, generator):
        return self.inner.sample_drafts(draft_probs, k, generator)

    def uniforms_per_row(self, k):
        return self.inner.uniforms_per_row(k)

    def verify(self, target_probs, draft_probs, draft_tokens, generator):
        return self.inner.verify(target_probs, draft_probs, draft_tokens, generator).tokens


def test_a_verifier_that_returns_only_tokens_decodes(pair):
    prompts = [[1, 2, 3], [4]]
    reference = autoregressive_decode(pair.target, prompts, temperature=0.0, max_new_tokens=10, progress=False)
    greedy = speculative_decode(pair, prompts, TokensOnlyVerifier(), "binary:2", temperature=0.0, max_new_tokens=10,
                                generator=torch.Generator().manual_seed(0), progress=False)
    assert greedy.tokens == reference.tokens
    sampled = speculative_decode(pair, prompts, TokensOnlyVerifier(), "binary:2", temperature=1.0, max_new_tokens=10,
                                 generator=torch.Generator().manual_seed(0), progress=False)
    assert [len(t) for t in sampled.tokens] == [10, 10]
    assert sum(sampled.accepts_by_depth) > 0


def test_a_verifier_returning_the_wrong_shape_is_a_typed_error(pair):
    from otm.errors import ShapeMismatchError

    class Broken(TokensOnlyVerifier):
        def verify(self, target_probs, draft_probs, draft_tokens, generator):
            return draft_tokens  # [batch, k], not [batch]

    with pytest.raises(ShapeMismatchError, match="tokens of shape"):
        speculative_decode(pair, [[1, 2]], Broken(), "binary:2", max_new_tokens=4, generator=torch.Generator().manual_seed(0), progress=False)
