"""The entry point: dispatch, capabilities, size limits, typed errors for bad input."""
from __future__ import annotations

import numpy as np
import pytest

from solvers.capabilities import BackendCapabilities
from solvers.errors import InvalidProblemError, SolverError, UnknownBackendError
from solvers.problem import LinearProgram
from solvers.registry import BACKENDS, backend_capabilities, solve

TINY = LinearProgram(c=np.array([1.0, 2.0]), A_ub=np.array([[1.0, 1.0]]), b_ub=np.array([1.0]))


def test_backends_declare_capabilities():
    assert set(BACKENDS) == {"highs", "scipy", "cvxpy", "exact"}
    for name in BACKENDS:
        caps = backend_capabilities(name)
        assert isinstance(caps, BackendCapabilities)
        assert caps.name == name
        assert caps.has_duals
    assert backend_capabilities("exact").exact
    assert not backend_capabilities("highs").exact


def test_unknown_backend_lists_known_names():
    with pytest.raises(UnknownBackendError) as info:
        solve(TINY, backend="gurobi")
    assert all(name in str(info.value) for name in BACKENDS)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, SolverError)
    with pytest.raises(UnknownBackendError):
        backend_capabilities("gurobi")


def test_size_limit_is_enforced():
    n = backend_capabilities("exact").max_variables + 1
    with pytest.raises(InvalidProblemError, match="at most"):
        solve(LinearProgram(c=np.ones(n), A_ub=np.ones((1, n)), b_ub=np.ones(1)), backend="exact")


def test_unknown_option_is_a_type_error():
    with pytest.raises(TypeError):
        solve(TINY, backend="highs", no_such_option=1)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad, match", [
    (dict(c=np.array([1.0, np.nan])), "NaN|non-numeric|holds nan"),
    (dict(A_ub=np.ones((1, 3))), "shape"),
    (dict(b_ub=None), "both"),
    (dict(sense="maximise"), "sense"),
    (dict(lower=np.array([2.0, 0.0]), upper=np.array([1.0, 1.0])), "exceeds"),
    (dict(upper=np.array([-np.inf, 1.0])), "-inf"),
])
def test_bad_input_is_a_typed_error(backend, bad, match):
    fields = dict(c=TINY.c, A_ub=TINY.A_ub, b_ub=TINY.b_ub, sense="max")
    fields.update(bad)
    with pytest.raises(InvalidProblemError, match=match):
        solve(LinearProgram(**fields), backend=backend)
