"""The public optimum: method dispatch, typed errors, agreement of every method."""
from fractions import Fraction

import numpy as np
import pytest

from otm.draft_laws import greedy_law, hub_law, iid_law, without_replacement_law
from otm.errors import (
    InvalidDistributionError,
    InvalidDraftCountError,
    NotApplicableError,
    ShapeMismatchError,
    UnknownNameError,
)
from otm.optimum import METHODS, optimal_acceptance, optimal_acceptance_for_law, solve_optimum
from otm.rules import rule_acceptance
from otm.tolerances import AGREEMENT_TOLERANCE

SOLVERS = [m for m in METHODS if m != "auto"]


@pytest.mark.parametrize("draft_scheme", ["iid", "without_replacement"])
@pytest.mark.parametrize("seed", range(4))
def test_every_method_gives_the_same_optimum(draft_scheme, seed):
    rng = np.random.default_rng(seed)
    p, q = rng.dirichlet(np.ones(4) * 0.7), rng.dirichlet(np.ones(4) * 0.7)
    values = {m: optimal_acceptance(p, q, 3, draft_scheme, method=m) for m in METHODS if m != "per_token_bound"}
    for m, v in values.items():
        assert abs(v - values["full_lp"]) <= AGREEMENT_TOLERANCE, (m, values)


def test_auto_uses_the_closed_form_when_it_applies_else_max_flow():
    p, q = [0.2, 0.3, 0.5], [0.5, 0.3, 0.2]
    assert solve_optimum(p, q, 2).method == "prefix_scan"
    assert solve_optimum(p, q, 2, "without_replacement").method == "prefix_scan"
    assert solve_optimum(p, q, 2, "hub").method == "per_token_bound"
    assert solve_optimum(p, q, 3, "greedy").method == "per_token_bound"
    assert solve_optimum(p, [q, [0.1, 0.1, 0.8]], 2).method == "max_flow"


@pytest.mark.parametrize("draft_scheme, k", [("hub", 2), ("greedy", 2), ("greedy", 3)])
def test_per_token_bound_is_the_max_flow_optimum_of_hub_and_greedy_laws(draft_scheme, k):
    rng = np.random.default_rng(7)
    for _ in range(20):
        p, q = rng.dirichlet(np.ones(5) * 0.5), rng.dirichlet(np.ones(5) * 0.5)
        closed = solve_optimum(p, q, k, draft_scheme)
        flow = solve_optimum(p, q, k, draft_scheme, method="max_flow")
        assert closed.method == "per_token_bound"
        assert abs(closed.value - flow.value) <= AGREEMENT_TOLERANCE


def test_per_token_bound_is_only_an_upper_bound_for_iid_drafts():
    """A broken use: the per-token bound applied to i.i.d. drafts exceeds the optimum."""
    from otm.formulations.per_token_bound import per_token_bound

    p, q = np.array([0.1, 0.6, 0.3]), np.array([0.5, 0.3, 0.2])
    assert per_token_bound(p, iid_law(q, 2)) > solve_optimum(p, q, 2).value + 0.05
    with pytest.raises(NotApplicableError):
        solve_optimum(p, q, 2, method="per_token_bound")


def test_independent_different_drafts_use_the_flow_and_match_the_lp():
    p, qs = [0.2, 0.3, 0.5], [[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]]
    flow = optimal_acceptance(p, qs, 2)
    assert abs(flow - optimal_acceptance(p, qs, 2, method="full_lp")) <= AGREEMENT_TOLERANCE
    with pytest.raises(NotApplicableError):
        solve_optimum(p, qs, 2, method="closed_form")
    with pytest.raises(ShapeMismatchError):
        solve_optimum(p, qs, 3)


def test_closed_form_refuses_laws_it_does_not_cover():
    with pytest.raises(NotApplicableError):
        solve_optimum([0.5, 0.5], [[0.5, 0.5], [0.9, 0.1]], 2, "iid", method="closed_form")
    with pytest.raises(NotApplicableError):
        solve_optimum([0.5, 0.5], [0.5, 0.5], 2, "hub", method="prefix_scan")
    with pytest.raises(NotApplicableError):
        optimal_acceptance_for_law([0.5, 0.5], hub_law([0.5, 0.5]), method="closed_form")


def test_unknown_names_list_the_options():
    with pytest.raises(UnknownNameError, match="max_flow"):
        solve_optimum([1.0], [1.0], 1, method="simplex")
    with pytest.raises(UnknownNameError, match="without_replacement"):
        solve_optimum([1.0], [1.0], 1, draft_scheme="with_replacement")
    with pytest.raises(UnknownNameError):
        optimal_acceptance_for_law([1.0], iid_law([1.0], 1), method="nope")


