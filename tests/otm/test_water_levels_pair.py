"""The water levels of two drafts without replacement (otm.rules.water_levels.pair;
docs/optimal-verifier.md#water-levels-for-drafts-without-replacement): the rule optimal_wor at
k = 2 outputs p and accepts alpha*(p, Q_wor), exactly in rationals; the pieces of the
construction hold what the derivation says; the checks fail on broken pieces."""
from __future__ import annotations

import dataclasses
from fractions import Fraction as F

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from otm.draft_laws import without_replacement_law
from otm.errors import InvalidDraftCountError, NotApplicableError
from otm.formulations.max_flow import solve_max_flow
from otm.formulations.prefix_scan import prefix_scan, ratio_order
from otm.rules import optimal_wor, water_levels
from otm.rules.enumeration import enumerate_law
from otm.tolerances import AGREEMENT_TOLERANCE


@st.composite
def exact_pairs(draw, max_vocab=7):
    """Exact ``(p, q)`` with zeros allowed and at least two tokens with ``q > 0``."""
    V = draw(st.integers(2, max_vocab))
    p = draw(st.lists(st.integers(0, 9), min_size=V, max_size=V))
    q = draw(st.lists(st.integers(0, 9), min_size=V, max_size=V))
    assume(sum(p) > 0 and sum(1 for v in q if v > 0) >= 2)
    return (np.array([F(v, sum(p)) for v in p], dtype=object), np.array([F(v, sum(q)) for v in q], dtype=object))


@settings(max_examples=60, deadline=None)
@given(exact_pairs())
def test_lossless_and_optimal_in_rationals(pair):
    p, q = pair
    law = optimal_wor.exact_law(p, q, 2, method="enumeration")
    optimum = prefix_scan(p, q, 2, "without_replacement").value
    assert list(law.output_distribution) == list(p)
    assert law.acceptance == optimum == solve_max_flow(p, without_replacement_law(q, 2)).acceptance
    assert optimal_wor.exact_law(p, q, 2, method="closed_form").acceptance == optimum


@settings(max_examples=60, deadline=None)
@given(exact_pairs(), st.lists(st.integers(0, 8), min_size=10, max_size=10))
def test_realised_selection_is_the_law_of_the_yields(pair, numerators):
    """``realised_selection`` (through the nesting, O(n)) equals the selection law of the
    yields summed over every ordered pair of the draft law, for any levels in [0, 1]; with
    the construction's levels it is ``x`` (the certificate the compiled verifier is checked by)."""
    p, q = pair
    params = water_levels.pair_parameters(p, q)
    order, n, cut = params.order, len(params.order), params.cut
    q_ranked = [q[t] for t in order]
    levels = [F(0)] + [F(v, 8) for v in numerators[: n - 1]] + [F(0)] * (n - len(numerators[: n - 1]))
    expected = [F(0)] * n
    law = without_replacement_law(q, 2)
    for (a, b), mass in zip(law.tuples.tolist(), law.probs):
        low, high = sorted((int(params.rank[a]), int(params.rank[b])))
        take_low = F(0) if low < cut <= high else min(levels[low + 1 : high + 1])
        expected[low] += mass * take_low
        expected[high] += mass * (1 - take_low)
    assert water_levels.pair.realised_selection(q_ranked, levels, cut) == expected
    assert water_levels.pair.realised_selection(q_ranked, params.levels, cut) == [params.selection[t] for t in order]


@settings(max_examples=60, deadline=None)
@given(exact_pairs())
def test_the_construction_is_what_the_derivation_says(pair):
    """Levels in [0, 1]; x <= p on U and x >= p on H; the enumerated selection law is x; the
    yields depend on the pair, not on the order of the drafts."""
    p, q = pair
    params = water_levels.pair_parameters(p, q)
    assert all(0 <= level <= 1 for level in params.levels)
    x, rank = params.selection, params.rank
    for token in range(len(p)):
        if rank[token] >= params.cut:
            assert x[token] <= p[token]
        elif rank[token] >= 0:
            assert x[token] >= p[token]
    law = without_replacement_law(q, 2)
    for pair_tokens in law.tuples:
        assert optimal_wor.selection_law(params, pair_tokens) == optimal_wor.selection_law(params, pair_tokens[::-1])[::-1]
    assert list(selection_of(params, law)) == list(x)


def selection_of(params, law) -> np.ndarray:
    """The law of the selected draft, by enumeration of the pairs (exact)."""
    selected = np.array([F(0)] * law.vocab_size, dtype=object)
    for pair_tokens, prob in zip(law.tuples, law.probs):
        for token, chance in zip(pair_tokens, optimal_wor.selection_law(params, pair_tokens)):
            selected[token] += prob * chance
    return selected


