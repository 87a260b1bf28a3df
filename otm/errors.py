"""Typed exceptions of the toolkit.

Every error says what is wrong and how to fix it. All derive from :class:`OTMError`
and from the built-in exception a caller would expect: ``ValueError`` for bad input (so
``except ValueError`` keeps working), ``RuntimeError`` for a solver that failed
(:class:`SolverError`; an unknown backend name is both). ``OTMError``, ``SolverError`` and
``UnknownBackendError`` live in the bottom layer, :mod:`solvers.errors`, and are
re-exported here so callers import every error from one place.
"""
from solvers.errors import OTMError, SolverError, UnknownBackendError  # noqa: F401  (one hierarchy: see solvers.errors)


class InvalidDistributionError(OTMError, ValueError):
    """A probability vector (or logits) is malformed: NaN/inf, negative, wrong shape, or
    a sum off from 1 by more than :data:`otm.distributions.SUM_TOLERANCE`."""


class ShapeMismatchError(InvalidDistributionError):
    """Two inputs that must share a vocabulary (p and q, or the k draft laws) differ in length."""


class InvalidDraftCountError(OTMError, ValueError):
    """The number of drafts ``k`` is impossible for this input (k < 1, or more drafts
    without replacement than tokens with positive draft probability, or a rule that
    only exists for one k)."""


class InvalidArgumentError(OTMError, ValueError):
    """A numeric argument outside its range (a number of tokens to generate below 1, ...)."""


class UnknownNameError(OTMError, ValueError):
    """A method, rule, backend or sampling scheme name that does not exist."""


class InputFileError(OTMError, ValueError):
    """A file given on the command line is missing, unreadable or not what it should be
    (a pickled ``.npy``, a JSON object instead of a list, ...)."""


class NotApplicableError(OTMError, ValueError):
    """A method exists but does not apply to this instance (for example a closed form
    that needs i.i.d. drafts, or an enumeration that would exceed its size limit)."""

