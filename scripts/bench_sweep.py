"""How fast ``otm sweep`` analyses positions: per computation, per core, and with 1 and 2
workers side by side; then a plan for 10^7 positions on N workers from the measured costs.

    python scripts/bench_sweep.py [--corpus DIR [--every N]] [--positions 32] [--vocab 151936]
                                  [--ks 1-8] [--out docs/sweep-benchmark.md]

Without ``--corpus`` a synthetic corpus of LLM-like logit pairs is written first (Zipf-like
target logits over a random permutation with Gumbel noise, draft = target + Gaussian noise,
the families of scripts/bench_verifier_cost.py) at the Qwen vocabulary. With ``--corpus``
(e.g. ``otm corpus --pair qwen2.5-coder --out DIR``: real next-token laws), ``--every N``
keeps every N-th position of each text (copied into a temporary corpus). Each computation is
timed inside the tasks (``seconds`` column of the table); the 1- and 2-worker runs sweep
the same corpus into fresh folders, one after the other, and report wall time.
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from otm.corpus import Corpus, CorpusWriter
from otm_app.configs import DEFAULT_SWEEP_COMPUTATIONS, SweepConfig
from otm_app.sweep.engine import run_sweep
from otm_app.sweep.summary import read_table


def synthetic_corpus(folder: Path, positions: int, vocab: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    with CorpusWriter(folder, vocab, shard_size=16, dtype="float16", source="synthetic Zipf-like pairs") as writer:
        rank = np.argsort(rng.random((positions, vocab)), axis=1).astype(np.float64) + 1
        gumbel = -np.log(-np.log(rng.random((positions, vocab))))
        target = -1.2 * np.log(rank) + gumbel
        draft = target + 0.7 * rng.standard_normal((positions, vocab))
        writer.add("synthetic", target, draft)


def subsample_corpus(source: Path, every: int, folder: Path) -> None:
    """Every ``every``-th position of each text of the corpus ``source``, as a new corpus."""
    corpus = Corpus(source)
    rows: dict[int, tuple[list, list]] = {}
    for index in range(len(corpus.shards)):
        shard = corpus.load(index)
        keep = shard.position % every == 0
        for text, target, draft in zip(shard.text[keep], shard.target_logits[keep], shard.draft_logits[keep]):
            rows.setdefault(int(text), ([], []))[0].append(target)
            rows[int(text)][1].append(draft)
    with CorpusWriter(folder, corpus.vocab_size, shard_size=16, dtype=corpus.meta.get("dtype", "float16"),
                      source=f"every {every}th position of {corpus.meta.get('source', source)}") as writer:
        for text, (target, draft) in sorted(rows.items()):
            writer.add(corpus.texts[text], np.stack(target), np.stack(draft))


def per_computation_costs(out: Path) -> dict:
    """Seconds per position of each computation (its ks together), from the table."""
    table = read_table(out)
    costs = {}
    for computation in sorted(set(table["computation"].to_pylist())):
        rows = table.filter(np.array([c == computation for c in table["computation"].to_pylist()]))
        seconds = np.array(rows["seconds"].to_pylist())
        n = len(set(zip(rows["text"].to_pylist(), rows["position"].to_pylist(), rows["temperature"].to_pylist())))
        costs[computation] = float(seconds.sum()) / max(n, 1)
    return costs


def main(argv=None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", help="an existing corpus folder (default: a synthetic one)")
    parser.add_argument("--every", type=int, default=1, help="with --corpus: every N-th position of each text")
    parser.add_argument("--positions", type=int, default=32, help="positions of the synthetic corpus")
    parser.add_argument("--vocab", type=int, default=151_936, help="vocabulary of the synthetic corpus")
    parser.add_argument("--ks", default="1-8", help="draft counts")
    parser.add_argument("--out", help="write the markdown here")
    args = parser.parse_args(argv)
    low, high = (int(v) for v in args.ks.split("-"))
    work = Path(tempfile.mkdtemp(prefix="otm-bench-sweep-"))
    try:
        corpus = Path(args.corpus) if args.corpus and args.every == 1 else work / "corpus"
        if args.corpus and args.every > 1:
            subsample_corpus(Path(args.corpus), args.every, corpus)
        elif not args.corpus:
            synthetic_corpus(corpus, args.positions, args.vocab)
        walls, stats = {}, {}
        for workers in (1, 2):
            config = SweepConfig(corpus=str(corpus), out=str(work / f"out{workers}"), ks=tuple(range(low, high + 1)),
                                 computations=DEFAULT_SWEEP_COMPUTATIONS, workers=workers, positions_per_task=4, quiet=True)
            start = time.perf_counter()
            result = run_sweep(config)
            walls[workers] = time.perf_counter() - start
            stats[workers] = result
        costs = per_computation_costs(work / "out1")
        positions = stats[1]["positions"]
        task_compute = [sum(s["seconds"].values()) for s in stats[1]["stats"]]
        task_wall = [s["wall_seconds"] for s in stats[1]["stats"]]
        overhead = statistics.median(w - c for w, c in zip(task_wall, task_compute))
        per_position = sum(costs.values())
        lines = [
            "# otm sweep: measured throughput", "",
            "Written by `scripts/bench_sweep.py` (docs/sweep.md explains the engine and the computations).", "",
            f"Measured with `python scripts/bench_sweep.py "
            f"{f'--corpus {args.corpus} --every {args.every}' if args.corpus else f'--positions {args.positions} --vocab {args.vocab}'} "
            f"--ks {args.ks}` on {platform.machine()}, {os.cpu_count()} cores "
            f"({positions} positions, V = {Corpus(corpus).vocab_size:,}, k = {args.ks}, T = 1; "
            f"corpus: {Corpus(corpus).meta.get('source') or 'n/a'}).",
            "",
            "| computation (all k) | seconds per position, one core | positions per second per core |",
            "|---|---|---|",
        ]
        for name, cost in sorted(costs.items(), key=lambda item: -item[1]):
            lines.append(f"| {name} | {cost:.3f} | {1 / cost if cost else float('inf'):.1f} |")
        lines += [f"| **all of them** | {per_position:.3f} | {1 / per_position:.2f} |", "",
                  "| workers | wall seconds (cluster start included) | positions per second | speed-up |", "|---|---|---|---|"]
        for workers in (1, 2):
            lines.append(f"| {workers} | {walls[workers]:.1f} | {positions / walls[workers]:.2f} | {walls[1] / walls[workers]:.2f}x |")
        lines += ["", f"Per-task overhead (wall minus compute, median over tasks): {overhead:.3f} s.", "",
                  "Plan for 10^7 positions (same computations, 4 positions per task), from these costs: "
                  "`positions x seconds per position / N + tasks x overhead / N`.", "",
                  "| workers N | hours | days |", "|---|---|---|"]
        for n in (1, 16, 64, 256, 1024):
            seconds = (1e7 * per_position + (1e7 / 4) * overhead) / n
            lines.append(f"| {n} | {seconds / 3600:.1f} | {seconds / 86400:.2f} |")
        text = "\n".join(lines)
        print(text)
        if args.out:
            Path(args.out).write_text(text + "\n")
        return text
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
