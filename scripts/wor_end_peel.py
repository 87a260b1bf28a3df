"""The water levels without replacement by a nesting that raises each run only until one of its *end*
cuts empties, and finds the inner cuts that emptied first when they become ends (docs/optimal-verifier.md,
section 8, "A nesting that peels ends and backtracks").

The nesting of Theorem 5 raises a run ``[f, t]`` by ``theta = min_j rem(j) / M(j)`` over all its inner
cuts. This one takes the least over its two end cuts only, peels the ends that empty, and checks the
cut each peel exposes: a remaining flux below zero there means that some inner cut emptied earlier.
Then it finds the first level at which any inner cut of the run crossed zero (from the run's steps,
which it keeps), undoes the steps after it, and splits the run there, as the nesting would have. The
levels are the nesting's (proof in the docs); what it saves is that a step reads two cuts, not the
whole run, and on real rows it needs few splits (the table).

Per corpus row cut to its ``--top`` likeliest tokens and ``k`` in ``--ks``, on the longest run of flux
below the cut: the steps per rank of the run (undone ones included), the splits, the steps undone,
the most steps a split went back and how far from an end its cut lay, the cuts whose level equals the
construction's within :data:`SAME_LEVEL`, and both sets of levels' certificates (the law they realise
against ``x``). In this script a step still updates the remaining flux of the whole run (numpy), so it
is ``O(len^2)``: the steps, not its time, are the measurement. Seconds a row at ``--top 1000``, minutes
at 3,000:

    python scripts/wor_end_peel.py --corpus DIR [--positions 8] [--top 1000] [--ks 3]
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from wor_nesting_spine import RunMasses, corpus_parser, cut_rows, longest_run, print_rows, selection_by_rank  # noqa: E402

#: A remaining flux below ``-NEGATIVE`` times the cut's flux has crossed zero.
NEGATIVE = 1e-12

#: Crossings within this of the first (relative to the level) empty together.
TIED = 1e-12

#: Levels within this of the construction's count as the same.
SAME_LEVEL = 1e-9

#: Runs of flux shorter than this many ranks are left out.
SHORTEST_RUN = 20


class CrossedBeforeRun(RuntimeError):
    """A cut's remaining flux was already below zero when its run began: the split that began the run
    was not the first (only possible through float rounding, :data:`TIED`)."""


class FluxEnds:
    """The remaining flux at a run's two end cuts, ``flux - carried`` (what the levels carried over
    every cut, kept by :func:`end_peel`), and the masses across them (:class:`RunMasses`)."""

    def __init__(self, flux: np.ndarray, masses):
        self.flux, self.masses = flux, masses

    def ends(self, f: int, t: int, level: float, chain: list, log: list, carried: np.ndarray) -> tuple:
        """``((rem, mass) at cut f + 1, (rem, mass) at cut t)`` of the run ``[f, t]`` at ``level``
        (``chain`` and ``log``, the steps so far of the runs around it and of this run, are not needed
        here)."""
        mass = self.masses.row(f, t)
        return (self.flux[f + 1] - carried[f + 1], mass[0]), (self.flux[t] - carried[t], mass[-1])


def end_peel(flux: np.ndarray, run: tuple[int, int], masses, check_exposed: bool = True, ends=None) -> tuple[np.ndarray, dict]:
    """``(levels, stats)``: the levels of the cuts of ``run`` (``[n + 1]``, NaN elsewhere) by peeling
    ends (module docstring), on ``masses`` (:class:`RunMasses`); ``check_exposed=False`` never looks at
    an exposed cut (a test's: then only ends ever empty, which is not the nesting). ``ends`` reads the
    two end cuts (:class:`FluxEnds` by default; ``scripts/wor_end_keys.py`` reads them from one rank's
    residual each) from the run, its level and the *chain*, every step so far of the runs that hold
    it, as ``(f, t, theta, level before, cuts emptied)``: those of the runs around it and the run's own
    log, apart."""
    ends = ends or FluxEnds(flux, masses)
    levels, carried = np.full(len(flux), np.nan), np.zeros(len(flux))
    stats = {"steps": 0, "splits": 0, "undone": 0, "most back": 0, "deepest": 0}
    todo = [(run[0], run[1], 0.0, [])]
    while todo:
        f, t, level, chain = todo.pop()
        log = []  # this run's steps, (f, t, theta, level before, cuts emptied)
        while t > f:
            (rem_low, mass_low), (rem_high, mass_high) = ends.ends(f, t, level, chain, log, carried)
            if check_exposed and log and (rem_low < -NEGATIVE * flux[f + 1] or rem_high < -NEGATIVE * flux[t]):
                split = _first_crossing(flux, carried, masses, log, f, t)
                if split is None:
                    raise CrossedBeforeRun(f"run [{f}, {t}]: an end's remaining flux was below zero when the run began")
                step, at, cuts = split
                stats["most back"] = max(stats["most back"], len(log) - step)
                stats["deepest"] = max(stats["deepest"], min(min(c - f, t + 1 - c) for c in cuts))
                f, t, level = _undo(levels, carried, masses, log, step, stats)
                carried[f + 1:t + 1] += (at - level) * masses.row(f, t)
                stats["steps"] += 1
                stats["splits"] += 1
                levels[cuts] = at
                held = chain + log + [(f, t, at - level, level, cuts)]
                bounds = [f] + cuts + [t + 1]
                todo.extend((a, b - 1, at, held) for a, b in zip(bounds, bounds[1:]))
                break
            low, high = rem_low / mass_low, rem_high / mass_high
            theta = max(0.0, min(low, high))
            carried[f + 1:t + 1] += theta * masses.row(f, t)
            emptied = sorted({c for c, key in ((f + 1, low), (t, high)) if key <= theta})
            log.append((f, t, theta, level, emptied))
            stats["steps"] += 1
            level += theta
            levels[emptied] = level
            f, t = (f + 1 if f + 1 in emptied else f), (t - 1 if t in emptied else t)
    return levels, stats


def _first_crossing(flux, carried, masses, log, f: int, t: int) -> tuple[int, float, list[int]] | None:
    """``(step, level, cuts)``: the first level at which a cut still inner (``f + 1..t``) crossed zero,
    found by walking the run's steps back; ``None`` if none crossed within them."""
    cuts = np.arange(f + 1, t + 1)
    after, floor = flux[cuts] - carried[cuts], -NEGATIVE * flux[cuts]
    first = None
    for step in range(len(log) - 1, -1, -1):
        sf, st, theta, before_level, _ = log[step]
        mass = masses.row(sf, st)[cuts - sf - 1]
        before = after + theta * mass
        crossed = (after < floor) & (before >= floor)
        if crossed.any():
            at = before_level + before[crossed] / mass[crossed]
            least = float(at.min())
            if first is None or least <= first[1]:
                first = (step, least, [int(c) for c in cuts[crossed][at <= least * (1 + TIED)]])
        after = before
    return first


def _undo(levels, carried, masses, log, step: int, stats) -> tuple[int, int, float]:
    """Undoes the run's steps from ``step`` on; returns the run and level before it."""
    for f, t, theta, _, emptied in reversed(log[step:]):
        carried[f + 1:t + 1] -= theta * masses.row(f, t)
        levels[emptied] = np.nan
        stats["undone"] += 1
    f, t, _, level, _ = log[step]
    del log[step:]
    return f, t, level


def row_table(p: np.ndarray, q: np.ndarray, k: int) -> dict | None:
    """The end-peeling nesting on the longest run of flux below the cut, against the construction's
    levels (``None`` where no run is :data:`SHORTEST_RUN` ranks long)."""
    found = longest_run(p, q, k, SHORTEST_RUN)
    if found is None:
        return None
    exact, flux, run, masses = found
    peeled, stats = end_peel(flux, run, RunMasses(masses))
    mine, same = beside_construction(exact, peeled, run)
    x = selection_by_rank(masses, flux)[1]
    return {"run": run, "stats": stats, "same": same, "certificates": [realised_gap(masses, levels, x) for levels in (exact, mine)]}


def beside_construction(exact: np.ndarray, levels: np.ndarray, run: tuple[int, int]) -> tuple[np.ndarray, int]:
    """``(mine, same)``: the construction's levels ``exact`` with the cuts of ``run`` taken from
    ``levels``, capped at 1 (a float level above 1 is rounding, as the construction's), and how many of
    those cuts are within :data:`SAME_LEVEL` of the construction's."""
    cuts = slice(run[0] + 1, run[1] + 1)
    mine = exact.copy()
    mine[cuts] = np.minimum(levels[cuts], 1.0)
    return mine, int(np.sum(np.abs(mine[cuts] - exact[cuts]) <= SAME_LEVEL))


def realised_gap(masses, levels: np.ndarray, x: np.ndarray) -> float:
    """The certificate of ``levels``: the largest gap between the law they realise
    (:func:`otm.rules.wor_clock_masses.realised_selection`) and ``x``."""
    from otm.rules.wor_clock_masses import realised_selection

    return float(np.max(np.abs(realised_selection(masses, levels.tolist()) - x)))


def main(argv=None) -> int:
    args = corpus_parser(__doc__.split("\n\n")[0], positions=8, top=1000).parse_args(argv)
    ks = [int(k) for k in args.ks.split(",")]
    rows = cut_rows(args)
    print(f"{len(rows)} rows cut to {args.top} tokens, k = {args.ks}: the exact levels, then the end-peeling "
          "nesting; seconds a row at 1,000 tokens, minutes at 3,000", file=sys.stderr, flush=True)

    def cells(p, q, k):
        row = row_table(p, q, k)
        if row is None:
            return None
        (f0, t0), stats = row["run"], row["stats"]
        length = t0 - f0
        built, peeled = row["certificates"]
        return [str(length), f"{stats['steps'] / length:.2f}", str(stats["splits"]), str(stats["undone"]),
                str(stats["most back"]), str(stats["deepest"]), f"{row['same']} of {length}", f"{built:.1e} / {peeled:.1e}"]

    print_rows(rows, ks, ["run (ranks)", "steps per rank", "splits", "steps undone", "most steps back",
                          "deepest split from an end", "levels the same", "certificate: construction / end-peeling"],
               cells, SHORTEST_RUN)
    return 0


if __name__ == "__main__":
    sys.exit(main())
