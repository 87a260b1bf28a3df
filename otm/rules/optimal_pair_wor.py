"""Rule ``"optimal_pair_wor"``: two drafts without replacement, the optimum by water levels.

Derived here (docs/optimal-verifier.md, section 8, "Two drafts: the water-level rule");
notation ``p`` target, ``q`` draft. The two drafts are distinct, drawn successively from
``q``: ``a`` then ``b`` with probability ``w_a q_b``, ``w = q / (1 - q)``, so the unordered
pair ``{a, b}`` has mass ``Q_ab = w_a q_b + q_a w_b``.

**Ranks and cut.** Support tokens get ranks ``0..n-1`` by ``p/q`` ascending (ties by id);
``C_j``, ``W_j``, ``P_j`` are the masses of ``q``, ``w``, ``p`` below rank ``j``. Both drafts
fall in the first ``j`` ranks with probability ``T_j = C_j W_j - sum_{a<j} w_a q_a``
(computed as ``sum_{a<j} sigma_a``, below, which does not cancel); the
optimum is ``alpha* = min_j f(j)``, ``f(j) = P_j + 1 - T_j`` (docs/theory.md 1.3, 2.1; the
prefix scan without replacement), and ``m`` is the first minimiser: ``H`` = ranks ``< m``,
``U`` the others.

**Yields.** The member of higher rank wins (selection law ``sigma_a = w_a C_a + q_a W_a``),
except that within a side it yields to the lower member ``b`` of ``{b, c}`` with probability
``Y_bc``. With the flux ``F(j) = sum_{b < j <= c} Q_bc Y_bc`` across the cut below rank ``j``,
``x_a = sigma_a + F(a + 1) - F(a)``.

**Minimal flux.** On ``U`` from the top, ``F(a) = max(0, F(a + 1) - e_a)``, ``e = p - sigma``,
so ``x_a = min(p_a, sigma_a + F(a + 1)) <= p_a``; on ``H`` from the bottom,
``F(a + 1) = max(0, F(a) + e_a)``, so ``x_a = max(p_a, sigma_a - F(a)) >= p_a``. No flux
crosses the cut: ``f(j) >= f(m)`` says that every sum of ``e`` over ranks ``m..j-1`` is
``>= 0`` and every sum over ranks ``j..m-1`` is ``<= 0``, which is exactly what makes both
walks end at 0 there. Then ``sum_y min(p_y, x_y) = x(U) + p(H) = 1 - T_m + P_m = alpha*``,
and a ``U`` member is selected whenever the pair has one.

**Water levels.** The flux is realised by ``Y_bc = min_{b < j <= c} L(j)``: on an interval
of ranks ``[f, t]`` where the remaining flux is positive at every inner cut, raise the level
of every pair inside by ``theta = min_j rem(j) / Q([f, j), [j, t])`` (the pairs of the
interval across cut ``j``), subtract, and recurse on the intervals where the remaining flux
is still positive; ``L(j)`` is the total level raised over cut ``j``. Cost ``O(n * depth)``.

The construction takes the pair masses as a function (:func:`water_level_parameters`, with
:func:`pair_masses`): :mod:`otm.rules.optimal_wor` runs it on the masses of ``k``-draft sets.

**What is proved and what is checked.** ``L >= 0`` by construction, and ``L <= 1``
(docs/optimal-verifier.md, section 8, Theorem 5: the residual of every run of the nesting keeps
``y / q`` nondecreasing, and the exchange inequality of the draft law then bounds every cut's
emptying level by 1; each step is checked by :mod:`otm.rules.water_level_residuals`). So the
rule is lossless (canonical decomposition: the selected draft is checked against ``x``,
Khisti et al. 2025) and accepts ``alpha*(p, Q_wor)``. :func:`pair_parameters` still raises
:class:`otm.errors.NotApplicableError` on a level above 1 rather than return something that
is not a rule: in floats, a guard on rounding.

Number types are kept: exact Fraction inputs give an exact construction and law. Float
inputs are computed in float64 with the care described in docs/optimal-verifier.md, section 8
("Floats"), and redone with 256-bit floats where float64 is not accurate enough.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
from dataclasses import dataclass
from fractions import Fraction

import mpmath
import numpy as np

from ..distributions import as_fractions, check_draft_count
from ..draft_laws import greedy_order, without_replacement_law
from ..errors import InvalidDraftCountError, NotApplicableError
from ..formulations.prefix_scan import ratio_order
from .base import RuleLaw
from .enumeration import (
    canonical_output_law,
    count_without_replacement,
    enumerated_rule_law,
    is_exact,
    resolve_method,
    support_size,
    validate_one_q,
    zeros_like,
)
from .water_level_bounds import first_run, span_at_most, span_decision, span_lower_bound


@dataclass(frozen=True, eq=False)
class PairParameters:
    """The rule, computed once per ``(p, q)`` (module docstring).

    Attributes:
        order: ``[n]`` token ids with ``q > 0``, ``p/q`` ascending.
        rank: ``[V]`` rank of each token, ``-1`` where ``q = 0``.
        cut: ``m``, the number of ranks in ``H``.
        levels: ``[n + 1]`` ``L(j)`` for the cut below rank ``j`` (0 at ``j = 0, m, n``).
        flux: ``[n + 1]`` the minimal flux ``F(j)``.
        target: ``[V]`` ``p``.
        selection: ``[V]`` ``x``, the law of the selected draft.
        acceptance: ``sum min(p, x) = alpha*(p, Q_wor)``.
        arithmetic: how it was computed (``"float64"``, ``"exact rationals"``, or wide floats
            from float inputs where float64 was not accurate enough).
    """

    order: np.ndarray  # [n]
    rank: np.ndarray  # [V]
    cut: int
    levels: list  # [n + 1]
    flux: list  # [n + 1]
    target: np.ndarray  # [V]
    selection: np.ndarray  # [V]
    acceptance: object
    arithmetic: str


def pair_parameters(p, q) -> PairParameters:
    """Ranks, cut, minimal flux and water levels for two drafts without replacement from
    ``q`` against ``p`` (module docstring); one token with ``q > 0`` is the exhausted-support
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


