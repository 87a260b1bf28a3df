"""The pass up the ranks at Chebyshev points (decoding.verifiers.optimal.setup.chebyshev, the CPU
default of the compiled clock masses) against its reference, the node-by-node pass
(decoding.verifiers.optimal.setup.numba_nodes.prefix_pass): the same checkpoints and sigma within
roundoff on rows of 40 to 151,936 ranks, hypothesis rows and degenerate rows, with both of its
routes (interpolated and node-by-node nodes) taken; the same walks through the verifier; and
too few points, or a Taylor series cut short, is caught by the same comparison."""
from __future__ import annotations

import math
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decoding.verifiers.optimal.setup import chebyshev as optimal_wor_chebyshev
from decoding.verifiers.optimal.clock_masses import CompiledClockSetMasses

from .test_optimal_wor_numba import NodeByNode
from .test_optimal_wor_torch import assert_same_walks

from bench_wor_scan import wide_pass  # (the 80-bit reference pass)

#: Relative agreement with the node-by-node pass: the same non-negative terms, a block's small
#: clocks multiplied at the points and interpolated (error below ``2^-60`` by the module's
#: bound) instead of rank by rank at each node (measured while writing the module: sigma within
#: 3e-15 and the checkpoints within 2e-14 on rows of up to 5,000 ranks; on whole rows of 151,936
#: ranks the checkpoints within 6e-13, the node-by-node pass's own roundoff over 151,936
#: factors, docs/optimal-verifier.md#water-levels-for-drafts-without-replacement).
AGREEMENT = 1e-12

#: Whole rows: the node-by-node pass's products carry about ``1e-12`` of roundoff there.
WHOLE_ROW_AGREEMENT = 1e-11

#: Below this, two coefficients both count as 0 (the passes set subnormals to 0 at different
#: steps).
TINY = 1e-290


def _ranks(seed: int, n: int, decades: float) -> np.ndarray:
    q = 10.0 ** np.random.default_rng(seed).uniform(-decades, 0.0, n)
    return q / q.sum()


def _disagreement(q: np.ndarray, k: int, **options) -> float:
    """The largest relative difference of the checkpoints and sigma at Chebyshev points (with
    ``options``) from the node-by-node pass's."""
    reference = NodeByNode(q, k)
    got = optimal_wor_chebyshev.prefix_pass_chebyshev(reference.q, reference.s, reference.w, reference._above, k,
                                                     reference.checkpoint, **options)
    return _worst(got, (reference._E0, reference._D0, reference.sigma))


def _worst(got, want) -> float:
    """The largest relative difference of the arrays ``got`` from ``want``, pair by pair (entries
    both below :data:`TINY` count as equal)."""
    worst = 0.0
    for mine, theirs in zip(got, want, strict=True):
        assert mine.shape == theirs.shape
        differ = np.abs(mine - theirs)
        worst = max(worst, float(np.max(np.where(differ <= TINY, 0.0, differ / np.maximum(np.abs(theirs), TINY)),
                                        initial=0.0)))
    return worst


def _both_routes(q: np.ndarray, k: int) -> tuple[int, int]:
    """``(interpolated, by node)``: (block, node) pairs of the row's quadrature that each route
    takes where the row's prefix reaches the node with ``e^{-q(above) s} > 0``, counted from the
    row alone (not from the pass)."""
    masses = NodeByNode(q, k)
    interpolated = by_node = 0
    for b in range(0, masses.n, masses.checkpoint):
        kappa = masses.q[b:b + masses.checkpoint].max()
        reached = masses._above[b] * masses.s <= 745.2
        small = kappa * masses.s < optimal_wor_chebyshev.INTERPOLATE_BELOW
        if small.sum() >= optimal_wor_chebyshev.INTERPOLATE_FROM:
            interpolated += int((small & reached).sum())
            by_node += int((~small & reached).sum())
        else:
            by_node += int(reached.sum())
    return interpolated, by_node


