"""A corpus of positions: the target's and the draft's next-token logits at every position
of some texts, stored in shards. What ``otm sweep`` analyses and ``otm corpus`` (or any
code, from any model pair) writes.

Format ``otm-corpus-1``: a folder with

- ``corpus.json``: ``{"format", "vocab_size", "dtype", "source", "texts": [names],
  "shards": [{"file", "positions", "sha256"}], ..., "sha256"}``: each shard's ``sha256`` is
  that of its file's bytes, the last ``sha256`` that of the manifest's other fields
  (:func:`manifest_digest`); :class:`Corpus` verifies both before it trusts a byte (a
  corpus written before the checksums, without them, gets the structural checks only);
- ``shard-NNNNN.npz``, each with ``target_logits`` and ``draft_logits`` (``[n, V]``, in
  ``dtype``: float32, or float16 to halve the size; ``-inf`` marks a token of probability
  0), ``text`` (``[n]`` int, index into ``texts``), ``position`` (``[n]`` int, the position
  in its text) and ``next_token`` (``[n]`` int, the token that followed, ``-1`` if unknown).
  Every row is the logits of a distribution: no NaN, no ``+inf``, at least one finite
  entry (:func:`invalid_row`); the writer refuses any other row, naming its text and
  position, and so does the reader.

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

import hashlib
import json
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .distributions import logits_to_probs
from .errors import InputFileError, InvalidArgumentError, InvalidDistributionError, ShapeMismatchError, UnknownNameError
from .files import load_numpy

FORMAT = "otm-corpus-1"
MANIFEST = "corpus.json"
DTYPES = ("float32", "float16")
ARRAYS = ("target_logits", "draft_logits", "text", "position", "next_token")
#: The manifest's field holding its own checksum (and each shard entry's, its file's).
CHECKSUM = "sha256"


def file_sha256(path: str | Path) -> str:
    """The sha256 of a file's bytes (hex), read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def manifest_digest(manifest: dict) -> str:
    """The sha256 of a manifest's fields other than :data:`CHECKSUM`, as canonical JSON."""
    fields = {key: value for key, value in manifest.items() if key != CHECKSUM}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


def invalid_row(logits: np.ndarray) -> tuple[int, str] | None:
    """The first row of ``[n, V]`` logits that is no distribution's logits, as ``(row, what
    is wrong)``: a NaN or ``+inf`` entry, or every entry ``-inf`` (no token has positive
    probability); ``None`` when every row is fine."""
    if np.isfinite(logits).all():
        return None
    broken = np.isnan(logits) | np.isposinf(logits)  # [n, V]
    empty = np.isneginf(logits).all(axis=1)  # [n]
    rows = np.flatnonzero(broken.any(axis=1) | empty)
    if not rows.size:
        return None
    row = int(rows[0])
    if empty[row]:
        return row, "only -inf logits (no token has positive probability)"
    index = int(np.flatnonzero(broken[row])[0])
    return row, f"a logit {logits[row, index]} at vocabulary index {index}"


