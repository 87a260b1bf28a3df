"""scripts/wor_end_peel.py: the nesting that peels ends and backtracks gives the construction's levels
on random rows (and not without its check of exposed cuts), certified on a row, and the table."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import wor_end_peel  # noqa: E402

from tests.decoding.corpus_support import random_runs, synthetic_corpus, table_rows  # noqa: E402

#: The two nestings add the same float terms in other orders, on rows whose levels stay away from 1.
LEVEL_AGREEMENT = 1e-9


@pytest.mark.parametrize("k", [3, 4])
def test_levels_are_the_nestings(k):
    """On 40 random rows per ``k``, every level of the longest run equals the construction's; some of
    the rows need splits (an inner cut emptying first), and without the check of exposed cuts some row
    gets other levels."""
    splits, differs = 0, 0
    for exact, flux, run, masses in random_runs(k, range(40)):
        run_masses = wor_end_peel.RunMasses(masses)
        levels, stats = wor_end_peel.end_peel(flux, run, run_masses)
        cuts = slice(run[0] + 1, run[1] + 1)
        np.testing.assert_allclose(levels[cuts], exact[cuts], rtol=0, atol=LEVEL_AGREEMENT)
        splits += stats["splits"]
        unchecked, _ = wor_end_peel.end_peel(flux, run, run_masses, check_exposed=False)
        differs += bool(np.max(np.abs(unchecked[cuts] - exact[cuts])) > 1e-6)
    assert splits > 0 and differs > 0


def test_certificate_on_a_row():
    rng = np.random.default_rng(7)
    logits = 2 * rng.normal(size=150)
    p, q = np.exp(logits), np.exp(logits + rng.normal(size=150))
    row = wor_end_peel.row_table(p / p.sum(), q / q.sum(), 3)
    assert row is not None and row["stats"]["splits"] > 0
    built, peeled = row["certificates"]
    assert built <= 1e-12 and peeled <= 1e-12
    assert row["same"] == row["run"][1] - row["run"][0]


def test_table_on_a_small_corpus(tmp_path, capsys):
    synthetic_corpus(tmp_path, seed=3, rows=2, vocab=200, scale=2)
    assert wor_end_peel.main(["--corpus", str(tmp_path / "corpus"), "--positions", "2", "--top", "150"]) == 0
    rows = table_rows(capsys.readouterr().out)
    assert len(rows) == 2
    for row in rows:
        if "none of" not in row[3]:
            built, peeled = (float(v) for v in row[-1].split("/"))
            assert built <= 1e-12 and peeled <= 1e-12
