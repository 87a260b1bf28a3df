"""decoding.models.hf: load a draft/target pair offline from local directories, with the
tokenizer checks. Tiny random Qwen2 models and a byte-level BPE tokenizer are built in
code and saved with save_pretrained to a temporary directory (no network, seconds)."""
import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from decoding.models import (
    ModelNotFoundError,
    ModelPair,
    TokenizerMismatchError,
    check_tokenizers_agree,
    load_pair,
)
from decoding.models.hf import real_vocab_size
from decoding.models.teacher_forcing import score_texts
from otm.errors import NotApplicableError, OTMError, UnknownNameError

EMBEDDING_ROWS = 300  # more rows than the tokenizer's 259 tokens, like Qwen2.5's padding
MERGES = (("Ġ", "t"), ("h", "e"))


def byte_level_tokenizer(merges=MERGES, extra_tokens=()):
    """256 byte symbols, one token per merge, the extra tokens, then <|endoftext|>."""
    vocab = {symbol: i for i, symbol in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    for token in [left + right for left, right in merges] + list(extra_tokens):
        vocab.setdefault(token, len(vocab))
    backend = Tokenizer(models.BPE(vocab=vocab, merges=list(merges)))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|endoftext|>")


def tiny_qwen2(seed, hidden_size, n_layers, vocab_size=EMBEDDING_ROWS):
    config = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=n_layers,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=128,
        initializer_range=0.5,  # peaked next-token laws
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return Qwen2ForCausalLM(config).eval()


def save(directory, model, tokenizer):
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def saved_pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny_pair")
    tokenizer = byte_level_tokenizer()
    draft, target = tiny_qwen2(0, 16, 1), tiny_qwen2(1, 32, 2)
    return {
        "draft_dir": save(root / "draft", draft, tokenizer),
        "target_dir": save(root / "target", target, tokenizer),
        "draft": draft,
        "target": target,
        "tokenizer": tokenizer,
    }


@pytest.fixture(scope="module")
def loaded(saved_pair):
    return load_pair(saved_pair["draft_dir"], saved_pair["target_dir"])


def test_load_pair_round_trips_models_and_tokenizer(saved_pair, loaded):
    assert isinstance(loaded, ModelPair)
    assert not loaded.draft.training
    assert not loaded.target.training
    assert all(p.dtype == torch.float32 for p in loaded.target.parameters())
    assert loaded.vocab_size == EMBEDDING_ROWS
    assert loaded.n_real_tokens == len(saved_pair["tokenizer"]) == 259
    ids = torch.tensor([loaded.tokenizer("the theme")["input_ids"]])
    assert ids[0].tolist() == saved_pair["tokenizer"]("the theme")["input_ids"]
    with torch.inference_mode():
        for role in ("draft", "target"):
            expected = saved_pair[role](ids).logits
            got = getattr(loaded, role)(ids).logits
            assert torch.equal(expected, got), role


def test_load_pair_honours_dtype(saved_pair):
    pair = load_pair(saved_pair["draft_dir"], saved_pair["target_dir"], dtype=torch.bfloat16, name="bf16")
    assert pair.name == "bf16"
    assert {p.dtype for p in pair.draft.parameters()} == {torch.bfloat16}


def test_missing_directory_raises_typed_error(tmp_path, saved_pair):
    with pytest.raises(ModelNotFoundError, match="offline") as info:
        load_pair(tmp_path / "absent", saved_pair["target_dir"])
    assert isinstance(info.value, OTMError)
    assert isinstance(info.value, FileNotFoundError)


def test_uncached_hub_id_fails_offline_without_download(saved_pair):
    with pytest.raises(ModelNotFoundError):
        load_pair("otm-toolkit-test/no-such-model", saved_pair["target_dir"])


def test_different_vocabularies_are_rejected(tmp_path, saved_pair):
    other = save(tmp_path / "other", saved_pair["draft"], byte_level_tokenizer(extra_tokens=("xyz",)))
    with pytest.raises(TokenizerMismatchError, match="vocabularies differ"):
        load_pair(other, saved_pair["target_dir"])


def test_same_vocabulary_different_merges_is_rejected():
    # both hold the tokens "Ġt" and "he"; only the first merges ("h", "e")
    with_merge = byte_level_tokenizer(merges=MERGES)
    without_merge = byte_level_tokenizer(merges=MERGES[:1], extra_tokens=("he",))
    assert with_merge.get_vocab() == without_merge.get_vocab()
    with pytest.raises(TokenizerMismatchError, match="merges differ"):
        check_tokenizers_agree(with_merge, without_merge)
    check_tokenizers_agree(with_merge, byte_level_tokenizer(merges=MERGES))  # identical: no error


def test_model_narrower_than_tokenizer_is_rejected(tmp_path, saved_pair):
    narrow = save(tmp_path / "narrow", tiny_qwen2(2, 16, 1, vocab_size=200), saved_pair["tokenizer"])
    with pytest.raises(TokenizerMismatchError, match="200 logits"):
        load_pair(narrow, saved_pair["target_dir"])


def test_llama_cpp_padding_tokens_are_not_real():
    # GGUF tokenizers name the embedding padding "[PAD<id>]" (Qwen2.5: ids 151665..151935)
    plain = byte_level_tokenizer()
    assert real_vocab_size(plain) == len(plain) == 259
    tail = byte_level_tokenizer(extra_tokens=["<|endoftext|>"] + [f"[PAD{i}]" for i in range(259, 262)])
    assert len(tail) == 262
    assert tail.convert_ids_to_tokens(261) == "[PAD261]"
    assert real_vocab_size(tail) == 259
    # padding names followed by a real token, or a name that is not its own id: all real
    inner = byte_level_tokenizer(extra_tokens=[f"[PAD{i}]" for i in range(258, 261)])
    assert inner.convert_ids_to_tokens(len(inner) - 1) == "<|endoftext|>"
    assert real_vocab_size(inner) == len(inner)
    misnamed = byte_level_tokenizer(extra_tokens=["<|endoftext|>", "[PAD999]"])
    assert real_vocab_size(misnamed) == len(misnamed)


def test_scoring_the_loaded_pair_masks_padded_ids(loaded):
    (scores,) = score_texts(loaded, ["the theme of the thesis"])
    n, width = scores.target_logits.shape
    assert n == scores.token_ids.size - 1
    assert width == EMBEDDING_ROWS
    assert np.isneginf(scores.target_logits[:, loaded.n_real_tokens :]).all()
    assert np.isfinite(scores.draft_logits[:, : loaded.n_real_tokens]).all()


def test_scoring_holds_one_model_at_a_time_with_the_logits_of_both_at_once(saved_pair):
    pair = load_pair(saved_pair["draft_dir"], saved_pair["target_dir"])
    both = ModelPair(draft=saved_pair["draft"], target=saved_pair["target"], tokenizer=saved_pair["tokenizer"],
                     name="both at once", real_vocab_size=pair.real_vocab_size)  # no loader: never unloaded
    draft_during_target = []
    hook = pair.target.register_forward_hook(lambda *_: draft_during_target.append(pair.draft))
    texts = ["the theme", "then the thesis"]
    one_at_a_time = score_texts(pair, texts)
    hook.remove()
    assert draft_during_target == [None, None]  # the draft was unloaded while the target ran
    for got, expected in zip(one_at_a_time, score_texts(both, texts)):
        assert np.array_equal(got.target_logits, expected.target_logits)
        assert np.array_equal(got.draft_logits, expected.draft_logits)
    ids = torch.tensor([pair.tokenizer("the theme")["input_ids"]])
    with torch.inference_mode():  # loaded again at the end, the same model
        assert torch.equal(pair.draft(ids).logits, saved_pair["draft"](ids).logits)


def test_unload_and_reload_need_a_loader_and_a_role(saved_pair):
    pair = load_pair(saved_pair["draft_dir"], saved_pair["target_dir"])
    pair.unload("target")
    assert pair.target is None
    pair.reload("target")
    assert {p.dtype for p in pair.target.parameters()} == {torch.float32}  # the checkpoint's own dtype
    with pytest.raises(UnknownNameError, match="draft, target"):
        pair.unload("teacher")
    in_memory = ModelPair(draft=saved_pair["draft"], target=saved_pair["target"], tokenizer=None, name="mem")
    with pytest.raises(NotApplicableError, match="no loader"):
        in_memory.unload("draft")
    assert in_memory.draft is saved_pair["draft"]
    pair.release()
    assert pair.loader is None
