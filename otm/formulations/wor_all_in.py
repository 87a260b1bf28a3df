"""``Q(all k drafts in H)`` for drafts WITHOUT replacement, for every prefix ``H`` of an order.

Math (derived here; no seed states it). Drawing ``k`` distinct tokens successively from
``q`` renormalised over the tokens not yet drawn (seed 000 Alg. 1, RRSw) gives the same
law as the arrival order of independent exponential clocks ``E_x ~ Exp(q(x))``: at any
moment the next clock to ring is ``x`` with probability ``q(x) / (remaining rate)``. So,
with ``s = q(H)``, ``c = 1 - s`` (the rate outside ``H``) and ``N_H(t)`` the number of
tokens of ``H`` whose clock rang by time ``t``,

    T(H) = P(first k draws all in H) = P(k-th arrival in H before the first arrival outside H)
         = int_0^inf c e^{-c t} P(N_H(t) >= k) dt.                                    (1)

``N_H(t)`` is Poisson-binomial with ``pi_x(t) = 1 - e^{-q(x) t}``. For the prefixes
``H_m = {x_1..x_m}`` of an order, ``P_m(j) = P(N_{H_m}(t) = j)`` obeys
``P_m(j) = e^{-q_m t} P_{m-1}(j) + pi_m P_{m-1}(j-1)``, whose solution is the prefix sum

    P_m(j) = sum_{i <= m} e^{-(s_m - s_i) t} pi_i P_{i-1}(j-1),   P_m(0) = e^{-s_m t},   (2)

(``s_m = q(H_m)``), i.e. one ``logaddexp.accumulate`` per ``j < k``: O(V k) per time node,
vectorised, no Python loop over the vocabulary.

Quadrature. In ``y = log t`` the integrand of (1), ``c t e^{-c t} P(N >= k)``, is analytic
in a strip and decays exponentially at both ends, so the trapezoid rule converges
geometrically in the step. The range is cut where the integrand is provably below
``_TAIL``: below ``t_lo`` with ``P(N >= k) <= (s t)^k / k!`` and above ``t_hi = _DECAY / c``.
The error is estimated a posteriori from the same sum on every other node (step ``2h``):
``d = max |T_h - T_2h|`` (returned as ``coarse_step_difference``) is about the error of
the ``2h`` sum; with geometric convergence ``err(h) = A e^{-C/h}`` the error of the ``h``
sum is about ``d^2 / A``, returned with ``A = 1`` as ``quadrature_error_estimate``.

Rounding. (2) is evaluated with prefix sums ``s_i - S`` taken in extended precision and
rounded to float64, so exponents carry an absolute error about ``eps * t``. It only
matters at large ``t``, i.e. for prefixes whose outside mass ``c`` is tiny
(``t ~ 1 / c``); ``rounding_error_estimate`` reports ``eps * _DECAY / c_min``. Callers
clip the result to the rigorous interval of :func:`all_in_bounds`.
"""
from __future__ import annotations

import math

import numpy as np

#: Trapezoid step in ``log t``. 0.25 gives ~1e-15 on the instances of the tests.
_STEP = 0.25
#: Integrand mass left outside the integration range (per prefix).
_TAIL = 1e-18
#: ``X`` with ``X e^{-X} < _TAIL``: beyond ``t = X / c`` the weight ``c e^{-c t}`` is negligible.
_DECAY = 46.0
#: Time nodes evaluated together (memory: ``_BATCH * V`` floats per array).
_BATCH = 8