def water_level_parameters(p, q, order: np.ndarray, masses_of, widen=None, *,
                           clip_rounding: bool = False) -> PairParameters:
    """The water-level construction (module docstring) for any joint draft law whose
    masses ``masses_of(qs, zero) -> (masses, sigma)`` gives: ``qs`` the ``q > 0`` by rank,
    ``sigma[a]`` the probability that rank ``a`` is the highest drafted, ``masses.across(f,
    j, t)`` the mass of the draft sets inside ranks ``[f, t]`` whose highest member is at
    least ``j`` and whose highest member below ``j`` is at least ``f``
    (:func:`pair_masses` for two drafts without replacement, :mod:`otm.rules.optimal_wor`
    for ``k``; a ``masses_of`` with ``reads_q = False``, masses built already, is given ``qs =
    None``). ``order``: the ratio order, ``q = 0`` last; at least two tokens with
    ``q > 0``. Float inputs: float64 first, and where that is not accurate enough (a level
    above ``1 + 9e-13``) :func:`wider_parameters` with ``widen``.

    ``clip_rounding``: for callers that certify the levels by the selection law they realise
    (:mod:`otm.rules.optimal_wor`), a float level above 1 is set to 1 instead of refused, and
    ``arithmetic`` counts them. In exact arithmetic none is above 1 (Theorem 5), so in floats
    such a level is a remainder that rounding (or :func:`_minimal_flux`'s drop of a flux of at
    most 8 unit roundoffs next to one it keeps) leaves to a run of tiny mass: on a real row,
    ``1.2e-18`` left at a cut whose last run has a mass of ``1.0e-32`` across it, a level of
    ``1.1e14`` (docs/optimal-verifier.md, section 8, "Levels above 1 by rounding"). Capping it
    leaves at most that remainder uncarried, which the certificate measures. Exact inputs
    ignore it."""
    try:
        return _construct(p, q, order, masses_of, clip_rounding)
    except _NotARule as failure:
        if is_exact(p):
            raise _refusal(failure) from None
    return wider_parameters(p, q, order, masses_of, widen, clip_rounding=clip_rounding)


