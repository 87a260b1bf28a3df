"""The compiled clock integral and nesting of ``k >= 3`` drafts without replacement
(decoding.verifiers.optimal.clock_masses) against their reference (otm.rules.water_levels.clock_masses and
the Python nesting of otm.rules.optimal_wor): the same sigma, interval masses and
lowest-member laws to a few roundoffs, the same levels, certified; and a compiled integrand
missing a term is caught by the comparison."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decoding.verifiers.optimal import clock_kernels as kernels
from decoding.verifiers.optimal import clock_masses as compiled
from decoding.verifiers.optimal.setup import numba_nodes as nodes_pass
from otm.errors import NotApplicableError
from otm.formulations.prefix_scan import ratio_order
from otm.rules import optimal_wor, water_levels
from otm.rules.water_levels.clock_masses import ClockSetMasses, built_set_masses, clock_set_masses

#: Relative agreement of the compiled values with the reference's (the same terms summed in
#: another order: measured 1.6e-15 at most while writing the module).
AGREEMENT = 1e-13


def _row(seed: int, n: int, spread: float = 1.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    q = np.exp(spread * 4 * rng.normal(size=n))
    q = np.maximum(q / q.sum(), 1e-9)
    return q / q.sum()


def _relative(a, b) -> float:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    both_zero = (a == 0) & (b == 0)
    return float(np.max(np.where(both_zero, 0.0, np.abs(a - b) / np.maximum(np.abs(a), 1e-300))))


def _largest_disagreement(q: np.ndarray, k: int, fast_class=compiled.CompiledClockSetMasses) -> float:
    reference, fast = ClockSetMasses(q, k), fast_class(q, k)
    n = q.size
    worst = _relative(reference.sigma, fast.sigma)
    for f in range(0, n - 1, 3):
        for t in range(f + 1, n, 4):
            cuts = range(f + 1, t + 1)
            worst = max(worst, _relative([reference.across(f, j, t) for j in cuts], [fast.across(f, j, t) for j in cuts]),
                        _relative(reference.lowest_law(f, t), fast.lowest_law(f, t)))
    return worst


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(5, 24), k=st.integers(3, 6), spread=st.sampled_from([0.2, 1.0, 2.0]))
def test_the_compiled_masses_are_the_references(seed, n, k, spread):
    if k >= n:
        k = n - 1
    assert _largest_disagreement(_row(seed, n, spread), k) <= AGREEMENT


class NodeByNode(compiled.CompiledClockSetMasses):
    """The pass up the ranks node by node (:func:`nodes_pass.prefix_pass`, shared among threads by
    chunks of nodes), the reference of the default pass at Chebyshev points
    (tests/decoding/test_optimal_wor_chebyshev.py): the tests of that pass's own properties take
    it."""

    setup = "numba"


class EveryFourRanks(NodeByNode):
    """Prefixes kept at every 4th rank, so that a row of 12 has checkpoints inside it."""

    checkpoint = 4


def test_a_compiled_integrand_missing_a_term_is_caught(monkeypatch):
    """With the checkpointed prefixes' ``D`` zeroed (the term ``D0 N1 N2`` dropped from the runs
    that start past a checkpoint) the comparison above fails; whole, the prefixes rebuilt from
    checkpoints every 4 ranks give the reference's values."""
    q = _row(1, 12)
    assert _largest_disagreement(q, 3) <= AGREEMENT
    assert _largest_disagreement(q, 3, EveryFourRanks) <= AGREEMENT
    original = nodes_pass.prefix_pass

    def without_d(q, s, w, above, k, every, E0, D0, *rest):
        original(q, s, w, above, k, every, E0, D0, *rest)
        D0[:] = 0.0

    monkeypatch.setattr(nodes_pass, "prefix_pass", without_d)
    assert _largest_disagreement(q, 3, EveryFourRanks) > 1e-3


def _prefix(masses, f: int):
    if isinstance(masses, compiled.CompiledClockSetMasses):
        return kernels.prefix_at(masses.q, masses.s, masses._E0, masses._D0, masses.checkpoint, f, masses.k)
    return masses._prefix(f)


