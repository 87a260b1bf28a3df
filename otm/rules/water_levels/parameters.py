"""The water levels of one row for ``k`` drafts without replacement: which masses, which
arithmetic, and the certificate.

:func:`wor_parameters` builds a row's levels (:mod:`otm.rules.water_levels.construction`) on
the pair masses for ``k = 2`` (:mod:`otm.rules.water_levels.pair`), on the enumerated draft
sets for ``k >= 3`` (:mod:`otm.rules.water_levels.set_masses`), or, for float rows with too
many draft tuples to enumerate, on the clock integral's masses
(:mod:`otm.rules.water_levels.clock_masses`). Float levels are *certified*: the selection law
they realise must equal ``x`` within :data:`CERTIFICATE_TOLERANCE`, else the row is redone in a
wider arithmetic or refused (docs/optimal-verifier.md#floats-and-certificates).
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from ...distributions import as_fractions, check_draft_count
from ...draft_laws import MAX_ENUMERATED_TUPLES, greedy_order, without_replacement_law
from ...errors import InvalidDraftCountError, NotApplicableError
from ...formulations.prefix_scan import ratio_order
from ..enumeration import MAX_RULE_ENUMERATION, TUPLE_COUNT_CAP, count_without_replacement, is_exact, support_size, zeros_like
from .clock_masses import RINGING_FLOOR, ClockSetMasses, built_set_masses, node_count
from .clock_masses import realised_selection as clock_realised_selection
from .construction import FluxSetup, PairParameters, WaterLevelRangeError, flux_setup, water_level_parameters, wider_parameters
from .pair import pair_parameters
from .set_masses import set_masses


def wor_parameters(p, q, k: int, *, clock_masses=ClockSetMasses) -> PairParameters:
    """Ranks, cut, minimal flux and water levels for ``k`` drafts without replacement from
    ``q`` against ``p`` (module docstring): :func:`otm.rules.water_levels.pair.pair_parameters`
    for ``k = 2``. For ``k >= 3``: exact inputs in exact rationals; float inputs in float64
    (:class:`FloatSetMasses`), *certified*: the selection law that the float levels realise,
    summed over every draft set, must equal ``x`` within :data:`CERTIFICATE_TOLERANCE` (a float
    level above 1 is rounding, set to 1 before the certificate measures it); where it does not,
    or where float64 fails otherwise, the construction is redone in exact rationals
    from the same floats (converted exactly) and rounded back, or, above
    :data:`otm.rules.enumeration.MAX_RULE_ENUMERATION` tuples, in 256-bit floats on the
    float64 set masses and certified again (``arithmetic`` says which); past
    :data:`otm.draft_laws.MAX_ENUMERATED_TUPLES` tuples, with the set masses and the
    certificate of the clock integral (:func:`_clock_parameters`), computed by
    ``clock_masses`` (:class:`~otm.rules.water_levels.clock_masses.ClockSetMasses`, or its compiled
    twin, which the batched verifier passes), which says from how many tuples on it is
    preferred (``enumerate_up_to``; 1,000 tuples for the compiled twin); where it refuses a row whose tuples can be enumerated, they are. Fewer
    than ``k`` tokens with ``q > 0`` is the exhausted-support convention of
    :func:`otm.draft_laws.without_replacement_law` (no construction: in the inputs' own
    arithmetic, float64 for floats)."""
    k = check_draft_count(k)
    if k > len(p):
        raise InvalidDraftCountError(f"k={k} drafts without replacement from a vocabulary of {len(p)} tokens")
    if k == 2:
        return pair_parameters(p, q)
    tuples = count_without_replacement(q, k)
    limit = MAX_RULE_ENUMERATION if is_exact(p) else MAX_ENUMERATED_TUPLES
    order = ratio_order(p, q)
    n = support_size(q)
    if _takes_clock_path(p, n, k, tuples, clock_masses):
        try:
            return _clock_parameters(p, q, order, n, k, tuples, clock_masses)
        except NotApplicableError:
            if tuples > limit:
                raise  # else the tuples are few enough to enumerate: below
    if tuples > limit:
        raise NotApplicableError(f"rule 'optimal_wor' at k={k} builds its levels from all {_counted(tuples)} draft tuples, above "
                                 f"the limit of {limit:,} for exact inputs; float inputs use the clock integral")
    if is_exact(p):
        return _exact_parameters(p, q, order, n, k)
    if n <= k:  # no construction: float64 is exact up to the roundings of p's own sums
        return _deterministic_set(np.asarray(p, dtype=np.float64) / float(np.sum(p)), q, order, n, k)
    small = tuples <= MAX_RULE_ENUMERATION  # the exact construction is affordable
    widen = as_fractions if small else None  # else 256-bit floats on the float64 set masses
    params = water_level_parameters(p, q, order, set_masses(k), widen=widen, clip_rounding=True)
    if params.arithmetic.startswith("float64") and realised_error(params, q, k) > CERTIFICATE_TOLERANCE:
        params = wider_parameters(p, q, order, set_masses(k), widen=widen, reason="float64 levels did not realise x",
                                  clip_rounding=True)
    if not small and realised_error(params, q, k) > CERTIFICATE_TOLERANCE:
        raise NotApplicableError(f"rule 'optimal_wor': its levels do not realise x within {CERTIFICATE_TOLERANCE:g} "
                                 f"here, even in wide floats, and {_counted(tuples)} draft tuples are too many for rationals")
    return params


#: Seconds per draft of every ordered draft tuple of a float row whose set masses are enumerated
#: (the masses, the nesting on them and the certificate): :func:`estimated_seconds`, measured by
#: ``python scripts/bench_water_level_cost.py``.
ENUMERATED_SECONDS_PER_DRAFT = 1e-5

#: Seconds per entry (rank x quadrature node x draft) of a float row built on the clock integral
#: (its tables, the passes over every run of the nesting, the certificate): the same script.
CLOCK_SECONDS_PER_ENTRY = 5e-5


def estimated_seconds(support: int, k: int) -> float:
    """An upper estimate of the seconds :func:`wor_parameters` takes on a float row with
    ``support`` tokens of ``q > 0`` and ``k >= 3`` drafts, from the path it takes:
    :data:`ENUMERATED_SECONDS_PER_DRAFT` per draft of every ordered draft tuple where it
    enumerates them; on the
    clock integral, :data:`CLOCK_SECONDS_PER_ENTRY` per entry of its tables (``support`` ranks by
    the nodes of the smallest ``q`` the quadrature waits for, :data:`~otm.rules.water_levels.
    clock_masses.RINGING_FLOOR`) times ``k``, the entries capped at the tables' limit
    (``ClockSetMasses.max_table_floats / 2``: a larger row is refused in milliseconds). What a row
    costs within that depends on the depth of its nesting, which only the construction finds.
    At most ``k`` tokens of ``q > 0``: no construction, 0."""
    if support <= k:
        return 0.0
    tuples = math.perm(support, k)
    if tuples <= min(MAX_ENUMERATED_TUPLES, ClockSetMasses.enumerate_up_to):
        return ENUMERATED_SECONDS_PER_DRAFT * k * tuples
    entries = min(support * node_count(np.array([RINGING_FLOOR]), k), ClockSetMasses.max_table_floats // 2)
    return CLOCK_SECONDS_PER_ENTRY * k * entries


def _takes_clock_path(p, n: int, k: int, tuples: int, clock_masses) -> bool:
    """Whether :func:`wor_parameters` builds a row on the clock integral: float inputs, more than
    ``k`` tokens with ``q > 0``, and more draft tuples than it enumerates
    (:data:`otm.draft_laws.MAX_ENUMERATED_TUPLES`, or ``clock_masses.enumerate_up_to`` where
    that is fewer)."""
    return not is_exact(p) and n > k and tuples > min(MAX_ENUMERATED_TUPLES, clock_masses.enumerate_up_to)


def _counted(tuples: int) -> str:
    """A count of draft tuples for a message (counts are capped at ``TUPLE_COUNT_CAP``)."""
    return f"{tuples:,}" if tuples < TUPLE_COUNT_CAP else f"more than {TUPLE_COUNT_CAP:.0e}"


#: Largest difference allowed between the selection law that float64 levels realise and the
#: ``x`` they aim at (the output law is then off ``p`` by at most as much).
CERTIFICATE_TOLERANCE = 1e-12


def realised_error(params: PairParameters, q, k: int) -> float:
    """``max |x' - x|``: ``x'`` the selection law of the walk with ``params.levels``, summed
    over every draft tuple of ``k`` draws without replacement (float64, vectorised)."""
    n = len(params.order)
    law = without_replacement_law(np.asarray([q[t] for t in params.order], dtype=np.float64), k)
    ranks = -np.sort(-law.tuples, axis=1)  # [C, k] descending
    levels = np.asarray(params.levels, dtype=np.float64)
    least = np.full((n + 1, n + 1), np.inf)  # least[a, b]: min of levels[a + 1 .. b]
    for a in range(n):
        least[a, a + 1:] = np.minimum.accumulate(levels[a + 1:n + 1])
    reach = np.ones(len(ranks))
    realised = np.zeros(n)
    for i in range(1, k):
        below = np.minimum(reach, least[ranks[:, i], ranks[:, i - 1]])
        np.add.at(realised, ranks[:, i - 1], law.probs * (reach - below))
        reach = below
    np.add.at(realised, ranks[:, k - 1], law.probs * reach)
    return _largest_miss(params, realised)


def _largest_miss(params: PairParameters, realised: np.ndarray) -> float:
    """``max |x' - x|`` for a realised selection law ``x'`` by rank."""
    target = np.asarray([params.selection[t] for t in params.order], dtype=np.float64)
    return float(np.abs(realised - target).max())


def _clock_parameters(p, q, order, n: int, k: int, tuples: int, clock_masses) -> PairParameters:
    """Float inputs with too many draft tuples to enumerate: the set masses by the clock
    integral (:mod:`otm.rules.water_levels.clock_masses`), certified by the selection law the levels
    realise through the same integral's lowest-member laws (within
    :data:`CERTIFICATE_TOLERANCE`; float levels above 1 set to 1 first), else redone in 256-bit
    floats on the same masses and certified again; refused where the integral's tables would be
    too large."""
    masses = _built_clock_masses(q, order, n, k, tuples, clock_masses)  # one build for the construction, its
    masses_of = built_set_masses(masses)  # wide redo and both certificates
    coarse = (f"rule 'optimal_wor' at k={k}: this row's water levels cannot be certified on the clock integral's "
              f"float64 set masses ({n:,} tokens of support, q down to {masses.q.min():.1e})")
    try:  # levels above 1 by rounding are set to 1: the certificate below measures what that costs
        params = water_level_parameters(p, q, order, masses_of, clip_rounding=True)
    except WaterLevelRangeError as failure:
        raise NotApplicableError(f"{coarse}: {failure}") from None
    if _largest_miss(params, clock_realised_selection(masses, params.levels)) > CERTIFICATE_TOLERANCE:
        params = wider_parameters(p, q, order, masses_of, reason="float64 levels did not realise x", clip_rounding=True)
        miss = _largest_miss(params, clock_realised_selection(masses, params.levels))
        if miss > CERTIFICATE_TOLERANCE:
            raise NotApplicableError(f"{coarse}: its levels do not realise x within {CERTIFICATE_TOLERANCE:g} ({miss:.1e} "
                                     "off), even in 256-bit floats on them")
    return dataclasses.replace(params, arithmetic=f"{params.arithmetic}, set masses by the clock integral")


def _built_clock_masses(q, order, n: int, k: int, tuples: int, clock_masses) -> ClockSetMasses:
    """The clock integral's masses of the ``q > 0`` by rank (renormalised), refused where its
    tables would be above ``clock_masses.max_table_floats``."""
    q_ranked = np.asarray(q, dtype=np.float64)[order[:n]]  # (a copy: order is an index array)
    q_ranked /= q_ranked.sum()
    floats, limit = clock_masses.table_floats(n, node_count(q_ranked, k), k), clock_masses.max_table_floats
    if floats > limit:
        raise NotApplicableError(f"rule 'optimal_wor' at k={k}: {_counted(tuples)} draft tuples are too many to enumerate and "
                                 f"the clock integral's tables for {n:,} tokens ({floats:,} floats) are above its limit "
                                 f"of {limit:,} for {clock_masses.__name__}; truncate the rows (top-p) or use "
                                 "optimal_latent (at least the i.i.d. optimum)")
    return clock_masses(q_ranked, k)


def clock_flux_setup(p, q, k: int, clock_masses=ClockSetMasses) -> FluxSetup | None:
    """For float inputs that :func:`wor_parameters` builds on the clock integral (more than
    ``k`` tokens with ``q > 0``, more draft tuples than ``clock_masses.enumerate_up_to``), the
    construction up to its nesting (:func:`otm.rules.water_levels.construction.flux_setup`: cut, flux,
    ``x``, and the masses the walk's bounds read, :func:`otm.rules.water_levels.bounds.walk_decision`);
    ``None`` for other rows. Refused as :func:`wor_parameters` refuses, where the tables would be
    too large."""
    n = support_size(q)
    tuples = count_without_replacement(q, k)
    if k < 3 or not _takes_clock_path(p, n, k, tuples, clock_masses):
        return None
    order = ratio_order(p, q)
    masses = _built_clock_masses(q, order, n, k, tuples, clock_masses)
    return flux_setup(p, q, order, built_set_masses(masses))


def clock_realised_error(params: PairParameters, q, k: int, clock_masses=ClockSetMasses) -> float:
    """``max |x' - x|``, ``x'`` the selection law that ``params.levels`` realise by
    :func:`otm.rules.water_levels.clock_masses.realised_selection` (no enumeration), with the masses
    of ``clock_masses``."""
    q_ranked = np.asarray([float(q[t]) for t in params.order], dtype=np.float64)
    return _largest_miss(params, clock_realised_selection(clock_masses(q_ranked / q_ranked.sum(), k), params.levels))


def _exact_parameters(p, q, order, n: int, k: int) -> PairParameters:
    if n <= k:
        return _deterministic_set(p, q, order, n, k)
    return water_level_parameters(p, q, order, set_masses(k))


def _deterministic_set(p, q, order, n: int, k: int) -> PairParameters:
    """At most ``k`` tokens with ``q > 0``: the drafts are always the same set ``D`` (the
    support and the first ``k - n`` tokens with ``q = 0`` of :func:`otm.draft_laws.greedy_order`),
    so ``alpha* = p(D)``: select every member with probability ``p`` but the lowest-ratio
    support token, which takes the rest (``x >= p`` there, ``x = p`` elsewhere on ``D``)."""
    members = list(greedy_order(q)[:k])
    selection = zeros_like(p)
    for token in members:
        selection[token] = p[token]
    lowest = int(order[0])
    selection[lowest] = 1 - sum((p[t] for t in members if t != lowest), p[0] * 0)
    rank = np.full(len(p), -1, dtype=np.int64)
    rank[np.asarray(order[:n], dtype=np.int64)] = np.arange(n)
    zero = p[0] * 0
    return PairParameters(np.asarray(order[:n]), rank, 0, [zero] * (n + 1), [zero] * (n + 1), p, selection,
                          sum((p[t] for t in members), zero), "exact rationals" if is_exact(p) else "float64")


__all__ = [
    "CERTIFICATE_TOLERANCE", "CLOCK_SECONDS_PER_ENTRY", "ENUMERATED_SECONDS_PER_DRAFT", "clock_flux_setup", "clock_realised_error",
    "estimated_seconds", "realised_error", "wor_parameters",
]
