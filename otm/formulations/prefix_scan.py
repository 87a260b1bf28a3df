"""Exact OTM optimum for i.i.d. drafts and drafts without replacement: one sort, one scan.

Min-cut form (docs/theory.md "Max-flow / min-cut"; SpecHub (Sun et al. 2024), App. F):

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
- Without replacement (proof, written for this module; the earlier direct swap of two
  tokens does not work, the argument below uses both one-token moves). Write
  ``T(H) = Q(all k draws in H)``, ``D`` for the set of the k draws, and for ``x`` not in
  ``K``: ``Delta_x(K) = T(K + x) - T(K) = P(x in D, D inside K + x)``.

  Exchange lemma. For a token set ``G`` and distinct tokens ``a, b`` outside it (``q > 0``):

      q_b Delta_a(G + b) >= q_a Delta_b(G).                                           (*)

  Use the exponential clocks of :mod:`otm.formulations.wor_all_in` (the draws are the
  first k clocks to ring). Let ``R`` be the other tokens, ``r = q(R)``, ``A_t`` the set of
  tokens of ``G`` rung by time ``t``. ``Delta_b(G)``: ``b`` rings at ``t`` (density
  ``q_b e^{-q_b t}``), no clock of ``R`` or ``a`` rang before (``e^{-(r + q_a) t}``),
  ``|A_t| <= k - 1``, and (memoryless) the next ``k - 1 - |A_t|`` arrivals are all in
  ``G minus A_t``, with conditional probability ``h_2(A_t)``:

      q_a Delta_b(G) = q_a q_b int e^{-(q_a + q_b + r) t} E[1{|A_t| <= k-1} h_2(A_t)] dt.

  ``Delta_a(G + b)``: ``a`` rings at ``t``, no ``R`` clock before; keep only the case that
  ``b`` has not rung by ``t`` (``e^{-q_b t}``, independent); then ``|A_t| <= k - 1`` and the
  next ``k - 1 - |A_t|`` arrivals must be in ``(G minus A_t) + b``, probability ``h_1(A_t)``:

      q_b Delta_a(G + b) >= q_a q_b int e^{-(q_a + q_b + r) t} E[1{|A_t| <= k-1} h_1(A_t)] dt.

  Couple the clocks of ``G minus A_t`` and ``R``: if the first ``k - 1 - |A_t|`` of them to
  ring are in ``G`` and ring before every clock of ``R`` and of ``a`` (the event of
  ``h_2``), then in the system with ``b`` in place of ``a`` the first ``k - 1 - |A_t|``
  arrivals are in ``(G minus A_t) + b`` (``b`` may be one of them). So ``h_1 >= h_2``. QED.

  Theorem. Let ``H`` minimise ``f`` without ``q = 0`` tokens (dropping them never raises
  ``f``). For ``a`` outside ``H`` and ``b`` in ``H`` (``q > 0``), optimality against adding
  ``a`` and removing ``b`` gives ``p_a >= Delta_a(H)`` and ``p_b <= Delta_b(H - b)``; with
  ``G = H - b``, (*) chains them:
  ``q_b p_a >= q_b Delta_a(H) >= q_a Delta_b(G) >= q_a p_b``, i.e. ``p_a/q_a >= p_b/q_b``.
  So with ``rho`` the largest ratio in ``H``, ``H`` holds every token of ratio ``< rho``
  and none of ratio ``> rho``. If ``a`` outside ``H`` ties with some ``b`` in ``H``, the
  chain is all equalities, so ``f(H + a) = f(H)``: ``H + a`` is again a minimiser (still
  holding ``b``). Adding the tied tokens one at a time gives the minimiser
  ``{x: q_x > 0, p_x/q_x <= rho}``, a prefix for ANY tie-breaking. QED.

  The i.i.d. law also satisfies (*) (by convexity of ``s^k``). A general joint law need
  not: tests/otm/test_closed_form.py exhibits a table law where (*) fails and no prefix
  is optimal, and checks (*) and the prefix property exactly (Fractions, all ``2^V``
  sets) on small without-replacement instances.
"""
from __future__ import annotations

from fractions import Fraction
from functools import cached_property

import numpy as np

