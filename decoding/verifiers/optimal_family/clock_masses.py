"""The clock integral's set masses and the water levels of ``k >= 3`` drafts without
replacement, compiled: :class:`CompiledClockSetMasses`, for :mod:`decoding.verifiers.optimal_family.wor`.

The same computation as the reference :class:`otm.rules.wor_clock_masses.ClockSetMasses`
(the derivation: docs/optimal-verifier.md, section 8, "Beyond the enumeration") and the
nesting of :func:`otm.rules.optimal_pair_wor.water_level_parameters`, in numba instead of numpy
and Python: the same quadrature nodes, the same count polynomials ``(E, D)`` per node, the
same positive integrands, the same rounding floor of the nesting
(``REMAINDER_FLOOR unit (raised + 1) F(j)``, :data:`otm.rules.optimal_pair_wor.REMAINDER_FLOOR`).
What changes is the order of some float additions (a
node's terms of degree ``k - 1`` are summed directly instead of through truncated products,
the integral is a loop instead of a BLAS dot product) and how some factors are formed
(``e^{-q s} - 1`` by its Taylor series where ``q s`` is small, :func:`_clock`; the prefix pass's
``e^{-q(above a) s}`` by quotients between exponentials, :func:`prefix_pass`; subnormal
coefficients set to 0 as ranks are added, :func:`_normal`), so the values agree with the
reference's to a few units of roundoff, not bit for bit (tests/decoding/test_optimal_wor_numba.py),
and the levels that come out are certified as the reference's are: by the selection law they
realise, through :meth:`CompiledClockSetMasses.lowest_law`
(:func:`otm.rules.wor_clock_masses.realised_selection`).

The prefix pass, the groups of ranks, their ranges and a span's end groups leave the nodes past
the last where their polynomials are not exactly 0 (:func:`live_prefix_nodes`: 0 stays 0 as
ranks are added, and every term there has a factor of them), and a run or a lowest-member law
starts from the nodes where its prefix and ``e^{-q(above t) s}`` are not 0, so the upper nodes,
there for the rarest tokens' sets, cost little once the tokens of sizable ``q`` have rung; the
same values to the bit. (Leaving them inside a run's own passes as well gave the same masses
and no gain on rows cut to 1,000 tokens or on whole rows' spans, by a hand timing; not kept.)

Memory: no tables of ``e^{-q s}`` (:func:`_clock` computes them where a pass needs them; the
nesting keeps those of its own ranks, :func:`clock_table`), the prefixes at every 256th rank, and
a run's products 256 ranks at a time, so a whole real vocabulary fits (docs/optimal-verifier.md,
section 8, "k drafts at the real vocabulary"). Cost per run ``[f, t]`` of the nesting: a forward
pass (the groups ``[f, j)`` at each block's start), and per block a forward pass with the
products and a backward pass (the groups ``[j, t]``), ``O((t - f) N k^2)`` for ``N`` nodes, as the
reference's, without its per-rank Python calls; the walk's bounds ask a run for some cuts only
(:func:`stretch_masses`, a span of a run alone, its ends multiplied out from groups of ranks
kept once a walk reads a long run, :func:`range_group`); a run of flux peels about one rank at a time,
so a row costs at most about ``sum len^2 N k^2`` over its runs, which
:meth:`CompiledClockSetMasses.nesting_seconds` estimates before the nesting starts (rows above
:attr:`CompiledClockSetMasses.max_nesting_seconds` are refused); measured in
docs/optimal-verifier.md, section 8
(``python -m research.optimal_wor.wor_water_levels --cost``, ``--float`` and ``--nesting-rate``).
"""
from __future__ import annotations

import functools

import numba
import numpy as np

from otm.rules.optimal_pair_wor import REMAINDER_FLOOR, flux_runs
from otm.errors import NotApplicableError
from otm.rules.wor_clock_masses import ClockSetMasses

from ..base import share_rows, sharing_threads
from .cache import SizedCache

_compiled = numba.njit(cache=True, nogil=True, error_model="numpy")

#: Nodes per chunk of the passes up the ranks shared among threads (the prefix pass and the
#: groups of ranks, a thread's chunks in one pass, :func:`by_node_parts`; and of the sums over
#: nodes, :func:`_across`): a fixed cut, so the values do not depend on the threads. 16
#: gives a row of a few hundred nodes a few dozen chunks, enough for 16 threads (larger chunks
#: leave threads idle; docs/optimal-verifier.md, section 9).
NODE_CHUNK = 16

