"""The i.i.d. OTM optimum for several ``k`` at once, from one sort: what ``otm report``
computes at every position of every text at ``V = 151,936``.

Same math as :func:`otm.formulations.prefix_scan.prefix_scan` (DESIGN.md "Max-flow /
min-cut", seed 000 App. F): ``alpha*(p, q^k) = min_m [p(H_m) + 1 - q(H_m)^k]`` over the
prefixes ``H_m`` of the tokens sorted by ``p/q`` ascending (``q = 0`` last). The order does
not depend on ``k``, so one ``argsort`` serves every ``k``; :func:`otm.optimum.optimal_acceptance`
sorts (and validates element by element) on every call, which costs about ten times
more per ``(position, k)`` at this vocabulary. ``1 - q(H)^k`` is formed as
``-expm1(k log1p(-c))`` with ``c`` the mass outside ``H`` summed from the end, so there is
no cancellation when ``c`` is tiny.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from otm.distributions import as_distribution_pair, check_draft_count
from otm.formulations.prefix_scan import ratio_order


def iid_optimum_all_k(target_probs, draft_probs, ks: Sequence[int]) -> np.ndarray:  # [len(ks)]
    """``alpha*`` for ``k`` i.i.d. drafts from ``q`` against ``p``, for each ``k`` in ``ks``.

    Args:
        target_probs: ``[V]`` p.  draft_probs: ``[V]`` q.  ks: draft counts.

    >>> iid_optimum_all_k([1.0, 0.0], [0.5, 0.5], [1, 2]).round(12).tolist()
    [0.5, 0.75]
    """
    p, q = as_distribution_pair(target_probs, draft_probs)
    ks = [check_draft_count(k) for k in ks]
    order = ratio_order(p, q, stable=False)
    outside = np.empty(q.size + 1)  # [V+1] c_m, the draft mass outside H_m
    outside[-1] = 0.0
    np.cumsum(q[order[::-1]], out=outside[-2::-1])
    target_mass = np.empty(q.size + 1)  # [V+1] p(H_m)
    target_mass[0] = 0.0
    np.cumsum(p[order], out=target_mass[1:])
    with np.errstate(divide="ignore"):  # c = 1 at m = 0: log1p(-1) = -inf, all-in = 0
        log_inside = np.log1p(-np.minimum(outside, 1.0))
        return np.array([float((target_mass - np.expm1(k * log_inside)).min()) for k in ks])


__all__ = ["iid_optimum_all_k"]