from ..distributions import (
    as_distribution_pair,
    as_fractions,
    as_exact_distribution,
    check_draft_count,
)
from ..draft_laws import ids_within_ties, valid_draft_law
from ..errors import InvalidDraftCountError, NotApplicableError, ShapeMismatchError, UnknownNameError
from ..solution import OTMSolution, cut_solution
from .wor_all_in import (
    DraftOrder,
    DraftPrefixes,
    accurate_cumsum,
    neighbour_bounds,
    outside_at_ks,
    quadrature_step,
)

#: Sampling schemes the prefix scan covers.
PREFIX_SCHEMES = ("iid", "without_replacement")
#: Without replacement: a prefix whose cut is provably within this of the least evaluated
#: cut is not evaluated (the returned optimum is within it of the exact one; 4 ulps of 1).
_TIE = 2.0**-50
#: Without replacement: prefixes evaluated together in one round of the branch and bound.
_PROBES = 16
#: Without replacement: largest nodes x prefixes x k evaluated by one range recursion.
_RANGE_BUDGET = 2**21
#: Without replacement, in float: the largest relative truncation error of an evaluated
#: prefix accepted from the clock integral. Past it (draft probabilities so small that the
#: integral's time range, capped where float64 keeps it finite, cannot reach their clocks)
#: the scan is redone in rationals from the same floats, or refused.
_TRUNCATION_LIMIT = 1e-12



def ratio_order(p, q, stable: bool = True) -> np.ndarray:
    """Token ids sorted by ``p/q`` ascending, ``q = 0`` last.

    ``stable`` breaks ties by lower token id (a stable sort); ``False`` uses numpy's
    default (faster) sort, enough wherever ties do not matter (the float i.i.d. scan
    sorts ``p / q`` itself, letting ``q = 0`` give ``inf`` or ``nan``, both sorted last).
    Works for float arrays (numpy's default sort, then the ties by id: :func:`ids_within_ties`)
    and exact Fraction arrays (always stable).
    """
    if np.asarray(q).dtype == object:
        key = [(1, Fraction(0)) if qi == 0 else (0, Fraction(pi) / qi) for pi, qi in zip(p, q)]
        return np.array(sorted(range(len(key)), key=key.__getitem__), dtype=np.int64)
    positive = q > 0
    with np.errstate(over="ignore"):
        ratio = np.divide(p, q, out=np.full(q.shape, np.inf), where=positive)
    order = np.argsort(ratio)
    overflowed = positive & np.isinf(ratio)
    if overflowed.any():
        return _order_past_overflow(p, q, ratio, order, overflowed, stable)
    return ids_within_ties(ratio, order) if stable else order


def _order_past_overflow(p, q, ratio, order, overflowed, stable: bool) -> np.ndarray:
    """:func:`ratio_order` where some ``p / q`` overflows float64 (``q`` below about
    ``1e-308 p``, denormal draft probabilities): those tokens would tie with the ``q = 0``
    sentinel, so they go after every finite ratio, among themselves by ``log p - log q``
    (ties by id), and the ``q = 0`` tokens last, by id."""
    finite = order[: int(np.isfinite(ratio).sum())]  # the argsort put every inf last
    head = ids_within_ties(ratio, finite) if stable else finite
    big = np.flatnonzero(overflowed)
    big = big[np.argsort(np.log(p[big]) - np.log(q[big]), kind="stable")]
    return np.concatenate([head, big, np.flatnonzero(q == 0)])


def prefix_scan(p, q, k: int, draft_scheme: str = "iid") -> OTMSolution:
    """Optimal acceptance ``alpha*(p, Q)`` for ``k`` drafts from ``q``, i.i.d. or without
    replacement, by the prefix scan (module docstring).

    Args:
        p: ``[V]`` target distribution (float, or exact Fractions for an exact answer).
        q: ``[V]`` draft distribution, same number type as ``p``.
        k: number of drafts.
        draft_scheme: ``"iid"`` or ``"without_replacement"``.

    Returns:
        :class:`OTMSolution` with ``method="prefix_scan"``, ``cut`` = the optimal prefix
        ``H`` (token ids in scan order), ``cut_value = value = f(H)``, ``all_in = Q(all in H)``
        and ``details["prefix_length"] = |H|``. Without replacement in float, ``details``
        holds the quadrature's error estimates.

    >>> prefix_scan([0.5, 0.5], [0.5, 0.5], 2).value
    1.0
    >>> round(prefix_scan([1.0, 0.0], [0.5, 0.5], 2).value, 12)  # 1 - (1/2)^2
    0.75
    """
    if draft_scheme not in PREFIX_SCHEMES:
        raise UnknownNameError(f"unknown draft scheme {draft_scheme!r} for prefix_scan; choose one of {PREFIX_SCHEMES}")
    k = check_draft_count(k)
    p, q = _pair(p, q)
    return valid_prefix_scan(p, q, k, draft_scheme)


