"""Closed forms (prefix scan, Khisti k=2, SpecTr bounds) against brute force over ALL
token sets and against the LP optimum."""
import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, strategies as st

from otm.draft_laws import iid_law, table_law, without_replacement_law
from otm.errors import InvalidDistributionError, InvalidDraftCountError, UnknownNameError
from otm.formulations.full_lp import solve_full_lp
from otm.formulations.khisti_k2 import acceptance_is_one, khisti_k2_closed_form
from otm.formulations.prefix_scan import prefix_scan, ratio_order
from otm.formulations.spectr_bounds import bernoulli_optimum, spectr_upper_bound, uniform_optimum
from otm.formulations.wor_all_in import all_in_bounds, all_in_prefixes
from otm.tolerances import AGREEMENT_TOLERANCE

SAMPLINGS = ("iid", "without_replacement")


def exact_vector(floats):
    """Fractions equal to the given floats, renormalised to sum exactly 1."""
    fr = [Fraction(float(v)) for v in floats]
    total = sum(fr)
    return np.array([v / total for v in fr], dtype=object)


def build_law(q, k, sampling):
    return iid_law(q, k) if sampling == "iid" else without_replacement_law(q, k)


def cut_values(p, law):
    """``{H: p(H) + 1 - Q(all in H)}`` for every token set H (the slow obvious reference)."""
    V = law.vocab_size
    out = {}
    for r in range(V + 1):
        for H in itertools.combinations(range(V), r):
            out[H] = sum(p[list(H)], start=0 * p[0]) + 1 - law.all_in_probability(np.array(H, dtype=np.int64))
    return out


def brute_force(p, law):
    return min(cut_values(p, law).values())


@st.composite
def instances(draw, max_vocab=5):
    V = draw(st.integers(1, max_vocab))
    alpha = draw(st.sampled_from([0.1, 0.5, 1.0, 4.0]))
    seed = draw(st.integers(0, 2**31))
    rng = np.random.default_rng(seed)
    p, q = rng.dirichlet(np.full(V, alpha)), rng.dirichlet(np.full(V, alpha))
    if V > 1 and draw(st.booleans()):
        q[rng.integers(V)] = 0.0  # q zero where p may be positive
    if V > 1 and draw(st.booleans()):
        p[rng.integers(V)] = 0.0
    p, q = exact_vector(p / p.sum()), exact_vector(q / q.sum())
    n = sum(1 for v in q if v > 0)
    sampling = draw(st.sampled_from(SAMPLINGS))
    k = draw(st.integers(1, n if sampling == "without_replacement" else 4))
    return p, q, k, sampling


@given(instances())
def test_prefix_scan_equals_min_over_all_sets(instance):
    p, q, k, sampling = instance
    expected = brute_force(p, build_law(q, k, sampling))
    exact = prefix_scan(p, q, k, sampling)
    assert exact.acceptance == expected  # exact rationals, no tolerance
    floats = prefix_scan(p.astype(float), q.astype(float), k, sampling)
    assert abs(floats.acceptance - float(expected)) <= AGREEMENT_TOLERANCE


@given(instances())
def test_certificate_is_a_cut_with_the_stated_value(instance):
    p, q, k, sampling = instance
    sol = prefix_scan(p, q, k, sampling)
    law = build_law(q, k, sampling)
    H = sol.certificate["H"]
    assert sol.certificate["all_in"] == law.all_in_probability(H.astype(np.int64))
    assert sol.certificate["cut_value"] == sum(p[H], start=Fraction(0)) + 1 - sol.certificate["all_in"]
    assert sol.acceptance == sol.certificate["cut_value"]


@given(instances(max_vocab=4))
def test_prefix_scan_agrees_with_full_lp(instance):
    p, q, k, sampling = instance
    lp = solve_full_lp(p.astype(float), build_law(q.astype(float), k, sampling))
    assert abs(prefix_scan(p.astype(float), q.astype(float), k, sampling).acceptance - lp.acceptance) <= AGREEMENT_TOLERANCE


def test_max_flow_agrees_when_available():
    """Against the max-flow formulation with networkx's preflow-push (its default,
    Dinitz, raised IndexError in networkx on some float instances when this was written)."""
    max_flow = pytest.importorskip("otm.formulations.max_flow")
    from networkx.algorithms.flow import preflow_push
    rng = np.random.default_rng(5)
    for sampling in SAMPLINGS:
        for _ in range(10):
            p, q = rng.dirichlet(np.ones(5)), rng.dirichlet(np.ones(5))
            flow = max_flow.solve_max_flow(p, build_law(q, 3, sampling), flow_func=preflow_push)
            assert abs(prefix_scan(p, q, 3, sampling).acceptance - flow.acceptance) <= AGREEMENT_TOLERANCE


