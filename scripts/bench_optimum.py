"""Benchmark of the exact optimum: closed form at a 150k vocabulary, and every formulation
side by side on growing instances.

    .venv/bin/python scripts/bench_optimum.py [--cap 10] [--out docs/benchmarks.md]

(a) prefix scan at V = 151,936 (Qwen's vocabulary size) for k in {2, 4, 8}, i.i.d. and
without replacement, the i.i.d. scan timed alternately with one ``np.argsort`` of V floats
in the same run; (a') the without-replacement scan on harder pairs.
(b) full LP, simplified LP, canonical LP, max-flow and closed form on the same instances,
time and agreement with the closed form; each call runs in a child process killed after
``--cap`` seconds ("> cap"); once a method passes the cap, larger V at the same k are not
run ("> cap", skipped); laws with more than ``--max-tuples`` tuples are "too large".
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import sys
import time

import numpy as np

from otm.formulations.prefix_scan import prefix_scan
from otm.optimum import solve_optimum

VOCAB = 151_936
LP_METHODS = ("full_lp", "simplified_lp", "canonical_lp", "max_flow")
#: The notes section of the report, kept from the previous file when ``--out`` rewrites it.
NOTES_HEADING = "## Reading these numbers"


def realistic_pair(rng: np.random.Generator, vocab: int):
    """Target and draft from correlated Zipf-like logits plus Gumbel noise (softmax)."""
    base = -1.2 * np.log(rng.permutation(vocab) + 1.0) * 4 + rng.gumbel(size=vocab)
    draft_logits = base + 0.7 * rng.standard_normal(vocab)
    p = np.exp(base - base.max())
    q = np.exp(draft_logits - draft_logits.max())
    return p / p.sum(), q / q.sum()


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def interleaved_times(first, second, repeats: int) -> tuple[float, float, float]:
    """Medians of ``first`` and ``second`` timed alternately (so a load spike on the shared
    machine hits both), and the median of the per-pair ratios ``second / first``."""
    a, b = [], []
    for _ in range(repeats):
        for fn, out in ((first, a), (second, b)):
            start = time.perf_counter()
            fn()
            out.append(time.perf_counter() - start)
    return float(np.median(a)), float(np.median(b)), float(np.median(np.array(b) / np.array(a)))


def part_a(rng) -> list[str]:
    p, q = realistic_pair(rng, VOCAB)
    floats = rng.random(VOCAB)
    lines = [
        f"### (a) Closed form at V = {VOCAB:,}",
        "",
        "argsort and the i.i.d. scan timed alternately, 31 pairs; ratio = median of the per-pair "
        "ratios. Without replacement: median of 3 calls; candidates = prefixes left by the "
        "bounds (the range from the first to the last is evaluated); nodes = trapezoid nodes in "
        "log t; error estimate = `quadrature_error_estimate` (the square of the step-2h difference).",
        "",
        "| k | argsort (ms) | i.i.d. scan (ms) | ratio | alpha* i.i.d. | w/o repl. (ms) | alpha* w/o repl. | candidates | nodes | error estimate |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for k in (2, 4, 8):
        sort_s, iid_s, ratio = interleaved_times(lambda: np.argsort(floats), lambda: prefix_scan(p, q, k), 31)
        wor_s = median_time(lambda: prefix_scan(p, q, k, "without_replacement"), 3)
        wor = prefix_scan(p, q, k, "without_replacement")
        lines.append(
            f"| {k} | {1e3 * sort_s:.1f} | {1e3 * iid_s:.1f} | {ratio:.2f} | {prefix_scan(p, q, k).acceptance:.12f} "
            f"| {1e3 * wor_s:.0f} | {wor.acceptance:.12f} | {wor.details['candidates']:,} | {wor.details.get('nodes', 0)} "
            f"| {wor.details.get('quadrature_error_estimate', 0.0):.0e} |"
        )
        print(lines[-1], flush=True)
    return lines


def stress_pairs(rng: np.random.Generator, vocab: int) -> dict:
    """Harder pairs for the without-replacement scan (more prefixes survive the bounds)."""
    def softmax(z):
        z = np.exp(z - z.max())
        return z / z.sum()

    zipf = -3.0 * np.log(rng.permutation(vocab) + 1.0)
    return {
        "independent Gumbel logits": (softmax(3 * rng.gumbel(size=vocab)), softmax(3 * rng.gumbel(size=vocab))),
        "Zipf + noise sd 2": (softmax(zipf + 2 * rng.normal(size=vocab)), softmax(zipf + 2 * rng.normal(size=vocab))),
        "flat (logit sd 0.1)": (softmax(0.1 * rng.normal(size=vocab)), softmax(0.1 * rng.normal(size=vocab))),
    }


def part_a_stress(rng) -> list[str]:
    lines = [
        f"### (a') Without replacement on harder pairs, V = {VOCAB:,} (one call each)",
        "",
        "| pair | k | w/o repl. (ms) | alpha* w/o repl. | alpha* i.i.d. | candidates | nodes | error estimate |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, (p, q) in stress_pairs(rng, VOCAB).items():
        for k in (2, 8):
            start = time.perf_counter()
            wor = prefix_scan(p, q, k, "without_replacement")
            wor_ms = 1e3 * (time.perf_counter() - start)
            lines.append(
                f"| {name} | {k} | {wor_ms:.0f} | {wor.acceptance:.12f} | {prefix_scan(p, q, k).acceptance:.12f} "
                f"| {wor.details['candidates']:,} | {wor.details.get('nodes', 0)} "
                f"| {wor.details.get('quadrature_error_estimate', 0.0):.0e} |"
            )
            print(lines[-1], flush=True)
    return lines


def _child(conn, p, q, k, draft_scheme, method):
    start = time.perf_counter()
    try:
        value = float(solve_optimum(p, q, k, draft_scheme, method=method).acceptance)
    except Exception as exc:  # reported in the table, not hidden as a timeout
        conn.send((None, type(exc).__name__))
        return
    conn.send((value, time.perf_counter() - start))


def timed_call(p, q, k, draft_scheme, method, cap):
    """``(value, seconds)``, ``(None, error name)``, or ``None`` past the cap (the child is
    terminated)."""
    parent, child = mp.Pipe(duplex=False)
    proc = mp.get_context("fork").Process(target=_child, args=(child, p, q, k, draft_scheme, method))
    proc.start()
    ready = parent.poll(cap)
    result = parent.recv() if ready else None
    if proc.is_alive():
        proc.terminate()
    proc.join()
    return result


def part_b(rng, cap: float, max_tuples: int) -> list[str]:
    methods = LP_METHODS + ("closed_form",)
    lines = [
        f"### (b) Every formulation, i.i.d. drafts (cap {cap:g} s per call, > {max_tuples:,} tuples = too large)",
        "",
        "Time per call in seconds; the last column is the largest gap (signed) of the other "
        "methods to the closed form, whose value is an exact min cut (an upper bound on every "
        "feasible plan).",
        "",
        "| k | V | tuples | " + " | ".join(methods) + " | largest gap |",
        "|---|---|---|" + "---|" * (len(methods) + 1),
    ]
    grid = [(2, v) for v in (4, 16, 32, 64, 128, 256)] + [(3, v) for v in (4, 8, 16, 32)] + [(4, v) for v in (4, 8, 16)]
    over_cap: set[tuple[int, str]] = set()
    for k, vocab in grid:
        p, q = realistic_pair(rng, vocab)
        tuples = vocab**k
        cells, values = [], []
        for method in methods:
            if method != "closed_form" and tuples > max_tuples:
                cells.append("too large")
                continue
            if (k, method) in over_cap:
                cells.append("> cap")
                continue
            result = timed_call(p, q, k, "iid", method, cap)
            if result is None:
                over_cap.add((k, method))
                cells.append("> cap")
                continue
            if result[0] is None:
                cells.append(f"error: {result[1]}")
                continue
            values.append(result[0])
            cells.append(f"{result[1]:.3f}")
        closed = float(solve_optimum(p, q, k, method="closed_form").acceptance)
        diff = max(values, key=lambda v: abs(v - closed)) - closed  # signed: > 0 means above the min cut
        lines.append(f"| {k} | {vocab} | {tuples:,} | " + " | ".join(cells) + f" | {diff:+.1e} |")
        print(lines[-1], flush=True)
    return lines


def machine_info() -> str:
    return (
        f"{platform.platform()}; Python {platform.python_version()}; numpy {np.__version__}; "
        f"{os.cpu_count()} CPU cores visible; processor: {platform.processor() or 'n/a'}"
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cap", type=float, default=10.0, help="seconds per call in part (b)")
    parser.add_argument("--max-tuples", type=int, default=70_000, help="largest law enumerated in part (b)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="write the markdown report here")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    load_before = os.getloadavg()
    lines = part_a(rng) + [""] + part_a_stress(rng) + [""] + part_b(rng, args.cap, args.max_tuples)
    load_after = os.getloadavg()
    command = "python " + " ".join(["scripts/bench_optimum.py"] + (argv if argv is not None else sys.argv[1:]))
    header = [
        "# Benchmarks: the exact optimum",
        "",
        f"Command: `{command}`",
        "",
        f"Machine: {machine_info()}",
        "",
        f"Load average (1, 5, 15 min) before: {', '.join(f'{v:.2f}' for v in load_before)}; "
        f"after: {', '.join(f'{v:.2f}' for v in load_after)}.",
        "",
        f"Total wall time: {time.perf_counter() - started:.0f} s.",
        "",
    ]
    report = "\n".join(header + lines) + "\n"
    if args.out and os.path.exists(args.out):  # keep the hand-written notes below the tables
        with open(args.out) as handle:
            previous = handle.read()
        if NOTES_HEADING in previous:
            report += "\n" + previous[previous.index(NOTES_HEADING):]
    if args.out:
        with open(args.out, "w") as handle:
            handle.write(report)
    print(report)


if __name__ == "__main__":
    main()