def wider_parameters(p, q, order: np.ndarray, masses_of, widen=None,
                     reason: str = "float64 not accurate enough", *, clip_rounding: bool = False) -> PairParameters:
    """:func:`water_level_parameters` redone from float inputs in a wider arithmetic and
    rounded back: ``widen(values)`` gives the inputs exactly in it (for example
    :func:`otm.rules.optimal_wor.as_fractions`, exact rationals); by default
    :data:`FALLBACK_BITS`-bit floats (mpmath). ``arithmetic`` says which, and ``reason``;
    ``clip_rounding`` as in :func:`water_level_parameters` (wide floats only)."""
    precision = mpmath.workprec(FALLBACK_BITS) if widen is None else contextlib.nullcontext()
    with precision:
        try:  # the same ranks: renormalising multiplies every p/q by one constant
            kind = f"{FALLBACK_BITS}-bit floats" if widen is None else "exact rationals from the float inputs"
            wide = _construct((widen or _widened)(p), (widen or _widened)(q), order, masses_of, clip_rounding,
                              f"{kind} ({reason})")
        except _NotARule as failure:
            raise _refusal(failure) from None
    return rounded_back(wide, p, wide.arithmetic)


def rounded_back(wide: PairParameters, p, arithmetic: str) -> PairParameters:
    """``wide`` (built in a wider arithmetic from the float inputs ``p``) with its levels, flux,
    selection and acceptance rounded to float64, its target ``p`` itself."""
    return dataclasses.replace(
        wide, levels=[float(v) for v in wide.levels], flux=[float(v) for v in wide.flux], target=p,
        selection=np.array([float(v) for v in wide.selection]), acceptance=float(wide.acceptance),
        arithmetic=arithmetic)


#: A cut's remaining flux counts as zero below ``REMAINDER_FLOOR * unit * (raised + 1) * F(j)``
#: (:func:`_water_levels`): the rounding bound itself. A larger floor leaves flux unrealised
#: beyond the certificate's tolerance of otm.rules.optimal_wor on real rows (research/optimal_wor/
#: JOURNAL.md, section 8, "The rounding floor"; ``python -m research.optimal_wor.wor_water_levels``).
REMAINDER_FLOOR = 2

#: Precision of the fallback when float64 is not accurate enough.
FALLBACK_BITS = 256

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


class _NotARule(Exception):
    """A water level outside ``[0, 1]`` (its value is the message)."""


class WaterLevelRangeError(NotApplicableError):
    """The construction refused: a water level came out outside ``[0, 1]`` even in the wider
    arithmetic (impossible in exact arithmetic on exact masses: Theorem 5)."""


def _refusal(failure: _NotARule) -> WaterLevelRangeError:
    return WaterLevelRangeError(f"water level {failure} outside [0, 1]: the construction is not a rule here "
                              "(impossible in the ratio order in exact arithmetic, docs/optimal-verifier.md "
                              "Theorem 5; please report the instance)")


def _widened(values: np.ndarray) -> np.ndarray:
    """The float inputs as wide floats (exactly), renormalised in the wide precision."""
    wide = [mpmath.mpf(float(v)) for v in values]
    total = mpmath.fsum(wide)
    return np.array([v / total for v in wide], dtype=object)


def _rounding_unit(zero):
    """0 for exact Fractions, else the unit roundoff of the number type."""
    if isinstance(zero, Fraction):
        return 0
    if isinstance(zero, float):
        return float(np.finfo(np.float64).eps)
    return mpmath.mpf(2) ** (1 - mpmath.mp.prec)


@dataclass(frozen=True, eq=False)
class FluxSetup:
    """The construction up to its nesting (:func:`flux_setup`): what the walk's bounds
    (:mod:`otm.rules.water_level_bounds`) and the canonical check need, without the levels.

    Attributes:
        order, rank, cut, flux, target, selection, acceptance: as in :class:`PairParameters`.
        masses: the set masses of the ranks (``masses.across(f, j, t)``).
        unit: the unit roundoff of the arithmetic (0 in exact rationals).
    """

    order: np.ndarray  # [n]
    rank: np.ndarray  # [V]
    cut: int
    flux: list | np.ndarray  # [n + 1]; a float64 array where compiled masses walked it
    masses: object
    target: np.ndarray  # [V]
    selection: np.ndarray  # [V]
    acceptance: object
    unit: object


