"""The compiled kernels (numba) of the clock integral of ``k`` drafts without replacement: the
clocks, the count polynomials of groups of ranks, a run's interval masses, a lowest-member law,
the whole nesting of the water levels and the minimal flux, for
:class:`decoding.verifiers.optimal.clock_masses.CompiledClockSetMasses` (the derivation and
what differs from the numpy reference are in that module's docstring) and for the set-up backends
of :mod:`decoding.verifiers.optimal.setup`; and how a pass is shared among threads by
chunks of nodes (:func:`by_node_parts`: every node's polynomials are its own, so any set of
chunks computes each node's values as the whole pass does).
"""
from __future__ import annotations

import numba
import numpy as np

from ..base import share_rows

_compiled = numba.njit(cache=True, nogil=True, error_model="numpy")

#: Nodes per chunk of the passes up the ranks shared among threads (the prefix pass and the
#: groups of ranks, a thread's chunks in one pass, :func:`by_node_parts`; and of the sums over
#: nodes, :func:`_across`): a fixed cut, so the values do not depend on the threads. 16
#: gives a row of a few hundred nodes a few dozen chunks, enough for 16 threads (larger chunks
#: leave threads idle; docs/optimal-verifier.md#measured-cost).
NODE_CHUNK = 16


#: Nodes per chunk of a span's masses and of a lowest-member law shared among threads
#: (:meth:`CompiledClockSetMasses._summed_by_nodes`; each such chunk is summed by chunks of
#: :data:`NODE_CHUNK` inside, :func:`_across`): a fixed cut, so the values do not depend on the
#: threads, and four times the nodes per call of :data:`NODE_CHUNK`, since each call pays its
#: per-rank cost once (a span's passes cannot take a thread's chunks in one pass as the prefix
#: pass does: they sum over nodes per cut). Faster per decision than chunks of 16, with the
#: groups in one pass (research/optimal_wor/JOURNAL.md, "The set-up's pass and the walk's groups, again").
SPAN_CHUNK = 64


#: Below this ``q s`` (``2^-10``) :func:`_clock` takes ``e^{-q s} - 1`` from its Taylor series to
#: ``z^5``: the first term left out is ``z^6 / 720``, below ``1.2e-18`` of the value there, so the
#: sum is as accurate as ``expm1`` (a rounding or two), and it is a few multiplications instead
#: of a library call per node. The tail tokens of a real row, most of its ranks, are there at
#: the lower nodes.
TAYLOR_BELOW = 2.0 ** -10


@_compiled
def _clock(q, s, nodes, none, some):
    """``none[i] = e^{-q s_i}`` (no arrival by ``s_i``) and ``some[i] = 1 - e^{-q s_i}`` for the
    first ``nodes`` nodes: computed where a pass needs them, so no table of ``n`` by ``N`` is
    kept (the same function of the same inputs, so every pass gets the same values). Each value
    to a rounding or two: ``e^{-q s} - 1`` from its Taylor series while ``q s <``
    :data:`TAYLOR_BELOW`, by ``expm1`` while ``q s < ln 2`` (where ``1 - e^{-q s}`` would cancel),
    and ``1 - none`` beyond (``none < 1/2``: no cancellation). The nodes come in increasing
    order, so the Taylor nodes lead (a node out of order would take ``expm1``, as accurate)."""
    lead = 0
    while lead < nodes and q * s[lead] < TAYLOR_BELOW:
        lead += 1
    for i in range(lead):
        z = q * s[i]
        small = -z * (1.0 - z * (0.5 - z * (1.0 / 6.0 - z * (1.0 / 24.0 - z * (1.0 / 120.0)))))
        none[i], some[i] = 1.0 + small, -small
    for i in range(lead, nodes):
        z = q * s[i]
        if z < 0.6931471805599453:
            small = np.expm1(-z)
            none[i], some[i] = 1.0 + small, -small
        else:
            value = np.exp(-z)
            none[i], some[i] = value, 1.0 - value


