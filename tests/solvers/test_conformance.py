"""One conformance suite: every LP backend on every reference LP (conftest.py).

Float backends: status, objective within FEASIBILITY_TOLERANCE of the hand-computed optimum,
and the float certificate (primal feasibility, dual feasibility, zero gap) in the dual
convention of LPResult; then solvers.certify turns the float answer into an exact proof of
the exact optimum. Exact backend: exact equality, and the optimum substituted back into the
constraints in rationals.
"""
from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np
import pytest

from solvers.certify import certify
from solvers.problem import LPStatus
from solvers.registry import backend_capabilities, solve
from solvers.data import float_data
from solvers.rational import exact_data
from solvers.tolerances import FEASIBILITY_TOLERANCE
from solvers.verify import check_float


def test_status_and_optimum(reference, backend):
    result = solve(reference.lp, backend=backend)
    assert result.backend == backend
    assert result.status == reference.status, result.message
    if reference.status != LPStatus.OPTIMAL:
        assert result.objective is None
        assert result.x is None
        return
    if backend_capabilities(backend).exact:
        assert result.objective == reference.optimum
    else:
        assert abs(result.objective - float(reference.optimum)) <= FEASIBILITY_TOLERANCE * (1 + abs(float(reference.optimum)))


def test_float_certificate(reference, backend):
    """Primal feasibility, dual feasibility and strong duality, in LPResult's convention."""
    if reference.status != LPStatus.OPTIMAL:
        pytest.skip("no optimum")
    result = solve(reference.lp, backend=backend)
    data = float_data(reference.lp)
    check = check_float(data, as_float(result.x), as_float(result.dual_eq), as_float(result.dual_ub), FEASIBILITY_TOLERANCE)
    assert check.passes(FEASIBILITY_TOLERANCE), check


def as_float(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float64)


def test_certify_proves_exact_optimum(reference, backend):
    if reference.status != LPStatus.OPTIMAL:
        pytest.skip("no optimum")
    certificate = certify(reference.lp, solve(reference.lp, backend=backend))
    assert certificate.certified, certificate.reason
    assert certificate.objective == reference.optimum


def test_exact_optimum_substituted_back(reference):
    """sympy-style: the exact optimum satisfies every constraint exactly, and the duals are
    feasible and reproduce the objective exactly (b @ y + bound terms, LPResult's convention),
    written out here independently of solvers.rational.exact_check."""
    if reference.status != LPStatus.OPTIMAL:
        pytest.skip("no optimum")
    result = solve(reference.lp, backend="exact")
    data = exact_data(reference.lp)
    x = list(result.x)
    assert all(isinstance(v, Fraction) for v in x)
    for row, b in zip(data.A_eq, data.b_eq):
        assert sum(a * v for a, v in zip(row, x)) == b
    for row, b in zip(data.A_ub, data.b_ub):
        assert sum(a * v for a, v in zip(row, x)) <= b
    for v, lo, hi in zip(x, data.lower, data.upper):
        assert lo is None or v >= lo
        assert hi is None or v <= hi
    assert sum(c * v for c, v in zip(data.c, x)) == reference.optimum == result.objective
    sign = 1 if data.maximize else -1  # dual_ub >= 0 for max, <= 0 for min
    assert all(sign * y >= 0 for y in result.dual_ub)
    reduced = [data.c[j] - sum(r[j] * y for r, y in zip(data.A_eq, result.dual_eq))
               - sum(r[j] * y for r, y in zip(data.A_ub, result.dual_ub)) for j in range(data.n)]
    bound_terms = Fraction(0)
    for j, d in enumerate(reduced):  # d pushes x_j up -> upper bound term, down -> lower
        bound = data.upper[j] if sign * d > 0 else data.lower[j] if sign * d < 0 else Fraction(0)
        assert bound is not None, f"reduced cost {d} of x[{j}] pushes towards an infinite bound"
        bound_terms += d * bound
    dual_objective = sum(b * y for b, y in zip(data.b_eq, result.dual_eq)) + sum(
        b * y for b, y in zip(data.b_ub, result.dual_ub)) + bound_terms
    assert dual_objective == reference.optimum


@pytest.mark.parametrize("name", ["textbook_max", "min_mixed_upper_bound", "bounds_and_free"])
def test_duals_are_objective_sensitivities(name, reference_by_name):
    """The convention, checked without the certificate code: on a nondegenerate optimum
    dual_eq[i] / dual_ub[i] is the exact derivative of the optimum in b_eq[i] / b_ub[i]
    (the basis does not change for a small step), and every backend returns those duals."""
    lp = reference_by_name[name].lp
    base = solve(lp, backend="exact")
    step = Fraction(1, 1024)
    for kind in ("eq", "ub"):
        if getattr(lp, f"b_{kind}") is None:
            continue
        b = exact_vector(getattr(lp, f"b_{kind}"))
        for i in range(len(b)):
            moved = b.copy()
            moved[i] += step
            shifted = solve(dataclasses.replace(lp, **{f"b_{kind}": moved}), backend="exact")
            assert (shifted.objective - base.objective) / step == getattr(base, f"dual_{kind}")[i]
    for backend in ("highs", "scipy", "cvxpy"):
        result = solve(lp, backend=backend)
        for kind in ("eq", "ub"):
            np.testing.assert_allclose(np.asarray(getattr(result, f"dual_{kind}"), dtype=float),
                                       np.asarray(getattr(base, f"dual_{kind}"), dtype=float),
                                       atol=FEASIBILITY_TOLERANCE * 1e3)


def exact_vector(values) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = [Fraction(v) for v in values]
    return out
