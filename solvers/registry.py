"""The backend registry and the one entry point :func:`solve` (like ``scipy.optimize.linprog``).

Each backend is one module with a ``CAPABILITIES`` constant and a
``solve(lp, **options) -> LPResult`` function; modules are imported on first use so that
``import solvers`` does not pay for cvxpy.
"""
from __future__ import annotations

import importlib

from solvers.capabilities import BackendCapabilities
from solvers.errors import InvalidProblemError, UnknownBackendError
from solvers.problem import LinearProgram, LPResult

_MODULES = {
    "highs": "solvers.highs",
    "scipy": "solvers.scipy_linprog",
    "cvxpy": "solvers.cvxpy_backend",
    "exact": "solvers.exact",
}

#: Names accepted by :func:`solve`'s ``backend`` argument.
BACKENDS: tuple[str, ...] = tuple(_MODULES)


def _module(name: str):
    if name not in _MODULES:
        raise UnknownBackendError(f"unknown LP backend {name!r}; known backends: {', '.join(BACKENDS)}")
    return importlib.import_module(_MODULES[name])


def backend_capabilities(name: str) -> BackendCapabilities:
    """The declared capabilities of backend ``name`` (raises :class:`UnknownBackendError`)."""
    return _module(name).CAPABILITIES


def solve(lp: LinearProgram, backend: str = "highs", **options) -> LPResult:
    """Solve ``optimise c @ x s.t. A_eq x = b_eq, A_ub x <= b_ub, lower <= x <= upper``.

    ``backend`` is one of :data:`BACKENDS`; ``options`` go to that backend's ``solve``
    (an unknown option raises ``TypeError``). The result's ``status`` follows
    :class:`~solvers.problem.LPStatus`; duals follow the convention documented on
    :class:`~solvers.problem.LPResult`. Float backends verify a claimed optimum
    (:mod:`solvers.verify`) and report ``NUMERICAL_ERROR`` when it fails.

    >>> import numpy as np
    >>> lp = LinearProgram(c=np.array([1.0, 2.0]), A_ub=np.array([[1.0, 1.0]]), b_ub=np.array([1.0]))
    >>> round(solve(lp).objective, 9)
    2.0
    """
    module = _module(backend)
    limit = module.CAPABILITIES.max_variables
    n = lp.num_variables
    if limit is not None and n > limit:
        raise InvalidProblemError(
            f"backend {backend!r} handles at most {limit} variables, this LP has {n}; use backend='highs'")
    return module.solve(lp, **options)
