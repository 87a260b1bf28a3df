"""The LP formulations of the OTM optimum agree with each other, with the known closed
values, and carry certificates that close the gap."""
import dataclasses
import itertools
from fractions import Fraction as F

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from solvers.max_flow import check_flow, max_flow

from otm.distributions import as_distribution
from otm.draft_laws import (
    greedy_law,
    hub_law,
    independent_law,
    iid_law,
    table_law,
    without_replacement_law,
)
from otm.errors import ShapeMismatchError
from otm.distributions import as_exact_distribution
from otm.formulations._lp import verify_lp_certificate
from otm.formulations.canonical_lp import solve_canonical_lp
from otm.formulations.full_lp import solve_full_lp
from otm.formulations.max_flow import flow_network, min_cut_value, solve_max_flow
from otm.formulations.simplified_lp import (
    coupling_acceptance,
    is_valid_coupling,
    reconstruct_coupling,
    solve_simplified_lp,
)
from otm.tolerances import AGREEMENT_TOLERANCE, FEASIBILITY_TOLERANCE

LAW_KINDS = ("iid", "without_replacement", "hub", "greedy", "independent", "table")


def _law(kind, q, k, rng_draw, exact):
    """One joint law of the given kind (None when the kind does not apply)."""
    V = len(q)
    support = sum(1 for v in q if v > 0)
    if kind == "iid":
        return iid_law(q, k)
    if kind == "without_replacement":
        return without_replacement_law(q, k) if k <= support else None
    if kind == "hub":
        return hub_law(q) if k == 2 else None
    if kind == "greedy":
        return greedy_law(q, k) if k <= V else None
    if kind == "independent":
        others = [rng_draw(V) for _ in range(k - 1)]
        return independent_law([q, *others])
    rows = rng_draw(min(V**k, 6), values=range(V**k), normalise=False)  # distinct tuple ids
    tuples = np.array([np.unravel_index(r, (V,) * k) for r in sorted(set(rows))])
    return table_law(tuples, rng_draw(len(tuples), positive=True), V)


@st.composite
def instances(draw, exact=False, max_vocab=6, max_k=3):
    """``(p, law)`` with V in 1..6, k in 1..3, any law kind; integer weights normalised,
    so zeros (one-hot, disjoint supports, q = 0 where p > 0) come up naturally."""
    V = draw(st.integers(1, max_vocab))
    k = draw(st.integers(1, max_k))
    kind = draw(st.sampled_from(LAW_KINDS))

    def vector(n, values=range(0, 6), normalise=True, positive=False):
        lo = 1 if positive else 0
        w = draw(st.lists(st.sampled_from([v for v in values if v >= lo]), min_size=n, max_size=n))
        if not normalise:
            return w
        if sum(w) == 0:
            w[draw(st.integers(0, n - 1))] = 1
        total = sum(w)
        return np.array([F(v, total) for v in w], dtype=object) if exact else np.array(w, dtype=float) / total

    p, q = vector(V), vector(V)
    law = _law(kind, q, k, vector, exact)
    if law is None:
        law = iid_law(q, k)
    return p, law


def brute_force_min_cut(p, law):
    """``min_H p(H) + 1 - Q(all drafts in H)`` over all 2^V token sets (docs/theory.md)."""
    V = law.vocab_size
    return min(min_cut_value(p, law, list(H)) for r in range(V + 1) for H in itertools.combinations(range(V), r))


ALL = (solve_full_lp, solve_simplified_lp, solve_canonical_lp, solve_max_flow)


@given(instances())
def test_every_formulation_gives_the_same_optimum(instance):
    p, law = instance
    values = [float(f(p, law).acceptance) for f in ALL]
    assert max(values) - min(values) <= AGREEMENT_TOLERANCE, values
    assert abs(values[0] - float(brute_force_min_cut(p, law))) <= AGREEMENT_TOLERANCE


@settings(max_examples=15)
@given(instances(exact=True, max_vocab=4, max_k=2))
def test_formulations_agree_exactly_in_rationals(instance):
    p, law = instance
    values = {f.__name__: f(p, law, backend="exact").acceptance for f in ALL[:3]}
    values["max_flow"] = solve_max_flow(p, law).acceptance
    values["min_cut"] = brute_force_min_cut(p, law)
    assert all(isinstance(v, F) for v in values.values()), values
    assert len(set(values.values())) == 1, values


@given(instances())
def test_lp_certificates_close_the_gap(instance):
    p, law = instance
    for solve in ALL[:3]:
        solution = solve(p, law)
        cert = solution.duals
        assert abs(cert["gap"]) <= FEASIBILITY_TOLERANCE
        assert verify_lp_certificate(solution.details["lp"], solution.details["x"], cert["dual_eq"], cert["dual_ub"]) == []
        assert 0 <= solution.verified_gap <= 10 * FEASIBILITY_TOLERANCE


