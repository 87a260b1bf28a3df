"""Set-up backend ``"numba"``: the pass up the ranks of one row node by node, compiled, on the
CPU (:func:`prefix_pass`, shared among threads by chunks of nodes), and the groups of ranks a
walk's long runs read (:func:`group_pass`): the reference of the pass at Chebyshev points
(:mod:`decoding.verifiers.optimal.setup.chebyshev`), the same float operations as the
clock integral's other kernels (:mod:`decoding.verifiers.optimal.clock_kernels`).
"""
from __future__ import annotations

import numba
import numpy as np

from ..clock_kernels import (
    NODE_CHUNK,
    _add_rank_by_degree,
    _clock,
    by_node_parts,
    in_order,
    live_prefix_nodes,
    node_chunks,
    rank_terms,
)
from .capabilities import SetupCapabilities

CAPABILITIES = SetupCapabilities(
    name="numba",
    devices=("cpu",),
    max_k=None,
    max_threads=None,
    checkpoint=256,
    all_groups=False,
    automatic=True,
    description="node by node, compiled with numba, shared among threads by chunks of nodes",
)

_compiled = numba.njit(cache=True, nogil=True, error_model="numpy")


def available() -> bool:
    """Always (numba's CPU target)."""
    return True


def prefix_tables(masses) -> tuple:
    """``(E0, D0, sigma, None)`` of the row of ``masses`` (the protocol of
    :mod:`decoding.verifiers.optimal.setup`): :func:`prefix_pass` over each thread's chunks
    of nodes (:func:`~decoding.verifiers.optimal.clock_kernels.by_node_parts`), ``sigma``
    the sum of the chunks' parts in their order; the groups of ranks are made as walks read them
    (:func:`group_tables`)."""
    every, k, n, size = masses.checkpoint, masses.k, masses.n, masses.s.size
    E0, D0 = np.empty((n // every + 1, size, k)), np.empty((n // every + 1, size, k))
    chunks = node_chunks(size)
    parts = np.zeros((len(chunks), n))

    def run(taken: np.ndarray) -> None:  # a thread's chunks in one pass up the ranks
        prefix_pass(masses.q, masses.s, masses.w, masses._above, k, every, taken, E0, D0, parts)

    by_node_parts(run, chunks, n * size)
    return E0, D0, in_order(parts), None


def group_tables(masses, GE: np.ndarray, GD: np.ndarray, first: int, last: int, start: int, nodes: int) -> int:
    """``GE[g], GD[g]`` for the groups ``first <= g < last`` at least at the nodes ``[start,
    nodes)`` (:func:`group_pass` on whole chunks of nodes, each thread's chunks in one pass);
    returns the nodes ``[0, this)`` the groups now hold."""
    from_chunk, to_chunk = start // NODE_CHUNK, -(-nodes // NODE_CHUNK)

    def run(taken: np.ndarray) -> None:
        group_pass(masses.q, masses.s, masses.k, masses.group, GE, GD, first, last, taken + from_chunk)

    by_node_parts(run, node_chunks(masses.s.size)[from_chunk:to_chunk], (last - first) * masses.group * (nodes - start))
    return min(masses.s.size, to_chunk * NODE_CHUNK)


#: The prefix pass takes ``e^{-q(above a) s}`` from an exponential at every this many ranks and
#: from the rank before, divided by ``e^{-q_a s}``, in between (:func:`prefix_pass`): one
#: division instead of an exponential per rank and node, at most 63 quotients from an
#: exponential, each of a rounding or two (the flux's and masses' precision on whole Qwen rows
#: as before: docs/optimal-verifier.md#the-water-level-verifier-for-k-drafts). A fixed rank,
#: not the checkpoints', so the values do not depend on those.
DECAY_ANCHOR = 64


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


__all__ = ["CAPABILITIES", "DECAY_ANCHOR", "available", "chunk_nodes", "group_pass", "group_tables", "prefix_pass",
           "prefix_tables"]
