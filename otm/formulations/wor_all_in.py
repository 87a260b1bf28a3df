"""``Q(all k drafts in H)`` for drafts WITHOUT replacement, for the prefixes ``H`` of an order.

Math (derived here; no seed states it). Drawing ``k`` distinct tokens successively from
``q`` renormalised over the tokens not yet drawn (SpecHub, Sun et al. 2024, Alg. 1, RRSw) gives the same
law as the arrival order of independent exponential clocks ``E_x ~ Exp(q(x))``: at any
moment the next clock to ring is ``x`` with probability ``q(x) / (remaining rate)``. With
``c = 1 - q(H)`` (the rate outside ``H``) and ``N_H(t)`` the number of tokens of ``H``
whose clock rang by time ``t``, the probability that some draw falls outside ``H`` is

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
real ``y`` axis). Truncation, each end below ``_TAIL * c`` (rigorous, and relative:
``R >= 1 - (1 - c)^k >= c``, so ``R`` keeps its relative accuracy even when tiny):

- below ``t_lo``: both probabilities of ``>= k`` arrivals are in ``[0, t^k / k!]``
  (``P(N_H >= k) <= e_k(pi) <= (s t)^k / k!``), so the part is ``<= c t_lo^{k+1} / (k+1)!``;
- above ``t_hi``: ``P(N_H(t) < k) <= sum_{i<=k} e^{-q_(i) t}`` over the ``k`` largest ``q``
  in ``H`` (one of them has not rung), giving ``<= c k e^{-q_(k) T} / q_(k)``;
  ``int_T c e^{-ct} P(Pois(t) < k) dt <= c k Q(k, T)``; and anyway the whole part is
  ``<= int_T c e^{-ct} dt = e^{-cT}``.

``P(N_{H_m}(t) = j)`` for ``j < k`` (the head of a Poisson-binomial law) is computed at
each node ``t`` for the whole contiguous range of prefixes ``m0..m1`` that contains the
requested ones (:func:`_below_k`):

1. the state at ``m0`` is symmetric in the tokens of ``H_{m0}``. Tokens with
   ``q t <= ln 2`` ("small", ``u = e^{qt} - 1 <= 1``) enter through the power sums
   ``sum u^r`` and Newton's identities for the elementary symmetric polynomials
   ``e_j(u)``, then ``P = e^{-s t} e_j``; with ``u <= 1`` the alternating terms are bounded
   by a Poisson-like weight, so the absolute error is a few ulps. The few "big" tokens
   (``q t > ln 2``) are multiplied in one at a time, largest ``q`` first,
   ``P(j) <- e^{-qt} P(j) + (1 - e^{-qt}) P(j-1)``. Each big token rings with probability
   ``>= 1/2``, so after ``_vanishing_count(k)`` of them ``P(N < k) <= P(Bin(n, 1/2) < k)
   <= _TINY`` and the state is set to 0 (adding tokens only lowers ``P(N < k)``).
2. along the range, ``P_m(j) = e^{-q_m t} P_{m-1}(j) + (1 - e^{-q_m t}) P_{m-1}(j-1)`` is
   written with ``D_m = e^{-(s_m - s_{m0}) t}`` as ``P_m = D_m Q_m``,
   ``Q_m(j) = Q_{m-1}(j) + u_m Q_{m-1}(j-1)``: one ``cumsum`` per ``j`` (plain floats, all
   terms positive). Blocks keep ``(s_m - s_{m0}) t <= 2 * _BLOCK_EXPONENT`` so nothing
   overflows; a token with ``q t_hi > _BLOCK_EXPONENT`` is a block of its own, updated
   directly.

Rounding: only ``e^{-q t}``, ``expm1`` and sums of positive terms (and Newton's bounded
alternation), so the accuracy does not depend on how many orders of magnitude ``q``
spans; the exponent of a product is a sum of positive ``q t`` (relative error ``~eps``).
(The previous version took differences of prefix sums ``s_i - s_m`` times ``t ~ 1/c`` in
exponents and lost accuracy once ``q`` spanned ~10 orders of magnitude.) Measured against
exact rationals with ``q`` spanning 40 orders of magnitude: relative error of ``R`` at
most 4e-15 (tests/otm/test_closed_form.py checks 1e-12). The quadrature error is
estimated a posteriori from the same sum on every other node (step ``2h``):
``d = max |R_h - R_2h|``; with geometric convergence ``err(h) ~ err(2h)^2`` relative to the
integral (``<= 1``), reported as ``quadrature_error_estimate = d^2`` (an overestimate on
every instance measured).

Cost: ``G`` nodes (70-100 on realistic instances at V = 151,936) times O(V k) for the
state plus O(L k) along a range of ``L`` prefixes; about 0.2-0.3 s for k = 2..8 there.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaincc

#: Trapezoid step in ``log t``. The error decays like ``exp(-a / h)``; measured ``a ~ 8``
#: on the instances of the tests (3e-11 at h = 0.3, 3e-5 at h = 0.6), so 0.2 gives ~1e-16.
_STEP = 0.2
#: Integrand mass left outside the integration range, relative to ``c`` (per prefix, each end).
_TAIL = 1e-18
#: Probability below which the head ``P(N < k)`` of a state is set to 0.
_TINY = 1e-30
#: ``ln 2``: tokens with ``q t`` above it have ``u = e^{qt} - 1 > 1`` ("big").
_LN2 = math.log(2.0)
#: Largest ``(s_m - s_{m0}) t`` inside one block of the range recursion (``e^{2*200}`` fits).
_BLOCK_EXPONENT = 200.0
#: Most tokens in one block of the range recursion (speed only: keeps ``[G, block]`` in cache).
_CHUNK = 1024
#: Time nodes evaluated together in the Newton step (memory: ``_BATCH * V`` floats per array).
_BATCH = 8


def all_in_bounds(q_sorted, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Rigorous bounds ``lo <= T(H_m) <= hi`` for every prefix ``m = 0..n`` (O(V k)).

    Given the first ``i`` draws are in ``H``, the next one is in ``H`` with probability
    ``(s - r) / (1 - r)`` where ``r`` is the mass already drawn, ``0 <= r <= M_i``
    (``M_i`` = mass of the ``i`` largest ``q``). The ratio decreases in ``r``, so
    ``prod_{i<k} (s - M_i)_+ / (1 - M_i) <= T <= s^k``; and ``T = 0`` when ``|H| < k``.
    See :func:`outside_bounds` for the same bounds on ``R = 1 - T`` without cancellation.

    Args:
        q_sorted: ``[n]`` positive draft probabilities in prefix order, summing to 1.
    """
    r_lo, r_hi = outside_bounds(q_sorted, k)
    return 1.0 - r_hi, 1.0 - r_lo


