"""Errors of the solver layer, and the toolkit's base error.

:class:`OTMError` is defined here, in the bottom layer, so that every error of every
package (solvers included) derives from it; :mod:`otm.errors` re-exports it with the
errors of the upper layers.
"""


class OTMError(Exception):
    """Base class of every error raised by ``solvers``, ``otm``, ``proofs``, ``decoding``
    and the ``otm`` command line. Errors about bad input also derive from ``ValueError``."""


class SolverError(OTMError, RuntimeError):
    """A backend failed, or returned no optimum where one must exist."""


class UnknownBackendError(SolverError, ValueError):
    """A backend name that is not registered; the message lists the known ones."""


class BackendUnavailableError(SolverError):
    """A registered backend whose package is not installed; the message names the extra to install."""


class InvalidProblemError(SolverError, ValueError):
    """A malformed problem: wrong shapes, NaN data, an unknown sense, negative or NaN
    capacities, a source equal to the sink. The message says which input and how to fix it."""


class UnboundedFlowError(SolverError):
    """A source-to-sink path of unbounded capacity: the maximum flow is infinite."""
