"""Rule ``"optimal_wor"``: ``k`` drafts without replacement, the optimum by water levels.

Derived here (docs/optimal-verifier.md, section 8, "k drafts: the same water levels");
notation ``p`` target, ``q`` draft. The ``k`` drafts are distinct, drawn successively from
``q`` (SpecHub: Sun et al. 2024, Alg. 1). It is :mod:`otm.rules.optimal_pair_wor` with the
pair masses replaced by the masses of the draft *sets*; for ``k = 2`` it is that rule.

**Ranks, cut, flux.** Support tokens get ranks by ``p/q`` ascending (ties by id); ``sigma_a``
is the probability that rank ``a`` is the highest drafted (the max-ratio law), ``T_j =
sum_{a<j} sigma_a`` the probability that every draft falls below rank ``j``; the optimum is
``alpha* = min_j P_j + 1 - T_j`` (the prefix scan without replacement, docs/theory.md) at
the first minimiser ``m``: ``H`` the ranks ``< m``, ``U`` the others. A rule selects a
member; let ``F(j)`` be the probability that the highest member is at least ``j`` and the
selected one below ``j`` (the *flux* across cut ``j``). Then ``P(selected >= a) = P(highest
>= a) - F(a)``, so ``x_a = sigma_a + F(a + 1) - F(a)`` whatever the rule, and the minimal
flux of the pair rule (from the top of ``U`` down, from the bottom of ``H`` up, zero at the
cut) gives ``x <= p`` on ``U``, ``x >= p`` on ``H`` and ``sum min(p, x) = alpha*``.

**The rule.** With levels ``L(j)`` on the cuts (``L(m) = 0``) and one uniform ``u``, go down
from the highest member ``s_1`` through the members ``s_1 > s_2 > ...`` while
``u < min_{s_i < j <= s_1} L(j)``; select the last member reached. So ``s_i`` is selected
with probability ``M_i - M_{i+1}``, ``M_1 = 1``, ``M_i = min_{s_i < j <= s_1} L(j)``,
``M_{r+1} = 0``, and no member of ``H`` is selected beside one of ``U`` (``L(m) = 0``). The
flux across ``j`` is then ``sum_S Q_S M(S, j)``, ``M(S, j)`` the least level between the
highest member of ``S`` below ``j`` and the highest member of ``S``: it depends on ``S``
through that pair of ranks only, which is why the water levels of the pair rule carry over:
raising the levels of an interval ``[f, t]`` whose inner cuts share one level (every active
interval does: it was split off its parent, whose cuts shared one level, at cuts emptied
earlier, whose levels are lower) by ``theta`` raises the flux across ``j`` by ``theta`` times
the mass of the sets whose highest member lies in ``[j, t]`` and whose highest member below
``j`` lies in ``[f, j)`` (:meth:`SetMasses.across`); the other sets' minima stop at a lower,
frozen cut. The construction is :func:`otm.rules.optimal_pair_wor.water_level_parameters`.

**What is proved and what is checked.** Exactly as for two drafts: the levels carry the
minimal flux and lie in ``[0, 1]`` (docs/optimal-verifier.md, section 8, Theorem 5, for any
``k``, drafts without replacement or i.i.d.), so the rule attains ``alpha*(p, Q_wor)`` and is
lossless (canonical decomposition, Khisti et al. 2025). Exact inputs: a level above 1 raises
:class:`otm.errors.NotApplicableError`. Float inputs: a level above 1 is rounding (a cut's
remainder raised over a run of tiny mass; docs/optimal-verifier.md, section 8, "Levels above 1
by rounding"), set to 1 and counted in ``arithmetic``; the certificate below measures what that
leaves uncarried.

**Cost.** The set masses come from every ordered draft tuple (``V!/(V-k)!``). Exact inputs
give an exact construction; float inputs a float64 one (:class:`FloatSetMasses`) that is
certified by the selection law its levels realise, and redone in exact rationals from the
same floats where it is not (:func:`wor_parameters`; ``arithmetic`` says which). Float inputs
with too many tuples to enumerate take the set masses, and the certificate, from the clock
integral (:mod:`otm.rules.wor_clock_masses`: a positive integrand node by node, no tuples),
its levels up to a few thousand tokens of support (its compiled twin, the batched verifier's
path, keeps no tables: :mod:`decoding.verifiers.optimal_wor_numba`). The batched verifier
decides most walks from bounds on the flux and these masses alone
(:mod:`otm.rules.water_level_bounds`, from :func:`clock_flux_setup`), at any vocabulary, and
builds the levels only for the others; the walks those bounds leave on a real vocabulary need
the nesting done lazily on those masses (docs/optimal-verifier.md, section 10, "What is
open").
"""
from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np