def outside_bounds(q_sorted, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Rigorous bounds ``lo <= R(H_m) = 1 - T(H_m) <= hi`` for every prefix ``m = 0..n``:
    ``1 - (1 - c)^k <= R <= 1 - prod_{i<k} (1 - c / (1 - M_i))_+`` (see :func:`all_in_bounds`).

    Rounding: ``c``, ``s = q(H)`` and ``1 - M_i`` are sums of positive terms (``c`` and
    ``1 - M_i`` from the end), so each factor ``(1 - M_i - c) / (1 - M_i)`` is within
    ``2 eps`` of exact and is lowered by ``4 eps``; ``lo`` is formed from the smaller of
    ``c`` and ``s`` (``-expm1(k log1p(-c))`` or ``1 - s^k``) with a relative margin of
    ``16 eps`` on that small quantity. So the bounds stay rigorous in floats (with
    q = [.., 0.99, 1e-12, ..] the plain ``1 - M_i`` lost 4 digits and broke ``hi``).
    """
    q_sorted = np.asarray(q_sorted, dtype=np.float64)
    n = q_sorted.size
    eps = np.finfo(np.float64).eps
    c = outside_masses(q_sorted)
    s = np.concatenate([[0.0], np.cumsum(q_sorted)])
    rest = np.cumsum(np.sort(q_sorted))[::-1]  # rest[i] = 1 - M_i: all but the i largest
    with np.errstate(divide="ignore"):
        tail = c < 0.5
        r_lo = np.where(
            tail,
            -np.expm1(k * np.log1p(-np.minimum(c, 0.5))) * (1.0 - 16 * eps),
            1.0 - np.minimum(s, 0.5) ** k * (1.0 + 16 * eps),
        )
        log_stay = np.zeros(n + 1)
        for i in range(min(k, n)):
            stay = np.clip((rest[i] - c) / rest[i] - 4 * eps, 0.0, 1.0)
            log_stay += np.log(stay)
    r_hi = -np.expm1(log_stay)
    short = np.arange(n + 1) < k
    r_lo[short] = r_hi[short] = 1.0
    r_lo[-1] = r_hi[-1] = 0.0 if n >= k else 1.0
    return np.minimum(r_lo, r_hi), r_hi


def outside_masses(q_sorted) -> np.ndarray:
    """``[n+1]``: ``c_m = sum_{i > m} q_i``, the mass outside the prefix ``H_m``, summed from
    the end (no cancellation when ``c_m`` is tiny)."""
    return np.concatenate([np.cumsum(q_sorted[::-1])[::-1], [0.0]])


def all_in_prefixes(q_sorted, k: int, prefixes, step: float = _STEP) -> tuple[np.ndarray, dict]:
    """``T(H_m) = Q(all k distinct draws in {x_1..x_m})`` for each ``m`` in ``prefixes``:
    ``1 -`` :func:`outside_prefixes` (absolute accuracy ~1e-15; use that function when
    ``1 - T`` is what matters, it keeps relative accuracy)."""
    outside, info = outside_prefixes(q_sorted, k, prefixes, step)
    return 1.0 - outside, info


def outside_prefixes(q_sorted, k: int, prefixes, step: float = _STEP) -> tuple[np.ndarray, dict]:
    """``R(H_m) = 1 - T(H_m)``, the probability that some of the ``k`` draws falls outside
    the prefix ``H_m``, for each ``m`` in ``prefixes``, by (2) of the module docstring.

    Cost: O(G V k) for the state at the smallest requested prefix plus O(G L k) along the
    range of requested prefixes (``L`` tokens), ``G`` = number of time nodes.

    Args:
        q_sorted: ``[n]`` positive draft probabilities in prefix order, summing to 1
            (``n >= k``).
        prefixes: ``[c]`` prefix lengths in ``0..n``.
        step: trapezoid step in ``log t``.

    Returns:
        ``([c] values, {"coarse_step_difference", "quadrature_error_estimate",
        "truncation_error_bound", "nodes"})``.
    """
    q = np.asarray(q_sorted, dtype=np.float64)
    prefixes = np.asarray(prefixes, dtype=np.int64)
    n = q.size
    out = np.where(prefixes >= n, 0.0, 1.0)  # m < k: fewer than k tokens, some draw is outside
    todo_mask = (prefixes >= k) & (prefixes < n)
    info = {"coarse_step_difference": 0.0, "quadrature_error_estimate": 0.0, "truncation_error_bound": 0.0, "nodes": 0}
    if not todo_mask.any():
        return out, info
    todo = prefixes[todo_mask]
    first, last = int(todo.min()), int(todo.max())
    c = outside_masses(q)[todo]  # [c] mass outside H_m
    kth_largest = float(np.partition(q[:first], first - k)[first - k])  # in every H_m, m >= first
    t = np.exp(np.arange(*_log_time_range(k, float(c.min()), kth_largest), step))  # [G]
    below = _below_k(q, k, first, last, t)[:, todo - first]  # [G, c] P(N_{H_m}(t) < k)
    integrand = step * t[:, None] * c * np.exp(-c * t[:, None]) * (below - gammaincc(k, t)[:, None])
    fine = integrand.sum(axis=0)
    coarse = 2.0 * integrand[::2].sum(axis=0)
    out[todo_mask] = -np.expm1(-k * np.log1p(c)) + fine
    difference = float(np.abs(fine - coarse).max())
    info = {
        "coarse_step_difference": difference,
        "quadrature_error_estimate": difference**2,
        "truncation_error_bound": 2 * _TAIL * float(c.max()),
        "nodes": int(t.size),
    }
    return out, info


def _log_time_range(k: int, c_min: float, kth_largest: float) -> tuple[float, float]:
    """``(log t_lo, log t_hi)`` outside which (2) has less than ``_TAIL * c`` per end
    (module docstring); ``kth_largest`` is the k-th largest ``q`` inside every prefix and
    ``c_min`` the least outside mass among them."""
    t_lo = (_TAIL * math.factorial(k + 1)) ** (1.0 / (k + 1))
    t_own = max(math.log(k / (kth_largest * _TAIL)), 1.0) / kth_largest  # sum e^{-q_(i) t}
    t_poisson = float(k + 10)
    while k * gammaincc(k, t_poisson) > _TAIL:
        t_poisson *= 1.25
    t_hi = min(max(t_own, t_poisson), math.log(1.0 / (_TAIL * c_min)) / c_min)  # e^{-c t} part
    return math.log(t_lo), math.log(max(t_hi, t_lo)) + 1e-9


def _below_k(q, k: int, first: int, last: int, t) -> np.ndarray:
    """``[G, last-first+1]``: ``P(N_{H_m}(t) < k)`` for ``m = first..last`` at nodes ``t [G]``."""
    state = _head_state(q[:first], k, t)  # [G, k]
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
    ``q_head`` (any order), by Newton's identities on the small tokens and one-by-one
    products for the big ones (module docstring, step 1)."""
    state = np.zeros((t.size, k))
    state[:, 0] = 1.0
    if q_head.size == 0:
        return state
    parts = [_small_tokens_head(q_head, k, t[i : i + _BATCH]) for i in range(0, t.size, _BATCH)]
    small_part = np.concatenate([part[0] for part in parts])  # [G, k]
    big_count = np.concatenate([part[1] for part in parts])  # [G] tokens with q t > ln 2
    limit = _vanishing_count(k)
    processed = int(min(big_count.max(), limit))
    if processed:
        largest = np.sort(np.partition(q_head, q_head.size - processed)[q_head.size - processed :])[::-1]
        for i, value in enumerate(largest):
            active = (i < big_count)[:, None]
            state = np.where(active, _add_token(state, value * t), state)
        state[big_count > limit] = 0.0  # P(N < k) <= P(Bin(limit, 1/2) < k) <= _TINY
    return _convolve_head(state, small_part)


def _small_tokens_head(q_head, k: int, t) -> tuple[np.ndarray, np.ndarray]:
    """``([G, k], [G])``: ``P(N_S(t) = j)``, ``j < k``, over the small tokens
    ``S = {q t <= ln 2}`` as ``e^{-q(S) t} e_j(u)`` from the power sums of ``u = e^{qt} - 1``
    (Newton's identities), and the number of the other (big) tokens."""
    exponent = q_head[None, :] * t[:, None]  # [G, n]
    small = exponent <= _LN2
    u = np.where(small, np.expm1(np.where(small, exponent, 0.0)), 0.0)
    power_sums = [None]
    power = u
    for r in range(1, k):
        power_sums.append(power.sum(axis=1))
        if r + 1 < k:
            power = power * u
    elementary = [np.ones(t.size)]
    for j in range(1, k):
        acc = np.zeros(t.size)
        for r in range(1, j + 1):
            acc += (-1) ** (r - 1) * elementary[j - r] * power_sums[r]
        elementary.append(np.maximum(acc / j, 0.0))
    weight = np.exp(-np.where(small, exponent, 0.0).sum(axis=1))  # e^{-q(S) t}
    return weight[:, None] * np.stack(elementary, axis=1), q_head.size - np.count_nonzero(small, axis=1)


def _convolve_head(a, b) -> np.ndarray:
    """``[G, k]``: the first ``k`` coefficients of the product of two heads (independent sums)."""
    out = np.zeros_like(a)
    for j in range(a.shape[1]):
        out[:, j] = (a[:, : j + 1] * b[:, j::-1]).sum(axis=1)
    return out


def _vanishing_count(k: int) -> int:
    """Smallest ``n`` with ``P(Bin(n, 1/2) < k) <= _TINY``."""
    n = k
    while sum(math.comb(n, j) for j in range(k)) > _TINY * 2.0**n:
        n += 1
    return n