def valid_prefix_scan(p: np.ndarray, q: np.ndarray, k: int, draft_scheme: str) -> OTMSolution:
    """:func:`prefix_scan` of checked inputs: ``p``, ``q`` validated (float64, or exact
    Fractions both), ``k`` an int ``>= 1``; nothing checked again."""
    assert isinstance(k, int) and k >= 1 and draft_scheme in PREFIX_SCHEMES, (k, draft_scheme)
    exact = p.dtype == object
    if not exact and (draft_scheme == "iid" or k == 1):  # k = 1: both schemes are one draw from q
        return _iid_float_scan(p, q, k)
    if not exact:
        return WithoutReplacementScan.of_valid(p, q).solve_checked(k)
    order = ratio_order(p, q)
    n = int(sum(1 for v in q if v > 0))
    if draft_scheme == "without_replacement" and k > n:
        raise _too_few_tokens(n, k)
    p_sorted, q_sorted = p[order[:n]], q[order[:n]]
    details: dict = {"order": order, "scanned_prefixes": n + 1}
    if draft_scheme == "iid" or k == 1:
        outside = 1 - _prefix_sums(q_sorted, True) ** k
    else:
        law = valid_draft_law("without_replacement", q, k)
        outside = np.array([1 - law.all_in_probability(order[:m]) for m in range(n + 1)], dtype=object)
    cut = _prefix_sums(p_sorted, True) + outside
    m = min(range(n + 1), key=lambda i: (cut[i], i))
    details["prefix_length"] = m
    return cut_solution(cut[m], "prefix_scan", order[:m], cut[m], 1 - outside[m], exact=exact, details=details)


