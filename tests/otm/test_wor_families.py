"""The without-replacement optimum on every pair family of scripts/pair_families.py, against
exact oracles: Fraction enumeration of the law (small V), an exact dynamic program over the
drawn counts (k up to 32), max-flow (moderate law sizes) and the evaluation of every prefix
(moderate V); the bounds and lemmas the branch and bound relies on, checked exactly."""
import itertools
from collections import defaultdict
from fractions import Fraction
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otm.draft_laws import table_law, without_replacement_law
from otm.errors import InvalidDraftCountError, NotApplicableError
from otm.formulations import prefix_scan as prefix_scan_module
from otm.formulations.max_flow import solve_max_flow
from otm.formulations.prefix_scan import prefix_scan, ratio_order
from otm.formulations.wor_all_in import (
    DraftPrefixes,
    accurate_cumsum,
    neighbour_bounds,
    outside_at,
    outside_bounds,
    outside_prefixes,
)
from otm.optimum import optimal_acceptance
from otm.tolerances import AGREEMENT_TOLERANCE

from pair_families import FAMILIES

#: Relative accuracy asked of ``R = 1 - Q(all in H)`` (the quadrature reaches ~1e-15 at
#: every k <= 32, module docstring of otm.formulations.wor_all_in; margin for the inputs'
#: own float64 rounding).
WOR_RELATIVE_ACCURACY = 1e-12
#: The float optimum against the exact one: the branch and bound stops within
#: ``prefix_scan._TIE`` (8.9e-16) of the least evaluated cut, each cut within ~1e-15 of exact.
OPTIMUM_ACCURACY = 1e-13


def exact_vector(floats):
    """Fractions equal to the given floats, renormalised to sum exactly 1."""
    fr = [Fraction(float(v)) for v in floats]
    total = sum(fr)
    return np.array([v / total for v in fr], dtype=object)


def exact_all_in(q, members, k: int) -> Fraction:
    """``Q(all k draws in H)`` exactly, by the definition: draw after draw, the next token is
    ``x`` with probability ``q(x) / (1 - mass drawn)``; tokens of equal ``q`` are
    exchangeable, so the state is the number drawn from each class of equal ``q`` in ``H``
    (``prod (class size + 1)`` states; every token its own class for distinct values)."""
    classes = defaultdict(int)
    for x in members:
        classes[q[x]] += 1
    values, sizes = list(classes), list(classes.values())
    if sum(sizes) < k:
        return Fraction(0)
    level = {tuple([0] * len(values)): Fraction(1)}
    for _ in range(k):
        following = defaultdict(Fraction)
        for drawn, prob in level.items():
            rest = 1 - sum(d * v for d, v in zip(drawn, values))
            for i, (value, size) in enumerate(zip(values, sizes)):
                if drawn[i] < size:
                    following[drawn[:i] + (drawn[i] + 1,) + drawn[i + 1:]] += prob * (size - drawn[i]) * value / rest
        level = following
    return sum(level.values(), Fraction(0))


def exact_optimum(p, q, k: int) -> Fraction:
    """``min_m p(H_m) + 1 - T(H_m)`` over the prefixes of the ratio order (the prefix
    theorem, checked against all token sets in tests/otm/test_closed_form.py)."""
    order = ratio_order(p, q)
    support = [x for x in order if q[x] > 0]
    return min(sum(p[support[:m]], start=Fraction(0)) + 1 - exact_all_in(q, support[:m], k) for m in range(len(support) + 1))


def family_pair(family: str, variant: int, seed: int, vocab: int):
    return FAMILIES[family][variant][1](np.random.default_rng(seed), vocab)


@st.composite
def family_instances(draw, vocab=None, max_k=4):
    """``(family, label, p, q, k)`` from every family of scripts/pair_families.py, with
    ``1 <= k <= min(max_k, number of tokens with q > 0)`` and ``vocab`` (a strategy,
    default 4..8) tokens."""
    family = draw(st.sampled_from(sorted(FAMILIES)))
    variant = draw(st.integers(0, len(FAMILIES[family]) - 1))
    p, q = family_pair(family, variant, draw(st.integers(0, 2**31)), draw(vocab if vocab is not None else st.integers(4, 8)))
    k = draw(st.integers(1, min(max_k, int(np.count_nonzero(q)))))
    return family, FAMILIES[family][variant][0], p, q, k