@_compiled
def _clock_of(q, r, s, nodes, none, some, table_none, table_some, offset):
    """:func:`_clock` for rank ``r``, read from ``table_none``, ``table_some`` (rows of the
    ranks ``offset..``, made by :func:`clock_table`) where they hold it: the same values."""
    row = r - offset
    if 0 <= row < table_none.shape[0]:
        for i in range(nodes):
            none[i], some[i] = table_none[row, i], table_some[row, i]
    else:
        _clock(q[r], s, nodes, none, some)


@_compiled
def clock_table(q, s, first, last):
    """``(none, some)`` ``[last - first, N]``: :func:`_clock` of the ranks ``first..last - 1``,
    kept for a nesting that passes over the same ranks again and again (:func:`water_levels`)."""
    nodes = s.shape[0]
    none, some = np.empty((last - first, nodes)), np.empty((last - first, nodes))
    for r in range(first, last):
        _clock(q[r], s, nodes, none[r - first], some[r - first])
    return none, some


#: No table: every ``e^{-q s}`` computed (the ``table_*`` arguments of :func:`run_masses`).
NO_TABLE = np.empty((0, 0))


@_compiled
def _add_rank(E, D, none, some, q, out_E, out_D, k):
    """``(E, D)`` ``[N, k]`` of a group with one rank added (no arrival ``none``, arrived
    ``some`` ``[N]``, rate ``q``) into ``(out_E, out_D)``, which may be ``(E, D)`` itself."""
    for i in range(E.shape[0]):
        a, b = none[i], some[i]
        qa = q * a
        for d in range(k - 1, 0, -1):  # downward: index d - 1 is read before it is written
            out_D[i, d] = _normal(D[i, d] * a + qa * E[i, d] + D[i, d - 1] * b)
            out_E[i, d] = _normal(E[i, d] * a + E[i, d - 1] * b)
        out_D[i, 0] = _normal(D[i, 0] * a + qa * E[i, 0])
        out_E[i, 0] = _normal(E[i, 0] * a)


#: The least normal float64. A coefficient below it has lost relative precision already (a
#: subnormal float keeps fewer bits), and every operation on subnormals is many times slower
#: than on normal floats: the passes that add ranks set it to 0 (:func:`_normal`), which is 0
#: from then on, so the node is left once all its coefficients are (:func:`live_prefix_nodes`).
SMALLEST_NORMAL = 2.2250738585072014e-308


@_compiled
def _normal(x):
    """``x`` (a coefficient, ``>= 0``), or 0 below :data:`SMALLEST_NORMAL` (an absolute change
    of less than ``2.3e-308``)."""
    return x if x >= SMALLEST_NORMAL else 0.0


@_compiled
def _empty_group(E, D):
    """``E = 1``, ``D = 0`` (no token)."""
    E[:, :] = 0.0
    D[:, :] = 0.0
    E[:, 0] = 1.0


@_compiled
def rank_terms(q, above, s, w, E, D, none, some, decay, low, high, exact, k):
    """``(part, reached)``: the terms of ``sigma_a`` at the nodes ``low..high - 1`` added in order,
    ``w_i e^{-q(above a) s_i} (q_a e^{-q_a s_i} [z^{k-1}] E + (1 - e^{-q_a s_i}) [z^{k-2}] D)`` with
    ``(E, D)`` the prefix ``[0, a)`` (``[k, N]``, degree by degree) and the decay by :func:`_decay`
    (``exact``: by an exponential); ``reached`` the node where ``e^{-q(above a) s}`` is 0 in float64,
    here and beyond (``high`` where none is). The node-by-node pass and the pass at Chebyshev points'
    other nodes both call it."""
    part = 0.0
    for i in range(low, high):
        if above * s[i] > 745.2:
            return part, i
        decay[i] = _decay(decay[i], none[i], above, s[i], exact)
        member = q * none[i] * E[k - 1, i] + some[i] * D[k - 2, i]
        part += member * decay[i] * w[i]
    return part, high


