"""How long each slow step of ``otm report`` should take: the line printed before it, and the
line printed after it with the actual time beside the estimate.

The cost model. Each step's cost is written as the wall time it takes on an otherwise idle
machine (the development machine: 2 CPU cores; docs/report.md, "Budget and measured wall
time"), as a sum of what it does:

- step 1, the theorem suite: a fixed :data:`THEOREM_SUITE_SECONDS` (one process);
- loading the model pair and scoring the texts: :data:`LOAD_SECONDS_PER_PARAMETER` per model
  parameter, plus :data:`SCORE_SECONDS_PER_PARAMETER_TOKEN` per parameter and scored token;
- step 2: starting the local Dask cluster, :data:`DASK_START_SECONDS` (its worker processes
  import numpy, scipy and the toolkit before the first task; the cost the toy report is made
  of), plus :data:`SECONDS_PER_POSITION` per position and temperature on each worker, scaled
  by ``k_max / 8`` and by the vocabulary size; then the temperature sweep in the main process,
  :data:`SECONDS_PER_SWEEP_CELL` per position and temperature, scaled by the vocabulary;
- step 3: per decode and prompt (the rules' decodes, then block and traversal verification)
  :data:`SECONDS_PER_PARAMETER_DECODE` per model parameter, plus
  :data:`SECONDS_PER_PARAMETER_TOKEN` per parameter and decoded token; then the paired
  comparison (:mod:`otm_app.report.paired`): per position one forest of drafts
  (:data:`SECONDS_PER_PARAMETER_FOREST_NODE` per parameter and forest node with children) and,
  per rule and node with children, its conditional law given the drafts at the full
  vocabulary (:data:`KERNEL_SECONDS`, scaled by the vocabulary).

On a machine shared with other work a step gets less than its cores: with ``n`` busy threads
of its own (1 for the main process, one per Dask worker, torch's threads for the models) and
``L`` busy threads of other work, each thread gets ``min(1, cores / (L + n))`` of a core, so
the step takes ``max(1, (L + n) / cores)`` times its idle time (:func:`slowdown`). ``L`` is
measured when the estimate is printed, from the share of a core a short busy loop of ours
gets (:func:`other_busy_threads`); the estimate line says the factor when it is above 1. A
step's load can change while it runs, so on a shared machine the estimate is as good as the
load is steady; the line printed after each step shows the drift.
"""
from __future__ import annotations

import os
import sys
import time

#: Idle seconds of the theorem suite (one process; its CPU time, measured on the development machine).
THEOREM_SUITE_SECONDS = 19.0

#: Idle seconds per model parameter to load a pair from the local cache (float32), and per
#: parameter and token it scores (teacher forcing in both models; the draft is unloaded while
#: the target scores, then loaded again): 5 s and 40 ms a token for the Qwen pair.
LOAD_SECONDS_PER_PARAMETER = 2.5e-9
SCORE_SECONDS_PER_PARAMETER_TOKEN = 2e-11

#: Idle seconds to start the local Dask cluster and have its workers import the sweep's code.
DASK_START_SECONDS = 3.0

#: Seconds of one core per analysed position and temperature for step 2's sweep with every
#: default computation at ``k = 1..8`` and ``V = 151,936`` (measured with ``optimal_wor``
#: among the default columns and the workers' allocator settings,
#: ``otm_app.sweep.engine.WORKER_MALLOC``; docs/report.md, "Budget and measured wall time").
SECONDS_PER_POSITION = 1.6

#: Seconds per position and temperature of the optimum-vs-temperature sweep at
#: ``V = 151,936``, in the main process after the Dask step.
SECONDS_PER_SWEEP_CELL = 0.03

#: The vocabulary the per-position costs were measured at (the Qwen pair's).
REFERENCE_VOCAB = 151_936

#: Idle seconds per model parameter (draft and target together) per decoded token, and per
#: decode and prompt (the prompt's prefill in both models, the first steps' set-up): 0.5 s
#: and 3 s on the Qwen pair.
SECONDS_PER_PARAMETER_TOKEN = 2.5e-10
SECONDS_PER_PARAMETER_DECODE = 1.5e-9

#: Idle seconds per model parameter and forest node with children of the paired comparison
#: (the forwards of the text since the previous position and of the forest; about 6 s a
#: position for the Qwen pair and the default rules' 32 such nodes).
SECONDS_PER_PARAMETER_FOREST_NODE = 9e-11