def few_valued_draft(rng, vocab: int, levels: int):
    """Exact draft with ``levels`` distinct values spanning up to 12 orders of magnitude (the
    regime of low temperature and near one-hot drafts) for the dynamic-program oracle."""
    values = [Fraction(1, 10 ** int(e)) for e in rng.choice(13, levels, replace=False)]
    q = np.array([values[c] for c in rng.integers(0, levels, vocab)], dtype=object)
    return q / q.sum()


# --- the oracles themselves -------------------------------------------------------------


def test_dynamic_program_matches_enumeration_of_the_law():
    rng = np.random.default_rng(0)
    for _ in range(12):
        vocab, k = int(rng.integers(2, 7)), int(rng.integers(1, 4))
        q = few_valued_draft(rng, vocab, int(rng.integers(1, 4))) if rng.random() < 0.5 else exact_vector(rng.dirichlet(np.ones(vocab)))
        k = min(k, vocab)
        law = without_replacement_law(q, k)
        for m in range(vocab + 1):
            assert exact_all_in(q, range(m), k) == law.all_in_probability(np.arange(m))


def test_a_wrong_dynamic_program_is_caught_by_the_enumeration():
    """Drawing with replacement in the program (no ``- drawn`` in the remaining mass)
    differs from the enumerated law: the cross-check above can fail."""
    q = exact_vector([0.5, 0.3, 0.2])
    with_replacement = sum(q[:2]) ** 2
    assert with_replacement != without_replacement_law(q, 2).all_in_probability(np.arange(2)) == exact_all_in(q, range(2), 2)


# --- every family, exact ------------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(family_instances())
def test_every_family_matches_the_exact_optimum_at_small_vocabulary(instance):
    family, label, p, q, k = instance
    expected = prefix_scan(exact_vector(p), exact_vector(q), k, "without_replacement")  # Fraction enumeration
    got = prefix_scan(p, q, k, "without_replacement")
    assert abs(got.value - float(expected.value)) <= OPTIMUM_ACCURACY, (family, label, k)
    assert abs(optimal_acceptance(p, q, k, draft_scheme="without_replacement") - float(expected.value)) <= OPTIMUM_ACCURACY


@settings(max_examples=40, deadline=None)
@given(family_instances(vocab=st.integers(6, 9), max_k=5), st.sampled_from([(2, 0), (2, 2**12), (3, 0)]))
def test_every_branch_of_the_branch_and_bound_is_exact(instance, search):
    """Two or three probes a round and a tiny range budget force several rounds of probes,
    neighbour bounds and range evaluations even at small V; the certificate (the chosen
    prefix and its all-in probability) is exact too."""
    family, label, p, q, k = instance
    probes, budget = search
    expected = prefix_scan(exact_vector(p), exact_vector(q), k, "without_replacement")
    with mock.patch.object(prefix_scan_module, "_PROBES", probes), mock.patch.object(prefix_scan_module, "_RANGE_BUDGET", budget):
        got = prefix_scan(p, q, k, "without_replacement")
    assert abs(got.value - float(expected.value)) <= OPTIMUM_ACCURACY, (family, label, k)
    exact_q = exact_vector(q)
    assert abs(got.all_in - float(exact_all_in(exact_q, got.cut, k))) <= OPTIMUM_ACCURACY


@pytest.mark.parametrize("k", [8, 16, 32])
def test_outside_probability_is_exact_to_1e_12_up_to_k_32(k):
    """R on prefixes of drafts over 12 orders of magnitude (2-3 values, as low temperature
    and near one-hot drafts have) against the exact dynamic program, by the range recursion
    and by the scattered-point evaluation."""
    rng = np.random.default_rng(k)
    for levels in (2, 3 if k < 32 else 2):
        q = few_valued_draft(rng, k + 10, levels)
        prefixes = np.sort(rng.choice(np.arange(k, k + 10), 4, replace=False))
        exact = [1 - exact_all_in(q, range(m), k) for m in prefixes]
        for values, _ in (outside_prefixes(q.astype(float), k, prefixes), outside_at(q.astype(float), k, prefixes)):
            for value, expected in zip(values, exact):
                assert abs(Fraction(float(value)) - expected) <= WOR_RELATIVE_ACCURACY * expected


