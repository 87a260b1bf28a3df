"""``Q(all k drafts in H)`` for drafts WITHOUT replacement, for the prefixes ``H`` of an order.

DOCSTRING PLACEHOLDER
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
#: Longest series kept for the moments (the tolerance needs 86 terms at k = 32).
_SERIES_TERMS = 200
#: Largest time node (``t`` stays finite in float64 whatever ``q`` and ``c``).
_MAX_TIME = 1e250
#: Largest ``(s_m - s_{m0}) t`` inside one block of the range recursion (``e^{2*200}`` fits).
_BLOCK_EXPONENT = 200.0
#: Most tokens in one block of the range recursion (speed only: keeps ``[G, block]`` in cache).
_CHUNK = 1024
#: Relative margin put on an evaluated ``R`` before it bounds its neighbours (the measured
#: error is below 4e-15; see the module docstring).
NEIGHBOUR_MARGIN = 1e-13


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
    ``1 - M_i`` from the end), so each factor is within ``2 eps`` of exact and is lowered by
    ``4 eps``; the in-prefix ``1 - M_i(H) = c + (s - M_i(H))`` is used only where the
    difference exceeds its rounding bound ``(m + i + 2) eps s``; ``lo`` is formed from the
    smaller of ``c`` and ``s`` (``-expm1(k log1p(-c))`` or ``1 - s^k``) with a relative
    margin of ``16 eps``. So the bounds stay rigorous in floats (with
    q = [.., 0.99, 1e-12, ..] the plain ``1 - M_i`` lost 4 digits and broke ``hi``).

    Args:
        q_sorted: ``[n]`` positive draft probabilities in prefix order, summing to 1.
    """
    r_lo, r_hi, _ = _prefix_bounds(np.asarray(q_sorted, dtype=np.float64), k)
    return r_lo, r_hi


def outside_masses(q_sorted) -> np.ndarray:
    """``[n+1]``: ``c_m = sum_{i > m} q_i``, the mass outside the prefix ``H_m``, summed from
    the end (no cancellation when ``c_m`` is tiny)."""
    q_sorted = np.asarray(q_sorted, dtype=np.float64)
    return np.concatenate([np.cumsum(q_sorted[::-1])[::-1], [0.0]])


class DraftPrefixes:
    """What every prefix ``H_m`` of one order needs, computed once in O(V k): the outside
    masses ``c_m``, the bounds of :func:`outside_bounds`, the k-th largest ``q`` in each
    prefix (it sets the prefix's time range) and, on first use, the tokens by decreasing ``q``.

    Args:
        q_sorted: ``[n]`` positive draft probabilities in prefix order, summing to 1.
        k: number of draws.
    """

    def __init__(self, q_sorted, k: int):
        self.q = np.asarray(q_sorted, dtype=np.float64)  # [n]
        self.k = k
        self.outside = outside_masses(self.q)  # [n+1]
        self.lower, self.upper, self.kth_largest = _prefix_bounds(self.q, k)  # [n+1] each

    @cached_property
    def descending(self) -> np.ndarray:  # [n]
        """Token positions by decreasing ``q``."""
        return np.argsort(-self.q)

    def time_nodes(self, prefixes, step: float) -> tuple[float, np.ndarray, float]:
        """``(log t_lo, [P] node counts, truncation bound)`` for the prefixes ``m`` (each in
        ``k..n-1``): prefix ``m`` uses the nodes ``log t_lo + g step``, ``g < count``, which
        cover its range ``[t_lo, t_hi(m)]`` (module docstring, "Range"); the bound is the
        largest tail mass left out, relative to ``c`` (``_TAIL`` unless a range hit
        ``_MAX_TIME``)."""
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
        counts = np.floor((np.log(t_hi) - math.log(t_lo)) / step + 1e-9).astype(np.int64) + 1
        return math.log(t_lo), counts, truncation


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

    Cost: O(V N) for the moments (``N <= 86`` terms) plus O(G L k) along the range of
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
    head = _head_states(draft.q, k, np.array([first]), t, np.array([t.size]), draft.descending)[0]  # [G, k]
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
    points = np.asarray(points, dtype=np.int64)
    out, todo_mask = _trivial_values(points, k, draft.q.size)
    if not todo_mask.any():
        return out, _empty_info()
    unique = np.unique(points[todo_mask])
    step = quadrature_step(k) if step is None else step
    log_t_lo, counts, truncation = draft.time_nodes(unique, step)
    t = np.exp(log_t_lo + step * np.arange(counts.max()))  # [G]
    below = _head_states(draft.q, k, unique, t, counts, draft.descending).sum(axis=2)  # [P, G]
    values, difference = _integrate(t, step, draft.outside[unique], below, k, counts)
    out[todo_mask] = values[np.searchsorted(unique, points[todo_mask])]
    return out, _info(difference, truncation, int(counts.max()))


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
    """
    index = np.flatnonzero(known)
    m = np.arange(outside.size)
    left = index[np.searchsorted(index, m, side="right") - 1]
    right = index[np.minimum(np.searchsorted(index, m, side="left"), index.size - 1)]
    value = upper
    with np.errstate(divide="ignore", invalid="ignore"):
        rate_left = value[left] / outside[left]
        rate_right = np.where(outside[right] > 0, value[right] / outside[right], np.inf)
        low = np.maximum(value[right], outside * rate_left) * (1.0 - margin)
        high = np.minimum(value[left], outside * rate_right) * (1.0 + margin)
    new_lower = np.where(known, lower, np.maximum(lower, low))
    new_upper = np.where(known, upper, np.minimum(upper, high))
    return np.minimum(new_lower, new_upper), new_upper


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


def _prefix_bounds(q, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``([n+1] lo, [n+1] hi, [n+1] k-th largest q in H_m)`` (:func:`outside_bounds`)."""
    n = q.size
    eps = np.finfo(np.float64).eps
    c = outside_masses(q)
    s = np.concatenate([[0.0], np.cumsum(q)])
    rest_all = np.cumsum(np.sort(q))[::-1]  # rest_all[i] = 1 - M_i(all): all but the i largest
    index = np.arange(n + 1)
    inside_low = s - (index + k + 2) * eps * s  # s minus the rounding bound of s - M_i(H), i < k
    largest = np.full(n + 1, np.inf)  # L_0; then L_i[m] = i-th largest q in H_m (0 if m < i)
    top = np.zeros(n + 1)  # M_i(H_m)
    stay = np.ones(n + 1)  # prod_i (1 - c / (1 - M_i(H)))_+
    rest, factor = np.empty(n + 1), np.empty(n + 1)
    for i in range(min(k, n)):
        if i:
            _next_largest(q, largest)
            top += largest
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
    with np.errstate(divide="ignore"):
        r_lo = np.where(
            c < 0.5,
            -np.expm1(k * np.log1p(-np.minimum(c, 0.5))) * (1.0 - 16 * eps),
            1.0 - np.minimum(s, 0.5) ** k * (1.0 + 16 * eps),
        )
    r_hi = 1.0 - stay
    kth = _next_largest(q, largest) if n >= k else np.zeros(n + 1)  # L_{k-1} -> L_k
    short = index < k
    r_lo[short] = r_hi[short] = 1.0
    r_lo[-1] = r_hi[-1] = 0.0 if n >= k else 1.0
    return np.minimum(r_lo, r_hi), r_hi, kth


