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
from otm.formulations.prefix_scan import PREFIX_SCHEMES, prefix_scan, ratio_order
from otm.formulations.spectr_bounds import bernoulli_optimum, spectr_upper_bound, uniform_optimum
from otm.formulations import wor_all_in
from otm.formulations.wor_all_in import all_in_bounds, all_in_prefixes, outside_bounds, outside_prefixes
from otm.tolerances import AGREEMENT_TOLERANCE

#: Accuracy asked of ``R = 1 - Q(all in H)`` without replacement, relative to ``R``: the
#: quadrature reaches ~1e-15 (module docstring of otm.formulations.wor_all_in); the
#: margin covers the float64 inputs' own rounding.
WOR_RELATIVE_ACCURACY = 1e-12


def exact_vector(floats):
    """Fractions equal to the given floats, renormalised to sum exactly 1."""
    fr = [Fraction(float(v)) for v in floats]
    total = sum(fr)
    return np.array([v / total for v in fr], dtype=object)


def build_law(q, k, draft_scheme):
    return iid_law(q, k) if draft_scheme == "iid" else without_replacement_law(q, k)


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


def wide_vector(rng, V):
    """Probabilities spanning up to 30 orders of magnitude (the regime of real softmaxes)."""
    return 10.0 ** rng.uniform(-30, 0, V)


@st.composite
def instances(draw, max_vocab=5):
    V = draw(st.integers(1, max_vocab))
    alpha = draw(st.sampled_from([0.1, 0.5, 1.0, 4.0, "wide"]))
    seed = draw(st.integers(0, 2**31))
    rng = np.random.default_rng(seed)
    if alpha == "wide":
        p, q = wide_vector(rng, V), wide_vector(rng, V)
    else:
        p, q = rng.dirichlet(np.full(V, alpha)), rng.dirichlet(np.full(V, alpha))
    if V > 1 and draw(st.booleans()):
        q[rng.integers(V)] = 0.0  # q zero where p may be positive
    if V > 1 and draw(st.booleans()):
        p[rng.integers(V)] = 0.0
    if not p.any():
        p[0] = 1.0
    if not q.any():
        q[-1] = 1.0
    p, q = exact_vector(p / p.sum()), exact_vector(q / q.sum())
    n = sum(1 for v in q if v > 0)
    draft_scheme = draw(st.sampled_from(PREFIX_SCHEMES))
    k = draw(st.integers(1, n if draft_scheme == "without_replacement" else 4))
    return p, q, k, draft_scheme


@given(instances())
def test_prefix_scan_equals_min_over_all_sets(instance):
    p, q, k, draft_scheme = instance
    expected = brute_force(p, build_law(q, k, draft_scheme))
    exact = prefix_scan(p, q, k, draft_scheme)
    assert exact.acceptance == expected  # exact rationals, no tolerance
    floats = prefix_scan(p.astype(float), q.astype(float), k, draft_scheme)
    assert abs(floats.acceptance - float(expected)) <= AGREEMENT_TOLERANCE


@given(instances())
def test_certificate_is_a_cut_with_the_stated_value(instance):
    p, q, k, draft_scheme = instance
    sol = prefix_scan(p, q, k, draft_scheme)
    law = build_law(q, k, draft_scheme)
    H = sol.cut
    assert sol.all_in == law.all_in_probability(H)
    assert sol.cut_value == sum(p[H], start=Fraction(0)) + 1 - sol.all_in
    assert sol.value == sol.cut_value
    assert sol.verified_gap == 0


@given(instances(max_vocab=4))
def test_prefix_scan_agrees_with_full_lp(instance):
    p, q, k, draft_scheme = instance
    lp = solve_full_lp(p.astype(float), build_law(q.astype(float), k, draft_scheme))
    assert abs(prefix_scan(p.astype(float), q.astype(float), k, draft_scheme).acceptance - lp.acceptance) <= AGREEMENT_TOLERANCE


