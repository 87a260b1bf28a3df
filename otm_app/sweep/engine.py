"""Running a sweep on Dask: plan, resume, submit with retries, show progress, summarise.

- **Checks first**: every setting, the corpus manifest and the output folder are checked
  (:func:`check_config`, sizes by arithmetic) before a cluster starts or a file is written.
- **Cluster**: ``scheduler=None`` starts a ``dask.distributed.LocalCluster`` of
  ``workers`` single-threaded processes (0: one per core), without a dashboard and with its
  HTTP routes on a free local port (:data:`LOCAL_HTTP_ADDRESS`), and stops it afterwards;
  ``scheduler="tcp://host:8786"`` connects to a running cluster instead, or fails with
  :class:`SchedulerError` when no Dask scheduler answers, or none of its workers joins,
  within ``connect_timeout`` seconds. Paths are made absolute on the client; the workers must reach the corpus and
  the output folder under those paths (e.g. a shared filesystem).
- **Integrity and resumption**: the output folder records the sweep's fingerprint (its
  settings, the task size and the corpus manifest) in ``sweep.json``, and the sha256 of
  every part as it completes in ``parts.sha256`` (``sha256sum``'s format); a rerun with the
  same fingerprint skips every task whose part matches its recorded checksum, and
  recomputes, with one line naming it and why, a part without one or with another; a
  different fingerprint is refused rather than mixed.
- **Retries**: each task is resubmitted up to ``retries`` times when it fails (a lost
  worker, an out-of-memory kill); a task that still fails stops the sweep with its error.
  An input error (an :class:`~otm.errors.OTMError`, e.g. a damaged corpus shard) is
  deterministic: it stops the sweep at once with its one line, without retries.
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
import math
import numbers
import os
import re
import sys
import time
from dataclasses import asdict
from pathlib import Path

from otm.corpus import Corpus, file_sha256
from otm.errors import InputFileError, InvalidArgumentError, OTMError
from otm.positions import check_computations

from ..configs import SweepConfig
from ..outputs import output_folder
from .tasks import Settings, Task, plan_tasks, run_task

STATE_FILE = "sweep.json"
PARTS = "parts"
CHECKSUMS = "parts.sha256"

#: glibc allocator settings of the local cluster's worker processes (module docstring): arrays
#: up to 32 MiB come from the heap, and the heap keeps up to 256 MiB of free memory at its top.
WORKER_MALLOC = {"MALLOC_MMAP_THRESHOLD_": 32 << 20, "MALLOC_TRIM_THRESHOLD_": 256 << 20}

#: Where the local cluster's scheduler serves its HTTP routes (health, metrics; no dashboard):
#: a free port of the loopback interface. Dask's scheduler serves them even without a dashboard,
#: by default on port 8787, and warns "Port 8787 is already in use" on the console whenever a
#: second cluster runs (a sweep beside a report, two sweeps).
LOCAL_HTTP_ADDRESS = "127.0.0.1:0"

#: The largest number of drafts a sweep computes (a position's rrs chain costs ``k`` passes
#: over the vocabulary, and every ``k`` is a row per computation).
MAX_DRAFTS = 1024

#: The most Monte Carlo draws of one position (``mc_paths x max(ks)``: each ``[paths, k]``
#: array of the estimate holds this many float64).
MAX_MC_DRAWS = 1 << 24

#: The most rows one task may hold in memory (``positions_per_task x ks x temperatures x
#: top_ps x computations``; a row costs about a kilobyte until its part is written).
MAX_TASK_ROWS = 1_000_000

_LINE = re.compile(r"([0-9a-f]{64})  (\S+)")


class SchedulerError(OTMError, ConnectionError):
    """No Dask scheduler answered at the given address within the connect timeout."""


def check_config(config: SweepConfig) -> None:
    """:class:`InvalidArgumentError` for any setting out of its range (the command line and
    Python callers alike), before the corpus is read or a worker starts: counts, numbers,
    draft counts (at most :data:`MAX_DRAFTS`), rows per task (at most :data:`MAX_TASK_ROWS`,
    by arithmetic, as are the Monte Carlo draws, :data:`MAX_MC_DRAWS`) and the scheduler's
    address."""
    counts = {"workers": (config.workers, 0), "retries": (config.retries, 0),
              "positions_per_task": (config.positions_per_task, 1), "mc_paths": (config.mc_paths, 2),
              "seed": (config.seed, 0)}
    for name, (value, least) in counts.items():
        if not _is_int(value) or value < least:
            raise InvalidArgumentError(f"--{name.replace('_', '-')} must be an integer >= {least}, got {value!r}")
    if not _is_real(config.time_budget) or not config.time_budget >= 0:
        raise InvalidArgumentError(f"--time-budget must be a number of seconds >= 0, got {config.time_budget!r}")
    if not _is_real(config.connect_timeout) or not 0 < config.connect_timeout < math.inf:
        raise InvalidArgumentError(f"--connect-timeout must be a positive number of seconds, got {config.connect_timeout!r}")
    if not _values(config.ks) or not all(_is_int(k) and 1 <= k <= MAX_DRAFTS for k in config.ks):
        raise InvalidArgumentError(f"--ks must be integers from 1 to MAX_DRAFTS = {MAX_DRAFTS}, got {config.ks!r}")
    if not _values(config.top_ps) or not all(_is_real(v) and 0 < v <= 1 for v in config.top_ps):
        raise InvalidArgumentError(f"--top-ps must be in (0, 1] (1 = none), got {config.top_ps!r}")
    if not _values(config.temperatures) or not all(_is_real(v) and 0 < v < math.inf for v in config.temperatures):
        raise InvalidArgumentError(f"--temperatures must be positive and finite, got {config.temperatures!r}")
    if not _values(config.computations):
        raise InvalidArgumentError(f"--computations must name at least one computation, got {config.computations!r}")
    settings = settings_of(config)
    if config.mc_paths * max(settings.ks) > MAX_MC_DRAWS:
        raise InvalidArgumentError(f"--mc-paths {config.mc_paths} x k = {max(settings.ks)} Monte Carlo draws per position, "
                                   f"above MAX_MC_DRAWS = {MAX_MC_DRAWS:,}; lower --mc-paths")
    rows = config.positions_per_task * len(settings.ks) * len(settings.temperatures) * len(settings.top_ps) * len(settings.computations)
    if rows > MAX_TASK_ROWS:
        raise InvalidArgumentError(f"a task would hold {rows:,} rows (positions per task x ks x temperatures x top-ps x "
                                   f"computations), above MAX_TASK_ROWS = {MAX_TASK_ROWS:,}; lower --positions-per-task")
    if config.scheduler is not None:
        check_address(config.scheduler)


def check_address(address: str) -> None:
    """:class:`InvalidArgumentError` unless ``address`` is a Dask address with a host and a port."""
    from distributed.comm import get_address_host_port

    try:
        _, port = get_address_host_port(address)
        if not 0 < port < 65536:
            raise ValueError(f"port {port} out of range")
    except (ValueError, TypeError) as exc:
        raise InvalidArgumentError(f"--scheduler {address!r} is not a scheduler address ({exc}); give tcp://host:port") from None


def settings_of(config: SweepConfig) -> Settings:
    """The task settings of a checked configuration: aliases resolved, repeated values
    dropped (a repeated ``k`` would count its positions twice in the summary)."""
    once = lambda values: tuple(dict.fromkeys(values))  # noqa: E731
    return Settings(once(int(k) for k in config.ks), once(float(t) for t in config.temperatures),
                    once(float(v) for v in config.top_ps), once(check_computations(config.computations)),
                    config.mc_paths, config.seed, config.time_budget)


def fingerprint(settings: Settings, positions_per_task: int, corpus: Corpus) -> str:
    """A hash of everything that determines the parts: the settings, the task size (it names
    the parts) and the corpus manifest."""
    blob = json.dumps({"settings": asdict(settings), "positions_per_task": positions_per_task, "corpus": corpus.meta},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def recorded_state(out: Path, mark: str) -> bool:
    """Whether ``out`` holds this sweep's ``sweep.json``; :class:`InputFileError` when it holds
    another sweep's, or one that is not readable."""
    state_file = out / STATE_FILE
    if not state_file.exists():
        return False
    try:
        recorded = json.loads(state_file.read_text())["fingerprint"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputFileError(f"{state_file}: not a readable sweep manifest ({type(exc).__name__}: {exc}); "
                             "delete the folder to start over, or choose another --out") from None
    if recorded != mark:
        raise InputFileError(f"{out} holds a different sweep (fingerprint {recorded}, this one {mark}): "
                             "choose another --out, or delete the folder to start over")
    return True


def recorded_checksums(out: Path) -> dict[str, str]:
    """``part file -> sha256`` from ``parts.sha256`` (the last line of a part wins; a line that
    is not ``<sha256>  <file>``, e.g. one cut short, is ignored: its part counts as unrecorded)."""
    try:
        text = (out / CHECKSUMS).read_text(errors="replace")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise InputFileError(f"{out / CHECKSUMS}: not readable ({exc.strerror or exc})") from None
    return {m[2]: m[1] for m in map(_LINE.fullmatch, text.splitlines()) if m}


def part_problem(path: Path, checksums: dict[str, str]) -> str | None:
    """Why the part at ``path`` cannot be trusted (no checksum recorded, another checksum,
    unreadable), or ``None`` when its bytes are those recorded."""
    recorded = checksums.get(path.name)
    if recorded is None:
        return "no checksum recorded (the sweep stopped before recording it, or an older otm wrote it)"
    try:
        found = file_sha256(path)
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    return None if found == recorded else "its bytes do not match the recorded checksum (damaged after it was written)"


def pending_tasks(config: SweepConfig) -> tuple[Corpus, Settings, Path, list[Task], list[Task]]:
    """``(corpus, settings, output folder, all tasks, tasks still to run)``, every input
    checked; a part present but untrusted (:func:`part_problem`) is to run again, with one
    line on stderr naming it and why. Writes nothing but the folders."""
    check_config(config)
    corpus = Corpus(Path(config.corpus).absolute())
    settings = settings_of(config)
    out = output_folder(config.out).absolute()
    output_folder(out / PARTS)
    mark = fingerprint(settings, config.positions_per_task, corpus)
    checksums = recorded_checksums(out) if recorded_state(out, mark) else {}
    tasks = plan_tasks(corpus, config.positions_per_task)
    todo = []
    for task in tasks:
        path = out / PARTS / task.file
        if not path.exists():
            todo.append(task)
        elif (problem := part_problem(path, checksums)) is not None:
            print(f"otm sweep: recomputing {PARTS}/{task.file}: {problem}", file=sys.stderr, flush=True)
            todo.append(task)
    return corpus, settings, out, tasks, todo


def local_workers(workers: int) -> int:
    """Worker processes of the local cluster: ``workers``, or one per core when it is 0."""
    return workers or os.cpu_count() or 1


def run_sweep(config: SweepConfig) -> dict:
    """Run (or resume) the sweep of ``config``; returns ``{"tasks", "skipped", "ran",
    "positions", "stats", "wall_seconds"}`` (``stats``: one dict per task that ran)."""
    started = time.perf_counter()
    corpus, settings, out, tasks, todo = pending_tasks(config)
    say = (lambda line: None) if config.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    say(f"otm sweep: {corpus.n_positions} positions in {len(tasks)} tasks, {len(tasks) - len(todo)} already done; "
        f"{len(settings.computations)} computations x {len(settings.ks)} k x {len(settings.temperatures)} T x "
        f"{len(settings.top_ps)} top-p")
    stats = []
    if todo:
        stats = _run_on_dask(config, corpus, settings, out, todo, say)
    return {"tasks": len(tasks), "skipped": len(tasks) - len(todo), "ran": len(stats), "positions": corpus.n_positions,
            "stats": stats, "wall_seconds": time.perf_counter() - started}


def local_cluster(workers: int):
    """A ``LocalCluster`` of ``workers`` single-threaded processes started with
    :data:`WORKER_MALLOC` in their environment (module docstring)."""
    import dask
    from dask.distributed import LocalCluster

    environ = {**dask.config.get("distributed.nanny.pre-spawn-environ", {}), **WORKER_MALLOC}
    with dask.config.set({"distributed.nanny.pre-spawn-environ": environ}):
        return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                            scheduler_kwargs={"dashboard_address": LOCAL_HTTP_ADDRESS})


