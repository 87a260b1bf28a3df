"""certify(): exact proofs from float answers, and rejection of wrong ones."""
from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np

from solvers.certify import certify
from solvers.problem import LPStatus
from solvers.rational import exact_check, exact_data
from solvers.registry import solve


def test_certificate_is_exact_and_matches_exact_backend(reference_by_name):
    ref = reference_by_name["beale_cycling"]
    certificate = certify(ref.lp, solve(ref.lp, backend="highs"))
    exact = solve(ref.lp, backend="exact")
    assert certificate.certified
    assert certificate.objective == exact.objective == Fraction(-1, 20)
    assert all(isinstance(v, Fraction) for v in certificate.x)


def test_perturbed_dual_is_rejected(reference_by_name):
    """Degenerate vertex: the duals are not determined by the basis, the float guess fills
    the free direction; a guess off the dual-feasible set must not be certified."""
    ref = reference_by_name["degenerate"]
    result = solve(ref.lp, backend="highs")
    wrong = dataclasses.replace(result, dual_ub=np.array([1.5, 1.5, -0.5]))  # y3 < 0 in a max LP
    certificate = certify(ref.lp, wrong)
    assert not certificate.certified
    assert not certificate.dual_feasible
    assert certify(ref.lp, result).certified


def test_perturbed_primal_is_rejected(reference_by_name):
    ref = reference_by_name["textbook_max"]
    result = solve(ref.lp, backend="highs")
    for x in (result.x + np.array([0.01, 0.0]), np.zeros(2), result.x - np.array([0.5, 0.0])):
        assert not certify(ref.lp, dataclasses.replace(result, x=x)).certified


def test_non_optimal_result_is_not_certified(reference_by_name):
    ref = reference_by_name["infeasible"]
    certificate = certify(ref.lp, solve(ref.lp, backend="highs"))
    assert not certificate.certified
    assert "nothing to certify" in certificate.reason


def test_exact_check_detects_each_kind_of_error(reference_by_name):
    ref = reference_by_name["min_mixed_upper_bound"]
    exact = solve(ref.lp, backend="exact")
    data = exact_data(ref.lp)
    x, y_eq, y_ub = list(exact.x), list(exact.dual_eq), list(exact.dual_ub)
    assert exact_check(data, x, y_eq, y_ub).certified
    step = Fraction(1, 1000)
    infeasible = exact_check(data, [x[0] + step] + x[1:], y_eq, y_ub)
    assert not infeasible.primal_feasible
    assert not infeasible.certified
    # a feasible but suboptimal point (shift mass from the cheap c to a): positive gap
    suboptimal = exact_check(data, [x[0] + step, x[1], x[2] - step], y_eq, y_ub)
    assert suboptimal.primal_feasible
    assert suboptimal.dual_feasible
    assert not suboptimal.certified
    wrong_sign = exact_check(data, x, y_eq, [Fraction(1)])  # dual_ub must be <= 0 for min
    assert not wrong_sign.dual_feasible
    assert not wrong_sign.certified
    shifted = exact_check(data, x, [y_eq[0] + step], y_ub)  # reduced cost towards +inf
    assert not shifted.certified


def test_exact_backend_statuses(reference_by_name):
    assert solve(reference_by_name["infeasible"].lp, backend="exact").status == LPStatus.INFEASIBLE
    assert solve(reference_by_name["unbounded"].lp, backend="exact").status == LPStatus.UNBOUNDED
