"""The water-level verifier for two drafts without replacement
(:mod:`decoding.verifiers.optimal.pair`) and its compiled nesting
(:mod:`decoding.verifiers.optimal.pair_levels`).

The compiled levels are those of the exact law's construction
(:func:`otm.rules.water_levels.pair.pair_parameters`, the slow reference); the yield of one
pair found along its own runs is the full nesting's, bit for bit; and the levels *realise*
the selection law they are verified against: the flux the yields carry, summed pair by pair
in exact rationals from the float levels, gives back ``x``. Each check fails on a broken
piece. The sampler is held to the exact law by tests/decoding/test_verifiers_exactness.py
and draw for draw to its reference by tests/decoding/test_verifiers_reference.py.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from decoding.validation.stats import binomial_z_test, chi_square_test
from decoding.verifiers.optimal import pair as verifier
from decoding.verifiers.optimal import pair_merged_rows as merged
from decoding.verifiers.optimal import pair_levels as kernel
from otm.errors import InvalidDistributionError, NotApplicableError
from otm.formulations.prefix_scan import prefix_scan, ratio_order
from otm.rules.water_levels.pair import pair_parameters, realised_selection

UNIT = verifier.UNIT
#: Compiled against reference levels: both round, in different orders (a level is a ratio of
#: a remaining flux to a pair mass; 3.5e-14 was the largest difference on 3,000 random rows).
LEVEL_TOLERANCE = 1e-12
#: ``sum |x' - x|``: the selection law the float levels realise, in exact arithmetic, against
#: the one the verifier checks against.
REALISED_TOLERANCE = 1e-12


@st.composite
def float_rows(draw, max_vocab=24):
    """Float ``(p, q)``, normalised, with zeros, heavy tails and a dominant draft token mixed
    in; at least two tokens with ``q > 0``."""
    V = draw(st.integers(2, max_vocab))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    p = rng.exponential(size=V) ** draw(st.sampled_from([0.5, 1.0, 3.0, 6.0]))
    q = rng.exponential(size=V) ** draw(st.sampled_from([0.5, 1.0, 3.0, 6.0]))
    if draw(st.booleans()):
        q[rng.random(V) < 0.3] = 0.0
    if draw(st.booleans()):
        q[int(rng.integers(V))] += 20 * q.sum()
    if draw(st.booleans()):
        p[rng.random(V) < 0.3] = 0.0
    assume(p.sum() > 0 and (q > 0).sum() >= 2)
    return p / p.sum(), q / q.sum()


def _ranked(p, q):
    order = ratio_order(p, q)[: int((q > 0).sum())]
    return order, p[order], q[order]


def _levels(p_r, q_r):
    n = len(p_r)
    flux, levels, selection = np.empty(n + 1), np.empty(n + 1), np.empty(n)
    m, alpha, _, clipped, uncarried = kernel.row_levels(p_r, q_r, UNIT, flux, levels, selection)
    return m, alpha, levels, selection, clipped, uncarried


def _realised(q_r, levels, cut) -> list:
    """:func:`otm.rules.water_levels.pair.realised_selection` of the float levels, in exact
    rationals (``q`` renormalised exactly)."""
    q = [Fraction(v) for v in q_r]
    total = sum(q)
    return realised_selection([v / total for v in q], [Fraction(v) for v in levels], cut)


@settings(max_examples=80, deadline=None)
@given(float_rows())
def test_compiled_levels_are_the_exact_laws_construction(row):
    p, q = row
    reference = pair_parameters(p, q)
    order, p_r, q_r = _ranked(p, q)
    m, alpha, levels, selection, _, _ = _levels(p_r, q_r)
    assert m == reference.cut
    assert np.max(np.abs(levels - np.asarray(reference.levels, dtype=float))) <= LEVEL_TOLERANCE
    assert np.max(np.abs(selection - reference.selection[order])) <= LEVEL_TOLERANCE
    assert abs(alpha - prefix_scan(p, q, 2, "without_replacement").value) <= LEVEL_TOLERANCE


@settings(max_examples=80, deadline=None)
@given(float_rows(), st.data())
def test_one_pair_along_its_runs_is_the_full_nesting(row, data):
    p, q = row
    _, p_r, q_r = _ranked(p, q)
    n = len(p_r)
    m, _, levels, selection, _, _ = _levels(p_r, q_r)
    low = data.draw(st.integers(0, n - 2))
    high = data.draw(st.integers(low + 1, n - 1))
    found, cut, _ = kernel.pair_yield(p_r, q_r, UNIT, low, high, mine := np.empty(n))
    assert cut == m
    assert np.array_equal(mine, selection)
    assert found == (0.0 if low < m <= high else levels[low + 1 : high + 1].min())
    u = data.draw(st.floats(0.0, 1.0, exclude_max=True))
    bound, _, _ = kernel.pair_yield(p_r, q_r, UNIT, low, high, mine, u)  # may stop once u < Y is settled
    assert (u < bound) == (u < found)
    assert bound <= found if u < bound else found <= bound



def test_the_tally_counts_every_refresh_and_every_cut_emptied():
    """``pair_yield``'s tally changes nothing it returns, its refresh bins add up to the
    refreshes it returns, and it counts one emptied cut per run the chain left; an end cut and
    an inner one land in their own bins (a tally that binned by the distance from ``f`` only
    would put the cut next to ``t`` far in)."""
    rng = np.random.default_rng(3)
    chains = 0
    for _ in range(20):  # p near q: a long run of flux below the cut, the pair in its middle
        q = rng.dirichlet(np.ones(60))
        p = q * np.exp(0.2 * rng.normal(size=60))
        _, p_r, q_r = _ranked(p / p.sum(), q)
        n = len(p_r)
        flux, flux_lo = np.empty(n + 1), np.empty(n + 1)
        m = kernel.row_setup(p_r, q_r, UNIT, flux, flux_lo, np.empty(n))[4]
        f, t = kernel.first_run(flux, 0, max(m - 1, 1))
        low = (f + t) // 2
        plain = kernel.pair_yield(p_r, q_r, UNIT, low, low + 1, np.empty(n))
        tally = np.zeros(len(kernel.TALLY_BINS), np.int64)
        assert kernel.pair_yield(p_r, q_r, UNIT, low, low + 1, np.empty(n), 2.0, tally) == plain
        assert tally[:4].sum() == plain[2]
        chains += tally[4:].sum() > 0
    assert chains > 10  # pairs followed through more than one run (all 20 with this seed)
    tally = np.zeros(len(kernel.TALLY_BINS), np.int64)
    for c, emptied in ((11, False), (30, False), (13, False), (11, True), (12, True), (30, True)):
        kernel._tally_cut(tally, 10, 30, c, emptied)  # run [10, 30]: cuts 11 and 30 are its ends
    assert tally.tolist() == [2, 1, 0, 0, 2, 1]


def _wrong_decisions(first_run) -> tuple[int, int]:
    """(wrong, settled): :func:`kernel.yield_decision`'s verdicts against the full nesting's
    ``Y`` on seeded rows, every same-side pair with ``Y > 0``, ``u`` on a grid; the first run
    of a pair given by ``first_run(f, t, low, high)``."""
    rng = np.random.default_rng(5)
    wrong = settled = 0
    for _ in range(30):
        p, q = rng.dirichlet(np.full(12, 0.5)), rng.dirichlet(np.full(12, 0.5))
        _, p_r, q_r = _ranked(p, q)
        n = len(p_r)
        m, _, levels, _, _, _ = _levels(p_r, q_r)
        flux, flux_lo = np.empty(n + 1), np.empty(n + 1)
        qt, qe, wt, we, _, _ = kernel.row_setup(p_r, q_r, UNIT, flux, flux_lo, np.empty(n))
        for low in range(n):
            for high in range(low + 1, n):
                y = levels[low + 1 : high + 1].min()
                if low < m <= high or y <= 0:
                    continue
                f, t = kernel.first_run(flux, low, high)
                for u in np.linspace(0.0, 0.95, 20):
                    verdict, _ = kernel.yield_decision(flux, qt, qe, wt, we, *first_run(f, t, low, high), low, high, u)
                    settled += verdict != 0
                    wrong += verdict != 0 and (verdict > 0) != (u < y)
    return wrong, settled


def test_the_compiled_yield_bounds_decide_like_the_full_nesting():
    """The bounds on a water level from the flux, in float64 (its exact form: tests/otm/test_water_levels_pair.py): no
    verdict contradicts the full nesting's level, and most are settled; with the pair's own
    span taken for its first run (the lower bound then ignores the pairs around it) some are
    wrong."""
    wrong, settled = _wrong_decisions(lambda f, t, low, high: (f, t))
    assert wrong == 0 and settled > 500
    assert _wrong_decisions(lambda f, t, low, high: (low, high))[0] > 0


@settings(max_examples=40, deadline=None)
@given(float_rows(max_vocab=40))
def test_the_float_levels_realise_the_selection_law(row):
    """In exact rationals: the yields the float levels give carry the flux, so the selection
    law they realise is the ``x`` the verifier checks against, and its acceptance is the
    optimum; levels are probabilities."""
    p, q = row
    _, p_r, q_r = _ranked(p, q)
    m, _, levels, selection, _, _ = _levels(p_r, q_r)
    assert 0.0 <= levels.min() and levels.max() <= 1.0
    realised = _realised(q_r, levels, m)
    assert float(sum(abs(v - Fraction(s)) for v, s in zip(realised, selection))) <= REALISED_TOLERANCE
    target = [Fraction(v) for v in p_r]
    accepted = float(sum(min(a, b) for a, b in zip(target, realised)) / sum(Fraction(v) for v in p))
    assert accepted == pytest.approx(prefix_scan(p, q, 2, "without_replacement").value, abs=REALISED_TOLERANCE)


def test_the_realised_law_check_fails_on_halved_levels():
    rng = np.random.default_rng(4)
    for _ in range(20):
        p, q = rng.dirichlet(np.ones(8)), rng.dirichlet(np.ones(8))
        _, p_r, q_r = _ranked(p, q)
        m, _, levels, selection, _, _ = _levels(p_r, q_r)
        if levels.max() > 0.05:
            realised = _realised(q_r, levels / 2, m)
            assert float(sum(abs(v - Fraction(s)) for v, s in zip(realised, selection))) > 1e-3
            return
    pytest.fail("no instance with a positive level")


#: One row where the yields matter: x differs from the max-ratio law by more than 0.05.
_P = np.array([0.30, 0.05, 0.25, 0.02, 0.18, 0.20])
_Q = np.array([0.05, 0.40, 0.10, 0.25, 0.15, 0.05])
ROWS = 20_000
ALPHA = 1e-4


def _run_rows(seed: int):
    g = torch.Generator().manual_seed(seed)
    p = torch.as_tensor(_P).expand(ROWS, -1).contiguous()
    q = torch.as_tensor(_Q).expand(ROWS, -1).contiguous()
    drafts = verifier.sample_drafts(q, 2, g)
    return drafts, verifier.verify(p, q.unsqueeze(1).expand(-1, 2, -1), drafts, g)


def test_the_sampler_outputs_p_and_accepts_the_optimum():
    _, out = _run_rows(11)
    assert chi_square_test(np.bincount(out.tokens.numpy(), minlength=6), _P, ALPHA).passed
    optimum = prefix_scan(_P, _Q, 2, "without_replacement").value
    assert binomial_z_test(int((out.accepted_index >= 0).sum()), ROWS, optimum, ALPHA).passed


def test_the_sampler_check_fails_without_the_yields(monkeypatch):
    """With every yield 0 (the max-ratio priority) but the same ``x`` in the canonical check,
    the output is no longer ``p`` (on the sorted row: every merged row sent back to it; the
    merged row's own broken ingredients are caught against the sorted row in
    tests/decoding/test_verifier_optimal_pair_wor_merged.py)."""
    original = kernel.pair_yield
    assert pair_parameters(_P, _Q).levels != [0.0] * 7

    def no_yields(p, q, unit, low, high, selection, decide=2.0):
        _, m, refreshes = original(p, q, unit, low, high, selection)
        return 0.0, m, refreshes

    monkeypatch.setattr(merged, "merged_row", lambda *args: (-1, -1, merged.UNDECIDED))
    monkeypatch.setattr(kernel, "pair_yield", no_yields)
    _, out = _run_rows(11)
    assert not chi_square_test(np.bincount(out.tokens.numpy(), minlength=6), _P, ALPHA).passed


def test_cuda_tensors_come_back_on_their_device():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    p = torch.as_tensor(_P, device="cuda").expand(4, -1).contiguous()
    q = torch.as_tensor(_Q, device="cuda").expand(4, -1).contiguous()
    drafts = verifier.sample_drafts(q, 2, None)
    out = verifier.verify(p, q.unsqueeze(1).expand(-1, 2, -1), drafts, None)
    assert out.tokens.device.type == out.accepted_index.device.type == "cuda"


@pytest.mark.parametrize("drafts", [[0, 0], [1, 5], [5, 1]])
def test_drafts_the_law_cannot_give_are_refused(drafts):
    """Equal drafts, or a draft with q = 0 while q has two tokens of positive probability."""
    q = np.array([0.5, 0.3, 0.2, 0.0, 0.0, 0.0])
    p = torch.as_tensor(_P).unsqueeze(0)
    qs = torch.as_tensor(q).expand(1, 2, -1)
    with pytest.raises(NotApplicableError, match="without replacement"):
        verifier.verify(p, qs, torch.tensor([drafts]), None)


@pytest.mark.parametrize("broken", ["nan", "negative", "zero", "inf"])
@pytest.mark.parametrize("which", ["target", "draft"])
def test_bad_values_are_a_typed_error(broken, which):
    """A NaN, an inf, a negative entry or a row without mass, in p or in q: refused, never a
    token out of the vocabulary (a NaN row once gave token V)."""
    p, q = torch.as_tensor(_P).unsqueeze(0).clone(), torch.as_tensor(_Q).unsqueeze(0).clone()
    row = p if which == "target" else q
    if broken == "zero":
        row.zero_()
    else:
        row[0, 3] = {"nan": float("nan"), "negative": -0.1, "inf": float("inf")}[broken]
    with pytest.raises(InvalidDistributionError, match="finite and non-negative"):
        verifier.verify(p, q.unsqueeze(1).expand(-1, 2, -1), torch.tensor([[0, 1]]), None)


@pytest.mark.parametrize("q_a", [1.0, 0.3, 5e-324])
def test_a_single_draft_token_is_ordered_without_a_sort(q_a, monkeypatch):
    """A row with one token of positive ``q`` (a one-hot draft row: the drafts exhaust its
    support) is ordered as the sort orders it (:func:`otm.formulations.prefix_scan.ratio_order`:
    that token, then the ``q = 0`` tokens by id; a denormal ``q`` whose ratio overflows
    included) without sorting the row, which made such rows the slowest to verify. The
    sampler's draws on such rows follow the exact law
    (tests/decoding/test_verifiers_exactness.py, instance ``one_hot_q``)."""
    sorts, original = [], verifier.stable_sort_rows
    monkeypatch.setattr(verifier, "stable_sort_rows", lambda *a: sorts.append(1) or original(*a))
    p = np.array([0.1, 0.3, 0.0, 0.2, 0.4])
    for a in range(len(p)):
        q = np.zeros(len(p))
        q[a] = q_a
        np.testing.assert_array_equal(verifier.full_ratio_order(p, q), ratio_order(p, q))
    assert not sorts