def test_max_flow_agrees_when_available():
    """Against the max-flow formulation with networkx's preflow-push (its default,
    Dinitz, raised IndexError in networkx on some float instances when this was written)."""
    max_flow = pytest.importorskip("otm.formulations.max_flow")
    from networkx.algorithms.flow import preflow_push
    rng = np.random.default_rng(5)
    for draft_scheme in PREFIX_SCHEMES:
        for _ in range(10):
            p, q = rng.dirichlet(np.ones(5)), rng.dirichlet(np.ones(5))
            flow = max_flow.solve_max_flow(p, build_law(q, 3, draft_scheme), flow_func=preflow_push)
            assert abs(prefix_scan(p, q, 3, draft_scheme).acceptance - flow.acceptance) <= AGREEMENT_TOLERANCE


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


def random_draft(rng, V):
    kind = rng.integers(3)
    if kind == 0:
        q = rng.dirichlet(np.full(V, rng.choice([0.3, 1.0, 3.0]))) + 1e-6
    elif kind == 1:
        q = wide_vector(rng, V)
    else:
        q = 10.0 ** -rng.integers(0, 25, V).astype(float)  # exact ties in q
    return exact_vector(q / q.sum())


def exchange_gaps(q_weights, law):
    """``q_b Delta_a(G + b) - q_a Delta_b(G)`` for every set G and tokens a != b outside it
    (the exchange lemma (*) of otm.formulations.prefix_scan says all are >= 0)."""
    V = law.vocab_size
    T = {}
    for r in range(V + 1):
        for H in itertools.combinations(range(V), r):
            T[frozenset(H)] = law.all_in_probability(np.array(H, dtype=np.int64))
    for G in T:
        for a, b in itertools.permutations([x for x in range(V) if x not in G], 2):
            yield q_weights[b] * (T[G | {a, b}] - T[G | {b}]) - q_weights[a] * (T[G | {b}] - T[G])


def test_exchange_lemma_holds_exactly_without_replacement():
    rng = np.random.default_rng(6)
    for _ in range(25):
        V = int(rng.integers(3, 6))
        k = int(rng.integers(2, V + 1))
        q = random_draft(rng, V)
        assert min(exchange_gaps(q, without_replacement_law(q, k))) >= 0


def test_exchange_lemma_fails_for_a_general_table_law():
    """The check can fail: a table law on pairs (with its first-draft marginal as the
    weights) violates (*), as it must where the prefix property fails."""
    pairs = np.array(list(itertools.product(range(3), repeat=2)))
    rng = np.random.default_rng(0)
    for _ in range(50):
        probs = exact_vector(rng.dirichlet(np.ones(9) * 0.3))
        law = table_law(pairs, probs, 3)
        if min(exchange_gaps(law.marginal(0), law)) < 0:
            return
    pytest.fail("no table law violating the exchange lemma found")


@pytest.mark.parametrize("draft_scheme", PREFIX_SCHEMES)
def test_every_tie_breaking_gives_an_optimal_prefix(draft_scheme):
    """p/q ties: whatever order the tied tokens take, the best prefix is a min cut (the
    proof's last step); exact rationals, all orders of the tie class."""
    q = exact_vector([0.1, 0.2, 0.3, 0.15, 0.25])
    p = np.array([Fraction(1, 2) * q[0], Fraction(1, 2) * q[1], Fraction(1, 2) * q[2], 0, 0], dtype=object)
    p[3] = p[4] = (1 - p[:3].sum()) / 2
    law = build_law(q, 3, draft_scheme)
    best = brute_force(p, law)
    for tied in itertools.permutations([0, 1, 2]):
        order = list(tied) + [3, 4]
        cuts = [sum(p[order[:m]], start=Fraction(0)) + 1 - law.all_in_probability(np.array(order[:m], dtype=np.int64))
                for m in range(6)]
        assert min(cuts) == best


def test_without_replacement_all_in_matches_enumeration():
    """R = 1 - T on every prefix against the exact law (Fractions), to a RELATIVE accuracy,
    with q spanning up to 30 orders of magnitude; the bounds bracket the exact value."""
    rng = np.random.default_rng(1)
    for _ in range(60):
        V = int(rng.integers(2, 7))
        k = int(rng.integers(2, V + 1))
        q = random_draft(rng, V)
        law = without_replacement_law(q, k)
        expected = [1 - law.all_in_probability(np.arange(m)) for m in range(V + 1)]
        values, info = outside_prefixes(q.astype(float), k, np.arange(V + 1))
        for value, exact in zip(values, expected):
            assert abs(Fraction(float(value)) - exact) <= WOR_RELATIVE_ACCURACY * exact
        assert info["quadrature_error_estimate"] < 1e-12
        lo, hi = outside_bounds(q.astype(float), k)
        assert all(a <= float(e) <= b for a, e, b in zip(lo, expected, hi))  # exact value, rounded
        all_in, _ = all_in_prefixes(q.astype(float), k, np.arange(V + 1))
        np.testing.assert_allclose(all_in, [float(1 - e) for e in expected], rtol=0, atol=WOR_RELATIVE_ACCURACY)
        t_lo, t_hi = all_in_bounds(q.astype(float), k)  # 1 - the bounds on R: one rounding
        exact_all_in = np.array([float(1 - e) for e in expected])
        assert np.all(t_lo <= exact_all_in + 1e-15)
        assert np.all(exact_all_in <= t_hi + 1e-15)


