"""The end-peeling nesting (Lemma 14) run on residuals alone, at the whole vocabulary: end keys by
Lemma 15, splits searched in windows at the run's ends, and a wrong split caught rather than kept
(docs/optimal-verifier.md, section 8, "The nesting on residuals alone").

``scripts/wor_end_peel.py`` keeps the flux every step carried over every cut of its run, so each step
costs the run's length. Here a step reads two ranks: the run's state is the three accumulated
polynomials of ``scripts/wor_end_keys.py`` and its queue of products, and an end key is Lemma 15's.
When an end's remaining flux is below zero (an inner cut emptied first), the split is searched among
the cuts within ``--window`` ranks of either end: their remaining flux now, from the residuals
(``rem(j) = sum_{c in [f, j)} d_c`` with ``d_c = y_c - (1 - s) sigma_c``, or minus the sum over
``[j, t]``), walked back over the run's kept steps with the masses across them until none is below
zero. A first crossing deeper than the window would leave its cut below zero at the start of a part,
and every cut becomes an end before its run is done: so it is found, and the nesting stops with
:class:`wor_end_peel.CrossedBeforeRun` instead of returning other levels (and with
:class:`BeyondKeptSteps` where a split would go back past the ``--kept`` steps a run keeps).
``--window 0`` searches every cut instead, by one compiled pass over the run per level walked back
(``O(len N k)``, what a split then costs).

Certificate, streamed: a rank leaves when a cut beside it empties, alone in its run, where it must
select what is left of its residual, ``(1 - s) sigma_c``; the largest ``|d_c|`` at leaving is the
largest gap between the law the levels realise and ``x`` (what
:func:`otm.rules.wor_clock_masses.realised_selection` computes run by run). Beside it, the run's
lowest-member law (the direct compiled pass) against ``sigma``, both totals of the run's mass: how
far the quadrature alone keeps Lemma 15's total of ``d`` from zero. On rows cut to ``--top``
tokens the construction's levels are compared too (``--no-construction`` leaves them out, past a few
thousand tokens); ``--top 0`` takes whole rows (``V = 151,936`` on the Qwen pair), the longest run
of flux below the cut. A row cut to 3,000 tokens takes seconds; a whole row minutes to its end or its
refusal (numpy, several milliseconds a step, a step per rank), with ``--window 0`` far longer (a
pass over the run per split):

    python scripts/wor_residual_nesting.py --corpus DIR [--positions 4] [--top 0] [--ks 3] [--window 256]
        [--kept 64] [--no-construction]
"""
from __future__ import annotations

import sys
import time
from collections import deque
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from wor_end_keys import Clocks, ProductQueue, Residuals, end_remainders  # noqa: E402
from wor_end_peel import NEGATIVE, SHORTEST_RUN, TIED, CrossedBeforeRun, beside_construction, realised_gap  # noqa: E402
from wor_nesting_spine import corpus_parser, cut_rows, longest_flux_run, longest_run, print_rows, selection_by_rank  # noqa: E402

#: Splits are searched among the cuts this many ranks from either end of the run.
WINDOW = 256

#: A run keeps its last this many steps (and their accumulators) to go back to.
KEPT = 64

#: A part takes the ranks between its right end and its run's into its accumulators one by one up
#: to this many, at once (off the queue) beyond.
RANK_BY_RANK = 512

#: A progress line every this many steps (whole rows: about ``10^5`` steps).
PROGRESS_STEPS = 10_000


class BeyondKeptSteps(RuntimeError):
    """A split's first crossing lies further back than the steps a run keeps."""


