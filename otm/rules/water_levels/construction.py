"""The water-level construction: ranks, cut, minimal flux and water levels, for any joint
draft law given by the masses of its draft sets.

Notation ``p`` target, ``q`` draft (docs/optimal-verifier.md#water-levels-for-drafts-without-replacement;
proofs in docs/optimal-verifier-proofs.md).

**Ranks and cut.** Support tokens get ranks ``0..n-1`` by ``p/q`` ascending (ties by id);
``sigma_a`` is the probability that rank ``a`` is the highest drafted (the max-ratio law) and
``T_j = sum_{a<j} sigma_a`` the probability that every draft falls below rank ``j``. The optimum
is ``alpha* = min_j f(j)``, ``f(j) = P_j + 1 - T_j`` (the prefix scan, docs/theory.md 1.3, 2.1),
``m`` the first minimiser: ``H`` = ranks ``< m``, ``U`` the others.

**Minimal flux.** A rule selects a member; ``F(j)``, the *flux* across cut ``j``, is the
probability that the highest member is at least ``j`` and the selected one below ``j``, so
``x_a = sigma_a + F(a + 1) - F(a)`` whatever the rule. On ``U`` from the top,
``F(a) = max(0, F(a + 1) - e_a)``, ``e = p - sigma``, so ``x <= p`` there; on ``H`` from the
bottom, ``F(a + 1) = max(0, F(a) + e_a)``, so ``x >= p`` there; both walks end at 0 on the cut
because ``m`` minimises ``f``. Then ``sum_y min(p_y, x_y) = alpha*``
(docs/optimal-verifier-proofs.md#the-minimal-flux-attains-the-optimum).

**Water levels.** The walk selects, with levels ``L(j)`` on the cuts and one uniform ``u``, the
lowest member reached from the highest one through cuts of level above ``u``. On an interval of
ranks ``[f, t]`` whose inner cuts all carry remaining flux, raise the level of every cut inside
by ``theta = min_j rem(j) / masses.across(f, j, t)`` (the mass of the draft sets the interval's
levels carry over cut ``j``), subtract, and recurse on the intervals where flux remains
(docs/optimal-verifier-proofs.md#water-levels-carry-the-minimal-flux). ``0 <= L <= 1`` in the ratio
order for drafts without replacement and i.i.d. drafts
(docs/optimal-verifier-proofs.md#water-levels-are-probabilities); a level outside is refused
(:class:`WaterLevelRangeError`) rather than returned.

The masses are a parameter (:func:`water_level_parameters`): :func:`otm.rules.water_levels.pair.pair_masses`
for two drafts, :func:`otm.rules.water_levels.set_masses.set_masses` (enumerated draft sets) or
:func:`otm.rules.water_levels.clock_masses.clock_set_masses` (the clock integral) for ``k``.

Number types are kept: exact Fraction inputs give an exact construction. Float inputs are
computed in float64 and redone in a wider arithmetic where float64 is not accurate enough
(docs/optimal-verifier.md#floats-and-certificates).
"""
from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from fractions import Fraction

import mpmath
import numpy as np

from ...errors import NotApplicableError
from ..enumeration import is_exact, support_size, zeros_like


@dataclass(frozen=True, eq=False)
class PairParameters:
    """The water levels of one row ``(p, q)`` for ``k`` drafts (module docstring; the name is
    historical: two drafts were the first case).

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


def water_level_parameters(p, q, order: np.ndarray, masses_of, widen=None, *,
                           clip_rounding: bool = False) -> PairParameters:
    """The water-level construction (module docstring) for any joint draft law whose
    masses ``masses_of(qs, zero) -> (masses, sigma)`` gives: ``qs`` the ``q > 0`` by rank,
    ``sigma[a]`` the probability that rank ``a`` is the highest drafted, ``masses.across(f,
    j, t)`` the mass of the draft sets inside ranks ``[f, t]`` whose highest member is at
    least ``j`` and whose highest member below ``j`` is at least ``f``
    (:func:`pair_masses` for two drafts without replacement, :mod:`otm.rules.water_levels.parameters`
    for ``k``; a ``masses_of`` with ``reads_q = False``, masses built already, is given ``qs =
    None``). ``order``: the ratio order, ``q = 0`` last; at least two tokens with
    ``q > 0``. Float inputs: float64 first, and where that is not accurate enough (a level
    above ``1 + 9e-13``) :func:`wider_parameters` with ``widen``.

    ``clip_rounding``: for callers that certify the levels by the selection law they realise
    (:mod:`otm.rules.water_levels.parameters`), a float level above 1 is set to 1 instead of
    refused, and ``arithmetic`` counts them. In exact arithmetic none is above 1 (water levels
    are probabilities), so in floats such a level is a remainder that rounding (or
    :func:`_minimal_flux`'s drop of a flux of at most 8 unit roundoffs next to one it keeps)
    leaves to a run of tiny mass, divided by that mass
    (docs/optimal-verifier.md#floats-and-certificates). Capping it leaves at most that
    remainder uncarried, which the certificate measures. Exact inputs ignore it."""
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
    :func:`otm.distributions.as_fractions`, exact rationals); by default
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
#: beyond :data:`otm.rules.water_levels.parameters.CERTIFICATE_TOLERANCE` on real rows
#: (``python -m research.optimal_wor.wor_water_levels``).
REMAINDER_FLOOR = 2


#: Precision of the fallback when float64 is not accurate enough.
FALLBACK_BITS = 256


class _NotARule(Exception):
    """A water level outside ``[0, 1]`` (its value is the message)."""


class WaterLevelRangeError(NotApplicableError):
    """The construction refused: a water level came out outside ``[0, 1]`` even in the wider
    arithmetic (impossible in exact arithmetic on exact masses:
    docs/optimal-verifier-proofs.md#water-levels-are-probabilities)."""


def _refusal(failure: _NotARule) -> WaterLevelRangeError:
    return WaterLevelRangeError(f"water level {failure} outside [0, 1]: the construction is not a rule here "
                              "(impossible in the ratio order in exact arithmetic: "
                              "docs/optimal-verifier-proofs.md#water-levels-are-probabilities; please report the instance)")


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
    (:mod:`otm.rules.water_levels.bounds`) and the canonical check need, without the levels.

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


def _nest(masses, flux: list, lo: int, hi: int, levels: list, unit) -> None:
    """:func:`_water_levels`, or in float64 the masses' own compiled nesting where they carry
    one (``masses.water_levels``, the compiled clock masses of the batched verifier:
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
        if min(across) <= 0:  # impossible in the ratio order (water levels are probabilities): flux no set can carry
            raise _NotARule("infinite (flux across a cut that no draft set of the run crosses)")
        theta = min(remaining[j] / mass for j, mass in zip(cuts, across))
        for j, mass in zip(cuts, across):
            remaining[j] -= theta * mass
            levels[j] += theta
            raised[j] += 1
        stack.append((f, t))


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


__all__ = [
    "FALLBACK_BITS", "FluxSetup", "PairParameters", "REMAINDER_FLOOR", "WaterLevelRangeError", "flux_runs", "flux_setup",
    "level_components", "rounded_back", "water_level_parameters", "wider_parameters",
]