def flux_setup(p, q, order: np.ndarray, masses_of) -> FluxSetup:
    """Ranks, cut, minimal flux and selection law ``x`` of the construction (module
    docstring), in the inputs' number type, from the masses ``masses_of`` gives
    (:func:`water_level_parameters`); no levels. On float rows, masses that offer
    ``minimal_flux(p by rank, cut, unit)`` (the compiled clock masses) walk the flux themselves,
    by the float operations of :func:`_minimal_flux` on their own ``sigma``."""
    n = support_size(q)
    order = order[:n]
    floats = _float_array(p)  # the same float operations in numpy, on Python floats in the loops
    zero = 0.0 if floats else p[0] * 0
    reads_q = getattr(masses_of, "reads_q", True)  # masses built already do not: skip a row's list of floats
    if floats:  # p by rank as float64 (exactly), for numpy; lists only where loops read them
        ps, qs = np.asarray(p, dtype=np.float64)[order], q[order].tolist() if reads_q else None
    else:
        ps, qs = [p[t] for t in order], [q[t] for t in order] if reads_q else None
    masses, sigma = masses_of(qs, zero)
    m = _optimal_cut(ps, sigma, zero, floats)
    unit = _rounding_unit(zero)
    if floats and hasattr(masses, "minimal_flux"):  # compiled: the same float operations
        flux = masses.minimal_flux(ps, m, unit)
    elif floats:  # the Python walks on Python floats
        flux = _minimal_flux(ps.tolist(), np.asarray(sigma, dtype=np.float64).tolist(), m, zero, unit)
    else:
        flux = _minimal_flux(ps, sigma, m, zero, unit)
    selection = zeros_like(p)
    if floats:  # sigma_a + F(a + 1) - F(a), as below
        selection[order] = (np.asarray(sigma, dtype=np.float64) + flux[1:]) - np.asarray(flux[:-1])
    else:
        for a in range(n):
            selection[order[a]] = sigma[a] + flux[a + 1] - flux[a]
    rank = np.full(len(p), -1, dtype=np.int64)
    rank[np.asarray(order, dtype=np.int64)] = np.arange(n)
    if isinstance(zero, float):  # one pass in numpy over a real vocabulary
        acceptance = float(np.minimum(np.asarray(p, dtype=np.float64), selection).sum())
    else:
        acceptance = sum((min(x, y) for x, y in zip(p, selection)), zero)
    return FluxSetup(np.asarray(order), rank, m, flux, masses, p, selection, acceptance, unit)


def _float_array(p) -> bool:
    """Whether ``p`` is an array of floats (the verifiers' rows), which :func:`flux_setup` runs
    through numpy and Python floats: the same IEEE operations in the same order as its
    generic loops, so the same values to the bit (tested against the loops on the same floats
    given as an object array)."""
    return isinstance(p, np.ndarray) and p.dtype.kind == "f"


def _optimal_cut(ps: list, sigma: list, zero, floats: bool) -> int:
    """``m``, the first minimiser of ``f(j) = P_j + 1 - T_j`` over ``j = 0..n``, with ``P_j``
    and ``T_j = sum_{a<j} sigma_a`` summed upward (a sum of nonnegative terms: the form ``C_j
    W_j - sum w q`` cancels badly when some ``w`` is large). ``floats``: the running sums by
    ``np.cumsum``, which adds in the same order."""
    if floats:
        P, T = (np.concatenate(([0.0], np.cumsum(values, dtype=np.float64))) for values in (ps, sigma))
        return int(np.argmin((P + 1) - T))
    values, P, T = [], zero, zero
    for j in range(len(ps) + 1):
        values.append(P + 1 - T)
        if j < len(ps):
            P, T = P + ps[j], T + sigma[j]
    return min(range(len(ps) + 1), key=lambda j: (values[j], j))


