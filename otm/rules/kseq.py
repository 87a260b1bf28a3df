"""k-SEQ, SpecTr's k-sequential selection (SpecTr, Sun et al. 2023, Alg. 2, Thm 2, Lemma 3).

Translated to our letters (SpecTr writes ``p`` for the draft and ``q`` for the target;
here ``p`` = target, ``q`` = draft). Drafts ``x_1..x_k`` i.i.d. from ``q``; a division
factor ``g >= 1``;

    beta(g) = sum_x min(q(x), p(x) / g),      p_acc(g) = 1 - (1 - beta(g))^k.

Draft ``x_i`` is accepted with ``min(1, p(x_i) / (g q(x_i)))`` (the same test for every
``i``); the first accepted draft is output. If all ``k`` are rejected, ``Y`` is drawn
from the residual (Alg. 2 line 1, eq. (5), reconstructed in our letters from the proof
of Thm 2 in App. C.1, since the extracted formula is garbled):

    p_res(x) = [p(x) - min(q(x), p(x) / g) * p_acc / beta] / (1 - p_acc).

The first accepted draft equals ``x`` with probability
``min(q(x), p(x)/g) * p_acc / beta`` (App. C.1), so ``Y ~ p`` exactly when ``p_res >= 0``,
i.e. when ``p_acc <= g beta``. With ``f(g) = 1 - (1 - beta(g))^k - g beta(g)``
(non-increasing, Lemma 3) this holds for every ``g >= g*``, ``f(g*) = 0``,
``g* in [1, min(k, max_x p(x)/q(x))]``; ``g*`` is found by bisection.

The "a draft was accepted" probability is ``p_acc`` (SpecTr's guarantee). The
membership acceptance can exceed it: ``p_res`` can output a token that was a rejected
draft. Given all drafts rejected they are i.i.d. with ``P(x_i = y, rejected) =
d(y) = max(q(y) - p(y)/g, 0)``, and the residual sample is independent of them, so

    P(Y in S(X)) = p_acc + sum_y p_res(y) [(1 - beta)^k - (1 - beta - d(y))^k].
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..distributions import check_draft_count
from ..draft_laws import iid_law
from ..errors import InvalidDistributionError, NotApplicableError
from ..tolerances import FEASIBILITY_TOLERANCE
from .base import RuleLaw
from .enumeration import (
    MAX_RULE_ENUMERATION,
    accept_probability,
    count_iid,
    enumerated_rule_law,
    is_exact,
    positive_part,
    resolve_method,
    sequential_kernel,
    validate_one_q,
    validate_pair,
)

#: Bisection steps for ``g*`` in float64: the bracket ``[1, k]`` shrinks below one ulp.
BISECTION_STEPS = 200


def beta(p: np.ndarray, q: np.ndarray, g):
    """``beta(g) = sum min(q, p / g)``."""
    return np.minimum(q, p / g).sum()


def gap(p: np.ndarray, q: np.ndarray, k: int, g):
    """``f(g) = 1 - (1 - beta(g))^k - g beta(g)``; the rule is lossless iff ``f(g) <= 0``."""
    b = beta(p, q, g)
    return 1 - (1 - b) ** k - g * b


def upper_bracket(p: np.ndarray, q: np.ndarray, k: int):
    """``min(k, max_x p(x)/q(x))`` (``k`` when ``q = 0 < p`` somewhere); ``f <= 0`` there
    (Lemma 3)."""
    drafted = np.asarray(q > 0, dtype=bool)
    unbounded = bool(np.any(np.asarray(p > 0, dtype=bool) & ~drafted))
    top = k if unbounded else min(k, (p[drafted] / q[drafted]).max())
    return max(top, 1)


def _sorted_gap(p: np.ndarray, q: np.ndarray, k: int, sorted_ratios=None):
    """``g -> f(g)`` in O(log V) per call after one sort: with the drafted tokens sorted by
    ``r = p/q``, ``beta(g) = q({r >= g}) + p({r < g}) / g`` (the tokens with ``q = 0`` add
    nothing), from two prefix sums. ``sorted_ratios``: :func:`sorted_ratios` of ``(p, q)``,
    to share one sort between several ``k``."""
    ratio, p_below, q_from = sorted_ratios if sorted_ratios is not None else sorted_ratios_of(p, q)

    def f(g: float) -> float:
        j = int(np.searchsorted(ratio, g, side="left"))  # tokens with r < g
        b = q_from[j] + p_below[j] / g
        return 1 - (1 - b) ** k - g * b

    return f


def sorted_ratios_of(p: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(r, p_below, q_from)``: the drafted tokens' ratios ``p/q`` sorted, the ``p`` mass of
    the first ``j`` of them and the ``q`` mass from the ``j``-th on (float inputs)."""
    drafted = q > 0
    with np.errstate(over="ignore"):  # a denormal q: ratio inf, sorted last
        ratio = p[drafted] / q[drafted]
    order = np.argsort(ratio)
    p_below = np.concatenate([[0.0], np.cumsum(p[drafted][order])])
    q_from = np.concatenate([np.cumsum(q[drafted][order][::-1])[::-1], [0.0]])
    return ratio[order], p_below, q_from


