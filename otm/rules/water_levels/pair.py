"""The water-level masses of two drafts without replacement, and the pair rule's row.

The two drafts are distinct, drawn successively from ``q``: ``a`` then ``b`` with probability
``w_a q_b``, ``w = q / (1 - q)``, so the unordered pair ``{a, b}`` has mass
``Q_ab = w_a q_b + q_a w_b`` (rank 2), and every mass the construction needs
(:mod:`otm.rules.water_levels.construction`) is a product of range sums of ``q`` and ``w``:
``O(1)`` per cut. With ``C_j``, ``W_j`` the masses of ``q``, ``w`` below rank ``j``, the
max-ratio law is ``sigma_a = w_a C_a + q_a W_a``, and the pair ``{b, c}`` of ranks ``b < c``
on one side of the cut selects ``b`` with probability ``Y_bc = min_{b < j <= c} L(j)``
(docs/optimal-verifier.md#water-levels-for-drafts-without-replacement). Cost
``O(n * depth)`` after the sort.
"""
from __future__ import annotations

import math

import mpmath
import numpy as np

from ...distributions import as_fractions
from ...draft_laws import greedy_order
from ...errors import InvalidDraftCountError
from ...formulations.prefix_scan import ratio_order
from ..enumeration import is_exact, support_size, zeros_like
from .bounds import first_run, span_at_most, span_decision, span_lower_bound
from .construction import (
    PairParameters,
    WaterLevelRangeError,
    _Cumulative,
    _float_array,
    water_level_parameters,
    wider_parameters,
)


def pair_parameters(p, q) -> PairParameters:
    """Ranks, cut, minimal flux and water levels for two drafts without replacement from
    ``q`` against ``p`` (:mod:`otm.rules.water_levels.construction`); one token with ``q > 0`` is the exhausted-support
    convention of :func:`otm.draft_laws.without_replacement_law`.

    Float inputs are computed in float64; where that is not accurate enough (a level found
    above ``1 + 1e-12``: levels within ``1e-8`` of 1 on pairs of tiny mass), the construction
    is redone with :data:`FALLBACK_BITS`-bit floats (mpmath) from the same inputs and rounded
    back; ``arithmetic`` says which. Where those refuse too, a row of at most
    :data:`RATIONAL_FALLBACK_SUPPORT` tokens of ``q > 0`` is built in exact rationals from the
    floats: ranges of ``q`` some ``1e-290`` of the prefix below them (a dominant token beside
    others of ``1e-281`` and ``1e-292``) are beyond any fixed float precision, and a level
    that is exactly 1 there came out at ``1 + 6e-6``. A dominant draft token whose complement
    is below :data:`COMPLEMENT_FLOOR` is built on :func:`with_representable_weights` of ``q``."""
    if len(p) < 2:
        raise InvalidDraftCountError(f"k=2 drafts without replacement from a vocabulary of {len(p)} tokens")
    if _float_array(q):
        q = with_representable_weights(np.asarray(q, dtype=np.float64))
    order = ratio_order(p, q)  # q = 0 last
    if support_size(q) == 1:
        return _exhausted_support(p, q, order, p[0] * 0)
    try:
        return water_level_parameters(p, q, order, pair_masses)
    except WaterLevelRangeError:
        if is_exact(p) or support_size(q) > RATIONAL_FALLBACK_SUPPORT:
            raise
    return wider_parameters(p, q, order, pair_masses, as_fractions, "float64 and 256-bit floats not accurate enough")


#: The largest support that :func:`pair_parameters` builds in exact rationals where float64
#: and :data:`FALLBACK_BITS`-bit floats both refuse (``n (n - 1)`` ordered pairs, within the
#: tuples :data:`otm.rules.enumeration.MAX_RULE_ENUMERATION` allows an exact construction).
RATIONAL_FALLBACK_SUPPORT = 447


#: The least mass of the other tokens beside a dominant draft token that float64 rows keep
#: (:func:`with_representable_weights`): ``w = q / (1 - q)`` of the dominant token stays below
#: about ``1e289``, and every product of it with a mass of the others below 1.
COMPLEMENT_FLOOR = 2.0 ** -960


