"""Typed exceptions of the toolkit.

Every error says what is wrong and how to fix it. All derive from :class:`OTMError`
and from the built-in exception a caller would expect (``ValueError`` for bad input),
so ``except ValueError`` keeps working. The one exception is :class:`SolverError`, which
belongs to the bottom layer ``solvers`` (it cannot import ``otm``) and derives from
``RuntimeError``; it is re-exported here so callers import every error from one place.
"""


class OTMError(Exception):
    """Base class of every error raised by ``otm``, ``solvers``, ``proofs`` and ``decoding``."""


class InvalidDistributionError(OTMError, ValueError):
    """A probability vector (or logits) is malformed: NaN/inf, negative, wrong shape, or
    a sum off from 1 by more than :data:`otm.distributions.SUM_TOLERANCE`."""


class ShapeMismatchError(InvalidDistributionError):
    """Two inputs that must share a vocabulary (p and q, or the k draft laws) differ in length."""


class InvalidDraftCountError(OTMError, ValueError):
    """The number of drafts ``k`` is impossible for this input (k < 1, or more drafts
    without replacement than tokens with positive draft probability, or a rule that
    only exists for one k)."""


class UnknownNameError(OTMError, ValueError):
    """A method, rule, backend or sampling scheme name that does not exist."""


class NotApplicableError(OTMError, ValueError):
    """A method exists but does not apply to this instance (for example a closed form
    that needs i.i.d. drafts, or an enumeration that would exceed its size limit)."""


# The solver layer's error, re-exported so callers of otm catch one class.
from solvers.errors import SolverError  # noqa: E402,F401