def test_upper_bound_survives_a_mass_close_to_one():
    """q = [.., 0.99, .., 1e-12]: ``1 - M_i`` formed as a difference lost 4 digits and the
    old upper bound on R fell below the exact value; the bounds must still bracket it."""
    q = exact_vector([1e-24, 1e-2, 0.99, 1e-7, 1e-9, 1e-12])
    law = without_replacement_law(q, 5)
    lo, hi = outside_bounds(q.astype(float), 5)
    for m in range(7):
        exact = 1 - law.all_in_probability(np.arange(m))
        assert lo[m] <= float(exact) <= hi[m]


def test_a_coarse_quadrature_is_detected():
    """With a step of 1.2 in log t the trapezoid misses the exact law by far more than the
    tolerance, and its own error estimate says so (the accuracy checks can fail)."""
    rng = np.random.default_rng(4)
    q = exact_vector(rng.dirichlet(np.ones(6)))
    law = without_replacement_law(q, 3)
    expected = np.array([float(1 - law.all_in_probability(np.arange(m))) for m in range(7)])
    values, info = outside_prefixes(q.astype(float), 3, np.arange(7), step=1.2)
    assert np.abs(values - expected).max() > 1e3 * AGREEMENT_TOLERANCE
    assert info["quadrature_error_estimate"] > 1e-12


def poisson_binomial_head(q, k, t):
    """``[G, k]`` P(N_H(t) = j), j < k, by the plain sequential recursion (slow reference)."""
    state = np.zeros((t.size, k))
    state[:, 0] = 1.0
    for value in q:
        stay = np.exp(-value * t)[:, None]
        shifted = np.concatenate([np.zeros((t.size, 1)), state[:, :-1]], axis=1)
        state = stay * state + (1 - stay) * shifted
    return state


@pytest.mark.parametrize("k", [1, 2, 5])
def test_head_state_and_range_recursion_match_the_plain_recursion(k, monkeypatch):
    """Newton's identities + big tokens (the state at the first prefix) and the blocked
    cumsum recursion (small blocks forced, single-token blocks included) against the plain
    sequential recursion, at times from 1e-3 to 1e7 and q from 1e-12 to 0.5."""
    monkeypatch.setattr(wor_all_in, "_BLOCK_EXPONENT", 5.0)
    monkeypatch.setattr(wor_all_in, "_CHUNK", 7)
    rng = np.random.default_rng(2)
    q = 10.0 ** rng.uniform(-12, 0, 60)
    q /= q.sum()
    t = np.exp(np.linspace(np.log(1e-3), np.log(1e7), 40))
    head = wor_all_in._head_state(q[:30], k, t)
    np.testing.assert_allclose(head, poisson_binomial_head(q[:30], k, t), rtol=1e-9, atol=1e-15)
    below = wor_all_in._below_k(q, k, 30, 60, t)
    reference = np.stack([poisson_binomial_head(q[:m], k, t).sum(axis=1) for m in range(30, 61)], axis=1)
    np.testing.assert_allclose(below, reference, rtol=1e-9, atol=1e-15)


def test_many_big_tokens_make_the_state_vanish():
    """Beyond ``_vanishing_count(k)`` tokens that ring with probability >= 1/2 the head is
    set to 0; the exact head is below ``_TINY`` there."""
    q = np.full(400, 1 / 400)
    t = np.array([280.0])  # q t = 0.7 > ln 2: each rings with probability 0.503
    head = wor_all_in._head_state(q, 3, t)
    assert np.all(head == 0.0)
    assert poisson_binomial_head(q, 3, t).sum() <= wor_all_in._TINY


