"""Errors of the solver layer (imported by ``otm.errors`` so there is one class each)."""


class SolverError(RuntimeError):
    """A backend failed, or returned no optimum where one must exist."""


class UnknownBackendError(SolverError, ValueError):
    """A backend name that is not registered; the message lists the known ones."""


class InvalidProblemError(SolverError, ValueError):
    """A malformed problem: wrong shapes, NaN data, an unknown sense, negative or NaN
    capacities, a source equal to the sink. The message says which input and how to fix it."""


class UnboundedFlowError(SolverError):
    """A source-to-sink path of unbounded capacity: the maximum flow is infinite."""