def all_in_bounds(q_sorted, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Rigorous bounds ``lo <= T(H_m) <= hi`` for every prefix ``m = 0..n`` (O(V k)).

    Given the first ``i`` draws are in ``H``, the next one is in ``H`` with probability
    ``(s - r) / (1 - r)`` where ``r`` is the mass already drawn, ``0 <= r <= M_i``
    (``M_i`` = mass of the ``i`` largest ``q``). The ratio decreases in ``r``, so
    ``prod_{i<k} (s - M_i)_+ / (1 - M_i) <= T <= s^k``; and ``T = 0`` when ``|H| < k``.

    Args:
        q_sorted: ``[n]`` positive draft probabilities in prefix order, summing to 1.
    """
    n = q_sorted.size
    s = np.concatenate([[0.0], np.cumsum(q_sorted)])
    s[-1] = 1.0
    top = np.concatenate([[0.0], np.cumsum(np.sort(q_sorted)[::-1][: k - 1])])  # M_0..M_{k-1}
    lo = np.ones(n + 1)
    for i in range(k):
        room = 1.0 - top[i]
        lo *= np.clip((s - top[i]) / room, 0.0, 1.0) if room > 0 else 0.0
    hi = s**k
    short = np.arange(n + 1) < k
    lo[short] = hi[short] = 0.0
    lo[-1] = hi[-1] = 1.0 if n >= k else 0.0
    return lo, hi


def all_in_prefixes(q_sorted, k: int, prefixes, step: float = _STEP) -> tuple[np.ndarray, dict]:
    """``T(H_m) = Q(all k distinct draws in {x_1..x_m})`` for each ``m`` in ``prefixes``.

    Args:
        q_sorted: ``[n]`` positive draft probabilities in prefix order, summing to 1
            (``n >= k``).
        prefixes: ``[c]`` prefix lengths in ``0..n``.

    Returns:
        ``([c] values, {"coarse_step_difference", "quadrature_error_estimate",
        "rounding_error_estimate", "nodes"})``.
    """
    q_sorted = np.asarray(q_sorted, dtype=np.float64)
    prefixes = np.asarray(prefixes, dtype=np.int64)
    n = q_sorted.size
    out = np.zeros(prefixes.size)
    out[prefixes >= n] = 1.0  # the whole support: every draw is in H
    todo = prefixes[(prefixes >= k) & (prefixes < n)]
    info = {"coarse_step_difference": 0.0, "quadrature_error_estimate": 0.0, "rounding_error_estimate": 0.0, "nodes": 0}
    if todo.size == 0:
        return out, info
    last = int(todo.max())
    q_used = q_sorted[:last]  # only tokens up to the largest prefix enter (2)
    s_ext = np.concatenate([[0.0], np.cumsum(q_used.astype(np.longdouble))])
    outside = np.cumsum(q_sorted[::-1].astype(np.longdouble))[::-1]  # [n] sum_{i >= m} q
    c = outside[todo].astype(np.float64)  # mass outside H_m, accurate when tiny
    rel = (s_ext - s_ext[-1]).astype(np.float64)  # [last+1] s_i - s_last, small near the end
    s64 = s_ext.astype(np.float64)

    t_lo = (_TAIL * math.factorial(k)) ** (1.0 / (k + 1))
    t_hi = _DECAY / float(c.min())
    ys = np.arange(math.log(t_lo), math.log(t_hi) + step, step)
    fine = np.zeros(todo.size)
    coarse = np.zeros(todo.size)
    for start in range(0, ys.size, _BATCH):
        idx = np.arange(start, min(start + _BATCH, ys.size))
        t = np.exp(ys[idx])[:, None]  # [G, 1]
        at_least_k = 1.0 - _below_k_probability(q_used, s64, rel, k, t)[:, todo]  # [G, c]
        weight = step * c[None, :] * t * np.exp(-c[None, :] * t)  # trapezoid in y = log t
        fine += (weight * at_least_k).sum(axis=0)
        even = (idx % 2 == 0)[:, None]
        coarse += (2.0 * weight * at_least_k * even).sum(axis=0)
    difference = float(np.abs(fine - coarse).max())
    info = {
        "coarse_step_difference": difference,
        "quadrature_error_estimate": difference**2,
        "rounding_error_estimate": float(np.finfo(np.float64).eps * _DECAY / c.min()),
        "nodes": int(ys.size),
    }
    out[(prefixes >= k) & (prefixes < n)] = fine
    return out, info


def _below_k_probability(q_used, s64, rel, k: int, t) -> np.ndarray:
    """``[G, last+1]``: ``P(N_{H_m}(t) < k)`` for every prefix ``m <= last`` and node ``t``
    (``[G, 1]``), by recursion (2) in the log domain."""
    log_arrived = np.log(-np.expm1(-q_used[None, :] * t))  # [G, last] log pi_i
    shift = rel[None, :] * t  # [G, last+1] (s_i - s_last) t
    log_prev = -s64[None, :] * t  # log P_m(0)
    total = np.exp(log_prev)
    for _ in range(1, k):
        terms = shift[:, 1:] + log_arrived + log_prev[:, :-1]
        log_next = np.full_like(log_prev, -np.inf)
        with np.errstate(invalid="ignore"):  # -inf - -inf in logaddexp of empty prefixes
            log_next[:, 1:] = np.logaddexp.accumulate(terms, axis=1) - shift[:, 1:]
        log_next = np.nan_to_num(log_next, nan=-np.inf)
        total += np.exp(log_next)
        log_prev = log_next
    return np.minimum(total, 1.0)
