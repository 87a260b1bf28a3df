"""``Q(all k drafts in H)`` for drafts WITHOUT replacement, for the prefixes ``H`` of an order.

Math (derived here; the papers do not state it). Drawing ``k`` distinct tokens successively
from ``q`` renormalised over the tokens not yet drawn (SpecHub: Sun, Zhou, Chen, Sun, EMNLP
2024, arXiv:2411.05289, Alg. 1, RRSw) gives the same law as the arrival order of independent
exponential clocks ``E_x ~ Exp(q(x))``: at any moment the next clock to ring is ``x`` with
probability ``q(x) / (remaining rate)``. With ``c = 1 - q(H)`` (the rate outside ``H``) and
``N_H(t)`` the number of tokens of ``H`` whose clock rang by time ``t``, the probability
that some draw falls outside ``H`` is

    R(H) = 1 - T(H) = P(first arrival outside H before the k-th arrival in H)
         = int_0^inf c e^{-c t} P(N_H(t) < k) dt.                                      (1)

We compute ``R`` (not ``T``): the min-cut value is ``p(H) + R(H)`` and ``R`` is tiny
(``~ c``) on the prefixes that matter, so it must carry its own relative accuracy.

Surrogate. ``P(N_H(t) < k) = 1 - O(t^k)`` at small ``t``; so is ``P(Pois(t) < k)``
(``gammaincc(k, t)``), whose transform is known: ``int c e^{-ct} P(Pois(t) < k) dt =
1 - (1 + c)^{-k}`` (first arrival of rate ``c`` before the k-th of a rate-1 process). Hence

    R(H) = 1 - (1 + c)^{-k} + int_0^inf c e^{-ct} [P(N_H(t) < k) - P(Pois(t) < k)] dt,    (2)

and the bracket is ``O(t^k)`` at 0 and decays at infinity, so a trapezoid rule in
``y = log t`` converges geometrically (the integrand is analytic in a strip around the
real ``y`` axis).

Step. The error of the trapezoid with step ``h`` behaves like ``C exp(-a / h)``, and ``a``
falls with ``k``: in ``y`` both probabilities drop from 1 to 0 over a width ~ ``1/sqrt(k)``
(a Poisson law of mean ``t`` passes ``k`` within ``sqrt(k)`` of ``t = k``), so the strip
of analyticity narrows. :func:`quadrature_step` takes ``h = 0.2 min(1, (4/k)^0.3)``, narrowing
with ``a`` (tests/otm/test_wor_families.py holds ``R`` within 1e-12 of an exact dynamic program
over the draws up to k = 32; the measurements behind the step: research/optimal_wor/JOURNAL.md,
"Figures moved from docstrings").

Range. Each prefix ``H_m`` is integrated over its own nodes ``t_lo <= t <= t_hi(m)`` of one
grid ``log t = log t_lo + g h``, each end leaving below ``_TAIL * c`` (rigorous, and
relative: ``R >= 1 - (1 - c)^k >= c``, so ``R`` keeps its relative accuracy even when tiny):

- below ``t_lo``: both probabilities of ``>= k`` arrivals are in ``[0, t^k / k!]``
  (``P(N_H >= k) <= e_k(pi) <= (s t)^k / k!``), so the part is ``<= c t_lo^{k+1} / (k+1)!``;
- above ``t_hi``: ``P(N_H(t) < k) <= sum_{i<=k} e^{-q_(i) t}`` over the ``k`` largest ``q``
  in ``H_m`` (one of them has not rung), giving ``<= c k e^{-q_(k) T} / q_(k)``;
  ``int_T c e^{-ct} P(Pois(t) < k) dt <= c k Q(k, T)``; and anyway the whole part is
  ``<= int_T c e^{-ct} dt = e^{-cT}``. ``t_hi(m)`` is the least ``T`` meeting either, capped
  at ``_MAX_TIME`` (the bound is then reported as ``truncation_error_bound``: draft
  probabilities below about ``1e-290``; :func:`otm.formulations.prefix_scan.prefix_scan`
  redoes a scan whose bound passes ``1e-12`` in rationals from the floats, or refuses it). The k-th
  largest ``q`` of every prefix comes from the order statistics of "Bounds" below.

State at a prefix (:func:`_head_states`). At node ``t`` split ``H`` into small tokens
(``z = q t <= ln 2``, ``u = e^z - 1 <= 1``) and big ones. ``P(N_H(t) = j)``, ``j < k``, is
the convolution of the two groups' heads:

- small tokens: ``P(N_S = j) = e^{-sum z} e_j(u)``, the elementary symmetric polynomials
  from the power sums ``p_r = sum u^r`` by Newton's identities
  ``j e_j = sum_{r<=j} (-1)^{r-1} e_{j-r} p_r``. With ``u <= 1`` every term is bounded by a
  Poisson-like weight, so the alternation does not amplify the roundings.
- Moments (this replaces the O(V k) pass over the tokens at every node). Since
  ``(e^z - 1)^r = sum_{n>=r} A[n, r] z^n`` with ``A >= 0`` (``A[n, r] = r! S(n, r) / n!``,
  Stirling numbers of the second kind), ``p_r(t) = sum_n A[n, r] M_n(t)`` with the moments
  ``M_n(t) = sum_small (q t)^n``. The series is cut at the least ``N`` whose tail at
  ``z = ln 2`` is below ``2^-60`` of the sum for every ``r < k``; as all coefficients are
  positive, the relative tail ``sum_{n>N} A z^n / sum_n A z^n`` increases with ``z``, so
  the cut holds at every small ``z`` (N = 17 at k = 2, 37 at k = 8, 88 at k = 32). A token
  is small at the nodes ``g < b(x)`` and big from node ``b(x)`` on; its moments enter the
  bin ``b(x)`` scaled as ``w = q t_{b-1} <= ln 2`` (``w^n`` never under- or overflows
  harmfully), and ``M_n(t_g) = sum_{b > g} (t_g / t_{b-1})^n W_n(b)`` is a backward
  recursion over the nodes with the factor ``(t_g / t_{g+1})^n`` (its roundings are damped
  by that factor: a few ``eps``). The bins of several prefixes are the (node, segment
  between prefixes) groups, summed over the segments; each group is summed pairwise
  (``np.add.reduceat`` on the tokens sorted by group), since the first moment enters as
  ``e^{-sum z}`` and a sequential sum of ~10^5 alike terms is off by ~``10^5 eps``
  relative. All terms are positive.
- big tokens, largest first, one at a time: ``P(j) <- e^{-z} P(j) + (1 - e^{-z}) P(j-1)``.
  Each rings with probability ``>= 1/2``, so after ``n`` of them
  ``P(N < k) <= P(Bin(n, 1/2) < k)``: the state is set to 0 when that bound times
  ``t_max`` is ``<= _TINY``, when the computed ``t P(N_big < k)`` is (adding tokens only
  lowers ``P(N < k)``), or when ``t sum_{i<=k} e^{-q_(i) t}`` is (the ``k`` largest bound
  above). Zeroing a node with ``t P <= _TINY`` changes its term ``h t c e^{-ct} P`` by at
  most ``h c _TINY``: over ``G`` nodes at most ``c _TINY G h``, relative to ``R >= c`` at
  most ``_TINY`` times the length of the range in ``log t`` (< 1e-17).

Cost of the state at ``P`` prefixes on ``G`` nodes: O(V N) for the moments plus
O(P G (N k + k^2)) plus the big tokens, nothing proportional to the distance between the
prefixes (:func:`outside_at`).

Range recursion (:func:`_below_k`, for a contiguous range ``m0..m1`` of prefixes from the
state at ``m0``): ``P_m(j) = e^{-q_m t} P_{m-1}(j) + (1 - e^{-q_m t}) P_{m-1}(j-1)`` is
written with ``D_m = e^{-(s_m - s_{m0}) t}`` as ``P_m = D_m Q_m``,
``Q_m(j) = Q_{m-1}(j) + u_m Q_{m-1}(j-1)``: one ``cumsum`` per ``j`` (plain floats, all
terms positive). Blocks keep ``(s_m - s_{m0}) t <= 2 * _BLOCK_EXPONENT`` so nothing
overflows; a token with ``q t_hi > _BLOCK_EXPONENT`` is a block of its own, updated
directly. Cost O(G L k) for ``L`` prefixes (:func:`outside_prefixes`).

Bounds (:func:`outside_bounds`). Given the first ``i`` draws are in ``H``, the next one is
in ``H`` with probability ``(s - r) / (1 - r)`` where ``r`` is the mass already drawn,
``0 <= r <= M_i(H)``, the mass of the ``i`` largest ``q`` INSIDE ``H`` (all drawn tokens are
in ``H``). The ratio decreases in ``r``, so
``prod_{i<k} (s - M_i(H))_+ / (1 - M_i(H)) <= T <= s^k``, i.e.
``1 - (1 - c)^k <= R <= 1 - prod_{i<k} (1 - c / (1 - M_i(H)))_+``; ``T = 0`` when
``|H| < k``. (Using the largest ``q`` of the whole vocabulary instead, a big token outside
``H`` made the upper bound 1 on every prefix.) ``M_i(H_m)`` for all prefixes in O(V) per
``i``: with ``L_i[m]`` the ``i``-th largest of ``q_1..q_m`` (0 if ``m < i``),

    L_i[m] = max_{j<m} min(q_j, L_{i-1}[j]),   L_0 = +inf                               (3)

(a ``maximum.accumulate``). Proof: for ``j < m``, ``q_j`` and the ``i-1`` tokens before
``j`` that are ``>= L_{i-1}[j]`` are ``i`` tokens of ``H_m`` all ``>= min(q_j, L_{i-1}[j])``,
so the right side is ``<= L_i[m]``; and at the position ``j`` of the last of the ``i``
largest tokens of ``H_m`` to appear, the other ``i-1`` come before it, so
``L_{i-1}[j] >= L_i[m]`` and ``q_j >= L_i[m]``: equality. QED.

Neighbours (:func:`neighbour_bounds`; lemma and proof written for this module). For a
token set ``G``, ``c_G = 1 - q(G) > 0`` and ``x`` outside ``G``:

    T(G + x) - T(G) <= (q_x / c_G) R(G),  i.e.  R(G + x) / c_{G+x} >= R(G) / c_G.      (4)

Proof: ``T(G + x) - T(G) = P(x is drawn and all draws are in G + x)``. On that event ``x``
rings at some ``t`` before any clock outside ``G + x`` (rate ``c_G - q_x``) and while fewer
than ``k`` clocks of ``G`` have rung. Dropping what happens after ``t``,
``T(G + x) - T(G) <= int q_x e^{-q_x t} e^{-(c_G - q_x) t} P(N_G(t) < k) dt
= (q_x / c_G) int c_G e^{-c_G t} P(N_G(t) < k) dt = (q_x / c_G) R(G)`` by (1). Then
``R(G + x) = R(G) - (T(G + x) - T(G)) >= R(G) (c_G - q_x) / c_G``. QED. So along the
prefixes ``R`` is nonincreasing and ``R / c`` nondecreasing, and with ``a <= m <= b``
evaluated, ``max(R_b, c_m R_a / c_a) <= R_m <= min(R_a, c_m R_b / c_b)``. Near one-hot and
low-temperature drafts have ``R / c`` (the mean of ``min(k-th arrival in H, first arrival
outside)``) nearly constant over long ranges of prefixes, so a few evaluated prefixes pin
``R`` on all the others. The bounds are formed from computed values (relative error
~1e-15) widened by the rounding of the product only: a prefix beaten by them is beaten by
the computed values, so the optimum of the scan is as accurate as the evaluations.

Rounding: only ``e^{-q t}``, ``expm1``, sums of positive terms and Newton's bounded
alternation, so the accuracy does not depend on how many orders of magnitude ``q`` spans;
the exponent of a product is a sum of positive ``q t`` (relative error ``~eps``). The
quadrature error is estimated a posteriori from the same sum on every other node (step ``2h``):
``d = max |R_h - R_2h|``; with geometric convergence ``err(h) ~ err(2h)^2`` relative to the
integral (``<= 1``), reported as ``quadrature_error_estimate = d^2`` (an estimate, not a proven
bound).
"""
from __future__ import annotations