#: The prefix pass takes ``e^{-q(above a) s}`` from an exponential at every this many ranks and
#: from the rank before, divided by ``e^{-q_a s}``, in between (:func:`prefix_pass`): one
#: division instead of an exponential per rank and node, at most 63 quotients from an
#: exponential, each of a rounding or two (the flux's and masses' precision on whole Qwen rows
#: as before: docs/optimal-verifier.md, section 8, "The set-up's exponentials"). A fixed rank,
#: not the checkpoints', so the values do not depend on those.
DECAY_ANCHOR = 64

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
def prefix_pass(q, s, w, above, k, every, chunks, E0, D0, parts):
    """One pass up the ranks at the nodes of the chunks ``chunks`` (increasing indices of chunks
    of :data:`NODE_CHUNK` nodes): ``E0[c], D0[c]`` ``[N, k]`` at those nodes, the count
    polynomials of the ranks ``[0, c * every)``, and ``parts[chunk, a]``, each chunk's part of
    ``sigma[a]`` (its nodes' terms added in their order), the probability that rank ``a`` is the
    highest drafted: ``a`` rings ``k``-th with ``k - 1`` of ``[0, a)`` before, or it rang before
    and one of ``[0, a)`` rings ``k``-th, and nothing above ``a`` has rung. The polynomials are
    held degree by degree (``[k, nodes]``, so a rank's update runs along the nodes,
    :func:`_add_rank_by_degree`) and the nodes past :func:`live_prefix_nodes` are left: the same
    float operations on the same values as :func:`_add_rank` node by node, so the same prefixes
    and parts whichever chunks one pass takes (:meth:`CompiledClockSetMasses._prefix_pass`).
    ``e^{-q(above a) s}`` is the one before it divided by ``e^{-q_a s}`` (the rank leaves the
    mass above), and an exponential at every :data:`DECAY_ANCHOR`-th rank and wherever it is
    below ``1e-250``, so the quotients never run longer than that and never divide by 0."""
    index = chunk_nodes(chunks, s.shape[0])
    s, w, nodes = s[index], w[index], index.shape[0]
    n, live = q.shape[0], nodes
    E, D = np.zeros((k, nodes)), np.zeros((k, nodes))
    E[0, :] = 1.0
    none, some = np.empty(nodes), np.empty(nodes)
    decay = np.zeros(nodes)  # e^{-q(above a) s}; 0: not yet computed
    for a in range(n + 1):
        if a % every == 0:
            for i in range(nodes):
                for d in range(k):
                    E0[a // every, index[i], d], D0[a // every, index[i], d] = E[d, i], D[d, i]
        if a == n:
            break
        _clock(q[a], s, live, none, some)
        exact = a % DECAY_ANCHOR == 0
        for low in range(0, live, NODE_CHUNK):  # each chunk's part (0 where no node was taken, as parts starts)
            high = min(low + NODE_CHUNK, live)
            parts[chunks[low // NODE_CHUNK], a], reached = rank_terms(q[a], above[a], s, w, E, D, none, some, decay,
                                                                      low, high, exact, k)
            if reached < high:
                break
        _add_rank_by_degree(E, D, none, some, q[a], k, live)
        live = live_prefix_nodes(E, D, live)


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
def chunk_nodes(chunks, total):
    """The nodes of the chunks ``chunks`` (increasing indices of chunks of :data:`NODE_CHUNK` of
    ``total`` nodes), in order."""
    index = np.empty(chunks.shape[0] * NODE_CHUNK, np.int64)
    nodes = 0
    for chunk in chunks:
        for node in range(chunk * NODE_CHUNK, min((chunk + 1) * NODE_CHUNK, total)):
            index[nodes] = node
            nodes += 1
    return index[:nodes]


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
def group_pass(q, s, k, group, GE, GD, first, last, chunks):
    """``GE[g], GD[g]`` ``[N, k]`` for the groups ``first <= g < last`` at the nodes of the chunks
    ``chunks`` (as :func:`prefix_pass` takes them): the count polynomials of the ranks ``[g group,
    (g + 1) group)`` alone, one pass up their ranks, from which :func:`range_group` multiplies out
    any range. Degree by degree, leaving the nodes where the group is 0, as :func:`prefix_pass`:
    the same values as :func:`_add_rank` node by node."""
    index = chunk_nodes(chunks, s.shape[0])
    s, nodes = s[index], index.shape[0]
    E, D = np.empty((k, nodes)), np.empty((k, nodes))
    none, some = np.empty(nodes), np.empty(nodes)
    for g in range(first, min(last, (q.shape[0] + group - 1) // group)):
        E[:, :], D[:, :] = 0.0, 0.0
        E[0, :] = 1.0
        live = nodes
        for a in range(g * group, min(q.shape[0], (g + 1) * group)):
            _clock(q[a], s, live, none, some)
            _add_rank_by_degree(E, D, none, some, q[a], k, live)
            live = live_prefix_nodes(E, D, live)  # the nodes past it stay 0
        for i in range(nodes):
            for d in range(k):
                GE[g, index[i], d], GD[g, index[i], d] = E[d, i], D[d, i]


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
    """The nesting of :func:`otm.rules.optimal_pair_wor.water_level_parameters` on the cuts
    ``lo + 1..hi`` in float64 (adds to ``levels``): a run whose inner cuts all carry flux is
    raised by the least ``remaining / mass`` and split at the cuts it empties; a remaining
    flux within ``floor (raised + 1) F(j)`` counts as empty (``floor``: ``REMAINDER_FLOOR``
    unit roundoffs). ``table_*``: :func:`clock_table` of the ranks ``lo..hi``, or
    :data:`NO_TABLE` (the same levels either way). Returns 0, or 1 where a cut
    with flux has no set of its run across it (impossible in the ratio order: Theorem 5,
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
    """``[n + 1]``: :func:`otm.rules.optimal_pair_wor._minimal_flux` on float64 rows, its float
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


class CompiledClockSetMasses(ClockSetMasses):
    """:class:`otm.rules.wor_clock_masses.ClockSetMasses` with its prefix tables, ``sigma``, run
    masses and lowest-member laws compiled (module docstring; the set-up and the cache of
    :meth:`~otm.rules.wor_clock_masses.ClockSetMasses.across` are the reference's), and
    :meth:`water_levels`, the whole float64 nesting in one call (which
    :func:`otm.rules.optimal_pair_wor.water_level_parameters` takes when a masses object has
    it)."""

    #: The largest :meth:`table_floats` (float64, 512 MiB: the checkpointed prefixes of about
    #: 640,000 tokens at 400 nodes and ``k = 8``, so any real vocabulary). Time is limited apart,
    #: by :meth:`nesting_seconds`: the nesting's cost grows as the square of a run of flux.
    max_table_floats = 64_000_000

    #: The compiled nesting's speed in units of ``len^2 N k`` per second, ``len`` the ranks of a
    #: run of flux (it peels about one rank at a time), ``N`` the nodes: the least measured on
    #: real rows (``python -m research.optimal_wor.wor_water_levels --corpus DIR --positions 4
    #: --top 300 --nesting-rate --ks 3,4,6,8``), so the estimate errs on the long side
    #: (research/optimal_wor/JOURNAL.md, "Figures moved from docstrings").
    NESTING_RATE = 1.6e8

    #: A row whose nesting :meth:`nesting_seconds` estimates above this is refused.
    max_nesting_seconds = 60.0

    #: The nesting keeps ``e^{-q s}`` of the ranks it nests (:func:`clock_table`, for every pass
    #: over a run) where that takes at most this many floats (64 MiB: about 13,000 ranks at 300
    #: nodes), and computes them in each pass beyond.
    NESTING_TABLE_FLOATS = 8_000_000

    #: Float inputs with more draft tuples take these masses rather than the enumeration (which
    #: still takes a row these refuse): past a thousand tuples this path is the faster
    #: (docs/optimal-verifier.md, section 8).
    enumerate_up_to = 1_000

    #: :data:`RUN_BLOCK`: the ranks of a run whose products :func:`run_masses` keeps at once.
    run_block = RUN_BLOCK

    #: A run of at most this many ranks is computed whole at the first cut :meth:`across` asks
    #: of it (the wide nesting asks every cut of every run); longer ones block by block.
    eager_ranks = 4096

    #: The prefix polynomials are kept at every this many ranks (the numpy reference's
    #: :data:`~otm.rules.wor_clock_masses.CHECKPOINT` is 64), and the pass at Chebyshev points
    #: multiplies out blocks of as many ranks: its fixed work per block and node is paid a quarter
    #: as often, and the checkpoints, fresh memory for every row, take a quarter of the floats (30
    #: MB instead of 120 at ``k = 8`` and 400 nodes). Faster than 64 on whole rows, and 512 or 1,024
    #: no faster (``scripts/bench_wor_scan.py``, ``scripts/bench_optimal_verifier.py --wor-rows``;
    #: research/optimal_wor/JOURNAL.md, "Figures moved from docstrings"). A walk
    #: rebuilds a prefix from the checkpoint below it, up to 255 ranks node by node; its decisions
    #: cost what they did (research/optimal_wor/JOURNAL.md, "Checkpoints at every 256th rank").
    #: The scan on a device keeps 64 (:func:`masses_on`).
    checkpoint = 256

    #: The ranks of each group whose polynomials are kept once a walk reads a long run
    #: (:func:`group_pass`), from which :func:`range_group` multiplies out a range: the walk's
    #: runs and windows cost the cuts read, not their length (:meth:`across_cuts`).
    group = 512

    def _tabulate(self) -> None:
        """No tables: the compiled passes compute ``e^{-q s}`` where they need it (:func:`_clock`)."""

    @classmethod
    def table_floats(cls, n: int, nodes: int, k: int) -> int:
        """The float64 entries kept for ``n`` ranks: the checkpointed prefix polynomials (two, of
        ``k`` each) and the polynomials of every :attr:`group` of ranks; a run's masses keep
        :data:`RUN_BLOCK` ranks of products at a time besides."""
        return 2 * (n // cls.checkpoint + 1 + n // cls.group + 1) * nodes * k

    #: The torch device whose blocked scan makes the pass up the ranks and every group of ranks at
    #: once (:func:`_device_scan`; the class of :func:`masses_on`), or ``None``: the compiled pass
    #: on the CPU, the groups as the walks first read them.
    scan_device = None

    #: The pass up the ranks on the CPU: ``True``, each block's small clocks at a few Chebyshev
    #: points (:func:`decoding.verifiers.optimal_family.setup.chebyshev.prefix_pass_chebyshev`, its nodes
    #: dealt out among the threads of a share, one part on a small row); ``False``, :func:`prefix_pass`, node by node, its reference, shared among threads
    #: by chunks of nodes; ``None``, the first where the node-by-node pass would run on fewer
    #: than :attr:`points_below_threads` threads (:meth:`pass_at_points`). The two give the same
    #: values within roundoff, not to the bit (docs/optimal-verifier.md, section 8, "The set-up's
    #: pass at Chebyshev points").
    prefix_at_points = None

    #: The pass at points is the faster on few threads; from about this many the node-by-node
    #: pass dealt among threads catches up (``python scripts/bench_wor_scan.py --threads``;
    #: research/optimal_wor/JOURNAL.md, "Figures moved from docstrings").
    points_below_threads = 4

    def pass_at_points(self) -> bool:
        """Whether the CPU's pass up the ranks takes the points (:attr:`prefix_at_points`)."""
        if self.prefix_at_points is not None:
            return self.prefix_at_points
        return self._pass_threads() < self.points_below_threads

    def _pass_threads(self) -> int:
        """The threads the pass up the ranks is shared among: one on a small row (fewer than
        :data:`SHARED_FROM` rank-nodes), else those of a share of its chunks of nodes."""
        return 1 if self.n * self.s.size < SHARED_FROM else sharing_threads(len(node_chunks(self.s.size)))

    def _prefix_pass(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:func:`~decoding.verifiers.optimal_family.setup.chebyshev.prefix_pass_chebyshev` where
        :meth:`pass_at_points`, else :func:`prefix_pass` over each thread's chunks of nodes
        (:func:`by_node_parts`), ``sigma`` the sum of the chunks' parts in their order; or, on a
        :attr:`scan_device`, its scan (:func:`_device_scan`), with the groups of ranks."""
        self._groups = None  # (GE, GD) [groups, nodes, k], when first needed
        self._last = [np.empty((self.s.size, self.k)), np.empty((self.s.size, self.k)), self.n + 1]  # the prefix [0, at) last asked for
        self._lazy = SizedCache(self.RUN_FLOATS_KEPT)  # (f, t) -> _LazyRun
        if self.scan_device is not None:
            E0, D0, sigma, GE, GD = _device_scan(self.scan_device)(self.q, self.s, self.w, self._above, self.k,
                                                                   self.checkpoint, self.group, self.scan_device)
            self._groups, self._group_nodes = (GE, GD), np.full(GE.shape[0], self.s.size, dtype=np.int64)
            return E0, D0, sigma
        if self.pass_at_points():
            from .setup.chebyshev import prefix_pass_chebyshev  # (it imports this module's helpers)

            return prefix_pass_chebyshev(self.q, self.s, self.w, self._above, self.k, self.checkpoint,
                                         parts=self._pass_threads())
        every, k, checkpoints = self.checkpoint, self.k, self.n // self.checkpoint + 1
        E0, D0 = np.empty((checkpoints, self.s.size, k)), np.empty((checkpoints, self.s.size, k))
        chunks = node_chunks(self.s.size)
        parts = np.zeros((len(chunks), self.n))

        def run(taken: np.ndarray) -> None:  # a thread's chunks in one pass up the ranks
            prefix_pass(self.q, self.s, self.w, self._above, k, every, taken, E0, D0, parts)

        by_node_parts(run, chunks, self.n * self.s.size)
        return E0, D0, _in_order(parts)

    def minimal_flux(self, ps: np.ndarray, m: int, unit: float) -> np.ndarray:
        """The minimal flux of :func:`otm.rules.optimal_pair_wor.flux_setup` from ``p`` by rank
        and this row's ``sigma``, compiled (:func:`minimal_flux`; the same values as its Python
        walks), ``[n + 1]`` float64."""
        return minimal_flux(ps, self.sigma, m, unit)

    def _tables(self) -> tuple:
        return self.q, self.s, self.w, self._above, self._E0, self._D0, self.checkpoint

    def _prefix(self, f: int) -> tuple[np.ndarray, np.ndarray]:
        """``(E, D)`` of the ranks ``[0, f)``, from the last one asked for where that is shorter
        (:func:`advance_prefix`; the arrays are reused by the next call)."""
        E, D, at = self._last
        self._last[2] = advance_prefix(self.q, self.s, self._E0, self._D0, self.checkpoint, f, self.k,
                                       E, D, at)
        return E, D

    #: The runs whose skeletons :meth:`across` keeps hold at most this many floats in all (128
    #: MiB: two runs of the whole real vocabulary at 300 nodes and ``k = 8``).
    RUN_FLOATS_KEPT = 16_000_000

    def across(self, f: int, j: int, t: int) -> float:
        """:meth:`~otm.rules.wor_clock_masses.ClockSetMasses.across`, computed as cuts are asked
        for (:class:`_LazyRun`: the blocks of :data:`RUN_BLOCK` cuts that hold them, by
        :func:`stretch_masses`; a run of up to :attr:`eager_ranks` ranks whole, by
        :func:`run_masses`), the values of :func:`run_masses` to a few units of roundoff; the last
        runs are kept within :attr:`RUN_FLOATS_KEPT` floats."""
        return self._lazy_run(f, t).at(j)

    def across_cuts(self, f: int, lo: int, hi: int, t: int) -> np.ndarray:
        """``[hi - lo + 1]``: :meth:`across` at the cuts ``lo..hi`` of the run ``[f, t]`` at once
        (the same values, a read-only view), what the walk's bounds read over a span
        (:mod:`otm.rules.water_level_bounds`); it costs the blocks of the span, not the run."""
        return self._lazy_run(f, t).cuts(lo, hi)

    def _stretch(self, f: int, low: int, high: int, t: int) -> np.ndarray:
        """:func:`stretch_masses` by chunks of nodes (:meth:`_summed_by_nodes`): the range ``[f,
        low)`` from the groups of ranks, or from the prefix checkpoints where ``f = 0`` (a range
        of the prefix, :func:`advance_prefix`), and ``[high + 1, t]`` from the groups, computing
        only the groups these ranges take whole, at the nodes of the chunks the run reads
        (:meth:`_groups_for`, :func:`read_nodes`); a chunk past them adds exactly 0 and is
        skipped."""
        group, k, block = self.group, self.k, self.run_block
        chunks = node_chunks(self.s.size, SPAN_CHUNK)  # the chunks of _summed_by_nodes
        q, s, w, above = self._tables()[:4]
        live = read_nodes(s, w, above[t], *self._prefix(f))
        read = min(s.size, -(-live // SPAN_CHUNK) * SPAN_CHUNK)  # to the end of the last chunk read
        GE, GD = self._groups_for([(high + 1, t + 1)] + ([(f, low)] if f > 0 else []), read)
        lower = [array.copy() for array in self._prefix(low)] if f == 0 else None

        def stretch(q, s, w, above, E0f, D0f, out, c):
            low_node, high_node = chunks[c]
            if low_node >= live:  # no node of the chunk is live: stretch_masses would add 0 at each
                return
            GE_c, GD_c = GE[:, low_node:high_node], GD[:, low_node:high_node]
            if lower is None:
                EL, DL = np.empty((s.size, k)), np.empty((s.size, k))
                range_group(q, s, GE_c, GD_c, group, f, low, k, EL, DL)
            else:
                EL, DL = lower[0][low_node:high_node], lower[1][low_node:high_node]
            stretch_masses(q, s, w, above, E0f, D0f, EL, DL, GE_c, GD_c, group, low, high, t, k, out, block)

        return self._summed_by_nodes(stretch, f, high - low, high - low + 2 * group)

    def _lazy_run(self, f: int, t: int) -> "_LazyRun":
        if (f, t) in self._lazy:
            return self._lazy.get((f, t))
        run = _LazyRun(self, f, t)
        return self._lazy.put((f, t), run, run.floats)

    def _group_polynomials(self) -> tuple[np.ndarray, np.ndarray]:
        """``(GE, GD)`` ``[groups, nodes, k]`` of every :attr:`group` of ranks (:func:`group_pass`),
        every group computed."""
        return self._groups_for([(0, self.n)])

    def _groups_for(self, ranges: list[tuple[int, int]], nodes: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(GE, GD)`` ``[groups, nodes, k]`` of the :attr:`group` of ranks, with every group that
        lies whole inside one of the rank ranges ``[lo, hi)`` computed at the first ``nodes`` nodes
        (all by default; what :func:`range_group` reads of them, the run's live nodes,
        :meth:`_stretch`; the arrays are made when a stretch first needs them, and a row whose
        walks read no run longer than :attr:`eager_ranks` never does). Each range's groups from
        its first missing one to its last in one pass, at the nodes from the fewest any of them
        has up to ``nodes`` (a node computed again gets the same value, whatever the nodes asked
        for: each node's polynomials are its own): where the pass up the ranks takes the points
        (:meth:`pass_at_points`), each group's product at the Chebyshev points as a block of that
        pass (:func:`decoding.verifiers.optimal_family.setup.chebyshev.group_pass_chebyshev`, one thread),
        else :func:`group_pass`, node by node, shared among threads by chunks of nodes (each
        thread's chunks in one pass)."""
        chunks, count = node_chunks(self.s.size), (self.n + self.group - 1) // self.group
        nodes = self.s.size if nodes is None else nodes
        if self._groups is None:
            self._groups = (np.empty((count, self.s.size, self.k)), np.empty((count, self.s.size, self.k)))
            self._group_nodes = np.zeros(count, dtype=np.int64)  # each group's nodes [0, this) computed
        for lo, hi in ranges:
            first, last = -(-lo // self.group), hi // self.group  # the groups inside [lo, hi)
            missing = np.flatnonzero(self._group_nodes[first:last] < nodes)
            if missing.size == 0:
                continue
            a, b = first + int(missing[0]), first + int(missing[-1]) + 1
            start = int(self._group_nodes[a:b].min())
            if self.pass_at_points():
                from .setup.chebyshev import group_pass_chebyshev  # (it imports this module's helpers)

                group_pass_chebyshev(self.q, self.s, self.k, self.group, *self._groups, a, b, nodes=(start, nodes))
                self._group_nodes[a:b] = np.maximum(self._group_nodes[a:b], nodes)
                continue
            from_chunk, to_chunk = start // NODE_CHUNK, -(-nodes // NODE_CHUNK)

            def run(taken: np.ndarray, a=a, b=b) -> None:  # a thread's chunks in one pass
                group_pass(self.q, self.s, self.k, self.group, *self._groups, a, b, taken + from_chunk)

            by_node_parts(run, chunks[from_chunk:to_chunk], (b - a) * self.group * (nodes - start))
            self._group_nodes[a:b] = np.maximum(self._group_nodes[a:b], min(self.s.size, to_chunk * NODE_CHUNK))
        return self._groups

    def across_one(self, f: int, j: int, t: int) -> float:
        """:meth:`across` at one cut, what a window of the walk's bounds asks for
        (:func:`otm.rules.water_level_bounds.span_at_most`): from the run where it is kept, else
        the one cut alone by :func:`stretch_masses` (one rank each side of it, the rest of the
        run multiplied out from the groups of ranks), not kept."""
        if (f, t) in self._lazy:
            return self.across(f, j, t)
        return float(self._stretch(f, j - 1, j, t)[0])

    def lowest_law(self, f: int, t: int) -> np.ndarray:
        """``[t - f + 1]``: :meth:`otm.rules.wor_clock_masses.ClockSetMasses.lowest_law`, by
        chunks of nodes shared among threads (:meth:`_summed_by_nodes`)."""

        def law(q, s, w, above, E0f, D0f, out, chunk):
            lowest_law(q, s, w, above, E0f, D0f, f, t, self.k, out)

        return self._summed_by_nodes(law, f, t - f + 1, t - f + 1)

    def _summed_by_nodes(self, kernel, f: int, size: int, ranks: int) -> np.ndarray:
        """``[size]``: ``kernel(q, s, w, above, E0f, D0f, out, c)`` on each chunk ``c`` of
        :data:`SPAN_CHUNK` nodes (their slices of ``s``, ``w`` and the prefix ``[0, f)``; ``out``
        ``[size]``, the chunk's part), shared among threads over ``ranks`` ranks (:func:`by_nodes`),
        the parts added in order (:func:`_in_order`)."""
        q, s, w, above = self._tables()[:4]
        E0f, D0f = self._prefix(f)
        chunks = node_chunks(s.size, SPAN_CHUNK)
        parts = np.zeros((len(chunks), size))

        def chunk(c: int, low: int, high: int) -> None:
            kernel(q, s[low:high], w[low:high], above, E0f[low:high], D0f[low:high], parts[c], c)

        by_nodes(chunk, chunks, ranks * s.size)
        return _in_order(parts)

    def nesting_seconds(self, flux: np.ndarray, lo: int, hi: int) -> tuple[float, int]:
        """``(seconds, longest)``: about how long the nesting of the cuts ``lo + 1..hi`` takes
        (:data:`NESTING_RATE`: at most, on the rows measured), and its longest run of flux."""
        runs = flux_runs(flux, lo, hi)
        lengths = runs[:, 1] - runs[:, 0] + 1  # ranks of each run
        work = float(np.sum(lengths.astype(np.float64) ** 2)) * self.s.size * self.k
        return work / self.NESTING_RATE, int(lengths.max(initial=0))

    def check_nesting(self, flux: np.ndarray, lo: int, hi: int) -> None:
        """Raise :class:`otm.errors.NotApplicableError` where the nesting of the cuts ``lo +
        1..hi`` is estimated above :attr:`max_nesting_seconds` (:meth:`nesting_seconds`)."""
        seconds, longest = self.nesting_seconds(flux, lo, hi)
        if seconds > self.max_nesting_seconds:
            raise NotApplicableError(
                f"rule 'optimal_wor' at k={self.k}: the water levels of this row nest over runs of up to {longest:,} "
                f"ranks with flux ({self.n:,} tokens of support), about {seconds:,.0f} s in the compiled nesting (its "
                f"cost grows as the square of a run), above the limit of {self.max_nesting_seconds:.0f} s; truncate "
                "the rows (top-p) or use optimal_latent (at least the i.i.d. optimum)")

    def water_levels(self, flux: list, lo: int, hi: int, levels: list, unit: float) -> bool:
        """Raise ``levels`` (float64) for the cuts ``lo + 1..hi`` until they carry ``flux``;
        ``False`` where a cut with flux has no set of its run across it. A nesting estimated
        above :attr:`max_nesting_seconds` is refused (:meth:`check_nesting`)."""
        flux = np.asarray(flux, dtype=np.float64)
        self.check_nesting(flux, lo, hi)
        work = np.asarray(levels, dtype=np.float64)
        tables = (clock_table(self.q, self.s, lo, hi + 1) if 2 * (hi - lo + 1) * self.s.size <= self.NESTING_TABLE_FLOATS
                  else (NO_TABLE, NO_TABLE))
        status = water_levels(*self._tables(), self.k, flux, lo, hi, work, REMAINDER_FLOOR * unit, self.run_block,
                              *tables)
        levels[:] = work.tolist()
        return status == 0


#: A pass over fewer rank-nodes than this runs in the calling thread alone.
SHARED_FROM = 50_000


def _device_scan(device: str):
    """The scan of a :attr:`CompiledClockSetMasses.scan_device`: the CUDA kernels
    (:mod:`decoding.verifiers.optimal_family.setup.cuda_scan`) on a CUDA device where numba's CUDA target sees
    one, the torch scan (:mod:`decoding.verifiers.optimal_family.setup.torch_scan`, their reference: the same
    values within roundoff, slower) elsewhere."""
    from numba import cuda

    if device.startswith("cuda") and cuda.is_available():
        from .setup.cuda_scan import scan
    else:
        from .setup.torch_scan import scan
    return scan


@functools.cache
def masses_on(device: str) -> type[CompiledClockSetMasses]:
    """:class:`CompiledClockSetMasses` whose pass up the ranks runs as a scan on the torch device
    ``device`` (``"cuda"``, ``"cuda:1"``, ``"cpu"``; :attr:`~CompiledClockSetMasses.scan_device`):
    ``sigma``, the checkpoints and every group of ranks at once, within roundoff of the compiled
    pass (:func:`_device_scan`: CUDA kernels on a GPU, the torch scan elsewhere); the rest of the
    set-up and the walks run on the CPU as before. What
    :func:`decoding.verifiers.optimal_family.wor.row_setup` takes for rows on a GPU."""
    return type(CompiledClockSetMasses.__name__, (CompiledClockSetMasses,),
                {"scan_device": device, "checkpoint": SCAN_CHECKPOINT, "__doc__": masses_on.__doc__,
                 "__module__": __name__})


#: The checkpoints' spacing of the scan on a device (:func:`masses_on`): its blocks of ranks, the
#: spacing its kernels were tuned and checked at (docs/optimal-verifier.md,
#: section 8, "The set-up's pass on a GPU"); the torch scan launches about ``20`` kernels per rank
#: of it.
SCAN_CHECKPOINT = 64


def _in_order(parts: np.ndarray) -> np.ndarray:
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


class _LazyRun:
    """The interval masses of one run ``[f, t]`` of :class:`CompiledClockSetMasses`, stretch by
    stretch as cuts are asked for: each asked-for stretch of blocks of :data:`RUN_BLOCK` cuts not
    yet computed by one :func:`stretch_masses` (so a run costs what is read of it, not its
    length); a run of at most ``masses.eager_ranks`` ranks all at once (:func:`run_masses`, the
    cost where most cuts are asked for, as by a nesting)."""

    def __init__(self, masses: CompiledClockSetMasses, f: int, t: int):
        self.masses, self.f, self.t, self.block = masses, f, t, masses.run_block
        self.values, blocks = np.empty(t - f), (t - f + self.block - 1) // self.block
        self.done, self.floats = np.zeros(blocks, dtype=bool), t - f
        if t - f <= masses.eager_ranks:
            q, s, w, above = masses._tables()[:4]
            run_masses(q, s, w, above, *masses._prefix(f), f, t, masses.k, self.values, self.block, NO_TABLE, NO_TABLE, 0)
            self.done[:] = True

    def at(self, j: int) -> float:
        """The mass at cut ``j`` (``f < j <= t``)."""
        return float(self.cuts(j, j)[0])

    def cuts(self, lo: int, hi: int) -> np.ndarray:
        """The masses at the cuts ``lo..hi`` (``f < lo <= hi <= t``), a read-only view."""
        first, last = (lo - self.f - 1) // self.block, (hi - self.f - 1) // self.block
        b = first
        while b <= last:  # each stretch of blocks not yet computed, in one pass
            if self.done[b]:
                b += 1
                continue
            end = b
            while end + 1 <= last and not self.done[end + 1]:
                end += 1
            low, high = self.f + b * self.block, min(self.f + (end + 1) * self.block, self.t)
            self.values[low - self.f:high - self.f] = self.masses._stretch(self.f, low, high, self.t)
            self.done[b:end + 1] = True
            b = end + 1
        view = self.values[lo - self.f - 1:hi - self.f]
        view.flags.writeable = False
        return view


__all__ = ["CompiledClockSetMasses", "NODE_CHUNK", "RUN_BLOCK", "SCAN_CHECKPOINT", "SPAN_CHUNK", "advance_prefix", "NO_TABLE", "by_node_parts", "by_nodes", "chunk_nodes", "clock_table", "group_pass", "lowest_law", "masses_on", "minimal_flux", "node_chunks", "prefix_at", "prefix_pass", "range_group", "run_masses",
           "stretch_masses", "water_levels"]