def _same_side_pairs(params):
    n, cut = len(params.order), params.cut
    return [(low, high) for low in range(n) for high in range(low + 1, n) if not low < cut <= high]


def _wrong_decisions(params, q) -> int:
    """Decisions of :func:`water_levels.pair.yield_decision` that contradict ``u < Y`` over the same-side
    pairs and ``u`` at ``0``, ``Y``, ``Y -+ 1/1000``, ``1/2`` and ``999/1000``."""
    wrong = 0
    for low, high in _same_side_pairs(params):
        y = water_levels.pair.yield_probability(params, low, high)
        for u in {F(0), y, max(F(0), y - F(1, 1000)), min(F(999, 1000), y + F(1, 1000)), F(1, 2), F(999, 1000)}:
            decision = water_levels.pair.yield_decision(params, q, low, high, u)
            wrong += decision is not None and decision != (u < y)
    return wrong


@settings(max_examples=80, deadline=None)
@given(exact_pairs(max_vocab=9))
def test_the_yield_bounds_decide_correctly_in_rationals(pair):
    """Bounds on a water level from the flux: where the bounds from the flux settle ``u < Y``, they settle it right, exactly;
    and the lower bound is positive wherever ``Y`` is (``u = 0`` is always settled)."""
    p, q = pair
    params = water_levels.pair_parameters(p, q)
    assert _wrong_decisions(params, q) == 0
    for low, high in _same_side_pairs(params):
        assert water_levels.pair.yield_decision(params, q, low, high, F(0)) == (water_levels.pair.yield_probability(params, low, high) > 0)


def test_the_yield_bounds_check_fails_on_halved_pair_masses(monkeypatch):
    """With every pair mass halved the lower bounds double: some decision is then wrong."""
    rng = np.random.default_rng(3)
    instances = []
    for _ in range(40):
        p, q = (rng.integers(1, 10, size=9) for _ in range(2))
        p, q = (np.array([F(int(v), int(r.sum())) for v in r], dtype=object) for r in (p, q))
        instances.append((water_levels.pair_parameters(p, q), q))
    assert sum(_wrong_decisions(params, q) for params, q in instances) == 0
    across = water_levels.pair._PairMass.across
    monkeypatch.setattr(water_levels.pair._PairMass, "across", lambda self, f, j, t: across(self, f, j, t) / 2)
    assert sum(_wrong_decisions(params, q) for params, q in instances) > 0



def test_floats_agree_with_the_optimum_at_moderate_vocabularies():
    rng = np.random.default_rng(0)
    for _ in range(40):
        V = int(rng.integers(2, 200))
        p, q = rng.dirichlet(np.ones(V) * 0.3), rng.dirichlet(np.ones(V) * 0.3)
        q = np.maximum(q, 1e-9)
        q /= q.sum()
        law = optimal_wor.exact_law(p, q, 2, method="closed_form")
        assert abs(law.acceptance - prefix_scan(p, q, 2, "without_replacement").value) <= AGREEMENT_TOLERANCE


def test_above_the_iid_optimum_and_the_other_rules():
    """An instance where drafting without replacement pays: the rule reaches its own optimum,
    strictly above the i.i.d. optimum that 'optimal_latent' reaches."""
    p = np.array([F(1, 2), F(1, 3), F(1, 6)], dtype=object)
    q = np.array([F(1, 10), F(3, 5), F(3, 10)], dtype=object)
    law = optimal_wor.exact_law(p, q, 2, method="enumeration")
    assert law.acceptance == prefix_scan(p, q, 2, "without_replacement").value > prefix_scan(p, q, 2).value


def test_wrong_levels_are_caught():
    """Halving every level changes the selection law: checked against the unchanged ``x`` the
    output is no longer p (the lossless check catches it); levels all 0 (the max-ratio rule)
    leave the acceptance below the optimum."""
    p = np.array([F(1, 10), F(1, 5), F(3, 10), F(2, 5)], dtype=object)
    q = np.array([F(2, 5), F(3, 10), F(1, 5), F(1, 10)], dtype=object)
    params = water_levels.pair_parameters(p, q)
    assert max(params.levels) > 0
    law = without_replacement_law(q, 2)

    def output(parameters):
        return enumerate_law(p, law, lambda pair: optimal_wor.conditional_output_law(parameters, pair))

    assert list(output(params)["output"]) == list(p)
    halved = dataclasses.replace(params, levels=[level / 2 for level in params.levels])
    assert list(output(halved)["output"]) != list(p)
    none = dataclasses.replace(params, levels=[F(0)] * len(params.levels))  # the max-ratio rule itself
    assert sum(min(a, b) for a, b in zip(p, selection_of(none, law))) < params.acceptance