def test_certificate_check_rejects_a_tampered_plan_and_a_wrong_dual():
    p, law = np.array([0.2, 0.3, 0.5]), iid_law([0.5, 0.3, 0.2], 2)
    for solve in ALL[:3]:
        solution = solve(p, law)
        lp, x, y, z = solution.details["lp"], solution.details["x"], solution.duals["dual_eq"], solution.duals["dual_ub"]
        moved = x.copy()
        moved[np.argmax(moved)] += 1e-3  # breaks a marginal
        assert verify_lp_certificate(lp, moved, y, z) != []
        z_bad = z.copy()
        z_bad[np.argmax(z_bad)] = 0.0  # a dual that no longer bounds the objective
        assert verify_lp_certificate(lp, x, y, z_bad) != []


def test_exact_certificate_check_rejects_a_wrong_dual():
    p = as_exact_distribution(["1/5", "3/10", "1/2"])
    law = iid_law(as_exact_distribution(["1/2", "3/10", "1/5"]), 2)
    solution = solve_simplified_lp(p, law, backend="exact")
    cert = solution.duals
    assert verify_lp_certificate(solution.details["lp"], solution.details["x"], cert["dual_eq"], cert["dual_ub"]) == []
    z = cert["dual_ub"].copy()
    z[0] += F(1, 10**9)
    assert verify_lp_certificate(solution.details["lp"], solution.details["x"], cert["dual_eq"], z) != []


# Known values ----------------------------------------------------------------------------

@given(instances(max_k=1))
def test_single_draft_optimum_is_sum_min(instance):
    p, law = instance
    q = law.marginal(0).astype(float)
    for f in ALL:
        assert abs(float(f(p, law).acceptance) - np.minimum(p, q).sum()) <= AGREEMENT_TOLERANCE


def test_khisti_closed_form_k2_iid_exact():
    """Khisti et al. 2025, Thm 3: alpha* = min_S p(S) + 1 - q(S)^2 for two i.i.d. drafts."""
    p = as_exact_distribution(["1/5", "3/10", "1/2"])
    q = as_exact_distribution(["1/2", "3/10", "1/5"])
    closed = min(sum(p[list(S)]) + 1 - sum(q[list(S)]) ** 2 for r in range(4) for S in itertools.combinations(range(3), r))
    assert closed == F(43, 50)
    for f in ALL[:3]:
        assert f(p, iid_law(q, 2), backend="exact").acceptance == closed


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("sampling", [iid_law, without_replacement_law])
def test_p_equal_q_accepts_everything(k, sampling):
    q = np.array([0.1, 0.2, 0.3, 0.4])
    law = sampling(q, k)
    for f in ALL:
        assert abs(float(f(q, law).acceptance) - 1.0) <= AGREEMENT_TOLERANCE


@pytest.mark.parametrize(
    "p, q, k, expected",
    [
        ([1.0], [1.0], 1, 1.0),  # V = 1
        ([1.0], [1.0], 3, 1.0),
        ([1.0, 0.0], [0.0, 1.0], 2, 0.0),  # disjoint supports
        ([0.0, 1.0], [0.5, 0.5], 2, 0.75),  # one-hot p: P(1 in S(X)) = 1 - 1/4
        ([0.5, 0.5], [1.0, 0.0], 3, 0.5),  # one-hot q
        ([0.2, 0.3, 0.5], [0.5, 0.5, 0.0], 2, 0.5),  # q = 0 where p > 0
    ],
)
def test_degenerate_instances(p, q, k, expected):
    law = iid_law(q, k)
    for f in ALL:
        assert abs(float(f(p, law).acceptance) - expected) <= AGREEMENT_TOLERANCE


def test_mismatched_vocabulary_is_a_typed_error():
    with pytest.raises(ShapeMismatchError):
        solve_full_lp([0.5, 0.5], iid_law([0.2, 0.3, 0.5], 2))


# Float robustness ------------------------------------------------------------------------

def test_full_lp_survives_marginals_off_by_one_ulp():
    """HiGHS declared the equality-constrained LP infeasible for sum p = 1 + 2e-16."""
    p = np.array([0.7, 0.2, 0.1])
    assert as_distribution(p).sum() == 1 + 2.0**-52  # still off after validation
    q = np.array([0.3, 0.3, 0.4])
    assert iid_law(q, 2).probs.sum() == 1.0
    expected = float(solve_max_flow(p, iid_law(q, 2)).acceptance)
    solution = solve_full_lp(p, iid_law(q, 2))
    assert solution.details["relaxed_side"] == "tokens"
    assert abs(float(solution.acceptance) - expected) <= AGREEMENT_TOLERANCE
    for f in ALL[1:3]:
        assert abs(float(f(p, iid_law(q, 2)).acceptance) - expected) <= AGREEMENT_TOLERANCE
    # the mirror case: the draft side carries the extra ulp, so the tuple side is relaxed
    swapped = solve_full_lp(q, iid_law(p, 1))
    assert iid_law(p, 1).probs.sum() > 1
    assert swapped.details["relaxed_side"] == "tuples"
    assert abs(float(swapped.acceptance) - np.minimum(p, q).sum()) <= AGREEMENT_TOLERANCE


