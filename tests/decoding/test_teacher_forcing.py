"""decoding.models.teacher_forcing: teacher-forced logits from one forward per model per text, held to
the slow obvious reference (one forward per prefix, last position), on tiny random Qwen2
models built in code; and decoding.models.texts."""
import numpy as np
import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from decoding.models import ModelPair
from decoding.models.teacher_forcing import TextScores, score_texts, teacher_forced_logits
from decoding.models.texts import BUILTIN_TEXTS, builtin_text, builtin_texts
from otm.errors import NotApplicableError, UnknownNameError
from otm.tolerances import SUM_TOLERANCE

# A prefix forward and the full-sequence forward sum the attention in different orders
# (and different padded shapes), so float32 logits agree to rounding, not bitwise.
LOGIT_TOLERANCE = 1e-4
TOKEN_IDS = [3, 17, 5, 5, 29, 0, 11, 23, 8]


def tiny_qwen2(seed, hidden_size, vocab_size):
    config = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
        initializer_range=0.5,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return Qwen2ForCausalLM(config).eval()


@pytest.fixture(scope="module")
def pair():
    # the target's embedding is wider than the draft's; ids >= 30 are padding
    return ModelPair(
        draft=tiny_qwen2(0, 16, vocab_size=40),
        target=tiny_qwen2(1, 32, vocab_size=48),
        tokenizer=None,
        name="tiny",
        real_vocab_size=30,
    )


@pytest.fixture(scope="module")
def scores(pair):
    (result,) = score_texts(pair, [TOKEN_IDS])
    return result


def prefix_reference(model, token_ids, vocab_size):
    """Row t: the last-position logits of a forward over token_ids[: t + 1]."""
    rows = []
    with torch.inference_mode():
        for t in range(len(token_ids) - 1):
            logits = model(input_ids=torch.tensor([token_ids[: t + 1]])).logits[0, -1, :vocab_size]
            rows.append(logits.numpy())
    return np.stack(rows)


def test_shapes_and_types(pair, scores):
    assert isinstance(scores, TextScores)
    assert scores.token_ids.tolist() == TOKEN_IDS
    assert scores.next_token_ids.tolist() == TOKEN_IDS[1:]
    assert scores.n_positions == len(TOKEN_IDS) - 1
    assert scores.target_logits.shape == scores.draft_logits.shape == (len(TOKEN_IDS) - 1, pair.vocab_size)
    assert pair.vocab_size == 40  # the narrower of the two embeddings
    assert scores.target_logits.dtype == np.float32


@pytest.mark.parametrize("role", ["target", "draft"])
def test_one_forward_matches_prefix_by_prefix_reference(pair, scores, role):
    reference = prefix_reference(getattr(pair, role), TOKEN_IDS, pair.vocab_size)
    got = getattr(scores, f"{role}_logits")
    real = pair.n_real_tokens
    np.testing.assert_allclose(got[:, :real], reference[:, :real], atol=LOGIT_TOLERANCE, rtol=0)


def test_reference_comparison_detects_an_off_by_one_shift(pair, scores):
    reference = prefix_reference(pair.target, TOKEN_IDS, pair.vocab_size)[:, :30]
    shifted = np.roll(scores.target_logits[:, :30], 1, axis=0)  # row t now scores token t
    assert not np.allclose(shifted, reference, atol=LOGIT_TOLERANCE, rtol=0)


def test_padded_ids_get_zero_probability(pair, scores):
    assert np.isneginf(scores.target_logits[:, 30:]).all()
    assert np.isneginf(scores.draft_logits[:, 30:]).all()
    for temperature in (0.5, 1.0, 2.0):
        probs = scores.target_probs(temperature)
        assert probs.dtype == np.float64
        assert np.all(probs[:, 30:] == 0.0)
        np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=SUM_TOLERANCE, rtol=0)


def test_unmasked_padded_ids_keep_model_logits(pair):
    (raw,) = score_texts(pair, [TOKEN_IDS], mask_padding=False)
    assert np.isfinite(raw.target_logits).all()
    np.testing.assert_array_equal(raw.target_logits, teacher_forced_logits(pair.target, np.array(TOKEN_IDS), 40))


def test_probabilities_follow_temperature_and_top_k(scores):
    greedy = scores.draft_probs(temperature=0.0)
    assert np.array_equal(greedy.argmax(axis=1), scores.draft_logits.argmax(axis=1))
    assert np.all(greedy.max(axis=1) == 1.0)
    top2 = scores.target_probs(top_k=2)
    assert np.all((top2 > 0).sum(axis=1) == 2)


def test_bad_inputs_raise_typed_errors(pair):
    with pytest.raises(NotApplicableError, match="at least 2"):
        score_texts(pair, [[4]])
    with pytest.raises(NotApplicableError, match=r"\[0, 30\)"):
        score_texts(pair, [[4, 30]])  # a padding id is not text
    with pytest.raises(NotApplicableError, match="no tokenizer"):
        score_texts(pair, ["some text"])
    with pytest.raises(NotApplicableError, match="1-D integer"):
        score_texts(pair, [[0.5, 1.5]])


def test_builtin_texts():
    assert len(BUILTIN_TEXTS) == 6
    assert len({entry.name for entry in BUILTIN_TEXTS}) == 6
    assert {entry.kind for entry in builtin_texts("code")} == {"code"}
    assert len(builtin_texts("code")) == len(builtin_texts("prose")) == 3
    assert builtin_text("binary_search").text.startswith("def binary_search")
    with pytest.raises(UnknownNameError, match="poetry"):
        builtin_texts("poetry")
    with pytest.raises(UnknownNameError, match="binary_search"):
        builtin_text("no_such_text")
