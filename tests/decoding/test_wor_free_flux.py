"""scripts/wor_free_flux.py: the one-pass bottom-peeling chain against its slow reference, the law
its levels realise against its flux (the certificate), the room ``1 - alpha*``, and the table."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from otm.formulations.prefix_scan import ratio_order
from otm.rules.optimal_pair_wor import flux_setup
from otm.rules.wor_clock_masses import ClockSetMasses, built_set_masses, realised_selection

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import wor_free_flux  # noqa: E402

from tests.decoding.corpus_support import synthetic_corpus, table_rows  # noqa: E402

#: The pass and the reference add the same nonnegative terms in other orders (relative).
CHAIN_AGREEMENT = 1e-9

#: What the levels realise against the chain's flux (absolute, laws of total mass 1).
REALISED_AGREEMENT = 1e-13


def _row(seed: int, vocab: int = 60, k: int = 3):
    """A random softmax row pair, its clock masses by rank, ``e = p - sigma`` by rank and the cut."""
    rng = np.random.default_rng(seed)
    logits = 2 * rng.normal(size=vocab)
    p, q = np.exp(logits), np.exp(logits + rng.normal(size=vocab))
    p, q = p / p.sum(), q / q.sum()
    order = ratio_order(p, q)
    masses = ClockSetMasses(q[order], k)
    setup = flux_setup(p, q, order, built_set_masses(masses))
    return masses, p[order] - np.asarray(masses.sigma), setup


@pytest.mark.parametrize("seed,k", [(0, 3), (1, 4), (2, 3), (3, 5)])
def test_chain_pass_is_the_chain_by_runs(seed, k):
    masses, e, setup = _row(seed, k=k)
    top = setup.cut - 1
    fast, slow = wor_free_flux.chain_pass(masses.q, k, e, top), wor_free_flux.chain_by_runs(masses, e, top)
    assert fast[2] == slow[2]
    assert np.allclose(fast[0], slow[0], rtol=CHAIN_AGREEMENT, atol=0)
    assert np.allclose(fast[1], slow[1], rtol=CHAIN_AGREEMENT, atol=1e-18)


@pytest.mark.parametrize("seed", [0, 2, 4])
def test_chain_levels_realise_the_chain_flux(seed):
    """The levels ``L(j) = sum_{f < j} c_f`` on ``H`` (0 from the cut up) select by the walk with the
    law ``sigma + F(a + 1) - F(a)`` on the ranks the chain has passed, computed by the lowest-member
    laws alone; its largest raise doubled breaks it."""
    masses, e, setup = _row(seed)
    top = setup.cut - 1
    c, F, failed = wor_free_flux.chain_pass(masses.q, 3, e, top)
    passed = (failed or top + 1) - 1  # ranks 0..passed - 1 have both their cuts' flux
    assert passed >= 3

    def levels_of(raises):
        levels = np.zeros(masses.n + 1)
        levels[1:top + 1] = np.cumsum(raises)[:top]
        return levels

    expected = np.asarray(masses.sigma)[:passed] + F[1:passed + 1] - F[:passed]
    realised = realised_selection(masses, levels_of(c).tolist())[:passed]
    assert np.max(np.abs(realised - expected)) <= REALISED_AGREEMENT
    broken = c.copy()
    broken[int(np.argmax(c[:passed - 1]))] *= 2  # the largest raise (many are 0: the carried flux sufficed)
    assert np.max(np.abs(realised_selection(masses, levels_of(broken).tolist())[:passed] - expected)) > 1e-6


@pytest.mark.parametrize("seed", [0, 4, 7])
def test_chain_continued_is_a_complete_rule(seed):
    """Past the cut where the chain fails, ``stop=False`` raises nothing more: the same raises and
    flux up to it, none after; its levels stay in ``[0, 1]`` and realise ``sigma + F(a + 1) - F(a)``
    on every rank of ``H``, and :func:`chain_deficit` is what that law falls short of ``p``
    (positive: the chain failed), the same as from the realised law."""
    masses, e, setup = _row(seed)
    top = setup.cut - 1
    stopped = wor_free_flux.chain_pass(masses.q, 3, e, top)
    c, F, failed = wor_free_flux.chain_pass(masses.q, 3, e, top, stop=False)
    assert failed is not None and failed == stopped[2]
    assert np.array_equal(c[:failed - 1], stopped[0][:failed - 1]) and np.array_equal(F[:failed], stopped[1][:failed])
    assert np.all(c[failed - 1:] == 0) and 0 <= np.cumsum(c).max() <= 1
    levels = np.zeros(masses.n + 1)
    levels[1:top + 1] = np.cumsum(c)[:top]
    realised = realised_selection(masses, levels.tolist())[:top + 1]
    sigma = np.asarray(masses.sigma)[:top + 1]
    flux = np.concatenate([F[:top + 1], [0.0]])
    assert np.max(np.abs(realised - (sigma + flux[1:] - flux[:-1]))) <= REALISED_AGREEMENT
    p_ranked = e[:top + 1] + sigma
    deficit = wor_free_flux.chain_deficit(p_ranked, np.asarray(masses.sigma), F, top)
    assert deficit > 1e-6
    assert deficit == pytest.approx(float(np.sum(np.maximum(p_ranked - realised, 0))), rel=0, abs=10 * REALISED_AGREEMENT)


@pytest.mark.parametrize("seed", [0, 1])
def test_room_is_one_minus_the_optimum(seed):
    """``sum_H (sigma - p) = T_m - P_m = 1 - alpha*``, the slack each side of the cut can hold."""
    masses, e, setup = _row(seed)
    assert abs(-e[:setup.cut].sum() - (1 - float(setup.acceptance))) <= 1e-14


def test_table_on_a_small_corpus(tmp_path, capsys):
    synthetic_corpus(tmp_path, seed=5, rows=2, vocab=200)
    assert wor_free_flux.main(["--corpus", str(tmp_path / "corpus"), "--positions", "2", "--ks", "3"]) == 0
    rows = table_rows(capsys.readouterr().out)
    assert len(rows) == 2
    for row in rows:
        alpha, room = float(row[5]), float(row[6])  # printed to 6 decimals and 3 digits
        assert room == pytest.approx(1 - alpha, rel=0.01, abs=1e-6)
        assert row[7].strip() == "all" or " of " in row[7]
        deficit, level = row[8].split()  # "1.2e-03 (0.456)"
        assert float(deficit) >= 0 and 0 <= float(level.strip("()")) <= 1
        assert float(row[9]) >= -1e-12  # the i.i.d. optimum is at most the one without replacement