def _construct(p, q, order: np.ndarray, masses_of, clip_rounding: bool = False,
               arithmetic: str | None = None) -> PairParameters:
    """The construction in the inputs' number type; ``arithmetic`` names it (by default exact
    rationals or float64), followed by the count of the levels ``clip_rounding`` set to 1."""
    setup = flux_setup(p, q, order, masses_of)
    n, unit, flux = len(setup.order), setup.unit, setup.flux
    levels = [flux[0] * 0] * (n + 1)
    for lo, hi in ((setup.cut, n - 1), (0, setup.cut - 1)):
        _nest(setup.masses, flux, lo, hi, levels, unit)
    tolerance = 4096 * unit  # 9e-13 in float64, 0 in rationals
    capped = ""
    if clip_rounding and unit != 0:
        above = sum(1 for v in levels if v > 1 + tolerance)
        levels = [min(v, 1 + v * 0) for v in levels]
        capped = f", {above} level{'s' if above != 1 else ''} above 1 by rounding set to 1" if above else ""
    if min(levels) < -tolerance or max(levels) > 1 + tolerance:
        raise _NotARule(f"{float(max(levels)):.6g}")
    return PairParameters(setup.order, setup.rank, setup.cut, levels, flux, p, setup.selection, setup.acceptance,
                          (arithmetic or ("exact rationals" if unit == 0 else "float64")) + capped)


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


def _minimal_flux(ps: list, sigma: list, m: int, zero, unit) -> list:  # [n + 1]
    """``F(j)``: from the top of ``U`` down and from the bottom of ``H`` up (module docstring).
    Both walks end at 0 on the cut (checked in rationals). In floats, a flux of at most
    ``8 unit`` is dropped: the walks add roundings of that size (and a near-tie between two
    prefixes, below the resolution of ``f``, can leave one); leaving it uncarried moves ``x``
    by as little."""
    n = len(ps)
    flux = [zero] * (n + 1)
    for a in range(n - 1, m - 1, -1):
        flux[a] = max(zero, flux[a + 1] - (ps[a] - sigma[a]))
    from_top = flux[m]
    for a in range(m):
        flux[a + 1] = max(zero, flux[a] + (ps[a] - sigma[a]))
    if unit == 0 and (from_top != 0 or flux[m] != 0):
        raise AssertionError("the minimal flux crosses the optimal cut")
    flux[m] = zero
    return [zero if value <= 8 * unit else value for value in flux]


class _Cumulative:
    """Sums of ``values`` over rank ranges in O(1). In floats the running sums carry their
    rounding errors alongside (Knuth's error-free TwoSum), so a short range far up the ranks
    keeps its relative accuracy; a plain difference of running sums near 1 would lose it."""

    def __init__(self, values: list, zero):
        total, error = [zero], [zero]
        for v in values:
            s = total[-1] + v
            if isinstance(s, float):
                back = s - total[-1]
                error.append(error[-1] + ((total[-1] - (s - back)) + (v - back)))
            else:
                error.append(zero)
            total.append(s)
        self.total, self.error = total, error

    def span(self, a: int, b: int):
        """``sum(values[a:b])``."""
        return (self.total[b] - self.total[a]) + (self.error[b] - self.error[a])


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


def _nest(masses, flux: list, lo: int, hi: int, levels: list, unit) -> None:
    """:func:`_water_levels`, or in float64 the masses' own compiled nesting where they carry
    one (``masses.water_levels``, :class:`decoding.verifiers.optimal_wor_numba.CompiledClockSetMasses`:
    the same steps and rounding floor)."""
    if isinstance(unit, float) and hasattr(masses, "water_levels"):
        if not masses.water_levels(flux, lo, hi, levels, unit):
            raise _NotARule("infinite (flux across a cut that no draft set of the run crosses)")
        return
    _water_levels(masses, flux, lo, hi, levels, unit)


