"""The water levels of the two-draft optimum without replacement, compiled with numba: a lazy
nesting in ``O(log n)`` per refresh of a key, where the construction of
:mod:`otm.rules.optimal_wor` (the reference) rescans every run, ``O(n * depth)`` with
``depth`` about ``10^5`` on real rows.

The construction is the reference's (docs/optimal-verifier.md#water-levels-for-drafts-without-replacement):
ranks by ``p/q``,
the cut ``m``, the minimal flux ``F`` and the nested water levels ``L``; only the order in
which the nesting is computed differs, and how the remaining flux of a cut is kept.

**Remaining flux in O(1).** A run ``R`` = ranks ``[f, t]`` whose inner cuts all carry
remaining flux has been raised, by its ancestors ``A`` (the runs that contained it), by levels
``theta_A`` summing to ``Theta``. Each ancestor's pair mass across cut ``j`` splits along
``R``'s ends (``Q(X, Y) = w(X) q(Y) + q(X) w(Y)`` is bilinear):

    Q_A(j) = Q_R(j) + w[f, j) qR_A + q[f, j) wR_A + q[j, t] wL_A + w[j, t] qL_A
             + wL_A qR_A + qL_A wR_A,

``wL_A = w[f_A, f)``, ``qR_A = q(t, t_A]`` and so on: the parts of ``A`` left and right of
``R``. So the flux already carried over cut ``j`` is

    used(j) = Theta Q_R(j) + a1 w[f, j) + a2 q[f, j) + a3 q[j, t] + a4 w[j, t] + a5

with five sums over the ancestors (``a1 = sum theta_A qR_A``, ``a2 = sum theta_A wR_A``,
``a3 = sum theta_A wL_A``, ``a4 = sum theta_A qL_A``, ``a5 = sum theta_A (wL_A qR_A +
qL_A wR_A)``), which a child run updates from its parent's in O(1) (:func:`_child`). Every
term is nonnegative, so ``used(j)`` has the relative accuracy of a sum of positive terms;
the one cancellation is ``rem(j) = F(j) - used(j)``, as in the reference.

**The next cut to empty, lazily.** The cut of ``R`` that empties first is the one of least
*key* ``Theta + rem(j) / Q_R(j)``, the absolute level at which it would empty. Keys only
grow: when ``R`` raises ``theta`` and splits, a cut ``j`` of a child ``R'`` keeps
``rem(j) - theta Q_R(j) >= 0`` and its rate drops to ``Q_R'(j) <= Q_R(j)``, so its new key
``Theta + theta + (rem(j) - theta Q_R(j)) / Q_R'(j)`` is at least the old one. So a key
computed under any earlier run is a lower bound, and the cuts sit in one range-minimum tree
with their last keys: the run takes the least of its range, recomputes that cut's key if it
was computed under another run, and stops when the least is current (a lazy priority queue).
The cut found is emptied at its key, which is its level ``L(j)``; the run splits there.
Each run is processed once (at most ``n`` runs) and each refresh costs ``O(log n)``; how
many refreshes a row takes is data-dependent (``row_levels`` returns the count).
:func:`pair_yield` follows only the runs that hold a given pair.

**Floats.** On real rows the nesting is about ``10^5`` deep and its last runs hold pairs of
mass ``1e-19`` times the flux they must carry, so a level is ``rem / Q`` with ``rem`` the
difference of two nearly equal numbers: no float precision fixes such a level, but its pairs
carry no flux worth the name. So the kernel keeps what decides the *flux* accurate and lets
such levels round: the walks that give ``F`` add in double-double (``_add``), the five
sums of a run accumulate in double-double (:func:`_child`), the range sums carry their
TwoSum errors, ``used(j)`` is their sum in float64; a remaining flux within ``FLOOR`` unit
roundoffs of ``F(j)`` counts as zero (the cut empties at the current level), a key below the
current level counts as the current level, and a level found above 1 is set to 1 (in exact arithmetic none is:
docs/optimal-verifier-proofs.md#water-levels-are-probabilities). Levels are therefore probabilities by
construction, and the flux they leave uncarried (or carry twice)
is what :func:`row_levels` returns as ``uncarried``. What the levels realise is checked
independently in exact or 200-bit arithmetic by
:func:`otm.rules.water_levels.pair.realised_selection`: on real Qwen rows at ``V = 151,936``
the realised selection law is within about ``2e-12`` of ``x`` in total (and ``alpha*`` within
``1e-12``; ``research/optimal_wor/pair_wor_verifier_at_scale.py``,
docs/optimal-verifier.md#water-levels-for-drafts-without-replacement). On
small rows the levels agree with the reference construction to ``5e-14``
(``tests/decoding/test_verifier_optimal_pair_wor.py``).

**Cost.** The tree's nodes hold their least key and its position (no indirection), and an
update stops at the first node it leaves unchanged. Most splits peel one rank off an end of
their run; the cuts about to empty form a front of near-equal keys that is refreshed at
almost every peel. So :func:`pair_yield` first tries the bounds of :func:`yield_decision`,
which settle most of the same-side pairs drawn on real rows in ``O(V)`` at most
(docs/optimal-verifier-proofs.md#bounds-on-a-water-level-from-the-flux; how often they settle:
docs/optimal-verifier.md#measured-cost).

``cache=True``, ``error_model="numpy"``, no bounds checks: every array of a row has the
row's length ``n`` (or ``n + 1`` for cuts).
"""
from __future__ import annotations