from ..distributions import as_fractions, check_draft_count
from ..draft_laws import MAX_ENUMERATED_TUPLES, greedy_order, without_replacement_law
from ..errors import InvalidDraftCountError, NotApplicableError
from ..formulations.prefix_scan import ratio_order
from .base import RuleLaw
from .enumeration import (
    MAX_RULE_ENUMERATION,
    TUPLE_COUNT_CAP,
    canonical_output_law,
    count_without_replacement,
    enumerated_rule_law,
    is_exact,
    resolve_method,
    support_size,
    validate_one_q,
    zeros_like,
)
from .optimal_pair_wor import (
    FluxSetup,
    PairParameters,
    WaterLevelRangeError,
    flux_setup,
    pair_parameters,
    water_level_parameters,
    wider_parameters,
)
from .wor_clock_masses import ClockSetMasses, built_set_masses, node_count
from .wor_clock_masses import realised_selection as clock_realised_selection


class SetMasses:
    """``across(f, j, t)``: the mass of the draft sets (ranks) whose highest member lies in
    ``[j, t]`` and whose highest member below ``j`` lies in ``[f, j)``, from a table per cut
    ``j`` of the mass of each (highest below ``j``, highest) pair, summed over rectangles."""

    def __init__(self, sets: list, masses: list, n: int, zero):
        # table[j][b][c]: mass with highest member c >= j, highest member below j equal to b
        table = [[[zero] * n for _ in range(n)] for _ in range(n + 1)]
        self.sigma = [zero] * n
        for members, mass in zip(sets, masses):
            ranks = sorted(members, reverse=True)
            self.sigma[ranks[0]] += mass
            for below, above in zip(ranks[1:], ranks):
                for j in range(below + 1, above + 1):  # the cuts whose highest member below is `below`
                    table[j][below][ranks[0]] += mass
        # corner[j][b][c] = sum of table[j][b'][c'] over b' >= b, c' <= c
        self._corner = []
        for j in range(n + 1):
            corner = [[zero] * (n + 1) for _ in range(n + 1)]
            for b in range(n - 1, -1, -1):
                for c in range(n):
                    corner[b][c + 1] = table[j][b][c] + corner[b + 1][c + 1] + corner[b][c] - corner[b + 1][c]
            self._corner.append(corner)

    def across(self, f: int, j: int, t: int):
        corner = self._corner[j]
        return corner[f][t + 1] - corner[j][t + 1] - corner[f][j] + corner[j][j]


class FloatSetMasses:
    """:class:`SetMasses` in float64 from arrays: ``across(f, j, t)`` sums the block of the
    per-cut table directly (positive terms, no cancellation; ``O((j - f)(t - j))``)."""

    def __init__(self, ranks: np.ndarray, masses: np.ndarray, n: int):
        # ranks [C, r] descending per row (a repeated rank adds an empty range), masses [C]
        self.sigma = np.bincount(ranks[:, 0], weights=masses, minlength=n)
        change = np.zeros((n + 2, n, n))  # along j: +mass where a (below, top) range starts, - where it ends
        top = ranks[:, 0]
        for i in range(1, ranks.shape[1]):
            below, above = ranks[:, i], ranks[:, i - 1]
            np.add.at(change, (below + 1, below, top), masses)
            np.add.at(change, (above + 1, below, top), -masses)
        self._table = np.maximum(np.cumsum(change, axis=0)[: n + 1], 0.0)  # clear the cumsum's roundings below 0

    def across(self, f: int, j: int, t: int):
        return float(self._table[j, f:j, j:t + 1].sum())


def set_masses(k: int, draft_law=without_replacement_law):
    """The ``masses_of`` of :func:`otm.rules.optimal_pair_wor.water_level_parameters` for
    ``k`` drafts from ``draft_law(q, k)`` (:func:`otm.draft_laws.without_replacement_law`;
    :func:`otm.draft_laws.iid_law` for the same construction on i.i.d. drafts, which
    ``python -m research.optimal_wor.wor_water_levels --law iid`` checks): every ordered tuple of ranks, merged
    into sets; :class:`SetMasses` for exact rationals, :class:`FloatSetMasses` for floats."""

    def masses_of(qs: list, zero):
        if not isinstance(zero, Fraction):  # float64 masses (also under a wider float arithmetic)
            law = draft_law(np.asarray([float(v) for v in qs], dtype=np.float64), k)
            ranks, inverse = np.unique(-np.sort(-law.tuples, axis=1), axis=0, return_inverse=True)
            masses = FloatSetMasses(ranks, np.bincount(inverse.ravel(), weights=law.probs), len(qs))
            return masses, [zero + float(v) for v in masses.sigma]
        sets = draft_sets(qs, k, draft_law)
        masses = SetMasses(list(sets), list(sets.values()), len(qs), zero)
        return masses, masses.sigma

    return masses_of


def draft_sets(q_ranked: list, k: int, draft_law=without_replacement_law) -> dict:
    """``{frozenset of ranks: P(S = set)}`` for ``k`` draws from ``q_ranked`` (the ``q > 0`` by
    rank) under ``draft_law``, every ordered tuple merged into its set (exact rationals stay
    exact; floats give float64 masses)."""
    exact = any(isinstance(v, Fraction) for v in q_ranked)
    law = draft_law(np.array(q_ranked, dtype=object if exact else np.float64), k)
    sets: dict = {}
    for ranks, mass in zip(law.tuples, law.probs):
        key = frozenset(int(r) for r in ranks)
        sets[key] = sets.get(key, 0) + mass
    return sets


