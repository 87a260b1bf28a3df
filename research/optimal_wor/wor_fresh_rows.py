"""What memory the process has not touched before costs ``optimal_wor``'s set-ups: the evidence
behind :data:`decoding.verifiers.optimal.wor.SETUP_FLOATS_KEPT` (research/optimal_wor/JOURNAL.md,
"The set-up's pass at Chebyshev points" and "Checkpoints at every 256th rank").

Per kept budget in ``--kept-floats`` (default: the module's and twice it), in a process of its
own (the effect depends on how much memory the process has held): ``--rows`` fresh random whole
rows (the benchmark's softmax rows, ``V = 151,936``) set up one after another at ``--k`` by
:func:`decoding.verifiers.optimal.wor.row_setup`, with that budget of set-ups kept, as a decode
keeps them; the seconds of each set-up. Then ``--same-row``: the pass at Chebyshev points over one
row ten times, each result kept, and ten times, each dropped before the next (71 MB of checkpoints
per result at ``k = 8`` with a checkpoint at every 64th rank, 18 MB at every 256th). With
``--checkpoints``: per spacing of the prefix checkpoints
(:attr:`~decoding.verifiers.optimal.clock_masses.CompiledClockSetMasses.checkpoint`; the pass at
Chebyshev points multiplies out blocks of as many ranks), in a process of its own, the spacings
taken in turn ``--rounds`` times: ``--rows`` fresh rows through the whole verifier
(:func:`decoding.verifiers.optimal.wor.verify`, drafts drawn without replacement, the set-up and
the walk), the median ms per answered row, the rows refused, and the median minor page faults per
row (memory the process touched for the first time; numpy asks for huge pages for large arrays,
so the count understates what that memory costs). One thread:

    python -m research.optimal_wor.wor_fresh_rows [--rows 9] [--k 3] [--kept-floats 20000000,40000000] [--same-row]
        [--checkpoints 64,256 --ks 3,8 --rounds 2]
"""
from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

#: The repository root, where ``python -m research.optimal_wor.wor_fresh_rows`` runs.
ROOT = Path(__file__).resolve().parents[2]


def _rows(count: int, k: int, kept: int) -> list[float]:
    """Seconds of each fresh row's set-up with ``kept`` floats of set-ups kept."""
    from scripts.bench_optimal_verifier import QWEN_VOCAB, softmax_rows
    from decoding.verifiers.optimal import wor as optimal_wor
    from decoding.verifiers.optimal.cache import SizedCache

    optimal_wor._SETUPS = SizedCache(kept)
    p, q = (rows.double() / rows.double().sum(1, keepdim=True) for rows in softmax_rows(count + 1, QWEN_VOCAB, torch.float32))
    optimal_wor.row_setup(p[count].numpy(), q[count].numpy(), k)  # load the compiled code first
    seconds = []
    for r in range(count):
        began = time.perf_counter()
        optimal_wor.row_setup(p[r].numpy(), q[r].numpy(), k)
        seconds.append(time.perf_counter() - began)
    return seconds


def _verified(count: int, k: int, checkpoint: int) -> str:
    """``median ms, refused, median page faults`` of ``count`` fresh rows through the verifier,
    the checkpoints at every ``checkpoint``-th rank."""
    from scripts.bench_optimal_verifier import QWEN_VOCAB, softmax_rows, warm_optimal_wor
    from decoding.verifiers import rrs_wor
    from decoding.verifiers.optimal import wor as optimal_wor
    from decoding.verifiers.optimal.clock_masses import CompiledClockSetMasses
    from otm.errors import NotApplicableError

    CompiledClockSetMasses.checkpoint = checkpoint
    warm_optimal_wor(QWEN_VOCAB, torch.float32, torch.device("cpu"))
    p, q = softmax_rows(count, QWEN_VOCAB, torch.float32)
    drafts = rrs_wor.sample_drafts(q, k, torch.Generator().manual_seed(k))
    times, faults, refused = [], [], 0
    for r in range(count):
        began, touched = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        try:
            optimal_wor.verify(p[r:r + 1], q[r:r + 1, None].expand(1, k, -1), drafts[r:r + 1],
                               torch.Generator().manual_seed(r))
        except NotApplicableError:
            refused += 1
            continue
        times.append(1e3 * (time.perf_counter() - began))
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - touched)
    if not times:
        return f"- {refused} -"
    return f"{statistics.median(times):.1f} {refused} {statistics.median(faults):.0f}"