@_compiled
def _decay(before, none, above, s, exact):
    """``e^{-above s}`` at a rank, from ``before``, its value at the rank below (0 where not yet
    computed), divided by the rank's own ``none = e^{-q s}``; an exponential where ``exact`` or
    where ``before < 1e-250`` (so ``none >= before > 0``: no division by 0, and a value that
    underflowed below is computed afresh)."""
    if exact or before < 1e-250:
        return np.exp(-above * s)
    return before / none


@_compiled
def _add_rank_by_degree(E, D, none, some, q, k, nodes):
    """:func:`_add_rank` in place on polynomials held degree by degree (``[k, N]``), at the
    first ``nodes`` nodes: each coefficient by the same float operations in the same order."""
    for d in range(k - 1, 0, -1):  # downward: degree d - 1 is read before it is written
        for i in range(nodes):
            a, b = none[i], some[i]
            D[d, i] = _normal(D[d, i] * a + (q * a) * E[d, i] + D[d - 1, i] * b)
            E[d, i] = _normal(E[d, i] * a + E[d - 1, i] * b)
    for i in range(nodes):
        a = none[i]
        D[0, i] = _normal(D[0, i] * a + (q * a) * E[0, i])
        E[0, i] = _normal(E[0, i] * a)


@_compiled
def live_prefix_nodes(E, D, nodes):
    """How many of the first ``nodes`` nodes lead up to the last where the group's ``(E, D)``
    (``[k, N]``) has a coefficient other than 0. Past it every coefficient is exactly 0, and
    stays so as ranks are added (each new coefficient is formed from old ones times finite
    factors, so 0 begets 0), and every integrand that multiplies them is 0 there: a pass up the
    ranks skips those nodes without changing a value."""
    while nodes > 0:
        for d in range(E.shape[0]):
            if E[d, nodes - 1] != 0.0 or D[d, nodes - 1] != 0.0:
                return nodes
        nodes -= 1
    return nodes


@_compiled
def prefix_at(q, s, E0, D0, every, f, k):
    """``(E, D)`` of the ranks ``[0, f)``: the checkpoint below ``f`` with the ranks up to it
    added (the same float operations as :func:`prefix_pass`)."""
    E, D = np.empty(E0.shape[1:]), np.empty(D0.shape[1:])
    advance_prefix(q, s, E0, D0, every, f, k, E, D, f + 1)
    return E, D


