"""``otm sweep CORPUS`` and ``otm corpus``: write a corpus of positions from a model pair,
and analyse every position of a corpus on Dask (:mod:`otm_app.sweep`)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from ..configs import CorpusConfig, SweepConfig
from ..sweep.engine import run_sweep
from ..sweep.summary import read_table, summarise, write_figures


def sweep_command(config: SweepConfig) -> int:
    """Run or resume the sweep, then write ``summary.json`` (and figures) beside the table
    and print the summary (a table, or JSON)."""
    result = run_sweep(config)
    summary = summarise(read_table(config.out))
    out = Path(config.out)
    figures = [str(p) for p in write_figures(summary, out)] if config.figures else []
    (out / "summary.json").write_text(json.dumps({"run": {k: v for k, v in result.items() if k != "stats"},
                                                  "summary": summary, "figures": figures}, indent=1))
    if config.json:
        print(json.dumps({"run": {k: v for k, v in result.items() if k != "stats"}, "summary": summary, "figures": figures}, indent=1))
    else:
        print(format_summary(summary, result, out))
    return 0


def format_summary(summary: list[dict], result: dict, out: Path) -> str:
    lines = [f"{result['positions']} positions, {result['tasks']} tasks ({result['skipped']} resumed), "
             f"{result['wall_seconds']:.1f} s; table: {out / 'parts'}",
             f"{'T':>5} {'top-p':>5} {'computation':<30}" + "".join(f"{'k=' + str(k):>9}" for k in sorted({r['k'] for r in summary}))]
    for temperature, top_p, computation in sorted({(r["temperature"], r["top_p"], r["computation"]) for r in summary}):
        row = {r["k"]: r for r in summary if (r["temperature"], r["top_p"], r["computation"]) == (temperature, top_p, computation)}
        cells = []
        for k in sorted({r["k"] for r in summary}):
            r = row.get(k)
            cells.append("      n/a" if r is None or r["mean"] is None else f"{r['mean']:9.4f}")
        lines.append(f"{temperature:>5g} {top_p:>5g} {computation:<30}" + "".join(cells))
    return "\n".join(lines)


def corpus_command(config: CorpusConfig) -> int:
    """Score the texts with the pair (one forward of each model per text) and write the corpus."""
    import torch

    from decoding.models.teacher_forcing import write_corpus

    from ..report.sources import resolve_texts, score_report_texts
    from .decode import check_device, load_named_pair

    texts = resolve_texts(config.texts)
    pair = load_named_pair(config.pair, check_device(config.device), torch.float32)
    progress = None
    if not config.quiet:
        from tqdm.auto import tqdm

        progress = lambda items: tqdm(items, desc="scoring texts", file=sys.stderr)  # noqa: E731
    scored = score_report_texts(pair, texts, seed=0, progress=progress)
    corpus = write_corpus(scored.scores, config.out, pair.vocab_size, shard_size=config.shard_size, dtype=config.dtype,
                          source=scored.source, n_real_tokens=pair.n_real_tokens)
    print(f"wrote {corpus.n_positions} positions of {len(corpus.texts)} texts in {len(corpus.shards)} shards to {config.out}")
    return 0


__all__ = ["corpus_command", "format_summary", "sweep_command"]