def test_a_fixed_quadrature_step_is_caught_at_k_32():
    """The step 0.2 in log t that is exact to 1e-15 at k <= 4 misses R by ~1e-8 at k = 32
    (the integrand sharpens with k): the accuracy check above can fail."""
    rng = np.random.default_rng(32)
    q = few_valued_draft(rng, 42, 2)
    prefixes = np.array([33, 37, 41])
    exact = [1 - exact_all_in(q, range(m), 32) for m in prefixes]
    values, _ = outside_prefixes(q.astype(float), 32, prefixes, step=0.2)
    assert max(abs(Fraction(float(v)) - e) / e for v, e in zip(values, exact)) > WOR_RELATIVE_ACCURACY


@pytest.mark.parametrize("k", [8, 32])
def test_optimum_at_large_k_matches_the_exact_optimum(k):
    rng = np.random.default_rng(100 + k)
    for _ in range(2):
        vocab = k + 8
        q = few_valued_draft(rng, vocab, 2)
        p = exact_vector(rng.dirichlet(np.full(vocab, 0.3)))
        expected = exact_optimum(p, q, k)
        with mock.patch.object(prefix_scan_module, "_PROBES", 2):
            got = prefix_scan(p.astype(float), q.astype(float), k, "without_replacement")
        assert abs(got.value - float(expected)) <= OPTIMUM_ACCURACY


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_against_max_flow(family):
    """Moderate laws (V = 10, k = 3: 720 ordered tuples) through the certified max flow."""
    for variant in range(0, len(FAMILIES[family]), 2):
        p, q = family_pair(family, variant, variant, 10)
        k = min(3, int(np.count_nonzero(q)))
        flow = solve_max_flow(p, without_replacement_law(q, k))
        assert abs(prefix_scan(p, q, k, "without_replacement").value - flow.value) <= AGREEMENT_TOLERANCE


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("k", [2, 8, 32])
def test_every_family_against_all_prefixes_at_moderate_vocabulary(family, k):
    """V = 400: the branch and bound (few probes a round, so it runs several rounds) against
    the slow obvious route, R evaluated on every prefix and the least cut taken."""
    for variant in (0, len(FAMILIES[family]) - 1):
        p, q = family_pair(family, variant, 7, 400)
        n = int(np.count_nonzero(q))
        if k > n:
            continue
        order = ratio_order(p, q)
        p_sorted, q_sorted = p[order[:n]], q[order[:n]] / q[order[:n]].sum()
        outside, _ = outside_prefixes(q_sorted, k, np.arange(n + 1))
        expected = float(np.min(np.concatenate([[0.0], np.cumsum(p_sorted)]) + outside))  # p(H) + R(H)
        with mock.patch.object(prefix_scan_module, "_PROBES", 4), mock.patch.object(prefix_scan_module, "_RANGE_BUDGET", 2**14):
            got = prefix_scan(p, q, k, "without_replacement")
        assert abs(got.value - expected) <= OPTIMUM_ACCURACY, (family, variant, k)


def test_a_loose_tie_tolerance_is_caught():
    """Prefixes within ``_TIE`` of the least evaluated cut are not evaluated; at 1e-4 (three
    probes a round, no range evaluation) a near one-hot pair ends 1.3e-8 above the optimum
    that every prefix gives, at the real tolerance within 1e-13: the comparison can fail."""
    variant = [label for label, _ in FAMILIES["near_one_hot"]].index("both 1-1e-06")
    p, q = family_pair("near_one_hot", variant, 0, 200)
    order = ratio_order(p, q)
    outside, _ = outside_prefixes(q[order] / q[order].sum(), 8, np.arange(201))
    expected = float(np.min(np.concatenate([[0.0], np.cumsum(p[order])]) + outside))
    with mock.patch.object(prefix_scan_module, "_PROBES", 3), mock.patch.object(prefix_scan_module, "_RANGE_BUDGET", 0):
        assert abs(prefix_scan(p, q, 8, "without_replacement").value - expected) <= OPTIMUM_ACCURACY
        with mock.patch.object(prefix_scan_module, "_TIE", 1e-4):
            assert prefix_scan(p, q, 8, "without_replacement").value - expected > 1e3 * OPTIMUM_ACCURACY