@pytest.mark.parametrize("n", [40, 64, 65, 256, 257, 700, 3000])
@pytest.mark.parametrize("k", [2, 3, 5, 8, 16])
def test_the_pass_at_points_is_the_node_by_node_pass(n, k):
    q = _ranks(n * 10 + k, n, 12.0)
    interpolated, by_node = _both_routes(q, k)  # (a row of one or two blocks over 12 decades may have none)
    assert by_node > 0 and (interpolated > 0 or n <= 2 * CompiledClockSetMasses.checkpoint)
    assert _disagreement(q, k) <= AGREEMENT


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 400), k=st.integers(2, 8),
       kind=st.sampled_from(["decades", "equal", "dominant", "tiny", "softmax"]))
def test_the_pass_at_points_is_the_node_by_node_pass_on_random_rows(seed, n, k, kind):
    """Rows over 1 to 15 decades, equal ``q``, one token of most of the mass, ``q`` down to
    ``1e-14``, and softmax rows."""
    q = _random_row(kind, seed, n)
    assert _disagreement(q / q.sum(), k) <= AGREEMENT


def _random_row(kind: str, seed: int, n: int) -> np.ndarray:
    """An unnormalised ``q`` of ``n`` tokens of the hypothesis tests' kinds."""
    rng = np.random.default_rng(seed)
    return {"decades": lambda: _ranks(seed, n, rng.choice([1.0, 6.0, 15.0])),
            "equal": lambda: np.full(n, 1.0 / n),
            "dominant": lambda: np.concatenate([[0.99], np.full(n - 1, 0.01 / max(n - 1, 1))])[:n],
            "tiny": lambda: np.concatenate([[1.0], np.full(n - 1, 1e-14)])[:n],
            "softmax": lambda: np.exp(3.0 * rng.normal(size=n))}[kind]()


@pytest.mark.parametrize("k", [3, 8])
def test_the_pass_at_points_on_a_whole_row(k):
    """A random softmax row of the Qwen vocabulary (151,936 tokens, the benchmark's kind of row),
    where most (block, node) pairs are interpolated."""
    rng = np.random.default_rng(k)
    logits = 2.5 * rng.normal(size=151_936) + 1.5 * rng.normal(size=151_936)
    q = np.exp(logits - logits.max())
    interpolated, by_node = _both_routes(q / q.sum(), k)
    assert interpolated > 1.5 * by_node > 0  # (3.7 and 1.9 to one at k = 3 and 8, in blocks of 256 ranks)
    assert _disagreement(q / q.sum(), k) <= WHOLE_ROW_AGREEMENT


@pytest.mark.parametrize("parts", [2, 3])
@pytest.mark.parametrize("n,k", [(257, 3), (3000, 3), (3000, 8)])
def test_the_pass_at_points_dealt_among_threads_is_the_node_by_node_pass(n, k, parts, monkeypatch):
    """The nodes dealt out among threads (``parts``: node ``i`` to part ``i mod parts``, each part
    a pass over every rank, ``sigma`` summed over the parts): the node-by-node pass's values
    within :data:`AGREEMENT`; with a part's terms of ``sigma`` left out they are far off."""
    import torch

    monkeypatch.setattr(torch, "get_num_threads", lambda: parts)  # share_rows deals the parts out
    monkeypatch.setattr(os, "cpu_count", lambda: parts)
    q = _ranks(n * 3 + k, n, 12.0)
    assert _disagreement(q, k, parts=parts) <= AGREEMENT
    reference = NodeByNode(q, k)
    monkeypatch.setattr(optimal_wor_chebyshev, "share_rows", lambda run, parts: run(0, parts))  # part 0 alone
    sigma = optimal_wor_chebyshev.prefix_pass_chebyshev(reference.q, reference.s, reference.w, reference._above, k,
                                                        reference.checkpoint, parts=parts)[2]
    assert _worst((sigma,), (reference.sigma,)) > 1e-3


def test_too_few_points_are_caught(monkeypatch):
    """Three points instead of the bound's ten: the interpolation misses by far more than
    roundoff."""
    q = _ranks(7, 700, 12.0)
    assert _disagreement(q, 3) <= AGREEMENT
    monkeypatch.setattr(optimal_wor_chebyshev, "chebyshev_points", lambda k, below: 3)
    assert _disagreement(q, 3) > 1e-9


