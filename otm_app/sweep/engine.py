"""Running a sweep on Dask: plan, resume, submit with retries, show progress, summarise.

- **Cluster**: ``scheduler=None`` starts a ``dask.distributed.LocalCluster`` of
  ``workers`` single-threaded processes (0: one per core) and stops it afterwards;
  ``scheduler="tcp://host:8786"`` connects to a running cluster instead (its workers must
  reach the corpus and the output folder under the same paths, e.g. a shared filesystem).
- **Resumption**: the output folder records the sweep's fingerprint (its settings and the
  corpus manifest) in ``sweep.json``; a rerun with the same fingerprint skips every task
  whose Parquet file exists (files are renamed into place only when complete); a
  different fingerprint is refused rather than mixed.
- **Retries**: each task is resubmitted up to ``retries`` times when it fails (a lost
  worker, an out-of-memory kill); a task that still fails stops the sweep with its error.
- **Memory allocator**: Dask starts its worker processes with ``MALLOC_TRIM_THRESHOLD_=65536``
  (``distributed.nanny.pre-spawn-environ``), which also switches off glibc's adaptive mmap
  threshold, so every array above 128 KiB (a row at ``V = 151,936`` is 1.2 MB in float64) is
  a fresh mapping whose pages fault in on first touch: the without-replacement optimum of a
  Qwen position took 1.66 s in a worker that way. The local cluster's workers get
  :data:`WORKER_MALLOC` instead (0.62 s; ``scripts/bench_sweep.py``, docs/sweep.md, "Workers
  and the memory allocator"); workers of a cluster you start yourself should be given the
  same variables.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

from otm.corpus import Corpus
from otm.errors import InputFileError, InvalidArgumentError, OTMError
from otm.positions import check_computations

from ..configs import SweepConfig
from .tasks import Settings, Task, plan_tasks, run_task

STATE_FILE = "sweep.json"
PARTS = "parts"

#: glibc allocator settings of the local cluster's worker processes (module docstring): arrays
#: up to 32 MiB come from the heap, and the heap keeps up to 256 MiB of free memory at its top.
WORKER_MALLOC = {"MALLOC_MMAP_THRESHOLD_": 32 << 20, "MALLOC_TRIM_THRESHOLD_": 256 << 20}


def settings_of(config: SweepConfig) -> Settings:
    """The task settings of a sweep configuration (computations checked, aliases resolved)."""
    if not config.ks or min(config.ks) < 1:
        raise OTMError(f"--ks must be integers >= 1, got {config.ks}")
    return Settings(tuple(int(k) for k in config.ks), tuple(config.temperatures), tuple(config.top_ps),
                    check_computations(config.computations), config.mc_paths, config.seed, config.time_budget)


def fingerprint(settings: Settings, corpus: Corpus) -> str:
    """A hash of everything that determines the rows: the settings and the corpus manifest."""
    blob = json.dumps({"settings": asdict(settings), "corpus": corpus.meta}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def check_config(config: SweepConfig) -> None:
    """:class:`InvalidArgumentError` for a count or number out of its range (the command line
    and Python callers alike), before the corpus is read or a worker starts: a negative worker
    count hung the local cluster, ``positions_per_task = 0`` and a negative seed failed deep in
    the planning with an untyped error, and top-p values above 1 ran a whole sweep."""
    counts = {"workers": (config.workers, 0), "retries": (config.retries, 0),
              "positions_per_task": (config.positions_per_task, 1), "mc_paths": (config.mc_paths, 1),
              "seed": (config.seed, 0)}
    for name, (value, least) in counts.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise InvalidArgumentError(f"--{name.replace('_', '-')} must be an integer >= {least}, got {value!r}")
    if not config.time_budget >= 0:
        raise InvalidArgumentError(f"--time-budget must be a number of seconds >= 0, got {config.time_budget!r}")
    if not all(0 < v <= 1 for v in config.top_ps):
        raise InvalidArgumentError(f"--top-ps must be in (0, 1] (1 = none), got {config.top_ps}")
    if not all(0 < v < float("inf") for v in config.temperatures):
        raise InvalidArgumentError(f"--temperatures must be positive and finite, got {config.temperatures}")


def pending_tasks(config: SweepConfig) -> tuple[Corpus, Settings, list[Task], list[Task]]:
    """``(corpus, settings, all tasks, tasks still to run)``; writes or checks ``sweep.json``."""
    check_config(config)
    corpus = Corpus(config.corpus)
    settings = settings_of(config)
    out = Path(config.out)
    (out / PARTS).mkdir(parents=True, exist_ok=True)
    state_file = out / STATE_FILE
    mark = fingerprint(settings, corpus)
    if state_file.exists():
        recorded = json.loads(state_file.read_text()).get("fingerprint")
        if recorded != mark:
            raise InputFileError(f"{out} holds a different sweep (fingerprint {recorded}, this one {mark}): "
                                 "choose another --out, or delete the folder to start over")
    else:
        state_file.write_text(json.dumps({"fingerprint": mark, "settings": asdict(settings), "corpus": str(config.corpus)}, indent=1))
    tasks = plan_tasks(corpus, config.positions_per_task)
    done = {p.name for p in (out / PARTS).glob("*.parquet")}
    return corpus, settings, tasks, [t for t in tasks if t.file not in done]


def local_workers(workers: int) -> int:
    """Worker processes of the local cluster: ``workers``, or one per core when it is 0."""
    return workers or os.cpu_count() or 1


def run_sweep(config: SweepConfig) -> dict:
    """Run (or resume) the sweep of ``config``; returns ``{"tasks", "skipped", "ran",
    "positions", "stats", "wall_seconds"}`` (``stats``: one dict per task that ran)."""
    started = time.perf_counter()
    corpus, settings, tasks, todo = pending_tasks(config)
    parts = str(Path(config.out) / PARTS)
    say = (lambda line: None) if config.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    say(f"otm sweep: {corpus.n_positions} positions in {len(tasks)} tasks, {len(tasks) - len(todo)} already done; "
        f"{len(settings.computations)} computations x {len(settings.ks)} k x {len(settings.temperatures)} T x "
        f"{len(settings.top_ps)} top-p")
    stats = []
    if todo:
        stats = _run_on_dask(config, todo, settings, parts, say)
    return {"tasks": len(tasks), "skipped": len(tasks) - len(todo), "ran": len(stats), "positions": corpus.n_positions,
            "stats": stats, "wall_seconds": time.perf_counter() - started}


def local_cluster(workers: int):
    """A ``LocalCluster`` of ``workers`` single-threaded processes started with
    :data:`WORKER_MALLOC` in their environment (module docstring)."""
    import dask
    from dask.distributed import LocalCluster

    environ = {**dask.config.get("distributed.nanny.pre-spawn-environ", {}), **WORKER_MALLOC}
    with dask.config.set({"distributed.nanny.pre-spawn-environ": environ}):
        return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)


def _run_on_dask(config: SweepConfig, todo: list[Task], settings: Settings, parts: str, say) -> list[dict]:
    from dask.distributed import Client, as_completed
    from tqdm.auto import tqdm

    if config.scheduler:
        cluster, client = None, Client(config.scheduler)
        say(f"otm sweep: connected to {config.scheduler}")
    else:
        workers = local_workers(config.workers)
        cluster = local_cluster(workers)
        client = Client(cluster)
        say(f"otm sweep: local Dask cluster of {workers} worker process(es)")
    try:
        futures = [client.submit(run_task, str(config.corpus), task, settings, parts, key=f"otm-sweep-{task.file}",
                                 retries=config.retries, pure=False) for task in todo]
        stats = []
        bar = tqdm(total=len(futures), desc="sweep tasks", unit="task", disable=config.quiet, file=sys.stderr)
        for future in as_completed(futures):
            stats.append(future.result())  # re-raises a task's error after its retries
            bar.update(1)
        bar.close()
        return stats
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


__all__ = ["PARTS", "STATE_FILE", "WORKER_MALLOC", "fingerprint", "local_cluster", "local_workers", "pending_tasks", "run_sweep", "settings_of"]
