"""Where the water levels' work lies on real rows: the runs of cuts with flux at the full
vocabulary (research/optimal_wor/JOURNAL.md, "Where that work lies on real
rows"; docs/optimal-verifier.md#what-is-open).

    python -m research.optimal_wor.wor_run_structure --corpus DIR [--positions 16] [--temperatures 1.0,0.6]

``DIR`` is an otm corpus (``otm corpus --pair qwen2.5-coder --out DIR``). Per position (evenly
spaced) and temperature, two drafts without replacement at ``V = 151,936``: the cut ``m``,
``alpha*``, the probability that both drafts fall below the cut (``P(S in H)``, the drafted sets
whose selection the levels below the cut decide), and the runs of the minimal flux (maximal
stretches of cuts with ``F > 0``) below and above the cut: how many, the longest (ranks) and
the largest draft mass one holds. The minimal flux is the compiled nesting's
(:func:`decoding.verifiers.optimal.pair_levels.row_levels`); the runs depend only on it, and
for ``k >= 3`` the same shape is expected (the flux is positive wherever ``sigma`` falls short
of ``p`` below the cut). Prints one markdown table (about a minute).
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from decoding.verifiers.optimal.pair import UNIT, ratio_order
from decoding.verifiers.optimal.pair_levels import row_levels
from otm.corpus import Corpus
from otm.rules.water_levels.construction import flux_runs


def row_structure(p: np.ndarray, q: np.ndarray) -> dict:
    order = ratio_order(p, q)
    p_r, q_r = p[order].astype(np.float64), q[order].astype(np.float64)
    p_r, q_r = p_r / p_r.sum(), q_r / q_r.sum()
    n = order.size
    flux, levels, selection = np.empty(n + 1), np.empty(n + 1), np.empty(n)
    m, alpha = row_levels(p_r, q_r, UNIT, flux, levels, selection)[:2]
    w = q_r / (1 - q_r)  # P(first a, then b) = w_a q_b
    below = float((w[:m] * (q_r[:m].sum() - q_r[:m])).sum())
    runs = [(int(f), int(t)) for f, t in flux_runs(flux, 0, n - 1)]
    sides = {"H": [r for r in runs if r[1] < m], "U": [r for r in runs if r[0] >= m]}
    out = {"m": m, "n": n, "alpha": alpha, "below": below}
    for side, chosen in sides.items():
        out[side] = (len(chosen), max((t - f + 1 for f, t in chosen), default=0),
                     max((float(q_r[f:t + 1].sum()) for f, t in chosen), default=0.0))
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--positions", type=int, default=16)
    parser.add_argument("--temperatures", default="1.0,0.6")
    args = parser.parse_args(argv)
    corpus = Corpus(args.corpus)
    print(f"{args.positions} positions per temperature, about a minute", file=sys.stderr, flush=True)
    began = time.perf_counter()
    print("| T | text | position | cut m (of n ranks) | alpha* | P(S in H) | runs below the cut | longest (ranks) | "
          "most draft mass in one | runs above | longest | most draft mass |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for temperature in (float(t) for t in args.temperatures.split(",")):
        for text, position, p, q in corpus.spaced_rows(args.positions, temperature):
            row = row_structure(p, q)
            (hn, hl, hq), (un, ul, uq) = row["H"], row["U"]
            print(f"| {temperature} | {text} | {position} | {row['m']:,} ({row['n']:,}) | {row['alpha']:.4f} "
                  f"| {row['below']:.3f} | {hn} | {hl:,} | {hq:.3g} | {un} | {ul:,} | {uq:.3g} |", flush=True)
    print(f"\n`python -m research.optimal_wor.wor_run_structure --corpus DIR --positions {args.positions} --temperatures "
          f"{args.temperatures}`: {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