def test_without_replacement_bounds_reject_the_iid_value():
    """Without replacement, T(H) <= q(H)^k with strict inequality here; using the i.i.d.
    value instead must change the optimum (the check can fail)."""
    p, q = exact_vector([0.3, 0.3, 0.4]), exact_vector([0.5, 0.3, 0.2])
    assert prefix_scan(p, q, 2, "without_replacement").acceptance == brute_force(p, without_replacement_law(q, 2))
    assert prefix_scan(p, q, 2, "iid").acceptance != brute_force(p, without_replacement_law(q, 2))


@pytest.mark.parametrize("draft_scheme", PREFIX_SCHEMES)
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
def test_edge_cases(p, q, k, expected, draft_scheme):
    assert abs(prefix_scan(p, q, k, draft_scheme).acceptance - expected) <= AGREEMENT_TOLERANCE


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
    p, q, k, draft_scheme = instance
    law = build_law(q, k, draft_scheme)
    condition = all(sum(p[list(H)], start=Fraction(0)) >= law.all_in_probability(np.array(H, dtype=np.int64))
                    for r in range(len(p) + 1) for H in itertools.combinations(range(len(p)), r))
    assert acceptance_is_one(p, q, k, draft_scheme) == condition


def test_acceptance_one_with_p_not_equal_q():
    """Khisti et al. 2025, Example 1 spirit: k = 2 reaches 1 with p != q, k = 1 cannot."""
    p, q = [0.5, 0.5], [0.6, 0.4]
    assert acceptance_is_one(p, q, 2)
    assert not acceptance_is_one(p, q, 1)


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


@pytest.mark.parametrize("draft_scheme", PREFIX_SCHEMES)
@pytest.mark.parametrize("m, n, k", [(2, 4, 2), (1, 4, 3), (3, 4, 2), (4, 2, 2), (2, 2, 1)])
def test_uniform_closed_form_against_lp(m, n, k, draft_scheme):
    V = max(m, n)
    p = [Fraction(1, m) if i < m else Fraction(0) for i in range(V)]
    q = [Fraction(1, n) if i < n else Fraction(0) for i in range(V)]
    expected = uniform_optimum(m, n, k, draft_scheme)
    law = build_law(np.array(q, dtype=object), k, draft_scheme)
    assert brute_force(np.array(p, dtype=object), law) == expected
    lp = solve_full_lp(np.array(p, dtype=float), build_law(np.array(q, dtype=float), k, draft_scheme))
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
        wor = prefix_scan(p, q, k, "without_replacement")
        assert 0 <= iid <= wor.acceptance + AGREEMENT_TOLERANCE <= 1 + 2 * AGREEMENT_TOLERANCE
        assert iid <= spectr_upper_bound(p, q, k) + AGREEMENT_TOLERANCE
        assert wor.details["quadrature_error_estimate"] < AGREEMENT_TOLERANCE


def test_large_vocabulary_without_replacement_against_the_plain_recursion():
    """V = 400 with q over 25 orders of magnitude: R on every prefix against (1) evaluated
    by the slow obvious route (plain sequential recursion at every node, a fine trapezoid
    in log t over a wide range, no surrogate)."""
    rng = np.random.default_rng(8)
    q = 10.0 ** rng.uniform(-25, 0, 400)
    q /= q.sum()
    k = 3
    prefixes = np.arange(380, 400)
    values, _ = outside_prefixes(q, k, prefixes)
    step = 0.1
    t = np.exp(np.arange(np.log(1e-30), np.log(1e40), step))
    head = poisson_binomial_head(q[:380], k, t)
    rows = [head.sum(axis=1)]
    for value in q[380:399]:
        stay = np.exp(-value * t)[:, None]
        head = stay * head + (1 - stay) * np.concatenate([np.zeros((t.size, 1)), head[:, :-1]], axis=1)
        rows.append(head.sum(axis=1))
    c = np.cumsum(q[::-1])[::-1][prefixes]
    reference = (step * t[:, None] * c * np.exp(-c * t[:, None]) * np.stack(rows, axis=1)).sum(axis=0)
    np.testing.assert_allclose(values, reference, rtol=WOR_RELATIVE_ACCURACY)