@pytest.mark.parametrize("tiny", [1e-250, 1e-288, 1e-299, 1e-305, 1e-310, 5e-324])
def test_draft_probabilities_too_small_for_the_clocks(tiny):
    """``q`` down to denormals, ``p`` all on one such token (``alpha*`` is then the chance that
    it is drafted, 2/5): the clock integral covers ``q`` down to about 1e-290; below, its
    truncation bound passes ``_TRUNCATION_LIMIT`` and the scan is redone in rationals from the
    floats (said in ``details``); either way the optimum of the exact rationals. A ``q = 0``
    token of lower id does not take the tiny token's place. With the limit ignored, the rows
    from 1e-305 down come out wrong (1e-5 at 1e-305, 0 at 5e-324), as they did before the
    limit (at 1e-299 the truncated integral happens to be right, its bound is not)."""
    p = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0])
    q = np.array([0.0] + [tiny] * 5 + [1.0])
    q = q / q.sum()
    exact = prefix_scan(exact_vector(p), exact_vector(q), 3, "without_replacement").value
    assert abs(exact - Fraction(2, 5)) < Fraction(1, 10**200)  # a tiny token drawn before the big one: 1e-250 at most
    got = prefix_scan(p, q, 3, "without_replacement")
    assert abs(got.value - 0.4) <= AGREEMENT_TOLERANCE
    assert ("arithmetic" in got.details) == (tiny < 1e-290)
    if tiny < 1e-300:
        with mock.patch.object(prefix_scan_module, "_TRUNCATION_LIMIT", np.inf):
            assert abs(prefix_scan(p, q, 3, "without_replacement").value - 0.4) > 1e3 * AGREEMENT_TOLERANCE


def test_draft_probabilities_too_small_for_the_clocks_and_for_the_enumeration():
    """The same tiny draft probabilities on a row too large to enumerate: a typed refusal that
    names the smallest draft probability, not a wrong number."""
    p, q = np.zeros(400), np.full(400, 1e-310)
    p[3], q[-1] = 1.0, 1.0
    with pytest.raises(NotApplicableError, match="smallest positive draft probability, 1e-310"):
        prefix_scan(p, q / q.sum(), 3, "without_replacement")


# --- the facts the branch and bound uses --------------------------------------------------


def random_exact_draft(rng, vocab: int):
    kind = rng.integers(3)
    if kind == 0:
        return exact_vector(rng.dirichlet(np.full(vocab, rng.choice([0.3, 1.0, 3.0]))))
    if kind == 1:
        return exact_vector(10.0 ** rng.uniform(-25, 0, vocab))
    return few_valued_draft(rng, vocab, 2)


def test_outside_rate_rises_along_every_chain_of_sets():
    """The lemma of the module docstring ("Neighbours"): ``R(H + x) >= R(H) c(H + x) / c(H)``,
    i.e. ``R / c`` never falls when a token is added, and ``R`` never rises; exactly, on
    every set and token."""
    rng = np.random.default_rng(3)
    for _ in range(8):
        vocab = int(rng.integers(3, 6))
        q = random_exact_draft(rng, vocab)
        k = int(rng.integers(2, vocab + 1))
        law = without_replacement_law(q, k)
        for size in range(vocab):
            for members in itertools.combinations(range(vocab), size):
                outside = 1 - law.all_in_probability(np.array(members, dtype=np.int64))
                mass = 1 - sum(q[list(members)], start=Fraction(0))
                for x in set(range(vocab)) - set(members):
                    grown = 1 - law.all_in_probability(np.array(members + (x,), dtype=np.int64))
                    assert grown <= outside
                    assert grown * mass >= outside * (mass - q[x])


def test_outside_rate_can_fall_for_a_general_table_law():
    """The lemma is specific to the clocks: for a table law on pairs (``c`` from its first
    marginal) ``R / c`` falls somewhere, so the check above can fail."""
    rng = np.random.default_rng(0)
    pairs = np.array(list(itertools.product(range(3), repeat=2)))
    for _ in range(50):
        law = table_law(pairs, exact_vector(rng.dirichlet(np.ones(9) * 0.3)), 3)
        q = law.marginal(0)
        for members, x in (((), 0), ((0,), 1), ((1,), 0), ((0,), 2), ((), 1)):
            outside = 1 - law.all_in_probability(np.array(members, dtype=np.int64))
            grown = 1 - law.all_in_probability(np.array(members + (x,), dtype=np.int64))
            mass = 1 - sum(q[list(members)], start=Fraction(0))
            if grown * mass < outside * (mass - q[x]):
                return
    pytest.fail("no table law with a falling R / c found")