@_compiled
def advance_prefix(q, s, E0, D0, every, f, k, E, D, at):
    """``(E, D)`` := the prefix ``[0, f)``, given that they hold the prefix ``[0, at)``: the
    ranks ``[at, f)`` added where that is shorter than from the checkpoint below ``f`` (which
    is taken where ``at > f``). Every route adds the same ranks in the same order from a value
    of the one pass, so every route gives the one pass's prefix, bit for bit. Returns ``f``."""
    if at > f or f - at > f % every:
        E[:, :] = E0[f // every]
        D[:, :] = D0[f // every]
        at = f - f % every
    none, some = np.empty(s.shape[0]), np.empty(s.shape[0])
    for r in range(at, f):
        _clock(q[r], s, s.shape[0], none, some)
        _add_rank(E, D, none, some, q[r], E, D, k)
    return f


@_compiled
def _live_nodes(decay, E0f, D0f):
    """How many nodes lead up to the last with ``decay > 0`` where the prefix ``(E0f, D0f)``
    (``[N, k]``) is not 0 (:func:`live_prefix_nodes`): past it ``e^{-q(above t) s}`` underflows
    to 0, or every term of the integrand has a factor of the prefix, so a node's term adds
    exactly 0 to the integral and is skipped (skipping it changes no sum)."""
    nodes = decay.shape[0]
    while nodes > 0 and decay[nodes - 1] == 0.0:
        nodes -= 1
    return live_prefix_nodes(E0f.T, D0f.T, nodes)


@_compiled
def read_nodes(s, w, above_t, E0f, D0f):
    """The nodes a run ``[f, t]``'s masses read (:func:`_live_nodes` of the decay
    ``e^{-q(above t) s} w`` and the prefix ``(E0f, D0f)`` of ``[0, f)``, as
    :func:`stretch_masses` forms them): past these every node adds exactly 0."""
    return _live_nodes(np.exp(-above_t * s) * w, E0f, D0f)


#: The ranks of a run whose products below each cut :func:`run_masses` keeps at once (its
#: ``block``): the forward pass keeps only the groups at the start of each block of this many
#: ranks, and the backward pass recomputes a block's products from there (so a run of ``10^5``
#: ranks at 400 nodes and ``k = 8`` keeps about 4 million floats, not 600 million).
RUN_BLOCK = 256


@_compiled
def run_masses(q, s, w, above, E0f, D0f, f, t, k, out, block, table_none, table_some, offset):
    """``out[j - f - 1]`` for the cuts ``j = f + 1..t``: the mass of the draft sets with every
    draft in ranks ``<= t``, one in ``[f, j)`` and one in ``[j, t]``, the integral of
    ``[x^(k-1)] (D0 N1 N2 + D1 E0 N2 + D2 E0 N1)`` (groups ``[0, f)``, ``[f, j)``, ``[j, t]``;
    ``N = E - E(0)``; ``(E0f, D0f)`` the prefix ``[0, f)``), summed as ``[x^(k-1)] (A N2 + B
    D2)`` with ``A = D0 N1 + D1 E0`` and ``B = E0 N1``, the products of the groups below ``j``.
    Blocks of ``block`` ranks from the top down: the groups ``[f, j)`` of a block are rebuilt
    from the block's start (kept by a first forward pass) with their products, then the backward
    pass over the block grows ``[j, t]`` and costs ``O(k)`` per node and cut. The same float
    operations on the same values whatever ``block``, so the same masses to the bit (and the
    same as :func:`stretch_masses` gives to a few units of roundoff); ``e^{-q s}`` read from ``table_*`` (rows of
    the ranks ``offset..``, :func:`clock_table`) where they hold a rank, else computed
    (:data:`NO_TABLE`), the same values either way."""
    decay = np.exp(-above[t] * s) * w
    nodes = _live_nodes(decay, E0f, D0f)
    E, D, E2, D2 = np.empty((nodes, k)), np.empty((nodes, k)), np.empty((nodes, k)), np.empty((nodes, k))
    _empty_group(E, D)  # the group [f, f)
    _empty_group(E2, D2)  # the group [t + 1, t]
    _cuts_between(q, s, E, D, E2, D2, E0f, D0f, decay, k, f, t, out, block, table_none, table_some, offset)


@_compiled
def _cuts_between(q, s, E, D, E2, D2, E0f, D0f, decay, k, low, high, out, block, table_none, table_some, offset):
    """``out[j - low - 1]`` for the cuts ``j = low + 1..high`` of a run ``[f, t]``, given ``(E,
    D)`` the group ``[f, low)`` and ``(E2, D2)`` the group ``[high + 1, t]`` (both overwritten):
    a first pass keeps the group ``[f, low + b block)`` at the start of every block ``b``, then the
    blocks from the top down, each rebuilt from its start with its products below each cut
    (:func:`_block_forward`) and grown downward (:func:`_block_backward`), as :func:`run_masses`
    says."""
    nodes, blocks = E.shape[0], (high - low + block - 1) // block
    none, some = np.empty(nodes), np.empty(nodes)
    start_E, start_D = np.empty((blocks, nodes, k)), np.empty((blocks, nodes, k))
    for b in range(blocks):
        start_E[b], start_D[b] = E, D
        if b == blocks - 1:
            break  # the last block's ranks start no block
        for r in range(low + b * block, low + (b + 1) * block):
            _clock_of(q, r, s, nodes, none, some, table_none, table_some, offset)
            _add_rank(E, D, none, some, q[r], E, D, k)
    lower_A, lower_B = np.empty((block, nodes, k)), np.empty((block, nodes, k))
    for b in range(blocks - 1, -1, -1):
        lo_b, hi_b = low + b * block, min(low + (b + 1) * block, high)  # the cuts j = lo_b + 1..hi_b
        E[:, :], D[:, :] = start_E[b], start_D[b]
        _block_forward(q, s, none, some, E, D, E0f, D0f, k, lo_b, hi_b, lower_A, lower_B, table_none, table_some, offset)
        _block_backward(q, s, none, some, E2, D2, lower_A, lower_B, decay, k, lo_b, hi_b, out[lo_b - low:], table_none,
                        table_some, offset)


@_compiled
def _block_forward(q, s, none, some, E, D, E0f, D0f, k, low, high, lower_A, lower_B, table_none, table_some, offset):
    """With ``(E, D)`` the group ``[f, low)``: the ranks ``low..high - 1`` added one by one, and
    the products below each cut ``j = r + 1`` into ``lower_A[r - low]``, ``lower_B[r - low]``."""
    for r in range(low, high):
        _clock_of(q, r, s, E.shape[0], none, some, table_none, table_some, offset)
        _add_rank(E, D, none, some, q[r], E, D, k)  # now [f, r + 1)
        _products_below(E, D, E0f, D0f, k, lower_A[r - low], lower_B[r - low])


@_compiled
def _block_backward(q, s, none, some, E2, D2, lower_A, lower_B, decay, k, low, high, out, table_none, table_some,
                    offset):
    """With ``(E2, D2)`` the group ``[high + 1, t]``: the ranks ``high..low + 1`` added one by
    one, and ``out[j - low - 1]`` the mass at each cut ``j``."""
    for j in range(high, low, -1):
        _clock_of(q, j, s, E2.shape[0], none, some, table_none, table_some, offset)
        _add_rank(E2, D2, none, some, q[j], E2, D2, k)
        out[j - low - 1] = _across(lower_A[j - low - 1], lower_B[j - low - 1], E2, D2, decay, k)


@_compiled
def _merge(E, D, GE, GD, k):
    """``(E, D)`` := the union of its group and a disjoint one ``(GE, GD)`` (truncated):
    ``E GE`` and ``D GE + E GD``, at the nodes of ``E``."""
    for i in range(E.shape[0]):
        for d in range(k - 1, -1, -1):  # downward: the lower degrees are read before written
            e_value, d_value = 0.0, 0.0
            for e in range(d + 1):
                e_value += E[i, e] * GE[i, d - e]
                d_value += D[i, e] * GE[i, d - e] + E[i, e] * GD[i, d - e]
            E[i, d], D[i, d] = e_value, d_value


@_compiled
def range_group(q, s, GE, GD, group, lo, hi, k, E, D):
    """``(E, D)`` ``[nodes, k]`` := the count polynomials of the ranks ``[lo, hi)``: the ranks up
    to the first multiple of ``group`` added one by one, the whole groups of
    :func:`group_pass` (``GE``, ``GD``) merged, the ranks past the last added one by one;
    ``O(group N k + (hi - lo) / group N k^2)`` instead of a pass over the range."""
    nodes = E.shape[0]
    none, some = np.empty(nodes), np.empty(nodes)
    _empty_group(E, D)
    r = lo
    while r < hi and r % group != 0:
        _clock(q[r], s, nodes, none, some)
        _add_rank(E[:nodes], D[:nodes], none, some, q[r], E[:nodes], D[:nodes], k)
        nodes = live_prefix_nodes(E.T, D.T, nodes)  # the nodes past it stay 0
        r += 1
    while r + group <= hi:
        _merge(E[:nodes], D[:nodes], GE[r // group, :nodes], GD[r // group, :nodes], k)
        nodes = live_prefix_nodes(E.T, D.T, nodes)
        r += group
    while r < hi:
        _clock(q[r], s, nodes, none, some)
        _add_rank(E[:nodes], D[:nodes], none, some, q[r], E[:nodes], D[:nodes], k)
        nodes = live_prefix_nodes(E.T, D.T, nodes)
        r += 1


@_compiled
def stretch_masses(q, s, w, above, E0f, D0f, EL, DL, GE, GD, group, low, high, t, k, out, block):
    """:func:`run_masses` of the run ``[f, t]`` at the cuts ``low + 1..high`` only
    (``out[j - low - 1]``), given ``(EL, DL)`` the group ``[f, low)`` (from :func:`range_group`,
    or the prefix where ``f = 0``): the group ``[high + 1, t]`` from :func:`range_group`, then
    the passes of :func:`run_masses` over ``[low, high]`` alone, so ``O((high - low) N k^2)``
    plus the ranges, whatever the run's length. The groups are formed in another order than a
    pass over the run forms them, so the masses agree with :func:`run_masses` to a few units of
    roundoff, not to the bit."""
    decay = np.exp(-above[t] * s) * w
    nodes = _live_nodes(decay, E0f, D0f)
    E2, D2 = np.empty((nodes, k)), np.empty((nodes, k))
    range_group(q, s, GE, GD, group, high + 1, t + 1, k, E2, D2)
    # where [f, low) or [high + 1, t] is 0, so is [f, j) or [j, t] at every cut: its terms are 0
    nodes = live_prefix_nodes(EL.T, DL.T, live_prefix_nodes(E2.T, D2.T, nodes))
    E, D, E2, D2 = EL[:nodes].copy(), DL[:nodes].copy(), E2[:nodes], D2[:nodes]  # (E2, D2 are this call's own)
    _cuts_between(q, s, E, D, E2, D2, E0f, D0f, decay, k, low, high, out, block, NO_TABLE, NO_TABLE, 0)


@_compiled
def _products_below(E, D, E0f, D0f, k, A, B):
    """``A = D0 N1 + D1 E0`` and ``B = E0 N1`` (truncated; ``(E, D)`` the group ``[f, j)``,
    ``(E0f, D0f)`` the prefix ``[0, f)``) into ``A``, ``B`` ``[nodes, k]``."""
    for i in range(A.shape[0]):
        for d in range(k):
            a_value, b_value = 0.0, 0.0
            for e in range(d + 1):
                a_value += D[i, d - e] * E0f[i, e]
                if e >= 1:
                    a_value += D0f[i, d - e] * E[i, e]
                    b_value += E0f[i, d - e] * E[i, e]
            A[i, d], B[i, d] = a_value, b_value


@_compiled
def _across(A, B, E2, D2, decay, k):
    """The integral of ``[x^(k-1)] (A N2 + B D2)`` (``(E2, D2)`` the group ``[j, t]``), summed
    by chunks of :data:`NODE_CHUNK` nodes, the chunks' sums added in their order (a fixed order
    over the nodes of a call, whatever the threads; a span's chunks of :data:`SPAN_CHUNK` are then
    added in theirs, :meth:`CompiledClockSetMasses._summed_by_nodes`)."""
    total, chunk = 0.0, 0.0
    for i in range(A.shape[0]):
        value = B[i, k - 1] * D2[i, 0]
        for c in range(1, k):
            value += A[i, k - 1 - c] * E2[i, c] + B[i, k - 1 - c] * D2[i, c]
        chunk += value * decay[i]
        if (i + 1) % NODE_CHUNK == 0 or i + 1 == A.shape[0]:
            total += chunk
            chunk = 0.0
    return total


@_compiled
def lowest_law(q, s, w, above, E0f, D0f, f, t, k, out):
    """``out[c - f]`` for ``c = f..t``: for the sets whose highest member lies in ``[f, t]``,
    the probability that ``c`` is their lowest member inside ``[f, t]`` (no clock of ``[f, c)``
    or above ``t`` has rung; ``c`` rings ``k``-th with the others in ``[0, f)`` or ``(c, t]``,
    or it rang before and one of those rings ``k``-th; ``(E0f, D0f)`` the prefix ``[0, f)``).
    No clock of ``[f, c)`` by ``s``: the product of their ``e^{-q s}``, formed upward."""
    decay = np.exp(-above[t] * s) * w
    nodes = _live_nodes(decay, E0f, D0f)
    none, some = np.empty(nodes), np.empty(nodes)
    gap = np.empty((t - f + 1, nodes))  # gap[c - f]: no arrival in [f, c) by s
    gap[0] = 1.0
    for c in range(f, t):
        _clock(q[c], s, nodes, none, some)
        gap[c - f + 1] = gap[c - f] * none
    E, D = np.empty((nodes, k)), np.empty((nodes, k))
    _empty_group(E, D)  # the group (c, t]
    for c in range(t, f - 1, -1):
        _clock(q[c], s, nodes, none, some)
        total = 0.0
        for i in range(nodes):
            rest_E = 0.0  # [x^(k-1)] of E0 E
            for a in range(k):
                rest_E += E0f[i, a] * E[i, k - 1 - a]
            rest_D = 0.0  # [x^(k-2)] of D0 E + E0 D
            for a in range(k - 1):
                rest_D += D0f[i, a] * E[i, k - 2 - a] + E0f[i, a] * D[i, k - 2 - a]
            member = q[c] * none[i] * rest_E + some[i] * rest_D
            total += gap[c - f, i] * member * decay[i]
        out[c - f] = total
        _add_rank(E, D, none, some, q[c], E, D, k)


@_compiled
def water_levels(q, s, w, above, E0, D0, every, k, flux, lo, hi, levels, floor, block, table_none, table_some):
    """The nesting of :func:`otm.rules.water_levels.construction.water_level_parameters` on the cuts
    ``lo + 1..hi`` in float64 (adds to ``levels``): a run whose inner cuts all carry flux is
    raised by the least ``remaining / mass`` and split at the cuts it empties; a remaining
    flux within ``floor (raised + 1) F(j)`` counts as empty (``floor``: ``REMAINDER_FLOOR``
    unit roundoffs). ``table_*``: :func:`clock_table` of the ranks ``lo..hi``, or
    :data:`NO_TABLE` (the same levels either way). Returns 0, or 1 where a cut
    with flux has no set of its run across it (impossible in the ratio order: water levels are probabilities,
    claim (d))."""
    if hi <= lo:
        return 0
    remaining = flux.copy()
    raised = np.zeros(flux.shape[0])
    stack = np.empty((hi - lo + 2, 2), np.int64)
    stack[0, 0], stack[0, 1], top = lo, hi, 1
    masses = np.empty(hi - lo)
    E0f, D0f = np.empty(E0.shape[1:]), np.empty(D0.shape[1:])  # the prefix [0, at), kept between runs
    at = hi + 2  # none yet
    while top > 0:
        top -= 1
        f, t = stack[top, 0], stack[top, 1]
        whole, start = True, -1
        for j in range(f + 1, t + 1):
            empty = remaining[j] <= floor * (raised[j] + 1.0) * flux[j]
            if empty:
                whole = False
                if start >= 0:
                    stack[top, 0], stack[top, 1] = start - 1, j - 1
                    top += 1
                    start = -1
            elif start < 0:
                start = j
        if not whole:
            if start >= 0:
                stack[top, 0], stack[top, 1] = start - 1, t
                top += 1
            continue
        at = advance_prefix(q, s, E0, D0, every, f, k, E0f, D0f, at)
        run_masses(q, s, w, above, E0f, D0f, f, t, k, masses, block, table_none, table_some, lo)
        theta = np.inf
        for j in range(f + 1, t + 1):
            if masses[j - f - 1] <= 0.0:
                return 1
            theta = min(theta, remaining[j] / masses[j - f - 1])
        for j in range(f + 1, t + 1):
            remaining[j] -= theta * masses[j - f - 1]
            levels[j] += theta
            raised[j] += 1.0
        stack[top, 0], stack[top, 1] = f, t  # split at the next pop
        top += 1
    return 0


@_compiled
def minimal_flux(ps, sigma, m, unit):
    """``[n + 1]``: :func:`otm.rules.water_levels.construction._minimal_flux` on float64 rows, its float
    operations in its order (``max(0, v)`` as ``v`` where ``v > 0``, else 0), so the same flux
    to the bit: from the top of the ranks down to the cut ``m`` and from the bottom up to it,
    0 on the cut, and a flux of at most ``8 unit`` dropped."""
    n = ps.shape[0]
    flux = np.zeros(n + 1)
    for a in range(n - 1, m - 1, -1):
        value = flux[a + 1] - (ps[a] - sigma[a])
        flux[a] = value if value > 0.0 else 0.0
    for a in range(m):
        value = flux[a] + (ps[a] - sigma[a])
        flux[a + 1] = value if value > 0.0 else 0.0
    flux[m] = 0.0
    for a in range(n + 1):
        if flux[a] <= 8 * unit:
            flux[a] = 0.0
    return flux


#: A pass over fewer rank-nodes than this runs in the calling thread alone.
SHARED_FROM = 50_000


def in_order(parts: np.ndarray) -> np.ndarray:
    """The chunks' parts (first axis) added in their order, from 0, as :func:`_across` adds them."""
    total = np.zeros(parts.shape[1:])
    for part in parts:
        total += part  # (in place: the same additions, no array per chunk)
    return total


def node_chunks(nodes: int, size: int = NODE_CHUNK) -> list[tuple[int, int]]:
    """The chunks ``[low, high)`` of ``size`` nodes of ``nodes``."""
    return [(low, min(low + size, nodes)) for low in range(0, nodes, size)]


def by_node_parts(run, chunks: list[tuple[int, int]], work: int) -> None:
    """``run(taken)`` for each thread's share of the chunks of nodes (``taken``, the int64
    indices ``part, part + parts, ...``), shared among threads
    (:func:`decoding.verifiers.base.share_rows`: the compiled passes release the GIL) where the
    pass covers at least :data:`SHARED_FROM` rank-nodes (``work``), else all in one call. Every
    node's polynomials are its own, so a pass over any set of chunks computes each node's values
    as the whole pass does."""

    def part_run(part: int, parts: int) -> None:
        run(np.arange(part, len(chunks), parts, dtype=np.int64))

    if work < SHARED_FROM:
        part_run(0, 1)
    else:
        share_rows(part_run, len(chunks))


def by_nodes(chunk, chunks: list[tuple[int, int]], work: int) -> None:
    """``chunk(c, low, high)`` for every chunk of nodes, a thread's share one chunk after another
    (:func:`by_node_parts`)."""

    def run(taken: np.ndarray) -> None:
        for c in taken:
            chunk(int(c), *chunks[c])

    by_node_parts(run, chunks, work)


__all__ = ["NODE_CHUNK", "NO_TABLE", "RUN_BLOCK", "SHARED_FROM", "SMALLEST_NORMAL", "SPAN_CHUNK", "TAYLOR_BELOW", "advance_prefix", "by_node_parts", "by_nodes", "clock_table", "live_prefix_nodes", "lowest_law", "minimal_flux", "node_chunks", "prefix_at", "range_group", "rank_terms", "read_nodes", "run_masses", "stretch_masses", "water_levels", "in_order"]
