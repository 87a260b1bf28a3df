"""The clock integral's set masses and the water levels of ``k >= 3`` drafts without
replacement, compiled: :class:`CompiledClockSetMasses`, for :mod:`decoding.verifiers.optimal.wor`.

The same computation as the reference :class:`otm.rules.water_levels.clock_masses.ClockSetMasses`
(the derivation: docs/optimal-verifier.md#set-masses-by-the-clock-integral) and the
nesting of :func:`otm.rules.water_levels.construction.water_level_parameters`, in numba instead of numpy
and Python: the same quadrature nodes, the same count polynomials ``(E, D)`` per node, the
same positive integrands, the same rounding floor of the nesting
(``REMAINDER_FLOOR unit (raised + 1) F(j)``, :data:`otm.rules.water_levels.construction.REMAINDER_FLOOR`).
What changes is the order of some float additions (a
node's terms of degree ``k - 1`` are summed directly instead of through truncated products,
the integral is a loop instead of a BLAS dot product) and how some factors are formed
(``e^{-q s} - 1`` by its Taylor series where ``q s`` is small, :func:`_clock`; the prefix pass's
``e^{-q(above a) s}`` by quotients between exponentials,
:func:`decoding.verifiers.optimal.setup.numba_nodes.prefix_pass`; subnormal
coefficients set to 0 as ranks are added, :func:`_normal`), so the values agree with the
reference's to a few units of roundoff, not bit for bit (tests/decoding/test_optimal_wor_numba.py),
and the levels that come out are certified as the reference's are: by the selection law they
realise, through :meth:`CompiledClockSetMasses.lowest_law`
(:func:`otm.rules.water_levels.clock_masses.realised_selection`).

The prefix pass, the groups of ranks, their ranges and a span's end groups leave the nodes past
the last where their polynomials are not exactly 0 (:func:`live_prefix_nodes`: 0 stays 0 as
ranks are added, and every term there has a factor of them), and a run or a lowest-member law
starts from the nodes where its prefix and ``e^{-q(above t) s}`` are not 0, so the upper nodes,
there for the rarest tokens' sets, cost little once the tokens of sizable ``q`` have rung; the
same values to the bit. (Leaving them inside a run's own passes as well gave the same masses
and no gain on rows cut to 1,000 tokens or on whole rows' spans, by a hand timing; not kept.)

Memory: no tables of ``e^{-q s}`` (:func:`_clock` computes them where a pass needs them; the
nesting keeps those of its own ranks, :func:`clock_table`), the prefixes at every 256th rank, and
a run's products 256 ranks at a time, so a whole real vocabulary fits
(docs/optimal-verifier.md#the-water-level-verifier-for-k-drafts). Cost per run ``[f, t]`` of the nesting: a
forward
pass (the groups ``[f, j)`` at each block's start), and per block a forward pass with the
products and a backward pass (the groups ``[j, t]``), ``O((t - f) N k^2)`` for ``N`` nodes, as the
reference's, without its per-rank Python calls; the walk's bounds ask a run for some cuts only
(:func:`stretch_masses`, a span of a run alone, its ends multiplied out from groups of ranks
kept once a walk reads a long run, :func:`range_group`); a run of flux peels about one rank at a time,
so a row costs at most about ``sum len^2 N k^2`` over its runs, which
:meth:`CompiledClockSetMasses.nesting_seconds` estimates before the nesting starts (rows above
:attr:`CompiledClockSetMasses.max_nesting_seconds` are refused); measured in
docs/optimal-verifier.md#water-levels-for-drafts-without-replacement
(``python -m research.optimal_wor.wor_water_levels --cost``, ``--float`` and ``--nesting-rate``).

The kernels named here are in :mod:`decoding.verifiers.optimal.clock_kernels`; the pass up
the ranks that sets a row up is a backend of :mod:`decoding.verifiers.optimal.setup`.
"""
from __future__ import annotations

import functools

import numpy as np

from otm.rules.water_levels.construction import REMAINDER_FLOOR, flux_runs
from otm.errors import NotApplicableError
from otm.rules.water_levels.clock_masses import ClockSetMasses

from ..base import sharing_threads
from .cache import SizedCache
from .clock_kernels import (
    NO_TABLE,
    RUN_BLOCK,
    SHARED_FROM,
    SPAN_CHUNK,
    advance_prefix,
    by_nodes,
    clock_table,
    in_order,
    lowest_law,
    minimal_flux,
    node_chunks,
    range_group,
    read_nodes,
    run_masses,
    stretch_masses,
    water_levels,
)
from .setup import pick, setup_checkpoint