def test_bad_inputs_raise_typed_errors():
    with pytest.raises(InvalidDraftCountError, match="vocabulary of 2"):
        solve_optimum([0.5, 0.5], [0.5, 0.5], 3, "without_replacement")
    with pytest.raises(InvalidDraftCountError):
        solve_optimum([0.5, 0.5], [0.5, 0.5], 0)
    with pytest.raises(ShapeMismatchError):
        solve_optimum([0.5, 0.5], [0.2, 0.3, 0.5], 2)
    with pytest.raises(InvalidDistributionError):
        solve_optimum([0.5, float("nan")], [0.5, 0.5], 2)


def test_exact_inputs_give_exact_answers():
    p = [Fraction(1), Fraction(0)]
    q = [Fraction(1, 2), Fraction(1, 2)]
    assert solve_optimum(p, q, 2).acceptance == Fraction(3, 4)
    assert solve_optimum(p, q, 2, "without_replacement").acceptance == 1


@pytest.mark.parametrize("method", ["auto", "closed_form", "max_flow", "full_lp"])
def test_for_law_matches_the_vector_api(method):
    p, q = [0.1, 0.6, 0.3], [0.5, 0.3, 0.2]
    for law, draft_scheme in ((iid_law(q, 2), "iid"), (without_replacement_law(q, 2), "without_replacement")):
        expected = optimal_acceptance(p, q, 2, draft_scheme)
        assert abs(optimal_acceptance_for_law(p, law, method=method) - expected) <= AGREEMENT_TOLERANCE


def test_degenerate_instances():
    assert optimal_acceptance([1.0], [1.0], 1) == 1.0
    assert optimal_acceptance([0.0, 1.0], [1.0, 0.0], 4) == 0.0
    assert abs(optimal_acceptance([0.3, 0.7], [0.3, 0.7], 1) - 1.0) <= AGREEMENT_TOLERANCE


@pytest.mark.parametrize("q, k", [([1.0, 0.0, 0.0, 0.0], 2), ([0.0, 0.0, 1.0, 0.0], 3), ([0.5, 0.0, 0.5, 0.0], 3), ([0.25, 0.75, 0.0, 0.0], 4)])
def test_without_replacement_with_exhausted_support(q, k):
    """Fewer positive draft tokens than k (temperature 0, small top-p): the closed form
    p(S), S = support + greedy-order tail, equals the max flow over the enumerated law
    and the exact acceptance of RRS without replacement (which is optimal for it)."""
    p = [0.1, 0.2, 0.3, 0.4]
    closed = solve_optimum(p, q, k, "without_replacement")
    flow = solve_optimum(p, q, k, "without_replacement", method="max_flow")
    assert closed.details["exhausted_support"]
    assert abs(closed.acceptance - flow.acceptance) <= AGREEMENT_TOLERANCE
    assert abs(closed.acceptance - float(rule_acceptance("rrs_wor", p, q, k))) <= AGREEMENT_TOLERANCE
    # the support alone (forgetting the deterministic tail) is a different, wrong number
    support_only = sum(pi for pi, qi in zip(p, q) if qi > 0)
    assert abs(closed.acceptance - support_only) > AGREEMENT_TOLERANCE


@pytest.mark.parametrize("seed", range(4))
def test_scheme_optimum_hub_and_greedy_match_max_flow(seed):
    rng = np.random.default_rng(seed)
    p, q = rng.dirichlet(np.ones(6) * 0.7), rng.dirichlet(np.ones(6) * 0.7)
    assert abs(float(optimal_acceptance(p, q, 2, draft_scheme="hub")) - optimal_acceptance_for_law(p, hub_law(q))) <= AGREEMENT_TOLERANCE
    assert abs(float(optimal_acceptance(p, q, 2, draft_scheme="hub")) - float(rule_acceptance("spechub", p, q, 2))) <= AGREEMENT_TOLERANCE
    for k in (1, 2, 3):
        assert abs(float(optimal_acceptance(p, q, k, draft_scheme="greedy")) - optimal_acceptance_for_law(p, greedy_law(q, k))) <= AGREEMENT_TOLERANCE