import numba
import numpy as np

_compiled = numba.njit(cache=True, nogil=True, error_model="numpy")


@_compiled
def _two_sum_step(total, error, j, value):
    """``total[j + 1]`` = the running sum up to ``value`` (the ``j``-th value), ``error[j + 1]``
    its accumulated rounding error (Knuth's TwoSum), so that :func:`_span` is accurate for a
    short range far up."""
    s = total[j] + value
    back = s - total[j]
    error[j + 1] = error[j] + ((total[j] - (s - back)) + (value - back))
    total[j + 1] = s


@_compiled
def _span(total, error, a, b):
    """``sum(values[a:b])`` from the running sums of :func:`_two_sum_step`."""
    return (total[b] - total[a]) + (error[b] - error[a])


@_compiled
def _tree_build(keys, node_key, node_at, size):
    """A range-minimum tree over ``keys`` ``[size]``: each node holds the least key below it
    and where it is (the lower position on ties)."""
    for i in range(size):
        node_key[size + i], node_at[size + i] = keys[i], i
    for i in range(size - 1, 0, -1):
        _pull(node_key, node_at, i)


@_compiled
def _pull(node_key, node_at, i):
    left, right = 2 * i, 2 * i + 1
    if node_key[right] < node_key[left]:
        node_key[i], node_at[i] = node_key[right], node_at[right]
    else:
        node_key[i], node_at[i] = node_key[left], node_at[left]


@_compiled
def _tree_set(keys, node_key, node_at, size, position, value):
    """``keys[position] = value``, and the nodes above it; stops where a node is unchanged."""
    keys[position] = value
    i = position + size
    node_key[i] = value
    i >>= 1
    while i >= 1:
        key, at = node_key[i], node_at[i]
        _pull(node_key, node_at, i)
        if node_key[i] == key and node_at[i] == at:
            return
        i >>= 1


@_compiled
def _tree_argmin(node_key, node_at, size, lo, hi):
    """Position of the least key in ``lo..hi`` (inclusive; the lower position on ties)."""
    best_key, best = np.inf, lo
    a, b = lo + size, hi + size + 1
    while a < b:
        if a & 1:
            if node_key[a] < best_key or (node_key[a] == best_key and node_at[a] < best):
                best_key, best = node_key[a], node_at[a]
            a += 1
        if b & 1:
            b -= 1
            if node_key[b] < best_key or (node_key[b] == best_key and node_at[b] < best):
                best_key, best = node_key[b], node_at[b]
        a >>= 1
        b >>= 1
    return best


@_compiled
def _across(qt, qe, wt, we, f, j, t):
    """``Q([f, j), [j, t])`` and its four range sums ``w[f, j), q[f, j), q[j, t], w[j, t]``."""
    w_lo, q_lo = _span(wt, we, f, j), _span(qt, qe, f, j)
    q_hi, w_hi = _span(qt, qe, j, t + 1), _span(wt, we, j, t + 1)
    return w_lo * q_hi + q_lo * w_hi, w_lo, q_lo, q_hi, w_hi


@_compiled
def _two_sum(a, b):
    """``(s, e)`` with ``s = fl(a + b)`` and ``s + e = a + b`` exactly (Knuth)."""
    s = a + b
    back = s - a
    return s, (a - (s - back)) + (b - back)


@_compiled
def _add(hi, lo, x):
    """The double-double ``hi + lo`` plus the double ``x``."""
    s, e = _two_sum(hi, x)
    e += lo
    t = s + e
    return t, e - (t - s)