def test_a_level_above_one_is_refused(monkeypatch):
    def overflow(pair_mass, flux, lo, hi, levels, unit):
        for j in range(lo + 1, hi + 1):
            levels[j] += 2

    monkeypatch.setattr(water_levels.construction, "_water_levels", overflow)
    with pytest.raises(NotApplicableError, match="outside \\[0, 1\\]"):
        water_levels.pair_parameters(np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.4, 0.3, 0.2, 0.1]))


def test_degenerate_inputs():
    law = optimal_wor.exact_law([0.25, 0.75], [0.25, 0.75], 2, method="enumeration")  # p = q, two tokens: both drafted
    assert abs(law.acceptance - 1) <= AGREEMENT_TOLERANCE
    law = optimal_wor.exact_law([0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.5, 0.5], 2, method="enumeration")  # disjoint supports
    assert law.acceptance == 0 and list(law.output_distribution) == [0.5, 0.5, 0.0, 0.0]
    law = optimal_wor.exact_law([0.2, 0.3, 0.5], [0.0, 1.0, 0.0], 2, method="enumeration")  # one-hot q: drafts 1 and 0
    assert abs(law.acceptance - 0.5) <= AGREEMENT_TOLERANCE
    assert np.allclose(law.output_distribution, [0.2, 0.3, 0.5])


def test_bad_input_is_a_typed_error():
    with pytest.raises(InvalidDraftCountError, match="vocabulary of 2"):
        optimal_wor.exact_law([0.5, 0.5], [0.5, 0.5], 3)
    with pytest.raises(InvalidDraftCountError, match="vocabulary of 1"):
        optimal_wor.exact_law([1.0], [1.0], 2)


def test_flux_runs_are_the_maximal_runs_of_cuts_with_flux():
    """Within ranks ``lo..hi``: the inner cuts of the runs are exactly the cuts with flux, and no
    two runs touch (else they would be one)."""
    rng = np.random.default_rng(2)
    for _ in range(200):
        n = int(rng.integers(2, 12))
        flux = np.where(rng.random(n + 1) < 0.5, rng.random(n + 1), 0.0)
        lo = int(rng.integers(0, n))
        hi = int(rng.integers(lo, n))
        runs = water_levels.construction.flux_runs(flux, lo, hi)
        inner = sorted(j for f, t in runs for j in range(f + 1, t + 1))
        assert inner == [j for j in range(lo + 1, hi + 1) if flux[j] > 0]
        assert all(lo <= f < t <= hi for f, t in runs)
        assert all(t1 < f2 for (_, t1), (f2, _) in zip(runs, runs[1:]))


