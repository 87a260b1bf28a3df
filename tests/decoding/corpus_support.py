"""A synthetic ``otm corpus`` directory for the tests of the scripts that read one, the rows of the
markdown tables they print, and masses broken on purpose for their certificates."""
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


def random_run(seed: int, k: int, size: tuple[int, int] = (20, 80)):
    """``scripts/wor_nesting_spine.longest_run`` (runs of at least 5 ranks) on a seeded random row of
    ``size`` tokens: target logits twice standard normals, draft logits those plus standard normals
    (the caller has put ``scripts/`` on the path)."""
    from wor_nesting_spine import longest_run

    rng = np.random.default_rng(seed)
    n = int(rng.integers(*size))
    logits = 2 * rng.normal(size=n)
    p, q = np.exp(logits), np.exp(logits + rng.normal(size=n))
    return longest_run(p / p.sum(), q / q.sum(), k, 5)


def random_runs(k: int, seeds, size: tuple[int, int] = (20, 80)):
    """:func:`random_run` at each of ``seeds``, those with a run of at least 5 ranks."""
    for seed in seeds:
        found = random_run(seed, k, size)
        if found is not None:
            yield found


def table_rows(printed: str) -> list[list[str]]:
    """The body rows of the markdown table a script printed (after its header and separator lines),
    each as its cells between the outer bars (unstripped)."""
    return [line.split("|")[1:-1] for line in printed.strip().splitlines()[2:]]


class HalvedMasses:
    """Clock masses whose ``across_cuts`` are half the true ones: bounds computed from them
    overshoot the levels they bound, which the scripts' certificates must catch."""

    def __init__(self, masses):
        self.masses = masses

    def across_cuts(self, f, lo, hi, t):
        return self.masses.across_cuts(f, lo, hi, t) / 2
