"""Exact OTM optimum for i.i.d. drafts and drafts without replacement: one sort, one scan.

Min-cut form (DESIGN.md "Max-flow / min-cut"; seed 000 App. F):

    alpha*(p, Q) = min over token sets H of  f(H) = p(H) + 1 - Q(all drafts in H).

Prefix theorem. Order the tokens by ``p/q`` ascending, tokens with ``q = 0`` last.
Then some prefix ``H_m`` of that order attains the minimum, so the scan of the
``n + 1`` prefixes (``n`` = number of tokens with ``q > 0``) is exact.

- Tokens with ``q = 0`` are never drawn: adding one to ``H`` adds ``p(x) >= 0`` and does
  not change ``Q(all in H)``. So an optimal ``H`` lies inside the support of ``q`` and
  prefixes ``m <= n`` suffice; this is why ``q = 0`` tokens go last, whatever ``p``
  (``p = q = 0`` tokens change nothing either way).
- i.i.d. (proof): ``Q(all in H) = q(H)^k``. ``G(w) = p.w + 1 - (q.w)^k`` is concave on
  the cube ``[0, 1]^n`` and equals ``f`` at its vertices, so ``min_H f = min_cube G``.
  For a fixed ``q.w = s`` the least ``p.w`` is the fractional knapsack, filled greedily in
  ``p/q`` order: a convex piecewise-linear ``P(s)`` with breakpoints at the prefix masses.
  On each linear piece ``P(s) + 1 - s^k`` is concave, so its minimum is at a breakpoint,
  i.e. at a prefix. Ties in ``p/q`` only reorder tokens inside one linear piece, whose
  endpoints do not depend on that order, so any tie-breaking is exact (the float i.i.d.
  scan uses numpy's default sort; everything else a stable sort, lower token id first).
- Without replacement: ``Q(all in H)`` is not a function of ``q(H)`` and the knapsack
  argument does not apply; the prefix property is the claim of DESIGN.md, which we
  check by exhaustive search over all ``2^V`` sets (tests/otm/test_closed_form.py). It
  fails for general joint laws (a test exhibits a table law where no prefix is optimal).

``Q(all in H_m)`` without replacement, for every prefix at once: see
:mod:`otm.formulations.wor_all_in`. There the scan first brackets each prefix with
rigorous bounds and evaluates the integral only on prefixes that can still be optimal.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..distributions import as_distribution_pair, check_draft_count
from ..draft_laws import without_replacement_law
from ..errors import InvalidDraftCountError, ShapeMismatchError, UnknownNameError
from ..exact import as_exact_distribution
from ..solution import OTMSolution
from .wor_all_in import all_in_bounds, all_in_prefixes

#: Sampling schemes the prefix scan covers.
PREFIX_SAMPLINGS = ("iid", "without_replacement")


def ratio_order(p, q, stable: bool = True) -> np.ndarray:
    """Token ids sorted by ``p/q`` ascending, ``q = 0`` last.

    ``stable`` breaks ties by lower token id (a stable sort); ``False`` uses numpy's
    default (faster) sort, which the i.i.d. scan may use since ties do not matter there.
    Works for float arrays (one ``np.argsort``) and exact Fraction arrays (always stable).
    """
    if np.asarray(q).dtype == object:
        key = [(1, Fraction(0)) if qi == 0 else (0, Fraction(pi) / qi) for pi, qi in zip(p, q)]
        return np.array(sorted(range(len(key)), key=key.__getitem__), dtype=np.int64)
    positive = q > 0
    ratio = np.divide(p, q, out=np.full(q.shape, np.inf), where=positive)
    return np.argsort(ratio, kind="stable" if stable else None)


def prefix_scan(p, q, k: int, sampling: str = "iid") -> OTMSolution:
    """Optimal acceptance ``alpha*(p, Q)`` for ``k`` drafts from ``q``, i.i.d. or without
    replacement, by the prefix scan (module docstring).

    Args:
        p: ``[V]`` target distribution (float, or exact Fractions for an exact answer).
        q: ``[V]`` draft distribution, same number type as ``p``.
        k: number of drafts.
        sampling: ``"iid"`` or ``"without_replacement"``.

    Returns:
        :class:`OTMSolution` with ``method="closed_form"`` and certificate
        ``{"H": token ids of the optimal prefix (in scan order), "cut_value": f(H), "all_in": Q(all in H),
        "prefix_length": m}``; ``acceptance == cut_value``. Without replacement in float,
        ``details`` holds the quadrature's error estimates.

    >>> prefix_scan([0.5, 0.5], [0.5, 0.5], 2).acceptance
    1.0
    >>> round(prefix_scan([1.0, 0.0], [0.5, 0.5], 2).acceptance, 12)  # 1 - (1/2)^2
    0.75
    """
    if sampling not in PREFIX_SAMPLINGS:
        raise UnknownNameError(f"prefix_scan covers sampling in {PREFIX_SAMPLINGS}, got {sampling!r}")
    k = check_draft_count(k)
    p, q = _pair(p, q)
    exact = p.dtype == object
    order = ratio_order(p, q, stable=exact or sampling != "iid")
    n = int(sum(1 for v in q if v > 0)) if exact else int(np.count_nonzero(q))
    if sampling == "without_replacement" and k > n:
        raise InvalidDraftCountError(
            f"q (draft) has only {n} tokens with positive probability; "
            f"k={k} distinct drafts without replacement need at least k of them"
        )
    p_sorted, q_sorted = p[order[:n]], q[order[:n]]
    target_mass = _prefix_sums(p_sorted, exact)  # [n+1] p(H_m)
    details: dict = {"order": order, "scanned_prefixes": n + 1}
    if sampling == "iid" or k == 1:  # k = 1: both schemes are one draw from q
        all_in = _iid_all_in(q_sorted, k, exact)
    elif exact:
        law = without_replacement_law(q, k)
        all_in = np.array([law.all_in_probability(order[:m]) for m in range(n + 1)], dtype=object)
    else:
        all_in = _wor_all_in(q_sorted / q_sorted.sum(), k, target_mass, details)
    cut = target_mass + 1 - all_in
    m = int(np.argmin(cut)) if not exact else min(range(n + 1), key=lambda i: (cut[i], i))
    return OTMSolution(
        acceptance=cut[m] if exact else float(cut[m]),
        method="closed_form",
        certificate={
            "H": order[:m],
            "cut_value": cut[m] if exact else float(cut[m]),
            "all_in": all_in[m] if exact else float(all_in[m]),
            "prefix_length": m,
        },
        details=details,
    )


def _pair(p, q):
    """Validated ``(p, q)``: exact Fraction arrays when either is an object array."""
    if np.asarray(p).dtype == object or np.asarray(q).dtype == object:
        p, q = as_exact_distribution(p, "p (target)"), as_exact_distribution(q, "q (draft)")
        if p.shape != q.shape:
            raise ShapeMismatchError(f"p (target) has {p.size} tokens but q (draft) has {q.size}")
        return p, q
    return as_distribution_pair(p, q)


def _prefix_sums(values, exact: bool) -> np.ndarray:
    """``[n+1]``: ``0, v_1, v_1 + v_2, ...``."""
    if exact:
        out = np.empty(values.size + 1, dtype=object)
        out[0] = Fraction(0)
        out[1:] = np.cumsum(values) if values.size else []
        return out
    return np.concatenate([[0.0], np.cumsum(values)])


def _iid_all_in(q_sorted, k: int, exact: bool) -> np.ndarray:
    """``[n+1]``: ``q(H_m)^k``. In float the complement ``1 - s^k`` of a prefix with a
    tiny outside mass ``c`` is formed as ``-expm1(k log1p(-c))`` (no cancellation)."""
    if exact:
        return _prefix_sums(q_sorted, True) ** k
    outside = np.concatenate([np.cumsum(q_sorted[::-1])[::-1], [0.0]])  # [n+1] c_m
    inside = np.concatenate([[0.0], np.cumsum(q_sorted)])
    small = outside < 0.5
    return np.where(small, np.exp(k * np.log1p(-np.minimum(outside, 0.5))), np.minimum(inside, 1.0) ** k)


def _wor_all_in(q_sorted, k: int, target_mass, details: dict) -> np.ndarray:
    """``[n+1]``: ``Q(all in H_m)`` without replacement, exact on every prefix that can
    still be optimal and replaced by its rigorous upper bound elsewhere (which can only
    raise ``f`` there, and those prefixes are beaten anyway)."""
    lo, hi = all_in_bounds(q_sorted, k)
    lower_cut = target_mass + 1 - hi  # <= f(H_m)
    upper_best = float((target_mass + 1 - lo).min())  # >= min f
    candidates = np.flatnonzero(lower_cut <= upper_best)
    values, info = all_in_prefixes(q_sorted, k, candidates)
    all_in = hi.copy()
    all_in[candidates] = np.clip(values, lo[candidates], hi[candidates])
    details.update(info, candidates=int(candidates.size))
    return all_in