@pytest.mark.parametrize("every", [4, 64, 256])
def test_checkpointed_prefixes_are_the_one_pass_values_bit_for_bit(every):
    """A prefix rebuilt from the checkpoint below it repeats the one pass's float operations:
    the same ``(E, D)`` to the bit as a prefix kept at every rank, at every rank, for the
    reference and the compiled node-by-node pass; and the same ``sigma``. The nesting's route (from
    the last prefix asked for) gives the route from the checkpoint below to the bit, for those
    checkpoints and for the checkpoints of the pass at Chebyshev points."""
    q = _row(2, 150, 2.0)
    for cls in (ClockSetMasses, NodeByNode):
        one = type("EveryRank", (cls,), {"checkpoint": 1})(q, 4)
        masses = type("Checkpointed", (cls,), {"checkpoint": every})(q, 4)
        assert np.array_equal(masses.sigma, one.sigma) and masses._E0.shape[0] == 150 // every + 1
        for f in range(151):
            E, D = _prefix(masses, f)
            assert np.array_equal(E, one._E0[f]) and np.array_equal(D, one._D0[f])
    for cls in (NodeByNode, compiled.CompiledClockSetMasses):  # and from checkpoints at Chebyshev points
        masses = type("Checkpointed", (cls,), {"checkpoint": every})(q, 4)
        E, D, at = np.empty_like(masses._E0[0]), np.empty_like(masses._D0[0]), 151  # the nesting's route: from the last prefix
        for f in np.random.default_rng(0).integers(0, 151, size=300):  # up and down, near and far
            at = kernels.advance_prefix(masses.q, masses.s, masses._E0, masses._D0, every, int(f), 4, E, D, at)
            E1, D1 = _prefix(masses, int(f))
            assert np.array_equal(E, E1) and np.array_equal(D, D1)


def _every_chunk(masses) -> np.ndarray:
    return np.arange(len(kernels.node_chunks(masses.s.size)), dtype=np.int64)


