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

The models' costs are one core's work, divided among their torch threads (step 3 runs them
on one, :data:`otm_app.report.run.DECODE_THREADS`); the kernels run on one core.

On a machine shared with other work a step gets less than its cores: with ``n`` busy threads
of its own (1 for the main process, one per Dask worker, torch's threads for the models) and
``L`` busy threads of other work, each thread gets ``min(1, cores / (L + n))`` of a core, so
the step takes ``max(1, (L + n) / cores)`` times its idle time (:func:`slowdown`). ``L`` is
measured when the estimate is printed: the runnable threads of every process but this one
and its children (:func:`other_busy_threads`, from ``/proc``; the report's own threads, still
spinning after the previous step or waiting in its Dask workers, are not other work); the
estimate line says the factor when it is above 1. A
step's load can change while it runs, so on a shared machine the estimate is as good as the
load is steady; the line printed after each step shows the drift.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

#: Idle seconds of the theorem suite (one process; its CPU time, measured on the development machine).
THEOREM_SUITE_SECONDS = 19.0

#: Seconds of one core per model parameter to load a pair from the local cache, and per
#: parameter and token it scores (teacher forcing in both models; the draft is unloaded while
#: the target scores, then loaded again): 5 s and 20 ms a token for the Qwen pair in bfloat16
#: (CPU time, docs/report.md, "Budget and measured wall time"); torch's threads share them.
LOAD_SECONDS_PER_PARAMETER = 2.5e-9
SCORE_SECONDS_PER_PARAMETER_TOKEN = 1e-11

#: Idle seconds to start the local Dask cluster, have its workers import the sweep's code and
#: write the scored positions as the sweep's corpus.
DASK_START_SECONDS = 8.0

#: Seconds of one core per analysed position and temperature for step 2's sweep with every
#: default computation at ``k = 1..8`` and ``V = 151,936`` (measured with ``optimal_wor``
#: among the default columns and the workers' allocator settings,
#: ``otm_app.sweep.engine.WORKER_MALLOC``; docs/report.md, "Budget and measured wall time").
SECONDS_PER_POSITION = 0.33

#: Seconds per position and temperature of the optimum-vs-temperature sweep at
#: ``V = 151,936``, in the main process after the Dask step.
SECONDS_PER_SWEEP_CELL = 0.016

#: The vocabulary the per-position costs were measured at (the Qwen pair's).
REFERENCE_VOCAB = 151_936

#: Seconds of one core per model parameter (draft and target together) per decoded token, and
#: per decode and prompt (the prompt's prefill in both models, the first steps' set-up), in
#: bfloat16: 0.3 s and 0.7 s on the Qwen pair (CPU time of step 3's decodes on one thread, a code and a
#: prose prompt).
SECONDS_PER_PARAMETER_TOKEN = 1.5e-10
SECONDS_PER_PARAMETER_DECODE = 3.4e-10

#: Seconds of one core per model parameter and forest node with children of the paired
#: comparison (the forwards of the text since the previous position and of the forest, and
#: the laws at its nodes; about 1.2 s a position for the Qwen pair in bfloat16 and the default
#: rules' 32 such nodes).
SECONDS_PER_PARAMETER_FOREST_NODE = 1.85e-11

#: Seconds of one core for one rule's conditional laws given the drafts, per node with
#: children of its tree, at ``V = 151,936`` (:func:`otm_app.report.paired.descent_probabilities`;
#: the walk of an i.i.d. rule merges the nodes holding the accepted token, so a call there can
#: have up to 8 drafts on ``binary:3``; CPU time on the Qwen pair's rows at ``T = 1``).
KERNEL_SECONDS = {"optimal": 0.04, "optimal_wor": 0.05, "optimal_pair_wor": 0.05, "spechub": 0.017, "greedy": 0.012,
                  "kseq": 0.007}

#: ... of the other rules (a few passes over the vocabulary).
DEFAULT_KERNEL_SECONDS = 0.002


#: Where the kernel lists the processes and their threads.
PROC = Path("/proc")

#: Reads of every thread's state that the load probe averages, and the seconds between two.
LOAD_SAMPLES = 10
LOAD_SAMPLE_SECONDS = 0.02


def _stat(text: str) -> tuple[str, int]:
    """``(state, parent pid)`` of a ``/proc/.../stat`` line (the command name, in parentheses,
    may itself hold spaces and parentheses: the fields follow its last ``)``)."""
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], int(fields[1])


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):  # a process or thread that ended meanwhile
        return None


def _processes(proc: Path) -> list[Path]:
    return [entry for entry in proc.iterdir() if entry.name.isdigit()]


def process_tree(pid: int, proc: Path = PROC) -> set[int]:
    """``pid`` and its descendants (the Dask workers, their helpers), from the parent pids in
    ``proc/<pid>/stat``."""
    children: dict[int, list[int]] = {}
    for entry in _processes(proc):
        text = _read(entry / "stat")
        if text is not None:
            children.setdefault(_stat(text)[1], []).append(int(entry.name))
    tree, stack = set(), [pid]
    while stack:
        node = stack.pop()
        if node not in tree:
            tree.add(node)
            stack += children.get(node, [])
    return tree


