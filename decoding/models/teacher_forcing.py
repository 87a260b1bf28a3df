"""Teacher-forced scoring: the target's and the draft's next-token logits at every
position of a fixed text, from one forward pass of each model per text, one model at a
time.

These are the real ``(p, q)`` pairs the OTM analysis runs on: row ``t`` holds the
logits of the token ``token_ids[t + 1]`` given the prefix ``token_ids[: t + 1]``, so a
text of ``T`` tokens gives ``T - 1`` positions. Probabilities come from
:func:`otm.distributions.logits_to_probs` per temperature (``TextScores.target_probs``,
``TextScores.draft_probs``); the logits are stored once.

Padded vocabulary: a model's output embedding can have more rows than there are real
tokens (Qwen2.5: 151,936 rows, 151,665 tokens; ``ModelPair.n_real_tokens``). No text
contains the padded ids, but the models give them finite logits (about -6 where real
tokens reach +16 for the Qwen pair: a total probability near 1e-8, not 0);
:func:`score_texts` sets them to ``-inf`` (zero probability at every temperature) so
``p`` and ``q`` live on the real vocabulary while keeping the model's width ``V``.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from decoding.models.hf import ModelPair
from decoding.models.texts import BuiltinText
from otm.corpus import Corpus, CorpusWriter
from otm.distributions import logits_to_probs
from otm.errors import NotApplicableError


@dataclass(frozen=True)
class TextScores:
    """Teacher-forced logits of one text under a draft/target pair."""

    name: str
    token_ids: np.ndarray  # [T] int64, the tokenized text
    target_logits: np.ndarray  # [T - 1, V] float32; row t scores token_ids[t + 1]
    draft_logits: np.ndarray  # [T - 1, V] float32

    @property
    def next_token_ids(self) -> np.ndarray:  # [T - 1]
        """The token each row predicts (the text shifted by one)."""
        return self.token_ids[1:]

    @property
    def n_positions(self) -> int:
        return int(self.target_logits.shape[0])

    def target_probs(self, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None) -> np.ndarray:
        """``p`` at every position, float64 ``[T - 1, V]`` (see :func:`otm.distributions.logits_to_probs`)."""
        return _rows_to_probs(self.target_logits, temperature, top_k, top_p)

    def draft_probs(self, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None) -> np.ndarray:
        """``q`` at every position, float64 ``[T - 1, V]``."""
        return _rows_to_probs(self.draft_logits, temperature, top_k, top_p)


def score_texts(
    pair: ModelPair,
    texts: Iterable[str | BuiltinText | Sequence[int]],
    *,
    mask_padding: bool = True,
    progress: Callable[[Iterable], Iterable] | None = None,
) -> list[TextScores]:
    """Score each text with one forward pass of the draft and one of the target.

    ``texts`` are strings or :class:`decoding.models.texts.BuiltinText`, tokenized with the pair's
    tokenizer (special tokens as the tokenizer adds them by default; Qwen2.5 adds none),
    or sequences of token ids, used as they are (a pair without tokenizer needs these). With ``mask_padding`` the logits of ids ``>= pair.n_real_tokens`` are
    ``-inf``. Raises :class:`NotApplicableError` for a text of fewer than two tokens
    (nothing to predict).

    One model at a time: the draft scores every text, then, for a pair with a ``loader``
    (:func:`decoding.models.hf.load_pair`), it is unloaded while the target scores every text
    and loaded again at the end, so the memory peak is that of the larger model, not of
    both. ``progress`` wraps the iterable of the ``2 * len(texts)`` forward passes (e.g.
    ``tqdm``).
    """
    entries = list(texts)
    names = [entry.name if isinstance(entry, BuiltinText) else f"text{index}" for index, entry in enumerate(entries)]
    token_ids = [_token_ids(pair, entry) for entry in entries]
    for name, ids in zip(names, token_ids):
        if ids.size < 2:
            raise NotApplicableError(f"text {name!r} has {ids.size} token(s); teacher-forced scoring needs at least 2")
    vocab_size, n_real = pair.vocab_size, pair.n_real_tokens
    forwards = [(role, index) for role in ("draft", "target") for index in range(len(entries))]
    logits = {}
    try:
        for role, index in progress(forwards) if progress else forwards:
            if role == "target" and pair.draft is not None and pair.loader is not None:
                pair.unload("draft")
            rows = teacher_forced_logits(getattr(pair, role), token_ids[index], vocab_size)
            if mask_padding:
                rows[:, n_real:] = -np.inf
            logits[role, index] = rows
    finally:
        pair.reload("draft")
    return [TextScores(name, ids, logits["target", i], logits["draft", i])
            for i, (name, ids) in enumerate(zip(names, token_ids))]


def _token_ids(pair: ModelPair, entry: str | BuiltinText | Sequence[int]) -> np.ndarray:  # [T]
    if isinstance(entry, BuiltinText):
        entry = entry.text
    if isinstance(entry, str):
        if pair.tokenizer is None:
            raise NotApplicableError(f"the pair {pair.name!r} has no tokenizer: pass token ids instead of text")
        return np.asarray(pair.tokenizer(entry)["input_ids"], dtype=np.int64)
    token_ids = np.asarray(entry)
    if token_ids.ndim != 1 or not np.issubdtype(token_ids.dtype, np.integer):
        raise NotApplicableError(f"token ids must be a 1-D integer sequence, got {token_ids.dtype} shape {token_ids.shape}")
    if token_ids.size and (token_ids.min() < 0 or token_ids.max() >= pair.n_real_tokens):
        raise NotApplicableError(
            f"token ids must lie in [0, {pair.n_real_tokens}), got range [{token_ids.min()}, {token_ids.max()}]"
        )
    return token_ids.astype(np.int64)


def teacher_forced_logits(model: torch.nn.Module, token_ids: np.ndarray, vocab_size: int) -> np.ndarray:
    """Logits ``[T - 1, vocab_size]`` (float32, CPU numpy) of one causal-LM forward over
    ``token_ids`` (``[T]``); row ``t`` is the model's output after ``token_ids[: t + 1]``.
    The last position (which predicts past the text) is dropped, and columns beyond
    ``vocab_size`` (a wider padded embedding of the other model) are cut."""
    device = next(model.parameters()).device
    ids = torch.as_tensor(token_ids, dtype=torch.long, device=device)[None]  # [1, T]
    with torch.inference_mode():
        logits = model(input_ids=ids, use_cache=False).logits[0, :-1, :vocab_size]  # [T - 1, V]
    return logits.float().cpu().numpy()


def _rows_to_probs(logits: np.ndarray, temperature: float, top_k: int | None, top_p: float | None) -> np.ndarray:
    # logits: [n, V] -> probabilities [n, V] float64, one row at a time (logits_to_probs is 1-D)
    return np.stack([logits_to_probs(row, temperature, top_k, top_p) for row in logits])


def write_corpus(scores: Iterable[TextScores], folder, vocab_size: int, *, shard_size: int = 64, dtype: str = "float16",
                 **meta) -> Corpus:
    """Write teacher-forced scores (:func:`score_texts`) as an :mod:`otm.corpus` folder (the
    input of ``otm sweep``); returns it opened. ``meta`` goes to the manifest (``source``:
    what produced it).

    ``dtype="float16"`` halves the size (a logit keeps 3 significant digits: the analysis
    then runs, exactly, on the distributions of the rounded logits); ``"float32"`` keeps the
    models' output as computed."""
    with CorpusWriter(folder, vocab_size, shard_size, dtype, **meta) as writer:
        for score in scores:
            writer.add(score.name, score.target_logits, score.draft_logits, score.next_token_ids)
    return Corpus(folder)
