"""Worst-case time and memory of the without-replacement optimum on every pair family.

    .venv/bin/python scripts/bench_wor_families.py [--vocab 151936] [--ks 1 2 4 8 16 32]
        [--seeds 1] [--repeats 3] [--families zipf flat ...] [--out table.md]

For every variant of every family of ``scripts/pair_families.py`` (``seeds`` instances
each) and every ``k``: the median of ``repeats`` calls of
``otm.optimal_acceptance(p, q, k, draft_scheme="without_replacement")`` and, in one more call
under ``tracemalloc``, the peak memory allocated above what was held before the call (numpy
reports its buffers to tracemalloc) with the solver's details (rounds of the branch and
bound, prefixes evaluated, time nodes). One ``np.argsort`` of ``vocab`` random floats is
timed before every family (median of 5); ratios are to the median of all those sorts.

Prints one markdown table with the WORST case per family (slowest instance, and the
largest peak memory, rounds, nodes over the family) and one with the worst time per family
and k; ``--out`` also writes them to a file. Instances with ``k`` above the number of
tokens with ``q > 0`` take the exhausted-support closed form (counted, timed like the rest).
"""
from __future__ import annotations

import argparse
import os
import platform
import time
import tracemalloc

import numpy as np

from bench_optimum import median_time
from pair_families import FAMILIES

from otm.optimum import optimal_acceptance, solve_optimum

VOCAB = 151_936
KS = (1, 2, 4, 8, 16, 32)
#: Targets of the without-replacement optimum at V = 151,936 (seconds, bytes).
TIME_TARGET, MEMORY_TARGET = 1.0, 300 * 2**20


def traced_solve(p, q, k: int):
    """``(solution, peak bytes above the memory held before the call)``."""
    tracemalloc.start()
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    solution = solve_optimum(p, q, k, "without_replacement")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return solution, peak - held


def measure(family: str, label: str, seed: int, p, q, k: int, repeats: int) -> dict:
    seconds = median_time(lambda: optimal_acceptance(p, q, k, draft_scheme="without_replacement"), repeats)
    solution, peak = traced_solve(p, q, k)
    details = solution.details
    return {
        "family": family, "variant": label, "seed": seed, "k": k, "seconds": seconds, "peak": peak,
        "value": float(solution.value), "exhausted": bool(details.get("exhausted_support", False)),
        "rounds": details.get("rounds", 0), "evaluated": details.get("evaluated", 0),
        "nodes": details.get("nodes", 0), "estimate": details.get("quadrature_error_estimate", 0.0),
    }


def family_rows(family: str, vocab: int, ks, seeds: int, repeats: int):
    for label, generate in FAMILIES[family]:
        for seed in range(seeds):
            p, q = generate(np.random.default_rng(seed), vocab)
            for k in ks:
                row = measure(family, label, seed, p, q, k, repeats)
                print(f"  {family:16s} {label:34s} seed={seed} k={k:2d} {1e3 * row['seconds']:7.1f} ms "
                      f"{row['peak'] / 2**20:6.1f} MB rounds={row['rounds']} evaluated={row['evaluated']} nodes={row['nodes']}",
                      flush=True)
                yield row


def worst_table(rows, sort_seconds: float) -> list[str]:
    lines = [
        ("| family | instances | exhausted support | worst time (ms) | worst / argsort | slowest instance "
         "| worst peak memory (MB) | most rounds | most prefixes evaluated | most nodes | largest error estimate |"),
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for family in dict.fromkeys(row["family"] for row in rows):
        mine = [row for row in rows if row["family"] == family]
        slowest = max(mine, key=lambda row: row["seconds"])
        lines.append(
            f"| {family} | {len(mine)} | {sum(row['exhausted'] for row in mine)} | {1e3 * slowest['seconds']:.0f} "
            f"| {slowest['seconds'] / sort_seconds:.0f}x | {slowest['variant']}, k = {slowest['k']} "
            f"| {max(row['peak'] for row in mine) / 2**20:.1f} | {max(row['rounds'] for row in mine)} "
            f"| {max(row['evaluated'] for row in mine)} | {max(row['nodes'] for row in mine)} "
            f"| {max(row['estimate'] for row in mine):.0e} |"
        )
    return lines


def per_k_table(rows, ks) -> list[str]:
    lines = ["| family | " + " | ".join(f"k = {k} (ms)" for k in ks) + " |", "|---" * (len(ks) + 1) + "|"]
    for family in dict.fromkeys(row["family"] for row in rows):
        cells = [max(row["seconds"] for row in rows if row["family"] == family and row["k"] == k) for k in ks]
        lines.append(f"| {family} | " + " | ".join(f"{1e3 * v:.0f}" for v in cells) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocab", type=int, default=VOCAB)
    parser.add_argument("--ks", type=int, nargs="+", default=list(KS))
    parser.add_argument("--seeds", type=int, default=1, help="instances per variant")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per instance (median)")
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=list(FAMILIES))
    parser.add_argument("--out", help="also write the tables to this markdown file")
    args = parser.parse_args()

    floats = np.random.default_rng(0).random(args.vocab)
    sorts, loads, rows = [], [], []
    started = time.perf_counter()
    for family in args.families:
        loads.append(os.getloadavg()[0])
        sorts.append(median_time(lambda: np.argsort(floats), 5))
        rows.extend(family_rows(family, args.vocab, args.ks, args.seeds, args.repeats))
    sort_seconds = float(np.median(sorts))
    worst = max(rows, key=lambda row: row["seconds"])
    largest = max(rows, key=lambda row: row["peak"])
    header = (
        f"Without-replacement optimum, V = {args.vocab:,}, k in {args.ks}, {args.seeds} instance(s) per variant, "
        f"median of {args.repeats} calls; {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"1-minute load average {min(loads):.1f}-{max(loads):.1f} (sampled before each family); one np.argsort "
        f"of V floats = {1e3 * sort_seconds:.1f} ms (median over the run); total {time.perf_counter() - started:.0f} s."
    )
    verdict = (
        f"Worst overall: {1e3 * worst['seconds']:.0f} ms ({worst['family']}, {worst['variant']}, k = {worst['k']}); "
        f"largest peak memory {largest['peak'] / 2**20:.1f} MB ({largest['family']}, {largest['variant']}, "
        f"k = {largest['k']}). Targets (<= {TIME_TARGET:.0f} s, <= {MEMORY_TARGET / 2**20:.0f} MB): "
        f"{'met' if worst['seconds'] <= TIME_TARGET and largest['peak'] <= MEMORY_TARGET else 'NOT met'}."
    )
    lines = [
        header,
        "",
        *worst_table(rows, sort_seconds),
        "",
        "Worst time per family and k:",
        "",
        *per_k_table(rows, args.ks),
        "",
        verdict,
    ]
    print("\n".join(lines))
    if args.out:
        with open(args.out, "w") as handle:
            handle.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
