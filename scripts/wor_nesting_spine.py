"""The shape of the water levels' nesting without replacement, and how often a spine nesting would
have to rescan its run: the evidence of docs/optimal-verifier.md, section 8, "The nesting is a
spine".

Per corpus row cut to its ``--top`` likeliest tokens (the exact levels of
:func:`otm.rules.optimal_wor.wor_parameters`, on the compiled clock masses) and ``k`` in ``--ks``,
on the longest run of flux below the cut: the *spine*, the run and then at every level the largest
component the level leaves, and how it shrinks (one rank peeled off an end, or a block of ranks,
whose own nesting is small). Then, per window ``w`` in ``--windows``, the full scans of the spine a
nesting would make if it computed the cuts within ``w`` of the spine's ends at every step and
certified the deeper cuts by the emptying levels of its last scan (``level + remaining flux /
mass``, lower bounds, since they only rise as the spine shrinks), scanning again when the level
reaches the least of them; the scans' cost in lengths of the run; and the largest excess of a bound
over the level its cut reaches, as flux relative to the cut's (float rounding, or negative). One
thread; tens of seconds per row at ``--top 1000``, the exact nesting being quadratic in the run:

    python scripts/wor_nesting_spine.py --corpus DIR [--positions 8] [--top 1000] [--ks 3] [--windows 64,256]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from wor_pair_rules import likeliest  # noqa: E402

#: Runs of flux shorter than this many ranks are left out (their nesting is small anyway).
SHORTEST_RUN = 50


def spine(levels: np.ndarray, f0: int, top: int) -> list[tuple[float, float, int, int]]:
    """``[(level, duration, f, t)]``: the spine of the run ``[f0, top]`` at each distinct level of its
    cuts: the run, and after each level the largest of the components it leaves (the ranks joined by
    cuts of a higher level; the first, lowest, of equal ones), so that what leaves the spine at a
    level is the smaller part."""
    distinct = np.unique(np.concatenate([[0.0], levels[f0 + 1:top + 1]]))
    steps, f, t = [], f0, top
    for level, following in zip(distinct, distinct[1:]):
        cuts = np.flatnonzero(levels[f + 1:t + 1] <= level) + f + 1  # the cuts that split the spine here
        if cuts.size:
            starts, ends = np.concatenate([[f], cuts]), np.concatenate([cuts - 1, [t]])
            largest = int(np.argmax(ends - starts))
            f, t = int(starts[largest]), int(ends[largest])
        if t <= f:
            break
        steps.append((float(level), float(following - level), f, t))
    return steps


def peels(steps: list) -> tuple[int, int, int]:
    """``(one-rank peels, block peels, largest block)`` between consecutive spine steps."""
    ones, blocks, largest = 0, 0, 0
    for (_, _, f, t), (_, _, g, u) in zip(steps, steps[1:]):
        for size in (g - f, t - u):
            if size == 1:
                ones += 1
            elif size > 1:
                blocks, largest = blocks + 1, max(largest, size)
    return ones, blocks, largest


def spine_scans(steps: list, levels: np.ndarray, flux: np.ndarray, masses, window: int) -> tuple[int, float, float]:
    """``(scans, cost, excess)`` of the spine nesting with ``window`` (module docstring): the cost in
    cuts scanned, and the largest excess of a scan's bound over the level its cut reaches, as the
    flux it over-claims relative to the cut's flux, ``(bound - L(j)) M(j) / F(j)`` (at most float
    rounding where the bounds are lower bounds: the remaining flux is a difference of sums of
    thousands of terms)."""
    carried = np.zeros(len(flux))
    next_scan, scans, cost, excess = -1.0, 0, 0, -np.inf
    for level, duration, f, t in steps:
        mass = masses.across_cuts(f, f + 1, t, t)  # the cuts f + 1..t
        if level >= next_scan and t - f > 2 * window:
            scans, cost = scans + 1, cost + (t - f)
            bound = level + (flux[f + 1:t + 1] - carried[f + 1:t + 1]) / mass
            excess = max(excess, float(np.max((bound - levels[f + 1:t + 1]) * mass / flux[f + 1:t + 1])))
            cuts = np.arange(f + 1, t + 1)
            deep = (cuts - f > window) & (t + 1 - cuts > window)
            next_scan = float(bound[deep].min()) if deep.any() else np.inf
        carried[f + 1:t + 1] += duration * mass
    return scans, cost, excess


def longest_run(p: np.ndarray, q: np.ndarray, k: int, shortest: int) -> tuple | None:
    """``(levels, flux, (f0, top), masses)``: the exact levels and minimal flux of
    :func:`otm.rules.optimal_wor.wor_parameters` (on the compiled clock masses) as float arrays, the
    longest run of flux below the cut and the row's clock masses by rank; ``None`` where no run is
    ``shortest`` ranks long."""
    from decoding.verifiers.optimal_wor_numba import CompiledClockSetMasses
    from otm.rules.optimal_wor import wor_parameters

    params = wor_parameters(p, q, k, clock_masses=CompiledClockSetMasses)
    levels = np.asarray([float(v) for v in params.levels])
    flux = np.asarray([float(v) for v in params.flux])
    run = longest_flux_run(flux, params.cut, shortest)
    if run is None:
        return None
    q_ranked = np.asarray(q, dtype=np.float64)[params.order]
    masses = CompiledClockSetMasses(q_ranked / q_ranked.sum(), k)  # the masses wor_parameters built
    return levels, flux, run, masses


def longest_flux_run(flux: np.ndarray, cut: int, shortest: int) -> tuple[int, int] | None:
    """The longest run of flux below the ``cut`` (``flux[n + 1]``), ``None`` where none is
    ``shortest`` ranks long."""
    from otm.rules.optimal_pair_wor import flux_runs

    runs = [(int(f), int(t)) for f, t in flux_runs(flux, 0, cut - 1) if t - f >= shortest]
    return max(runs, key=lambda run: run[1] - run[0]) if runs else None


def selection_by_rank(masses, flux: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(sigma, x)`` by rank: the clock masses' ``sigma`` (rank ``a`` the highest draft) and the
    selection law ``x_a = sigma_a + F(a + 1) - F(a)`` of the minimal ``flux`` ``F``."""
    sigma = np.asarray(masses.sigma, dtype=np.float64)
    return sigma, sigma + flux[1:len(sigma) + 1] - flux[:len(sigma)]


