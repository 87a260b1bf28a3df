"""The CPU's set-up of ``optimal_wor`` on whole real rows, its pass up the ranks alone and the
groups of ranks a walk's long runs read, timed on one or more source trees side by side in one
run.

Evidence behind docs/optimal-verifier.md#water-levels-for-drafts-without-replacement (the paragraphs on the pass at Chebyshev
points). Per row (``--positions`` rows of an ``otm corpus`` directory, softmax at temperature 1
over the whole vocabulary) and ``k`` in ``--ks``: the verifier's set-up (ratio order, set
masses with their pass, cut, flux, ``x``: :func:`otm.rules.water_levels.parameters.clock_flux_setup` on
:class:`~decoding.verifiers.optimal.clock_masses.CompiledClockSetMasses`) and
the pass up the ranks alone as the CPU takes it
(:meth:`~decoding.verifiers.optimal.clock_masses.CompiledClockSetMasses._prefix_pass`, at Chebyshev
points on one thread, timed after the set-up while its checkpoints are still held, so it pays for
memory the set-up did not touch: the set-up is what a fresh row meets), and every group of ranks
(:meth:`~decoding.verifiers.optimal.clock_masses.CompiledClockSetMasses._group_polynomials`: what the
first walk that reads a long run computes of them, at most), and ``--walks`` walks of the
verifier decided from the bounds on the row just set up (drafted sets without replacement from
``q`` and a uniform each, seeded by row and ``k``: the same in every tree;
:func:`otm.rules.water_levels.bounds.walk_decision` with the verifier's margin and windows, as
:func:`decoding.verifiers.optimal.wor.verify_row` takes them: what a decode pays after the set-up,
the groups of ranks the walks read included), each the median of ``--rounds`` timings. With
``--tree`` given more than once, each tree (a checkout of this repository, for example ``git
worktree add /tmp/before <commit>``) is imported in a process of its own, the trees taken in
turn every round, so that drift of the machine falls on all of them alike; the last columns are
the first tree's times over each other's. One thread:

    python scripts/bench_wor_pass.py --corpus DIR --positions 4 --ks 3,8 --rounds 5 --tree /tmp/before --tree .
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def _one_round(corpus: str, positions: int, ks: list[int], walks: int) -> dict:
    """``{"text/position/k": [set-up s, pass s, groups s, walks s]}``: one timing of each, in this
    process's tree."""
    import numpy as np
    import torch

    from decoding.verifiers.optimal import wor as optimal_wor
    from decoding.verifiers.optimal.clock_masses import CompiledClockSetMasses
    from otm.corpus import Corpus
    from otm.rules.water_levels.parameters import clock_flux_setup
    from otm.rules.water_levels.bounds import walk_decision

    torch.set_num_threads(1)
    warm = np.exp(np.linspace(0.0, 3.0, 300))
    for k in ks:  # compile or load numba's code first
        clock_flux_setup(warm[::-1] / warm.sum(), warm / warm.sum(), k, clock_masses=CompiledClockSetMasses)
    times = {}
    for text, position, p, q in Corpus(corpus).spaced_rows(positions, 1.0):
        for k in ks:
            began = time.perf_counter()
            setup = clock_flux_setup(p, q, k, clock_masses=CompiledClockSetMasses)
            seconds = time.perf_counter() - began
            if setup is None:
                continue
            rng = np.random.default_rng([position, k])
            drafted = [[int(setup.rank[t]) for t in rng.choice(len(q), k, replace=False, p=q / q.sum())]
                       for _ in range(walks)]
            flux = np.asarray(setup.flux, dtype=np.float64)  # as row_setup hands it to the walks
            began = time.perf_counter()
            for ranks, u in zip(drafted, rng.random(walks)):
                walk_decision(flux, setup.masses, ranks, float(u), margin=optimal_wor.BOUND_MARGIN,
                              windows=optimal_wor.BOUND_WINDOWS)
            walked = time.perf_counter() - began
            began = time.perf_counter()
            setup.masses._prefix_pass()  # (which also drops the groups, if any were made)
            passed = time.perf_counter() - began
            began = time.perf_counter()
            setup.masses._group_polynomials()
            times[f"{text}/{position}/{k}"] = [seconds, passed, time.perf_counter() - began, walked]
    return times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True, help="an `otm corpus` directory")
    parser.add_argument("--positions", type=int, default=4)
    parser.add_argument("--ks", default="3,8")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--walks", type=int, default=10, help="walks decided per row and k after its set-up")
    parser.add_argument("--tree", action="append", default=None,
                        help="a source tree to import (repeat to compare; default: this script's own)")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a child: one round, as JSON
    args = parser.parse_args(argv)
    ks = [int(k) for k in args.ks.split(",")]
    if args.one:
        print(json.dumps(_one_round(args.corpus, args.positions, ks, args.walks)))
        return 0
    trees = [os.path.abspath(tree) for tree in (args.tree or [os.path.join(os.path.dirname(__file__), os.pardir)])]
    for tree in trees:
        if not os.path.isdir(os.path.join(tree, "decoding")):
            parser.error(f"--tree {tree}: not a checkout of this repository (no decoding/ in it)")
    seconds = 5 + (0.5 + 0.1 * args.walks) * args.positions * len(ks)
    print(f"{args.rounds} rounds x {len(trees)} tree(s), a process each (about {seconds:.0f} s each)", file=sys.stderr,
          flush=True)
    runs: list[list[dict]] = [[] for _ in trees]
    for round_ in range(args.rounds):
        for at, tree in enumerate(trees):
            child = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", "--corpus", args.corpus,
                                    "--positions", str(args.positions), "--ks", args.ks, "--walks", str(args.walks)],
                                   capture_output=True, text=True, cwd=tree,
                                   env={**os.environ, "PYTHONPATH": tree, "OMP_NUM_THREADS": "1"})
            if child.returncode != 0:
                last = (child.stderr.strip().splitlines() or ["no message"])[-1]
                print(f"error: the round in {tree} failed: {last}", file=sys.stderr)
                return 2
            runs[at].append(json.loads(child.stdout.strip().splitlines()[-1]))
        print(f"  {round_ + 1}/{args.rounds} rounds", file=sys.stderr, flush=True)
    parts = ("set-up", "pass", "groups", f"{args.walks} walks")
    header = ["text", "position", "k"] + [f"{part} (ms), tree {i + 1}" for part in parts for i in range(len(trees))] \
        + [f"tree 1 / tree {i + 1}: " + ", ".join(parts) for i in range(1, len(trees))]
    print("trees: " + ", ".join(f"{i + 1} = {tree}" for i, tree in enumerate(trees)))
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for key in runs[0][0]:
        medians = [[1000 * statistics.median(run[key][part] for run in tree_runs) for part in range(len(parts))]
                   for tree_runs in runs]
        cells = key.split("/") + [f"{m[part]:.1f}" for part in range(len(parts)) for m in medians] \
            + [", ".join(f"{medians[0][part] / m[part]:.2f}x" for part in range(len(parts))) for m in medians[1:]]
        print("| " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