def test_a_taylor_series_cut_short_is_caught(monkeypatch):
    """The clocks at the points from ``x + x^2 / 2`` alone."""
    q = _ranks(8, 700, 12.0)
    monkeypatch.setattr(optimal_wor_chebyshev, "taylor_terms", lambda below: 2)
    assert _disagreement(q, 3) > 1e-9


def test_the_bounds_choose_enough_points_and_terms():
    """The module's bounds, evaluated: each count the least that meets ``2^-60``."""
    tau, bound = optimal_wor_chebyshev.INTERPOLATE_BELOW, optimal_wor_chebyshev.TRUNCATION

    def interpolation_error(points: int, degree: int) -> float:
        lebesgue = 1.0 + 2.0 / math.pi * math.log(points + 1)
        return (1.0 + lebesgue) * math.exp(degree * tau) * (math.e * degree * tau / points) ** points

    for k in (2, 3, 5, 8, 16, 32):
        points, degree = optimal_wor_chebyshev.chebyshev_points(k), max(k - 1, 1)
        assert interpolation_error(points, degree) <= bound < interpolation_error(points - 1, degree)
    terms = optimal_wor_chebyshev.taylor_terms()
    assert tau ** terms / math.factorial(terms + 1) < bound <= tau ** (terms - 1) / math.factorial(terms)


#: ``sigma`` of the pass at points within this of an 80-bit pass, relative (measured while folding
#: ``u_p^-d`` out of the weights' sum over nodes: at most 3.0e-15 on rows of 2,000 ranks, as
#: before the fold; interpolating at a geometric grid of ``u`` instead of each node's own ``kappa
#: s_i``, tried and dropped, was up to 9e-14 on a whole row).
WIDE_AGREEMENT = 2e-14


def _wide_disagreement(sigma: np.ndarray, wide: np.ndarray) -> float:
    big = wide > 1e-250
    return float(np.max(np.abs(sigma.astype(np.longdouble) - wide)[big] / wide[big]))


@pytest.mark.skipif(np.finfo(np.longdouble).eps >= np.finfo(np.float64).eps, reason="no wider float here")
@pytest.mark.parametrize("k", [3, 8])
def test_the_pass_at_points_is_as_close_to_a_wider_pass(k):
    """``sigma`` at points within :data:`WIDE_AGREEMENT` of an 80-bit pass on a row of 2,000 ranks
    (12 decades of ``q``), with both routes taken; ``sigma`` off by
    ``1e-13`` relative is caught by the same comparison."""
    q = _ranks(11 + k, 2000, 12.0)
    masses = type("AtPoints", (CompiledClockSetMasses,), {"setup": "chebyshev"})(q, k)
    interpolated, by_node = _both_routes(q, k)
    assert interpolated > 0 and by_node > 0
    wide = wide_pass(masses, np.arange(masses.s.size))[2]
    assert _wide_disagreement(masses.sigma, wide) <= WIDE_AGREEMENT
    off = masses.sigma * (1.0 + 1e-13 * np.random.default_rng(k).choice([-1.0, 1.0], masses.n))
    assert _wide_disagreement(off, wide) > WIDE_AGREEMENT


@pytest.mark.parametrize("k", [3, 8])
def test_the_verifier_walks_the_same_at_points(k):
    """The pass at points and node by node (:func:`assert_same_walks`)."""
    assert_same_walks(k, type("AtPoints", (CompiledClockSetMasses,), {"setup": "chebyshev"}), NodeByNode)