def _water_levels(masses, flux: list, lo: int, hi: int, levels: list, unit) -> None:
    """Raise ``levels[j]`` for the cuts ``j = lo+1..hi`` of ranks ``lo..hi`` until the
    nested intervals carry ``flux`` exactly (module docstring); ``masses.across(f, j, t)``
    the mass an interval's levels carry over cut ``j`` (:func:`water_level_parameters`).

    In floats a cut's remaining flux counts as zero below its rounding bound: each level
    subtracts at most ``F(j)`` with an error below ``2 unit F(j)``, so after ``c`` levels the
    remainder is known to ``(c + 1) * 2 unit F(j)`` (:data:`REMAINDER_FLOOR`). Leaving that
    much uncarried changes ``x`` by as little; a remainder above it that is only rounding gets
    a raise of its own, which carries it (the certificates measure what the levels realise)."""
    if hi <= lo:
        return
    remaining = list(flux)
    raised = [0] * len(flux)

    def empty(j):
        return remaining[j] <= REMAINDER_FLOOR * unit * (raised[j] + 1) * flux[j]

    stack = [(lo, hi)]
    while stack:
        f, t = stack.pop()
        cuts = range(f + 1, t + 1)
        runs, start = [], None
        for j in cuts:
            if not empty(j) and start is None:
                start = j
            elif empty(j) and start is not None:
                runs.append((start, j - 1)); start = None
        if start is not None:
            runs.append((start, t))
        if runs != [(f + 1, t)]:
            stack.extend((a - 1, b) for a, b in runs)
            continue
        across = [masses.across(f, j, t) for j in cuts]
        if min(across) <= 0:  # impossible in the ratio order (Theorem 5, claim (d)): flux no set can carry
            raise _NotARule("infinite (flux across a cut that no draft set of the run crosses)")
        theta = min(remaining[j] / mass for j, mass in zip(cuts, across))
        for j, mass in zip(cuts, across):
            remaining[j] -= theta * mass
            levels[j] += theta
            raised[j] += 1
        stack.append((f, t))


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
    ranks, each ancestor's part kept in the five sums of
    :mod:`decoding.verifiers.optimal_pair_wor_numba`. ``O(n)`` operations, so 200-bit floats
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


def flux_runs(flux, lo: int, hi: int) -> np.ndarray:
    """``[R, 2]``: the maximal runs ``[f, t]`` of ranks within ``lo..hi`` whose inner cuts all
    carry flux (``flux[j] > 0`` for ``f < j <= t``): the first runs of the nesting."""
    positive = np.concatenate([[False], np.asarray(flux[lo + 1:hi + 1], dtype=np.float64) > 0, [False]])
    edges = np.flatnonzero(np.diff(positive.astype(np.int8)))
    return np.stack([edges[::2] + lo, edges[1::2] + lo], axis=1)


def level_components(levels: list, n: int) -> list:
    """``[(base, top, [(f, t), ...]), ...]``: between consecutive distinct levels ``base < top``
    (0 and 1 included, levels of 1 or more left out) the walk of every level in ``[base, top)``
    selects, in the component ``[f, t]`` of the highest member (the ranks joined by cuts of
    level above ``base``), its lowest member; the components of ``levels`` ``[n + 1]``, bottom
    first, in the number type of the levels."""
    zero = levels[0] * 0
    breaks = sorted({zero, *(v for v in levels[1:n] if v < 1)}) + [zero + 1]
    out = []
    for base, top in zip(breaks, breaks[1:]):
        components, f = [], 0
        for r in range(1, n + 1):
            if r == n or levels[r] <= base:
                components.append((f, r - 1))
                f = r
        out.append((base, top, components))
    return out


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
    """The lower bound of docs/optimal-verifier.md, Lemma 9 (i) (bounds on a water-level yield
    from the flux; section 8, our derivation): ``Y >=
    min_{low < j <= high} F(j) / Q_[f,t](j)``, with ``[f, t]`` the longest run of ranks around
    the pair whose inner cuts all carry flux and ``Q_I(j)`` the mass of the pairs inside ``I``
    across cut ``j``; 0 when a cut between the pair carries no flux (then ``Y = 0``).
    :func:`otm.rules.water_level_bounds.span_lower_bound` on the pair masses."""
    run = first_run(params.flux, low, high)
    if run is None:
        return params.flux[0] * 0
    return span_lower_bound(params.flux, _pair_masses_of(params, q), run, low, high)


def yield_at_most(params: PairParameters, q, low: int, high: int, u) -> bool:
    """The upper bounds of docs/optimal-verifier.md, Lemma 9 (ii) and (iii): ``True`` proves
    ``Y <= u``. For ``s < u`` let ``W_s`` be ``[low, high]`` widened, within the run ``[f, t]`` of :func:`yield_lower_bound`, through
    the cuts whose bound ``F(i) / Q_[f,t](i)`` exceeds ``s``; if ``F(j) <= integral_0^u
    Q_{W_s}(j) ds`` at some cut ``j`` between the pair, ``Y <= u``. Tried at every such cut
    with the narrowest window ``W_u`` (``u Q_{W_u}(j)``, a lower bound of the integral), and
    with the integral at the cut of least bound
    (:func:`otm.rules.water_level_bounds.span_at_most`). ``False`` proves nothing."""
    run = first_run(params.flux, low, high)
    return run is None or span_at_most(params.flux, _pair_masses_of(params, q), run, low, high, u)


