"""Cost of one HiGHS solve of a pair-stage LP of truncated IS, with a new ``Highs`` object
per solve against the backend's reused one (:func:`solvers.highs._solver`), side by side
in one run.

    .venv/bin/python scripts/bench_highs_reuse.py [--instances 30] [--alphabet 40] [--free 5] [--repeats 7]

The LPs are those :func:`otm.rules.importance_sampling_truncated.pair_stage` builds on
``--instances`` random Dirichlet(0.3) pairs over ``--alphabet`` tokens with ``--free`` free
tokens (Khisti et al. 2025's defaults: 40 and 5). Each variant solves all of them
``--repeats`` times through :func:`solvers.highs.solve` (building the HiGHS model, solving
and checking the certificate); prints the median time per solve and checks that both
variants return the same solutions bit for bit.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import solvers.highs as highs
from otm.rules import importance_sampling_truncated


def pair_stage_lps(instances: int, alphabet: int, free: int, seed: int = 0) -> list:
    captured, solve_lp = [], importance_sampling_truncated.solve_lp

    def capture(lp, backend):
        captured.append(lp)
        return solve_lp(lp, backend)

    importance_sampling_truncated.solve_lp = capture
    try:
        rng = np.random.default_rng(seed)
        for _ in range(instances):
            p, q = rng.dirichlet(np.full(alphabet, 0.3)), rng.dirichlet(np.full(alphabet, 0.3))
            importance_sampling_truncated.pair_stage(p, q, q, free)
    finally:
        importance_sampling_truncated.solve_lp = solve_lp
    return captured


def fresh_solver():
    return highs.new_highs()


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=30)
    parser.add_argument("--alphabet", type=int, default=40)
    parser.add_argument("--free", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    lps = pair_stage_lps(args.instances, args.alphabet, args.free)
    reused_solver = highs._solver
    times, solutions = {"new object per solve": [], "reused object": []}, {}
    for _ in range(args.repeats):
        for name, solver in (("new object per solve", fresh_solver), ("reused object", reused_solver)):
            highs._solver = solver
            start = time.perf_counter()
            solutions[name] = [highs.solve(lp).x for lp in lps]
            times[name].append((time.perf_counter() - start) / len(lps))
    highs._solver = reused_solver
    same = all(np.array_equal(a, b) for a, b in zip(*solutions.values()))
    result = {name: 1e3 * statistics.median(t) for name, t in times.items()}
    print(f"{len(lps)} pair-stage LPs ({args.alphabet} tokens, {args.free} free), median of {args.repeats}:")
    for name, ms in result.items():
        print(f"  {name:22s} {ms:.3f} ms per solve")
    print(f"  ratio reused / new: {result['reused object'] / result['new object per solve']:.2f}; "
          f"same solutions bit for bit: {same}")
    return result


if __name__ == "__main__":
    main()