@pytest.mark.parametrize("p,q", [
    ([0.2, 0.3, 0.5], [1.0, 0.0, 0.0]),  # one-hot q
    ([0.2, 0.3, 0.5], [0.2, 0.3, 0.5]),  # p = q
    ([0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.5, 0.5]),  # disjoint supports
    ([0.0, 1.0, 0.0], [0.5, 0.0, 0.5]),  # q = 0 where p > 0
])
def test_scheme_optimum_degenerate_inputs(p, q):
    for scheme in ("iid", "hub", "greedy"):
        value = float(optimal_acceptance(p, q, 2, draft_scheme=scheme))
        reference = optimal_acceptance_for_law(p, {"iid": None, "hub": hub_law(q), "greedy": greedy_law(q, 2)}[scheme]) \
            if scheme != "iid" else optimal_acceptance(p, q, 2, "iid", method="max_flow")
        assert np.isfinite(value)
        assert abs(value - reference) <= AGREEMENT_TOLERANCE


def test_scheme_optimum_at_qwen_vocabulary_without_enumeration():
    rng = np.random.default_rng(0)
    vocab = 151_936
    p, q = rng.dirichlet(np.full(vocab, 0.05)), rng.dirichlet(np.full(vocab, 0.05))
    values = {s: float(optimal_acceptance(p, q, 2, draft_scheme=s)) for s in ("iid", "hub", "greedy")}
    assert all(0 <= v <= 1 for v in values.values())
    assert values["iid"] >= float(np.minimum(p, q).sum()) - AGREEMENT_TOLERANCE  # 2 drafts beat 1


def _draft_count_checks(call) -> int:
    """How many times ``call()`` runs :func:`otm.distributions.check_draft_count`."""
    import sys

    from otm.distributions import check_draft_count

    calls = []
    code = check_draft_count.__code__
    sys.setprofile(lambda frame, event, arg: calls.append(1) if event == "call" and frame.f_code is code else None)
    try:
        call()
    finally:
        sys.setprofile(None)
    return len(calls)


@pytest.mark.parametrize(("draft_scheme", "method"), [
    ("iid", "auto"), ("iid", "max_flow"), ("iid", "full_lp"), ("without_replacement", "auto"),
    ("without_replacement", "canonical_lp"), ("hub", "auto"), ("hub", "simplified_lp"), ("greedy", "auto"),
    ("greedy", "max_flow"), ("independent", "auto"),
])
def test_k_is_checked_once_per_call(draft_scheme, method):
    """solve_optimum checks k once, for its draft scheme, and passes it inward (it was checked
    three or four times in one call, by every function on the way)."""
    p, q = [0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]
    k = 2
    q = [q, q[::-1]] if draft_scheme == "independent" else q
    assert _draft_count_checks(lambda: solve_optimum(p, q, k, draft_scheme, method)) == 1
    exact_q = [Fraction(1, 4)] * 4
    assert _draft_count_checks(lambda: solve_optimum([Fraction(1, 2), Fraction(1, 2), 0, 0], [exact_q] * 2
                                                     if draft_scheme == "independent" else exact_q, k, draft_scheme, method)) == 1


def test_independent_drafts_by_their_scheme_name():
    """draft_scheme="independent" takes k draft distributions, as "iid" with [k, V] does."""
    p, q1, q2 = [0.2, 0.3, 0.5], [0.5, 0.3, 0.2], [0.1, 0.1, 0.8]
    assert solve_optimum(p, [q1, q2], 2, "independent").value == solve_optimum(p, [q1, q2], 2, "iid").value
    with pytest.raises(ShapeMismatchError, match=r"\[k, V\]"):
        solve_optimum(p, q1, 2, "independent")
    with pytest.raises(NotApplicableError, match="independent"):
        solve_optimum(p, [q1, q2], 2, "without_replacement")


def test_one_list_of_draft_schemes():
    import decoding.verifiers
    import otm
    from otm.draft_laws import DRAFT_SCHEMES, ONE_Q_SCHEMES
    from otm.rules.registry import RULE_SPECS

    assert {spec.draft_scheme for spec in RULE_SPECS.values()} == set(DRAFT_SCHEMES)
    assert decoding.verifiers.DRAFT_SCHEMES is DRAFT_SCHEMES
    assert set(DRAFT_SCHEMES) - set(ONE_Q_SCHEMES) == {"independent"}
    for scheme in DRAFT_SCHEMES:
        assert solve_optimum([0.5, 0.5], [[0.5, 0.5]] * 2 if scheme == "independent" else [0.5, 0.5], 2, scheme).value == 1.0
        assert otm.draft_law(scheme, [[0.5, 0.5]] * 2 if scheme == "independent" else [0.5, 0.5], 2).name in (scheme, "iid")
    with pytest.raises(UnknownNameError, match="unknown draft scheme"):
        solve_optimum([0.5, 0.5], [0.5, 0.5], 2, "lp")