def optimal_division_factor(p, q, k: int, sorted_ratios=None):
    """``g*``: the smallest ``g >= 1`` with ``f(g) <= 0`` (SpecTr, Sun et al. 2023, eq. (6), Lemma 3).

    In float64 it is the upper end of a bisection bracket (on ``f`` evaluated from one
    sort, :func:`_sorted_gap`, then confirmed on the direct sum), so ``f(g*) <= 0`` up to
    rounding. For exact inputs the float root is converted to a Fraction and raised
    until ``f(g*) <= 0`` holds exactly (a rational just above the irrational root).
    """
    if sorted_ratios is None:
        p, q = validate_pair(p, q)
    k = check_draft_count(k)
    exact = is_exact(p)
    pf, qf = (p.astype(np.float64), q.astype(np.float64)) if exact else (p, q)
    top = hi_float = float(upper_bracket(pf, qf, k))
    if gap(pf, qf, k, 1.0) <= 0:
        hi_float = 1.0
    else:
        fast_gap = _sorted_gap(pf, qf, k, None if exact else sorted_ratios)
        lo = 1.0
        for _ in range(BISECTION_STEPS):
            mid = 0.5 * (lo + hi_float)
            if mid in (lo, hi_float):
                break
            if fast_gap(mid) <= 0:
                hi_float = mid
            else:
                lo = mid
        for _ in range(64):  # the prefix sums round differently from the direct sum: confirm on it
            if hi_float >= top or gap(pf, qf, k, hi_float) <= 0:
                break
            hi_float = min(hi_float * (1 + 2**-50), top)
    if not exact:
        return hi_float
    if gap(p, q, k, Fraction(1)) <= 0:
        return Fraction(1)
    top = upper_bracket(p, q, k)
    g, step = Fraction(hi_float), Fraction(1, 2**50)
    while g < top and gap(p, q, k, g) > 0:
        g, step = g + step, 2 * step
    return min(g, top) if gap(p, q, k, g) > 0 else g


def residual_distribution(p: np.ndarray, q: np.ndarray, k: int, g) -> np.ndarray:
    """``[V]`` the raw residual ``p_res`` of eq. (5) at ``g`` (validated ``p``, ``q``).

    Not clipped: for ``g < g*`` it has negative entries (the rule is then undefined).
    When ``p_acc = 1`` the residual is never reached and ``p`` is returned.
    """
    b = beta(p, q, g)
    p_acc = 1 - (1 - b) ** k
    if p_acc == 1:
        return p.copy()
    accepted_output = np.minimum(q, p / g) * (p_acc / b) if b > 0 else p * 0
    return (p - accepted_output) / (1 - p_acc)


