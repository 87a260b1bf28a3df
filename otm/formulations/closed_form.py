"""The optimum without enumerating the draft law: which closed form covers an instance.

- k drafts from ONE draft distribution ``q``, i.i.d. or without replacement: the prefix
  scan (:mod:`otm.formulations.prefix_scan`; method ``"prefix_scan"``); without replacement
  from fewer positive tokens than ``k``, :func:`exhausted_support_optimum`.
- SpecHub's hub law and greedy drafts: the per-token bound, which their rules attain
  (:mod:`otm.formulations.per_token_bound`; method ``"per_token_bound"``).

Independent drafts with different laws and user tables have no closed form: they go to
the max flow or an LP.
"""
from __future__ import annotations

import numpy as np

from ..draft_laws import greedy_order
from ..errors import NotApplicableError
from ..solution import OTMSolution, cut_solution
from .per_token_bound import ATTAINED_FOR, per_token_optimum, solve_per_token_bound
from .prefix_scan import PREFIX_SCHEMES, prefix_scan, valid_prefix_scan


def closed_form_method(q, draft_scheme: str) -> str | None:
    """``"prefix_scan"``, ``"per_token_bound"`` or ``None`` (no closed form) for one draft
    distribution ``q`` (``[V]``) drawn with ``draft_scheme``."""
    if np.ndim(q) != 1:
        return None
    if draft_scheme in PREFIX_SCHEMES:
        return "prefix_scan"
    if draft_scheme in ATTAINED_FOR:
        return "per_token_bound"
    return None


def covering_method(q, draft_scheme: str) -> str:
    """:func:`closed_form_method`, or :class:`NotApplicableError` where no closed form covers
    ``(q, draft_scheme)``."""
    method = closed_form_method(q, draft_scheme)
    if method is None:
        raise NotApplicableError(
            f"no closed form covers draft_scheme={draft_scheme!r} with q of shape {np.shape(q)}: the closed forms need one q "
            f"and draft_scheme in {PREFIX_SCHEMES + ATTAINED_FOR} - use method='max_flow' or an LP"
        )
    return method


def solve_closed_form(p, q, k: int, draft_scheme: str = "iid") -> OTMSolution:
    """Exact optimum by the closed form that covers ``(q, draft_scheme)``;
    :class:`NotApplicableError` when none does."""
    if covering_method(q, draft_scheme) == "per_token_bound":
        return solve_per_token_bound(p, q, k, draft_scheme)
    if draft_scheme == "without_replacement" and k > int(np.count_nonzero(np.asarray(q) > 0)):
        return exhausted_support_optimum(p, q, k)
    return prefix_scan(p, q, k, draft_scheme)


def valid_closed_form(p, q, k: int, draft_scheme: str) -> OTMSolution:
    """:func:`solve_closed_form` of checked inputs (``p``, ``q`` validated, of one number type; a
    closed form covers ``(q, draft_scheme)``; ``k`` checked for ``draft_scheme`` by
    :func:`otm.draft_laws.check_scheme_draft_count`): what :func:`otm.solve_optimum` calls
    after its checks; nothing is checked again."""
    if closed_form_method(q, draft_scheme) == "per_token_bound":
        return per_token_optimum(p, q, k, draft_scheme)
    if draft_scheme == "without_replacement" and k > int(np.count_nonzero(np.asarray(q) > 0)):
        return exhausted_support_optimum(p, q, k)
    return valid_prefix_scan(p, q, k, draft_scheme)


def exhausted_support_optimum(p, q, k: int) -> OTMSolution:
    """Without replacement when ``q`` has ``m < k`` positive tokens
    (:func:`otm.draft_laws.without_replacement_law`): every tuple holds the same token set
    ``S`` = the support of ``q`` plus the first ``k - m`` other tokens in
    :func:`otm.draft_laws.greedy_order`. So ``alpha* = p(S)``: the cut ``H = S`` costs
    ``p(S) + 1 - Q(all drafts in S) = p(S)``, and accepting ``Y = y`` whenever ``y in S``
    (probability ``p(S)``) is lossless since the drafts are independent of ``Y``.
    """
    token_set = np.sort(greedy_order(q)[:k])
    value = p[token_set].sum()
    exact = p.dtype == object
    return cut_solution(value, "prefix_scan", token_set, value, 1 if exact else 1.0, exact,
                        details={"draft_scheme": "without_replacement", "exhausted_support": True})


__all__ = ["closed_form_method", "covering_method", "exhausted_support_optimum", "solve_closed_form", "valid_closed_form"]