class RunMasses:
    """A row's interval masses ``M_[f, t](j)`` (clock masses' ``across_cuts``), each interval's cuts
    computed once and kept: :meth:`row` at the cuts ``f + 1..t``, :meth:`across` at one."""

    def __init__(self, masses):
        self.masses, self.kept = masses, {}

    def row(self, f: int, t: int) -> np.ndarray:
        if (f, t) not in self.kept:
            self.kept[f, t] = np.asarray(self.masses.across_cuts(f, f + 1, t, t), dtype=np.float64)
        return self.kept[f, t]

    def across(self, f: int, j: int, t: int) -> float:
        return float(self.row(f, t)[j - f - 1])


def row_table(p: np.ndarray, q: np.ndarray, k: int, windows: list[int]) -> dict | None:
    """The spine of the longest run of flux below the cut (``steps``: one per distinct level of its
    cuts), its peels and its scans per window; ``None`` where no run is :data:`SHORTEST_RUN` ranks
    long."""
    found = longest_run(p, q, k, SHORTEST_RUN)
    if found is None:
        return None
    levels, flux, (f0, top), masses = found
    steps = spine(levels, f0, top)
    scans = {w: spine_scans(steps, levels, flux, masses, w) for w in windows}
    return {"run": (f0, top), "steps": len(steps), "peels": peels(steps), "scans": scans}


def corpus_parser(description: str, positions: int, top: int) -> argparse.ArgumentParser:
    """The arguments the scripts on the water levels of cut corpus rows share: ``--corpus`` (an ``otm
    corpus`` directory), ``--positions``, ``--top`` (the tokens a row is cut to), ``--ks`` and
    ``--temperature``, with these defaults."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--corpus", required=True, help="an `otm corpus` directory")
    parser.add_argument("--positions", type=int, default=positions)
    parser.add_argument("--top", type=int, default=top)
    parser.add_argument("--ks", default="3")
    parser.add_argument("--temperature", type=float, default=1.0)
    return parser


def cut_rows(args) -> list[tuple[str, int, np.ndarray, np.ndarray]]:
    """``(text, position, p, q)`` at ``args.positions`` spaced positions of the corpus, each row cut to
    its ``args.top`` likeliest tokens (whole where ``args.top`` is 0)."""
    from otm.corpus import Corpus

    rows = Corpus(args.corpus).spaced_rows(args.positions, args.temperature)
    return [(text, position, *(likeliest(p, q, args.top) if args.top else (p, q))) for text, position, p, q in rows]


def print_rows(rows: list, ks: list[int], header: list[str], cells, shortest: int) -> None:
    """The markdown table of the scripts on cut corpus rows: the columns ``text | position | k`` and
    ``header``, then per row of ``rows`` (:func:`cut_rows`) and ``k`` in ``ks`` the cells
    ``cells(p, q, k)`` (strings), or ``None``, printed as no run of ``shortest`` ranks; each row's
    time goes to standard error."""
    print("| " + " | ".join(["text", "position", "k", *header]) + " |")
    print("|" + "---|" * (3 + len(header)))
    for done, (text, position, p, q) in enumerate(rows, 1):
        for k in ks:
            began = time.perf_counter()
            found = cells(p, q, k)
            line = f"none of {shortest} ranks |" + " |" * (len(header) - 1) if found is None else " | ".join(found) + " |"
            print(f"| {text} | {position} | {k} | {line}", flush=True)
            print(f"  {done}/{len(rows)} rows, k = {k}: {time.perf_counter() - began:.1f} s", file=sys.stderr, flush=True)


def main(argv=None) -> int:
    parser = corpus_parser(__doc__.split("\n\n")[0], positions=8, top=1000)
    parser.add_argument("--windows", default="64,256")
    args = parser.parse_args(argv)
    ks, windows = [int(k) for k in args.ks.split(",")], [int(w) for w in args.windows.split(",")]
    rows = cut_rows(args)
    print(f"{len(rows)} rows cut to {args.top} tokens, k = {args.ks}: the exact nesting of each, tens of seconds "
          "per row at 1,000 tokens", file=sys.stderr, flush=True)

    def cells(p, q, k):
        row = row_table(p, q, k, windows)
        if row is None:
            return None
        (f0, top), (ones, blocks, largest) = row["run"], row["peels"]
        length = top - f0
        excess = max(excess for _, _, excess in row["scans"].values())
        return ([f"[{f0}, {top}]", str(row["steps"]), str(ones), f"{blocks} ({largest})"]
                + [f"{scans} ({cost / length:.1f})" for scans, cost, _ in (row["scans"][w] for w in windows)]
                + [f"{excess:.1e}" if np.isfinite(excess) else "no scan"])

    print_rows(rows, ks, ["run", "levels in the run", "one-rank peels", "block peels (largest)",
                          *(f"scans at w = {w} (cost in runs)" for w in windows), "largest excess"], cells, SHORTEST_RUN)
    return 0


if __name__ == "__main__":
    sys.exit(main())