def _next_largest(q, largest) -> np.ndarray:
    """``L_i`` from ``L_{i-1}`` in place (``[n+1]``, entry ``m`` for the prefix ``q[:m]``):
    ``L_i[m] = max_{j < m} min(q_j, L_{i-1}[j])`` (module docstring, "Bounds")."""
    candidates = np.minimum(q, largest[:-1])
    np.maximum.accumulate(candidates, out=largest[1:])
    largest[0] = 0.0
    return largest


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
    """Least ``n`` with ``P(Bin(n, 0.49) < k) e^{log_time} <= _TINY``: after that many big
    tokens (each rings with probability >= 1/2) the state is negligible at every node."""
    n = k
    log_p, log_q = math.log(0.49), math.log(0.51)
    while True:
        terms = [math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n - j + 1) + j * log_p + (n - j) * log_q
                 for j in range(k)]
        peak = max(terms)
        if peak + math.log(sum(math.exp(v - peak) for v in terms)) + log_time <= math.log(_TINY):
            return n
        n += max(1, n // 8)


def _head_states(q, k: int, points, t, counts, descending=None) -> np.ndarray:
    """``[P, G, k]``: ``P(N_{H_m}(t_g) = j)``, ``j < k``, for the prefixes ``H_m = q[:m]``,
    ``m`` in ``points`` (increasing, distinct), at the nodes ``g < counts[p]`` of the
    increasing ``t [G]`` (zeros at the others): the small tokens through their moments,
    the big ones one at a time (module docstring, "State at a prefix").

    Args:
        q: ``[n]`` positive probabilities (any order; the prefixes are taken in it).
        descending: ``[n]`` positions of ``q`` by decreasing value (computed when ``None``).
    """
    points = np.asarray(points, dtype=np.int64)
    size, nodes = points.size, t.size
    states = np.zeros((size, nodes, k))
    states[:, :, 0] = 1.0
    used = np.arange(nodes) < np.asarray(counts)[:, None]  # [P, G]
    states[~used] = 0.0
    last = int(points[-1])
    if last == 0:
        return states
    head = q[:last]
    big_from = np.searchsorted(t, _LN2 / head, side="right")  # [last] token x is small at g < big_from[x]
    segment = np.repeat(np.arange(size), np.diff(np.concatenate([[0], points])))  # [last] H_m holds x iff p >= segment
    key = segment * (nodes + 1) + big_from
    per_bin = np.bincount(key, minlength=size * (nodes + 1)).reshape(size, nodes + 1).cumsum(axis=0)
    big_count = per_bin[:, :nodes].cumsum(axis=1)  # [P, G] tokens of H_m with q t_g > ln 2
    cap = _vanishing_count(k, round(float(np.log(t[-1])), 1) + 0.1)
    live = used & (big_count < cap)  # P(N < k) <= P(Bin(cap, 1/2) < k): negligible
    states[used & ~live] = 0.0
    rows, cols = np.nonzero(live)
    if rows.size == 0:
        return states
    small = _small_token_states(head, big_from, key, size, t, k)[rows, cols]  # [A, k]
    descending = np.argsort(-q, kind="stable") if descending is None else descending
    largest = _largest_per_prefix(q, descending, points, np.minimum(np.where(live, big_count, 0).max(axis=1), cap))
    big = _big_token_states(largest, rows, cols, big_count[rows, cols], t, k)
    states[rows, cols] = _convolve_head(big, small)
    return states


def _small_token_states(head, big_from, key, size: int, t, k: int) -> np.ndarray:
    """``[P, G, k]``: ``P(N_S(t_g) = j)``, ``j < k``, over the small tokens ``S`` of each
    prefix (``g < big_from[x]``) as ``e^{-q(S) t} e_j(u)``, ``u = e^{qt} - 1``, with the power
    sums ``sum u^r`` from the moments ``sum (q t)^n`` (module docstring, "Moments") and
    Newton's identities."""
    nodes = t.size
    series = _series(k)  # [N+1, k]
    terms = series.shape[0] - 1
    small = big_from > 0
    scaled = head[small] * t[big_from[small] - 1]  # q t at the last node where x is small (<= ln 2)
    bins = np.empty((terms, size * (nodes + 1)))
    power = scaled.copy()
    for n in range(terms):  # bins[n] = sum over the bin of (q t_{b-1})^(n+1)
        bins[n] = np.bincount(key[small], weights=power, minlength=size * (nodes + 1))
        power *= scaled
    bins = bins.reshape(terms, size, nodes + 1).cumsum(axis=1)  # per prefix
    orders = np.arange(1, terms + 1)[:, None]
    moments = np.empty((terms, size, nodes))  # sum over small tokens of (q t_g)^n
    running = bins[:, :, nodes]
    moments[:, :, nodes - 1] = running
    for g in range(nodes - 2, -1, -1):
        running = bins[:, :, g + 1] + (t[g] / t[g + 1]) ** orders * running
        moments[:, :, g] = running
    power_sums = np.tensordot(moments, series[1:, 1:], axes=([0], [0]))  # [P, G, k-1]
    elementary = _newton(power_sums.reshape(size * nodes, k - 1), k).reshape(size, nodes, k)
    return np.exp(-moments[0])[:, :, None] * elementary


def _newton(power_sums, k: int) -> np.ndarray:
    """``[A, k]``: ``e_j``, ``j < k``, from the power sums ``p_r``, ``r = 1..k-1`` (``[A, k-1]``),
    by Newton's identities ``j e_j = sum_{r<=j} (-1)^{r-1} e_{j-r} p_r`` (clipped at 0)."""
    out = np.zeros((power_sums.shape[0], k))
    out[:, 0] = 1.0
    signed = power_sums * (-1.0) ** np.arange(k - 1)
    for j in range(1, k):
        out[:, j] = np.maximum((out[:, j - 1 :: -1] * signed[:, :j]).sum(axis=1) / j, 0.0)
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
    """``[A, k]``: the head of the Poisson-binomial law of the ``count[a]`` largest tokens of
    prefix ``rows[a]`` at node ``t[cols[a]]``, multiplied in one at a time, largest first; a
    state with ``t P(N < k) <= _TINY`` is set to 0 (more tokens only lower it)."""
    state = np.zeros((rows.size, k))
    state[:, 0] = 1.0
    active = np.flatnonzero(count > 0)
    i = 0
    while active.size:
        exponent = largest[rows[active], i] * t[cols[active]]
        updated = _add_token(state[active], exponent)
        gone = updated.sum(axis=1) * t[cols[active]] <= _TINY
        updated[gone] = 0.0
        state[active] = updated
        i += 1
        active = active[~gone & (count[active] > i)]
    return state


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
        scale = np.exp(-np.cumsum(exponent, axis=1))  # D relative to the block start
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
    stay = np.exp(-exponent)[:, None]
    rung = -np.expm1(-exponent)[:, None]
    shifted = np.concatenate([np.zeros_like(state[:, :1]), state[:, :-1]], axis=1)
    return stay * state + rung * shifted


def _head_state(q_head, k: int, t) -> np.ndarray:
    """``[G, k]``: ``P(N_H(t) = j)``, ``j < k``, for the token set ``H`` with probabilities
    ``q_head`` (any order) at the increasing nodes ``t [G]`` (:func:`_head_states`)."""
    q_head = np.asarray(q_head, dtype=np.float64)
    return _head_states(q_head, k, np.array([q_head.size]), np.asarray(t, dtype=np.float64), np.array([np.size(t)]))[0]


def _convolve_head(a, b) -> np.ndarray:
    """``[..., k]``: the first ``k`` coefficients of the product of two heads (independent sums)."""
    out = np.zeros_like(a)
    for j in range(a.shape[-1]):
        out[..., j] = (a[..., : j + 1] * b[..., j::-1]).sum(axis=-1)
    return out