@_compiled
def _key(flux_hi, flux_lo, qt, qe, wt, we, f, t, j, state, unit):
    """``(level, remaining flux, Q_R(j))`` for cut ``j`` of run ``[f, t]``: the level at which
    it empties (module docstring), the current level where the remaining flux is below the
    rounding floor ``FLOOR * unit * F(j)``."""
    mass, w_lo, q_lo, q_hi, w_hi = _across(qt, qe, wt, we, f, j, t)
    used = (state[0] * mass + (state[1] + state[2]) * w_lo + (state[3] + state[4]) * q_lo
            + (state[5] + state[6]) * q_hi + (state[7] + state[8]) * w_hi + (state[9] + state[10]))
    remaining = (flux_hi[j] - used) + flux_lo[j]
    if remaining <= FLOOR * unit * flux_hi[j]:
        return state[0], remaining, mass
    return state[0] + remaining / mass, remaining, mass


@_compiled
def _accumulate(state, out, i, x):
    """``out[i:i + 2] = state[i:i + 2] + x`` in double-double."""
    out[i], out[i + 1] = _add(state[i], state[i + 1], x)


@_compiled
def _child(qt, qe, wt, we, f, t, f2, t2, level, state, out):
    """The state of run ``[f2, t2]`` split off ``[f, t]`` raised to ``level``: ``Theta`` and
    ``a1..a5`` of the module docstring, each ``a`` a double-double (``hi, lo``)."""
    dwl, dql = _span(wt, we, f, f2), _span(qt, qe, f, f2)
    dwr, dqr = _span(wt, we, t2 + 1, t + 1), _span(qt, qe, t2 + 1, t + 1)
    a1, a2, a3, a4 = state[1] + state[2], state[3] + state[4], state[5] + state[6], state[7] + state[8]
    out[0] = level
    _accumulate(state, out, 1, level * dqr)
    _accumulate(state, out, 3, level * dwr)
    _accumulate(state, out, 5, level * dwl)
    _accumulate(state, out, 7, level * dql)
    hi, lo = _add(state[9], state[10], dqr * a3)
    hi, lo = _add(hi, lo, dwl * a1)
    hi, lo = _add(hi, lo, dwr * a4)
    hi, lo = _add(hi, lo, dql * a2)
    out[9], out[10] = _add(hi, lo, level * (dwl * dqr + dql * dwr))


#: A cut's remaining flux below ``FLOOR * unit * F(j)`` counts as zero (module docstring): one
#: rounding unit, since a larger floor leaves more of the selection law unrealised on real rows
#: (research/optimal_wor/JOURNAL.md, "Figures moved from docstrings").
FLOOR = 1.0


@_compiled
def row_setup(p, q, unit, flux, flux_lo, selection):
    """One row, ``p`` and ``q`` ``[n]`` in rank order (``q > 0``, ``n >= 2``, both
    normalised): the running sums (``qt, qe, wt, we``, TwoSum), the cut ``m``, the minimal
    flux (``flux + flux_lo`` ``[n + 1]``, a double-double, cut ``j`` below rank ``j``), the
    selection law ``selection`` ``[n]`` (``x`` by rank) and ``sum min(p, x)``; the ranks'
    ``w = q / (1 - q)`` from :func:`draft_weights`, then :func:`ranked_setup`."""
    return ranked_setup(p, q, draft_weights(q), None, unit, flux, flux_lo, selection)


@_compiled
def normalised_row(row, total, out):
    """``out[i] = float64(row[i]) / total``: a float32 or float64 row normalised into a
    float64 work array, the floats of ``row.to(float64) / total``; returns whether no entry is
    negative (a NaN or an inf shows in ``total``)."""
    valid = True
    for i in range(row.shape[0]):
        out[i] = np.float64(row[i]) / total
        valid &= row[i] >= 0
    return valid


@_compiled
def draft_weights(q):
    """``w = q / (1 - q)`` ``[n]``, the first draft's weights; for the token with ``q > 1/2``
    (at most one) ``1 - q`` is the others' mass summed with compensation (``q = 0.9997``
    would carry a relative ``1e-13`` into its ``w`` from ``1 - q``)."""
    n = q.shape[0]
    w = np.empty(n)
    big = -1
    for a in range(n):
        w[a] = q[a] / (1.0 - q[a])
        if q[a] > 0.5:
            big = a
    if big >= 0:
        hi, lo = 0.0, 0.0
        for a in range(n):
            if a != big:
                hi, lo = _add(hi, lo, q[a])
        w[big] = q[big] / (hi + lo)
    return w