def clipped_membership(p: np.ndarray, q: np.ndarray, k: int, g) -> float:
    """The membership acceptance at ``g`` of float ``p``, ``q``:
    ``closed_form_membership(p, q, k, g, max(residual_distribution(p, q, k, g), 0))``, the same
    operations with ``p / g``, ``min(q, p / g)`` and ``beta`` formed once (a per-position
    table evaluates it at every ``k``)."""
    scaled = p / g
    accepted = np.minimum(q, scaled)
    b = accepted.sum()
    p_acc = 1 - (1 - b) ** k
    final = p.copy() if p_acc == 1 else (p - (accepted * (p_acc / b) if b > 0 else p * 0)) / (1 - p_acc)
    np.maximum(final, 0.0, out=final)
    rejected = np.maximum(q - scaled, 0)
    return float(1 - (1 - b) ** k + (final * ((1 - b) ** k - (1 - b - rejected) ** k)).sum())


def kernel(p: np.ndarray, q: np.ndarray, k: int, g, final: np.ndarray):
    """The rule's kernel with residual ``final`` (stateless steps)."""

    def step(state, i, x):
        return accept_probability(p[x], g * q[x]), state

    return sequential_kernel(p, None, step, lambda state: final)


def closed_form_membership(p, q, k: int, g, final: np.ndarray):
    """``p_acc + sum_y p_res(y) [(1 - beta)^k - (1 - beta - d(y))^k]`` (module docstring)."""
    b = beta(p, q, g)
    rejected = positive_part(q - p / g)
    residual_hits = (final * ((1 - b) ** k - (1 - b - rejected) ** k)).sum()
    return 1 - (1 - b) ** k + residual_hits


def exact_law(p, q, k: int, *, g=None, method: str = "auto") -> RuleLaw:
    """Exact law of k-SEQ with ``k`` i.i.d. drafts from ``q`` and division factor ``g``
    (default ``g*``; any ``g >= g*`` is lossless, ``g < g*`` raises
    :class:`otm.errors.NotApplicableError`).

    ``details``: ``g``, ``g_star``, ``beta``, ``lower_bound`` (``p_acc``, SpecTr Thm 2,
    also the "a draft was accepted" probability), ``draft_accepted`` and ``residual``.

    >>> law = exact_law([0.5, 0.5], [1.0, 0.0], 2)
    >>> round(law.details["g"], 6), round(float(law.acceptance), 12)  # g* = 1 / (2 - sqrt(2))
    (1.707107, 0.5)
    """
    k = check_draft_count(k)
    p, q = validate_one_q(p, q, "rule 'kseq' draws k i.i.d. drafts from one q ([V] vector)")
    g_star = optimal_division_factor(p, q, k)
    if g is None:
        g = g_star
    else:
        if isinstance(g, bool) or not isinstance(g, (int, float, Fraction, np.integer, np.floating)) or not math.isfinite(g):
            raise InvalidDistributionError(f"k-SEQ's division factor g must be a finite number >= g* >= 1, got {g!r}")
        g = Fraction(g) if is_exact(p) else float(g)
        excess = gap(p, q, k, g)
        if g < 1 or excess > (0 if is_exact(p) else FEASIBILITY_TOLERANCE):
            raise NotApplicableError(
                f"k-SEQ needs g >= g* = {float(g_star):.12g} (SpecTr, Sun et al. 2023, Thm 2); g={float(g):.12g} "
                "makes the residual negative, so the rule is not a valid coupling"
            )
    final = residual_distribution(p, q, k, g)
    if not is_exact(p):
        final = positive_part(final)  # float guard: entries that are 0 at g* come out as -1e-17
    b = beta(p, q, g)
    lower_bound = 1 - (1 - b) ** k
    n_tuples = count_iid(q, k)
    method = resolve_method(method, n_tuples, True, "kseq", len(p))
    details = {"method": method, "g": g, "g_star": g_star, "beta": b, "lower_bound": lower_bound, "residual": final}
    if method == "closed_form":
        details["draft_accepted"] = lower_bound
        draft_law = iid_law(q, k) if n_tuples <= MAX_RULE_ENUMERATION else None
        return RuleLaw(closed_form_membership(p, q, k, g, final), p.copy(), draft_law, details)
    return enumerated_rule_law(p, iid_law(q, k), kernel(p, q, k, g, final), details)
