"""Finite-sample bounds behind the certification assertions: the test, its false-alarm
rate and its power, all without an asymptotic approximation.

The rows. A certification runs a verifier on ``N`` independent rows ``j`` and gives each
a weight ``a_j`` in ``(0, 1]`` with ``sum_j a_j = n`` (enumeration: ``a_j = n Q(x) / n_x``
for the ``n_x`` copies of draft tuple ``x``; sampled drafts: ``a_j = 1``, ``N = n``). For
a set ``A`` of outcomes the weighted count ``Z_A = sum_j a_j [Y_j in A]`` is a sum of
independent variables in ``[0, 1]`` with mean ``n P(A)``, ``P`` the verifier's law.

The bound. Hoeffding (1963, "Probability inequalities for sums of bounded random
variables", JASA 58, Theorem 1): for ``N`` independent variables in ``[0, 1]`` with mean
``m`` on average, ``P(Z / N >= f) <= exp(-N kl(f || m))`` for ``f >= m`` (and the
mirror image below), ``kl`` the Bernoulli relative entropy. It holds whatever the
variables' individual laws, which is what makes the enumerated design (rows of a tuple
share a law, tuples differ) as easy to bound as a plain multinomial.

The test (:func:`set_test`). Statistic ``T = max_A N kl(Z_A / N || n p(A) / N)`` over
every set ``A`` of cells. ``kl`` is jointly convex and the points ``(n p(A) / N, Z_A / N)``
fill a zonotope whose vertices are the prefixes of the cells sorted by ``Z_y / p(y)``, in
descending order (the upper chain) and in ascending order (the lower chain), so the maximum
is at one of those ``2 (c - 1)`` sets: ``T`` costs a sort. Union bound over the ``2^c - 2``
proper sets, each with two tails: ``P(T >= t) <= kappa (2^c - 2) exp(-t)``, where
``kappa = 1`` when every weight is one (then ``Z_{A^c} = N - Z_A`` and a set and its
complement are the same event) and ``kappa = 2`` otherwise; the threshold
``t = ln(kappa (2^c - 2) / alpha)`` gives a false-alarm rate of at most ``alpha`` for ``c``
cells, exactly, at any ``n``. A count in a cell of probability 0 fails outright (no false
alarm possible). The set that attains ``T`` is the deviating set the failure message names.

Tolerance. A verifier that computes in a low-precision dtype is the rule only up to that
dtype's rounding. With ``tolerance = tau`` the null hypothesis is "``|P(A) - p(A)| <= tau`` for
every set ``A``" (``TV(P, p) <= tau``): a set's statistic counts only what lies beyond
``n (p(A) + tau) / N`` above or ``n (p(A) - tau) / N`` below (``kl`` restricted to one side of
a shifted mean, still jointly convex, so the vertex sets still attain the maximum), and the
bound holds for every such ``P``. Cells of probability 0 are then ordinary cells (a rounding
can put mass there) unless ``strict_zeros`` keeps them impossible (tokens with ``p = 0``, which
no lossless verifier outputs in any dtype).

Power (:func:`detectable_tv`). If ``TV(P, p) = eps``, the set ``A* = {P > p}`` has
``P(A*) = p(A*) + eps`` and its complement loses ``eps``; ``T`` is at least either set's
statistic. With ``s = p(A*)`` and ``f_t(s)`` the level where ``A*``'s statistic reaches
``t``, Hoeffding's lower tail bounds the miss probability by
``exp(-N kl(f_t || n (s + eps) / N))`` (and the mirror image for the complement; the better
of the two counts). The smallest ``eps`` making that at most ``miss`` for every ``s`` in
``[0, 1 - eps]`` (evaluated on a grid of :data:`POWER_GRID` values of ``s``) is a guaranteed
power: any verifier whose output law is that far from ``p``, whatever the shape of the
deviation, fails with probability at least ``1 - miss``. The same computation for one set
of known mass (acceptance) is :func:`detectable_shift`, and for one given alternative law
:func:`law_miss_bound`.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from decoding.validation.stats import IMPOSSIBLE_PROBABILITY

#: Power is stated as the deviation detected with probability at least ``1 - POWER_MISS``.
POWER_MISS = 0.01

#: Number of values of ``s = p(A*)`` on which :func:`detectable_tv` takes its worst case.
POWER_GRID = 1001

#: Bisection steps of the roots of ``N kl(f || m) = level`` (2^-60 of the unit interval).
ROOT_STEPS = 60


def binary_kl(a, b) -> np.ndarray:
    """``kl(a || b) = a ln(a / b) + (1 - a) ln((1 - a) / (1 - b))``, elementwise, with
    ``0 ln 0 = 0`` and ``+inf`` where ``a`` puts mass where ``b`` has none."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return special.rel_entr(a, b) + special.rel_entr(1 - a, 1 - b)