def with_representable_weights(q: np.ndarray) -> np.ndarray:
    """``q`` (float64, ``[V]``), or, where a token has ``q > 1/2`` and the others' mass ``eps``
    is positive and below :data:`COMPLEMENT_FLOOR`, ``q`` with the others' entries multiplied by
    the power of two that lifts ``eps`` to ``[COMPLEMENT_FLOOR, 2 COMPLEMENT_FLOOR)`` (exactly:
    denormals included). Below that floor the dominant token's ``w = q / eps`` overflows float64
    (from ``eps`` of about ``5e-309``), and with it every sum of ``w`` the construction takes.

    Why the scaled row is the same problem to float64 precision (our derivation): with ``a`` the
    dominant token, a drafted pair holds ``a`` but with probability of order ``eps^2`` (below
    ``1e-578`` on both rows, 0 in float64), and the pair ``{a, c}`` has probability ``(q_c / eps)
    (1 + O(eps))``: the same ``q_c / eps`` on both rows. So the two rows' pair laws differ by a
    relative ``O(COMPLEMENT_FLOOR)``, about ``1e-289``, and the water levels built on the scaled
    row (for its own ratio order) are a lossless optimal rule for a draft law within that total
    variation of the row's own. Exact inputs never need it."""
    if q.dtype != np.float64 or q.size < 2:
        return q
    big = int(np.argmax(q))
    if q[big] <= 0.5:
        return q
    eps = float(np.sum(q[:big]) + np.sum(q[big + 1:]))
    if not 0.0 < eps < COMPLEMENT_FLOOR:
        return q
    _, exponent = math.frexp(COMPLEMENT_FLOOR / eps)  # 2^(exponent - 1) <= floor / eps < 2^exponent
    scaled = q * 2.0 ** exponent
    scaled[big] = q[big]
    return scaled


def pair_masses(qs: list, zero) -> tuple[_PairMass, list]:
    """The masses of :func:`water_level_parameters` for two drafts without replacement:
    :class:`_PairMass`, and ``sigma_a = w_a C_a + q_a W_a`` (the max-ratio law)."""
    pair_mass, ws = _PairMass.of_ranked(qs, zero)
    q_sums, w_sums = pair_mass.q, pair_mass.w
    return pair_mass, [ws[a] * q_sums.total[a] + qs[a] * w_sums.total[a] for a in range(len(qs))]


def _mass_of_others(qs: list, a: int):
    """``1 - q_a``; for the one token that can have ``q > 1/2``, the sum of the others, in
    every number type (in floats ``1 - q_a`` near 0 would carry the rounding of ``q_a``, up to
    ``1e-13`` relative at ``q_a = 0.9997``, into ``w_a`` and every ``sigma`` above it, and is 0
    where ``q_a`` rounds to 1: so also in the wide floats that redo a float row, whose ``q_a``
    is that same float; in exact rationals, whose rows sum to 1, it is the same number)."""
    if qs[a] > 0.5:
        others = qs[:a] + qs[a + 1:]
        if isinstance(qs[a], float):
            return math.fsum(others)
        return mpmath.fsum(others) if isinstance(qs[a], mpmath.mpf) else sum(others, qs[a] * 0)
    return 1 - qs[a]


class _PairMass:
    """``Q([f, j), [j, t])`` in O(1) from range sums of ``q`` and ``w`` (``Q`` has rank 2)."""

    def __init__(self, q: _Cumulative, w: _Cumulative):
        self.q, self.w = q, w

    @classmethod
    def of_ranked(cls, qs: list, zero) -> tuple[_PairMass, list]:
        """The pair masses of ``q`` in rank order ``qs``, and ``w = q / (1 - q)``."""
        ws = [v / _mass_of_others(qs, a) for a, v in enumerate(qs)]
        return cls(_Cumulative(qs, zero), _Cumulative(ws, zero)), ws

    def across(self, f: int, j: int, t: int):
        q, w = self.q, self.w
        return w.span(f, j) * q.span(j, t + 1) + q.span(f, j) * w.span(j, t + 1)