@_compiled
def ranked_setup(p, q, w, within, unit, flux, flux_lo, selection):
    """:func:`row_setup` given the weights ``w``, on ranks or on the entries of a merged row
    (:mod:`decoding.verifiers.optimal.pair_merged_rows`): an entry stands for a block of
    consecutive ranks, with its sums of ``p``, ``q`` and ``w`` and ``within``, the pair mass
    inside it (``None``: single ranks, no such mass). Its ``sigma`` (the probability that the
    higher draft falls in it) is ``w C + q W + within``, ``C`` and ``W`` the sums below it;
    the flux walks take an entry as one step, exact where the ranks of a block all have
    ``e = p - sigma`` of one sign (the walk is monotone through it)."""
    n = p.shape[0]
    qt, qe, wt, we = np.empty(n + 1), np.empty(n + 1), np.empty(n + 1), np.empty(n + 1)
    qt[0], qe[0], wt[0], we[0] = 0.0, 0.0, 0.0, 0.0
    sigma = np.empty(n)
    # one pass: the running sums of q and w (TwoSum), sigma and the first minimiser m of
    # f(j) = P_j + 1 - T_j; three independent chains of additions
    best, m, total_p, total_t = 1.0, 0, 0.0, 0.0
    for a in range(n):
        value = total_p + 1.0 - total_t
        if value < best:
            best, m = value, a
        s = w[a] * (qt[a] + qe[a]) + q[a] * (wt[a] + we[a])  # w_a C_a + q_a W_a
        if within is not None:
            s += within[a]
        sigma[a] = s
        total_p += p[a]
        total_t += s
        _two_sum_step(qt, qe, a, q[a])
        _two_sum_step(wt, we, a, w[a])
    if total_p + 1.0 - total_t < best:
        m = n
    flux[n], flux_lo[n] = 0.0, 0.0
    for a in range(n - 1, m - 1, -1):
        hi, lo = _add(flux[a + 1], flux_lo[a + 1], sigma[a] - p[a])
        flux[a], flux_lo[a] = (hi, lo) if hi + lo > 0.0 else (0.0, 0.0)
    flux[0], flux_lo[0] = 0.0, 0.0
    for a in range(m):
        hi, lo = _add(flux[a], flux_lo[a], p[a] - sigma[a])
        flux[a + 1], flux_lo[a + 1] = (hi, lo) if hi + lo > 0.0 else (0.0, 0.0)
    flux[m], flux_lo[m] = 0.0, 0.0
    # one pass: fluxes within 8 unit roundoffs of zero set to zero, x by rank, sum min(p, x)
    if flux[0] <= 8.0 * unit:
        flux[0], flux_lo[0] = 0.0, 0.0
    alpha = 0.0
    for a in range(n):
        if flux[a + 1] <= 8.0 * unit:
            flux[a + 1], flux_lo[a + 1] = 0.0, 0.0
        selection[a] = sigma[a] + ((flux[a + 1] - flux[a]) + (flux_lo[a + 1] - flux_lo[a]))
        alpha += min(p[a], selection[a])
    return qt, qe, wt, we, m, alpha


@_compiled
def _first_keys(flux, flux_lo, qt, qe, wt, we, f, t, unit, keys, base, remaining, rate, fresh, run, state):
    """Keys of the cuts of a first run ``[f, t]`` (no level raised yet); cut ``c`` is
    position ``c - base`` of ``keys`` and of the tree."""
    for c in range(f + 1, t + 1):
        keys[c - base], remaining[c], rate[c] = _key(flux, flux_lo, qt, qe, wt, we, f, t, c, state, unit)
        fresh[c] = run


TALLY_BINS = ("refreshed at an end cut", "refreshed 2-16 ranks from an end", "refreshed 17-256 ranks from an end",
              "refreshed farther in", "emptied at an end cut", "emptied at an inner cut")
"""What :func:`pair_yield`'s ``tally`` counts, bin by bin: the lazy refreshes by how far the
refreshed cut lies from its run's nearer end (1 rank: an end cut), and the cuts its chain of
runs emptied at an end of their run (a peel) or inside it (a split)."""


@_compiled
def _tally_cut(tally, f, t, c, emptied):
    """Counts cut ``c`` of run ``[f, t]`` in its bin of :data:`TALLY_BINS`: by its distance
    from the run's nearer end (1 rank: an end cut), as a refresh or as the cut ``emptied``."""
    d = min(c - f, t + 1 - c)
    if emptied:
        tally[4 if d == 1 else 5] += 1
    else:
        tally[0 if d == 1 else 1 if d <= 16 else 2 if d <= 256 else 3] += 1


