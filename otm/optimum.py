"""The public optimum: ``alpha*(p, Q) = max_pi P(Y in S(X))`` with one method dispatch.

Every method gives the same number where it applies (docs/theory.md); they differ in
cost and in the certificate they return (:class:`otm.solution.OTMSolution`):

- ``"prefix_scan"``: one sort and one scan (k drafts from one ``q``, i.i.d. or without
  replacement); exact, no enumeration, vocabularies of 150k tokens.
- ``"per_token_bound"``: SpecHub's hub law and greedy drafts, O(V).
- ``"closed_form"``: whichever of the two covers the instance.
- ``"max_flow"``: min cut on the tuple/token network (Sun et al. 2024, App. F); any law.
- ``"full_lp"`` (SpecTr eq. 4), ``"simplified_lp"`` (SpecHub Thm 1), ``"canonical_lp"``
  (Khisti et al. Thm 1, 4): LPs over the enumerated law.
- ``"auto"``: the closed form where one applies, else ``max_flow``.

Exactness: exact (Fraction) inputs give Fractions, float inputs give floats.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from .distributions import as_distribution, as_exact_distribution, draft_distributions, is_exact_input, normalisation_note
from .draft_laws import DRAFT_SCHEMES, DraftLaw, check_scheme_draft_count, valid_draft_law
from .errors import NotApplicableError, ShapeMismatchError, UnknownNameError
from .formulations.closed_form import closed_form_method, covering_method, solve_closed_form, valid_closed_form
from .solution import OTMSolution

#: Names accepted by ``method=``.
METHODS = ("auto", "closed_form", "prefix_scan", "per_token_bound", "max_flow", "full_lp", "simplified_lp", "canonical_lp")


def solve_optimum(p, q, k: int, draft_scheme: str = "iid", method: str = "auto", backend: str = "highs") -> OTMSolution:
    """Optimal acceptance of ``k`` drafts from ``q`` against the target ``p``, with its
    certificate.

    Args:
        p: ``[V]`` target distribution (floats, or exact Fractions).
        q: ``[V]`` draft distribution; ``[k, V]`` for ``draft_scheme="independent"`` (also
            accepted with ``"iid"``): k independent drafts with different laws (closed form
            does not apply).
        k: number of drafts, checked here once (for the draft scheme too: 2 for ``"hub"``, at
            most ``V`` without replacement and greedy) and passed on as checked.
        draft_scheme: the draft scheme, one of :data:`otm.draft_laws.DRAFT_SCHEMES`.
        method: one of :data:`METHODS`.
        backend: LP backend name for the LP methods.

    Returns:
        :class:`otm.solution.OTMSolution`; for float inputs ``details["inputs"]`` says each
        input's dtype and how far its sum was from 1 before the float64 renormalisation
        (:func:`otm.distributions.normalisation_note`).

    >>> round(solve_optimum([1.0, 0.0], [0.5, 0.5], 2).value, 12)
    0.75
    """
    method = _check_method(method)
    if draft_scheme not in DRAFT_SCHEMES:
        raise UnknownNameError(f"unknown draft scheme {draft_scheme!r}; choose one of {DRAFT_SCHEMES}")
    raw = {"p": p, "q": q}
    p, q, k = _validated(p, q, k, draft_scheme)
    solution = _dispatch(p, q, k, draft_scheme, method, backend)
    if p.dtype != object:
        solution.details["inputs"] = {name: normalisation_note(value, name) for name, value in raw.items() if np.ndim(value) == 1}
    return solution


def _dispatch(p, q, k: int, draft_scheme: str, method: str, backend: str) -> OTMSolution:
    if method == "auto":
        method = "closed_form" if closed_form_method(q, draft_scheme) else "max_flow"
    if method in ("closed_form", "prefix_scan", "per_token_bound"):
        covering = closed_form_method(q, draft_scheme)
        if method != "closed_form" and covering != method:
            raise NotApplicableError(f"method {method!r} does not cover draft_scheme={draft_scheme!r} (use {covering or 'max_flow'!r})")
        covering_method(q, draft_scheme)  # no closed form at all: NotApplicableError
        return valid_closed_form(p, q, k, draft_scheme)
    law = valid_draft_law("independent" if np.ndim(q) == 2 else draft_scheme, q, k)
    return _solve_law(p, law, method, backend)


def optimal_acceptance(p, q, k: int, draft_scheme: str = "iid", method: str = "auto"):
    """``solve_optimum(p, q, k, draft_scheme, method).value``: a float, or a Fraction for
    exact inputs.

    >>> optimal_acceptance([0.5, 0.5], [0.5, 0.5], 3)
    1.0
    """
    return solve_optimum(p, q, k, draft_scheme, method).value


def optimal_acceptance_for_law(p, law: DraftLaw, method: str = "auto", backend: str = "highs"):
    """Optimal acceptance for any joint draft law ``Q`` (``auto`` = max-flow); a Fraction
    for exact inputs.

    The closed forms apply only to laws built by ``iid_law`` / ``without_replacement_law``
    (their draft distribution is recovered as the first draft's marginal).
    """
    method = _check_method(method)
    if method in ("closed_form", "prefix_scan"):
        if law.name not in ("iid", "without_replacement"):
            raise NotApplicableError(
                f"the closed form needs an i.i.d. or without-replacement law, got a {law.name!r} law"
            )
        return solve_closed_form(p, law.marginal(0), law.k, law.name).value
    return _solve_law(p, law, "max_flow" if method == "auto" else method, backend).value


def _check_method(method: str) -> str:
    if method not in METHODS:
        raise UnknownNameError(f"unknown method {method!r}; choose one of {METHODS}")
    return method


def _validated(p, q, k: int, draft_scheme: str):
    """Validated ``(p, q, k)``, exact Fractions kept; ``q`` may be ``[k, V]`` for independent
    drafts; ``k`` checked for the scheme: the only check of ``k`` in a :func:`solve_optimum` call."""
    exact = _is_exact(p) or _is_exact(q)
    as_dist = as_exact_distribution if exact else as_distribution
    p = as_dist(p, "p (target)")
    if np.ndim(q) == 2 and draft_scheme not in ("iid", "independent"):
        raise NotApplicableError(f"a list of k draft distributions needs draft_scheme='independent', got {draft_scheme!r}")
    if draft_scheme == "independent" and np.ndim(q) != 2:
        raise ShapeMismatchError(f"draft_scheme='independent' takes k draft distributions q ([k, V]), got shape {np.shape(q)}")
    k = check_scheme_draft_count(draft_scheme, k, p.size)
    qs = draft_distributions(q, k, p.size)  # shapes, sums (each input keeps its dtype's tolerance)
    if exact:
        qs = [as_exact_distribution(qi, f"q_{i + 1} (draft {i + 1})") for i, qi in enumerate(np.atleast_2d(np.asarray(q, dtype=object)))]
    if np.ndim(q) == 2:
        return p, np.array(qs, dtype=object if exact else np.float64), k
    return p, qs[0], k


def _is_exact(values) -> bool:
    """True when ``values`` holds Fractions (an exact instance)."""
    return is_exact_input(values) and any(isinstance(v, Fraction) for v in np.asarray(values, dtype=object).ravel())


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