def _exhausted_support(p, q, order, zero) -> PairParameters:
    """One token ``a`` with ``q > 0``: the drafts are ``a`` and the fixed token ``z`` of
    :func:`otm.draft_laws.without_replacement_law`'s convention, always. Selecting ``z`` with
    probability ``p_z`` gives ``x = (1 - p_z, p_z)`` on ``(a, z)``, hence ``alpha* = p_a + p_z``."""
    a, z = int(order[0]), int(greedy_order(q)[1])
    selection = zeros_like(p)
    selection[a], selection[z] = 1 - p[z], p[z]
    rank = np.full(len(p), -1, dtype=np.int64)
    rank[a] = 0
    return PairParameters(np.asarray(order), rank, 0, [zero, zero], [zero, zero], p, selection, p[a] + p[z],
                          "exact rationals" if is_exact(p) else "float64")


def realised_selection(q_ranked, levels, cut: int) -> list:  # [n]
    """``x'`` by rank: the selection law that ``levels`` ``[n + 1]`` *realise* for two drafts
    without replacement from ``q_ranked`` ``[n]`` (the ``q > 0`` of the tokens by rank, summing
    to 1; any number type): the higher member of a pair is selected, except that within a side
    of ``cut`` it yields to the lower one with probability ``min(levels between them)``.

    The check of levels computed elsewhere (the compiled verifier's): they carry the minimal
    flux exactly when this equals ``x``. ``x'_a = sigma_a + F'(a + 1) - F'(a)`` with the flux
    ``F'(j) = sum_{b < j <= c} Q_bc Y_bc`` summed through the nesting of the levels (their
    Cartesian tree by minimum, a level ``0`` at the cut): over the ancestors ``k`` of cut
    ``j``, ``(L(k) - L(parent)) Q_k(j)``, ``Q_k`` the pair mass across ``j`` inside ``k``'s
    ranks, each ancestor's part kept in five running sums. ``O(n)`` operations, so 200-bit floats
    (mpmath) check a row of ``V = 151,936`` in seconds."""
    n = len(q_ranked)
    zero = q_ranked[0] * 0
    ws = [v / (1 - v) for v in q_ranked]
    q_sums, w_sums = [zero], [zero]
    for qv, wv in zip(q_ranked, ws):
        q_sums.append(q_sums[-1] + qv)
        w_sums.append(w_sums[-1] + wv)
    level = [levels[j] if 0 < j < n and j != cut else zero for j in range(n + 1)]
    parent = _cartesian_parents(level, n)
    children = [[] for _ in range(n + 1)]
    for j in range(1, n):
        children[parent[j]].append(j)
    flux = [zero] * (n + 1)
    # (cut, ranks f..t, Theta, a1..a5); the root (index 0) spans every rank
    stack = [(c, 0, n - 1, (zero,) * 6) for c in children[0]]
    while stack:
        c, f, t, (theta, a1, a2, a3, a4, a5) = stack.pop()
        w_lo, q_lo = w_sums[c] - w_sums[f], q_sums[c] - q_sums[f]
        q_hi, w_hi = q_sums[t + 1] - q_sums[c], w_sums[t + 1] - w_sums[c]
        mass = w_lo * q_hi + q_lo * w_hi
        flux[c] = theta * mass + a1 * w_lo + a2 * q_lo + a3 * q_hi + a4 * w_hi + a5 + (level[c] - theta) * mass
        for child in children[c]:
            f2, t2 = (f, c - 1) if child < c else (c, t)
            dwl, dql = w_sums[f2] - w_sums[f], q_sums[f2] - q_sums[f]
            dwr, dqr = w_sums[t + 1] - w_sums[t2 + 1], q_sums[t + 1] - q_sums[t2 + 1]
            L = level[c]
            stack.append((child, f2, t2, (L, a1 + L * dqr, a2 + L * dwr, a3 + L * dwl, a4 + L * dql,
                                          a5 + dqr * a3 + dwl * a1 + dwr * a4 + dql * a2 + L * (dwl * dqr + dql * dwr))))
    return [ws[a] * q_sums[a] + q_ranked[a] * w_sums[a] + flux[a + 1] - flux[a] for a in range(n)]


