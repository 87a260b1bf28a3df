"""The drafted pairs that Lemma 9's first-run bounds leave undecided, on real rows: how many
there are and what the lazy nesting costs them (research/optimal_wor/JOURNAL.md, "What is open"; docs/optimal-verifier.md#what-is-open).

    python -m research.optimal_wor.pair_wor_undecided_pairs --corpus DIR [--positions 16]
        [--temperatures 1.0,0.6] [--checks 1000] [--seed 0] [--tally]

``DIR`` is an otm corpus (``otm corpus --pair qwen2.5-coder --out DIR``). For every position
(evenly spaced) and temperature: the full compiled nesting of the row
(:func:`~decoding.verifiers.optimal.pair_levels.row_levels`, the reference ``Y``);
``--checks`` pairs drawn without replacement from ``q`` with a uniform ``u`` each; of the
same-side pairs with ``Y > 0``, those the first-run bounds
(:func:`~decoding.verifiers.optimal.pair_levels.yield_decision`) leave undecided go to
:func:`~decoding.verifiers.optimal.pair_levels.pair_yield` with ``decide = u``: its time
(total ms over those pairs, one thread, the second of two calls), its lazy refreshes, and
whether its answer ``u < bound`` agrees with ``u < Y`` of the full nesting. With
``--tally``, also where those refreshes fell and where the chain of runs emptied its cuts
(:data:`~decoding.verifiers.optimal.pair_levels.TALLY_BINS`: at an end of the run or
inside it), the question on which a lazy nesting for three or more drafts turns
(research/optimal_wor/JOURNAL.md, "Its pieces, in more detail"). Prints one markdown table
with the command, the machine and the wall time (a few minutes).
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from tqdm.auto import tqdm

from decoding.verifiers.optimal.pair import UNIT, ratio_order
from decoding.verifiers.optimal.pair_levels import TALLY_BINS, first_run, pair_yield, row_levels, yield_decision
from otm.corpus import Corpus
from research.optimal_wor.pair_wor_verifier_at_scale import same_side_pairs
from scripts.certify_optimal_verifier import corpus_report


def undecided_pairs(p_ranked, q_ranked, levels, cut, checks, rng) -> list:
    """``(low, high, u, Y)`` of the drafted same-side pairs with ``Y > 0`` that the first-run
    bounds leave undecided."""
    flux, sums, pairs = same_side_pairs(p_ranked, q_ranked, levels, cut, checks, rng)
    return [(low, high, u, y) for low, high, u, y in pairs
            if yield_decision(flux, *sums, *first_run(flux, low, high), low, high, u)[0] == 0]


def row_report(p, q, checks, seed, tally=False) -> dict:
    order = ratio_order(p, q)
    p_r, q_r = p[order], q[order] / q[order].sum()
    n = len(order)
    flux, levels, selection = np.empty(n + 1), np.empty(n + 1), np.empty(n)
    m = row_levels(p_r, q_r, UNIT, flux, levels, selection)[0]
    left = undecided_pairs(p_r, q_r, levels, m, checks, np.random.default_rng(seed))
    seconds, refreshes, wrong, below = 0.0, 0, 0, 0
    where = np.zeros(len(TALLY_BINS), np.int64)
    for low, high, u, y in left:
        for _ in range(2):  # the second call is timed
            start = time.perf_counter()
            bound, _, more = pair_yield(p_r, q_r, UNIT, low, high, selection, u)
            elapsed = time.perf_counter() - start
        seconds += elapsed
        refreshes += more
        wrong += (u < bound) != (u < y)
        below += y <= u
        if tally:  # a third, untimed call counts where the chain worked
            pair_yield(p_r, q_r, UNIT, low, high, selection, u, where)
    return {"left": len(left), "below": below, "ms": 1e3 * seconds, "refreshes": refreshes, "wrong": wrong,
            "where": where}


def main(argv=None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--positions", type=int, default=16)
    parser.add_argument("--temperatures", default="1.0,0.6")
    parser.add_argument("--checks", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tally", action="store_true",
                        help="also count where the refreshes fell and where the chain of runs emptied its cuts")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    row_levels(np.array([0.5, 0.5]), np.array([0.5, 0.5]), UNIT, *(np.empty(s) for s in (3, 3, 2)))  # load the compiled code
    corpus = Corpus(args.corpus)
    temperatures = [float(t) for t in args.temperatures.split(",")]
    print(f"{args.positions} positions x {len(temperatures)} temperatures: a few minutes", file=sys.stderr)
    start = time.perf_counter()
    extra = TALLY_BINS if args.tally else ()
    lines = ["| T | text | position | pairs left by the first-run bounds | of which Y <= u | nesting (ms, all of them) | "
             "refreshes | answers against the full nesting |" + "".join(f" {name} |" for name in extra),
             "|---|---|---|---|---|---|---|---|" + "---|" * len(extra)]
    totals = {"left": 0, "below": 0, "ms": 0.0, "refreshes": 0, "wrong": 0, "where": np.zeros(len(TALLY_BINS), np.int64)}
    for temperature in temperatures:
        for text, position, p, q in tqdm(corpus.spaced_rows(args.positions, temperature), desc=f"T = {temperature}",
                                         file=sys.stderr):
            r = row_report(p, q, args.checks, args.seed + position, args.tally)
            for key in totals:
                totals[key] += r[key]
            lines.append(f"| {temperature} | {text} | {position} | {r['left']} | {r['below']} | {r['ms']:.1f} | "
                         f"{r['refreshes']} | {r['wrong']} |" + "".join(f" {v} |" for v in r["where"][:len(extra)]))
    lines.append(f"| all | | | {totals['left']} | {totals['below']} | {totals['ms']:.1f} | {totals['refreshes']} | "
                 f"{totals['wrong']} |" + "".join(f" {v} |" for v in totals["where"][:len(extra)]))
    return corpus_report("-m research.optimal_wor.pair_wor_undecided_pairs", argv, args.corpus, corpus, "undecided pairs",
                         time.perf_counter() - start, lines, args.out)


if __name__ == "__main__":
    main()
