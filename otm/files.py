"""Reading NumPy files without pickles, with an error that says what the file is.

``np.load(path, allow_pickle=False)`` guesses the format from the file's first bytes: on a
text file it falls back to unpickling and fails with "This file contains pickled (object)
data", which misleads (the file holds no NumPy data at all), and it returns an archive where
the caller expects one array, or the reverse, which fails later and obscurely. Here the caller
says which of the two it expects.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

#: The first bytes of a ``.npy`` file and of a ``.npz`` (zip) archive.
MAGIC = {"npy": b"\x93NUMPY", "npz": b"PK\x03\x04"}
_WHAT = {"npy": "a .npy array", "npz": "an .npz archive"}


def load_numpy(path: str | Path, kind: str):
    """``np.load(path, allow_pickle=False)`` for a file of ``kind`` ``"npy"`` (returns the array)
    or ``"npz"`` (returns the ``NpzFile``: use it as a context manager). A file of the other
    kind, or of neither, raises :class:`ValueError` that says what it is (callers wrap it in
    their typed input error)."""
    if kind not in MAGIC:
        raise ValueError(f"kind must be 'npy' or 'npz', got {kind!r}")
    with open(path, "rb") as handle:
        head = handle.read(max(len(m) for m in MAGIC.values()))
    found = next((name for name, magic in MAGIC.items() if head.startswith(magic)), None)
    if found is None:
        raise ValueError(f"not a NumPy file: expected {_WHAT[kind]}, and it starts with {head!r}")
    if found != kind:
        raise ValueError(f"{_WHAT[found]}, expected {_WHAT[kind]}")
    return np.load(path, allow_pickle=False)
