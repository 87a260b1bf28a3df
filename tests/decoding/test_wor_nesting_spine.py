"""scripts/wor_nesting_spine.py: the spine against its definition, the peels of a known nesting, the
scans' bounds below the levels their cuts reach (and above them with the masses halved), and the
table."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import wor_nesting_spine  # noqa: E402

from tests.decoding.corpus_support import HalvedMasses, synthetic_corpus, table_rows  # noqa: E402

#: A scan's bound over the level its cut reaches, as flux relative to the cut's: float rounding of a
#: difference of sums of a few hundred terms.
SCAN_ROUNDING = 1e-12


def _spine_by_definition(levels: np.ndarray, f0: int, top: int) -> list[tuple[int, int]]:
    """The spine walked level by level, rank by rank: the components of the previous spine joined by
    cuts above the level, the largest kept (the first of equal ones)."""
    out, (f, t) = [], (f0, top)
    for level in sorted({0.0, *levels[f0 + 1:top + 1].tolist()})[:-1]:
        components, start = [], f
        for r in range(f + 1, t + 2):
            if r == t + 1 or levels[r] <= level:
                components.append((start, r - 1))
                start = r
        f, t = max(components, key=lambda c: (c[1] - c[0], -c[0]))
        if t <= f:
            break
        out.append((f, t))
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=2, max_size=30), st.integers(0, 2**32 - 1))
def test_spine_keeps_the_largest_component(steps, seed):
    n = len(steps)
    levels = np.zeros(n + 2)
    levels[1:n + 1] = np.asarray(steps) / 5 + np.random.default_rng(seed).random(n) * 1e-3
    spine = wor_nesting_spine.spine(levels, 0, n)
    assert [(f, t) for _, _, f, t in spine] == _spine_by_definition(levels, 0, n)
    assert all(duration > 0 for _, duration, _, _ in spine)


def test_peels_of_a_known_nesting():
    """Cuts 1..6 at levels 1, 2, 5, 4, 3, 3 (tenths): the spine [0, 6] loses rank 0, then rank 1,
    then ranks 5 and 6 together (cuts 5 and 6 at the same level), then rank 4."""
    levels = np.array([0, 1, 2, 5, 4, 3, 3, 0], dtype=float) / 10
    spine = wor_nesting_spine.spine(levels, 0, 6)
    assert [(f, t) for _, _, f, t in spine] == [(0, 6), (1, 6), (2, 6), (2, 4), (2, 3)]
    assert wor_nesting_spine.peels(spine) == (3, 1, 2)


def test_scans_bound_the_levels_from_below():
    from decoding.verifiers.optimal_wor_numba import CompiledClockSetMasses
    from otm.rules.optimal_wor import wor_parameters

    rng = np.random.default_rng(0)
    logits = 2 * rng.normal(size=150)
    p, q = np.exp(logits), np.exp(logits + rng.normal(size=150))
    p, q = p / p.sum(), q / q.sum()
    row = wor_nesting_spine.row_table(p, q, 3, [8, 16])
    assert row is not None and row["run"][1] - row["run"][0] >= wor_nesting_spine.SHORTEST_RUN
    for scans, cost, excess in row["scans"].values():
        assert scans >= 1 and cost > 0 and excess <= SCAN_ROUNDING
    params = wor_parameters(p, q, 3, clock_masses=CompiledClockSetMasses)
    levels = np.asarray([float(v) for v in params.levels])
    flux = np.asarray([float(v) for v in params.flux])
    q_ranked = q[params.order] / q[params.order].sum()
    f0, top = row["run"]
    steps = wor_nesting_spine.spine(levels, f0, top)
    halved = HalvedMasses(CompiledClockSetMasses(q_ranked, 3))
    assert wor_nesting_spine.spine_scans(steps, levels, flux, halved, 8)[2] > 1e-3


def test_table_on_a_small_corpus(tmp_path, capsys):
    synthetic_corpus(tmp_path, seed=3, rows=2, vocab=200, scale=2)
    assert wor_nesting_spine.main(["--corpus", str(tmp_path / "corpus"), "--positions", "2", "--top", "150",
                                   "--windows", "8"]) == 0
    rows = table_rows(capsys.readouterr().out)
    assert len(rows) == 2
    for row in rows:
        assert "none of" in row[3] or row[-1].strip() == "no scan" or float(row[-1]) <= SCAN_ROUNDING
