"""``otm sweep CORPUS`` and ``otm corpus``: write a corpus of positions from a model pair,
and analyse every position of a corpus on Dask (:mod:`otm_app.sweep`)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from otm.corpus import DTYPES
from otm.errors import InvalidArgumentError, UnknownNameError

from ..configs import CorpusConfig, SweepConfig
from ..outputs import output_folder
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
    """The summary as a table: the mean acceptance over positions per configuration and
    ``k``, a Monte Carlo mean marked ``*`` with its Monte Carlo standard error."""
    ks = sorted({r["k"] for r in summary})
    table = {}
    for temperature, top_p, computation in sorted({(r["temperature"], r["top_p"], r["computation"]) for r in summary}):
        row = {r["k"]: r for r in summary if (r["temperature"], r["top_p"], r["computation"]) == (temperature, top_p, computation)}
        table[f"{temperature:>5g} {top_p:>5g} {computation:<30}"] = [_cell(row.get(k)) for k in ks]
    width = max([9] + [len(cell) + 2 for cells in table.values() for cell in cells])
    lines = [f"{result['positions']} positions, {result['tasks']} tasks ({result['skipped']} resumed), "
             f"{result['wall_seconds']:.1f} s; table: {out / 'parts'}",
             "mean acceptance P(Y in S(X)) over the positions, by number of drafts k"
             + ("; * a Monte Carlo estimate, its standard error in parentheses" if any("*" in c for v in table.values() for c in v) else ""),
             f"{'T':>5} {'top-p':>5} {'computation':<30}" + "".join(f"{'k=' + str(k):>{width}}" for k in ks)]
    lines += [label + "".join(f"{cell:>{width}}" for cell in cells) for label, cells in table.items()]
    return "\n".join(lines)


def _cell(row: dict | None) -> str:
    if row is None or row["mean"] is None:
        return "n/a"
    if row["monte_carlo_error_of_mean"] is None:
        return f"{row['mean']:.4f}"
    return f"{row['mean']:.4f}* ({row['monte_carlo_error_of_mean']:.2g})"


def check_corpus_config(config: CorpusConfig) -> None:
    """:class:`InvalidArgumentError` (or :class:`UnknownNameError`) for a setting out of its
    range, and :class:`InputFileError` for an output folder that cannot be created, before a
    model loads or a text is scored."""
    if isinstance(config.shard_size, bool) or not isinstance(config.shard_size, int) or config.shard_size < 1:
        raise InvalidArgumentError(f"--shard-size must be an integer >= 1, got {config.shard_size!r}")
    if config.logits_dtype not in DTYPES:
        raise UnknownNameError(f"--logits-dtype must be one of {', '.join(DTYPES)}, got {config.logits_dtype!r}")
    from .decode import DTYPES as MODEL_DTYPES

    if config.dtype not in MODEL_DTYPES:
        raise UnknownNameError(f"--dtype must be one of {', '.join(MODEL_DTYPES)}, got {config.dtype!r}")
    output_folder(config.out)


def corpus_command(config: CorpusConfig) -> int:
    """Score the texts with the pair (one forward of each model per text) and write the corpus."""
    from decoding.models.teacher_forcing import write_corpus

    from ..report.sources import resolve_texts, score_report_texts
    from .decode import DTYPES as MODEL_DTYPES
    from .decode import check_device, load_named_pair

    check_corpus_config(config)
    texts = resolve_texts(config.texts)
    progress = None
    if not config.quiet:
        from tqdm.auto import tqdm

        print(f"models in {config.dtype}, logits stored as {config.logits_dtype}", file=sys.stderr)
        progress = lambda items: tqdm(items, desc="scoring texts", file=sys.stderr)  # noqa: E731
    pair = load_named_pair(config.pair, check_device(config.device), MODEL_DTYPES[config.dtype])
    scored = score_report_texts(pair, texts, seed=0, progress=progress)
    corpus = write_corpus(scored.scores, config.out, pair.vocab_size, shard_size=config.shard_size, dtype=config.logits_dtype,
                          source=scored.source, n_real_tokens=pair.n_real_tokens)
    print(f"wrote {corpus.n_positions} positions of {len(corpus.texts)} texts in {len(corpus.shards)} shards to {config.out}")
    return 0


__all__ = ["check_corpus_config", "corpus_command", "format_summary", "sweep_command"]
