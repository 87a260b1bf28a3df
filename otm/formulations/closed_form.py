"""The closed-form optimum: which instances it covers, and the entry point for them.

It covers k drafts from ONE draft distribution ``q``, i.i.d. or without replacement, via
the prefix scan (:mod:`otm.formulations.prefix_scan`). It does not cover independent
drafts with different laws (the ``q(H)^k`` structure and the knapsack argument fail),
SpecHub's or greedy laws, or a user table: those go to the max-flow or an LP.
"""
from __future__ import annotations

import numpy as np

from ..draft_laws import greedy_order
from ..errors import NotApplicableError
from ..solution import OTMSolution
from .prefix_scan import PREFIX_SAMPLINGS, prefix_scan


def closed_form_applies(q, sampling: str) -> bool:
    """True for one draft vector ``q`` with ``sampling`` in ``("iid", "without_replacement")``."""
    return sampling in PREFIX_SAMPLINGS and np.ndim(q) == 1


def solve_closed_form(p, q, k: int, sampling: str = "iid") -> OTMSolution:
    """Exact optimum by the prefix scan; :class:`NotApplicableError` outside its cover."""
    if not closed_form_applies(q, sampling):
        raise NotApplicableError(
            f"the closed form covers k drafts from one q, sampled in {PREFIX_SAMPLINGS}; "
            f"got sampling={sampling!r} with q of shape {np.shape(q)} - use method='max_flow' "
            "or an LP"
        )
    if sampling == "without_replacement" and k > int(np.count_nonzero(np.asarray(q) > 0)):
        return exhausted_support_optimum(p, q, k)
    return prefix_scan(p, q, k, sampling)


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
    return OTMSolution(
        acceptance=value,
        method="closed_form",
        certificate={"H": token_set, "cut_value": value, "all_in": 1},
        details={"sampling": "without_replacement", "exhausted_support": True},
    )