class WithoutReplacementScan:
    """The float prefix scan without replacement of one ``(p, q)`` for any number of ``k``:
    ``solve(k)`` is ``prefix_scan(p, q, k, "without_replacement")``, bit for bit, and what
    does not depend on ``k`` is computed once, on first use: the ratio order, the target's
    prefix sums and the draft's prefix masses and order statistics
    (:class:`otm.formulations.wor_all_in.DraftOrder`). A per-position table asks for every
    ``k`` of the same row at once (:meth:`solve_together`, :mod:`otm.positions`): one branch
    and bound for all of them, the same guarantee as ``solve`` at each ``k``.

    Args:
        p, q: ``[V]`` target and draft distributions (floats; validated as by :func:`prefix_scan`).

    >>> scan = WithoutReplacementScan([1.0, 0.0, 0.0], [0.25, 0.25, 0.5])
    >>> [round(scan.solve(k).value, 12) for k in (1, 2, 3)]  # P(token 0 among k draws): 1/4, 7/12, 1
    [0.25, 0.583333333333, 1.0]
    """

    def __init__(self, p, q):
        p, q = _pair(p, q)
        if p.dtype == object:
            raise NotApplicableError("WithoutReplacementScan is the float scan; pass exact Fractions to prefix_scan")
        self._set(p, q)

    @classmethod
    def of_valid(cls, p: np.ndarray, q: np.ndarray) -> WithoutReplacementScan:
        """The scan of a pair already validated by :func:`prefix_scan` (float64, not checked again)."""
        scan = cls.__new__(cls)
        scan._set(p, q)
        return scan

    def _set(self, p: np.ndarray, q: np.ndarray) -> None:
        self.p, self.q = p, q  # [V] each
        self.n = int(np.count_nonzero(q))  # tokens with q > 0

    @cached_property
    def _shared(self) -> tuple:
        """``(order, inside [n+1], beyond [n+1], DraftOrder)``: the ratio order, the target
        mass inside and outside each prefix, the draft's k-independent prefix data."""
        p, q, n = self.p, self.q, self.n
        order = ratio_order(p, q)
        order.flags.writeable = False  # shared by the solutions' cuts
        p_sorted, q_sorted = p[order[:n]], q[order[:n]]
        p_elsewhere = float(p[order[n:]].sum())  # target mass on tokens with q = 0
        inside = np.concatenate([[0.0], accurate_cumsum(p_sorted)])  # p(H_m)
        beyond = np.concatenate([accurate_cumsum(p_sorted[::-1])[::-1], [0.0]]) + p_elsewhere  # p(outside H_m)
        return order, inside, beyond, DraftOrder(q_sorted / q_sorted.sum())

    def solve(self, k: int) -> OTMSolution:
        """``prefix_scan(p, q, k, "without_replacement")``."""
        return self.solve_checked(check_draft_count(k))

    def solve_checked(self, k: int) -> OTMSolution:
        """:meth:`solve` of a ``k`` checked already (an int ``>= 1``)."""
        assert isinstance(k, int) and k >= 1, k
        if k == 1:  # one draw from q: the i.i.d. scan
            return _iid_float_scan(self.p, self.q, 1)
        if k > self.n:
            raise _too_few_tokens(self.n, k)
        return self._scan([k])[0]

    def solve_together(self, ks) -> list[OTMSolution]:
        """The solutions at every ``k`` of ``ks`` (ints from 2 to :attr:`n`) from one branch and
        bound for all of them (:func:`_wor_cut_gaps`): each round evaluates the prefixes that
        any ``k`` leaves open at every ``k`` at once, from one state per prefix
        (:func:`otm.formulations.wor_all_in.outside_at_ks`). Each value carries the same
        guarantee as :meth:`solve`'s (within ``_TIE`` plus the evaluations' relative error of
        the exact optimum), but is computed on another grid and set of prefixes, so it may
        differ from :meth:`solve`'s in the last bits. :class:`InvalidDraftCountError` for a
        ``k`` outside ``2..n``; a ``k`` whose clock integral cannot reach the smallest draft
        probabilities is redone alone in rationals, as by :meth:`solve` (which may refuse it)."""
        ks = [check_draft_count(k) for k in ks]
        for k in ks:
            if k == 1 or k > self.n:
                raise _too_few_tokens(self.n, k) if k > 1 else InvalidDraftCountError(
                    "solve_together covers k >= 2 (k = 1 is one draw from q: use solve)")
        return self._scan(ks)

    def _scan(self, ks: list[int]) -> list[OTMSolution]:
        """The branch and bound at the distinct ``ks`` (each in ``2..n``), one solution per entry of ``ks``."""
        order, inside, beyond, draft = self._shared
        distinct = sorted(set(ks))
        details = [{"order": order, "scanned_prefixes": self.n + 1} for _ in distinct]
        scans = _wor_cut_gaps(inside, beyond, DraftPrefixes.together(draft, distinct), details)
        solutions = {}
        for k, (gap, outside), found in zip(distinct, scans, details):
            if found["truncation_error_bound"] > _TRUNCATION_LIMIT:
                solutions[k] = _wor_scan_in_rationals(self.p, self.q, k, found["truncation_error_bound"])
                continue
            m = int(np.argmin(gap))
            found["prefix_length"] = m
            solutions[k] = cut_solution(1.0 + gap[m], "prefix_scan", order[:m], 1.0 + gap[m], 1 - outside[m], exact=False,
                                        details=found)
        return [solutions[k] for k in ks]


def _too_few_tokens(n: int, k: int) -> InvalidDraftCountError:
    return InvalidDraftCountError(
        f"q (draft) has only {n} tokens with positive probability; "
        f"k={k} distinct drafts without replacement need at least k of them"
    )


