"""scripts/wor_level_sandwich.py: the windows against their definition, Lemma 13's bounds around the
exact levels at every round until they meet them (and not with the masses halved), and the table."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import wor_level_sandwich  # noqa: E402

from tests.decoding.corpus_support import HalvedMasses, synthetic_corpus, table_rows  # noqa: E402

#: Lemma 13's inequalities at the exact levels, as flux relative to the cut's: float rounding of
#: sums of a few hundred terms, on a row whose levels stay away from 1.
FLUX_ROUNDING = 1e-12


def _window_by_definition(known: np.ndarray, j: int, run: tuple[int, int], s: float) -> tuple[int, int]:
    """The ranks joined to cut ``j`` through the other cuts of ``run`` whose value exceeds ``s``."""
    f, t = j - 1, j
    while f > run[0] and known[f] > s:
        f -= 1
    while t < run[1] and known[t + 1] > s:
        t += 1
    return f, t


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=3, max_size=25), st.data())
def test_pieces_are_the_windows(values, data):
    known = np.concatenate([[0.0], np.asarray(values, dtype=float) / 6, [0.0]])
    run = (0, len(values))
    j = data.draw(st.integers(1, len(values)))
    pieces = list(wor_level_sandwich._pieces(j, known, run))
    assert pieces[0][0] == 0 and pieces[-1][1] == np.inf
    assert all(a[1] == b[0] for a, b in zip(pieces, pieces[1:]))
    for start, end, f, t in pieces:
        for s in (start, (start + min(end, 2.0)) / 2):
            assert (f, t) == _window_by_definition(known, j, run, s)


def _row(n: int = 120, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    logits = 2 * rng.normal(size=n)
    p, q = np.exp(logits), np.exp(logits + rng.normal(size=n))
    return p / p.sum(), q / q.sum()


def test_bounds_close_on_the_exact_levels():
    from decoding.verifiers.optimal_wor_numba import CompiledClockSetMasses
    from otm.rules.optimal_wor import wor_parameters

    p, q = _row()
    row = wor_level_sandwich.row_table(p, q, 3)
    assert row is not None and row["excess"] <= FLUX_ROUNDING
    assert row["rounds"] is not None and row["rounds"] > 1  # settles, and not in one round
    counts = [row["unsettled"][r] for r in sorted(row["unsettled"])]
    assert counts[-1] == 0 and all(a >= b for a, b in zip(counts, counts[1:]))
    params = wor_parameters(p, q, 3, clock_masses=CompiledClockSetMasses)
    levels, flux = (np.asarray([float(v) for v in values]) for values in (params.levels, params.flux))
    q_ranked = q[params.order] / q[params.order].sum()
    masses = wor_level_sandwich.RunMasses(CompiledClockSetMasses(q_ranked, 3))
    f0, t0 = row["run"]
    *_, (_, lower, upper) = wor_level_sandwich.sandwich(flux, row["run"], masses, t0 - f0)
    np.testing.assert_allclose(lower[f0 + 1:t0 + 1], levels[f0 + 1:t0 + 1], rtol=0, atol=1e-9)
    np.testing.assert_allclose(upper[f0 + 1:t0 + 1], levels[f0 + 1:t0 + 1], rtol=0, atol=1e-9)


def test_halved_masses_break_the_bounds():
    p, q = _row()
    row = wor_level_sandwich.row_table(p, q, 3, rounds=3, masses_wrapper=HalvedMasses)
    assert row["excess"] > 1e-3


def test_table_on_a_small_corpus(tmp_path, capsys):
    synthetic_corpus(tmp_path, seed=3, rows=2, vocab=200, scale=2)
    assert wor_level_sandwich.main(["--corpus", str(tmp_path / "corpus"), "--positions", "2", "--top", "100"]) == 0
    rows = table_rows(capsys.readouterr().out)
    assert len(rows) == 2
    for row in rows:
        assert "none of" in row[3] or (row[-2].strip() != "-" and float(row[-1]) <= FLUX_ROUNDING)
