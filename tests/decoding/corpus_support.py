"""A synthetic ``otm corpus`` directory for the tests of the scripts that read one, and the rows of
the markdown tables they print."""
from __future__ import annotations

import numpy as np

from otm.corpus import CorpusWriter


def synthetic_corpus(tmp_path, seed: int, rows: int, vocab: int, scale: float = 1.0, noise: float = 1.0) -> None:
    """A corpus directory ``tmp_path / "corpus"`` of ``rows`` positions of one text over ``vocab``
    tokens: target logits ``scale`` times standard normals, draft logits those plus ``noise`` times
    standard normals (seeded)."""
    rng = np.random.default_rng(seed)
    with CorpusWriter(tmp_path / "corpus", vocab, shard_size=4, source="test") as writer:
        target = scale * rng.normal(size=(rows, vocab))
        writer.add("synthetic", target, target + noise * rng.normal(size=(rows, vocab)))


def table_rows(printed: str) -> list[list[str]]:
    """The body rows of the markdown table a script printed (after its header and separator lines),
    each as its cells between the outer bars (unstripped)."""
    return [line.split("|")[1:-1] for line in printed.strip().splitlines()[2:]]

