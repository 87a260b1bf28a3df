"""Errors of the solver layer (imported by ``otm.errors`` so there is one class each)."""


class SolverError(RuntimeError):
    """A backend failed, or returned no optimum where one must exist."""


class UnknownBackendError(SolverError, ValueError):
    """A backend name that is not registered; the message lists the known ones."""