# Simplified LP reconstruction ------------------------------------------------------------

@given(instances())
def test_reconstruction_is_a_valid_coupling_with_the_same_acceptance(instance):
    p, law = instance
    solution = solve_simplified_lp(p, law)
    plan = reconstruct_coupling(p, law, solution.plan)
    assert is_valid_coupling(plan, p, law)
    assert abs(coupling_acceptance(plan, law) - solution.acceptance) <= AGREEMENT_TOLERANCE


def test_reconstruction_is_exact_in_rationals():
    p = as_exact_distribution(["1/5", "3/10", "1/2"])
    law = iid_law(as_exact_distribution(["1/2", "3/10", "1/5"]), 2)
    solution = solve_simplified_lp(p, law, backend="exact")
    plan = reconstruct_coupling(p, law, solution.plan)
    assert is_valid_coupling(plan, p, law)
    assert coupling_acceptance(plan, law) == solution.acceptance


def test_coupling_checker_rejects_broken_plans():
    p, law = np.array([0.2, 0.3, 0.5]), iid_law([0.5, 0.3, 0.2], 2)
    plan = reconstruct_coupling(p, law, solve_simplified_lp(p, law).plan)
    assert is_valid_coupling(plan, p, law)
    shifted = plan.copy()
    shifted[0, 0] += 1e-3  # a row sum and a column sum off
    assert not is_valid_coupling(shifted, p, law)
    moved = plan.copy()
    moved[0, :2] += [1e-3, -1e-3]  # row sums kept, two column sums off
    assert not is_valid_coupling(moved, p, law)
    cycled = plan.copy()
    e = plan[0, 1] + 1e-2  # a 2x2 cycle keeps both marginals but goes negative
    cycled[0] += [e, -e, 0]
    cycled[1] += [-e, e, 0]
    assert not is_valid_coupling(cycled, p, law)
    assert not is_valid_coupling(plan[:, :2], p, law)  # wrong shape


@settings(max_examples=25)
@given(instances(exact=True, max_vocab=5, max_k=2))
def test_full_lp_plan_is_a_coupling_in_rationals(instance):
    """Also where the undrafted tokens share one column of the LP: split back in proportion
    to p, the plan's columns are p exactly."""
    p, law = instance
    solution = solve_full_lp(p, law, backend="exact")
    assert is_valid_coupling(solution.details["coupling"], p, law)
    assert coupling_acceptance(solution.details["coupling"], law) == solution.acceptance


def test_full_lp_plan_is_a_coupling():
    p, law = np.array([0.2, 0.3, 0.5]), without_replacement_law([0.5, 0.3, 0.2], 2)
    solution = solve_full_lp(p, law)
    assert is_valid_coupling(solution.details["coupling"], p, law)
    assert abs(coupling_acceptance(solution.details["coupling"], law) - solution.acceptance) <= AGREEMENT_TOLERANCE


# Max flow / min cut ----------------------------------------------------------------------

@given(instances())
def test_max_flow_cut_certifies_the_value(instance):
    p, law = instance
    solution = solve_max_flow(p, law)
    H = solution.cut
    assert abs(min_cut_value(p, law, H) - solution.acceptance) <= AGREEMENT_TOLERANCE


def test_flow_check_rejects_a_tampered_flow():
    p, law = np.array([0.2, 0.3, 0.5]), iid_law([0.5, 0.3, 0.2], 2)
    G = flow_network(p, law)
    result = max_flow(G, "source", "sink")
    assert check_flow(G, "source", "sink", result) == []
    flow = {u: dict(out) for u, out in result.flow.items()}
    # conservation broken at the tuple node by 0.1% of its capacity (integer-scaled network)
    flow["source"][("tuple", 0)] += G["source"][("tuple", 0)]["capacity"] // 1000
    assert check_flow(G, "source", "sink", dataclasses.replace(result, flow=flow)) != []


def test_min_cut_value_of_a_wrong_set_is_not_the_flow():
    p, law = np.array([0.2, 0.3, 0.5]), iid_law([0.5, 0.3, 0.2], 2)
    solution = solve_max_flow(p, law)
    H = set(int(h) for h in solution.cut)
    other = [y for y in range(3) if y not in H]
    assert min_cut_value(p, law, other) > solution.acceptance + AGREEMENT_TOLERANCE


def test_an_empty_flow_is_an_exact_zero():
    """Disjoint supports in exact rationals: every formulation gives ``Fraction(0)``, the max
    flow included (networkx's value of a flow on no edge is the int 0; found by a stress run of
    the test above)."""
    p = np.array([F(1), F(0)], dtype=object)
    law = iid_law(np.array([F(0), F(1)], dtype=object), 1)
    value = solve_max_flow(p, law).acceptance
    assert value == 0 and isinstance(value, F)