def _wor_scan_in_rationals(p, q, k: int, truncation: float) -> OTMSolution:
    """The scan without replacement redone in exact rationals from the float inputs (their
    tuples enumerated), for rows whose draft probabilities are too small for the clock
    integral's time range (its truncation bound ``truncation`` past ``_TRUNCATION_LIMIT``);
    a row with more tuples than the enumeration takes is refused with a typed error."""
    smallest = float(q[q > 0].min() / q.sum())
    try:
        exact = prefix_scan(as_fractions(p), as_fractions(q), k, "without_replacement")
    except NotApplicableError as exc:
        raise NotApplicableError(
            f"prefix_scan without replacement: the smallest positive draft probability, {smallest:.3g}, is too small "
            f"for the clock integral's time range in float64 (relative truncation error up to {truncation:.3g}), "
            f"and the exact enumeration does not apply either ({exc}); set such entries of q to 0 or pass exact "
            "Fractions of a smaller row") from None
    details = dict(exact.details, truncation_error_bound=truncation, arithmetic="rationals from the floats (the clock integral's time range cannot "
                   f"reach draft probabilities down to {smallest:.3g}; its truncation bound was {truncation:.3g})")
    return cut_solution(float(exact.value), "prefix_scan", exact.cut, float(exact.cut_value), float(exact.all_in),
                        exact=False, details=details)


def _iid_float_scan(p, q, k: int) -> OTMSolution:
    """The i.i.d. scan in float for one ``k`` (:func:`iid_tail_sums`, then one argmax)."""
    order, outside_p, work = iid_tail_sums(p, q)
    j, gap = _best_tail(outside_p, _log_inside(work), k, work)
    m = q.size - 1 - j if j is not None else q.size
    outside = min(float(q[order[m:]].sum()), 1.0) if j is not None else 0.0
    return cut_solution(1.0 + gap, "prefix_scan", order[:m], 1.0 + gap, (1.0 - outside) ** k, exact=False,
                        details={"order": order, "scanned_prefixes": q.size + 1, "prefix_length": m})


def iid_tail_sums(p, q) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(order, outside_p, outside_q)`` for the float i.i.d. scan: ``order`` sorts the
    tokens by ``p/q`` (one unstable ``argsort``: ties do not matter, module docstring;
    ``q = 0`` gives ``inf`` or ``nan``, both sorted last), and entry ``j`` of the two
    ``[V]`` arrays is the target / draft mass outside the prefix ``H_{V-1-j}`` (summed
    from the end: no cancellation when it is tiny). Every prefix is a valid cut, so all
    ``V + 1`` are scanned. Work arrays are reused in place: on a shared VM each freshly
    touched V-sized array costs about a millisecond of page faults (measured)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        outside_p = p / q  # [V] the ratios
    order = np.argsort(outside_p)
    backwards = order[::-1]
    np.take(p, backwards, out=outside_p)
    outside_q = q[backwards]
    np.cumsum(outside_p, out=outside_p)
    np.cumsum(outside_q, out=outside_q)
    return order, outside_p, outside_q


def _best_tail(outside_p: np.ndarray, log_inside: np.ndarray, k: int, work: np.ndarray | None = None) -> tuple[int | None, float]:
    """``(j, f(H) - 1)`` at the best prefix ``H = H_{V-1-j}`` for ``k`` drafts (``j = None``:
    ``H`` = every token, ``f = 1``). ``f(H) - 1 = (1 - (1 - c)^k) - p(outside)`` with
    ``1 - (1 - c)^k = -expm1(k log1p(-c))``: ties with ``alpha*`` close to 1 are resolved to
    ~1e-16. ``log_inside`` is :func:`_log_inside` of the draft masses ``c``, the same for every
    ``k``; ``work`` (``[V]``, overwritten) when given."""
    work = np.multiply(log_inside, k, out=work)
    np.expm1(work, out=work)  # (1 - c)^k - 1
    work += outside_p  # = 1 - f(H_{V-1-j})
    j = int(np.argmax(work))
    if work[j] <= 0.0:
        return None, 0.0
    return j, -float(work[j])


def _log_inside(outside_q: np.ndarray, in_place: bool = True) -> np.ndarray:
    """``log1p(-c)`` for the draft masses ``c = outside_q`` (capped at 1; ``c = 1`` gives ``-inf``,
    ``(1 - c)^k = 0``); ``in_place`` overwrites ``outside_q``."""
    work = outside_q if in_place else outside_q.copy()
    np.negative(work, out=work)
    np.maximum(work, -1.0, out=work)
    with np.errstate(divide="ignore"):
        np.log1p(work, out=work)
    return work