def _bisect(low: np.ndarray, high: np.ndarray, crossed) -> np.ndarray:
    """Elementwise, the point of ``[low, high]`` where the monotone ``crossed(x)`` turns true
    (false at ``low``, true at ``high``), to ``2^-ROOT_STEPS`` of the interval; its upper end."""
    for _ in range(ROOT_STEPS):
        middle = (low + high) / 2
        above = crossed(middle)
        high = np.where(above, middle, high)
        low = np.where(above, low, middle)
    return high


def upper_root(mean, level, trials) -> np.ndarray:
    """The ``f >= mean`` with ``trials kl(f || mean) = level`` (elementwise; ``inf`` where
    even ``f = 1`` stays below ``level``): the smallest observed fraction that the upper
    tail calls significant at ``exp(-level)``."""
    mean = np.clip(np.asarray(mean, dtype=np.float64), 0.0, 1.0)
    level = np.broadcast_to(np.asarray(level, dtype=np.float64), mean.shape)
    reachable = trials * binary_kl(np.ones_like(mean), mean) >= level
    root = _bisect(mean.copy(), np.ones_like(mean), lambda f: trials * binary_kl(f, mean) >= level)
    return np.where(reachable, root, np.inf)


def mean_above(fraction, level, trials) -> np.ndarray:
    """The mean ``m >= fraction`` with ``trials kl(fraction || m) = level`` (elementwise): the
    largest mean under which ``fraction`` is still as likely as ``exp(-level)`` by the lower
    tail (1 where ``fraction`` is 1)."""
    fraction = np.clip(np.asarray(fraction, dtype=np.float64), 0.0, 1.0)
    return _bisect(fraction.copy(), np.ones_like(fraction), lambda m: trials * binary_kl(fraction, m) >= level)


def lower_root(mean, level, trials) -> np.ndarray:
    """The mirror image of :func:`upper_root`: the ``f <= mean`` with
    ``trials kl(f || mean) = level`` (``-inf`` where unreachable)."""
    return 1 - upper_root(1 - np.asarray(mean, dtype=np.float64), level, trials)


def mean_below(fraction, level, trials) -> np.ndarray:
    """The mirror image of :func:`mean_above`: the mean ``m <= fraction`` with
    ``trials kl(fraction || m) = level``."""
    return 1 - mean_above(1 - np.asarray(fraction, dtype=np.float64), level, trials)


def set_threshold(cells: int, alpha: float, weighted: bool = False) -> float:
    """``ln(kappa (2^cells - 2) / alpha)``: the threshold of :func:`set_test` on ``cells``
    cells, ``kappa = 2`` for weighted rows (module docstring)."""
    if cells < 2:
        return math.inf
    return (math.log(2) if weighted else 0.0) + cells * math.log(2) + math.log1p(-(2.0 ** (1 - cells))) - math.log(alpha)


def is_weighted(n: float, rows: int) -> bool:
    """Rows whose weights are not all one (an enumeration with ``rows > n``)."""
    return rows != n


@dataclass(frozen=True)
class SetTest:
    """One :func:`set_test`.

    Attributes:
        statistic: ``T`` (``inf`` after an impossible outcome).
        threshold: ``t``; the test fails when ``statistic >= threshold``.
        p_bound: ``min(1, kappa (2^c - 2) exp(-T))``, an upper bound on the p-value.
        passed: ``statistic < threshold``.
        cells: ``c``, the cells of positive probability.
        deviating: indices of the set ``A`` attaining ``T`` (for an impossible outcome, the
            cells of probability 0 that were observed).
        observed_mass, expected_mass: ``Z_A / n`` and ``p(A)`` of that set.
    """

    statistic: float
    threshold: float
    p_bound: float
    passed: bool
    cells: int
    deviating: np.ndarray
    observed_mass: float
    expected_mass: float