def _cartesian_parents(level: list, n: int) -> list:  # [n + 1]
    """Parent of each cut ``1..n-1`` in the Cartesian tree of ``level`` by minimum (ties: the
    left one is the ancestor; ``0`` for the root), by the one-stack construction."""
    parent, stack = [0] * (n + 1), []
    for j in range(1, n):
        last = 0
        while stack and level[stack[-1]] > level[j]:
            last = stack.pop()
        if last:
            parent[last] = j
        parent[j] = stack[-1] if stack else 0
        stack.append(j)
    return parent


def yield_probability(params: PairParameters, low: int, high: int):
    """``Y``: probability that the pair of ranks ``low < high`` (same side) selects ``low``."""
    return min(params.levels[low + 1:high + 1])


def _pair_masses_of(params: PairParameters, q) -> _PairMass:
    return _PairMass.of_ranked([q[t] for t in params.order], params.flux[0] * 0)[0]


def yield_lower_bound(params: PairParameters, q, low: int, high: int):
    """The lower bound on a water-level yield from the flux
    (docs/optimal-verifier-proofs.md#bounds-on-a-water-level-from-the-flux): ``Y >=
    min_{low < j <= high} F(j) / Q_[f,t](j)``, with ``[f, t]`` the longest run of ranks around
    the pair whose inner cuts all carry flux and ``Q_I(j)`` the mass of the pairs inside ``I``
    across cut ``j``; 0 when a cut between the pair carries no flux (then ``Y = 0``).
    :func:`otm.rules.water_levels.bounds.span_lower_bound` on the pair masses."""
    run = first_run(params.flux, low, high)
    if run is None:
        return params.flux[0] * 0
    return span_lower_bound(params.flux, _pair_masses_of(params, q), run, low, high)


def yield_at_most(params: PairParameters, q, low: int, high: int, u) -> bool:
    """The upper bounds on a water-level yield from the flux
    (docs/optimal-verifier-proofs.md#bounds-on-a-water-level-from-the-flux): ``True`` proves
    ``Y <= u``. For ``s < u`` let ``W_s`` be ``[low, high]`` widened, within the run ``[f, t]`` of :func:`yield_lower_bound`, through
    the cuts whose bound ``F(i) / Q_[f,t](i)`` exceeds ``s``; if ``F(j) <= integral_0^u
    Q_{W_s}(j) ds`` at some cut ``j`` between the pair, ``Y <= u``. Tried at every such cut
    with the narrowest window ``W_u`` (``u Q_{W_u}(j)``, a lower bound of the integral), and
    with the integral at the cut of least bound
    (:func:`otm.rules.water_levels.bounds.span_at_most`). ``False`` proves nothing."""
    run = first_run(params.flux, low, high)
    return run is None or span_at_most(params.flux, _pair_masses_of(params, q), run, low, high, u)


def yield_decision(params: PairParameters, q, low: int, high: int, u) -> bool | None:
    """Whether ``u < Y`` for the pair of ranks ``low < high``, from the flux and the pair
    masses alone, without the levels: ``True`` when ``u`` is below :func:`yield_lower_bound`,
    ``False`` when :func:`yield_at_most` proves ``Y <= u``, ``None`` when neither settles it
    (:func:`otm.rules.water_levels.bounds.span_decision`). Any number type (exact in
    rationals); the batched verifier compiles the same decision."""
    return span_decision(params.flux, _pair_masses_of(params, q), low, high, u)


__all__ = [
    "COMPLEMENT_FLOOR", "RATIONAL_FALLBACK_SUPPORT", "pair_masses", "pair_parameters", "realised_selection",
    "with_representable_weights", "yield_at_most", "yield_decision", "yield_lower_bound", "yield_probability",
]