@_compiled
def _least_cut(flux, flux_lo, qt, qe, wt, we, f, t, run, state, unit, keys, base, node_key, node_at, size, remaining,
               rate, fresh, tally=None):
    """The cut of run ``[f, t]`` that empties first, refreshing stale keys lazily; returns
    ``(cut, refreshes)`` (cut ``c`` at position ``c - base`` of ``keys`` and the tree); a
    ``tally`` counts the refreshes by distance from the run's ends (:data:`TALLY_BINS`)."""
    refreshes = 0
    while True:
        c = _tree_argmin(node_key, node_at, size, f + 1 - base, t - base) + base
        if fresh[c] == run:
            return c, refreshes
        if tally is not None:
            _tally_cut(tally, f, t, c, False)
        key, remaining[c], rate[c] = _key(flux, flux_lo, qt, qe, wt, we, f, t, c, state, unit)
        _tree_set(keys, node_key, node_at, size, c - base, key)
        fresh[c] = run
        refreshes += 1


@_compiled
def _tree_size(positions):
    """The least power of 2 that is at least ``positions``."""
    size = 1
    while size < positions:
        size *= 2
    return size


@_compiled
def row_levels(p, q, unit, flux, levels, selection):
    """Every water level of one row (``p``, ``q`` as :func:`row_setup`): fills ``flux``
    (rounded to double), ``levels`` ``[n + 1]`` and ``selection`` ``[n]``. Returns ``(m,
    alpha, refreshes, clipped, uncarried)``: the cut, ``sum min(p, x)``, the lazy
    refreshes, the levels found above 1 and set to 1, and the flux that the floors, the
    rounding and those levels leave uncarried, summed over the cuts (an estimate of half of
    ``sum |x' - x|``, ``x'`` the selection law the levels realise)."""
    n = p.shape[0]
    flux_lo = np.empty(n + 1)
    qt, qe, wt, we, m, alpha = row_setup(p, q, unit, flux, flux_lo, selection)
    size = _tree_size(n + 1)
    keys = np.full(size, np.inf)
    fresh = np.full(n + 1, -1, np.int64)
    runs = np.empty((n + 1, 2), np.int64)  # a stack of runs: ranks [f, t]
    states = np.empty((n + 1, 11))
    ids = np.empty(n + 1, np.int64)
    remaining, rate = np.zeros(n + 1), np.zeros(n + 1)  # at each cut's last refresh
    depth, next_id = 0, 0
    for j in range(n + 1):
        levels[j] = 0.0
    state, out = np.zeros(11), np.empty(11)
    j = 1
    while j < n:  # the first runs: maximal stretches of cuts with flux
        if flux[j] > 0.0:
            start = j
            while j < n and flux[j] > 0.0:
                j += 1
            runs[depth, 0], runs[depth, 1] = start - 1, j - 1
            states[depth, :] = 0.0
            ids[depth] = next_id
            _first_keys(flux, flux_lo, qt, qe, wt, we, start - 1, j - 1, unit, keys, 0, remaining, rate, fresh, next_id, state)
            next_id += 1
            depth += 1
        j += 1
    node_key, node_at = np.empty(2 * size), np.empty(2 * size, np.int64)
    _tree_build(keys, node_key, node_at, size)
    refreshes, clipped, uncarried = 0, 0, 0.0
    while depth > 0:
        depth -= 1
        f, t, run = runs[depth, 0], runs[depth, 1], ids[depth]
        state[:] = states[depth, :]
        c, more = _least_cut(flux, flux_lo, qt, qe, wt, we, f, t, run, state, unit, keys, 0, node_key, node_at, size,
                             remaining, rate, fresh)
        refreshes += more
        level = min(max(keys[c], state[0]), 1.0)
        if level == 1.0 and keys[c] > 1.0:
            clipped += 1
        uncarried += abs(remaining[c] - (level - state[0]) * rate[c])
        levels[c] = level
        _tree_set(keys, node_key, node_at, size, c, np.inf)
        for f2, t2 in ((f, c - 1), (c, t)):
            if t2 > f2:
                _child(qt, qe, wt, we, f, t, f2, t2, level, state, out)
                runs[depth, 0], runs[depth, 1] = f2, t2
                states[depth, :] = out
                ids[depth] = next_id
                next_id += 1
                depth += 1
    return m, alpha, refreshes, clipped, uncarried