@st.composite
def float_rows(draw):
    """Float rows of 3-40 tokens: softmax rows of any sharpness, ``p = q``, a one-hot ``p``, and
    zeros in ``q``."""
    vocab = draw(st.integers(3, 40))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    p = np.exp(rng.normal(0, draw(st.sampled_from([0.5, 2.0, 6.0])), vocab))
    kind = draw(st.sampled_from(["softmax", "equal", "one_hot", "zeros_in_q"]))
    q = np.exp(rng.normal(0, 2.0, vocab))
    if kind == "equal":
        q = p.copy()
    elif kind == "one_hot":
        p = np.eye(vocab)[rng.integers(vocab)]
    elif kind == "zeros_in_q":
        q[rng.choice(vocab, vocab // 3, replace=False)] = 0.0
    assume(np.count_nonzero(q) >= 2)
    return p / p.sum(), q / q.sum()


def _setup_arrays(setup) -> list[np.ndarray]:
    """The set-up's order, ranks, cut, flux and ``x``, as float64 arrays, and its acceptance
    summed by numpy from ``x`` (the loops' own sum over an object array adds in another order)."""
    parts = [np.asarray(part, dtype=np.float64) for part in (setup.order, setup.rank, [setup.cut], setup.flux, setup.selection)]
    return parts + [np.minimum(np.asarray(setup.target, dtype=np.float64), parts[-1]).sum()]


@settings(max_examples=60, deadline=None)
@given(float_rows(), st.sampled_from(["pair", "clock"]))
def test_float_rows_set_up_as_the_generic_loops_do_to_the_bit(row, masses):
    """``flux_setup`` on float arrays (numpy, Python floats) gives the cut, flux and ``x`` of
    its generic loops on the same floats (an object array), bit for bit, with the pair masses
    and with the clock integral's (k = 3)."""
    from otm.rules.water_levels.clock_masses import ClockSetMasses, built_set_masses

    p, q = row
    order = ratio_order(p, q)
    if masses == "pair":
        masses_of = water_levels.pair.pair_masses
    else:
        assume(np.count_nonzero(q) > 3)
        ranked = q[order[:np.count_nonzero(q)]]
        masses_of = built_set_masses(ClockSetMasses(ranked / ranked.sum(), 3))
    fast = water_levels.flux_setup(p, q, order, masses_of)
    loops = water_levels.flux_setup(p.astype(object), q.astype(object), order, masses_of)
    for a, b in zip(_setup_arrays(fast), _setup_arrays(loops)):
        assert np.array_equal(a, b)
    assert fast.acceptance == _setup_arrays(fast)[-1]


def test_the_bitwise_set_up_comparison_sees_one_ulp():
    """The comparison above resolves a single unit in the last place: ``p`` with the entry of
    the lowest ratio moved by one ulp (the first term of every running sum) gives another set-up."""
    rng = np.random.default_rng(3)
    p, q = (v / v.sum() for v in np.exp(rng.normal(0, 2.0, (2, 30))))
    order = ratio_order(p, q)
    moved = p.copy()
    moved[order[0]] = np.nextafter(moved[order[0]], 1.0)
    fast = water_levels.flux_setup(moved, q, order, water_levels.pair.pair_masses)
    loops = water_levels.flux_setup(p.astype(object), q.astype(object), order, water_levels.pair.pair_masses)
    assert not all(np.array_equal(a, b) for a, b in zip(_setup_arrays(fast), _setup_arrays(loops)))


def test_representable_weights_scale_only_a_denormal_complement():
    """``with_representable_weights``: ordinary rows come back as they are; a dominant token
    whose complement is below ``COMPLEMENT_FLOOR`` keeps its ``q``, the others are multiplied by
    one power of two (exactly, denormals included) that lifts their mass into
    ``[COMPLEMENT_FLOOR, 2 COMPLEMENT_FLOOR)``; the result is a fixed point."""
    from otm.rules.water_levels.pair import COMPLEMENT_FLOOR, with_representable_weights

    ordinary = [np.array([0.2, 0.3, 0.5]), np.array([0.0, 1.0, 0.0]), np.array([1e-200, 1.0, 3e-200]),
                np.array([0.2, 0.8], dtype=np.float32)]
    for q in ordinary:
        assert with_representable_weights(q) is q
    q = np.array([0.0, 2e-313, 1.0, 3e-311, 5e-324, 0.0])
    scaled = with_representable_weights(q)
    others = np.array([1, 3, 4])
    assert scaled[2] == 1.0 and scaled[0] == scaled[5] == 0.0
    factor = scaled[others] / q[others]
    assert len(set(factor.tolist())) == 1 and np.log2(factor[0]).is_integer()
    assert COMPLEMENT_FLOOR <= scaled[others].sum() < 2 * COMPLEMENT_FLOOR
    assert with_representable_weights(scaled) is scaled


@pytest.mark.parametrize("row", [
    [1.0, 2.4622637973173777e-281, 1.6242500805301916e-287, 3.802654036088219e-287, 1.9250976683366822e-292],
    [0.9999999999622486, 3.761820780954047e-87, 3.775134544136581e-11, 7.781132240840048e-20],
])
def test_ranges_beyond_every_float_precision_are_built_in_rationals(row):
    """``p = q`` with a dominant token and others 1e-281 .. 1e-292 of it: a range sum of ``q``
    far up the ranks is beyond float64 and 256-bit floats alike, and a level that is exactly 1
    came out at ``1 + 6e-6`` (refused; in 256-bit floats a ZeroDivisionError, ``1 - q`` of the
    dominant token being 0). Small rows are built in rationals from the floats instead, and
    give the exact law."""
    from otm.distributions import as_fractions

    p = np.array(row)
    params = water_levels.pair_parameters(p, p.copy())
    assert params.arithmetic.startswith("exact rationals")
    from otm.rules import rule_law

    law, exact = rule_law("optimal_pair_wor", p, p.copy(), 2), rule_law("optimal_pair_wor", as_fractions(p), as_fractions(p), 2)
    assert abs(float(law.acceptance) - float(exact.acceptance)) < 1e-12
    assert np.abs(np.asarray(law.output_distribution, dtype=float) - exact.output_distribution.astype(float)).max() < 1e-12
