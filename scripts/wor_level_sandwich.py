"""Bounds on every water level from bounds on the others, iterated: how fast they close on the exact
levels without replacement (docs/optimal-verifier.md, section 8, "Bounds from bounds: the sandwich").

Lemma 13 of that section: at a cut ``j`` of a run of flux ``R_0``, ``F(j) = integral_0^L(j)
M_{R_s(j)}(j) ds`` (Lemma 9's identity) with ``W_s(j) ⊆ R_s(j) ⊆ V_s(j)`` for ``s < L(j)``, where
``W_s(j)`` joins ``j`` to its neighbours through the other cuts whose *lower* bound exceeds ``s`` and
``V_s(j)`` through those whose *upper* bound does. So the level at which ``integral M_W`` reaches
``F(j)`` is an upper bound on ``L(j)`` (:func:`settled_level` on the lower bounds), the level at which
``integral M_V`` does a lower bound (on the upper bounds). A *round* takes every cut's upper bound
from the lower bounds, then every lower bound from those upper bounds; round 0 is Lemma 9 (i), from
the upper bound 1 of Theorem 5.

Per corpus row cut to its ``--top`` likeliest tokens and ``k`` in ``--ks``, on the longest run of
flux below the cut: the exact levels (:func:`otm.rules.optimal_wor.wor_parameters`, compiled clock
masses), the cuts whose bounds are still more than :data:`SETTLED` apart after some rounds, the
rounds until none is, and the largest failure of Lemma 13's inequalities at the exact levels, as
flux relative to the cut's (float rounding, or negative; :func:`excess`). The masses of every
interval of the run the rounds ask for are kept, up to ``O(len^3)`` floats, so rows of a few hundred
tokens; a few seconds a row at ``--top 150``:

    python scripts/wor_level_sandwich.py --corpus DIR [--positions 4] [--top 150] [--ks 3]
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from wor_nesting_spine import RunMasses, corpus_parser, cut_rows, longest_run, print_rows  # noqa: E402

#: A cut is settled when its two bounds are within this much of each other.
SETTLED = 1e-9

#: Runs of flux shorter than this many ranks are left out.
SHORTEST_RUN = 20

#: The rounds after which the table counts the cuts not yet settled.
REPORTED_ROUNDS = (1, 5, 10)


def _records(known: np.ndarray, cuts) -> list[tuple[float, int]]:
    """``[(value, cut)]``: the cuts, in the order given, whose ``known`` value is below every one
    before them (where a window going outward from a cut stops as the level passes them)."""
    out, least = [], np.inf
    for i in cuts:
        if known[i] < least:
            least = known[i]
            out.append((float(least), i))
    return out


def _pieces(j: int, known: np.ndarray, run: tuple[int, int]):
    """Yields ``(start, end, f, t)``: the window ``[f, t]`` of cut ``j`` for levels ``start..end``,
    the ranks of ``run`` joined to ``j`` through the other cuts whose ``known`` value exceeds the
    level (the last piece ends at ``inf``)."""
    f0, t0 = run
    events = sorted([(v, 0, i) for v, i in _records(known, range(j - 1, f0, -1))]
                    + [(v, 1, i) for v, i in _records(known, range(j + 1, t0 + 1))])
    f, t, level = f0, t0, 0.0
    for value, side, i in events:
        if value > level:
            yield level, value, f, t
            level = value
        if side == 0:
            f = max(f, i)  # cut i closes: the window starts at rank i
        else:
            t = min(t, i - 1)
    yield level, np.inf, f, t


def settled_level(flux_j: float, j: int, known: np.ndarray, run: tuple[int, int], masses) -> float:
    """The level ``x`` at which ``integral_0^x M_{I_s}(j) ds = F(j)``, ``I_s`` the window of
    :func:`_pieces` (module docstring): an upper bound on ``L(j)`` where ``known`` are lower bounds,
    a lower bound where they are upper bounds; ``inf`` where the integral never reaches the flux."""
    carried = 0.0
    for start, end, f, t in _pieces(j, known, run):
        rate = masses.across(f, j, t)
        if end == np.inf:
            return start + (flux_j - carried) / rate if rate > 0 else np.inf
        if carried + rate * (end - start) >= flux_j:
            return start + (flux_j - carried) / rate
        carried += rate * (end - start)


def carried_to(level: float, j: int, known: np.ndarray, run: tuple[int, int], masses) -> float:
    """``integral_0^level M_{I_s}(j) ds`` over the windows of :func:`_pieces`."""
    carried = 0.0
    for start, end, f, t in _pieces(j, known, run):
        if start >= level:
            break
        carried += masses.across(f, j, t) * (min(end, level) - start)
    return carried


def sandwich(flux: np.ndarray, run: tuple[int, int], masses, rounds: int):
    """Yields ``(round, lower, upper)`` for rounds ``0..rounds`` (module docstring), arrays
    ``[n + 1]`` by cut, meaningful at the cuts ``f0 + 1..t0`` of ``run``; stops early once every cut
    is settled."""
    f0, t0 = run
    cuts = range(f0 + 1, t0 + 1)
    lower, upper = np.full(len(flux), np.nan), np.ones(len(flux))
    for j in cuts:
        lower[j] = settled_level(flux[j], j, upper, run, masses)
    yield 0, lower.copy(), upper.copy()
    for r in range(1, rounds + 1):
        fresh = upper.copy()
        for j in cuts:
            fresh[j] = min(upper[j], settled_level(flux[j], j, lower, run, masses))
        upper = fresh
        for j in cuts:
            lower[j] = max(lower[j], settled_level(flux[j], j, upper, run, masses))
        yield r, lower.copy(), upper.copy()
        if np.all(upper[f0 + 1:t0 + 1] - lower[f0 + 1:t0 + 1] <= SETTLED):
            return


def excess(flux: np.ndarray, levels: np.ndarray, lower: np.ndarray, upper: np.ndarray, run: tuple[int, int],
           masses) -> float:
    """The largest failure of Lemma 13's two inequalities at the exact levels, as flux relative to
    the cut's: ``integral_0^L(j) M_W(j) <= F(j)`` (windows from the lower bounds) and ``F(j) <=
    integral_0^L(j) M_V(j)`` (from the upper bounds); at most float rounding (or negative) while the
    bounds are bounds."""
    worst = -np.inf
    for j in range(run[0] + 1, run[1] + 1):
        over = carried_to(levels[j], j, lower, run, masses) - flux[j]
        under = flux[j] - carried_to(levels[j], j, upper, run, masses)
        worst = max(worst, over / flux[j], under / flux[j])
    return worst


def row_table(p: np.ndarray, q: np.ndarray, k: int, rounds: int | None = None, masses_wrapper=None) -> dict | None:
    """The sandwich on the longest run of flux below the cut (``None`` where none is
    :data:`SHORTEST_RUN` ranks long): ``run``, ``unsettled`` (round: cuts more than :data:`SETTLED`
    apart), ``rounds`` (until every cut is settled; ``None`` if not within ``rounds``, default the
    run's length) and ``excess`` (the largest of :func:`excess` over the rounds); ``masses_wrapper``
    (a test's) wraps the clock masses."""
    found = longest_run(p, q, k, SHORTEST_RUN)
    if found is None:
        return None
    levels, flux, run, masses = found
    masses = RunMasses(masses if masses_wrapper is None else masses_wrapper(masses))
    f0, t0 = run
    unsettled, worst, settled_at = {}, -np.inf, None
    for r, lower, upper in sandwich(flux, run, masses, t0 - f0 if rounds is None else rounds):
        worst = max(worst, excess(flux, levels, lower, upper, run, masses))
        unsettled[r] = int(np.sum(upper[f0 + 1:t0 + 1] - lower[f0 + 1:t0 + 1] > SETTLED))
        if unsettled[r] == 0 and settled_at is None:
            settled_at = r
    return {"run": run, "unsettled": unsettled, "rounds": settled_at, "excess": worst}


def main(argv=None) -> int:
    args = corpus_parser(__doc__.split("\n\n")[0], positions=4, top=150).parse_args(argv)
    ks = [int(k) for k in args.ks.split(",")]
    rows = cut_rows(args)
    print(f"{len(rows)} rows cut to {args.top} tokens, k = {args.ks}: the exact levels and every interval's "
          "masses of the longest run, a few seconds per row at 150 tokens", file=sys.stderr, flush=True)

    def cells(p, q, k):
        row = row_table(p, q, k)
        if row is None:
            return None
        (f0, t0), unsettled = row["run"], row["unsettled"]
        return ([str(t0 - f0)] + [str(unsettled.get(r, 0)) for r in REPORTED_ROUNDS]
                + ["-" if row["rounds"] is None else str(row["rounds"]), f"{row['excess']:.1e}"])

    print_rows(rows, ks, ["run (ranks)", *(f"unsettled after {r}" for r in REPORTED_ROUNDS), "rounds until settled",
                          "largest excess"], cells, SHORTEST_RUN)
    return 0


if __name__ == "__main__":
    sys.exit(main())