class ResidualNesting:
    """The nesting of one row's runs of flux (module docstring), on the clock masses ``masses`` with
    the minimal ``flux`` (``[n + 1]``); :meth:`run` nests one run, filling :attr:`levels`."""

    def __init__(self, masses, flux: np.ndarray, window: int = WINDOW, kept: int = KEPT, progress=None):
        self.masses, self.flux, self.window, self.kept, self.progress = masses, flux, window, kept, progress
        self.clocks = Clocks(masses)
        self.sigma, self.x = selection_by_rank(masses, flux)
        self.levels = np.full(len(flux), np.nan)
        self.stats = {"steps": 0, "splits": 0, "undone": 0, "most back": 0, "deepest": 0, "certificate": 0.0}

    def run(self, f0: int, t0: int) -> None:
        """The levels of the cuts ``f0 + 1..t0`` of the run ``[f0, t0]`` (its end cuts empty)."""
        todo = [(f0, t0, 0.0, Residuals(self.clocks, f0, t0), ProductQueue(self.clocks))]  # parts: (f, t, level, accumulators there, queue)
        while todo:
            f, t, level, base, queue = todo.pop()
            state = base.copy()
            if t == f:
                self._leaves(abs(self.x[f] - state.selected(f, None) - (1 - level) * self.sigma[f]))
                continue
            log: deque = deque(maxlen=self.kept)  # (f, t, theta, level before, cuts emptied, state before)
            steps = 0
            while t > f:
                queue.at(f, t)
                (rem_low, mass_low), (rem_high, mass_high) = end_remainders(state, queue, self.x, self.sigma, level)
                if rem_low < self._floor(f + 1) or rem_high < self._floor(t):
                    todo.extend(self._split(state, queue, log, steps, level))
                    break
                low, high = rem_low / mass_low, rem_high / mass_high
                theta = max(0.0, min(low, high))
                emptied = sorted({c for c, key in ((f + 1, low), (t, high)) if key <= theta})
                log.append((f, t, theta, level, emptied, state))
                state = state.copy().step(f, t, theta)
                steps += 1
                self.stats["steps"] += 1
                if self.progress is not None and self.stats["steps"] % PROGRESS_STEPS == 0:
                    self.progress(self.stats["steps"], level)
                level += theta
                self.levels[emptied] = level
                if f + 1 in emptied:
                    self._leaves(abs(rem_low - theta * mass_low))
                if t in emptied:
                    self._leaves(abs(rem_high - theta * mass_high))
                f, t = (f + 1 if f + 1 in emptied else f), (t - 1 if t in emptied else t)
                state.moved(f, t)

    def _floor(self, cuts):
        """A remaining flux below this has crossed zero: ``-NEGATIVE`` times the cut's flux."""
        return -NEGATIVE * self.flux[cuts]

    def _leaves(self, left_over: float) -> None:
        self.stats["certificate"] = max(self.stats["certificate"], float(left_over))

    def _split(self, state: Residuals, queue: ProductQueue, log: deque, steps: int, level: float) -> list:
        """Finds the first crossing in the windows, undoes the steps after it, raises the run to it
        and returns its parts (the longest first, with the run's queue; the others with queues of
        their own, and popped first)."""
        f, t = state.f, state.t
        if self.window is None:
            cuts, after = np.arange(f + 1, t + 1), self._all_remainders(state, level)
        else:
            windows = self._windows(f, t)
            after = np.concatenate([self._remainders(state, queue, lo, hi, level) for lo, hi in windows])
            cuts = np.concatenate([np.arange(lo, hi + 1) for lo, hi in windows])
        floor = self._floor(cuts)
        first = None
        for back, (sf, st, theta, before_level, _, before_state) in enumerate(reversed(log), 1):
            if self.window is None:
                before = self._all_remainders(before_state, before_level)[cuts - sf - 1]
                mass = (before - after) / theta if theta > 0 else np.zeros_like(before)
            else:
                mass = np.concatenate([self.masses.across_cuts(sf, lo, hi, st) for lo, hi in windows])
                before = after + theta * mass
            crossed = (after < floor) & (before >= floor) & (mass > 0)
            if crossed.any():
                at = before_level + before[crossed] / mass[crossed]
                least = float(at.min())
                if first is None or least <= first[1]:
                    first = (len(log) - back, least, [int(c) for c in cuts[crossed][at <= least * (1 + TIED)]])
            after = before
            if np.all(after >= floor):
                break
        else:
            if steps > len(log):
                raise BeyondKeptSteps(f"run [{f}, {t}]: a split goes back beyond its {self.kept} kept steps")
            raise CrossedBeforeRun(f"run [{f}, {t}]: a {'' if self.window is None else 'window '}cut was below zero when the run began")
        step, at, split_cuts = first
        self.stats["most back"] = max(self.stats["most back"], len(log) - step)
        self.stats["deepest"] = max(self.stats["deepest"], min(min(c - f, t + 1 - c) for c in split_cuts))
        for _, _, _, _, emptied, _ in list(log)[step:]:
            self.levels[emptied] = np.nan
            self.stats["undone"] += 1
        f, t, _, level, _, before = log[step]
        raised = before.copy().step(f, t, at - level)
        self.stats["steps"] += 1
        self.stats["splits"] += 1
        self.levels[split_cuts] = at
        bounds = [f] + split_cuts + [t + 1]
        parts = sorted(((a, b - 1) for a, b in zip(bounds, bounds[1:])), key=lambda part: part[0] - part[1])
        queue.at(f, t)
        return [(a, b, at, raised.copy().moved(a, b, self._above(queue, f, b, t)), queue if i == 0 else ProductQueue(self.clocks))
                for i, (a, b) in enumerate(parts)]

    def _above(self, queue: ProductQueue, f: int, b: int, t: int) -> tuple | None:
        """``(E, D)`` of ``(b, t]``, which a part ``[a, b]`` of the run ``[f, t]`` takes into its
        accumulators: off the queue (rebuilt around the run's middle first where it does not reach
        that far), or ``None`` (rank by rank) where they are at most :data:`RANK_BY_RANK`."""
        if t - b <= RANK_BY_RANK:
            return None
        if b + 1 > queue.mid + 1:
            queue.build(f, t)
        return queue.range_of(b + 1, t)

    def _all_remainders(self, state: Residuals, level: float) -> np.ndarray:
        """``rem(j)`` at every cut ``f + 1..t`` of the run ``state`` holds (``window=None``): ``d`` at
        every rank by one compiled pass (:func:`decoding.verifiers.optimal_wor_numba.lowest_law`, the
        lowest-member law of one run, with the accumulators in place of the prefix ``[0, f)`` and no
        factor for the ranks above ``t``, which they hold), summed from the nearer end."""
        from decoding.verifiers.optimal_wor_numba import lowest_law

        f, t = state.f, state.t
        P1, P2, P3 = state.P
        selected = np.empty(t - f + 1)
        lowest_law(self.clocks.q, self.clocks.s, self.clocks.w, np.zeros(self.masses.n), np.ascontiguousarray(P1),
                   np.ascontiguousarray(P2 + P3), f, t, self.clocks.k, selected)
        d = self.x[f:t + 1] - selected - (1 - level) * self.sigma[f:t + 1]
        half = (t - f) // 2
        return np.concatenate([np.cumsum(d)[:half], -np.cumsum(d[::-1])[::-1][1 + half:]])

    def _windows(self, f: int, t: int) -> list[tuple[int, int]]:
        """The cuts searched, as ranges: within :attr:`window` ranks of either end, or all."""
        if t - f <= 2 * self.window:
            middle = (f + t + 1) // 2
            return [(f + 1, middle), (middle + 1, t)] if middle < t else [(f + 1, t)]
        return [(f + 1, f + self.window), (t - self.window + 1, t)]

    def _remainders(self, state: Residuals, queue: ProductQueue, lo: int, hi: int, level: float) -> np.ndarray:
        """``rem(j)`` at the cuts ``lo..hi`` of the run: from the left end where ``lo = f + 1``
        (``sum_{[f, j)} d``), else from the right (``-sum_{[j, t]} d``), ``d`` by Lemma 15."""
        f, t = state.f, state.t
        ranks = np.arange(f, hi) if lo == f + 1 else np.arange(lo, t + 1)
        d = self.x[ranks] - self._selected(state, queue, ranks) - (1 - level) * self.sigma[ranks]
        return np.cumsum(d) if lo == f + 1 else -np.cumsum(d[::-1])[::-1]

    def _selected(self, state: Residuals, queue: ProductQueue, ranks: np.ndarray) -> np.ndarray:
        """What the steps so far selected at ``ranks`` (consecutive): with the products of ``(c, t]``
        off the queue's left stack where it reaches (the queue is rebuilt around the run's middle
        first where the alternative is long), else multiplied out from ``t`` down."""
        f, t, lo, hi = state.f, state.t, int(ranks[0]), int(ranks[-1])
        if hi > queue.mid and t - lo > 8 * self.window:
            queue.build(f, t)
        if hi <= queue.mid:
            return state.selected_at(ranks, *queue.left_parts(lo, hi), right=queue.right_part())
        E, D = np.empty((len(ranks), *self.clocks.s.shape, self.clocks.k)), np.empty((len(ranks), *self.clocks.s.shape, self.clocks.k))
        group = self.clocks.empty()
        for c in range(t, lo - 1, -1):
            if c <= hi:
                E[c - lo], D[c - lo] = group
            group = self.clocks.grown(*group, c)
        return state.selected_at(ranks, E, D)


