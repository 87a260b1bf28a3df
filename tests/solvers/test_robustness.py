"""Float trouble must not become a wrong answer.

Reported: an equality-constrained transport LP whose two marginals sum to 1 and 1 + 2e-16
was called "infeasible" by HiGHS. In exact arithmetic that LP *is* infeasible; within any
float tolerance it is feasible. What each backend does (HiGHS 1.15.1, scipy 1.17, cvxpy 1.9
with Clarabel; see the table in the report / solvers.highs docstring):

* mismatch 2**-52: every float backend returns a verified optimum; "exact" says INFEASIBLE
  (true for the data as given), and certify() refuses to certify the float optimum.
* mismatch 1e-9 with one source: HiGHS' presolve (directly or inside linprog) says
  infeasible; without presolve HiGHS finds a point within tolerance. "highs" and "scipy"
  re-solve without presolve and return that optimum only after it passes the certificate.
* larger mismatches: INFEASIBLE (or NUMERICAL_ERROR for the interior-point cvxpy backend),
  never an unverified "optimal".
"""
from __future__ import annotations

import numpy as np
import pytest

from solvers.certify import certify
from solvers.data import float_data
from solvers.problem import LinearProgram, LPStatus
from solvers.registry import BACKENDS, solve
from solvers.result import verified_result
from solvers.tolerances import FEASIBILITY_TOLERANCE
from solvers.verify import check_float

ULP = float(np.nextafter(1.0, 2.0) - 1.0)  # 2.22e-16: 1 + ULP is the float after 1


def transport(source, target) -> LinearProgram:
    """max sum_i pi[i, i] over couplings pi of ``source`` [m] and ``target`` [n] (row-major pi)."""
    m, n = len(source), len(target)
    rows = [np.kron(np.eye(m)[i], np.ones(n)) for i in range(m)] + [np.kron(np.ones(m), np.eye(n)[j]) for j in range(n)]
    return LinearProgram(c=np.eye(m, n).ravel(), A_eq=np.array(rows), b_eq=np.concatenate([source, target]), sense="max")


def _as_float(v):
    return np.asarray(v, dtype=np.float64)


@pytest.mark.parametrize("backend", BACKENDS)
def test_marginals_off_by_one_ulp(backend):
    lp = transport(np.array([0.5, 0.5]), np.array([0.5, 0.5 + ULP]))
    assert lp.b_eq[2:].sum() - 1.0 == ULP
    result = solve(lp, backend=backend)
    if backend == "exact":
        assert result.status == LPStatus.INFEASIBLE  # exactly: sum of rows 1 != 1 + 2**-52
        return
    assert result.status == LPStatus.OPTIMAL, result.message
    assert abs(result.objective - 1.0) <= FEASIBILITY_TOLERANCE
    check = check_float(float_data(lp), _as_float(result.x), _as_float(result.dual_eq), _as_float(result.dual_ub),
                        FEASIBILITY_TOLERANCE)
    assert check.passes(FEASIBILITY_TOLERANCE)
    # the exact certificate is honest: the data admit no exact feasible point
    assert not certify(lp, result).certified


@pytest.mark.parametrize("backend", ["highs", "scipy"])
def test_presolve_infeasible_verdict_is_reexamined(backend):
    lp = transport(np.array([1.0]), np.array([1.0 + 1e-9]))
    presolve_only = solve(lp, backend=backend, retry_without_presolve=False)
    result = solve(lp, backend=backend)
    assert result.status == LPStatus.OPTIMAL, result.message
    assert abs(result.objective - 1.0) <= FEASIBILITY_TOLERANCE
    if presolve_only.status == LPStatus.INFEASIBLE:  # HiGHS 1.15.1 behaviour, recorded in the message
        assert "presolve" in result.message
    else:
        assert presolve_only.status == LPStatus.OPTIMAL


@pytest.mark.parametrize("backend", BACKENDS)
def test_clearly_inconsistent_marginals_are_never_optimal(backend):
    lp = transport(np.array([0.5, 0.5]), np.array([0.5, 0.5 + 1e-6]))
    result = solve(lp, backend=backend)
    assert result.status in (LPStatus.INFEASIBLE, LPStatus.NUMERICAL_ERROR, LPStatus.ITERATION_LIMIT)
    assert not result.success


def test_unverified_optimum_is_downgraded():
    """A claimed optimum that fails the certificate is reported as NUMERICAL_ERROR."""
    lp = transport(np.array([0.5, 0.5]), np.array([0.25, 0.75]))
    good = solve(lp, backend="highs")
    data = float_data(lp)
    ok = verified_result(data, LPStatus.OPTIMAL, good.x, good.dual_eq, good.dual_ub, "highs", "", FEASIBILITY_TOLERANCE)
    assert ok.status == LPStatus.OPTIMAL
    for x, y_eq in [(good.x + 1e-6, good.dual_eq), (good.x, good.dual_eq + np.array([0, 0, 0, 1e-3]))]:
        bad = verified_result(data, LPStatus.OPTIMAL, x, y_eq, good.dual_ub, "highs", "", FEASIBILITY_TOLERANCE)
        assert bad.status == LPStatus.NUMERICAL_ERROR
        assert "failed verification" in bad.message