def connect(address: str, timeout: float):
    """A ``Client`` of the scheduler at ``address`` with at least one worker, or
    :class:`SchedulerError` when no Dask scheduler completes a handshake within ``timeout``
    seconds (a closed port, a dead host, a server that is not Dask: Dask's own connect waits
    for its handshake without a limit) or no worker joins it in that time (the tasks would
    wait for ever). The probe runs on its own event loop in a thread, so a notebook's running
    loop is no obstacle."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from dask.distributed import Client
    from distributed.comm import connect as open_comm

    async def handshake():
        comm = await open_comm(address, timeout=timeout)
        await comm.close()

    try:
        with ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, asyncio.wait_for(handshake(), timeout)).result()
        client = Client(address, timeout=timeout)
    except (OSError, asyncio.TimeoutError) as exc:
        raise SchedulerError(f"--scheduler {address}: no Dask scheduler answered within {timeout:g} s "
                             f"({type(exc).__name__}{': ' + str(exc) if str(exc) else ''}); check the address and that "
                             "the scheduler runs, or raise --connect-timeout") from None
    try:
        client.wait_for_workers(1, timeout=timeout)
    except (OSError, asyncio.TimeoutError):
        client.close()
        raise SchedulerError(f"--scheduler {address}: the scheduler has no worker (none joined within {timeout:g} s); "
                             "start workers with `dask worker " + address + "`") from None
    return client


def attempt(function, *args) -> dict:
    """``function(*args)`` on a worker, with an input error (an :class:`OTMError`: a retry
    would fail the same way) returned as ``{"error": exc}`` rather than raised, so that Dask
    neither retries it nor logs a traceback on the worker; other errors are raised (retried)."""
    try:
        return function(*args)
    except OTMError as exc:
        return {"error": exc}


def _run_on_dask(config: SweepConfig, corpus: Corpus, settings: Settings, out: Path, todo: list[Task], say) -> list[dict]:
    from dask.distributed import Client, as_completed
    from tqdm.auto import tqdm

    if config.scheduler:
        cluster, client = None, connect(config.scheduler, config.connect_timeout)
        say(f"otm sweep: connected to {config.scheduler}")
    else:
        workers = local_workers(config.workers)
        cluster = local_cluster(workers)
        client = Client(cluster)
        say(f"otm sweep: local Dask cluster of {workers} worker process(es)")
    try:
        _write_state(out, fingerprint(settings, config.positions_per_task, corpus), settings, corpus)
        futures = [client.submit(attempt, run_task, str(corpus.folder), task, settings, str(out / PARTS),
                                 key=f"otm-sweep-{task.file}", retries=config.retries, pure=False) for task in todo]
        stats = []
        with _open_log(out / CHECKSUMS) as log, \
                tqdm(total=len(futures), desc="sweep tasks", unit="task", disable=config.quiet, file=sys.stderr) as bar:
            for future in as_completed(futures):
                result = future.result()  # re-raises a task's unexpected error after its retries
                if "error" in result:
                    client.cancel(futures)
                    raise result["error"]
                log.write(f"{result['sha256']}  {result['task']['file']}\n")
                log.flush()
                stats.append(result)
                bar.update(1)
        return stats
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _open_log(path: Path):
    """``parts.sha256`` opened for appending on a line of its own: a line cut short by a
    stopped sweep must not swallow the next record."""
    log = open(path, "a")
    if log.tell():
        with open(path, "rb") as handle:
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) != b"\n":
                log.write("\n")
    return log


def _write_state(out: Path, mark: str, settings: Settings, corpus: Corpus) -> None:
    """Write ``sweep.json`` (atomically) unless it is there; a new one starts a new checksum
    log, as checksums without a manifest vouch for no known sweep."""
    state_file = out / STATE_FILE
    if state_file.exists():
        return
    (out / CHECKSUMS).unlink(missing_ok=True)
    tmp = out / f".{STATE_FILE}.tmp"
    tmp.write_text(json.dumps({"fingerprint": mark, "settings": asdict(settings), "corpus": str(corpus.folder)}, indent=1))
    os.replace(tmp, state_file)


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _values(values) -> bool:
    """A non-empty tuple or list (a bare string or number is no list of values)."""
    return isinstance(values, (tuple, list)) and len(values) > 0


__all__ = ["CHECKSUMS", "MAX_DRAFTS", "MAX_MC_DRAWS", "MAX_TASK_ROWS", "PARTS", "STATE_FILE", "WORKER_MALLOC", "SchedulerError", "attempt",
           "check_address", "check_config", "connect", "fingerprint", "local_cluster", "local_workers", "part_problem",
           "pending_tasks", "recorded_checksums", "recorded_state", "run_sweep", "settings_of"]
