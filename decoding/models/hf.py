"""Load a draft/target pair of Hugging Face causal language models that share a tokenizer.

Offline only: every ``from_pretrained`` call passes ``local_files_only=True``, so a path
is read from disk and a hub id is read from the local Hugging Face cache; nothing is
downloaded. A speculative-decoding pair needs one vocabulary: token id ``i`` must mean
the same string for the draft and the target, which :func:`check_tokenizers_agree` checks.
"""
from __future__ import annotations

import gc
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from decoding.models.errors import ModelNotFoundError, TokenizerMismatchError
from otm.errors import NotApplicableError, UnknownNameError

#: The roles of a pair's two models (attribute names of :class:`ModelPair`).
ROLES = ("draft", "target")

# Strings whose encodings must agree between the two tokenizers (code, prose, unicode,
# a special token), a cheap end-to-end check on top of comparing vocabularies and merges.
_PROBE_TEXTS = (
    "def f(x):\n    return x ** 2  # square\n",
    "The quick brown fox jumps over the lazy dog.",
    "naïve café, 東京, emoji 🙂, tabs\tand  spaces",
)


@dataclass
class ModelPair:
    """A draft model, a target model and the tokenizer they share.

    ``vocab_size`` is the width of the logits both models produce (the smaller of the two
    output embeddings). It can exceed the number of real tokens: Qwen2.5 pads 151,665
    tokens to 151,936 embedding rows, and its GGUF tokenizer even names the padding ids
    ``[PAD151665]`` .. ``[PAD151935]``. ``real_vocab_size`` is the number of ids that are
    real tokens (ids ``>= real_vocab_size`` are padding no text contains); ``None`` means
    every id is real.

    ``loader`` (set by :func:`load_pair`) loads a model of the pair again from its source,
    given its role (``"draft"`` or ``"target"``); with it :meth:`unload` and :meth:`reload`
    let a caller hold one model at a time. ``None``: the models exist only in memory.
    """

    draft: torch.nn.Module | None
    target: torch.nn.Module | None
    tokenizer: object
    name: str
    real_vocab_size: int | None = None
    loader: Callable[[str], torch.nn.Module] | None = None

    @property
    def vocab_size(self) -> int:
        return min(_output_rows(self.draft), _output_rows(self.target))

    @property
    def n_real_tokens(self) -> int:
        """Ids ``0 .. n_real_tokens - 1`` are real tokens (at most ``vocab_size``)."""
        if self.real_vocab_size is None:
            return self.vocab_size
        return min(self.real_vocab_size, self.vocab_size)

    @property
    def device(self) -> torch.device:
        return next(self.target.parameters()).device

    def release(self) -> None:
        """Drop the references to both models and collect garbage (a 1.5B fp32 model
        holds about 6 GB); the pair is unusable afterwards."""
        self.draft = None
        self.target = None
        self.loader = None
        gc.collect()

    def unload(self, role: str) -> None:
        """Drop the ``role`` model (``"draft"`` or ``"target"``) until :meth:`reload`; needs
        a ``loader``. Weights loaded in the checkpoint's own dtype are memory-mapped, so this
        gives back the pages its forwards touched."""
        _check_role(role)
        if self.loader is None:
            raise NotApplicableError(f"the pair {self.name!r} has no loader: its models cannot be loaded again")
        setattr(self, role, None)
        gc.collect()

    def reload(self, role: str) -> None:
        """Load the ``role`` model again with ``loader`` if it was unloaded."""
        _check_role(role)
        if getattr(self, role) is None:
            if self.loader is None:
                raise NotApplicableError(f"the pair {self.name!r} has no loader: its models cannot be loaded again")
            setattr(self, role, self.loader(role))


def load_pair(
    draft: str | Path,
    target: str | Path,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
    *,
    name: str | None = None,
) -> ModelPair:
    """Load ``draft`` and ``target`` (local directories or cached hub ids) as a :class:`ModelPair`.

    Both models are put in eval mode on ``device`` in ``dtype``; ``None`` is each
    checkpoint's own dtype (its ``config.json``), the one whose safetensors weights stay
    memory-mapped on the CPU instead of being converted into memory. A lower precision
    changes the models, hence ``p`` and ``q``: the exact analysis is then exact for the
    distributions of that model. The tokenizers of the two are loaded and checked with
    :func:`check_tokenizers_agree`; the target's is kept. The pair's ``loader`` loads a
    model again the same way (:meth:`ModelPair.unload`).

    Raises :class:`ModelNotFoundError` if a model or tokenizer is not available locally,
    :class:`TokenizerMismatchError` if the tokenizers differ or a model's output
    embedding has fewer rows than the tokenizer has tokens.
    """
    for source in (draft, target):
        check_model_folder(source)
    draft_tokenizer = load_tokenizer(draft)
    target_tokenizer = load_tokenizer(target)
    check_tokenizers_agree(draft_tokenizer, target_tokenizer)
    sources = {"draft": draft, "target": target}

    def loader(role: str) -> torch.nn.Module:
        return load_causal_lm(sources[role], device, dtype)

    draft_model, target_model = loader("draft"), loader("target")
    n_real = real_vocab_size(target_tokenizer)
    for role, model in (("draft", draft_model), ("target", target_model)):
        if _output_rows(model) < n_real:
            raise TokenizerMismatchError(
                f"the {role} model produces {_output_rows(model)} logits but the tokenizer has "
                f"{n_real} tokens: the model was not trained with this tokenizer"
            )
    pair_name = name if name is not None else f"{Path(str(draft)).name} -> {Path(str(target)).name}"
    return ModelPair(
        draft=draft_model,
        target=target_model,
        tokenizer=target_tokenizer,
        name=pair_name,
        real_vocab_size=n_real,
        loader=loader,
    )


