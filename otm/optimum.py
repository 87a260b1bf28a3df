"""The public optimum: ``alpha*(p, Q) = max_pi P(Y in S(X))`` with one method dispatch.

Every method gives the same number where it applies (DESIGN.md "How to know it is
right"); they differ in cost and in the certificate they return:

- ``"closed_form"``: prefix scan, one sort + one scan (k drafts from one ``q``, i.i.d. or
  without replacement); exact, no enumeration, vocabularies of 150k tokens.
- ``"max_flow"``: min cut on the tuple/token network (seed 000 App. F); any law.
- ``"full_lp"`` (seed 002 eq. 4), ``"simplified_lp"`` (seed 000 Thm 1),
  ``"canonical_lp"`` (seed 001 Thm 1, 4): LPs over the enumerated law.
- ``"auto"``: ``closed_form`` where it applies, else ``max_flow``.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from .distributions import as_distribution, as_draft_distributions, check_draft_count
from .draft_laws import SAMPLING_SCHEMES, DraftLaw, draft_law, independent_law
from .errors import InvalidDraftCountError, NotApplicableError, UnknownNameError
from .exact import as_exact_distribution
from .formulations.closed_form import closed_form_applies, solve_closed_form
from .solution import OTMSolution

#: Names accepted by ``method=``.
METHODS = ("auto", "full_lp", "simplified_lp", "max_flow", "canonical_lp", "closed_form")


def solve_optimum(p, q, k: int, sampling: str = "iid", method: str = "auto", backend: str = "highs") -> OTMSolution:
    """Optimal acceptance of ``k`` drafts from ``q`` against the target ``p``, with its
    certificate.

    Args:
        p: ``[V]`` target distribution (floats, or exact Fractions).
        q: ``[V]`` draft distribution; for ``sampling="iid"`` also ``[k, V]``: k
            independent drafts with different laws (closed form does not apply).
        k: number of drafts.
        sampling: one of :data:`otm.draft_laws.SAMPLING_SCHEMES`.
        method: one of :data:`METHODS`.
        backend: LP backend name for the LP methods.

    >>> round(solve_optimum([1.0, 0.0], [0.5, 0.5], 2).acceptance, 12)
    0.75
    """
    method = _check_method(method)
    k = check_draft_count(k)
    if sampling not in SAMPLING_SCHEMES:
        raise UnknownNameError(f"unknown sampling scheme {sampling!r}; choose one of {SAMPLING_SCHEMES}")
    p, q = _validated(p, q, k, sampling)
    if method == "auto":
        method = "closed_form" if closed_form_applies(q, sampling) else "max_flow"
    if method == "closed_form":
        return solve_closed_form(p, q, k, sampling)
    law = independent_law(q) if np.ndim(q) == 2 else draft_law(sampling, q, k)
    return _solve_law(p, law, method, backend)


def optimal_acceptance(p, q, k: int, sampling: str = "iid", method: str = "auto") -> float:
    """``float(solve_optimum(p, q, k, sampling, method).acceptance)``.

    >>> optimal_acceptance([0.5, 0.5], [0.5, 0.5], 3)
    1.0
    """
    return float(solve_optimum(p, q, k, sampling, method).acceptance)


def optimal_acceptance_for_law(p, law: DraftLaw, method: str = "auto", backend: str = "highs") -> float:
    """Optimal acceptance for any joint draft law ``Q`` (``auto`` = max-flow).

    ``closed_form`` applies only to laws built by ``iid_law`` / ``without_replacement_law``
    (their draft distribution is recovered as the first draft's marginal).
    """
    method = _check_method(method)
    if method == "closed_form":
        if law.name not in ("iid", "without_replacement"):
            raise NotApplicableError(
                f"the closed form needs an i.i.d. or without-replacement law, got a {law.name!r} law"
            )
        return float(solve_closed_form(p, law.marginal(0), law.k, law.name).acceptance)
    return float(_solve_law(p, law, "max_flow" if method == "auto" else method, backend).acceptance)


def _check_method(method: str) -> str:
    if method not in METHODS:
        raise UnknownNameError(f"unknown method {method!r}; choose one of {METHODS}")
    return method


def _validated(p, q, k: int, sampling: str):
    """Validated ``(p, q)``, exact Fractions kept; ``q`` may be ``[k, V]`` for i.i.d."""
    exact = _is_exact(p) or _is_exact(q)
    as_dist = as_exact_distribution if exact else as_distribution
    p = as_dist(p, "p (target)")
    if np.ndim(q) == 2 and sampling != "iid":
        raise NotApplicableError(f"a list of k draft distributions needs sampling='iid', got {sampling!r}")
    qs = as_draft_distributions(np.asarray(q, dtype=np.float64), k, p.size)  # shapes, k, sums
    if exact:
        qs = [as_exact_distribution(qi, f"q_{i + 1} (draft {i + 1})") for i, qi in enumerate(np.atleast_2d(np.asarray(q, dtype=object)))]
    if np.ndim(q) == 2:
        return p, np.array(qs, dtype=object if exact else np.float64)
    q = qs[0]
    if sampling == "without_replacement" and k > q.size:
        raise InvalidDraftCountError(f"k={k} distinct drafts without replacement from a vocabulary of {q.size} tokens")
    return p, q


def _is_exact(values) -> bool:
    """True when ``values`` holds Fractions (an exact instance)."""
    arr = np.asarray(values)
    return arr.dtype == object and any(isinstance(v, Fraction) for v in arr.ravel())


def _solve_law(p, law: DraftLaw, method: str, backend: str) -> OTMSolution:
    """Dispatch an enumerated law to a flow or LP formulation (imported on use)."""
    if method == "max_flow":
        from .formulations.max_flow import solve_max_flow

        return solve_max_flow(p, law)
    if method == "full_lp":
        from .formulations.full_lp import solve_full_lp

        return solve_full_lp(p, law, backend=backend)
    if method == "simplified_lp":
        from .formulations.simplified_lp import solve_simplified_lp

        return solve_simplified_lp(p, law, backend=backend)
    if method == "canonical_lp":
        from .formulations.canonical_lp import solve_canonical_lp

        return solve_canonical_lp(p, law, backend=backend)
    raise NotApplicableError(f"method {method!r} does not take a joint draft law")


__all__ = ["METHODS", "solve_optimum", "optimal_acceptance", "optimal_acceptance_for_law"]