@_compiled
def first_run(flux, low, high):
    """``(f, t)``: the longest run of ranks around ``low..high`` whose inner cuts all carry
    flux (``flux`` ``[n + 1]``; the cuts between ``low`` and ``high`` are taken to carry it),
    the first run of the nesting that holds both."""
    f, t = low, high
    while f > 0 and flux[f] > 0.0:
        f -= 1
    while t < flux.shape[0] - 2 and flux[t + 1] > 0.0:
        t += 1
    return f, t


#: Relative margin of :func:`yield_decision`'s float comparisons: a decision is taken only
#: where the bound clears ``u`` by this much, far above the float64 rounding of a bound (a
#: flux in double-double over a pair mass from compensated range sums).
BOUND_MARGIN = 1e-9


@_compiled
def yield_decision(flux, qt, qe, wt, we, f, t, low, high, u, blocks=None):
    """Whether ``u < Y`` for the pair of ranks ``low < high`` inside the first run ``[f, t]``
    (every cut of it carries flux), from the flux and the pair masses alone
    (:func:`otm.rules.water_levels.pair.yield_decision`;
    docs/optimal-verifier-proofs.md#bounds-on-a-water-level-from-the-flux). Returns ``(verdict, bound)``: ``(1, lower)``
    when ``u`` is below the lower bound
    ``lower = min_{low < j <= high} F(j) / Q_[f,t](j)`` of ``Y``; ``(-1, u)`` when the
    widened pair masses prove ``Y <= u`` (the narrowest window at every cut between the pair,
    then the integral over the shrinking windows at the cut of least bound); ``(0, lower)``
    when neither settles it. ``O(t - f)`` at most, ``O(high - low)`` when the lower bound
    settles it.

    On a merged row (``blocks[e, 0] > 0`` where entry ``e`` is a block of ranks, see
    :func:`_inner_bound`) the cuts inside a block enter through :func:`_inner_bound`, a lower bound of their bounds: the least
    bound takes it, a window crosses a block only when it is at least the level, and the
    tests that read ``F`` read it at the cuts between entries only."""
    lower, least, least_cut = np.inf, low + 1, np.inf
    for j in range(low + 1, high + 1):
        bound = _cut_bound(flux, qt, qe, wt, we, f, j, t)
        if bound < least_cut:
            least_cut, least = bound, j
        lower = min(lower, bound, _inner_bound(flux, qt, qe, wt, we, f, j, t, blocks) if j < high else np.inf)
    if u < lower:
        return 1, lower
    b, c = low, high  # widen through the cuts whose own lower bound is at least u
    while b > f and _cut_bound(flux, qt, qe, wt, we, f, b, t) >= u \
            and _inner_bound(flux, qt, qe, wt, we, f, b - 1, t, blocks) >= u:
        b -= 1
    while c < t and _cut_bound(flux, qt, qe, wt, we, f, c + 1, t) >= u \
            and _inner_bound(flux, qt, qe, wt, we, f, c + 1, t, blocks) >= u:
        c += 1
    for j in range(low + 1, high + 1):
        if flux[j] * (1.0 + BOUND_MARGIN) <= u * _across(qt, qe, wt, we, b, j, c)[0]:
            return -1, u
    if flux[least] * (1.0 + BOUND_MARGIN) <= _window_integral(flux, qt, qe, wt, we, f, t, low, high, least, u, blocks):
        return -1, u
    return 0, lower


@_compiled
def _cut_bound(flux, qt, qe, wt, we, f, i, t):
    """The lower bound (docs/optimal-verifier-proofs.md#bounds-on-a-water-level-from-the-flux (i)) of the level of cut ``i`` of the
    first run ``[f, t]``, less
    :data:`BOUND_MARGIN`."""
    return flux[i] / _across(qt, qe, wt, we, f, i, t)[0] * (1.0 - BOUND_MARGIN)