class CompiledClockSetMasses(ClockSetMasses):
    """:class:`otm.rules.water_levels.clock_masses.ClockSetMasses` with its prefix tables, ``sigma``, run
    masses and lowest-member laws compiled (module docstring; the set-up and the cache of
    :meth:`~otm.rules.water_levels.clock_masses.ClockSetMasses.across` are the reference's), and
    :meth:`water_levels`, the whole float64 nesting in one call (which
    :func:`otm.rules.water_levels.construction.water_level_parameters` takes when a masses object has
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
    #: (docs/optimal-verifier.md#water-levels-for-drafts-without-replacement).
    enumerate_up_to = 1_000

    #: :data:`RUN_BLOCK`: the ranks of a run whose products :func:`run_masses` keeps at once.
    run_block = RUN_BLOCK

    #: A run of at most this many ranks is computed whole at the first cut :meth:`across` asks
    #: of it (the wide nesting asks every cut of every run); longer ones block by block.
    eager_ranks = 4096

    #: The prefix polynomials are kept at every this many ranks (the numpy reference's
    #: :data:`~otm.rules.water_levels.clock_masses.CHECKPOINT` is 64), and the pass at Chebyshev points
    #: multiplies out blocks of as many ranks: its fixed work per block and node is paid a quarter
    #: as often, and the checkpoints, fresh memory for every row, take a quarter of the floats (30
    #: MB instead of 120 at ``k = 8`` and 400 nodes). Faster than 64 on whole rows, and 512 or 1,024
    #: no faster (``scripts/bench_wor_scan.py``, ``scripts/bench_optimal_verifier.py --wor-rows``;
    #: research/optimal_wor/JOURNAL.md, "Figures moved from docstrings"). A walk
    #: rebuilds a prefix from the checkpoint below it, up to 255 ranks node by node; its decisions
    #: cost what they did (research/optimal_wor/JOURNAL.md, "Checkpoints at every 256th rank").
    #: Each set-up backend declares its spacing
    #: (:attr:`~decoding.verifiers.optimal.setup.capabilities.SetupCapabilities.checkpoint`; the
    #: scans on a device keep 64), which :func:`clock_masses` gives its class.
    checkpoint = 256

    #: The ranks of each group whose polynomials are kept once a walk reads a long run
    #: (a set-up backend's ``group_tables``), from which :func:`range_group` multiplies out a range: the walk's
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

    #: The torch device the row's set-up runs on (``"cpu"``, ``"cuda"``, ``"cuda:1"``;
    #: :func:`clock_masses`): the rest of the set-up and the walks run on the CPU.
    device = "cpu"

    #: The set-up backend by name (one of :data:`decoding.verifiers.optimal.setup.BACKENDS`),
    #: or ``None``: the one :func:`decoding.verifiers.optimal.setup.pick` finds for
    #: :attr:`device`, ``k`` and the threads of each row (:meth:`pass_threads`).
    setup = None

    def pass_threads(self) -> int:
        """The threads the pass up the ranks is shared among: one on a small row (fewer than
        :data:`~decoding.verifiers.optimal.clock_kernels.SHARED_FROM` rank-nodes), else
        those of a share of its chunks of nodes."""
        return 1 if self.n * self.s.size < SHARED_FROM else sharing_threads(len(node_chunks(self.s.size)))

    def _prefix_pass(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The pass up the ranks by the set-up backend :func:`~decoding.verifiers.optimal.setup.pick`
        finds (or the named :attr:`setup`): ``sigma``, the checkpoints and, from a scan, every
        group of ranks."""
        self._groups = None  # (GE, GD) [groups, nodes, k], when first needed
        self._last = [np.empty((self.s.size, self.k)), np.empty((self.s.size, self.k)), self.n + 1]  # the prefix [0, at) last asked for
        self._lazy = SizedCache(self.RUN_FLOATS_KEPT)  # (f, t) -> _LazyRun
        self._backend = pick(self.device, self.k, self.pass_threads(), self.setup)
        E0, D0, sigma, groups = self._backend.prefix_tables(self)
        if groups is not None:
            self._groups, self._group_nodes = groups, np.full(groups[0].shape[0], self.s.size, dtype=np.int64)
        return E0, D0, sigma

    def minimal_flux(self, ps: np.ndarray, m: int, unit: float) -> np.ndarray:
        """The minimal flux of :func:`otm.rules.water_levels.construction.flux_setup` from ``p`` by rank
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
        """:meth:`~otm.rules.water_levels.clock_masses.ClockSetMasses.across`, computed as cuts are asked
        for (:class:`_LazyRun`: the blocks of :data:`RUN_BLOCK` cuts that hold them, by
        :func:`stretch_masses`; a run of up to :attr:`eager_ranks` ranks whole, by
        :func:`run_masses`), the values of :func:`run_masses` to a few units of roundoff; the last
        runs are kept within :attr:`RUN_FLOATS_KEPT` floats."""
        return self._lazy_run(f, t).at(j)

    def across_cuts(self, f: int, lo: int, hi: int, t: int) -> np.ndarray:
        """``[hi - lo + 1]``: :meth:`across` at the cuts ``lo..hi`` of the run ``[f, t]`` at once
        (the same values, a read-only view), what the walk's bounds read over a span
        (:mod:`otm.rules.water_levels.bounds`); it costs the blocks of the span, not the run."""
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
        """``(GE, GD)`` ``[groups, nodes, k]`` of every :attr:`group` of ranks, every group computed."""
        return self._groups_for([(0, self.n)])

    def _groups_for(self, ranges: list[tuple[int, int]], nodes: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(GE, GD)`` ``[groups, nodes, k]`` of the :attr:`group` of ranks, with every group that
        lies whole inside one of the rank ranges ``[lo, hi)`` computed at the first ``nodes`` nodes
        (all by default; what :func:`range_group` reads of them, the run's live nodes,
        :meth:`_stretch`; the arrays are made when a stretch first needs them, and a row whose
        walks read no run longer than :attr:`eager_ranks` never does). Each range's groups from
        its first missing one to its last in one pass, at the nodes from the fewest any of them
        has up to ``nodes`` (a node computed again gets the same value, whatever the nodes asked
        for: each node's polynomials are its own), by the set-up backend's ``group_tables``
        (:mod:`decoding.verifiers.optimal.setup`; a scan made them all in its pass)."""
        count = (self.n + self.group - 1) // self.group
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
            done = self._backend.group_tables(self, *self._groups, a, b, start, nodes)
            self._group_nodes[a:b] = np.maximum(self._group_nodes[a:b], done)
        return self._groups

    def across_one(self, f: int, j: int, t: int) -> float:
        """:meth:`across` at one cut, what a window of the walk's bounds asks for
        (:func:`otm.rules.water_levels.bounds.span_at_most`): from the run where it is kept, else
        the one cut alone by :func:`stretch_masses` (one rank each side of it, the rest of the
        run multiplied out from the groups of ranks), not kept."""
        if (f, t) in self._lazy:
            return self.across(f, j, t)
        return float(self._stretch(f, j - 1, j, t)[0])

    def lowest_law(self, f: int, t: int) -> np.ndarray:
        """``[t - f + 1]``: :meth:`otm.rules.water_levels.clock_masses.ClockSetMasses.lowest_law`, by
        chunks of nodes shared among threads (:meth:`_summed_by_nodes`)."""

        def law(q, s, w, above, E0f, D0f, out, chunk):
            lowest_law(q, s, w, above, E0f, D0f, f, t, self.k, out)

        return self._summed_by_nodes(law, f, t - f + 1, t - f + 1)

    def _summed_by_nodes(self, kernel, f: int, size: int, ranks: int) -> np.ndarray:
        """``[size]``: ``kernel(q, s, w, above, E0f, D0f, out, c)`` on each chunk ``c`` of
        :data:`SPAN_CHUNK` nodes (their slices of ``s``, ``w`` and the prefix ``[0, f)``; ``out``
        ``[size]``, the chunk's part), shared among threads over ``ranks`` ranks (:func:`by_nodes`),
        the parts added in order (:func:`~decoding.verifiers.optimal.clock_kernels.in_order`)."""
        q, s, w, above = self._tables()[:4]
        E0f, D0f = self._prefix(f)
        chunks = node_chunks(s.size, SPAN_CHUNK)
        parts = np.zeros((len(chunks), size))

        def chunk(c: int, low: int, high: int) -> None:
            kernel(q, s[low:high], w[low:high], above, E0f[low:high], D0f[low:high], parts[c], c)

        by_nodes(chunk, chunks, ranks * s.size)
        return in_order(parts)

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


@functools.cache
def clock_masses(device: str = "cpu", setup: str | None = None) -> type[CompiledClockSetMasses]:
    """:class:`CompiledClockSetMasses` whose set-up runs on the torch device ``device`` (``"cpu"``,
    ``"cuda"``, ``"cuda:1"``), by the backend ``setup`` (a name of
    :data:`decoding.verifiers.optimal.setup.BACKENDS`) or, by default, the one
    :func:`decoding.verifiers.optimal.setup.pick` finds for each row; its checkpoints at
    the spacing those backends declare (:func:`~decoding.verifiers.optimal.setup.setup_checkpoint`).
    What :func:`decoding.verifiers.optimal.wor.row_setup` takes for a row's device."""
    if device == "cpu" and setup is None:
        return CompiledClockSetMasses
    return type(CompiledClockSetMasses.__name__, (CompiledClockSetMasses,),
                {"device": device, "setup": setup, "checkpoint": setup_checkpoint(device, setup),
                 "__doc__": clock_masses.__doc__, "__module__": __name__})


__all__ = ["CompiledClockSetMasses", "clock_masses"]