def _python_pass(masses) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(E0, D0, parts)`` of :func:`nodes_pass.prefix_pass` run as Python over every chunk of
    ``masses`` (so module attributes patched by a test take effect)."""
    chunks = _every_chunk(masses)
    E0, D0, parts = np.empty_like(masses._E0), np.empty_like(masses._D0), np.zeros((len(chunks), masses.n))
    nodes_pass.prefix_pass.py_func(masses.q, masses.s, masses.w, masses._above, masses.k, masses.checkpoint, chunks,
                                 E0, D0, parts)
    return E0, D0, parts


def _rebuilt_checkpoints(masses) -> tuple[np.ndarray, np.ndarray]:
    """The checkpointed prefixes rebuilt rank by rank at every node (:func:`kernels.prefix_at`
    from the empty group, node by node, no node left out)."""
    n, every = masses.n, masses.checkpoint
    pairs = [kernels.prefix_at(masses.q, masses.s, masses._E0[:1], masses._D0[:1], n + 1, c * every, masses.k)
             for c in range(masses._E0.shape[0])]
    return np.stack([E for E, _ in pairs]), np.stack([D for _, D in pairs])


def test_the_prefix_pass_leaves_only_nodes_whose_polynomials_are_zero(monkeypatch):
    """Past the last node where a prefix's ``(E, D)`` has a coefficient other than 0 the pass
    stops updating (:func:`kernels.live_prefix_nodes`): on a row whose three likeliest draft
    tokens come first it does stop (the last prefix is 0 at the top nodes), and its checkpoints
    are to the bit those rebuilt rank by rank at every node, its ``sigma`` the reference's; a
    pass that leaves one node more is caught by the same comparison."""
    q = np.concatenate([[0.3, 0.25, 0.2], np.full(37, 0.25 / 37)])
    masses = EveryFourRanks(q, 3)
    assert np.all(masses._E0[-1, -1] == 0.0) and np.all(masses._D0[-1, -1] == 0.0)
    E, D = _rebuilt_checkpoints(masses)
    assert np.array_equal(masses._E0, E) and np.array_equal(masses._D0, D)
    assert _relative(ClockSetMasses(q, 3).sigma, masses.sigma) <= AGREEMENT
    original = kernels.live_prefix_nodes
    monkeypatch.setattr(nodes_pass, "live_prefix_nodes", lambda E, D, nodes: max(0, original(E, D, nodes) - 1))
    E0, D0, _ = _python_pass(masses)
    assert not (np.array_equal(E0, E) and np.array_equal(D0, D))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(8, 120), k=st.integers(3, 6), decades=st.sampled_from([2, 6, 12, 15]))
def test_every_pass_that_leaves_zero_nodes_gives_the_values_at_every_node(seed, n, k, decades):
    """On rows whose ``q`` spans 2 to 15 decades (the more decades, the more upper nodes become
    0), the prefix pass's checkpoints and every group of ranks are to the bit what the same float
    operations give at every node."""
    q = 10.0 ** np.random.default_rng(seed).uniform(-decades, 0, n)
    q /= q.sum()
    masses = type("Grouped", (EveryFourRanks,), {"group": 8})(q, k)
    E, D = _rebuilt_checkpoints(masses)
    assert np.array_equal(masses._E0, E) and np.array_equal(masses._D0, D)
    count = (n + 7) // 8
    GE, GD = np.empty((count, masses.s.size, k)), np.empty((count, masses.s.size, k))
    nodes_pass.group_pass(masses.q, masses.s, k, 8, GE, GD, 0, count, _every_chunk(masses))
    for g in range(count):
        E1, D1 = _added(masses, 8 * g, min(8 * g + 8, n), k)
        assert np.array_equal(GE[g], E1) and np.array_equal(GD[g], D1)


def test_one_pass_over_many_chunks_gives_each_chunks_values():
    """The prefix pass over every chunk of nodes at once, over every other chunk, and over each
    chunk alone (as threads share them) gives the same checkpoints and per-chunk parts of
    ``sigma`` to the bit."""
    q = _row(4, 200, 2.0)
    masses = EveryFourRanks(q, 5)
    count = len(kernels.node_chunks(masses.s.size))
    assert count > 3
    results = []
    for sets in ([np.arange(count)], [np.arange(0, count, 2), np.arange(1, count, 2)], [np.array([c]) for c in range(count)]):
        E0, D0, parts = np.zeros_like(masses._E0), np.zeros_like(masses._D0), np.zeros((count, masses.n))
        for chunks in sets:
            nodes_pass.prefix_pass(masses.q, masses.s, masses.w, masses._above, 5, 4, chunks.astype(np.int64), E0, D0, parts)
        results.append((E0, D0, parts))
    for E0, D0, parts in results[1:]:
        assert all(np.array_equal(a, b) for a, b in zip((E0, D0, parts), results[0]))
    assert np.array_equal(results[0][0], masses._E0) and np.array_equal(kernels.in_order(results[0][2]), masses.sigma)


def test_a_run_in_blocks_gives_the_same_masses():
    """A run's masses rebuilt block by block (the products of ``block`` ranks at a time) are
    the one block's to the bit, for blocks that divide the run and blocks that do not, and so are
    a run that reads ``e^{-q s}`` from a table of some or all of its ranks (the nesting's), and
    a short run that ``across`` computes whole; the cuts of a long run computed lazily, stretch
    by stretch, as ``across`` and ``across_cuts`` ask for them, agree with the whole run's to a
    few units of roundoff (their ends are multiplied out from groups of ranks, in another order);
    and a run kept in blocks of 5 agrees with the numpy reference as a whole run does."""
    q = _row(3, 150, 2.0)
    masses = compiled.CompiledClockSetMasses(q, 4)
    for f, t in [(0, 149), (17, 140), (60, 61)]:
        whole = np.empty(t - f)
        no_table = (kernels.NO_TABLE, kernels.NO_TABLE, 0)
        kernels.run_masses(masses.q, masses.s, masses.w, masses._above, *masses._prefix(f), f, t, 4, whole, 1024, *no_table)
        for block in (1, 5, 11, 133):
            blocked = np.empty(t - f)
            kernels.run_masses(masses.q, masses.s, masses.w, masses._above, *masses._prefix(f), f, t, 4, blocked, block,
                                *no_table)
            assert np.array_equal(blocked, whole)
        for first, last in ((0, 150), (f + 3, t - 2)):  # e^{-q s} read from a table of all or some of the ranks
            tabled = np.empty(t - f)
            kernels.run_masses(masses.q, masses.s, masses.w, masses._above, *masses._prefix(f), f, t, 4, tabled, 5,
                                *kernels.clock_table(masses.q, masses.s, first, max(last, first)), first)
            assert np.array_equal(tabled, whole)
        short = type("Short", (compiled.CompiledClockSetMasses,), {"run_block": 5})(q, 4)  # computed whole
        assert [short.across(f, j, t) for j in range(f + 1, t + 1)] == whole.tolist()
        for block, group in ((5, 8), (256, 8), (5, 512)):  # the runs of across, blocks computed as their cuts
            lazy = type("Lazy", (compiled.CompiledClockSetMasses,), {"run_block": block, "eager_ranks": 0, "group": group})(q, 4)
            cuts = np.random.default_rng(f).permutation(np.arange(f + 1, t + 1))  # are asked for, one by one
            assert np.allclose([lazy.across(f, int(j), t) for j in cuts], whole[cuts - f - 1], rtol=RANGE_AGREEMENT, atol=0)
            lazy = type("Lazy", (compiled.CompiledClockSetMasses,), {"run_block": block, "eager_ranks": 0, "group": group})(q, 4)
            for lo, hi in ((f + 1, f + 1), ((f + t) // 2, t), (f + 1, t)):  # and by spans, overlapping
                assert np.allclose(lazy.across_cuts(f, lo, hi, t), whole[lo - f - 1:hi - f], rtol=RANGE_AGREEMENT, atol=0)
    assert _largest_disagreement(_row(4, 20), 3, type("InBlocksOfFive", (compiled.CompiledClockSetMasses,),
                                                       {"run_block": 5, "eager_ranks": 0})) <= AGREEMENT


def test_ranges_multiplied_out_from_groups_give_the_runs_masses():
    """``range_group`` (the ranges of a run from the groups of ranks kept by the masses) gives the
    polynomials of its ranks added one by one, within a few units of roundoff, for ranges inside
    one group, across several and empty; and the masses of a span of a run that ``across_cuts``
    and ``across_one`` compute from them (``stretch_masses``) are the whole run's within the
    same; a group of ranks whose polynomials are off by a relative 1e-7 is caught."""
    q = _row(3, 150, 2.0)
    Grouped = type("Grouped", (compiled.CompiledClockSetMasses,), {"group": 8, "eager_ranks": 0, "run_block": 8})
    masses = Grouped(q, 4)
    GE, GD = masses._group_polynomials()
    nodes = masses.s.size
    for lo, hi in [(0, 150), (3, 5), (8, 16), (5, 140), (17, 17), (149, 150)]:
        E, D = np.empty((nodes, 4)), np.empty((nodes, 4))
        kernels.range_group(masses.q, masses.s, GE, GD, 8, lo, hi, 4, E, D)
        E1, D1 = _added(masses, lo, hi)
        assert np.allclose(E, E1, rtol=RANGE_AGREEMENT, atol=SUBNORMAL) and np.allclose(D, D1, rtol=RANGE_AGREEMENT, atol=SUBNORMAL)
    for f, t in [(0, 149), (17, 140)]:
        whole = np.empty(t - f)
        kernels.run_masses(masses.q, masses.s, masses.w, masses._above, *masses._prefix(f), f, t, 4, whole, 1024,
                            kernels.NO_TABLE, kernels.NO_TABLE, 0)
        for lo, hi in [(f + 1, t), (f + 30, f + 47), (t, t)]:
            assert np.allclose(Grouped(q, 4).across_cuts(f, lo, hi, t), whole[lo - f - 1:hi - f], rtol=RANGE_AGREEMENT, atol=0)
        for j in range(f + 1, t + 1, 7):
            assert Grouped(q, 4).across_one(f, j, t) == pytest.approx(whole[j - f - 1], rel=RANGE_AGREEMENT)
    broken = Grouped(q, 4)
    broken._group_polynomials()[0][5] *= 1 + 1e-7  # the ranks 40..47, at every node
    got = broken.across_cuts(17, 100, 140, 149)  # [17, 100) from the groups (a run from rank 0 takes the prefix)
    whole = np.empty(132)
    kernels.run_masses(masses.q, masses.s, masses.w, masses._above, *masses._prefix(17), 17, 149, 4, whole, 1024,
                        kernels.NO_TABLE, kernels.NO_TABLE, 0)
    assert np.allclose(Grouped(q, 4).across_cuts(17, 100, 140, 149), whole[82:123], rtol=RANGE_AGREEMENT, atol=0)
    assert not np.allclose(got, whole[82:123], rtol=RANGE_AGREEMENT, atol=0)


def _range_at_every_node(masses, GE, GD, group: int, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """``range_group``'s float operations in its order, at every node (no node left out)."""
    nodes = masses.s.size
    E, D = _empty(nodes), np.zeros((nodes, 4))
    none, some = np.empty(nodes), np.empty(nodes)
    r = lo
    while r < hi:
        if r % group == 0 and r + group <= hi:
            kernels._merge(E, D, GE[r // group], GD[r // group], 4)
            r += group
            continue
        kernels._clock(masses.q[r], masses.s, nodes, none, some)
        kernels._add_rank(E, D, none, some, masses.q[r], E, D, 4)
        r += 1
    return E, D


def test_groups_ranges_and_spans_leave_only_nodes_that_are_zero(monkeypatch):
    """Past the last node where a group of ranks, a range or a span's end group has a coefficient
    other than 0, ``group_pass``, ``range_group`` and ``stretch_masses`` stop (0 begets 0, and
    every term of a span's integrand has a factor of each end): on a row whose groups of 8 ranks
    are 0 at the top nodes, each gives to the bit what the same float operations give at every
    node; a group pass that leaves one node more is caught."""
    q = _row(3, 150, 2.0)
    q[75] = 1e-15  # nodes up to 1e17: there every other token has rung
    q /= q.sum()
    masses = type("Grouped", (compiled.CompiledClockSetMasses,), {"group": 8, "eager_ranks": 0})(q, 4)
    nodes, count = masses.s.size, 150 // 8 + 1
    GE, GD = np.empty((count, nodes, 4)), np.empty((count, nodes, 4))
    nodes_pass.group_pass(masses.q, masses.s, 4, 8, GE, GD, 0, count, _every_chunk(masses))
    assert np.all(GE[:, -1] == 0.0) and np.all(GD[:, -1] == 0.0)
    for g in range(count):
        E, D = _added(masses, 8 * g, min(8 * g + 8, 150))
        assert np.array_equal(GE[g], E) and np.array_equal(GD[g], D)
    for lo, hi in [(0, 150), (3, 5), (8, 16), (5, 140), (17, 17), (149, 150)]:
        E, D = np.empty((nodes, 4)), np.empty((nodes, 4))
        kernels.range_group(masses.q, masses.s, GE, GD, 8, lo, hi, 4, E, D)
        E1, D1 = _range_at_every_node(masses, GE, GD, 8, lo, hi)
        assert np.array_equal(E, E1) and np.array_equal(D, D1)
    for f, low, high, t in [(0, 40, 60, 149), (17, 30, 31, 140), (20, 100, 140, 149)]:
        E0f, D0f = (array.copy() for array in masses._prefix(f))
        EL, DL = _range_at_every_node(masses, GE, GD, 8, f, low)
        got = np.empty(high - low)
        kernels.stretch_masses(masses.q, masses.s, masses.w, masses._above, E0f, D0f, EL, DL, GE, GD, 8, low, high, t,
                                4, got, 256)
        decay = np.exp(-masses._above[t] * masses.s) * masses.w
        E2, D2 = _range_at_every_node(masses, GE, GD, 8, high + 1, t + 1)
        at_every_node = np.empty(high - low)
        kernels._cuts_between(masses.q, masses.s, EL, DL, E2, D2, E0f, D0f, decay, 4, low, high, at_every_node, 256,
                               kernels.NO_TABLE, kernels.NO_TABLE, 0)
        assert np.array_equal(got, at_every_node)
    original = kernels.live_prefix_nodes
    monkeypatch.setattr(nodes_pass, "live_prefix_nodes", lambda E, D, nodes: max(0, original(E, D, nodes) - 1))
    broken_E, broken_D = np.empty_like(GE), np.empty_like(GD)
    nodes_pass.group_pass.py_func(masses.q, masses.s, 4, 8, broken_E, broken_D, 0, count, _every_chunk(masses))
    assert not (np.array_equal(broken_E, GE) and np.array_equal(broken_D, GD))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(5, 300), kind=st.sampled_from(["softmax", "equal", "one_hot", "sharp"]))
def test_the_compiled_flux_is_the_python_walks_to_the_bit(seed, n, kind):
    """``flux_setup`` with the compiled masses walks the flux in compiled code
    (:func:`kernels.minimal_flux`): the same flux, cut and ``x`` to the bit as the Python walks
    on the same ``p`` and ``sigma`` (masses without the compiled walk), on softmax rows, ``p =
    q``, one-hot ``p`` and sharp rows."""
    rng = np.random.default_rng(seed)
    q = _row(seed, n, 2.0 if kind == "sharp" else 1.0)
    p = {"equal": q.copy(), "one_hot": np.eye(n)[rng.integers(n)]}.get(kind, _row(seed + 1, n, 2.0 if kind == "sharp" else 1.0))
    order = ratio_order(p, q)
    masses = compiled.CompiledClockSetMasses(q[order] / q[order].sum(), 3)
    compiled_setup = water_levels.flux_setup(p, q, order, built_set_masses(masses))
    walked = water_levels.flux_setup(p, q, order, built_set_masses(_WithoutCompiledFlux(masses)))
    assert isinstance(walked.flux, list) and isinstance(compiled_setup.flux, np.ndarray)
    assert compiled_setup.cut == walked.cut and np.array_equal(compiled_setup.flux, walked.flux)
    assert np.array_equal(compiled_setup.selection, walked.selection)


def test_the_compiled_flux_comparison_sees_one_ulp():
    """The comparison above resolves a single unit in the last place: ``p`` at the lowest rank
    moved by one ulp gives another flux."""
    q, p = _row(7, 60), _row(8, 60)
    order = ratio_order(p, q)
    masses = compiled.CompiledClockSetMasses(q[order] / q[order].sum(), 3)
    moved = p.copy()
    moved[order[0]] = np.nextafter(moved[order[0]], 1.0)
    walked = water_levels.flux_setup(p, q, order, built_set_masses(_WithoutCompiledFlux(masses)))
    assert not np.array_equal(water_levels.flux_setup(moved, q, order, built_set_masses(masses)).flux, walked.flux)


class _WithoutCompiledFlux:
    """Compiled masses seen without their compiled walk (``flux_setup`` then walks in Python)."""

    def __init__(self, masses):
        self.sigma = masses.sigma


#: How closely a range multiplied out from groups agrees with the same ranks added one by one
#: (measured: a few 1e-15 relative; the products are taken in another order) ...
RANGE_AGREEMENT = 1e-13

#: ... above the subnormal floats (the coefficients at the last nodes, down to 1e-323, where a
#: float has fewer digits than 1e-13 asks).
SUBNORMAL = 1e-300


def _empty(nodes: int, k: int = 4) -> np.ndarray:
    group = np.zeros((nodes, k))
    group[:, 0] = 1.0
    return group


def _added(masses, lo: int, hi: int, k: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """The polynomials of the ranks ``[lo, hi)`` added one by one (as the passes add them)."""
    E, D = _empty(masses.s.size, k), np.zeros((masses.s.size, k))
    none, some = np.empty(masses.s.size), np.empty(masses.s.size)
    for r in range(lo, hi):
        kernels._clock(masses.q[r], masses.s, masses.s.size, none, some)
        kernels._add_rank(E, D, none, some, masses.q[r], E, D, k)
    return E, D


def test_passes_shared_among_threads_give_the_same_values(monkeypatch):
    """The set-up's pass and a run's skeleton by chunks of nodes on threads (``by_nodes``, here
    from any size on) give the values of the same chunks in the calling thread, to the bit; and
    the chunks are really shared (more than one thread ran them)."""
    import os
    import threading

    import torch

    q = _row(5, 150, 2.0)
    serial = type("Lazy", (NodeByNode,), {"eager_ranks": 0})
    alone = serial(q, 4)
    masses_alone = [alone.across(0, j, 149) for j in range(1, 150)]
    seen = set()
    original = nodes_pass.prefix_pass

    def noting(*args):
        seen.add(threading.get_ident())
        original(*args)

    monkeypatch.setattr(kernels, "SHARED_FROM", 0)
    monkeypatch.setattr(nodes_pass, "prefix_pass", noting)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    shared = serial(q, 4)
    assert len(seen) > 1 and len(kernels.node_chunks(shared.s.size)) > 2
    assert np.array_equal(shared.sigma, alone.sigma) and np.array_equal(shared._E0, alone._E0)
    assert np.array_equal(shared._D0, alone._D0)
    assert [shared.across(0, j, 149) for j in range(1, 150)] == masses_alone


@pytest.mark.parametrize("seed,n,k", [(0, 40, 3), (1, 60, 4), (2, 30, 6), (3, 80, 3)])
def test_the_compiled_nesting_gives_the_references_levels(seed, n, k):
    """The whole float64 construction with the compiled masses and nesting, against the
    reference's (Python nesting on the numpy masses): the same cut (or, where ``alpha* = 1``, either
    end: ``f(0) = f(n) = 1`` exactly, so rounding picks the end, and ``x = p`` and the flux are the
    same from either; seed 3 gives the two ends since the pass at points took blocks of 256 ranks)
    and flux, levels within ``1e-6`` (a level is ``remaining / mass``, ill-conditioned at a cut whose last runs have
    tiny mass: 2.3e-7 measured at one such cut, most agree to 1e-13), and both certified by
    the selection law their levels realise, which is what the verifier draws."""
    rng = np.random.default_rng(seed)
    logits = 3 * rng.normal(size=n)
    p, q = (np.exp(v - v.max()) / np.exp(v - v.max()).sum() for v in (logits, logits + rng.normal(size=n)))
    order = ratio_order(p, q)
    reference = water_levels.water_level_parameters(p, q, order, clock_set_masses(k))
    fast = water_levels.water_level_parameters(p, q, order, clock_set_masses(k, compiled.CompiledClockSetMasses))
    assert fast.arithmetic == reference.arithmetic == "float64"
    tied = {fast.cut, reference.cut} <= {0, n} and abs(reference.acceptance - 1.0) <= 1e-14
    assert fast.cut == reference.cut or tied
    assert np.max(np.abs(np.asarray(fast.flux) - np.asarray(reference.flux))) <= 1e-14
    assert max(reference.levels) > 0.3  # deep enough to exercise the nesting
    difference = np.abs(np.asarray(fast.levels) - np.asarray(reference.levels))
    assert difference.max() <= 1e-6 and np.median(difference) <= 1e-13
    for params in (reference, fast):
        assert water_levels.parameters.clock_realised_error(params, q, k, compiled.CompiledClockSetMasses) <= water_levels.CERTIFICATE_TOLERANCE


def test_levels_that_do_not_carry_the_flux_fail_the_compiled_certificate():
    rng = np.random.default_rng(5)
    logits = 3 * rng.normal(size=50)
    p, q = (np.exp(v - v.max()) / np.exp(v - v.max()).sum() for v in (logits, logits + rng.normal(size=50)))
    params = water_levels.wor_parameters(p, q, 3, clock_masses=compiled.CompiledClockSetMasses)
    halved = dataclasses.replace(params, levels=[v / 2 for v in params.levels])
    assert water_levels.parameters.clock_realised_error(halved, q, 3, compiled.CompiledClockSetMasses) > 1e-4


def test_a_cut_with_flux_and_no_mass_is_a_typed_refusal():
    """The compiled nesting's status 1 (a run's interval mass <= 0 at a cut with flux) becomes
    the construction's refusal, as the Python nesting's does."""
    q = _row(4, 10)
    masses = compiled.CompiledClockSetMasses(q, 3)
    masses._runs.clear()
    flux = [0.0] + [0.1] * 9 + [0.0]
    levels = [0.0] * 11
    masses._E0[:] = 0.0  # no group has any count polynomial: every interval mass is 0
    assert masses.water_levels(flux, 0, 9, levels, 2.2e-16) is False


def test_the_verifier_announces_no_compiling_once_the_clock_path_ran(monkeypatch):
    """Nothing to compile once the clock path ran (its pass at points included); and 3 s more
    announced while the pass at points is not in numba's cache."""
    import torch

    from decoding.verifiers.optimal import row_passes as optimal_numba
    from decoding.verifiers.optimal import pair as optimal_pair_wor
    from decoding.verifiers.optimal.setup import chebyshev as optimal_wor_chebyshev
    from decoding.verifiers.optimal import wor as verifier
    p, q = (np.exp(np.linspace(0, shift, 12)) for shift in (2.0, -1.0))  # 1,320 triples: the compiled path
    params = water_levels.wor_parameters(p / p.sum(), q / q.sum(), 3, clock_masses=compiled.CompiledClockSetMasses)
    assert "clock integral" in params.arithmetic
    cpu, gpu = torch.device("cpu"), torch.device("cuda")
    assert verifier.compile_seconds(cpu) == optimal_pair_wor.compile_seconds(cpu)
    assert verifier.compile_seconds(gpu) == optimal_pair_wor.compile_seconds(gpu) + 1.0  # the set-up's CUDA kernels
    cached = optimal_numba.is_cached
    monkeypatch.setattr(optimal_numba, "is_cached", lambda f: f is not optimal_wor_chebyshev._pass and cached(f))
    assert verifier.compile_seconds(cpu) == optimal_pair_wor.compile_seconds(cpu) + 3.0


def test_the_nesting_estimate_counts_the_square_of_each_run_of_flux():
    """:meth:`CompiledClockSetMasses.nesting_seconds`: runs of ranks ``[0, 2]`` and ``[4, 5]``
    (cuts 1, 2 and 5 with flux) cost ``(3^2 + 2^2) N k`` units; a row whose estimate passes the
    limit is refused before any nesting, with the run's length in the message."""
    masses = compiled.CompiledClockSetMasses(np.full(10, 0.1), 3)
    flux = np.array([0, 1, 1, 0, 0, 2, 0, 0, 0, 0, 0.0])
    seconds, longest = masses.nesting_seconds(flux, 0, 9)
    assert longest == 3 and seconds == pytest.approx(13 * masses.s.size * 3 / masses.NESTING_RATE)
    assert masses.nesting_seconds(flux, 3, 9) == pytest.approx((4 * masses.s.size * 3 / masses.NESTING_RATE, 2))
    masses.max_nesting_seconds = 0.5 * seconds
    with pytest.raises(NotApplicableError, match="runs of up to 3 ranks"):
        masses.water_levels(list(flux), 0, 9, [0.0] * 11, 2.2e-16)


def test_a_stretch_computes_only_the_groups_its_ranges_take():
    """A span of a run read alone computes the groups of ranks inside ``(high, t]`` of each
    stretch read (and inside ``[f, low)`` where the run starts above rank 0; from rank 0 that
    range is the prefix), and no others; the masses are those of a whole pass over the run (the
    test above)."""
    q = _row(3, 150, 2.0)
    stretches = []

    class Recorded(compiled.CompiledClockSetMasses):
        group, eager_ranks, run_block = 8, 0, 8

        def _stretch(self, f, low, high, t):
            stretches.append((f, low, high, t))
            return super()._stretch(f, low, high, t)

    def inside(lo, hi):
        return set(range(-(-lo // 8), hi // 8))

    for f, t in [(0, 149), (20, 130)]:
        stretches.clear()
        masses = Recorded(q, 4)
        masses.across_cuts(f, 60, 70, t)
        expected = set().union(*(inside(high + 1, end + 1) | (inside(start, low) if start > 0 else set())
                                 for start, low, high, end in stretches))
        assert stretches and set(np.flatnonzero(masses._group_nodes > 0).tolist()) == expected
        assert len(expected) < masses._group_nodes.size - 2


def _clock_error(none: np.ndarray, some: np.ndarray, z: np.ndarray) -> float:
    """The largest relative error of ``(none, some)`` against ``e^{-z}`` and ``1 - e^{-z}`` in
    40-digit arithmetic."""
    import mpmath

    with mpmath.workdps(40):
        exact = [(mpmath.exp(-mpmath.mpf(float(v))), -mpmath.expm1(-mpmath.mpf(float(v)))) for v in z]
        return max(float(abs(mpmath.mpf(float(got)) / want - 1)) for pair in zip(zip(none, some), exact)
                   for got, want in zip(*pair))


#: ``_clock``'s values to a rounding or two of ``e^{-z}`` and ``1 - e^{-z}`` (2 units: 2^-52).
CLOCK_ERROR = 2.0 ** -52


def test_the_clock_is_exact_to_two_roundings_on_either_side_of_its_taylor_nodes():
    """``_clock`` takes ``e^{-z} - 1`` from its Taylor series below ``TAYLOR_BELOW``, ``expm1``
    and ``exp`` above: every value within two units of the exact ones, from ``z = 1e-30`` to
    ``z = 40``, the Taylor nodes leading; a series cut after ``z^2`` misses the same bound."""
    s = np.geomspace(1e-30, 40.0, 2_000)
    none, some = np.empty(s.size), np.empty(s.size)
    kernels._clock(1.0, s, s.size, none, some)
    taylor = s < kernels.TAYLOR_BELOW
    assert 500 < np.count_nonzero(taylor) < s.size
    assert _clock_error(none, some, s) <= CLOCK_ERROR
    cut = -s[taylor] * (1.0 - 0.5 * s[taylor])  # the series to z^2 only
    assert _clock_error(1.0 + cut, -cut, s[taylor]) > CLOCK_ERROR


def _sigma_by_one_pass(masses) -> np.ndarray:
    """``sigma`` from :func:`_python_pass`."""
    return kernels.in_order(_python_pass(masses)[2])


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(130, 300), k=st.integers(3, 6), decades=st.sampled_from([2, 6, 15]))
def test_sigma_with_the_decay_by_quotients_is_the_references(seed, n, k, decades):
    """The prefix pass takes ``e^{-q(above a) s}`` from the rank before, divided by ``e^{-q_a s}``,
    between exponentials at every ``DECAY_ANCHOR``-th rank (and where it fell below ``1e-250``):
    on rows of 130-300 ranks whose ``q`` spans 2-15 decades, ``sigma`` is the reference's (an
    exponential at every rank and node) within :data:`AGREEMENT`."""
    q = 10.0 ** np.random.default_rng(seed).uniform(-decades, 0, n)
    q /= q.sum()
    assert _relative(ClockSetMasses(q, k).sigma, compiled.CompiledClockSetMasses(q, k).sigma) <= AGREEMENT


def test_a_decay_left_undivided_is_caught_and_unanchored_quotients_agree(monkeypatch):
    """Run as Python, the pass gives the compiled ``sigma``; with no exponential after the first
    rank (``DECAY_ANCHOR`` past the row) it still agrees with the reference, and with the decay
    kept from the rank before, not divided, it does not."""
    q = _row(6, 140, 2.0)
    masses = EveryFourRanks(q, 4)
    reference = ClockSetMasses(q, 4).sigma
    assert _relative(masses.sigma, _sigma_by_one_pass(masses)) <= AGREEMENT
    monkeypatch.setattr(nodes_pass, "DECAY_ANCHOR", 10 ** 9)
    assert _relative(reference, _sigma_by_one_pass(masses)) <= AGREEMENT
    decay = kernels._decay
    monkeypatch.setattr(nodes_pass, "rank_terms", kernels.rank_terms.py_func)  # (so it calls the patched _decay)
    monkeypatch.setattr(kernels, "_decay", lambda before, none, above, s, exact:
                        before if before > 0 else decay(before, none, above, s, exact))
    assert _relative(reference, _sigma_by_one_pass(masses)) > 1e-6


def _subnormal(values: np.ndarray) -> int:
    return int(np.count_nonzero((values > 0) & (values < kernels.SMALLEST_NORMAL)))


def test_the_passes_adding_ranks_leave_no_subnormal_coefficient(monkeypatch):
    """Coefficients below the least normal float are set to 0 as ranks are added: on a row whose
    ``q`` spans 15 decades no checkpoint holds a subnormal coefficient, and ``sigma`` is the
    reference's; the same pass as Python with the rank added unflushed leaves some."""
    q = 10.0 ** np.random.default_rng(11).uniform(-15, 0, 200)
    q /= q.sum()
    masses = EveryFourRanks(q, 3)
    assert _subnormal(masses._E0) + _subnormal(masses._D0) == 0
    assert _relative(ClockSetMasses(q, 3).sigma, masses.sigma) <= AGREEMENT
    monkeypatch.setattr(kernels, "_normal", lambda x: x)
    monkeypatch.setattr(nodes_pass, "_add_rank_by_degree", kernels._add_rank_by_degree.py_func)
    E0, D0, _ = _python_pass(masses)
    assert _subnormal(E0) + _subnormal(D0) > 0


@pytest.mark.parametrize("at_points", [True, False])
def test_a_stretch_computes_its_groups_only_at_the_nodes_its_run_reads(at_points):
    """A run that ends below the top ranks reads only the nodes where ``e^{-q(above t) s}`` has not
    underflowed (:func:`kernels.read_nodes`): its stretches compute the groups of ranks at those
    nodes' chunks alone, and give the masses, to the bit, of masses whose every group was computed
    at every node first; with the groups' nodes cut below what the run reads, the masses move."""
    q = _row(5, 3000, 3.0)
    kind = type("Chosen", (compiled.CompiledClockSetMasses,), {"setup": "chebyshev" if at_points else "numba", "eager_ranks": 64})
    f, lo, hi, t = 100, 1200, 1260, 2000  # above t: about a third of the mass
    lazy, whole = kind(q, 3), kind(q, 3)
    whole._group_polynomials()
    got, want = lazy.across_cuts(f, lo, hi, t), whole.across_cuts(f, lo, hi, t)
    computed = lazy._group_nodes[lazy._group_nodes > 0]
    assert computed.size and computed.max() < lazy.s.size  # fewer nodes than the row has
    _, s, w, above = lazy._tables()[:4]
    live = kernels.read_nodes(s, w, above[t], *lazy._prefix(f))
    assert live <= computed.min()
    np.testing.assert_array_equal(got, want)
    short = kind(q, 3)
    original = short._groups_for
    short._groups_for = lambda ranges, nodes=None: original(ranges, live // 2)
    assert not (np.abs(short.across_cuts(f, lo, hi, t) - want) <= 1e-6 * want).all()