@_compiled
def _inner_bound(flux, qt, qe, wt, we, f, e, t, blocks):
    """A lower bound of the bounds ``F(j) / Q_[f,t](j)`` (docs/optimal-verifier-proofs.md#bounds-on-a-water-level-from-the-flux (i)) at the cuts ``j`` inside
    entry ``e`` of a merged row (``inf`` for a single rank, or when ``blocks`` is ``None``;
    docs/optimal-verifier-proofs.md#merged-rows-for-two-drafts).

    ``blocks[e] = (spread, r, falling)``: ``spread`` at least ``1 / (1 - max q)`` of the block, ``r`` the
    least ratio ``p / q`` it can hold, ``falling`` 1 when it lies below the cut with ``e < 0``
    at every rank (the flux falls through it). A cut inside leaves ``q_x`` and ``w_x = lambda
    q_x`` (``1 <= lambda <= spread``) of the block below it; there the pair mass is
    ``Q = K + q_x (W_b - W_a) + w_x (Q_b - C_a) - 2 w_x q_x`` (``W_a``, ``C_a`` the sums of
    ``[f, e)``, ``Q_b``, ``W_b`` of ``[e, t]``, ``K`` the mass across the block's lower end),
    and the flux at least the lesser of the end fluxes (it is monotone through the block) or,
    when it falls, ``F_e + r q_x - w_x C - q_x W - w_x q_x`` (``C``, ``W`` the sums below the
    block: ``sigma`` of the ranks below the cut is ``w_x C + q_x W`` plus their pairs, at most
    ``w_x q_x``). Over the cone of ``(q_x, w_x)`` the ratio is least on its two edges
    ``lambda = 1``, ``lambda = spread`` (the numerator less a multiple of the denominator is
    bilinear, with no interior minimum; on the far edge both are linear in ``w_x``): along an
    edge both are quadratics in ``q_x``, whose ratio is least at an end or where ``N' D - N D'``,
    a quadratic, vanishes."""
    if blocks is None or blocks[e, 0] <= 0.0:
        return np.inf
    spread = blocks[e, 0]
    w_a, c_a = _span(wt, we, f, e), _span(qt, qe, f, e)
    q_b, w_b, q_block = _span(qt, qe, e, t + 1), _span(wt, we, e, t + 1), _span(qt, qe, e, e + 1)
    across = w_a * q_b + c_a * w_b
    up = 0.0
    for s in (1.0, spread):  # the largest pair mass: a parabola in q_x on each edge
        slope = (w_b - w_a) + s * (q_b - c_a)
        x = min(max(slope / (4.0 * s), 0.0), q_block)
        up = max(up, x * slope - 2.0 * s * x * x)
    bound = min(flux[e], flux[e + 1]) / (across + up)
    if blocks[e, 2] > 0.0:  # a falling flux: the ratio along each edge
        below_q, below_w = _span(qt, qe, 0, e), _span(wt, we, 0, e)
        least = np.inf
        for s in (1.0, spread):
            b1, c1 = blocks[e, 1] - s * below_q - below_w, s  # N = F_e + b1 q - c1 q^2
            b2, c2 = (w_b - w_a) + s * (q_b - c_a), 2.0 * s  # D = K + b2 q - c2 q^2
            qa, qb, qc = b1 * c2 - c1 * b2, 2.0 * (flux[e] * c2 - c1 * across), b1 * across - flux[e] * b2
            least = min(least, _edge_ratio(flux[e], b1, c1, across, b2, c2, 0.0),
                        _edge_ratio(flux[e], b1, c1, across, b2, c2, q_block))
            if qa != 0.0:
                disc = qb * qb - 4.0 * qa * qc
                if disc >= 0.0:
                    root = np.sqrt(disc)
                    for x in ((-qb - root) / (2.0 * qa), (-qb + root) / (2.0 * qa)):
                        if 0.0 < x < q_block:
                            least = min(least, _edge_ratio(flux[e], b1, c1, across, b2, c2, x))
            elif qb != 0.0 and 0.0 < -qc / qb < q_block:
                least = min(least, _edge_ratio(flux[e], b1, c1, across, b2, c2, -qc / qb))
        bound = max(bound, least)
    return bound * (1.0 - BOUND_MARGIN)


@_compiled
def _edge_ratio(n0, b1, c1, d0, b2, c2, x):
    """``max(N, 0) / D`` at ``q_x = x`` on an edge of :func:`_inner_bound` (``inf`` where the
    pair mass vanishes: no cut of the run is there)."""
    d = d0 + b2 * x - c2 * x * x
    if not d > 0.0:
        return np.inf
    return max(n0 + b1 * x - c1 * x * x, 0.0) / d


