"""``otm sweep`` end to end on a tiny corpus: the Parquet table holds exactly what the
exact core gives position by position; an interrupted sweep resumes without recomputing
finished tasks; a task that fails is retried; a different sweep in the same folder is
refused; the summary's means are the table's."""
from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pytest

from otm.corpus import Corpus, CorpusWriter
from otm.distributions import logits_to_probs
from otm.errors import InputFileError
from otm.positions import position_cells
from otm_app.cli import main
from otm_app.configs import SweepConfig
from otm_app.sweep import engine
from otm_app.sweep.engine import run_sweep
from otm_app.sweep.summary import per_position, read_table, summarise

COMPUTATIONS = ("optimum_iid", "optimum_without_replacement", "rrs", "rrs_wor", "spechub")


@pytest.fixture()
def corpus(tmp_path):
    rng = np.random.default_rng(0)
    folder = tmp_path / "corpus"
    with CorpusWriter(folder, vocab_size=12, shard_size=5, source="test") as writer:
        for i, n in enumerate((7, 4)):
            writer.add(f"text{i}", 2 * rng.standard_normal((n, 12)), 2 * rng.standard_normal((n, 12)))
    return folder


def _config(corpus, out, **changes):
    settings = dict(corpus=str(corpus), out=str(out), ks=(1, 2, 3), temperatures=(0.7, 1.0), computations=COMPUTATIONS,
                    workers=1, positions_per_task=3, mc_paths=64, quiet=True)
    return SweepConfig(**{**settings, **changes})


def test_table_equals_the_exact_core_position_by_position(corpus, tmp_path):
    config = _config(corpus, tmp_path / "out")
    result = run_sweep(config)
    assert result["ran"] == result["tasks"] == 5  # shards of 5, 5, 1 positions: tasks of 3+2, 3+2, 1
    table = read_table(config.out)
    assert table.num_rows == 11 * 2 * 3 * len(COMPUTATIONS)
    opened = Corpus(corpus)
    for temperature in (0.7, 1.0):
        values = per_position(table, "optimum_iid", temperature, 2)
        expected = []
        for index in range(len(opened.shards)):
            shard = opened.load(index)
            for row in range(shard.text.size):
                expected.append((opened.texts[shard.text[row]], int(shard.position[row]), shard, row))
        expected.sort(key=lambda e: (e[0], e[1]))
        direct = []
        for _, _, shard, row in expected:
            p = logits_to_probs(shard.target_logits[row].astype(np.float64), temperature)
            q = logits_to_probs(shard.draft_logits[row].astype(np.float64), temperature)
            direct.append(position_cells(p, q, [2], ["optimum_iid"], np.random.default_rng(0))[0].value)
        np.testing.assert_allclose(values, direct, rtol=0, atol=1e-12)


def test_resume_recomputes_only_missing_tasks_and_gives_the_same_rows(corpus, tmp_path):
    config = _config(corpus, tmp_path / "out")
    run_sweep(config)
    before = read_table(config.out).sort_by([("text", "ascending"), ("position", "ascending"), ("temperature", "ascending"),
                                             ("computation", "ascending"), ("k", "ascending")])
    parts = sorted((tmp_path / "out" / "parts").glob("*.parquet"))
    parts[1].unlink()  # an interrupted sweep: one task never finished
    result = run_sweep(config)
    assert result["ran"] == 1
    assert result["skipped"] == 4
    after = read_table(config.out).sort_by([("text", "ascending"), ("position", "ascending"), ("temperature", "ascending"),
                                            ("computation", "ascending"), ("k", "ascending")])
    assert after.drop(["seconds"]).equals(before.drop(["seconds"]))  # Monte Carlo rows included: seeded per position


def test_a_different_sweep_in_the_same_folder_is_refused(corpus, tmp_path):
    run_sweep(_config(corpus, tmp_path / "out"))
    with pytest.raises(InputFileError, match="different sweep"):
        run_sweep(_config(corpus, tmp_path / "out", ks=(1, 2)))


def test_a_failing_task_is_retried(corpus, tmp_path, monkeypatch):
    """Every task fails on its first attempt (a marker file records the attempt: tasks are
    serialised to the workers, so the flaky function keeps no state of its own)."""
    markers = tmp_path / "attempts"
    markers.mkdir()
    real = engine.run_task

    def flaky(corpus_folder, task, settings, parts):
        marker = markers / task.file
        if not marker.exists():
            marker.touch()
            raise OSError("a lost worker")
        return real(corpus_folder, task, settings, parts)

    monkeypatch.setattr(engine, "run_task", flaky)
    result = run_sweep(_config(corpus, tmp_path / "out", retries=1))
    assert result["ran"] == 5
    assert len(list(markers.iterdir())) == 5
    for marker in markers.iterdir():
        marker.unlink()
    with pytest.raises(OSError, match="lost worker"):
        run_sweep(_config(corpus, tmp_path / "out2", retries=0))