def whole_run(p: np.ndarray, q: np.ndarray, k: int) -> tuple | None:
    """``(flux, (f0, t0), masses)`` of a row at its whole support: the minimal flux and clock masses
    of :func:`otm.rules.optimal_wor.clock_flux_setup` and the longest run of flux below the cut;
    ``None`` where no run is :data:`SHORTEST_RUN` ranks long."""
    from decoding.verifiers.optimal_wor_numba import CompiledClockSetMasses
    from otm.rules.optimal_wor import clock_flux_setup

    setup = clock_flux_setup(p, q, k, clock_masses=CompiledClockSetMasses)
    if setup is None:
        raise ValueError("a row off the clock path (too few tokens with q > 0)")
    flux = np.asarray(setup.flux, dtype=np.float64)
    run = longest_flux_run(flux, setup.cut, SHORTEST_RUN)
    return None if run is None else (flux, run, setup.masses)


def row_table(p: np.ndarray, q: np.ndarray, k: int, top: int, window: int | None = WINDOW, kept: int = KEPT,
              construction: bool = True) -> dict | None:
    """The nesting on residuals of the longest run of flux below the cut: on the whole row
    (``top = 0``), or on the row cut to ``top`` tokens, beside the construction's levels and its
    certificate where ``construction`` (``None`` where no run is :data:`SHORTEST_RUN` ranks long)."""
    compared = bool(top) and construction
    found = longest_run(p, q, k, SHORTEST_RUN) if compared else whole_run(p, q, k)
    if found is None:
        return None
    exact, (flux, run, masses) = (found[0], found[1:]) if compared else (None, found)
    began = time.perf_counter()

    def progress(steps: int, level: float) -> None:
        print(f"    {steps} steps of the run's {run[1] - run[0]} ranks, level {level:.4f}, {time.perf_counter() - began:.0f} s", file=sys.stderr, flush=True)

    nesting = ResidualNesting(masses, flux, window, kept, progress if not compared else None)
    out = {"n": masses.n, "run": run, "stats": nesting.stats}
    try:
        nesting.run(*run)
    except (CrossedBeforeRun, BeyondKeptSteps) as refused:
        out["refused"] = f"{type(refused).__name__}: {refused}"
    out["seconds"] = time.perf_counter() - began
    sigma = nesting.sigma[run[0]:run[1] + 1].sum()
    out["lowest against sigma"] = abs(masses.lowest_law(*run).sum() - sigma) / sigma  # Lemma 15's total of d, by the direct law
    if exact is not None and "refused" not in out:
        mine, out["same"] = beside_construction(exact, nesting.levels, run)
        out["realised"] = realised_gap(masses, mine, nesting.x)
    return out


