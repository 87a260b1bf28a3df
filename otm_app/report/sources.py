"""Where ``otm report`` gets its ``(p, q)`` rows and decoding prompts: the embedded Qwen
pair on the built-in texts, a tiny random pair (tests), or toy distributions without any
model (``--no-models``).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from decoding.models.teacher_forcing import TextScores
from decoding.models.texts import BUILTIN_TEXTS, BuiltinText, builtin_text
from otm.errors import OTMError

#: ``--pair`` values.
PAIRS = ("qwen2.5-coder", "tiny")

#: Toy mode: vocabulary size, positions per toy text, logit scale, and the draft's
#: similarity ``lam`` per toy text (``q = softmax((lam z + (1 - lam) z') / T)``, SpecTr (Sun et al. 2023)
#: App. B.2 family, :func:`otm.families.similarity_pair`).
TOY_VOCAB_SIZE = 512
TOY_POSITIONS = 24
TOY_LOGIT_SCALE = 3.0
TOY_SIMILARITIES = {"toy_close": 0.9, "toy_far": 0.6}

#: Tiny-pair mode: token ids per text and number of texts.
TINY_TEXT_LENGTH = 20
TINY_TEXTS = 2

#: Characters of a built-in text used as a decoding prompt.
PROMPT_CHARS = 120


@dataclass(frozen=True)
class ScoredTexts:
    """Teacher-forced rows of every text, in text order (row ``i`` of the texts one after another;
    :meth:`logits_at` copies the rows asked for, nothing stacks them all).

    Attributes:
        scores: one :class:`decoding.models.teacher_forcing.TextScores` per text.
        kinds: ``"code"``, ``"prose"``, ``"user"`` or ``"toy"`` per text.
        source: what produced them (pair name, or a toy description).
    """

    scores: list
    kinds: list
    source: str

    @property
    def text_of_row(self) -> np.ndarray:  # [n] index of the text each row belongs to
        return np.concatenate([np.full(s.n_positions, i) for i, s in enumerate(self.scores)])

    @property
    def n_positions(self) -> int:
        """Rows of every text together (the stacked arrays' length, without stacking them)."""
        return sum(s.n_positions for s in self.scores)

    @property
    def vocab_size(self) -> int:
        return int(self.scores[0].target_logits.shape[1])

    def logits_at(self, rows) -> tuple[np.ndarray, np.ndarray]:  # [r, V] each
        """``(target_logits[rows], draft_logits[rows])`` of the stacked rows, copying only those
        rows (stacking every row copies all the logits of both models)."""
        rows = np.asarray(rows, dtype=np.int64)
        ends = np.cumsum([s.n_positions for s in self.scores])
        text = np.searchsorted(ends, rows, side="right")
        local = rows - (ends - [s.n_positions for s in self.scores])[text]
        shape = (0, self.vocab_size)
        target = [self.scores[i].target_logits[j] for i, j in zip(text, local)]
        draft = [self.scores[i].draft_logits[j] for i, j in zip(text, local)]
        return (np.stack(target) if target else np.zeros(shape, np.float32),
                np.stack(draft) if draft else np.zeros(shape, np.float32))


def resolve_texts(spec: str | None) -> list[BuiltinText]:
    """``--texts``: ``None`` = every built-in text; else comma-separated entries, each a
    built-in name (:data:`decoding.models.texts.BUILTIN_TEXTS`) or a path to a UTF-8 file whose
    whole content is one text (kind ``"user"``, named by the file's stem)."""
    if spec is None:
        return list(BUILTIN_TEXTS)
    texts = []
    for entry in (e.strip() for e in spec.split(",")):
        if not entry:
            continue
        path = Path(entry)
        if path.is_file():
            try:
                content = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise OTMError(f"--texts: {entry} is not a readable UTF-8 text file ({exc})") from None
            if not content.strip():
                raise OTMError(f"--texts: {entry} is empty")
            texts.append(BuiltinText(path.stem, "user", content))
        else:
            texts.append(builtin_text(entry))  # UnknownNameError lists the names
    if not texts:
        raise OTMError("--texts: no text given")
    return texts


def toy_texts(seed: int) -> ScoredTexts:
    """Toy rows without any model: per toy text, ``TOY_POSITIONS`` positions of Gaussian
    logits ``z`` (target) and ``lam z + (1 - lam) z'`` (draft) over ``TOY_VOCAB_SIZE`` tokens."""
    rng = np.random.default_rng(seed)
    scores = []
    for name, lam in TOY_SIMILARITIES.items():
        z = TOY_LOGIT_SCALE * rng.standard_normal((TOY_POSITIONS, TOY_VOCAB_SIZE))
        other = TOY_LOGIT_SCALE * rng.standard_normal((TOY_POSITIONS, TOY_VOCAB_SIZE))
        token_ids = np.arange(TOY_POSITIONS + 1, dtype=np.int64)
        scores.append(TextScores(name, token_ids, z.astype(np.float32), (lam * z + (1 - lam) * other).astype(np.float32)))
    description = ", ".join(f"{n}: lam = {lam}" for n, lam in TOY_SIMILARITIES.items())
    return ScoredTexts(scores, ["toy"] * len(scores), f"toy Gaussian logits, V = {TOY_VOCAB_SIZE}, scale {TOY_LOGIT_SCALE} ({description})")


def load_report_pair(name: str, device="cpu", dtype: str = "bfloat16"):
    """The model pair of ``--pair`` in ``--dtype`` (the exact analysis is exact for the
    distributions of the models in that dtype). The Qwen pair raises
    :class:`decoding.models.ModelPackageMissingError` when its wheels are missing."""
    from otm_app.commands.decode import DTYPES

    if name not in PAIRS:
        raise OTMError(f"--pair must be one of {', '.join(PAIRS)}, got {name!r}")
    if dtype not in DTYPES:
        raise OTMError(f"--dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if name == "qwen2.5-coder":
        from decoding.models.qwen import load_qwen_pair

        return load_qwen_pair(device, DTYPES[dtype])
    from decoding.models.tiny import build_tiny_pair

    return build_tiny_pair(device=device, dtype=DTYPES[dtype])


def score_report_texts(pair, texts: Sequence[BuiltinText], seed: int, progress=None) -> ScoredTexts:
    """Teacher-forced scoring of ``texts``, one model at a time (a pair without tokenizer
    scores ``TINY_TEXTS`` seeded random token-id texts instead); ``progress`` wraps the
    forward passes."""
    from decoding.models.teacher_forcing import score_texts

    if pair.tokenizer is None:
        rng = np.random.default_rng(seed)
        entries = [rng.integers(0, pair.n_real_tokens, TINY_TEXT_LENGTH) for _ in range(TINY_TEXTS)]
        names, kinds = [f"random_ids_{i}" for i in range(TINY_TEXTS)], ["random token ids"] * TINY_TEXTS
    else:
        entries, names, kinds = list(texts), [t.name for t in texts], [t.kind for t in texts]
    scored = score_texts(pair, entries, progress=progress)  # one model at a time
    scores = [TextScores(name, s.token_ids, s.target_logits, s.draft_logits) for name, s in zip(names, scored)]
    return ScoredTexts(scores, kinds, pair.name)


def decoding_prompts(pair, texts: Sequence[BuiltinText], seed: int, count: int = 1) -> list[tuple[str, list]]:
    """``count`` ``(label, token ids)`` prompts for step 3: the starts (``PROMPT_CHARS``
    characters) of the first code text, then the first prose text, then the remaining
    texts in order; seeded token ids for a pair without tokenizer."""
    if pair.tokenizer is None:
        rng = np.random.default_rng(seed + 1)
        return [(f"random_ids_{i}", rng.integers(0, pair.n_real_tokens, 6).tolist()) for i in range(count)]
    firsts = [next((t for t in texts if t.kind == kind), None) for kind in ("code", "prose")]
    ordered = [t for t in firsts if t is not None] + [t for t in texts if t not in firsts]
    return [(t.name, pair.tokenizer(t.text[:PROMPT_CHARS])["input_ids"]) for t in ordered[:count]]


__all__ = [
    "PAIRS",
    "ScoredTexts",
    "decoding_prompts",
    "load_report_pair",
    "resolve_texts",
    "score_report_texts",
    "toy_texts",
]
