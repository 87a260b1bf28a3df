"""A corpus of positions: the target's and the draft's next-token logits at every position
of some texts, stored in shards. What ``otm sweep`` analyses and ``otm corpus`` (or any
code, from any model pair) writes.

Format ``otm-corpus-1``: a folder with

- ``corpus.json``: ``{"format", "vocab_size", "dtype", "source", "texts": [names],
  "shards": [{"file", "positions"}], ...}``;
- ``shard-NNNNN.npz``, each with ``target_logits`` and ``draft_logits`` (``[n, V]``, in
  ``dtype``: float32, or float16 to halve the size; ``-inf`` marks a token of probability
  0), ``text`` (``[n]`` int, index into ``texts``), ``position`` (``[n]`` int, the position
  in its text) and ``next_token`` (``[n]`` int, the token that followed, ``-1`` if unknown).

Logits, not probabilities, are stored so that every temperature and top-p can be
analysed from one recording. A position's identity is ``(text, position)``; shards are
independent units of work (a sweep's tasks, its resumption unit).

>>> import tempfile, numpy as np
>>> folder = tempfile.mkdtemp()
>>> with CorpusWriter(folder, vocab_size=3, shard_size=2, source="doctest") as writer:
...     writer.add("t", np.zeros((3, 3)), np.ones((3, 3)))
>>> corpus = Corpus(folder)
>>> corpus.n_positions, [s.positions for s in corpus.shards]
(3, [2, 1])
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .distributions import logits_to_probs
from .errors import InputFileError, ShapeMismatchError
from .files import load_numpy

FORMAT = "otm-corpus-1"
MANIFEST = "corpus.json"
DTYPES = ("float32", "float16")
ARRAYS = ("target_logits", "draft_logits", "text", "position", "next_token")


@dataclass(frozen=True)
class ShardInfo:
    """One shard of a corpus: its file name and number of positions."""

    file: str
    positions: int


@dataclass(frozen=True)
class Shard:
    """The arrays of one shard (see the module docstring)."""

    target_logits: np.ndarray  # [n, V]
    draft_logits: np.ndarray  # [n, V]
    text: np.ndarray  # [n]
    position: np.ndarray  # [n]
    next_token: np.ndarray  # [n]


class Corpus:
    """A corpus folder, opened for reading (the manifest is checked; shards load on demand)."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        manifest = self.folder / MANIFEST
        if not manifest.is_file():
            raise InputFileError(f"{self.folder}: not an otm corpus (no {MANIFEST}); write one with `otm corpus`")
        try:
            meta = json.loads(manifest.read_text())
        except ValueError as exc:
            raise InputFileError(f"{manifest}: not valid JSON: {exc}") from None
        if meta.get("format") != FORMAT:
            raise InputFileError(f"{manifest}: format {meta.get('format')!r}, expected {FORMAT!r}")
        self.meta = meta
        self.vocab_size = int(meta["vocab_size"])
        self.texts = list(meta["texts"])
        self.shards = [ShardInfo(s["file"], int(s["positions"])) for s in meta["shards"]]

    @property
    def n_positions(self) -> int:
        return sum(s.positions for s in self.shards)

    def load(self, index: int) -> Shard:
        """The arrays of shard ``index``; :class:`InputFileError` when it is missing or damaged."""
        path = self.folder / self.shards[index].file
        try:
            with load_numpy(path, "npz") as data:
                arrays = {name: data[name] for name in ARRAYS}
        except (OSError, KeyError, ValueError) as exc:
            raise InputFileError(f"{path}: not a readable corpus shard: {exc}") from None
        shard = Shard(**arrays)
        if shard.target_logits.shape != shard.draft_logits.shape or shard.target_logits.shape[1] != self.vocab_size:
            raise InputFileError(f"{path}: logits of shape {shard.target_logits.shape} / {shard.draft_logits.shape}, "
                                 f"expected [n, {self.vocab_size}] for both")
        return shard

    def spaced_rows(self, positions: int, temperature: float,
                    top_p: float | None = None) -> list[tuple[str, int, np.ndarray, np.ndarray]]:
        """``(text, position, p, q)`` at ``positions`` evenly spaced positions of the corpus,
        ``p`` and ``q`` the float64 softmaxes of their logits at ``temperature``, each cut to its
        own ``top_p`` nucleus when given (:func:`otm.distributions.logits_to_probs`)."""
        wanted = sorted(set(np.linspace(0, self.n_positions - 1, positions).round().astype(int).tolist()))
        rows, start = [], 0
        for index, info in enumerate(self.shards):
            hits = [i - start for i in wanted if start <= i < start + info.positions]
            if hits:
                shard = self.load(index)
                for i in hits:
                    p = logits_to_probs(shard.target_logits[i].astype(np.float64), temperature, top_p=top_p)
                    q = logits_to_probs(shard.draft_logits[i].astype(np.float64), temperature, top_p=top_p)
                    rows.append((self.texts[int(shard.text[i])], int(shard.position[i]), p, q))
            start += info.positions
        return rows


