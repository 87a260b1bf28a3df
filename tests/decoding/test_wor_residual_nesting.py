"""scripts/wor_residual_nesting.py: the end-peeling nesting on residuals alone gives the construction's
levels and its streamed certificate is the realised law's; windows too narrow for a split are caught
(never other levels returned), and so are splits beyond the kept steps and a wrong ``x``."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import wor_residual_nesting  # noqa: E402
from wor_end_peel import CrossedBeforeRun, beside_construction, realised_gap  # noqa: E402

from tests.decoding.corpus_support import random_run, random_runs, synthetic_corpus, table_rows  # noqa: E402

#: Levels computed along other float paths, on rows whose levels stay away from 1 (the full search
#: interpolates its crossings: up to ``1.1e-10`` from the construction's on these rows).
AGREEMENT = 1e-9

#: The realised law against ``x`` (as the construction's certificate).
CERTIFIED = 1e-12


def _realised_gap(masses, exact, run, levels, x) -> float:
    return realised_gap(masses, beside_construction(exact, levels, run)[0], x)


@pytest.mark.parametrize("k", [3, 4])
@pytest.mark.parametrize("window", [wor_residual_nesting.WINDOW, None])
def test_levels_and_certificate(k, window):
    """On 30 random rows per ``k`` (every cut in the window, or every cut by the compiled pass), the
    levels are the construction's, the streamed certificate is the realised law's gap to ``x`` (both at
    rounding), and some rows split."""
    splits = 0
    for exact, flux, run, masses in random_runs(k, range(30)):
        nesting = wor_residual_nesting.ResidualNesting(masses, flux, window)
        nesting.run(*run)
        cuts = slice(run[0] + 1, run[1] + 1)
        np.testing.assert_allclose(nesting.levels[cuts], exact[cuts], rtol=0, atol=AGREEMENT)
        realised = _realised_gap(masses, exact, run, nesting.levels, nesting.x)
        assert nesting.stats["certificate"] <= CERTIFIED and realised <= CERTIFIED
        assert nesting.stats["certificate"] == pytest.approx(realised, abs=1e-15)
        splits += nesting.stats["splits"]
    assert splits > 0


@pytest.mark.parametrize("window", [3, 6, 12])
def test_narrow_windows_refuse_or_certify(window):
    """With splits searched only ``window`` cuts from the ends (on rows long enough to take the
    queue's paths), each row either stops with :class:`CrossedBeforeRun` or returns levels that
    realise ``x``: never other levels. Both happen."""
    outcomes = {"refused": 0, "certified": 0}
    for exact, flux, run, masses in random_runs(3, range(25), (60, 120)):
        nesting = wor_residual_nesting.ResidualNesting(masses, flux, window=window)
        try:
            nesting.run(*run)
        except CrossedBeforeRun:
            outcomes["refused"] += 1
            continue
        assert _realised_gap(masses, exact, run, nesting.levels, nesting.x) <= CERTIFIED
        cuts = slice(run[0] + 1, run[1] + 1)
        np.testing.assert_allclose(nesting.levels[cuts], exact[cuts], rtol=0, atol=1e-6)  # ill-determined cuts aside
        outcomes["certified"] += 1
    assert outcomes["refused"] > 0 and outcomes["certified"] > 0


def test_splits_beyond_the_kept_steps_are_refused():
    refused = 0
    for _, flux, run, masses in random_runs(3, range(30)):
        try:
            wor_residual_nesting.ResidualNesting(masses, flux, kept=1).run(*run)
        except wor_residual_nesting.BeyondKeptSteps:
            refused += 1
    assert refused > 0


def test_a_wrong_x_is_caught():
    """``x`` raised at one rank inside the run by 1% of the run's largest flux: the nesting stops, or
    its certificate shows the gap."""
    _, flux, run, masses = random_run(2, 3)
    nesting = wor_residual_nesting.ResidualNesting(masses, flux)
    bump = 0.01 * flux[run[0]:run[1] + 1].max()
    nesting.x[(run[0] + run[1]) // 2] += bump
    try:
        nesting.run(*run)
    except CrossedBeforeRun:
        return
    assert nesting.stats["certificate"] >= bump / 2


@pytest.mark.parametrize("top", ["120", "0"])
def test_table(tmp_path, capsys, top):
    synthetic_corpus(tmp_path, seed=4, rows=4, vocab=120, scale=2.0)
    assert wor_residual_nesting.main(["--corpus", str(tmp_path / "corpus"), "--positions", "2", "--top", top, "--ks", "3"]) == 0
    rows = table_rows(capsys.readouterr().out)
    assert rows and any(cells[4].strip().isdigit() for cells in rows)
    for cells in rows:
        if cells[4].strip().isdigit():
            assert "refused" not in cells[9]
            assert float(cells[9]) <= CERTIFIED and float(cells[11]) <= 1e-13
            if top != "0":
                same, _, length = cells[10].split(",")[0].split()
                assert int(same) >= 0.9 * int(length) and float(cells[10].split(",")[1]) <= CERTIFIED