def check_model_folder(source: str | Path) -> None:
    """:class:`ModelNotFoundError` for a local directory without ``config.json``, which
    ``save_pretrained`` always writes: transformers would fail on it obscurely (asking for
    sentencepiece). A source that is no directory is left to the loaders (a cached hub id)."""
    path = Path(str(source))
    if path.is_dir() and not (path / "config.json").is_file():
        raise ModelNotFoundError(f"{str(source)!r} is not a Hugging Face model folder (no config.json); give a folder "
                                 "written by save_pretrained, or an id already in the Hugging Face cache")


def real_vocab_size(tokenizer) -> int:
    """Number of leading ids that are real tokens: ``len(tokenizer)`` less a tail of
    llama.cpp padding tokens (``[PAD<id>]`` at id ``<id>``, added when a GGUF file pads the
    vocabulary to the embedding size)."""
    size = len(tokenizer)
    while size > 0 and tokenizer.convert_ids_to_tokens(size - 1) == f"[PAD{size - 1}]":
        size -= 1
    return size


def load_tokenizer(source: str | Path, **kwargs):
    """``AutoTokenizer.from_pretrained(source, local_files_only=True, **kwargs)`` with a typed error."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(source), local_files_only=True, **kwargs)
    except OSError as exc:
        raise ModelNotFoundError(
            f"no tokenizer found offline at {str(source)!r} ({exc}); give a local directory "
            "holding tokenizer files, or an id already in the Hugging Face cache"
        ) from exc


def load_causal_lm(source: str | Path, device: str | torch.device, dtype: torch.dtype | None, **kwargs):
    """``AutoModelForCausalLM.from_pretrained`` offline, moved to ``device``, in eval mode
    (``dtype=None``: the checkpoint's own dtype)."""
    from transformers import AutoModelForCausalLM

    try:
        model = AutoModelForCausalLM.from_pretrained(
            str(source), dtype="auto" if dtype is None else dtype, local_files_only=True, **kwargs
        )
    except OSError as exc:
        raise ModelNotFoundError(
            f"no causal LM found offline at {str(source)!r} ({exc}); give a local directory "
            "holding config.json and weights, or an id already in the Hugging Face cache"
        ) from exc
    return model.to(device).eval()


def check_tokenizers_agree(draft_tokenizer, target_tokenizer) -> None:
    """Raise :class:`TokenizerMismatchError` unless the two tokenizers are the same map
    between strings and ids: same vocabulary (token -> id), same added/special tokens,
    same BPE merges when both are byte-pair encoders, and the same ids on probe strings."""
    draft_vocab, target_vocab = draft_tokenizer.get_vocab(), target_tokenizer.get_vocab()
    if draft_vocab != target_vocab:
        only_draft = sorted(set(draft_vocab.items()) - set(target_vocab.items()))[:3]
        only_target = sorted(set(target_vocab.items()) - set(draft_vocab.items()))[:3]
        raise TokenizerMismatchError(
            f"vocabularies differ ({len(draft_vocab)} draft tokens, {len(target_vocab)} target "
            f"tokens); e.g. only in draft {only_draft}, only in target {only_target}"
        )
    if draft_tokenizer.all_special_tokens != target_tokenizer.all_special_tokens:
        raise TokenizerMismatchError(
            f"special tokens differ: draft {draft_tokenizer.all_special_tokens}, "
            f"target {target_tokenizer.all_special_tokens}"
        )
    draft_merges, target_merges = _bpe_merges(draft_tokenizer), _bpe_merges(target_tokenizer)
    if draft_merges != target_merges:
        raise TokenizerMismatchError(
            f"BPE merges differ ({_count(draft_merges)} draft merges, {_count(target_merges)} target merges)"
        )
    for text in _PROBE_TEXTS:
        draft_ids = draft_tokenizer(text)["input_ids"]
        target_ids = target_tokenizer(text)["input_ids"]
        if draft_ids != target_ids:
            raise TokenizerMismatchError(
                f"the tokenizers encode {text!r} differently: draft {draft_ids}, target {target_ids}"
            )


def _bpe_merges(tokenizer) -> list | None:
    """The merge list of a fast BPE tokenizer, or None when there is none to compare."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    model = json.loads(backend.to_str()).get("model", {})
    merges = model.get("merges")
    return None if merges is None else [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in merges]


def _count(merges: list | None) -> str:
    return "no" if merges is None else str(len(merges))


def _check_role(role: str) -> None:
    if role not in ROLES:
        raise UnknownNameError(f"a pair's model roles are {', '.join(ROLES)}, got {role!r}")


def _output_rows(model: torch.nn.Module) -> int:
    """Number of logits the model produces per position (rows of its output embedding)."""
    return int(model.get_output_embeddings().weight.shape[0])