#: Idle seconds of one rule's conditional law given the drafts at one node, at
#: ``V = 151,936`` (:func:`otm_app.report.paired.descent_probabilities`; CPU time measured on
#: rows of the Qwen pair at ``T = 1``).
KERNEL_SECONDS = {"optimal": 0.15, "optimal_wor": 0.13, "optimal_pair_wor": 0.13, "spechub": 0.03, "greedy": 0.02,
                  "kseq": 0.015}

#: ... of the other rules (a few passes over the vocabulary).
DEFAULT_KERNEL_SECONDS = 0.005


#: Wall seconds of the busy loop that measures this process's share of a core.
SHARE_PROBE_SECONDS = 0.3

#: Seconds to wait before the probe: threads of ours that have just finished work (BLAS,
#: OpenMP) spin for a moment before they sleep, and would count as other work.
SHARE_PROBE_SETTLE_SECONDS = 0.2

#: A share of a core at least this large means a core was free while the probe ran.
FREE_CORE_SHARE = 0.95


def cpu_share(seconds: float = SHARE_PROBE_SECONDS) -> float:
    """The share of a core one busy thread of this process gets now: the CPU time of a busy
    loop over its wall time."""
    wall, cpu = time.perf_counter(), time.thread_time()
    while time.perf_counter() - wall < seconds:
        pass
    return (time.thread_time() - cpu) / (time.perf_counter() - wall)


def runnable_threads() -> float:
    """Runnable threads of other processes: the running count of ``/proc/loadavg`` (which
    counts this reader) less one, over ten reads 10 ms apart; 0 where there is no ``/proc``."""
    counts = []
    try:
        for _ in range(10):
            with open("/proc/loadavg") as handle:
                counts.append(int(handle.read().split()[3].split("/")[0]) - 1)
            time.sleep(0.01)
    except (OSError, IndexError, ValueError):
        return 0.0
    return max(sum(counts) / len(counts), 0.0)


def other_busy_threads() -> float:
    """How many busy threads of other work share the cores now: from the share ``s`` of a
    core a thread of ours gets, ``cores / s - 1`` (a fair scheduler gives each of ``L + 1``
    busy threads ``cores / (L + 1)``); when a core is free (``s`` near 1), the other runnable
    threads, at most ``cores - 1``."""
    cores = os.cpu_count() or 1
    time.sleep(SHARE_PROBE_SETTLE_SECONDS)
    share = cpu_share()
    if share < FREE_CORE_SHARE:
        return cores / max(share, 1e-3) - 1
    return min(runnable_threads(), cores - 1.0)


def slowdown(threads: int, others: float | None = None) -> float:
    """``max(1, (others + threads) / cores)``: how much longer than on an idle machine a step
    with ``threads`` busy threads takes beside ``others`` runnable threads (module docstring)."""
    cores = os.cpu_count() or 1
    others = other_busy_threads() if others is None else others
    return max(1.0, (others + threads) / cores)


def about(seconds: float) -> str:
    """``about N s`` or ``about N min``."""
    return f"about {seconds / 60:.0f} min" if seconds >= 90 else f"about {seconds:.0f} s"


#: Parameters of the report's pairs (draft and target together), for the estimate printed
#: before they are loaded.
PAIR_PARAMETERS = {"qwen2.5-coder": 2.03e9, "tiny": 5_280}

#: Characters per token of the built-in texts under the Qwen tokenizer (3,356 characters,
#: 766 tokens).
CHARS_PER_TOKEN = 4.4


def model_parameters(pair) -> int:
    """Parameters of a loaded pair, draft and target together."""
    return sum(p.numel() for model in (pair.draft, pair.target) for p in model.parameters())


def scored_tokens(pair: str, texts) -> int:
    """About how many tokens the pair named ``pair`` scores for ``texts`` (a pair without
    tokenizer scores seeded random texts, :mod:`otm_app.report.sources`)."""
    from .sources import TINY_TEXT_LENGTH, TINY_TEXTS

    if pair == "tiny":
        return TINY_TEXTS * TINY_TEXT_LENGTH
    return round(sum(len(t.text) for t in texts) / CHARS_PER_TOKEN)


