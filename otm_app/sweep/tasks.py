"""One sweep task: some positions of one corpus shard, every configuration, one Parquet file.

Rows (one per position x temperature x top-p x k x computation), columns of :data:`SCHEMA`:
``text``, ``position``, ``shard``, ``temperature``, ``top_p``, ``k``, ``computation``,
``value`` (null where the method gives none), ``std_error`` (the Monte Carlo standard
error of ``value``, 0 for an exact one, null where ``value`` is), ``method``, ``note``,
``seconds`` (the time of that computation at that position, which computes all its ``k``
together, divided equally among its ``k`` rows: sums over rows are times spent). The
randomness of a position (Monte Carlo) is seeded from ``(seed, shard, row)``, so a
retried or resumed task writes the same rows.
"""
from __future__ import annotations

import hashlib
import os
import time
from dataclasses import asdict, dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from otm.corpus import Corpus
from otm.distributions import logits_to_probs
from otm.positions import position_cells

SCHEMA = pa.schema([
    ("text", pa.string()), ("position", pa.int32()), ("shard", pa.int32()), ("temperature", pa.float64()),
    ("top_p", pa.float64()), ("k", pa.int32()), ("computation", pa.string()), ("value", pa.float64()),
    ("std_error", pa.float64()), ("method", pa.string()), ("note", pa.string()), ("seconds", pa.float64()),
])


@dataclass(frozen=True)
class Task:
    """Positions ``start..stop-1`` of shard ``shard``, written to ``file`` (a name under ``parts/``)."""

    shard: int
    start: int
    stop: int
    file: str


@dataclass(frozen=True)
class Settings:
    """What every task computes (the part of a sweep's configuration that a task needs)."""

    ks: tuple
    temperatures: tuple
    top_ps: tuple
    computations: tuple
    mc_paths: int
    seed: int
    time_budget: float


def plan_tasks(corpus: Corpus, positions_per_task: int) -> list[Task]:
    """Every shard cut into tasks of at most ``positions_per_task`` positions."""
    tasks = []
    for index, shard in enumerate(corpus.shards):
        for start in range(0, shard.positions, positions_per_task):
            stop = min(shard.positions, start + positions_per_task)
            tasks.append(Task(index, start, stop, f"part-{index:05d}-{start:06d}.parquet"))
    return tasks


def run_task(corpus_folder: str, task: Task, settings: Settings, parts_folder: str) -> dict:
    """Compute ``task`` and write its Parquet file (:func:`write_part`). Returns the task's
    statistics: positions, rows, seconds per computation, wall seconds, and the ``sha256``
    of the file's bytes (the engine records it; resumption trusts no part without it)."""
    started = time.perf_counter()
    corpus = Corpus(corpus_folder)
    shard = corpus.load(task.shard)
    columns: dict[str, list] = {field.name: [] for field in SCHEMA}
    seconds: dict[str, float] = {}
    for row in range(task.start, task.stop):
        text = corpus.texts[int(shard.text[row])]
        z, w = shard.target_logits[row].astype(np.float64), shard.draft_logits[row].astype(np.float64)
        for temperature in settings.temperatures:
            for top_p in settings.top_ps:
                p = logits_to_probs(z, temperature, top_p=None if top_p >= 1 else top_p, name="target logits")
                q = logits_to_probs(w, temperature, top_p=None if top_p >= 1 else top_p, name="draft logits")
                rng = np.random.default_rng([settings.seed, task.shard, row])
                for computation in settings.computations:
                    tick = time.perf_counter()
                    cells = position_cells(p, q, settings.ks, (computation,), rng, settings.mc_paths, settings.time_budget)
                    spent = time.perf_counter() - tick
                    seconds[computation] = seconds.get(computation, 0.0) + spent
                    for cell in cells:
                        _append(columns, text, int(shard.position[row]), task.shard, temperature, top_p, cell, spent / len(cells))
    table = pa.table(columns, schema=SCHEMA)
    checksum = write_part(table, os.path.join(parts_folder, task.file))
    return {"task": asdict(task), "positions": task.stop - task.start, "rows": table.num_rows, "seconds": seconds,
            "wall_seconds": time.perf_counter() - started, "sha256": checksum}


def write_part(table: pa.Table, path: str) -> str:
    """Write ``table`` as Parquet to ``path`` atomically (a hidden temporary file beside it,
    synced, then renamed: an interrupted task leaves no part, and readers of the folder skip
    hidden files); returns the sha256 of the bytes written."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    data = sink.getvalue().to_pybytes()
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, f".{name}.tmp")
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    return hashlib.sha256(data).hexdigest()


def _append(columns: dict, text: str, position: int, shard: int, temperature: float, top_p: float, cell, seconds: float) -> None:
    value = None if np.isnan(cell.value) else cell.value
    error = None if value is None or np.isnan(cell.std_error) else cell.std_error
    for name, item in (("text", text), ("position", position), ("shard", shard), ("temperature", temperature),
                       ("top_p", top_p), ("k", cell.k), ("computation", cell.computation), ("value", value),
                       ("std_error", error), ("method", cell.method), ("note", cell.note), ("seconds", seconds)):
        columns[name].append(item)


__all__ = ["SCHEMA", "Settings", "Task", "plan_tasks", "run_task", "write_part"]
