"""Where the time of one position goes in ``otm report`` and ``otm sweep``: every column of the
report's default configuration at one position, per computation and per k, optionally beside
an earlier commit of ``otm`` in the same run.

    python scripts/bench_positions.py [--rows 6] [--repeats 5] [--vocab 151936]
                                      [--baseline REV] [--out docs/benchmarks.md]

Rows: synthetic next-token laws at the Qwen vocabulary (no model is loaded): target logits
``-log(rank) + Gumbel`` over a random permutation, the top token raised so that its mass at
``T = 1`` is ``0.3 .. 0.9`` (evenly over the rows), draft logits the target's plus standard
normals; stored as float32 and read back as float64, as a corpus row is by the sweep.

Configuration: what ``otm report`` runs at every position (``otm_app.configs.ReportConfig``:
``k = 1..k_max``, its temperatures, ``mc_paths``; ``SweepConfig.time_budget``), the columns
``optimum_iid``, ``optimum_without_replacement`` and the default rules, each computed by its own
call of :func:`otm.positions.position_cells` in that order, with the Monte Carlo seeding of
``otm_app.sweep.tasks.run_task``. Two passes per row and temperature: the sweep's calls (one per
column, every k), then one call per column and k (the per-k table; what the columns of a row
share is dropped before each k, as if the sweep had that k alone).

``--baseline REV`` extracts ``otm/`` and ``solvers/`` of that commit (``git archive``) and runs
the same rows through it in another process, alternating with the working tree's code, one
repetition each in turn, each process with one BLAS thread and the glibc allocator settings of
the sweep's workers (``otm_app.sweep.engine.WORKER_MALLOC``). Times are CPU seconds of the
process (``time.process_time``: on a machine shared with other work, wall time counts the waits
for a core), medians over the repetitions, then means over rows and temperatures. The cells of
the two must agree (printed: how many differ and by how much).
``--out`` replaces this script's section of the markdown file (or appends it).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
#: The heading of the section this script owns in ``--out``.
HEADING = "## Per-position analysis of `otm report` (scripts/bench_positions.py)"
#: Mass of the top target token at ``T = 1``, first and last row.
TOP_MASS = (0.3, 0.9)


def make_rows(count: int, vocab: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``count`` (target, draft) float32 logit rows (module docstring)."""
    rng = np.random.default_rng(seed)
    rows = []
    for mass in np.linspace(*TOP_MASS, count):
        target = -np.log(rng.permutation(vocab) + 1.0) + rng.gumbel(size=vocab)
        top = int(np.argmax(target))
        rest = np.exp(np.delete(target, top) - target[top]).sum()
        target[top] += np.log(mass / (1.0 - mass) * rest)
        draft = target + rng.standard_normal(vocab)
        rows.append((target.astype(np.float32), draft.astype(np.float32)))
    return rows


def run_child(settings: dict) -> dict:
    """One repetition over every row with the ``otm`` on ``sys.path``: seconds and cells of the
    sweep's calls, seconds of the per-k calls."""
    import otm
    import otm.positions
    from otm.distributions import logits_to_probs
    from otm.positions import position_cells

    last_row = getattr(otm.positions, "_LAST_ROW", None)  # what one row's columns share, where kept

    assert Path(otm.__file__).resolve().is_relative_to(Path(settings["root"]).resolve()), otm.__file__
    ks, names = tuple(settings["ks"]), settings["computations"]
    rows = make_rows(settings["rows"], settings["vocab"], settings["seed"])
    sweep, per_k, cells = {}, {}, {}
    for index, (target, draft) in enumerate([rows[0]] + rows, start=-1):  # row 0 once more first, as warm-up (index -1)
        z, w = target.astype(np.float64), draft.astype(np.float64)
        for temperature in settings["temperatures"]:
            p, q = logits_to_probs(z, temperature, name="target logits"), logits_to_probs(w, temperature, name="draft logits")
            where = f"{index}@{temperature:g}"
            rng = np.random.default_rng([settings["seed"], 0, index + 1])
            for name in names:
                tick = time.process_time()
                found = position_cells(p, q, ks, (name,), rng, settings["mc_paths"], settings["time_budget"])
                sweep[f"{where}|{name}"] = time.process_time() - tick
                cells[f"{where}|{name}"] = [[c.value, c.std_error, c.method] for c in found]
            for k in ks:
                if last_row is not None:
                    last_row.row = None  # each k as if its row were new
                for name in names:
                    tick = time.process_time()
                    position_cells(p, q, (k,), (name,), np.random.default_rng([settings["seed"], 1, index + 1]),
                                   settings["mc_paths"], settings["time_budget"])
                    per_k[f"{where}|{name}|{k}"] = time.process_time() - tick
    return {name: {key: v for key, v in part.items() if not key.startswith("-1@")}  # without the warm-up
            for name, part in (("sweep", sweep), ("per_k", per_k), ("cells", cells))}