@_compiled
def _window_integral(flux, qt, qe, wt, we, f, t, low, high, j, u, blocks):
    """``integral_0^u Q_{W_s}(j) ds`` (:func:`otm.rules.water_levels.pair.yield_at_most`): the
    pair's span widened through the cuts whose bound exceeds ``s``; the window shrinks from
    outside as ``s`` passes the running minima of the bounds going outward (on a merged row a
    block leaves the window when the level passes its :func:`_inner_bound`). ``O(t - f)``."""
    left_min, right_min = np.empty(low - f), np.empty(t - high)
    least = np.inf
    for k in range(low - f):  # cut low - k; window start low - k - 1 while s is below
        least = min(least, _cut_bound(flux, qt, qe, wt, we, f, low - k, t),
                    _inner_bound(flux, qt, qe, wt, we, f, low - k - 1, t, blocks))
        left_min[k] = least
    least = np.inf
    for k in range(t - high):  # cut high + 1 + k; window end high + 1 + k
        least = min(least, _cut_bound(flux, qt, qe, wt, we, f, high + 1 + k, t),
                    _inner_bound(flux, qt, qe, wt, we, f, high + 1 + k, t, blocks))
        right_min[k] = least
    a, b = low - f - 1, t - high - 1  # the outermost cuts still crossed
    total, s = 0.0, 0.0
    while s < u:
        start = low - a - 1 if a >= 0 else low
        end = high + 1 + b if b >= 0 else high
        step = u
        if a >= 0:
            step = min(step, left_min[a])
        if b >= 0:
            step = min(step, right_min[b])
        total += (step - s) * _across(qt, qe, wt, we, start, j, end)[0]
        s = step
        while a >= 0 and left_min[a] <= s:
            a -= 1
        while b >= 0 and right_min[b] <= s:
            b -= 1
    return total * (1.0 - BOUND_MARGIN)


@_compiled
def pair_yield(p, q, unit, low, high, selection, decide=2.0, tally=None):
    """``Y``, the probability that the pair of ranks ``low < high`` selects ``low``, for
    one row (``p``, ``q`` as :func:`row_setup`; fills ``selection`` ``[n]``): 0 across the
    cut, else the least level between them, found by following only the runs that hold
    both (module docstring). Returns ``(Y, m, refreshes)``; with the default ``decide``
    ``Y`` equals ``min(levels[low + 1:high + 1])`` of :func:`row_levels`.

    A verifier only asks whether ``u < Y``: ``decide = u`` in ``[0, 1)`` may return, in
    place of ``Y``, a bound on the same side of ``u`` (a lower bound above ``u``, or ``u``
    itself when ``Y <= u``), the same answer far sooner. First :func:`yield_decision`, which
    settles most of the same-side pairs drawn on real rows without the nesting; else
    the runs are followed, and since the levels met never decrease and end at ``Y``, the
    first one above ``u`` is returned. A ``tally`` (int64 ``[6]``) adds up where that chain
    of runs refreshed and emptied its cuts (:data:`TALLY_BINS`)."""
    n = p.shape[0]
    flux, flux_lo = np.empty(n + 1), np.empty(n + 1)
    qt, qe, wt, we, m, alpha = row_setup(p, q, unit, flux, flux_lo, selection)
    if low < m <= high:
        return 0.0, m, 0
    for j in range(low + 1, high + 1):
        if flux[j] <= 0.0:
            return 0.0, m, 0
    f, t = first_run(flux, low, high)
    if decide < 1.0:
        verdict, bound = yield_decision(flux, qt, qe, wt, we, f, t, low, high, decide)
        if verdict != 0:
            return bound, m, 0
    base, size = f + 1, _tree_size(t - f)  # the tree holds the first run's cuts only
    keys = np.full(size, np.inf)
    fresh = np.full(n + 1, -1, np.int64)
    remaining, rate = np.empty(n + 1), np.empty(n + 1)
    state, out = np.zeros(11), np.empty(11)
    run = 0
    _first_keys(flux, flux_lo, qt, qe, wt, we, f, t, unit, keys, base, remaining, rate, fresh, run, state)
    node_key, node_at = np.empty(2 * size), np.empty(2 * size, np.int64)
    _tree_build(keys, node_key, node_at, size)
    refreshes = 0
    while True:
        c, more = _least_cut(flux, flux_lo, qt, qe, wt, we, f, t, run, state, unit, keys, base, node_key, node_at, size,
                             remaining, rate, fresh, tally)
        refreshes += more
        level = min(max(keys[c - base], state[0]), 1.0)
        if low < c <= high or level > decide:
            return level, m, refreshes
        if tally is not None:
            _tally_cut(tally, f, t, c, True)
        _tree_set(keys, node_key, node_at, size, c - base, np.inf)
        f2, t2 = (c, t) if c <= low else (f, c - 1)
        _child(qt, qe, wt, we, f, t, f2, t2, level, state, out)
        state[:] = out
        f, t = f2, t2
        run += 1