def main(argv=None) -> int:
    parser = corpus_parser(__doc__.split("\n\n")[0], positions=4, top=0)
    parser.add_argument("--window", type=int, default=WINDOW, help="cuts searched from either end for a split; 0: every cut")
    parser.add_argument("--kept", type=int, default=KEPT, help="steps a run keeps to go back to")
    parser.add_argument("--no-construction", action="store_true",
                        help="rows cut to --top without the construction's levels beside (minutes a row beyond 3,000 tokens)")
    args = parser.parse_args(argv)
    ks = [int(k) for k in args.ks.split(",")]
    rows = cut_rows(args)
    print(f"{len(rows)} rows{f' cut to {args.top} tokens' if args.top else ', whole'}, k = {args.ks}: the nesting "
          "on residuals, about a millisecond a step (a step per rank of the run)", file=sys.stderr, flush=True)

    def cells(p, q, k):
        row = row_table(p, q, k, args.top, args.window or None, args.kept, not args.no_construction)
        if row is None:
            return None
        (f0, t0), stats = row["run"], row["stats"]
        length = t0 - f0
        outcome = f"refused ({row['refused']})" if "refused" in row else f"{stats['certificate']:.1e}"
        compared = f"{row['same']} of {length}, {row['realised']:.1e}" if "same" in row else "(no construction)"
        return [str(row["n"]), str(length), f"{stats['steps'] / length:.2f}", str(stats["splits"]), f"{stats['most back']}",
                str(stats["deepest"]), outcome, compared, f"{row['lowest against sigma']:.1e}", f"{row['seconds']:.0f}"]

    print_rows(rows, ks, ["ranks", "run (ranks)", "steps per rank", "splits", "most steps back", "deepest split from an end",
                          "certificate (largest left-over at leaving), or refused", "levels the same, realised law",
                          "the run's lowest-member law against sigma (relative)", "seconds"],
               cells, SHORTEST_RUN)
    return 0


if __name__ == "__main__":
    sys.exit(main())