def extract(rev: str, folder: Path) -> Path:
    """``otm/`` and ``solvers/`` of commit ``rev`` under ``folder``."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "otm", "solvers"], check=True,
                             capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    return folder


def repetition(root: Path, settings: dict) -> dict:
    """:func:`run_child` in a fresh process with ``root`` first on the path, one BLAS thread (CPU
    time = one core's) and the memory allocator settings of the sweep's workers."""
    from otm_app.sweep.engine import WORKER_MALLOC

    env = dict(os.environ, PYTHONPATH=f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
               **{f"{library}_NUM_THREADS": "1" for library in ("OMP", "OPENBLAS", "MKL")},
               **{name: str(value) for name, value in WORKER_MALLOC.items()})
    done = subprocess.run([sys.executable, __file__, "--child", json.dumps(dict(settings, root=str(root)))],
                          env=env, check=True, capture_output=True, text=True, cwd=root)
    return json.loads(done.stdout)


def medians(runs: list[dict], part: str) -> dict:
    """Per key, the median over the repetitions."""
    return {key: float(np.median([run[part][key] for run in runs])) for key in runs[0][part]}


def per_computation(times: dict, names: list[str]) -> dict:
    """Seconds per position and temperature of each computation (mean over rows and temperatures)."""
    return {name: float(np.mean([v for key, v in times.items() if key.split("|")[1] == name])) for name in names}


def per_k(times: dict, names: list[str], ks: list[int]) -> dict:
    return {(name, k): float(np.mean([v for key, v in times.items() if key.split("|")[1:] == [name, str(k)]]))
            for name in names for k in ks}


def compare_cells(before: dict, after: dict) -> tuple[int, int, float]:
    """``(cells, differing, largest difference)`` between the cells of two runs (NaN equals NaN)."""
    total = differ = 0
    largest = 0.0
    for key, cells in after.items():
        for new, old in zip(cells, before[key]):
            total += 1
            same = new[2] == old[2] and all(a == b or (a != a and b != b) for a, b in zip(new[:2], old[:2]))
            if not same:
                differ += 1
                largest = max(largest, abs(new[0] - old[0]) if new[0] == new[0] and old[0] == old[0] else np.inf)
    return total, differ, largest


def table(columns: dict, names: list[str]) -> list[str]:
    """Markdown rows: computation, then per column seconds per position and share."""
    heads = list(columns)
    totals = {h: sum(columns[h].values()) for h in heads}
    lines = ["| computation | " + " | ".join(f"{h} (s) | {h} share" for h in heads) + (" | ratio |" if len(heads) == 2 else " |"),
             "|---" * (1 + 2 * len(heads) + (len(heads) == 2)) + "|"]
    for name in [*names, "**all**"]:
        values = [totals[h] if name == "**all**" else columns[h][name] for h in heads]
        cells = " | ".join(f"{v:.4f} | {v / totals[h]:.0%}" for v, h in zip(values, heads))
        ratio = " |" if len(heads) != 2 else (f" | {values[0] / values[1]:.1f}x |" if values[1] > 0 else " | - |")
        lines.append(f"| {name} | {cells}{ratio}")
    return lines


def replace_section(text: str, section: str) -> str:
    """``text`` with its :data:`HEADING` section (up to the next ``## `` heading) replaced by
    ``section``, or ``section`` appended when it has none."""
    if HEADING not in text:
        return text.rstrip("\n") + "\n\n" + section
    start = text.index(HEADING)
    following = text.find("\n## ", start + len(HEADING))
    return text[:start] + section + ("\n" + text[following + 1:] if following >= 0 else "")


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=6, help="synthetic rows (positions)")
    parser.add_argument("--repeats", type=int, default=5, help="repetitions (median)")
    parser.add_argument("--vocab", type=int, default=151_936)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--baseline", help="a commit whose otm/ is timed beside the working tree's")
    parser.add_argument("--positions", type=int, default=760, help="positions of the projected report (its default texts)")
    parser.add_argument("--workers", type=int, default=2, help="workers of the projected report")
    parser.add_argument("--out", help="write the section into this markdown file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(run_child(json.loads(args.child))))
        return ""
    if args.rows < 1 or args.repeats < 1 or args.vocab < 8:
        parser.error("--rows and --repeats must be at least 1, --vocab at least 8")
    sys.path.insert(0, str(REPO))
    from otm.tables import OPTIMAL_IID, OPTIMAL_WOR
    from otm_app.configs import ReportConfig, SweepConfig

    report = ReportConfig()
    names = [OPTIMAL_IID, OPTIMAL_WOR, *report.rules]
    ks = list(range(1, report.k_max + 1))
    settings = {"ks": ks, "computations": names, "temperatures": list(report.temperatures), "mc_paths": report.mc_paths,
                "time_budget": SweepConfig().time_budget, "rows": args.rows, "vocab": args.vocab, "seed": args.seed}
    started, load_before = time.perf_counter(), os.getloadavg()
    with tempfile.TemporaryDirectory() as folder:
        trees = {"after": REPO}
        if args.baseline:
            trees = {"before": extract(args.baseline, Path(folder)), **trees}
        runs: dict = {label: [] for label in trees}
        for _ in range(args.repeats):
            for label, root in trees.items():
                runs[label].append(repetition(root, settings))
    load_after = os.getloadavg()
    sweep = {label: per_computation(medians(r, "sweep"), names) for label, r in runs.items()}
    by_k = {label: per_k(medians(r, "per_k"), names, ks) for label, r in runs.items()}
    if args.baseline:
        n_cells, differ, largest = compare_cells(runs["before"][0]["cells"], runs["after"][0]["cells"])
    per_position = {label: sum(v.values()) for label, v in sweep.items()}
    temperatures = len(report.temperatures)
    projected = {label: args.positions * temperatures * t / args.workers for label, t in per_position.items()}
    command = "python " + " ".join(["scripts/bench_positions.py"] + (sys.argv[1:] if argv is None else argv))
    k_rows = [f"| {name} | " + " | ".join("/".join(f"{1e3 * by_k[label][(name, k)]:.1f}" for label in by_k) for k in ks) + " |"
              for name in names]
    lines = [
        HEADING, "",
        f"Command: `{command}` ({datetime.date.today().isoformat()}; {platform.platform()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, numpy {np.__version__}; 1-minute load average {load_before[0]:.1f} before, "
        f"{load_after[0]:.1f} after; {time.perf_counter() - started:.0f} s).", "",
        f"{args.rows} synthetic rows at V = {args.vocab:,} (top target mass {TOP_MASS[0]:g}-{TOP_MASS[1]:g} at T = 1), "
        f"T in {tuple(report.temperatures)}, k = 1..{report.k_max}, mc_paths = {report.mc_paths}: the report's default "
        "columns, one `position_cells` call per column as the sweep makes them. CPU seconds per position and "
        f"temperature (one core; `time.process_time`), median of {args.repeats} repetitions"
        + (f"; `before` is `otm/` at {args.baseline}, alternating with `after` (the working tree)" if args.baseline else "")
        + ".",
        "", *table(sweep, names), "",
    ]
    largest_shares = "; ".join(f"{label}: " + ", ".join(f"{name} {times[name] / per_position[label]:.0%}"
                                                         for name in sorted(times, key=times.get, reverse=True)[:3])
                               for label, times in sweep.items())
    lines += [f"Largest shares ({largest_shares}).", ""]
    if args.baseline:
        lines += [f"Cells compared: {n_cells}, of which {differ} differ (largest difference {largest:.3g}).", ""]
    lines += [f"Per k, CPU milliseconds per call (one column, one k; {' / '.join(by_k)}):", "",
              "| computation | " + " | ".join(f"k = {k}" for k in ks) + " |", "|---" * (len(ks) + 1) + "|", *k_rows, "",
              f"Projected step 2 of `otm report` ({args.positions} positions x {temperatures} temperatures x seconds per "
              f"position / {args.workers} workers, the computations only): "
              + ", ".join(f"{label} {projected[label] / 60:.1f} min" for label in projected) + ".", ""]
    section = "\n".join(lines)
    print(section)
    if args.out:
        path = Path(args.out)
        path.write_text(replace_section(path.read_text() if path.exists() else "", section))
    return section


if __name__ == "__main__":
    main()