import math
from functools import cached_property, lru_cache

import numpy as np
from scipy.special import gammaincc

#: Trapezoid step in ``log t`` for ``k <= 4``; :func:`quadrature_step` shrinks it for larger k.
_BASE_STEP = 0.2
#: Integrand mass left outside the integration range, relative to ``c`` (per prefix, each end).
_TAIL = 1e-18
#: A state with ``t * P(N < k) <= _TINY`` at node ``t`` is set to 0 (relative effect on ``R``
#: at most ``_TINY`` times the length of the range in ``log t``).
_TINY = 1e-20
#: ``ln 2``: tokens with ``q t`` above it ring with probability above 1/2 ("big").
_LN2 = math.log(2.0)
#: Relative truncation error allowed in each power sum of the small tokens (moment series).
_SERIES_TOLERANCE = 2.0**-60
#: Longest series considered for the moments (the tolerance needs 88 terms at k = 32).
_SERIES_TERMS = 200
#: Most prefixes x nodes x max(k, moments) floats in one work array of :func:`outside_at`
#: (32 MB; prefixes beyond it are evaluated in further groups).
_STATE_BUDGET = 2**22
#: Largest time node (``t`` stays finite in float64 whatever ``q`` and ``c``; the range is capped
#: here only for draft probabilities below about 1e-290, reported by ``truncation_error_bound``).
_MAX_TIME = 1e300
#: Largest ``(s_m - s_{m0}) t`` inside one block of the range recursion (``e^{2*200}`` fits).
_BLOCK_EXPONENT = 200.0
#: Most tokens in one block of the range recursion (speed only: keeps ``[G, block]`` in cache).
_CHUNK = 1024
#: Relative margin on the bounds an evaluated ``R`` puts on its neighbours: the rounding of
#: ``c_m R_a / c_a`` (the evaluation error itself is accounted for in the optimum's
#: accuracy, module docstring "Neighbours").
NEIGHBOUR_MARGIN = 4 * np.finfo(np.float64).eps