def exact_outside_on_prefixes(q, k: int):
    return np.array([float(1 - exact_all_in(q, range(m), k)) for m in range(len(q) + 1)])


def reversed_neighbour_bounds(outside, known, lower, upper):
    """:func:`neighbour_bounds` with the lemma read backwards (``R / c`` falling)."""
    index = np.flatnonzero(known)
    m = np.arange(outside.size)
    left = index[np.searchsorted(index, m, side="right") - 1]
    right = index[np.minimum(np.searchsorted(index, m, side="left"), index.size - 1)]
    with np.errstate(divide="ignore", invalid="ignore"):
        low = np.maximum(upper[right], np.where(outside[right] > 0, outside * upper[right] / outside[right], 0.0))
        high = np.minimum(upper[left], outside * upper[left] / outside[left])
    return np.where(known, lower, np.maximum(lower, low)), np.where(known, upper, np.minimum(upper, high))


def neighbour_brackets(rng, bounds) -> bool:
    """True when ``bounds`` (from exact values at random known prefixes) bracket the exact
    R on every prefix of 20 random drafts."""
    for _ in range(20):
        vocab = int(rng.integers(4, 9))
        k = int(rng.integers(2, min(vocab, 4) + 1))
        q = random_exact_draft(rng, vocab)
        exact = exact_outside_on_prefixes(q, k)
        draft = DraftPrefixes(q.astype(float), k)
        known = draft.lower == draft.upper
        known[rng.choice(vocab + 1, 2)] = True
        lower, upper = bounds(draft.outside, known, np.where(known, exact, draft.lower), np.where(known, exact, draft.upper))
        if not (np.all(lower <= exact * (1 + 1e-15)) and np.all(exact <= upper * (1 + 1e-15))):
            return False
    return True


def test_neighbour_bounds_bracket_the_exact_values():
    assert neighbour_brackets(np.random.default_rng(4), neighbour_bounds)


def test_neighbour_bounds_with_the_lemma_reversed_are_caught():
    assert not neighbour_brackets(np.random.default_rng(4), reversed_neighbour_bounds)


def test_bounds_use_the_largest_tokens_inside_the_prefix():
    """A big token outside the prefix no longer spoils the upper bound: with the largest
    tokens of the whole vocabulary, ``1 - M_1 = 0.15 < c = 0.85`` on the prefix of the five
    small tokens and the bound was 1; the bounds bracket the exact R."""
    q = exact_vector([0.05, 0.04, 0.03, 0.02, 0.01, 0.85])  # the big token last in the order
    exact = exact_outside_on_prefixes(q, 3)
    lower, upper = outside_bounds(q.astype(float), 3)
    assert np.all(lower <= exact) and np.all(exact <= upper)
    assert upper[5] < 0.9995


def test_broken_upper_bound_is_caught():
    """``1 - (1 - c)^k`` (the i.i.d.-like value) as the upper bound misses the exact R."""
    rng = np.random.default_rng(6)
    q = random_exact_draft(rng, 6)
    exact = exact_outside_on_prefixes(q, 3)
    c = DraftPrefixes(q.astype(float), 3).outside
    assert np.any(exact[3:6] > 1 - (1 - c[3:6]) ** 3)


@settings(max_examples=25, deadline=None)
@given(family_instances(vocab=st.just(300), max_k=32))
def test_scattered_points_agree_with_the_range_recursion(instance):
    """``outside_at`` (moments and big tokens at each point) against ``outside_prefixes``
    (the range recursion from the first point) on family drafts at V = 300."""
    _, _, p, q, k = instance
    n = int(np.count_nonzero(q))
    if k == n or k == 1:
        return
    order = ratio_order(p, q)
    q_sorted = q[order[:n]] / q[order[:n]].sum()
    points = np.unique(np.linspace(k, n - 1, 6).astype(np.int64))
    scattered, _ = outside_at(q_sorted, k, points)
    ranged, _ = outside_prefixes(q_sorted, k, points)
    np.testing.assert_allclose(scattered, ranged, rtol=WOR_RELATIVE_ACCURACY, atol=0)