def _hull_sets(weights: np.ndarray, probs: np.ndarray, live: np.ndarray):
    """The vertex sets of the zonotope of the module docstring: for ``live`` sorted by
    ``weights / probs`` descending (a cell of probability 0 first), then ascending, yields
    ``(order, W, P)`` where the ``j``-th set is ``order[:j + 1]`` (``j < c - 1``), ``W`` and
    ``P`` its cumulative ``weights`` and ``probs``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(probs[live] > 0, weights[live] / probs[live], np.where(weights[live] > 0, np.inf, 0.0))
    descending = live[np.argsort(-ratio, kind="stable")]
    for order in (descending, descending[::-1]):
        yield order, np.cumsum(weights[order])[:-1], np.cumsum(probs[order])[:-1]


def _beyond(observed: np.ndarray, expected: np.ndarray, scale: float, rows: int, tolerance: float) -> np.ndarray:
    """``rows kl(f || m)`` of each set for the part of the observed fraction ``f`` beyond the
    null's range ``m in scale [P - tolerance, P + tolerance]`` (0 inside it). ``f`` is at most 1
    (every row weighs at most 1); a sum of fractional counts can pass it by a rounding, which
    is clipped."""
    fraction = np.minimum(observed / rows, 1.0)
    high = scale * np.minimum(1.0, expected + tolerance)
    low = scale * np.maximum(0.0, expected - tolerance)
    above = np.where(fraction > high, rows * binary_kl(fraction, np.minimum(high, 1.0)), 0.0)
    below = np.where(fraction < low, rows * binary_kl(fraction, low), 0.0)
    return np.maximum(above, below)


def set_statistic(weighted_counts, probs, n: float, rows: int, tolerance: float = 0.0,
                  strict_zeros: bool = True) -> tuple[float, np.ndarray, float, float, int]:
    """``(T, deviating set, Z_A / n, p(A), cells)`` of :func:`set_test` without its
    threshold (``T = inf`` and the observed impossible cells after an outcome of
    probability 0, with ``strict_zeros``)."""
    counts = np.asarray(weighted_counts, dtype=np.float64)
    probs = np.asarray(probs, dtype=np.float64)
    impossible = probs <= IMPOSSIBLE_PROBABILITY if strict_zeros else np.zeros(probs.shape, dtype=bool)
    live = np.flatnonzero(~impossible)
    seen = np.flatnonzero(impossible & (counts > 0))
    if seen.size:
        return math.inf, seen, float(counts[seen].sum() / n), 0.0, int(live.size)
    best = (0.0, live[:0], 0.0, 0.0)
    if live.size < 2:
        return (*best, int(live.size))
    for order, observed, expected in _hull_sets(counts, probs, live):
        statistics = _beyond(observed, expected, n / rows, rows, tolerance)
        j = int(np.argmax(statistics))
        if statistics[j] > best[0]:
            best = (float(statistics[j]), np.sort(order[: j + 1]), float(observed[j] / n), float(expected[j]))
    return (*best, int(live.size))


def set_test(weighted_counts, probs, n: float, rows: int, alpha: float, tolerance: float = 0.0,
             strict_zeros: bool = True) -> SetTest:
    """The set test (module docstring) of ``weighted_counts`` (``[c]``, ``Z_y``, summing to
    ``n``) against the law ``probs`` (``[c]``), for ``rows`` independent rows with weights
    in ``(0, 1]``, at false-alarm rate ``alpha``, up to ``tolerance`` in total variation."""
    statistic, deviating, observed, expected, cells = set_statistic(weighted_counts, probs, n, rows, tolerance,
                                                                    strict_zeros)
    threshold = set_threshold(cells, alpha, is_weighted(n, rows))
    log_sets = threshold + math.log(alpha) if cells >= 2 else -math.inf  # ln(kappa (2^c - 2))
    p_bound = 1.0 if statistic == 0 else float(min(1.0, math.exp(min(0.0, log_sets - statistic))))
    return SetTest(statistic, threshold, p_bound, statistic < threshold, cells, deviating, observed, expected)


@functools.lru_cache(maxsize=256)
def detectable_tv(n: float, rows: int, cells: int, alpha: float, miss: float = POWER_MISS,
                  tolerance: float = 0.0) -> float:
    """The smallest total variation ``eps`` between a verifier's law and ``p`` that
    :func:`set_test` on ``cells`` cells (at ``tolerance``) detects with probability at least
    ``1 - miss``, for every shape of the deviation (module docstring, "Power"); ``inf`` with
    fewer than two cells (nothing to test) or where no deviation is sure to be seen."""
    if cells < 2:
        return math.inf
    s = np.linspace(0.0, 1.0, POWER_GRID)[1:-1]
    level = set_threshold(cells, alpha, is_weighted(n, rows))
    return _smallest_covering(s, _rise_needed(s, n / rows, rows, level, math.log(1 / miss), tolerance))


@functools.lru_cache(maxsize=256)
def detectable_shift(mass: float | None, n: float, rows: int, level: float, miss: float = POWER_MISS,
                     upward_only: bool = False, tolerance: float = 0.0) -> float:
    """The smallest change of ``P(A)`` away from ``mass = p(A)`` for one set ``A`` that a test
    at ``level`` (a :func:`set_threshold`) detects with probability at least ``1 - miss``,
    through ``A`` or its complement: the larger of the two directions, each at most the room
    it has (a change that cannot happen needs no power); ``upward_only``: a rise, seen by
    ``A``'s upper tail alone (a one-sided test of ``A``); ``mass=None``: the worst over every
    mass."""
    scale, miss_level = n / rows, math.log(1 / miss)
    rise = _rise if upward_only else _rise_needed
    if mass is None:  # a fall at s is a rise of the complement: the rises at every s cover both
        s = np.linspace(0.0, 1.0, POWER_GRID)[1:-1]
        return _smallest_covering(s, rise(s, scale, rows, level, miss_level, tolerance))
    mass = float(mass)
    up = min(1 - mass, float(rise(np.array([mass]), scale, rows, level, miss_level, tolerance)[0]))
    if upward_only:
        return up
    down = min(mass, float(_rise_needed(np.array([1 - mass]), scale, rows, level, miss_level, tolerance)[0]))
    return max(up, down)


def _rise(s: np.ndarray, scale: float, rows: int, level: float, miss_level: float, tolerance: float = 0.0) -> np.ndarray:
    """``[len(s)]``: the smallest ``eps`` that a set of mass ``s`` rising to ``s + eps`` needs
    to be seen by its own upper tail with probability ``>= 1 - exp(-miss_level)`` (``inf``
    where none)."""
    significant = upper_root(scale * np.minimum(1.0, s + tolerance), level, rows)  # f_t(s)
    finite = np.isfinite(significant)
    reached = mean_above(np.where(finite, significant, 0.0), miss_level, rows)
    needed = reached / scale - s
    return np.where(finite & (needed <= 1 - s), needed, np.inf)


def _fall(r: np.ndarray, scale: float, rows: int, level: float, miss_level: float, tolerance: float = 0.0) -> np.ndarray:
    """``[len(r)]``: the smallest ``eps`` that a set of mass ``r`` falling to ``r - eps`` needs
    to be seen by its own lower tail (``inf`` where none)."""
    significant = lower_root(scale * np.maximum(0.0, r - tolerance), level, rows)
    finite = np.isfinite(significant)
    reached = mean_below(np.where(finite, significant, 0.0), miss_level, rows)
    needed = r - reached / scale
    return np.where(finite & (needed <= r), needed, np.inf)


def _rise_needed(s: np.ndarray, scale: float, rows: int, level: float, miss_level: float,
                 tolerance: float = 0.0) -> np.ndarray:
    """A set of mass ``s`` rising by ``eps`` while its complement falls by ``eps``: the
    smaller of the two needs (either set's statistic sees it; the same one when every
    weight is one)."""
    rise = _rise(s, scale, rows, level, miss_level, tolerance)
    if scale == 1:
        return rise
    return np.minimum(rise, _fall(1 - s, scale, rows, level, miss_level, tolerance))


def _smallest_covering(s: np.ndarray, needed: np.ndarray) -> float:
    """The smallest ``eps`` with ``needed <= eps`` at every ``s <= 1 - eps`` (the shifts that
    exist), ``s`` ascending; ``inf`` if none."""
    worst = np.maximum.accumulate(needed)  # worst[i]: the largest need over s[0..i]
    candidates = np.unique(needed[np.isfinite(needed)])  # ascending
    last = np.searchsorted(s, 1 - candidates, side="right") - 1  # the s <= 1 - eps
    covered = (last < 0) | (worst[np.maximum(last, 0)] <= candidates)
    return float(candidates[np.argmax(covered)]) if covered.any() else math.inf


def law_miss_bound(reference, law, n: float, rows: int, alpha: float, tolerance: float = 0.0) -> float:
    """An upper bound on the probability that :func:`set_test` against ``reference`` (``[c]``)
    misses a verifier whose law is exactly ``law`` (``[c]``), this deviation's own power: the
    best, over the vertex sets ``A`` of the module docstring (ordered by ``law /
    reference``), of Hoeffding's bound on ``A``'s statistic staying below the threshold, and
    ``exp(-n law(Z))`` for the cells ``Z`` of probability 0 (any outcome there fails)."""
    reference = np.asarray(reference, dtype=np.float64)
    law = np.asarray(law, dtype=np.float64)
    impossible = reference <= IMPOSSIBLE_PROBABILITY
    bounds = [math.exp(-n * float(law[impossible].sum()))]
    live = np.flatnonzero(~impossible)
    if live.size >= 2:
        scale = n / rows
        level = set_threshold(live.size, alpha, is_weighted(n, rows))
        for _, moved, s in _hull_sets(law, reference, live):
            up = upper_root(scale * np.minimum(1.0, s + tolerance), level, rows)
            down = lower_root(scale * np.maximum(0.0, s - tolerance), level, rows)
            target = scale * moved
            rising = np.isfinite(up) & (up < target)
            falling = np.isfinite(down) & (down > target)
            for seen, edge in ((rising, up), (falling, down)):
                if seen.any():
                    bounds.append(float(np.exp(-rows * binary_kl(edge[seen], target[seen])).min()))
    return min(bounds)


def samples_needed_for_law(reference, law, alpha: float, miss: float = POWER_MISS, extra_rows: int = 0,
                           tolerance: float = 0.0) -> int:
    """The smallest ``n`` at which :func:`law_miss_bound` is at most ``miss``, for ``n +
    extra_rows`` rows (an enumeration's rows beyond ``n``)."""
    high = 16
    while law_miss_bound(reference, law, high, high + extra_rows, alpha, tolerance) > miss:
        high *= 2
        if high > 2**62:
            raise ValueError("this law is not told from the reference at any sample size (it is the reference)")
    low = high // 2
    while high - low > max(1, low // 200):
        middle = (low + high) // 2
        missed = law_miss_bound(reference, law, middle, middle + extra_rows, alpha, tolerance) > miss
        low, high = (middle, high) if missed else (low, middle)
    return int(high)


def samples_needed(tv: float, cells: int, alpha: float, miss: float = POWER_MISS, extra_rows: int = 0,
                   tolerance: float = 0.0) -> int:
    """The smallest ``n`` at which :func:`detectable_tv` is at most ``tv``, for ``n +
    extra_rows`` rows (an enumeration's rows beyond ``n``)."""
    if not tolerance < tv <= 1 or cells < 2:
        raise ValueError(f"need tolerance={tolerance:g} < tv <= 1 and at least 2 cells, got tv={tv!r}, cells={cells}")
    high = 16
    while detectable_tv(high, high + extra_rows, cells, alpha, miss, tolerance) > tv:
        high *= 2
        if high > 2**62:
            raise ValueError(f"a TV of {tv!r} is not detected at any sample size (tolerance {tolerance:g})")
    low = high // 2
    while high - low > max(1, low // 200):  # within 0.5 %
        middle = (low + high) // 2
        if detectable_tv(middle, middle + extra_rows, cells, alpha, miss, tolerance) > tv:
            low = middle
        else:
            high = middle
    return int(high)


def chernoff_interval(fraction: float, scale: float, rows: int, confidence: float) -> tuple[float, float]:
    """Interval for a mean ``P(A)`` observed as ``fraction = Z_A / N`` (``Z_A`` as above, mean
    ``N P(A) scale`` with ``scale = n / N``): the means not rejected by either Hoeffding
    tail at ``(1 - confidence) / 2``, mapped back to ``P(A)``."""
    level = math.log(2 / (1 - confidence))
    low = float(mean_below(fraction, level, rows))
    high = float(mean_above(fraction, level, rows))
    return max(0.0, low / scale), min(1.0, high / scale)


__all__ = [
    "POWER_MISS", "SetTest", "binary_kl", "chernoff_interval", "detectable_shift", "detectable_tv", "is_weighted",
    "lower_root", "mean_above", "mean_below",
    "law_miss_bound", "samples_needed", "samples_needed_for_law", "set_statistic", "set_test", "set_threshold", "upper_root",
]