def quadrature_step(k: int) -> float:
    """Trapezoid step in ``log t`` for ``k`` draws: ``0.2 min(1, (4/k)^0.3)`` (module
    docstring, "Step"): 0.2 up to k = 4, 0.16 at k = 8, 0.107 at k = 32."""
    return _BASE_STEP * min(1.0, (4.0 / k) ** 0.3)


def all_in_bounds(q_sorted, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Rigorous bounds ``lo <= T(H_m) <= hi`` for every prefix ``m = 0..n`` (O(V k)):
    ``1 -`` the bounds of :func:`outside_bounds` (which see, for the derivation).

    Args:
        q_sorted: ``[n]`` positive draft probabilities in prefix order, summing to 1.
    """
    r_lo, r_hi = outside_bounds(q_sorted, k)
    return 1.0 - r_hi, 1.0 - r_lo


def outside_bounds(q_sorted, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Rigorous bounds ``lo <= R(H_m) = 1 - T(H_m) <= hi`` for every prefix ``m = 0..n``:
    ``1 - (1 - c)^k <= R <= 1 - prod_{i<k} (1 - c / (1 - M_i(H)))_+`` (module docstring,
    "Bounds"), ``M_i(H)`` = mass of the ``i`` largest ``q`` inside ``H``.

    Rounding: ``c``, ``s = q(H)`` and ``1 - M_i(all)`` are sums of positive terms (``c`` and
    ``1 - M_i`` from the end, by :func:`accurate_cumsum`), so each factor is within ``2 eps``
    of exact and is lowered by ``4 eps``; the in-prefix ``1 - M_i(H) = c + (s - M_i(H))`` is
    used only where the difference exceeds its rounding bound ``(k + 4) eps s``; ``lo`` is formed from the
    smaller of ``c`` and ``s`` (``-expm1(k log1p(-c))`` or ``1 - s^k``) with a relative
    margin of ``16 eps``. So the bounds stay rigorous in floats (with
    q = [.., 0.99, 1e-12, ..] the plain ``1 - M_i`` lost 4 digits and broke ``hi``).

    Args:
        q_sorted: ``[n]`` positive draft probabilities in prefix order, summing to 1.
    """
    r_lo, r_hi, _ = _prefix_bounds(DraftOrder(q_sorted), k)
    return r_lo, r_hi


def outside_masses(q_sorted) -> np.ndarray:
    """``[n+1]``: ``c_m = sum_{i > m} q_i``, the mass outside the prefix ``H_m``, summed from
    the end (no cancellation when ``c_m`` is tiny) by :func:`accurate_cumsum`."""
    q_sorted = np.asarray(q_sorted, dtype=np.float64)
    return np.concatenate([accurate_cumsum(q_sorted[::-1])[::-1], [0.0]])


def accurate_cumsum(values) -> np.ndarray:
    """``[n]`` prefix sums of ``values [n]``, each within about one rounding of exact.

    A plain float64 ``cumsum`` of ``n`` terms is off by up to ``(n - 1) eps`` relative (when
    the terms are alike the roundings add up),
    which limited ``R`` and the cut on flat distributions. Here the values are laid out as
    ``[rows, width]`` (``width ~ sqrt(n)``) and summed along the rows with Knuth's error-free
    TwoSum, vectorised across the rows (``s = a + b``, ``b' = s - a``,
    ``err = (a - (s - b')) + (b - b')`` is exactly ``a + b - s``), the errors carried in a
    second float; the row totals are summed the same way (recursively). The carried error
    is itself rounded, so the result is within ``eps (1 + n eps)`` of exact, relative to the
    sum of the absolute values.
    """
    values = np.asarray(values, dtype=np.float64)
    high, low = _two_sum_prefix(values)
    return high + low


def _two_sum_prefix(values) -> tuple[np.ndarray, np.ndarray]:
    """``([n], [n])``: prefix sums as an unevaluated sum ``high + low`` (TwoSum along rows)."""
    size = values.size
    if size <= 2:
        return np.cumsum(values), np.zeros(size)
    width = math.isqrt(size - 1) + 1
    rows = -(-size // width)
    table = np.zeros(rows * width)
    table[:size] = values
    table = table.reshape(rows, width)
    high, low = np.empty((rows, width)), np.empty((rows, width))
    total, carried = np.zeros(rows), np.zeros(rows)
    for j in range(width):
        value = table[:, j]
        summed = total + value
        back = summed - total
        carried += (total - (summed - back)) + (value - back)
        total = summed
        high[:, j], low[:, j] = total, carried
    offset_high, offset_low = _two_sum_prefix(total + carried)  # inclusive prefix of the row totals
    high[1:] += offset_high[:-1, None]  # one more rounding each
    low[1:] += offset_low[:-1, None]
    return high.ravel()[:size], low.ravel()[:size]


class DraftOrder:
    """What every prefix ``H_m`` of one order needs whatever ``k``, computed once and shared by
    the :class:`DraftPrefixes` of several ``k``: the masses outside and inside the prefixes
    (``c_m``, ``s_m``), on first use the tokens by decreasing ``q``, and the order statistics
    ``L_i`` of "Bounds" (module docstring), each computed once and kept. Its arrays are
    read-only: they are shared.

    Args:
        q_sorted: ``[n]`` positive draft probabilities in prefix order, summing to 1.
    """

    def __init__(self, q_sorted):
        self.q = _frozen(np.asarray(q_sorted, dtype=np.float64))  # [n]
        self.outside = _frozen(outside_masses(self.q))  # [n+1] c_m
        self.inside = _frozen(np.concatenate([[0.0], accurate_cumsum(self.q)]))  # [n+1] s_m
        self._largest = [_frozen(np.full(self.q.size + 1, np.inf))]  # L_0, L_1, ...

    @cached_property
    def descending(self) -> np.ndarray:  # [n]
        """Token positions by decreasing ``q``."""
        return _frozen(np.argsort(-self.q))

    @cached_property
    def log_q(self) -> np.ndarray:  # [n]
        """``log q``: where each token turns big on a grid of nodes (:func:`_first_big_node`)."""
        return _frozen(np.log(self.q))

    def largest(self, i: int) -> np.ndarray:  # [n+1]
        """``L_i``: entry ``m`` is the ``i``-th largest ``q`` in ``H_m`` (0 if ``m < i``; ``L_0 = inf``)."""
        while len(self._largest) <= i:
            self._largest.append(_frozen(_next_largest(self.q, self._largest[-1])))
        return self._largest[i]


class DraftPrefixes:
    """What every prefix ``H_m`` of one order needs for ``k`` draws, computed once in O(V k):
    the outside masses ``c_m``, the bounds of :func:`outside_bounds`, the k-th largest ``q``
    in each prefix (it sets the prefix's time range) and the tokens by decreasing ``q``.

    Args:
        q_sorted: ``[n]`` positive draft probabilities in prefix order, summing to 1, or
            their :class:`DraftOrder` (the part that does not depend on ``k``, shared).
        k: number of draws.
    """

    def __init__(self, q_sorted, k: int, bounds: tuple | None = None):
        self.order = q_sorted if isinstance(q_sorted, DraftOrder) else DraftOrder(q_sorted)
        self.q = self.order.q  # [n]
        self.k = k
        self.outside = self.order.outside  # [n+1]
        self.lower, self.upper, self.kth_largest = bounds or _prefix_bounds(self.order, k)  # [n+1] each

    @classmethod
    def together(cls, order: DraftOrder, ks: list[int]) -> list[DraftPrefixes]:
        """One :class:`DraftPrefixes` per ``k`` of ``ks``, their bounds from one product
        (:func:`_prefix_bounds_ks`: the margins of the largest ``k``, rigorous for all)."""
        return [cls(order, k, bounds) for k, bounds in zip(ks, _prefix_bounds_ks(order, ks))]

    @property
    def descending(self) -> np.ndarray:  # [n]
        """Token positions by decreasing ``q``."""
        return self.order.descending

    @property
    def log_q(self) -> np.ndarray:  # [n]
        return self.order.log_q

    @property
    def log_first_time(self) -> float:
        """``log t_lo``, the first node of every prefix's range (module docstring, "Range")."""
        k = self.k
        return math.log((_TAIL * math.factorial(k + 1)) ** (1.0 / (k + 1)))

    def time_nodes(self, prefixes, step: float, log_start: float | None = None) -> tuple[float, np.ndarray, float]:
        """``(log t_lo, [P] node counts, truncation bound)`` for the prefixes ``m`` (each in
        ``k..n-1``): prefix ``m`` uses the nodes ``log t_lo + g step``, ``g < count``, which
        cover its range ``[t_lo, t_hi(m)]`` (module docstring, "Range"); the bound is the
        largest tail mass left out, relative to ``c`` (``_TAIL`` unless a range hit
        ``_MAX_TIME``). ``log_start`` (at most :attr:`log_first_time`) starts the nodes
        earlier: a grid shared with larger ``k``, whose ranges start later."""
        k = self.k
        kth = self.kth_largest[prefixes]
        c = self.outside[prefixes]
        t_lo = (_TAIL * math.factorial(k + 1)) ** (1.0 / (k + 1))
        with np.errstate(divide="ignore", over="ignore"):
            t_own = np.maximum(np.log(k / (kth * _TAIL)), 1.0) / kth  # sum_i e^{-q_(i) t} part
            t_outside = np.log(1.0 / (_TAIL * c)) / c  # e^{-c t} part
        t_hi = np.minimum(np.minimum(np.maximum(t_own, _poisson_time(k)), t_outside), _MAX_TIME)
        t_hi = np.maximum(t_hi, t_lo)
        truncation = _TAIL
        capped = t_hi >= _MAX_TIME
        if capped.any():
            with np.errstate(over="ignore", under="ignore"):
                own = k * np.exp(-kth[capped] * _MAX_TIME) / kth[capped] + k * gammaincc(k, _MAX_TIME)
                outside = np.exp(-c[capped] * _MAX_TIME) / c[capped]
            truncation = max(truncation, float(np.minimum(own, outside).max()))
        log_start = math.log(t_lo) if log_start is None else log_start
        assert log_start <= math.log(t_lo), "a shared grid starts no later than this k's range"
        counts = np.floor((np.log(t_hi) - log_start) / step + 1e-9).astype(np.int64) + 1
        return log_start, counts, truncation


def all_in_prefixes(q_sorted, k: int, prefixes, step: float | None = None) -> tuple[np.ndarray, dict]:
    """``T(H_m) = Q(all k distinct draws in {x_1..x_m})`` for each ``m`` in ``prefixes``:
    ``1 -`` :func:`outside_prefixes` (absolute accuracy ~1e-15; use that function when
    ``1 - T`` is what matters, it keeps relative accuracy)."""
    outside, info = outside_prefixes(q_sorted, k, prefixes, step)
    return 1.0 - outside, info


def outside_prefixes(q_sorted, k: int, prefixes, step: float | None = None,
                     draft: DraftPrefixes | None = None) -> tuple[np.ndarray, dict]:
    """``R(H_m) = 1 - T(H_m)``, the probability that some of the ``k`` draws falls outside
    the prefix ``H_m``, for each ``m`` in ``prefixes``, by (2) of the module docstring: the
    state at the smallest requested prefix from the moments, then the range recursion up to
    the largest one.

    Cost: O(V N) for the moments (``N <= 88`` terms) plus O(G L k) along the range of
    requested prefixes (``L`` tokens), ``G`` = number of time nodes.

    Args:
        q_sorted: ``[n]`` positive draft probabilities in prefix order, summing to 1
            (``n >= k``).
        prefixes: ``[c]`` prefix lengths in ``0..n``.
        step: trapezoid step in ``log t`` (default :func:`quadrature_step`).
        draft: the :class:`DraftPrefixes` of ``q_sorted`` when already built.

    Returns:
        ``([c] values, {"coarse_step_difference", "quadrature_error_estimate",
        "truncation_error_bound", "nodes"})``.
    """
    draft = draft if draft is not None else DraftPrefixes(q_sorted, k)
    prefixes = np.asarray(prefixes, dtype=np.int64)
    out, todo_mask = _trivial_values(prefixes, k, draft.q.size)
    if not todo_mask.any():
        return out, _empty_info()
    todo = prefixes[todo_mask]
    first, last = int(todo.min()), int(todo.max())
    step = quadrature_step(k) if step is None else step
    log_t_lo, counts, truncation = draft.time_nodes(np.arange(first, last + 1), step)
    t = np.exp(log_t_lo + step * np.arange(counts.max()))  # [G]
    head = _head_states(draft.q, k, np.array([first]), t, np.array([t.size]), draft.descending, draft.log_q)[0]  # [G, k]
    below = _below_k(draft.q, k, first, last, t, head)[:, todo - first]  # [G, c] P(N_{H_m}(t) < k)
    values, difference = _integrate(t, step, draft.outside[todo], below.T, k, np.full(todo.size, t.size))
    out[todo_mask] = values
    return out, _info(difference, truncation, t.size)


def outside_at(q_sorted, k: int, points, step: float | None = None,
               draft: DraftPrefixes | None = None) -> tuple[np.ndarray, dict]:
    """``R(H_m)`` at scattered prefixes ``m`` in ``points``, each from its own state (the
    moments and the big tokens, module docstring, "State at a prefix") on its own range of
    nodes: O(V N) for the moments plus O(P G (N k + k^2)), nothing proportional to the gaps
    between the points. Same returns as :func:`outside_prefixes`."""
    draft = draft if draft is not None else DraftPrefixes(q_sorted, k)
    values, infos, _ = outside_at_ks([draft], points, step)
    return values[0], infos[0]


def outside_at_ks(drafts: list[DraftPrefixes], points, step: float | None = None,
                  ranges=()) -> tuple[np.ndarray, list[dict], list[tuple[np.ndarray, dict]]]:
    """``([K, P] values, [K] infos, ranges' values)``: :func:`outside_at` for every ``k`` of
    ``drafts`` (the :class:`DraftPrefixes` of one order, one per ``k``) from one state per
    point, and for each ``(i, span)`` of ``ranges`` the ``R`` of ``drafts[i]`` on the contiguous
    prefixes ``span`` (each in ``k..n-1``) as by :func:`outside_prefixes`, its first state
    taken from the same computation.

    The head ``P(N_H(t) = j)``, ``j < k_max``, holds every smaller ``k``'s (``P(N < k)`` is its
    partial sum), so the moments and the big tokens, the costly part, are computed once for
    every ``k`` and range. The grid is the one of the largest ``k`` (the finest step, default
    :func:`quadrature_step` of ``k_max``) started at the smallest ``k``'s first node; each ``k``
    integrates over its own range of it. The state's cut-offs for ``k_max`` (a state set to 0
    when ``t P(N < k_max) <= _TINY``) hold for every smaller ``k``, as ``P(N < k) <= P(N < k_max)``.
    With one ``k`` this is :func:`outside_at` and :func:`outside_prefixes`, operation for operation."""
    ks = [draft.k for draft in drafts]
    k_max, n = max(ks), drafts[0].q.size
    points = np.asarray(points, dtype=np.int64)
    out, masks = zip(*(_trivial_values(points, k, n) for k in ks))
    out, infos = np.array(out), [_empty_info() for _ in ks]
    step = quadrature_step(k_max) if step is None else step
    log_start = min(draft.log_first_time for draft in drafts)
    firsts = np.array([span[0] for _, span in ranges], dtype=np.int64)
    unique = np.unique(np.concatenate([points[np.logical_or.reduce(masks)], firsts]))
    if unique.size == 0:
        return out, infos, []
    valid = [unique >= k for k in ks]  # unique < n already
    probed = np.isin(unique, points)  # not only the first prefix of a range
    counts, truncations = np.zeros((len(ks), unique.size), dtype=np.int64), []
    for i, draft in enumerate(drafts):
        _, counts[i, valid[i]], truncation = draft.time_nodes(unique[valid[i]], step, log_start)
        truncations.append(truncation)
    nodes_of = counts.max(axis=0)  # [P] the nodes of a point: the longest range of its k
    range_nodes = []
    for i, span in ranges:
        range_nodes.append(drafts[i].time_nodes(span, step, log_start)[1:])  # (counts, truncation)
        where = np.searchsorted(unique, span[0])
        nodes_of[where] = max(nodes_of[where], int(range_nodes[-1][0].max()))
    values, differences = np.zeros((len(ks), unique.size)), np.zeros(len(ks))
    group = max(1, min(_STATE_BUDGET // (int(nodes_of.max()) * max(k_max, _series(k_max).shape[0])),
                       2**16 // (int(nodes_of.max()) + 1)))  # memory, uint16 bins
    top = drafts[int(np.argmax(ks))]
    heads = {}  # first prefix of a range -> its state [G, k_max]
    for start in range(0, unique.size, group):
        part = slice(start, start + group)
        t = np.exp(log_start + step * np.arange(nodes_of[part].max()))  # [G]
        states = _head_states(top.q, k_max, unique[part], t, nodes_of[part], top.descending, top.log_q)  # [P, G, k_max]
        for row in np.flatnonzero(np.isin(unique[part], firsts)):
            heads[int(unique[start + row])] = states[row].copy()  # not a view holding the group's states
        for i, (draft, k) in enumerate(zip(drafts, ks)):
            rows = np.flatnonzero(valid[i][part] & probed[part])
            if rows.size == 0:
                continue
            below = states[rows, :, :k].sum(axis=2)  # [P', G] P(N < k)
            chosen = unique[part][rows]
            values[i, start + rows], difference = _integrate(t, step, draft.outside[chosen], below, k, counts[i, start + rows])
            differences[i] = max(differences[i], difference)
    for i, k in enumerate(ks):
        if masks[i].any():
            out[i, masks[i]] = values[i, np.searchsorted(unique, points[masks[i]])]
            infos[i] = _info(float(differences[i]), truncations[i], int(counts[i].max()))
    spans = []
    for (i, span), (span_counts, truncation) in zip(ranges, range_nodes):
        draft, k, nodes = drafts[i], drafts[i].k, int(span_counts.max())
        t = np.exp(log_start + step * np.arange(nodes))  # [G]
        below = _below_k(draft.q, k, int(span[0]), int(span[-1]), t, heads[int(span[0])][:nodes, :k])  # [G, L]
        value, difference = _integrate(t, step, draft.outside[span], below.T, k, np.full(span.size, nodes))
        spans.append((value, _info(difference, truncation, nodes)))
    return out, infos, spans


def neighbour_bounds(outside, known, lower, upper, margin: float = NEIGHBOUR_MARGIN) -> tuple[np.ndarray, np.ndarray]:
    """Bounds on ``R(H_m)`` for every prefix from its values at the ``known`` prefixes
    (module docstring, "Neighbours"): ``R`` is nonincreasing in ``m`` and ``R / c`` is
    nondecreasing, so with ``a <= m <= b`` the nearest known prefixes,

        max(R_b, c_m R_a / c_a) <= R_m <= min(R_a, c_m R_b / c_b),

    each known value widened by the relative ``margin``; intersected with ``[lower, upper]``.

    Args:
        outside: ``[n+1]`` the masses ``c_m`` outside the prefixes.
        known: ``[n+1]`` bool, the prefixes whose ``R`` is known (``0`` and ``n`` among them);
            there ``lower == upper == R``.
        lower, upper: ``[n+1]`` current bounds.

    The nearest known prefixes' values are spread over the prefixes between them with
    ``np.repeat`` (fewer passes over the vocabulary than gathering them).
    """
    points = np.flatnonzero(known)  # [K] increasing
    assert known[0] and known[-1], "the first and the last prefix are known"
    after = np.diff(points, append=outside.size)  # prefixes whose nearest known at or before is points[j]
    before = np.diff(points, prepend=-1)  # prefixes whose nearest known at or after is points[j]
    value, rate_out = upper[points], outside[points]
    with np.errstate(divide="ignore", invalid="ignore"):
        low = np.repeat(value / rate_out, after)  # R_a / c_a
        low *= outside
        np.maximum(np.repeat(value, before), low, out=low)  # max(R_b, c_m R_a / c_a)
        low *= 1.0 - margin
        high = np.repeat(np.where(rate_out > 0, value / rate_out, np.inf), before)  # R_b / c_b
        high *= outside
        np.minimum(np.repeat(value, after), high, out=high)  # min(R_a, c_m R_b / c_b)
        high *= 1.0 + margin
    np.maximum(lower, low, out=low)
    np.minimum(upper, high, out=high)
    low[points], high[points] = lower[points], upper[points]
    np.minimum(low, high, out=low)
    return low, high


def _trivial_values(prefixes, k: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``R = 1`` for ``m < k`` (fewer than k tokens), ``0`` for ``m >= n``; mask of the others."""
    return np.where(prefixes >= n, 0.0, 1.0), (prefixes >= k) & (prefixes < n)


def _empty_info() -> dict:
    return {"coarse_step_difference": 0.0, "quadrature_error_estimate": 0.0, "truncation_error_bound": 0.0, "nodes": 0}


def _info(difference: float, truncation: float, nodes: int) -> dict:
    return {
        "coarse_step_difference": difference,
        "quadrature_error_estimate": difference**2,
        "truncation_error_bound": 2 * truncation,
        "nodes": nodes,
    }


def _integrate(t, step: float, c, below, k: int, counts) -> tuple[np.ndarray, float]:
    """``([P] R, coarse-step difference)`` by (2): the closed form plus the trapezoid sum of
    ``c e^{-ct} [below - P(Pois(t) < k)]`` over the first ``counts[p]`` nodes ``t [G]``
    (``below [P, G]`` = ``P(N_H(t) < k)``); the same sum on every other node (step ``2h``)
    gives the difference."""
    used = np.arange(t.size) < counts[:, None]  # [P, G]
    weight = step * t * c[:, None] * np.exp(-c[:, None] * t)
    integrand = np.where(used, weight * (below - gammaincc(k, t)), 0.0)
    fine = integrand.sum(axis=1)
    coarse = 2.0 * integrand[:, ::2].sum(axis=1)
    return -np.expm1(-k * np.log1p(c)) + fine, float(np.abs(fine - coarse).max())


def _prefix_bounds(order: DraftOrder, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``([n+1] lo, [n+1] hi, [n+1] k-th largest q in H_m)`` (:func:`outside_bounds`)."""
    return _prefix_bounds_ks(order, [k])[0]


def _prefix_bounds_ks(order: DraftOrder, ks: list[int]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """:func:`_prefix_bounds` of every ``k`` in ``ks`` from one product: ``hi`` of ``k`` is the
    product's first ``k`` factors (``i < k``); the factors' rounding margins are those of the
    largest ``k`` (wider than a smaller ``k`` needs, so every bound stays rigorous)."""
    q = order.q
    n = q.size
    eps = np.finfo(np.float64).eps
    c, s = order.outside, order.inside
    k_top = max(ks)
    rest_all = _mass_without_largest(q, min(k_top, n)) * (1.0 - (math.log2(n + 1) + k_top + 2) * eps)  # lowered by its rounding
    inside_low = s - (k_top + 4) * eps * s  # s minus the rounding bound of s - M_i(H), i < k
    top = np.zeros(n + 1)  # M_i(H_m)
    stay = np.ones(n + 1)  # prod_i (1 - c / (1 - M_i(H)))_+
    rest, factor = np.empty(n + 1), np.empty(n + 1)
    highs = {}  # factors multiplied -> r_hi
    wanted = {min(k, n) for k in ks}
    if 0 in wanted:
        highs[0] = 1.0 - stay
    for i in range(min(k_top, n)):
        if i:
            top += order.largest(i)  # L_i[m] = i-th largest q in H_m (0 if m < i)
            np.subtract(inside_low, top, out=rest)
            np.maximum(rest, 0.0, out=rest)
            rest += c
            np.maximum(rest, rest_all[i], out=rest)
        else:
            rest.fill(rest_all[0])
        np.subtract(rest, c, out=factor)
        factor /= rest
        factor -= 4 * eps
        np.clip(factor, 0.0, 1.0, out=factor)
        stay *= factor
        if i + 1 in wanted:
            highs[i + 1] = 1.0 - stay
    out = []
    small_outside = c < 0.5
    with np.errstate(divide="ignore"):
        log_inside = np.log1p(-np.minimum(c, 0.5))  # log(1 - c) where c < 1/2
    inside_half = np.minimum(s, 0.5)
    for k in ks:
        r_lo = np.where(small_outside, -np.expm1(k * log_inside) * (1.0 - 16 * eps), 1.0 - inside_half ** k * (1.0 + 16 * eps))
        r_hi = highs[min(k, n)].copy()
        kth = order.largest(k) if n >= k else np.zeros(n + 1)
        r_lo[:k] = r_hi[:k] = 1.0  # fewer than k tokens
        r_lo[-1] = r_hi[-1] = 0.0 if n >= k else 1.0
        out.append((np.minimum(r_lo, r_hi), r_hi, kth))
    return out


def _mass_without_largest(q, count: int) -> np.ndarray:
    """``[count]``: entry ``i`` is the mass of all but the ``i`` largest ``q`` (``1 - M_i``),
    summed from the smallest (pairwise for the bulk: rounding below ``(log2 n + count) eps``)."""
    if count == 0:
        return np.zeros(0)
    split = np.partition(q, q.size - count)
    kept = np.concatenate([[0.0], np.cumsum(np.sort(split[q.size - count:]))])  # the largest, ascending
    return (float(np.sum(split[: q.size - count])) + kept)[count:0:-1]


def _next_largest(q, largest) -> np.ndarray:
    """``L_i`` (a new ``[n+1]`` array, entry ``m`` for the prefix ``q[:m]``) from ``L_{i-1}``:
    ``L_i[m] = max_{j < m} min(q_j, L_{i-1}[j])`` (module docstring, "Bounds")."""
    out = np.empty(largest.size)
    np.maximum.accumulate(np.minimum(q, largest[:-1]), out=out[1:])
    out[0] = 0.0
    return out


def _frozen(values: np.ndarray) -> np.ndarray:
    """``values``, made read-only (an array shared between computations)."""
    values.flags.writeable = False
    return values


@lru_cache(maxsize=64)
def _poisson_time(k: int) -> float:
    """A time ``T`` with ``k Q(k, T) <= _TAIL`` (Poisson surrogate's tail)."""
    t = float(k + 10)
    while k * gammaincc(k, t) > _TAIL:
        t *= 1.25
    return t


@lru_cache(maxsize=64)
def _series(k: int) -> np.ndarray:
    """``[N+1, k]``: ``A[n, r]`` = coefficient of ``z^n`` in ``(e^z - 1)^r``, ``r < k``, with
    ``N`` the least order whose tail at ``z = ln 2`` is below ``_SERIES_TOLERANCE`` of the
    sum for every ``r`` (module docstring, "Moments")."""
    n = np.arange(_SERIES_TERMS)
    base = np.exp(-np.array([math.lgamma(v + 1.0) for v in n]))
    base[0] = 0.0  # e^z - 1
    rows = [np.eye(1, _SERIES_TERMS).ravel(), base]
    for _ in range(2, k):
        rows.append(np.convolve(rows[-1], base)[:_SERIES_TERMS])
    table = np.stack(rows[:k], axis=1)  # [terms, k]
    terms = table * (_LN2 * (1.0 + 1e-9)) ** n[:, None]
    tail = np.cumsum(terms[::-1], axis=0)[::-1]  # tail[N] = sum_{n >= N}
    enough = tail <= _SERIES_TOLERANCE * terms.sum(axis=0)
    order = max(int(np.argmax(enough.all(axis=1))), 2)  # first N with every tail from N small
    return table[:order]


@lru_cache(maxsize=256)
def _vanishing_count(k: int, log_time: float) -> int:
    """A count ``n`` (searched in steps of ``n / 8``) with
    ``P(Bin(n, 0.49) < k) e^{log_time} <= _TINY``: after that many big tokens (each rings
    with probability >= 1/2 up to rounding) ``t P(N < k)`` is negligible at every node
    ``t <= e^{log_time}``."""
    n = k
    log_p, log_q = math.log(0.49), math.log(0.51)
    while True:
        terms = [math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n - j + 1) + j * log_p + (n - j) * log_q
                 for j in range(k)]
        peak = max(terms)
        if peak + math.log(sum(math.exp(v - peak) for v in terms)) + log_time <= math.log(_TINY):
            return n
        n += max(1, n // 8)


def _head_states(q, k: int, points, t, counts, descending=None, log_q=None) -> np.ndarray:
    """``[P, G, k]``: ``P(N_{H_m}(t_g) = j)``, ``j < k``, for the prefixes ``H_m = q[:m]``,
    ``m`` in ``points`` (increasing, distinct), at the nodes ``g < counts[p]`` of the
    geometric grid ``t [G]`` (zeros at the others): the small tokens through their moments,
    the big ones one at a time (module docstring, "State at a prefix").

    Args:
        q: ``[n]`` positive probabilities (any order; the prefixes are taken in it).
        descending: ``[n]`` positions of ``q`` by decreasing value (computed when ``None``).
        log_q: ``[n]`` ``log q`` (computed when ``None``).
    """
    points = np.asarray(points, dtype=np.int64)
    size, nodes = points.size, t.size
    states = np.zeros((size, nodes, k))
    used = np.arange(nodes) < np.asarray(counts)[:, None]  # [P, G]
    states[used, 0] = 1.0
    last = int(points[-1])
    if last == 0:
        return states
    head = q[:last]
    log_head = np.log(head) if log_q is None else log_q[:last]
    big_from = _first_big_node(head, t, log_head)  # [last] token x is small at the nodes g < big_from[x]
    segment = np.repeat(np.arange(size), np.diff(np.concatenate([[0], points])))  # H_m holds x iff p >= segment[x]
    key = big_from * size + segment  # bin (node, segment)
    per_bin = np.bincount(key, minlength=(nodes + 1) * size).reshape(nodes + 1, size).cumsum(axis=1)
    big_count = per_bin[:nodes].cumsum(axis=0).T  # [P, G] tokens of H_m with q t_g > ln 2
    cap = _vanishing_count(k, math.ceil(10 * math.log(t[-1])) / 10)
    live = used & (big_count < cap)  # else P(N < k) <= P(Bin(cap, 1/2) < k): negligible
    descending = np.argsort(-q) if descending is None else descending
    largest = _largest_per_prefix(q, descending, points, np.maximum(np.where(live, big_count, 0).max(axis=1), k))
    ring = np.exp(-largest[:, None, :k] * t[:, None]).sum(axis=2) * t  # [P, G] >= t P(N < k) (one of k largest silent)
    live &= (ring > _TINY) | (points[:, None] < k)
    states[used & ~live, 0] = 0.0
    rows, cols = np.nonzero(live)
    if rows.size == 0:
        return states
    small = _small_token_states(head, big_from, key, size, t, k, rows, cols)  # [k, A]
    big = _big_token_states(largest, rows, cols, big_count[rows, cols], t, k)  # [k, A]
    states[rows, cols] = _convolve_head(big, small).T
    return states


def _first_big_node(q, t, log_q) -> np.ndarray:
    """``[n]``: for each token the number of nodes of the geometric grid ``t`` where
    ``q t <= ln 2`` (up to rounding, which only moves a token between the two groups at a
    node where ``q t`` is within 1e-12 of ``ln 2``; the moment series allows it);
    ``log_q = log q``."""
    if t.size == 1:
        return np.where(q * t[0] <= _LN2, 1, 0)
    log_step = (math.log(t[-1]) - math.log(t[0])) / (t.size - 1)
    position = np.floor((math.log(_LN2) - log_q - math.log(t[0])) / log_step) + 1.0
    return np.clip(position, 0, t.size).astype(np.int64)


def _small_token_states(head, big_from, key, size: int, t, k: int, rows, cols) -> np.ndarray:
    """``[k, A]``: ``P(N_S(t_g) = j)``, ``j < k``, over the small tokens ``S`` of prefix
    ``rows[a]`` at node ``g = cols[a]`` (``g < big_from[x]``) as ``e^{-q(S) t} e_j(u)``,
    ``u = e^{qt} - 1``, with the power sums ``sum u^r`` from the moments ``sum (q t)^n``
    (module docstring, "Moments") and Newton's identities."""
    nodes = t.size
    series = _series(k)  # [N+1, k]
    terms = series.shape[0] - 1
    small = _small_by_bin(big_from, key, nodes)
    keys = key[small]
    scaled = head[small] * t[big_from[small] - 1]  # q t at the last node where x is small (<= ln 2)
    starts = np.flatnonzero(np.diff(keys, prepend=-1))
    present = keys[starts]
    bins = np.zeros((terms, (nodes + 1) * size))
    power = scaled.copy()
    for n in range(terms):  # bins[n] = sum over the bin of (q t_{b-1})^(n+1)
        bins[n, present] = np.add.reduceat(power, starts)
        power *= scaled
    bins = bins.reshape(terms, nodes + 1, size).cumsum(axis=2)  # [N, G+1, P] per prefix
    decay = (t[:-1] / t[1:])[:, None] ** np.arange(1, terms + 1)  # [G-1, N]
    moments = np.empty((nodes, terms, size))  # sum over the small tokens of (q t_g)^n
    running = bins[:, nodes]
    moments[nodes - 1] = running
    for g in range(nodes - 2, -1, -1):
        running = bins[:, g + 1] + decay[g][:, None] * running
        moments[g] = running
    live = moments[cols, :, rows]  # [A, N]
    power_sums = (live @ series[1:, 1:]).T  # [k-1, A]
    return np.exp(-live[:, 0]) * _newton(power_sums, k)


def _small_by_bin(big_from, key, nodes: int) -> np.ndarray:
    """The tokens small at some node (``big_from > 0``) in increasing bin ``key``, stably (the
    pairwise sums of :func:`_small_token_states` depend on the order): the stable argsort of
    their keys. The tokens small at every node (``big_from = nodes``) have the largest keys,
    ``nodes * size + segment``, which grow with the position, so they come last in the order they
    are in; only the few others are sorted."""
    always = big_from == nodes
    some = np.flatnonzero((big_from > 0) & ~always)
    return np.concatenate([some[np.argsort(key[some], kind="stable")], np.flatnonzero(always)])


def _newton(power_sums, k: int) -> np.ndarray:
    """``[k, A]``: ``e_j``, ``j < k``, from the power sums ``p_r``, ``r = 1..k-1`` (``[k-1, A]``),
    by Newton's identities ``j e_j = sum_{r<=j} (-1)^{r-1} e_{j-r} p_r`` (clipped at 0)."""
    out = np.empty((k, power_sums.shape[1]))
    out[0] = 1.0
    signed = power_sums * ((-1.0) ** np.arange(k - 1))[:, None]
    for j in range(1, k):
        out[j] = np.maximum(np.einsum("ra,ra->a", out[j - 1 :: -1], signed[:j]) / j, 0.0)
    return out


def _largest_per_prefix(q, descending, points, needed) -> np.ndarray:
    """``[P, K]``: the ``needed[p]`` largest ``q`` of ``q[:points[p]]``, decreasing (zero padded)."""
    out = np.zeros((points.size, int(needed.max()) if needed.size else 0))
    for p, (m, count) in enumerate(zip(points.tolist(), needed.tolist())):
        if count == 0:
            continue
        scan = descending[: 4 * count + 64]
        chosen = scan[scan < m][:count]
        if chosen.size < count:
            chosen = descending[descending < m][:count]
        out[p, : chosen.size] = q[chosen]
    return out


def _big_token_states(largest, rows, cols, count, t, k: int) -> np.ndarray:
    """``[k, A]``: the head of the Poisson-binomial law of the ``count[a]`` largest tokens of
    prefix ``rows[a]`` at node ``t[cols[a]]``, multiplied in one at a time, largest first; a
    state with ``t P(N < k) <= _TINY`` is set to 0 (more tokens only lower it)."""
    state = np.zeros((rows.size, k))
    state[:, 0] = 1.0
    active = np.flatnonzero(count > 0)
    i = 0
    while active.size:
        time = t[cols[active]]
        updated = _add_token(state[active], largest[rows[active], i] * time)
        gone = updated.sum(axis=1) * time <= _TINY
        updated[gone] = 0.0
        state[active] = updated
        i += 1
        active = active[~gone & (count[active] > i)]
    return state.T


def _below_k(q, k: int, first: int, last: int, t, head=None) -> np.ndarray:
    """``[G, last-first+1]``: ``P(N_{H_m}(t) < k)`` for ``m = first..last`` at nodes ``t [G]``
    (increasing), from the state at ``first`` (``head [G, k]``, computed when ``None``) by the
    range recursion (module docstring, "Range recursion")."""
    state = _head_state(q[:first], k, t) if head is None else head  # [G, k]
    below = np.empty((t.size, last - first + 1))
    below[:, 0] = state.sum(axis=1)
    tokens = q[first:last]
    for start, stop in _blocks(tokens, float(t.max())):
        block = tokens[start:stop]
        if block.size == 1 and block[0] * t.max() > _BLOCK_EXPONENT:
            state = _add_token(state, block[0] * t)
            below[:, start + 1] = state.sum(axis=1)
            continue
        exponent = block[None, :] * t[:, None]  # [G, b]
        u = np.expm1(exponent)
        scale = np.exp(-np.cumsum(exponent, axis=1, dtype=np.longdouble).astype(np.float64))  # D relative to the block start
        level = np.repeat(state[:, :1], block.size, axis=1)  # Q(0) is constant along the block
        total = level.copy()
        ends = [level[:, -1]]
        for j in range(1, k):
            shifted = np.concatenate([state[:, j - 1 : j], level[:, :-1]], axis=1)
            level = state[:, j : j + 1] + np.cumsum(u * shifted, axis=1)
            total += level
            ends.append(level[:, -1])
        below[:, start + 1 : stop + 1] = np.minimum(scale * total, 1.0)
        state = scale[:, -1:] * np.stack(ends, axis=1)
    return below


def _blocks(tokens, t_max: float) -> list[tuple[int, int]]:
    """Contiguous ``(start, stop)`` blocks of at most ``_CHUNK`` tokens with
    ``q(block) t_max <= 2 * _BLOCK_EXPONENT``; a token with ``q t_max > _BLOCK_EXPONENT``
    alone in its block."""
    if tokens.size == 0:
        return []
    exponent = tokens * t_max
    alone = exponent > _BLOCK_EXPONENT
    group = np.floor(np.cumsum(np.where(alone, 0.0, exponent)) / _BLOCK_EXPONENT)
    starts = np.ones(tokens.size, dtype=bool)
    starts[1:] = alone[1:] | alone[:-1] | (group[1:] != group[:-1])
    starts[::_CHUNK] = True  # [G, b] work arrays stay in cache
    edges = np.append(np.flatnonzero(starts), tokens.size)
    return list(zip(edges[:-1].tolist(), edges[1:].tolist()))


def _add_token(state, exponent):
    """One token with ``q t = exponent [G]`` added to the head ``state [G, k]``."""
    out = state * np.exp(-exponent)[:, None]
    out[:, 1:] += state[:, :-1] * -np.expm1(-exponent)[:, None]
    return out


def _head_state(q_head, k: int, t) -> np.ndarray:
    """``[G, k]``: ``P(N_H(t) = j)``, ``j < k``, for the token set ``H`` with probabilities
    ``q_head`` (any order) at the increasing nodes ``t [G]`` (:func:`_head_states`)."""
    q_head = np.asarray(q_head, dtype=np.float64)
    t = np.asarray(t, dtype=np.float64)
    assert t.size < 3 or np.allclose(np.diff(np.log(t)), math.log(t[1] / t[0]), rtol=1e-9), "geometric nodes"
    return _head_states(q_head, k, np.array([q_head.size]), np.asarray(t, dtype=np.float64), np.array([np.size(t)]))[0]


def _convolve_head(a, b) -> np.ndarray:
    """``[k, A]``: the first ``k`` coefficients of the product of two heads ``[k, A]``
    (independent sums)."""
    out = np.empty_like(a)
    for j in range(a.shape[0]):
        out[j] = np.einsum("ia,ia->a", a[: j + 1], b[j::-1])
    return out