def test_a_broken_closed_form_is_caught_by_the_same_comparison():
    """q(H)^(k-1) instead of q(H)^k: the brute-force comparison must reject it."""
    p, q, k = exact_vector([0.1, 0.2, 0.7]), exact_vector([0.5, 0.3, 0.2]), 3
    order = ratio_order(p, q)
    broken = min(
        sum(p[order[:m]], start=Fraction(0)) + 1 - sum(q[order[:m]], start=Fraction(0)) ** (k - 1) for m in range(4)
    )
    assert broken != brute_force(p, iid_law(q, k))
    assert prefix_scan(p, q, k).acceptance == brute_force(p, iid_law(q, k))


def test_prefix_optimality_fails_for_a_general_table_law():
    """The prefix theorem is specific to i.i.d. / without-replacement drafts: for a table
    law on pairs no prefix of the p/Q-marginal order need be a min cut."""
    rng = np.random.default_rng(0)
    pairs = np.array(list(itertools.product(range(4), repeat=2)))
    for _ in range(200):
        p = rng.dirichlet(np.ones(4) * 0.5)
        law = table_law(pairs, rng.dirichlet(np.ones(16) * 0.3), 4)
        q = law.marginal(0)
        order = ratio_order(p, q)
        cuts = cut_values(p, law)
        best_prefix = min(cuts[tuple(sorted(order[:m]))] for m in range(5))
        if best_prefix > min(cuts.values()) + 1e-3:
            return
    pytest.fail("no table law found where the prefix scan misses the min cut")


def test_without_replacement_all_in_matches_enumeration():
    rng = np.random.default_rng(1)
    for _ in range(40):
        V = int(rng.integers(2, 7))
        k = int(rng.integers(2, V + 1))
        q = exact_vector(rng.dirichlet(np.full(V, rng.choice([0.3, 1.0, 3.0]))) + 1e-6)
        law = without_replacement_law(q, k)
        values, info = all_in_prefixes(q.astype(float), k, np.arange(V + 1))
        expected = [float(law.all_in_probability(np.arange(m))) for m in range(V + 1)]
        np.testing.assert_allclose(values, expected, rtol=0, atol=1e-12)
        assert info["quadrature_error_estimate"] < 1e-12
        lo, hi = all_in_bounds(q.astype(float), k)
        assert np.all(lo <= np.array(expected) + 1e-15) and np.all(np.array(expected) <= hi + 1e-15)


def test_without_replacement_bounds_reject_the_iid_value():
    """Without replacement, T(H) <= q(H)^k with strict inequality here; using the i.i.d.
    value instead must change the optimum (the check can fail)."""
    p, q = exact_vector([0.3, 0.3, 0.4]), exact_vector([0.5, 0.3, 0.2])
    assert prefix_scan(p, q, 2, "without_replacement").acceptance == brute_force(p, without_replacement_law(q, 2))
    assert prefix_scan(p, q, 2, "iid").acceptance != brute_force(p, without_replacement_law(q, 2))


@pytest.mark.parametrize("sampling", SAMPLINGS)
@pytest.mark.parametrize(
    "p, q, k, expected",
    [
        ([0.2, 0.3, 0.5], [0.2, 0.3, 0.5], 2, 1.0),  # p = q
        ([1.0, 0.0, 0.0], [1.0, 0.0, 0.0], 1, 1.0),  # one-hot, equal
        ([0.0, 1.0, 0.0], [0.5, 0.0, 0.5], 2, 0.0),  # disjoint supports
        ([1.0], [1.0], 1, 1.0),  # V = 1
        ([0.5, 0.5, 0.0], [0.5, 0.25, 0.25], 1, 0.75),  # k = 1: 1 - TV
    ],
)
def test_edge_cases(p, q, k, expected, sampling):
    assert abs(prefix_scan(p, q, k, sampling).acceptance - expected) <= AGREEMENT_TOLERANCE


def test_one_hot_target_iid_and_without_replacement():
    p, q = [1.0, 0.0, 0.0], [0.5, 0.25, 0.25]
    assert abs(prefix_scan(p, q, 2).acceptance - 0.75) <= AGREEMENT_TOLERANCE  # P(token 0 drawn)
    wor = 1 - 0.25 * (0.25 / 0.75) * 2  # 1 - P(neither draw is token 0)
    assert abs(prefix_scan(p, q, 2, "without_replacement").acceptance - wor) <= AGREEMENT_TOLERANCE


def test_typed_errors():
    with pytest.raises(InvalidDraftCountError):
        prefix_scan([0.5, 0.5], [0.5, 0.5], 3, "without_replacement")  # k > V
    with pytest.raises(InvalidDraftCountError):
        prefix_scan([0.5, 0.5, 0.0], [1.0, 0.0, 0.0], 2, "without_replacement")  # k > support
    with pytest.raises(InvalidDraftCountError):
        prefix_scan([1.0], [1.0], 0)
    with pytest.raises(UnknownNameError):
        prefix_scan([1.0], [1.0], 1, "hub")
    with pytest.raises(InvalidDistributionError):
        prefix_scan([0.5, 0.6], [0.5, 0.5], 1)


