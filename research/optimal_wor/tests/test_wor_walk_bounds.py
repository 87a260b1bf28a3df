"""Smoke test of research/optimal_wor/wor_walk_bounds.py ``--gaps``: what the bounds of Lemma 9
leave open, against the full levels."""
from __future__ import annotations

from research.optimal_wor import wor_walk_bounds
from tests.decoding.corpus_support import synthetic_corpus


def test_wor_walk_bounds_gaps_hold_the_least_level(tmp_path, capsys, monkeypatch):
    """``--gaps`` on a small synthetic corpus: some walks are left open, and for each the least
    level of its open step, from the full levels, lies between the bound (i) and the level that
    (ii)/(iii) prove, with the walk's ``u`` above the bound (i) (else the bounds decide it); with
    the printed bound (i) doubled, some row breaks this."""
    synthetic_corpus(tmp_path, seed=4, rows=4, vocab=80, scale=3)

    def rows() -> list:
        wor_walk_bounds.main(["--corpus", str(tmp_path / "corpus"), "--positions", "3", "--top", "80", "--ks", "3",
                              "--draws", "150", "--gaps", "--levels-limit", "60"])
        cells = [[c.strip() for c in line.strip("|").split("|")] for line in capsys.readouterr().out.splitlines()]
        return [[float(row[5]), float(row[6]), row[7], float(row[8])] for row in cells if row[0] == "synthetic"]

    def holds(bound, u, at_most, level) -> bool:  # (4 decimals printed)
        return bound <= u and bound <= level + 1e-4 and (at_most == "none" or level <= float(at_most) + 1e-4)

    found = rows()
    assert len(found) >= 3 and all(holds(*row) for row in found)
    bound = wor_walk_bounds.span_lower_bound
    monkeypatch.setattr(wor_walk_bounds, "span_lower_bound", lambda *args, **kwargs: 2 * bound(*args, **kwargs))
    assert not all(holds(*row) for row in rows())