def test_summary_means_are_the_table_means(corpus, tmp_path):
    config = _config(corpus, tmp_path / "out")
    run_sweep(config)
    table = read_table(config.out)
    summary = {(r["temperature"], r["computation"], r["k"]): r for r in summarise(table)}
    values = per_position(table, "rrs", 1.0, 3)
    row = summary[(1.0, "rrs", 3)]
    assert row["mean"] == pytest.approx(values.mean())
    assert row["standard_error"] == pytest.approx(values.std(ddof=1) / np.sqrt(values.size))
    assert summary[(1.0, "spechub", 3)]["mean"] is None  # not applicable at k = 3
    assert summary[(0.7, "rrs_wor", 3)]["methods"] == ["exact"]  # V = 12: enumeration fits the budget


def test_cli_sweep_writes_summary_and_figures(corpus, tmp_path, capsys):
    out = tmp_path / "cli"
    status = main(["sweep", str(corpus), "--out", str(out), "--ks", "1-2", "--workers", "1", "--quiet", "--json",
                   "--computations", "optimum_iid,rrs,is_truncated"])
    printed = json.loads(capsys.readouterr().out)
    assert status == 0
    assert (out / "summary.json").is_file()
    assert printed["figures"]
    assert {r["computation"] for r in printed["summary"]} == {"optimum_iid", "rrs", "importance_sampling_truncated"}
    assert dataclasses.fields(SweepConfig)  # the command runs on the typed config


def test_cli_sweep_bad_input_is_one_line(tmp_path, capsys):
    status = main(["sweep", str(tmp_path / "missing"), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert status == 2
    assert len(err.strip().splitlines()) == 1
    assert "not an otm corpus" in err


def test_bench_sweep_writes_costs_scaling_and_plan(tmp_path):
    """scripts/bench_sweep.py on a small synthetic corpus: one row per computation, both
    worker counts, and the 10^7-position plan."""
    import bench_sweep

    out = tmp_path / "bench.md"
    text = bench_sweep.main(["--positions", "4", "--vocab", "64", "--ks", "1-2", "--out", str(out)])
    assert out.read_text().strip() == text.strip()
    assert "| **all of them** |" in text
    assert re.search(r"\n\| 1 \| [\d.]+ \| [\d.]+ \| 1\.00x \|", text)  # one worker
    assert re.search(r"\n\| 2 \| [\d.]+ \| [\d.]+ \| [\d.]+x \|", text)  # two workers
    assert "| 1024 |" in text


def test_local_workers_run_with_the_allocator_settings():
    """The local cluster's worker processes see :data:`engine.WORKER_MALLOC` in their
    environment (in place of Dask's ``MALLOC_TRIM_THRESHOLD_=65536``, which made every V-sized
    array a fresh mapping), and keep Dask's other settings (one BLAS thread)."""
    import os

    from dask.distributed import Client

    cluster = engine.local_cluster(1)
    try:
        with Client(cluster) as client:
            (environ,) = client.run(lambda: {name: os.environ.get(name) for name in
                                             (*engine.WORKER_MALLOC, "OMP_NUM_THREADS")}).values()
    finally:
        cluster.close()
    assert environ == {**{name: str(value) for name, value in engine.WORKER_MALLOC.items()}, "OMP_NUM_THREADS": "1"}


def test_a_local_cluster_beside_another_prints_no_port_warning(capfd):
    """The local cluster serves no dashboard and takes a free port for the scheduler's HTTP
    routes: with port 8787 taken (as by a second cluster, a report beside a sweep), nothing
    like Dask's "Port 8787 is already in use" reaches the console or the warnings."""
    import socket
    import warnings

    held = socket.socket()
    try:
        held.bind(("127.0.0.1", 8787))
        held.listen()
    except OSError:
        pass  # taken already: the same situation
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            engine.local_cluster(1).close()
    finally:
        held.close()
    said = capfd.readouterr().err + "".join(str(w.message) for w in caught)
    assert "already in use" not in said and "8787" not in said


@pytest.mark.parametrize("field, value, says", [
    ("workers", -1, "--workers must be an integer >= 0"), ("retries", -1, "--retries must be an integer >= 0"),
    ("positions_per_task", 0, "--positions-per-task must be an integer >= 1"), ("mc_paths", -5, "--mc-paths must be"),
    ("seed", -3, "--seed must be an integer >= 0"), ("time_budget", -1.0, "--time-budget must be"),
    ("top_ps", (2.0,), "--top-ps must be in (0, 1]"), ("temperatures", (0.0,), "--temperatures must be positive"),
])
def test_out_of_range_settings_are_typed_errors_before_anything_runs(tmp_path, field, value, says):
    """A negative worker count hung the local cluster, ``positions_per_task = 0`` and a negative
    seed failed deep in the planning with untyped errors, top-p 2 ran a whole sweep: each is an
    :class:`InvalidArgumentError` now, before the corpus is read (this corpus does not exist)."""
    from otm.errors import InvalidArgumentError
    from otm_app.configs import SweepConfig
    from otm_app.sweep.engine import run_sweep

    config = dataclasses.replace(SweepConfig(corpus=str(tmp_path / "no-corpus"), out=str(tmp_path / "out")), **{field: value})
    with pytest.raises(InvalidArgumentError, match=re.escape(says)):
        run_sweep(config)
    assert not (tmp_path / "out").exists()