def wor_parameters(p, q, k: int, *, clock_masses=ClockSetMasses) -> PairParameters:
    """Ranks, cut, minimal flux and water levels for ``k`` drafts without replacement from
    ``q`` against ``p`` (module docstring): :func:`otm.rules.optimal_pair_wor.pair_parameters`
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
    ``clock_masses`` (:class:`~otm.rules.wor_clock_masses.ClockSetMasses`, or its compiled
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
    integral (:mod:`otm.rules.wor_clock_masses`), certified by the selection law the levels
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
    construction up to its nesting (:func:`otm.rules.optimal_pair_wor.flux_setup`: cut, flux,
    ``x``, and the masses the walk's bounds read, :func:`otm.rules.water_level_bounds.walk_decision`);
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
    :func:`otm.rules.wor_clock_masses.realised_selection` (no enumeration), with the masses
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


def member_chances(levels: list, ranks: list) -> list:
    """``P(select s_i)`` for members of ranks ``ranks`` (distinct, any order) under
    ``levels`` ``[n + 1]``: ``M_i - M_{i+1}`` with ``M_i`` the least level between ``s_i`` and
    the highest member (module docstring), in the order of ``ranks``."""
    descending = sorted(range(len(ranks)), key=lambda i: -ranks[i])
    one = levels[0] * 0 + 1
    reach = [one]  # M_1, M_2, ...
    for upper, lower in zip(descending, descending[1:]):
        reach.append(min([reach[-1]] + levels[ranks[lower] + 1:ranks[upper] + 1]))
    reach.append(one * 0)
    chances = [None] * len(ranks)
    for position, i in enumerate(descending):
        chances[i] = reach[position] - reach[position + 1]
    return chances


def selection_law(params: PairParameters, draft_tuple) -> list:  # [k]
    """``P(Z = x_j | x)`` for the positions of the drafted tuple (distinct tokens)."""
    ranks = [int(params.rank[int(t)]) for t in draft_tuple]
    if len(params.order) <= len(draft_tuple) or min(ranks) < 0:  # every draw drafts the same set: select by x
        return [params.selection[int(t)] for t in draft_tuple]
    return member_chances(params.levels, ranks)


def conditional_output_law(params: PairParameters, draft_tuple):
    """``(K(. | x) [V], P(a draft is accepted | x))``: select by :func:`selection_law`, accept
    ``Z`` with ``min(1, p(Z) / x(Z))``, else draw from ``norm(max(p - x, 0))``."""
    return canonical_output_law(params.target, params.selection, draft_tuple, selection_law(params, draft_tuple))


def exact_law(p, q, k: int, *, method: str = "auto") -> RuleLaw:
    """Exact law of the rule for ``k >= 2`` drafts without replacement.

    ``method="closed_form"``: the acceptance ``sum min(p, x)`` (``alpha*``) and the output
    law ``p`` from :func:`wor_parameters` (which itself sums over the draft tuples for
    ``k >= 3``); ``"enumeration"``: the coupling over every ordered tuple (also
    ``accepted_per_token``, ``coupling``). ``details``: ``method``, ``cut``, ``selection``
    (``x``), ``levels``, ``draft_accepted``, ``arithmetic``.

    >>> from otm.formulations.prefix_scan import prefix_scan
    >>> p, q = [0.4, 0.3, 0.2, 0.1, 0.0], [0.1, 0.1, 0.2, 0.3, 0.3]
    >>> law = exact_law(p, q, 3, method="enumeration")
    >>> round(float(law.acceptance), 12), round(float(prefix_scan(p, q, 3, "without_replacement").value), 12)
    (0.978571428571, 0.978571428571)
    """
    if check_draft_count(k) < 2:
        raise InvalidDraftCountError(f"rule 'optimal_wor' is defined for k >= 2, got k={k}")
    p, q = validate_one_q(p, q, "rule 'optimal_wor' draws every draft from one q ([V] vector)")
    params = wor_parameters(p, q, k)
    method = resolve_method(method, count_without_replacement(q, k), True, "optimal_wor", len(p))
    details = {"method": method, "cut": params.cut, "selection": params.selection, "levels": params.levels,
               "draft_accepted": params.acceptance, "arithmetic": params.arithmetic}
    if method == "closed_form":
        return RuleLaw(params.acceptance, p.copy(), None, details)
    result = enumerated_rule_law(p, without_replacement_law(q, k), lambda draft: conditional_output_law(params, draft), details)
    if is_exact(p) and result.details["draft_accepted"] != params.acceptance:
        raise AssertionError("the enumerated acceptance differs from sum min(p, x)")
    return result


__all__ = ["FloatSetMasses", "SetMasses", "as_fractions", "clock_flux_setup", "clock_realised_error", "conditional_output_law", "draft_sets",
           "exact_law", "member_chances", "realised_error", "selection_law", "set_masses", "wor_parameters"]