def load_and_score_seconds(parameters: float, tokens: int) -> float:
    """Idle seconds to load a pair of ``parameters`` and score ``tokens`` tokens through it."""
    return parameters * (LOAD_SECONDS_PER_PARAMETER + tokens * SCORE_SECONDS_PER_PARAMETER_TOKEN)


def sweep_parts(n_positions: int, n_temperatures: int, k_max: int, vocab: int, workers: int, n_sweep: int,
                n_sweep_temperatures: int) -> list[tuple[float, int]]:
    """Step 2 as ``[(idle seconds, threads)]``: the Dask sweep on ``workers``, then the
    temperature sweep on ``n_sweep`` positions in the main process."""
    scale = vocab / REFERENCE_VOCAB
    workers = max(workers, 1)
    columns = n_positions * n_temperatures * SECONDS_PER_POSITION * k_max / 8 * scale / workers
    return [(DASK_START_SECONDS + columns, workers), (n_sweep * n_sweep_temperatures * SECONDS_PER_SWEEP_CELL * scale, 1)]


def decoding_parts(parameters: float, vocab: int, decodes: int, tokens: int, paired_positions: int, forest_nodes: int,
                   kernel_nodes: dict, model_threads: int) -> list[tuple[float, int]]:
    """Step 3 as ``[(idle seconds, threads)]``: ``decodes`` decodes (one per rule and prompt,
    and the sequence verifiers') of ``tokens`` tokens each, then the paired comparison at
    ``paired_positions`` positions (a forest with ``forest_nodes`` nodes with children;
    ``kernel_nodes``: rule -> its nodes with children)."""
    scale = vocab / REFERENCE_VOCAB
    kernels = sum(KERNEL_SECONDS.get(rule, DEFAULT_KERNEL_SECONDS) * nodes for rule, nodes in kernel_nodes.items())
    models = parameters * (decodes * (SECONDS_PER_PARAMETER_DECODE + tokens * SECONDS_PER_PARAMETER_TOKEN)
                           + paired_positions * forest_nodes * SECONDS_PER_PARAMETER_FOREST_NODE)
    return [(models, model_threads), (paired_positions * kernels * scale, 1)]


class StepClock:
    """Announces each slow step with its estimate (on stderr, unless quiet) and, at its end,
    the actual time beside it; keeps both (``estimated``, ``actual``, in seconds)."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.origin = time.perf_counter()
        self.estimated: dict[str, float] = {}
        self.actual: dict[str, float] = {}
        self._started: dict[str, tuple[float, str]] = {}

    def start(self, key: str, label: str, what: str, parts: list[tuple[float, int]], hint: str = "") -> None:
        """Start step ``key`` (``label`` e.g. ``"step 2/4"``) made of ``parts``, ``(idle
        seconds, busy threads)`` each: its estimate is their sum, each times its
        :func:`slowdown` here and now."""
        others = other_busy_threads()
        idle = sum(seconds for seconds, _ in parts)
        self.estimated[key] = sum(seconds * slowdown(threads, others) for seconds, threads in parts)
        self._started[key] = (time.perf_counter(), label)
        if not self.quiet:
            factor = self.estimated[key] / idle if idle > 0 else 1.0
            load = f" ({others:.0f} other busy threads on {os.cpu_count()} cores: x{factor:.1f})" if factor > 1.1 else ""
            print(f"otm report: {label}, {what}: {about(self.estimated[key])}{load}{hint}", file=sys.stderr, flush=True)

    def elapsed(self) -> float:
        """Seconds since the clock was made (the command's start)."""
        return time.perf_counter() - self.origin

    def note(self, key: str, seconds: float) -> None:
        """Keep the wall time of a part of a step (no estimate of its own)."""
        self.actual[key] = seconds

    def end(self, key: str) -> float:
        """End step ``key``; returns its wall seconds."""
        started, label = self._started.pop(key)
        self.actual[key] = time.perf_counter() - started
        if not self.quiet:
            print(f"otm report: {label} took {self.actual[key]:.0f} s (estimated {self.estimated[key]:.0f} s)",
                  file=sys.stderr, flush=True)
        return self.actual[key]


__all__ = ["DASK_START_SECONDS", "KERNEL_SECONDS", "SECONDS_PER_POSITION", "SECONDS_PER_SWEEP_CELL", "StepClock", "THEOREM_SUITE_SECONDS",
           "about", "cpu_share", "other_busy_threads", "runnable_threads", "slowdown"]