def _same_row(k: int) -> dict[str, list[float]]:
    """Seconds of the pass at points over one row ten times, results kept and dropped."""
    from scripts.bench_optimal_verifier import QWEN_VOCAB, softmax_rows
    from decoding.verifiers.optimal.setup.chebyshev import prefix_pass_chebyshev
    from decoding.verifiers.optimal.clock_masses import CompiledClockSetMasses
    from otm.formulations.prefix_scan import ratio_order

    p, q = (rows[0].double().numpy() for rows in softmax_rows(1, QWEN_VOCAB, torch.float32))
    masses = CompiledClockSetMasses(q[ratio_order(p / p.sum(), q / q.sum())] / q.sum(), k)  # (its pass loads the code)
    arguments = (masses.q, masses.s, masses.w, masses._above, k, masses.checkpoint)
    prefix_pass_chebyshev(*arguments)  # a first result, dropped: the first timed pass reuses its memory
    times: dict[str, list[float]] = {}
    for mode in ("dropped", "kept"):
        held, times[mode] = [], []
        for _ in range(10):
            began = time.perf_counter()
            result = prefix_pass_chebyshev(*arguments)
            times[mode].append(time.perf_counter() - began)
            if mode == "kept":
                held.append(result)
            del result
    return times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=9)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--kept-floats", default=None, help="comma-separated budgets (default: the module's and twice it)")
    parser.add_argument("--same-row", action="store_true")
    parser.add_argument("--checkpoints", default=None, help="comma-separated spacings of the prefix checkpoints")
    parser.add_argument("--ks", default="3,8", help="with --checkpoints: the k to verify at")
    parser.add_argument("--rounds", type=int, default=2, help="with --checkpoints: times each spacing is taken")
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)  # the child process's budget
    parser.add_argument("--one-checkpoint", type=int, default=None, help=argparse.SUPPRESS)  # the child's spacing
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.one_checkpoint is not None:
        print(_verified(args.rows, args.k, args.one_checkpoint))
        return 0
    if args.checkpoints:
        return _checkpoints(args)
    if args.one is not None:
        print(" ".join(f"{x:.3f}" for x in _rows(args.rows, args.k, args.one)))
        return 0
    if args.same_row:
        for mode, seconds in _same_row(args.k).items():
            print(f"k = {args.k}, the same row ten times, results {mode}: " + " ".join(f"{x:.3f}" for x in seconds))
        return 0
    from decoding.verifiers.optimal.wor import SETUP_FLOATS_KEPT

    budgets = [int(x) for x in args.kept_floats.split(",")] if args.kept_floats else [SETUP_FLOATS_KEPT, 2 * SETUP_FLOATS_KEPT]
    print(f"{args.rows} fresh rows at k = {args.k} per budget, a process each (about {args.rows * 0.3:.0f} s each)",
          file=sys.stderr, flush=True)
    for kept in budgets:
        out = _in_a_process("--rows", str(args.rows), "--k", str(args.k), "--one", str(kept)).strip()
        print(f"k = {args.k}, {kept:,} floats of set-ups kept: seconds per fresh row {out}", flush=True)
    return 0


def _in_a_process(*argv: str) -> str:
    """What this module prints, run with ``argv`` in a fresh interpreter from the repository root."""
    return subprocess.run([sys.executable, "-m", __spec__.name, *argv], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout


def _checkpoints(args) -> int:
    """The table of ``--checkpoints``: a process per (round, k, spacing)."""
    spacings, ks = [int(x) for x in args.checkpoints.split(",")], [int(x) for x in args.ks.split(",")]
    print(f"{args.rows} fresh rows per spacing, k and round, a process each ({len(spacings) * len(ks) * args.rounds} "
          f"processes, about {args.rows * 0.2 + 3:.0f} s each)", file=sys.stderr, flush=True)
    print("| round | k | checkpoint every | ms per fresh row (median) | rows refused | page faults per row (median) |")
    print("|---|---|---|---|---|---|")
    for round_ in range(1, args.rounds + 1):
        for k in ks:
            for spacing in spacings:
                ms, refused, faults = _in_a_process("--rows", str(args.rows), "--k", str(k), "--one-checkpoint", str(spacing)).split()
                print(f"| {round_} | {k} | {spacing} | {ms} | {refused} of {args.rows} | {faults} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