def runnable_threads(ours: set[int], proc: Path = PROC, by_session: bool = False) -> int:
    """Threads in state ``R`` (running or waiting for a core) of the processes not in ``ours``,
    from one read of ``proc/<pid>/task/<tid>/stat``; ``by_session``: the sessions
    (``proc/<pid>/autogroup``) holding such threads instead, each counted once."""
    threads, sessions = 0, set()
    for entry in _processes(proc):
        if int(entry.name) in ours:
            continue
        try:
            tasks = list((entry / "task").iterdir())
        except OSError:
            continue
        running = sum(1 for task in tasks if (text := _read(task / "stat")) is not None and _stat(text)[0] == "R")
        threads += running
        if running and by_session:
            group = _read(entry / "autogroup")
            sessions.add(group.split()[0] if group else entry.name)
    return len(sessions) if by_session else threads


def shares_by_session(proc: Path = PROC) -> bool:
    """Whether the kernel shares the cores between sessions before threads (``autogroup``:
    each session with work gets an equal share, whatever its number of threads)."""
    return (_read(proc / "sys" / "kernel" / "sched_autogroup_enabled") or "0").strip() == "1"


def other_busy_threads(proc: Path = PROC, samples: int = LOAD_SAMPLES, pause: float = LOAD_SAMPLE_SECONDS) -> float:
    """How much other work shares the cores now: the mean, over ``samples`` reads ``pause``
    seconds apart, of the runnable threads of every process outside this one and its
    descendants (whose threads, spinning down after their work or still alive, are the
    report's own), or of their sessions where the kernel shares by session
    (:func:`shares_by_session`); 0 where ``proc`` cannot be read."""
    try:
        ours = process_tree(os.getpid(), proc)
        by_session = shares_by_session(proc)
        counts = []
        for sample in range(samples):
            if sample:
                time.sleep(pause)
            counts.append(runnable_threads(ours, proc, by_session))
    except OSError:
        return 0.0
    return sum(counts) / len(counts)


def slowdown(threads: int, others: float | None = None, by_session: bool | None = None) -> float:
    """How much longer than on an idle machine a step with ``threads`` busy threads takes
    beside ``others`` busy threads of other work (module docstring): ``max(1, (others +
    threads) / cores)``; where the kernel shares by session (``others`` then counts sessions,
    and the step's threads are one session), ``threads`` over the cores its session gets,
    ``max(cores / (others + 1), cores - others)``, at least 1."""
    cores = os.cpu_count() or 1
    others = other_busy_threads() if others is None else others
    if shares_by_session() if by_session is None else by_session:
        return max(1.0, threads / max(cores / (others + 1), cores - others))
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


def load_and_score_parts(parameters: float, tokens: int, threads: int) -> list[tuple[float, int]]:
    """Loading a pair of ``parameters`` and scoring ``tokens`` tokens through it on ``threads``
    torch threads, as ``[(idle seconds, threads)]``."""
    work = parameters * (LOAD_SECONDS_PER_PARAMETER + tokens * SCORE_SECONDS_PER_PARAMETER_TOKEN)
    return [(work / threads, threads)]


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
    """Step 3 as ``[(idle seconds, threads)]``, the models on ``model_threads`` torch threads: ``decodes`` decodes (one per rule and prompt,
    and the sequence verifiers') of ``tokens`` tokens each, then the paired comparison at
    ``paired_positions`` positions (a forest with ``forest_nodes`` nodes with children;
    ``kernel_nodes``: rule -> its nodes with children)."""
    scale = vocab / REFERENCE_VOCAB
    kernels = sum(KERNEL_SECONDS.get(rule, DEFAULT_KERNEL_SECONDS) * nodes for rule, nodes in kernel_nodes.items())
    models = parameters * (decodes * (SECONDS_PER_PARAMETER_DECODE + tokens * SECONDS_PER_PARAMETER_TOKEN)
                           + paired_positions * forest_nodes * SECONDS_PER_PARAMETER_FOREST_NODE)
    return [(models / model_threads, model_threads), (paired_positions * kernels * scale, 1)]


class StepClock:
    """Announces each slow step with its estimate (on stderr, unless quiet) and, at its end,
    the actual time beside it; keeps both (``estimated``, ``actual``, in seconds)."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.origin = time.perf_counter()
        self.estimated: dict[str, float] = {}
        self.actual: dict[str, float] = {}
        self._started: dict[str, tuple[float, str]] = {}

    def start(self, key: str, label: str, what: str, parts: list[tuple[float, int]], hint: str = "",
              others: float | None = None) -> None:
        """Start step ``key`` (``label`` e.g. ``"step 2/4"``) made of ``parts``, ``(idle
        seconds, busy threads)`` each: its estimate is their sum, each times its
        :func:`slowdown` beside ``others`` busy threads (measured here and now when ``None``)."""
        others = other_busy_threads() if others is None else others
        by_session = shares_by_session()
        idle = sum(seconds for seconds, _ in parts)
        self.estimated[key] = sum(seconds * slowdown(threads, others, by_session) for seconds, threads in parts)
        self._started[key] = (time.perf_counter(), label)
        if not self.quiet:
            factor = self.estimated[key] / idle if idle > 0 else 1.0
            unit = "sessions" if by_session else "threads"
            load = f" ({others:.0f} other busy {unit} on {os.cpu_count()} cores: x{factor:.1f})" if factor > 1.1 else ""
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
           "about", "other_busy_threads", "process_tree", "runnable_threads", "shares_by_session", "slowdown"]