# --- sums of many alike terms -------------------------------------------------------------


def relative_prefix_error(sums, values) -> float:
    exact = list(itertools.accumulate(Fraction(float(v)) for v in values))
    return max(float(abs(Fraction(float(a)) - e) / e) for a, e in zip(sums, exact) if e)


@pytest.mark.parametrize("kind", ["equal", "wide", "mixed"])
def test_accurate_cumsum_is_within_about_one_rounding(kind):
    rng = np.random.default_rng(9)
    values = {"equal": np.full(20_000, 1 / 3), "wide": 10.0 ** rng.uniform(-30, 0, 20_000),
              "mixed": np.concatenate([np.full(10_000, 1e-5), rng.random(10_000)])}[kind]
    assert relative_prefix_error(accurate_cumsum(values), values) <= 2 * np.finfo(np.float64).eps


def test_plain_cumsum_fails_the_same_check():
    values = np.full(20_000, 1 / 3)
    assert relative_prefix_error(np.cumsum(values), values) > 100 * np.finfo(np.float64).eps


def test_flat_draft_at_full_vocabulary_against_the_closed_form():
    """Uniform ``q`` over V = 151,936: ``T(H) = prod_{i<k} (m - i) / (V - i)`` exactly; the
    outside masses of 151,936 equal terms (a plain cumsum was off by 1e-12) and the moments
    keep R exact to 1e-12 relative."""
    vocab, k = 151_936, 8
    q = np.full(vocab, 1.0 / vocab)
    points = np.array([vocab // 2, vocab - 1000, vocab - 1])
    values, _ = outside_at(q, k, points)
    for m, value in zip(points.tolist(), values):
        expected = 1 - np.prod([Fraction(m - i, vocab - i) for i in range(k)])
        assert abs(Fraction(float(value)) - expected) <= WOR_RELATIVE_ACCURACY * expected


# --- degenerate inputs --------------------------------------------------------------------


def test_k_equal_to_the_support_is_exact():
    q = exact_vector([0.0, 0.5, 0.0, 0.3, 0.2])
    p = exact_vector([0.1, 0.2, 0.3, 0.2, 0.2])
    for k in (1, 2, 3):
        expected = float(exact_optimum(p, q, k))
        assert abs(prefix_scan(p.astype(float), q.astype(float), k, "without_replacement").value - expected) <= OPTIMUM_ACCURACY
    assert abs(prefix_scan(p.astype(float), q.astype(float), 3, "without_replacement").value - 0.6) <= OPTIMUM_ACCURACY  # p(support)


def test_more_drafts_than_the_support_raise_in_the_scan():
    p, q = [0.2, 0.3, 0.5, 0.0], [0.0, 0.5, 0.5, 0.0]
    with pytest.raises(InvalidDraftCountError, match="k=3"):
        prefix_scan(p, q, 3, "without_replacement")
    with pytest.raises(InvalidDraftCountError):
        optimal_acceptance(p, q, 5, draft_scheme="without_replacement")  # k > V: no k distinct tokens
    # V >= k > support: the public optimum takes the exhausted-support closed form, p(S)
    # with S = the support plus the lowest-index token with q = 0 (docs/theory.md 2.2)
    assert abs(optimal_acceptance(p, q, 3, draft_scheme="without_replacement") - 1.0) <= AGREEMENT_TOLERANCE


def test_one_hot_draft():
    vocab = 50
    q = np.zeros(vocab)
    q[7] = 1.0
    p = np.random.default_rng(8).dirichlet(np.ones(vocab))
    assert abs(prefix_scan(p, q, 1, "without_replacement").value - p[7]) <= OPTIMUM_ACCURACY
    with pytest.raises(InvalidDraftCountError):
        prefix_scan(p, q, 2, "without_replacement")
    near = np.full(vocab, 1e-12 / (vocab - 1))
    near[7] = 1.0 - 1e-12
    for k in (2, 5):
        expected = float(exact_optimum(exact_vector(p), exact_vector(near), k))
        assert abs(prefix_scan(p, near, k, "without_replacement").value - expected) <= OPTIMUM_ACCURACY