def iid_optimum_for_ks(p, q, ks) -> np.ndarray:  # [len(ks)]
    """``alpha*`` for ``k`` i.i.d. drafts from ``q`` against ``p`` for every ``k`` in ``ks``,
    from one sort and one ``log1p(-c)`` pass (neither depends on ``k``): what a per-position
    table needs.

    >>> iid_optimum_for_ks([1.0, 0.0], [0.5, 0.5], [1, 2]).round(12).tolist()
    [0.5, 0.75]
    """
    p, q = as_distribution_pair(p, q)
    ks = [check_draft_count(k) for k in ks]
    _, outside_p, outside_q = iid_tail_sums(p, q)
    log_inside, work = _log_inside(outside_q), np.empty_like(outside_q)
    return np.array([1.0 + _best_tail(outside_p, log_inside, k, work)[1] for k in ks])


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


def _wor_cut_gaps(inside, beyond, drafts: list[DraftPrefixes], details: list[dict]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per ``k`` of ``drafts`` (the :class:`DraftPrefixes` of one order at distinct ``k``),
    ``([n+1], [n+1])``: the cut minus one, ``f(H_m) - 1 = R(H_m) - p(outside H_m)``, and
    ``R(H_m) = 1 - Q(all in H_m)``, without replacement.

    The gap is formed from small terms on either side (``p(H) - T(H)`` while ``p(H) <= 1/2``,
    ``R(H) - p(outside H)`` after), so near-ties with ``alpha*`` close to 1 are resolved to
    ~1e-16, not to the ~1e-14 rounding of a cumulative sum near 1; the sums of ``p`` are
    :func:`accurate_cumsum` (a float64 ``cumsum`` of 151,936 equal terms is off by 1.2e-12).

    Branch and bound over the prefixes (derivations in :mod:`otm.formulations.wor_all_in`).
    Every prefix carries bounds ``lo <= R <= hi``: first the rigorous closed-form ones
    (:func:`outside_bounds`), then those from the prefixes already evaluated
    (:func:`neighbour_bounds`: ``R`` falls and ``R / c`` rises along the order). With
    ``best`` the least gap among evaluated prefixes, a prefix stays open while
    ``gap(lo) < best - _TIE`` or ``gap(hi) < best``. Each round evaluates open prefixes
    exactly: all of them when at most ``_PROBES`` are open (:func:`outside_at`), the whole
    open range when it is short (:func:`outside_prefixes`, cost nodes x length x k within
    ``_RANGE_BUDGET``), else ``_PROBES`` probes (the open prefixes of least ``gap(lo)`` and of
    least ``gap(hi)`` and evenly spaced ones among the open). Each round evaluates at least
    one open prefix, so the loop ends; it ends with every prefix evaluated or beaten:
    ``gap >= gap(lo) >= best - _TIE``. So the returned minimum is within ``_TIE`` (plus the
    ~1e-15 relative error of the evaluations) of the true minimum, and is attained by an
    evaluated prefix: the others carry their upper bound ``hi``, their gap raised to just
    above ``best``, so the argmin is never a bound. ``details`` (one dict per ``k``) gets
    ``candidates`` (prefixes the closed-form bounds leave open), ``evaluated``, ``rounds`` and
    the largest quadrature diagnostics of the evaluations.

    Several ``k`` run their rounds together: the scattered prefixes that any of them asks for
    are evaluated at every ``k`` still open, from one state per prefix, and each ``k`` takes
    every value as its own evaluation; a range is evaluated for the ``k`` that asks for it, from
    a state of the same computation (:func:`outside_at_ks`: the moments, the costly part, once a
    round instead of once a round and ``k``). Alone, a ``k`` runs exactly the rounds described
    above."""
    gap_of = _gap_form(inside, beyond)
    scans = [_Search(draft) for draft in drafts]
    active = list(range(len(drafts)))
    while active:
        probes, ranges, still = [], [], []
        for i in active:
            search, draft, k = scans[i], drafts[i], drafts[i].k
            gap_low, search.gap = gap_of(search.lower), gap_of(search.upper)
            search.best = search.gap[search.known].min()
            open_ = np.flatnonzero(~search.known & ((gap_low < search.best - _TIE) | (search.gap < search.best)))
            if open_.size == 0:
                continue
            still.append(i)
            search.candidates = search.candidates or open_.size  # left open by the closed-form bounds
            search.rounds += 1
            span = np.arange(open_[0], open_[-1] + 1)
            if open_.size <= _PROBES:
                probes.append(open_)
            elif span.size * k <= _RANGE_BUDGET and span.size * k * draft.time_nodes(span, quadrature_step(k))[1].max() <= _RANGE_BUDGET:
                ranges.append((i, span))
            else:
                spread = open_[np.linspace(0, open_.size - 1, _PROBES - 2).round().astype(np.int64)]
                probes.append(np.unique(np.concatenate([spread, open_[[np.argmin(gap_low[open_]),
                                                                       np.argmin(search.gap[open_])]]])))
        active = still
        if not active:
            break
        found: dict = {i: [] for i in active}  # (points, values, diagnostics) per k
        points = np.unique(np.concatenate(probes)) if len(probes) > 1 else probes[0] if probes else np.zeros(0, np.int64)
        values, infos, spans = outside_at_ks([drafts[i] for i in active], points,
                                             ranges=[(active.index(i), span) for i, span in ranges])
        if probes:
            for i, value, info in zip(active, values, infos):
                found[i].append((points, value, info))
        for (i, span), (value, info) in zip(ranges, spans):
            found[i].append((span, value, info))
        for i in active:
            scans[i].take(found[i])
    out = []
    for search, found in zip(scans, details):
        gap = search.gap  # the last round evaluated nothing: gap_of(upper)
        gap[~search.known] = np.maximum(gap[~search.known], np.nextafter(search.best, np.inf))
        found.update(search.info, quadrature_error_estimate=search.info["coarse_step_difference"] ** 2,
                     candidates=int(search.candidates), evaluated=int(search.evaluated), rounds=search.rounds)
        out.append((gap, search.upper))
    return out


class _Search:
    """One ``k``'s state in :func:`_wor_cut_gaps`: the bounds ``lower <= R <= upper`` of every
    prefix, which are evaluated (``known``), the last gaps and the counts and diagnostics."""

    def __init__(self, draft: DraftPrefixes):
        self.outside = draft.outside
        self.lower, self.upper = draft.lower.copy(), draft.upper.copy()
        self.known = self.lower == self.upper  # m < k, m = n, and prefixes whose bounds already meet
        self.info = {"coarse_step_difference": 0.0, "truncation_error_bound": 0.0, "nodes": 0}
        self.rounds = self.evaluated = self.candidates = 0
        self.gap = self.best = None

    def take(self, evaluations) -> None:
        """The values ``(points, values, diagnostics)`` of one round into the bounds."""
        for points, values, step_info in evaluations:
            values = np.clip(values, self.lower[points], self.upper[points])
            self.lower[points] = self.upper[points] = values
            self.evaluated += points.size
            self.known[points] = True
            self.info = {key: max(self.info[key], step_info[key]) for key in self.info}
        self.lower, self.upper = neighbour_bounds(self.outside, self.known, self.lower, self.upper)


def _gap_form(inside, beyond):
    """``gap_of(outside)``: the cut minus one of every prefix from ``R`` (:func:`_wor_cut_gaps`),
    ``p(H) - (1 - R)`` while ``p(H) <= 1/2``, ``R - p(outside H)`` after."""
    low = inside <= 0.5
    half = int(np.count_nonzero(low))
    ordered = bool(low[:half].all())  # p(H_m) grows with m, so the prefixes with p(H) <= 1/2 come first

    def gap_of(outside):
        if not ordered:  # the rounded p(H_m) out of order around 1/2
            return np.where(low, inside - (1.0 - outside), outside - beyond)
        gap = np.empty_like(outside)  # the same two forms on the two slices, without computing both everywhere
        np.subtract(1.0, outside[:half], out=gap[:half])
        np.subtract(inside[:half], gap[:half], out=gap[:half])
        np.subtract(outside[half:], beyond[half:], out=gap[half:])
        return gap

    return gap_of