def yield_decision(params: PairParameters, q, low: int, high: int, u) -> bool | None:
    """Whether ``u < Y`` for the pair of ranks ``low < high``, from the flux and the pair
    masses alone, without the levels: ``True`` when ``u`` is below :func:`yield_lower_bound`,
    ``False`` when :func:`yield_at_most` proves ``Y <= u``, ``None`` when neither settles it
    (:func:`otm.rules.water_level_bounds.span_decision`). Any number type (exact in
    rationals); the verifier's compiled form is
    :func:`decoding.verifiers.optimal_pair_wor_numba.yield_decision`."""
    return span_decision(params.flux, _pair_masses_of(params, q), low, high, u)


def selection_law(params: PairParameters, draft_tuple) -> list:  # [2]
    """``P(Z = x_j | x)`` for the two positions of the drafted pair."""
    a, b = (int(params.rank[int(t)]) for t in draft_tuple)
    one = params.target[:1].sum() * 0 + 1
    if min(a, b) < 0:  # exhausted support: select the fixed q = 0 draft with probability x of it
        take = params.selection[int(draft_tuple[0 if a < 0 else 1])]
        return [take, one - take] if a < 0 else [one - take, take]
    low, high = min(a, b), max(a, b)
    if low < params.cut <= high:
        take_low = one * 0
    else:
        take_low = yield_probability(params, low, high)
    return [take_low, one - take_low] if a == low else [one - take_low, take_low]


def conditional_output_law(params: PairParameters, draft_tuple):
    """``(K(. | x) [V], P(a draft is accepted | x))``: select by :func:`selection_law`, accept
    ``Z`` with ``min(1, p(Z) / x(Z))``, else draw from ``norm(max(p - x, 0))``."""
    return canonical_output_law(params.target, params.selection, draft_tuple, selection_law(params, draft_tuple))


def exact_law(p, q, k: int, *, method: str = "auto") -> RuleLaw:
    """Exact law of the rule for ``k = 2`` drafts without replacement.

    ``method="closed_form"``: the acceptance ``sum min(p, x)`` (``alpha*``) and the output
    law ``p`` from :func:`pair_parameters`; ``"enumeration"``: the coupling over every ordered
    pair (also ``accepted_per_token``, ``coupling``). ``details``: ``method``, ``cut``,
    ``selection`` (``x``), ``levels``, ``draft_accepted``, ``arithmetic``.

    >>> law = exact_law([0.5, 0.5, 0.0], [0.9, 0.05, 0.05], 2)
    >>> round(float(law.acceptance), 12)        # i.i.d. drafts: 0.5 + 1 - 0.95^2 = 0.5975
    1.0
    """
    if check_draft_count(k) != 2:
        raise InvalidDraftCountError(f"rule 'optimal_pair_wor' is defined for k = 2 only, got k={k}")
    p, q = validate_one_q(p, q, "rule 'optimal_pair_wor' draws both drafts from one q ([V] vector)")
    params = pair_parameters(p, q)
    method = resolve_method(method, count_without_replacement(q, 2), True, "optimal_pair_wor", len(p))
    details = {"method": method, "cut": params.cut, "selection": params.selection, "levels": params.levels,
               "draft_accepted": params.acceptance, "arithmetic": params.arithmetic}
    if method == "closed_form":
        return RuleLaw(params.acceptance, p.copy(), None, details)
    result = enumerated_rule_law(p, without_replacement_law(q, 2), lambda draft: conditional_output_law(params, draft), details)
    if is_exact(p) and result.details["draft_accepted"] != params.acceptance:
        raise AssertionError("the enumerated acceptance differs from sum min(p, x)")
    return result


__all__ = [
    "FluxSetup", "PairParameters", "conditional_output_law", "exact_law", "flux_runs", "flux_setup", "pair_masses", "pair_parameters", "realised_selection",
    "rounded_back", "selection_law", "WaterLevelRangeError", "water_level_parameters", "wider_parameters",
    "yield_at_most", "yield_decision", "yield_lower_bound", "yield_probability",
]