@dataclass(frozen=True)
class ShardInfo:
    """One shard of a corpus: its file name and number of positions."""

    file: str
    positions: int
    sha256: str | None = None  # of the file's bytes; None in a corpus written before checksums


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
        except (OSError, ValueError) as exc:
            raise InputFileError(f"{manifest}: not readable JSON: {exc}") from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            found = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
            raise InputFileError(f"{manifest}: format {found!r}, expected {FORMAT!r}")
        if CHECKSUM in meta and meta[CHECKSUM] != manifest_digest(meta):
            raise InputFileError(f"{manifest}: checksum mismatch, the manifest changed after it was written; "
                                 "write the corpus again")
        try:
            if not isinstance(meta["texts"], list) or not isinstance(meta["shards"], list):
                raise TypeError("texts and shards must be lists")
            self.vocab_size = _count(meta["vocab_size"], "vocab_size")
            self.texts = [_name(text, "text") for text in meta["texts"]]
            self.shards = [ShardInfo(_name(s["file"], "shard file"), _count(s["positions"], "positions"), s.get(CHECKSUM))
                           for s in meta["shards"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise InputFileError(f"{manifest}: not a valid corpus manifest ({type(exc).__name__}: {exc}); "
                                 "write the corpus again") from None
        if any(Path(info.file).name != info.file or info.file.startswith(".") for info in self.shards):
            raise InputFileError(f"{manifest}: shard files must be plain names inside the corpus folder")
        if not self.shards:
            raise InputFileError(f"{manifest}: the corpus holds no positions; write one with at least one text")
        self.meta = meta

    @property
    def n_positions(self) -> int:
        return sum(s.positions for s in self.shards)

    def load(self, index: int) -> Shard:
        """The arrays of shard ``index``, verified (checksum, shapes, text indices, finite
        logits); :class:`InputFileError` naming the shard (and the text and position of a bad
        row) otherwise."""
        info = self.shards[index]
        path = self.folder / info.file
        try:
            if info.sha256 is not None and file_sha256(path) != info.sha256:
                raise ValueError("checksum mismatch, the file changed after it was written")
            with load_numpy(path, "npz") as data:
                arrays = {name: data[name] for name in ARRAYS}
        except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
            raise InputFileError(f"{path}: not a readable corpus shard: {exc}; write the corpus again") from None
        shard = Shard(**arrays)
        n = info.positions
        if shard.target_logits.shape != (n, self.vocab_size) or shard.draft_logits.shape != (n, self.vocab_size):
            raise InputFileError(f"{path}: logits of shape {shard.target_logits.shape} / {shard.draft_logits.shape}, "
                                 f"expected [{n}, {self.vocab_size}] for both")
        if any(getattr(shard, name).shape != (n,) for name in ("text", "position", "next_token")) or \
                not ((0 <= shard.text) & (shard.text < len(self.texts))).all():
            raise InputFileError(f"{path}: text, position and next_token must be [{n}] with text indices "
                                 f"below {len(self.texts)}")
        for model in ("target", "draft"):
            bad = invalid_row(getattr(shard, f"{model}_logits"))
            if bad is not None:
                row, what = bad
                raise InputFileError(f"{path}: text {self.texts[int(shard.text[row])]!r} position {int(shard.position[row])}: "
                                     f"the {model} logits hold {what}; write the corpus again from finite logits")
        return shard

    def spaced_rows(self, positions: int, temperature: float,
                    top_p: float | None = None) -> list[tuple[str, int, np.ndarray, np.ndarray]]:
        """``(text, position, p, q)`` at ``positions`` evenly spaced positions of the corpus,
        ``p`` and ``q`` the float64 softmaxes of their logits at ``temperature``, each cut to its
        own ``top_p`` nucleus when given (:func:`otm.distributions.logits_to_probs`)."""
        if isinstance(positions, bool) or not isinstance(positions, (int, np.integer)) or positions < 1:
            raise InvalidArgumentError(f"positions must be an integer >= 1, got {positions!r}")
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
            raise UnknownNameError(f"corpus dtype must be one of {DTYPES}, got {dtype!r}")
        if isinstance(shard_size, bool) or not isinstance(shard_size, (int, np.integer)) or shard_size < 1:
            raise InvalidArgumentError(f"shard_size must be an integer >= 1, got {shard_size!r}")
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, (int, np.integer)) or vocab_size < 1:
            raise InvalidArgumentError(f"vocab_size must be an integer >= 1, got {vocab_size!r}")
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
        position ``t``), optionally the ``[n]`` tokens that followed. A row that is no
        distribution's logits (:func:`invalid_row`), also one that overflows the corpus dtype,
        is refused with :class:`InvalidDistributionError` naming the text and position."""
        if not isinstance(text, str):
            raise InvalidArgumentError(f"a text's name must be a string, got {text!r}")
        target_logits, draft_logits = np.asarray(target_logits), np.asarray(draft_logits)
        if target_logits.ndim != 2 or target_logits.shape != draft_logits.shape or target_logits.shape[1] != self.vocab_size:
            raise ShapeMismatchError(f"text {text!r}: logits must be [n, {self.vocab_size}] for both models, got "
                                     f"{target_logits.shape} and {draft_logits.shape}")
        n = target_logits.shape[0]
        next_tokens = np.full(n, -1) if next_tokens is None else np.asarray(next_tokens)
        if next_tokens.shape != (n,):
            raise ShapeMismatchError(f"text {text!r}: next_tokens must be [{n}], got {next_tokens.shape}")
        stored = {}
        for model, logits in (("target", target_logits), ("draft", draft_logits)):
            bad = invalid_row(logits)
            if bad is not None:
                raise InvalidDistributionError(f"text {text!r} position {bad[0]}: the {model} logits hold {bad[1]}; "
                                               "a corpus stores finite logits (-inf for probability 0)")
            with np.errstate(over="ignore"):  # an overflow is reported just below
                stored[model] = logits.astype(self.dtype)
            overflow = np.argwhere(np.isfinite(logits) & ~np.isfinite(stored[model]))
            if overflow.size:
                row, column = overflow[0]
                raise InvalidDistributionError(f"text {text!r} position {row}: the {model} logit {logits[row, column]:g} at "
                                               f"vocabulary index {column} overflows {self.dtype}; write the corpus as float32")
        index = len(self.texts)
        self.texts.append(text)
        start = 0
        while start < n:
            stop = min(n, start + self.shard_size - self._count)
            self._pending["target_logits"].append(stored["target"][start:stop])
            self._pending["draft_logits"].append(stored["draft"][start:stop])
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
        checksum = file_sha256(tmp)
        os.replace(tmp, self.folder / name)
        self.shards.append({"file": name, "positions": self._count, CHECKSUM: checksum})
        self._pending = {key: [] for key in ARRAYS}
        self._count = 0

    def close(self) -> Path:
        """Write the last shard and the manifest; returns the manifest's path."""
        self._flush()
        manifest = {"format": FORMAT, "vocab_size": self.vocab_size, "dtype": self.dtype, "texts": self.texts,
                    "shards": self.shards, **self.meta}
        manifest[CHECKSUM] = manifest_digest(manifest)
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


def _count(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what} must be an integer >= 1, got {value!r}")
    return value


def _name(value, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"a {what} must be a string, got {value!r}")
    return value


__all__ = ["CHECKSUM", "Corpus", "CorpusWriter", "FORMAT", "Shard", "ShardInfo", "file_sha256", "invalid_row", "manifest_digest"]