def test_the_pass_at_points_runs_where_the_node_pass_has_few_threads(monkeypatch):
    """By default the pass at points runs where the node-by-node pass would share its chunks
    among fewer than 4 threads (on one or two, or from a pool thread, where a share runs in the
    calling thread, or on a small row), its nodes dealt out among those threads, and the
    node-by-node pass from 4 threads on; and the choice is what runs."""
    import threading

    import torch

    from decoding.verifiers import base

    q = _ranks(9, 3000, 12.0)
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    ran = []
    original = optimal_wor_chebyshev.prefix_pass_chebyshev
    monkeypatch.setattr(optimal_wor_chebyshev, "prefix_pass_chebyshev",
                        lambda *a, **kw: ran.append(("points", kw["parts"])) or original(*a, **kw))
    for threads, at_points in ((1, True), (2, True), (3, True), (4, False), (16, False)):
        monkeypatch.setattr(torch, "get_num_threads", lambda threads=threads: threads)
        masses = CompiledClockSetMasses(q, 3)
        assert (masses._backend is optimal_wor_chebyshev) is at_points and ran == ([("points", threads)] if at_points else [])
        ran.clear()
    assert CompiledClockSetMasses(q[:40] / q[:40].sum(), 3)._backend is optimal_wor_chebyshev  # a small row: one thread
    monkeypatch.setattr(threading.current_thread(), "name", base._POOL_PREFIX + "_0")  # as a pool thread is named
    assert base.sharing_threads(100) == 1 and CompiledClockSetMasses(q, 3)._backend is optimal_wor_chebyshev  # within a share


def _group_disagreement(q: np.ndarray, k: int, group: int = 512) -> tuple[float, int, int]:
    """The largest relative difference of every group's polynomials at points
    (:func:`optimal_wor_chebyshev.group_pass_chebyshev`) from the node-by-node group pass's, and
    the (group, node) pairs each route takes (interpolated: the group's largest ``q`` times ``s``
    below ``INTERPOLATE_BELOW`` at enough nodes), counted from the row alone."""
    from decoding.verifiers.optimal.setup.numba_nodes import group_pass
    from decoding.verifiers.optimal.clock_kernels import node_chunks

    masses = NodeByNode(q, k)
    groups, nodes = (masses.n + group - 1) // group, masses.s.size
    want = (np.zeros((groups, nodes, k)), np.zeros((groups, nodes, k)))
    got = (np.zeros((groups, nodes, k)), np.zeros((groups, nodes, k)))
    group_pass(masses.q, masses.s, k, group, *want, 0, groups, np.arange(len(node_chunks(nodes)), dtype=np.int64))
    optimal_wor_chebyshev.group_pass_chebyshev(masses.q, masses.s, k, group, *got, 0, groups)
    worst = _worst(got, want)
    interpolated = 0
    for g in range(groups):
        small = int(np.count_nonzero(masses.q[g * group:(g + 1) * group].max() * masses.s
                                     < optimal_wor_chebyshev.INTERPOLATE_BELOW))
        interpolated += small if small >= optimal_wor_chebyshev.INTERPOLATE_FROM else 0
    return worst, interpolated, groups * nodes - interpolated


@pytest.mark.parametrize("n", [40, 512, 513, 3000])
@pytest.mark.parametrize("k", [2, 3, 5, 8])
def test_the_groups_at_points_are_the_node_by_node_groups(n, k):
    """Every group of 512 ranks (the masses' ``group``) alone, at points and node by node: the same
    polynomials within :data:`AGREEMENT` on rows over 12 decades, with both routes taken where
    the row has a whole group."""
    worst, interpolated, by_node = _group_disagreement(_ranks(n * 7 + k, n, 12.0), k)
    assert by_node > 0 and (interpolated > 0 or n < 512)
    assert worst <= AGREEMENT


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 1200), k=st.integers(2, 8), group=st.sampled_from([16, 64, 512]),
       kind=st.sampled_from(["decades", "equal", "dominant", "softmax"]))
def test_the_groups_at_points_are_the_node_by_node_groups_on_random_rows(seed, n, k, group, kind):
    q = _random_row(kind, seed, n)
    assert _group_disagreement(q / q.sum(), k, group)[0] <= AGREEMENT


def test_groups_at_too_few_points_are_caught(monkeypatch):
    """Three points instead of the bound's ten: the groups miss by far more than roundoff."""
    q = _ranks(12, 3000, 12.0)
    monkeypatch.setattr(optimal_wor_chebyshev, "chebyshev_points", lambda k, below: 3)
    assert _group_disagreement(q, 3)[0] > 1e-9