@given(instances(max_vocab=5))
def test_khisti_theorem_3_equals_min_cut(instance):
    p, q, _, _ = instance
    assert khisti_k2_closed_form(p, q) == brute_force(p, iid_law(q, 2))


@given(instances(max_vocab=4))
def test_acceptance_is_one_iff_every_set_satisfies_the_condition(instance):
    p, q, k, sampling = instance
    law = build_law(q, k, sampling)
    condition = all(sum(p[list(H)], start=Fraction(0)) >= law.all_in_probability(np.array(H, dtype=np.int64))
                    for r in range(len(p) + 1) for H in itertools.combinations(range(len(p)), r))
    assert acceptance_is_one(p, q, k, sampling) == condition


def test_acceptance_one_with_p_not_equal_q():
    """seed 001 Example 1 spirit: k = 2 reaches 1 with p != q, k = 1 cannot."""
    p, q = [0.5, 0.5], [0.6, 0.4]
    assert acceptance_is_one(p, q, 2) and not acceptance_is_one(p, q, 1)


@given(instances(max_vocab=4))
def test_spectr_bound_is_an_upper_bound(instance):
    p, q, k, _ = instance
    p, q = p.astype(float), q.astype(float)
    optimum = prefix_scan(p, q, k).acceptance
    assert spectr_upper_bound(p, q, k) >= optimum - AGREEMENT_TOLERANCE
    for kept in ([], [0]):
        assert spectr_upper_bound(p, q, k, kept=kept) >= optimum - AGREEMENT_TOLERANCE


def test_spectr_bound_is_not_always_tight():
    """The per-token bound exceeds the optimum here, so the >= test above can fail."""
    p, q = [0.5, 0.5, 0.0, 0.0], [0.25] * 4  # 0.875 vs 0.75
    assert spectr_upper_bound(p, q, 2) > prefix_scan(p, q, 2).acceptance + 0.1


@pytest.mark.parametrize("a, b, k", [(0.25, 0.25, 2), (0.25, 0.6, 3), (0.25, 0.05, 2), (0.9, 0.2, 4), (0.0, 1.0, 2)])
def test_bernoulli_closed_form_against_lp(a, b, k):
    p, q = [1 - a, a], [1 - b, b]
    expected = bernoulli_optimum(a, b, k)
    assert abs(solve_full_lp(p, iid_law(q, k)).acceptance - expected) <= AGREEMENT_TOLERANCE
    assert abs(prefix_scan(p, q, k).acceptance - expected) <= AGREEMENT_TOLERANCE
    assert abs(spectr_upper_bound(p, q, k) - expected) <= AGREEMENT_TOLERANCE  # tight (App. B.2)


@pytest.mark.parametrize("sampling", SAMPLINGS)
@pytest.mark.parametrize("m, n, k", [(2, 4, 2), (1, 4, 3), (3, 4, 2), (4, 2, 2), (2, 2, 1)])
def test_uniform_closed_form_against_lp(m, n, k, sampling):
    V = max(m, n)
    p = [Fraction(1, m) if i < m else Fraction(0) for i in range(V)]
    q = [Fraction(1, n) if i < n else Fraction(0) for i in range(V)]
    expected = uniform_optimum(m, n, k, sampling)
    law = build_law(np.array(q, dtype=object), k, sampling)
    assert brute_force(np.array(p, dtype=object), law) == expected
    lp = solve_full_lp(np.array(p, dtype=float), build_law(np.array(q, dtype=float), k, sampling))
    assert abs(lp.acceptance - float(expected)) <= AGREEMENT_TOLERANCE


def test_uniform_spectr_bound_with_the_papers_set_is_tight():
    """App. B.2, Fig. 1: Omega_0 = draft tokens outside the target support."""
    p, q = [0.5, 0.5, 0.0, 0.0], [0.25] * 4
    assert abs(spectr_upper_bound(p, q, 2, kept=[2, 3]) - float(uniform_optimum(2, 4, 2))) <= AGREEMENT_TOLERANCE
    assert spectr_upper_bound(p, q, 2) > float(uniform_optimum(2, 4, 2))  # per-token bound is loose here


def test_large_vocabulary_runs_and_matches_bounds():
    rng = np.random.default_rng(3)
    V = 20_000
    logits = rng.gumbel(size=V) * 2
    q = np.exp(logits - logits.max()); q /= q.sum()
    p = np.exp(logits + 0.5 * rng.normal(size=V) - logits.max()); p /= p.sum()
    for k in (2, 4):
        iid = prefix_scan(p, q, k).acceptance
        wor = prefix_scan(p, q, k, "without_replacement").acceptance
        assert 0 <= iid <= wor + AGREEMENT_TOLERANCE <= 1 + 2 * AGREEMENT_TOLERANCE
        assert iid <= spectr_upper_bound(p, q, k) + AGREEMENT_TOLERANCE