class CorpusWriter:
    """Writes a corpus: ``add`` the rows of one text at a time; shards of ``shard_size``
    positions are written as they fill; ``close`` (or leaving the ``with`` block) writes the
    last shard and the manifest. Files are written to a temporary name and renamed, so an
    interrupted writer leaves no half shard."""

    def __init__(self, folder: str | Path, vocab_size: int, shard_size: int = 64, dtype: str = "float32",
                 source: str = "", **meta):
        if dtype not in DTYPES:
            raise InputFileError(f"corpus dtype must be one of {DTYPES}, got {dtype!r}")
        if shard_size < 1:
            raise InputFileError(f"shard_size must be >= 1, got {shard_size}")
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.vocab_size, self.shard_size, self.dtype = int(vocab_size), int(shard_size), dtype
        self.meta = {"source": source, **meta}
        self.texts: list[str] = []
        self.shards: list[dict] = []
        self._pending: dict[str, list] = {name: [] for name in ARRAYS}
        self._count = 0

    def add(self, text: str, target_logits, draft_logits, next_tokens=None) -> None:
        """Append the positions of one text: ``[n, V]`` logits of each model (row ``t`` =
        position ``t``), optionally the ``[n]`` tokens that followed."""
        target_logits, draft_logits = np.asarray(target_logits), np.asarray(draft_logits)
        if target_logits.ndim != 2 or target_logits.shape != draft_logits.shape or target_logits.shape[1] != self.vocab_size:
            raise ShapeMismatchError(f"text {text!r}: logits must be [n, {self.vocab_size}] for both models, got "
                                     f"{target_logits.shape} and {draft_logits.shape}")
        n = target_logits.shape[0]
        index = len(self.texts)
        self.texts.append(text)
        next_tokens = np.full(n, -1) if next_tokens is None else np.asarray(next_tokens)
        start = 0
        while start < n:
            stop = min(n, start + self.shard_size - self._count)
            self._pending["target_logits"].append(target_logits[start:stop].astype(self.dtype))
            self._pending["draft_logits"].append(draft_logits[start:stop].astype(self.dtype))
            self._pending["text"].append(np.full(stop - start, index, dtype=np.int32))
            self._pending["position"].append(np.arange(start, stop, dtype=np.int32))
            self._pending["next_token"].append(next_tokens[start:stop].astype(np.int64))
            self._count += stop - start
            if self._count >= self.shard_size:
                self._flush()
            start = stop

    def _flush(self) -> None:
        if not self._count:
            return
        name = f"shard-{len(self.shards):05d}.npz"
        arrays = {key: np.concatenate(parts) for key, parts in self._pending.items()}
        tmp = self.folder / (name + ".tmp.npz")
        np.savez(tmp, **arrays)
        os.replace(tmp, self.folder / name)
        self.shards.append({"file": name, "positions": self._count})
        self._pending = {key: [] for key in ARRAYS}
        self._count = 0

    def close(self) -> Path:
        """Write the last shard and the manifest; returns the manifest's path."""
        self._flush()
        manifest = {"format": FORMAT, "vocab_size": self.vocab_size, "dtype": self.dtype, "texts": self.texts,
                    "shards": self.shards, **self.meta}
        path = self.folder / MANIFEST
        tmp = self.folder / (MANIFEST + ".tmp")
        tmp.write_text(json.dumps(manifest, indent=1))
        os.replace(tmp, path)
        return path

    def __enter__(self) -> CorpusWriter:
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is None:
            self.close()


__all__ = ["Corpus", "CorpusWriter", "FORMAT", "Shard", "ShardInfo"]