@pytest.mark.parametrize("at_points", [True, False])
def test_the_masses_take_their_groups_where_they_take_their_pass(monkeypatch, at_points):
    """The compiled masses compute the groups a long run reads at points where their pass runs at
    points (the set-up backend the registry picks), node by node elsewhere; the same interval masses either way
    (the runs read through the groups: ``eager_ranks`` below their length)."""
    from decoding.verifiers.optimal.setup import numba_nodes as optimal_wor_numba
    q = _ranks(13, 3000, 12.0)
    ran = []
    for name in ("group_pass_chebyshev", "group_pass"):
        module = optimal_wor_chebyshev if name == "group_pass_chebyshev" else optimal_wor_numba
        original = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, _o=original, _n=name, **kw: ran.append(_n) or _o(*a, **kw))
    masses = type("Chosen", (CompiledClockSetMasses,), {"setup": "chebyshev" if at_points else "numba", "eager_ranks": 64})(q, 3)
    values = [masses.across(f, j, t) for f, j, t in ((0, 1500, 2999), (100, 2000, 2900), (600, 700, 2500))]
    assert set(ran) == {"group_pass_chebyshev" if at_points else "group_pass"}
    reference = NodeByNode(q, 3)
    for value, (f, j, t) in zip(values, ((0, 1500, 2999), (100, 2000, 2900), (600, 700, 2500))):
        assert value == pytest.approx(reference.across(f, j, t), rel=AGREEMENT)


@pytest.mark.parametrize("k", [3, 8])
def test_the_groups_at_points_by_ranges_of_nodes_are_those_of_the_whole_pass(k):
    """Groups written node range by node range (``nodes=(start, stop)``, what a walk that reads
    only the first nodes asks for) hold at those nodes the whole pass's values to the bit (which
    nodes are interpolated is decided over every node), and the nodes outside the range are not
    written; taking the split from the nodes asked for instead moves the values."""
    q = _ranks(21 + k, 3000, 12.0)
    masses = NodeByNode(q, k)
    s, groups, nodes = masses.s, (masses.n + 511) // 512, masses.s.size
    whole = (np.zeros((groups, nodes, k)), np.zeros((groups, nodes, k)))
    optimal_wor_chebyshev.group_pass_chebyshev(masses.q, s, k, 512, *whole, 0, groups)
    pieces = (np.full((groups, nodes, k), np.nan), np.full((groups, nodes, k), np.nan))
    a, b = nodes // 3, (2 * nodes) // 3
    optimal_wor_chebyshev.group_pass_chebyshev(masses.q, s, k, 512, *pieces, 0, groups, nodes=(0, a))
    optimal_wor_chebyshev.group_pass_chebyshev(masses.q, s, k, 512, *pieces, 0, groups, nodes=(b, nodes))
    for got, want in zip(pieces, whole):
        np.testing.assert_array_equal(got[:, :a], want[:, :a])
        np.testing.assert_array_equal(got[:, b:], want[:, b:])
        assert np.isnan(got[:, a:b]).all()
    optimal_wor_chebyshev.group_pass_chebyshev(masses.q, s, k, 512, *pieces, 0, groups, nodes=(a, b))
    for got, want in zip(pieces, whole):
        np.testing.assert_array_equal(got, want)
    # the split taken from the nodes asked for (as if s began two nodes below group 0's split):
    # those two nodes go node by node, not interpolated, and their values move
    split = int(np.count_nonzero(masses.q[:512].max() * s < optimal_wor_chebyshev.INTERPOLATE_BELOW))
    tail = (np.zeros((1, nodes - split + 2, k)), np.zeros((1, nodes - split + 2, k)))
    optimal_wor_chebyshev.group_pass_chebyshev(masses.q, s[split - 2:], k, 512, *tail, 0, 1)
    assert not np.array_equal(tail[0][0, :2], whole[0][0, split - 2:split])
