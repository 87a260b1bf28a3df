"""``otm sweep`` and ``otm corpus`` refuse bad settings in one line before any work (no
cluster, no scoring), reach a ``--scheduler`` within a named timeout or say why not, send
absolute paths to the workers, and write honest output: per-row seconds, a null standard
error where there is no value, a console summary that says what it shows and marks the
Monte Carlo means, a runnable reading example in docs/sweep.md, help texts with true
defaults."""
from __future__ import annotations

import dataclasses
import os
import re
import socket
import threading
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pytest

from otm.errors import InvalidArgumentError
from otm_app.cli import build_parser, main
from otm_app.commands.sweep import format_summary
from otm_app.configs import SweepConfig
from otm_app.sweep import engine
from otm_app.sweep.engine import MAX_DRAFTS, MAX_MC_DRAWS, MAX_TASK_ROWS, SchedulerError, run_sweep
from otm_app.sweep.summary import read_table, summarise
from tests.otm_app.test_sweep_integrity import config_for, write_corpus

#: Seconds the scheduler tests give a server to answer or a worker to join (none does: each
#: such test waits this long).
QUICK_TIMEOUT = 1.0
DOCS = Path(__file__).resolve().parents[2] / "docs" / "sweep.md"


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """One finished sweep with Monte Carlo cells (rrs_wor at k = 3, time budget 0) and
    not-applicable ones (spechub at k != 2)."""
    root = tmp_path_factory.mktemp("swept")
    corpus = write_corpus(root / "corpus")
    config = config_for(corpus, root / "sweep")
    return config, run_sweep(config)


@pytest.mark.parametrize("field, value, says", [
    ("ks", (1, 100_000_000), f"--ks must be integers from 1 to MAX_DRAFTS = {MAX_DRAFTS}"),
    ("ks", (), "--ks must be integers"),
    ("ks", (True,), "--ks must be integers"),
    ("mc_paths", 1, "--mc-paths must be an integer >= 2"),  # the estimate's standard error needs 2 paths
    ("mc_paths", 1 << 22, f"above MAX_MC_DRAWS = {MAX_MC_DRAWS:,}"),  # x 8 drafts
    ("positions_per_task", 20_000, f"above MAX_TASK_ROWS = {MAX_TASK_ROWS:,}"),  # 20,000 x 8 k x 9 computations
    ("top_ps", (), "--top-ps must be in (0, 1]"),
    ("computations", (), "--computations must name at least one"),
    ("connect_timeout", 0.0, "--connect-timeout must be a positive number"),
    ("scheduler", "tcp://", "is not a scheduler address"),
    ("scheduler", "http://head:8786", "is not a scheduler address"),
    ("scheduler", "tcp://head:99999", "is not a scheduler address"),
])
def test_every_setting_is_checked_before_anything_starts(tmp_path, field, value, says):
    """``--ks 100000000`` was refused only by a worker after the cluster had started (or ran
    for minutes): every setting is checked first, sizes by arithmetic; the corpus here does
    not even exist, and the output folder is not created."""
    config = dataclasses.replace(SweepConfig(corpus=str(tmp_path / "no-corpus"), out=str(tmp_path / "out")), **{field: value})
    with pytest.raises(InvalidArgumentError, match=re.escape(says)):
        run_sweep(config)
    assert not (tmp_path / "out").exists()


def test_an_output_folder_that_cannot_be_made_is_one_line(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "corpus")
    (tmp_path / "file").write_text("not a folder")
    status = main(["sweep", str(corpus), "--out", str(tmp_path / "file" / "x"), "--quiet"])
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith(f"otm sweep: error: --out {str(tmp_path / 'file' / 'x')!r}: cannot make this folder")
    assert len(err.strip().splitlines()) == 1


@pytest.fixture()
def silent_server():
    """A local TCP port whose server accepts connections and never speaks (not Dask)."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted = []
    stop = threading.Event()

    def serve():
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    for connection in accepted:
        connection.close()
    server.close()


def closed_port() -> str:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    return f"tcp://127.0.0.1:{port}"


def test_a_scheduler_that_does_not_answer_is_a_typed_error(tmp_path, silent_server):
    """A server that is not Dask hung the old sweep (Dask waits for its handshake without a
    limit); a closed port was an ``unexpected OSError`` after 30 s. Both are one typed error
    after the connect timeout, and no ``sweep.json`` is left behind."""
    corpus = write_corpus(tmp_path / "corpus")
    for address in (silent_server, closed_port()):
        config = config_for(corpus, tmp_path / "out", scheduler=address, connect_timeout=QUICK_TIMEOUT)
        with pytest.raises(SchedulerError, match=re.escape(f"--scheduler {address}: no Dask scheduler answered within 1 s")):
            run_sweep(config)
    assert not (tmp_path / "out" / "sweep.json").exists()


def test_a_scheduler_without_workers_is_a_typed_error(tmp_path):
    """The tasks of the old sweep waited for ever on a scheduler that had no worker."""
    from dask.distributed import LocalCluster

    corpus = write_corpus(tmp_path / "corpus")
    with LocalCluster(n_workers=0, processes=False, protocol="tcp", dashboard_address=None) as cluster:
        config = config_for(corpus, tmp_path / "out", scheduler=cluster.scheduler_address, connect_timeout=QUICK_TIMEOUT)
        with pytest.raises(SchedulerError, match="the scheduler has no worker"):
            run_sweep(config)


@pytest.fixture()
def cluster_elsewhere(tmp_path):
    """A local cluster whose worker processes run in another working directory, as a remote
    cluster's would."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    here = os.getcwd()
    os.chdir(elsewhere)
    try:
        cluster = engine.local_cluster(1)
    finally:
        os.chdir(here)
    yield cluster
    cluster.close()


def test_relative_paths_reach_the_workers_of_a_scheduler(tmp_path, monkeypatch, cluster_elsewhere):
    """The old sweep sent ``corpus`` unresolved: the workers, elsewhere, found no corpus."""
    write_corpus(tmp_path / "corpus")
    monkeypatch.chdir(tmp_path)
    config = config_for(Path("corpus"), Path("out"), scheduler=cluster_elsewhere.scheduler_address, ks=(1,),
                        computations=("optimum_iid",))
    result = run_sweep(config)
    assert result["ran"] == result["tasks"] == 4
    assert read_table(tmp_path / "out").num_rows == 8


def test_rows_carry_their_own_seconds_and_no_error_without_a_value(swept):
    """``seconds`` was 0 on every row but the first of a computation; ``std_error`` was 0.0 on
    rows with no value."""
    config, _ = swept
    table = read_table(config.out)
    rows = table.to_pylist()
    assert all(r["seconds"] > 0 for r in rows)
    per_position = {}
    for r in rows:  # the time of a computation at a position, shared equally by its k rows
        per_position.setdefault((r["text"], r["position"], r["temperature"], r["top_p"], r["computation"]), set()).add(r["seconds"])
    assert all(len(seconds) == 1 for seconds in per_position.values())
    methods = {r["method"] for r in rows}
    assert {"exact", "monte_carlo", "not_applicable"} <= methods
    for r in rows:
        if r["method"] == "not_applicable":
            assert r["value"] is None and r["std_error"] is None
        elif r["method"] == "exact":
            assert r["std_error"] == 0.0
        else:
            assert r["std_error"] > 0
    summary = summarise(table)
    for row in summary:  # the seconds of a summary row are those of its own rows
        chosen = [r["seconds"] for r in rows if (r["temperature"], r["top_p"], r["k"], r["computation"])
                  == (row["temperature"], row["top_p"], row["k"], row["computation"])]
        assert row["seconds"] == pytest.approx(sum(chosen))


def test_console_summary_says_what_it_shows_and_marks_monte_carlo(swept):
    config, result = swept
    summary = summarise(read_table(config.out))
    text = format_summary(summary, result, Path(config.out))
    lines = text.splitlines()
    assert lines[1] == ("mean acceptance P(Y in S(X)) over the positions, by number of drafts k; "
                        "* a Monte Carlo estimate, its standard error in parentheses")
    (estimate,) = [r for r in summary if r["computation"] == "rrs_wor" and r["k"] == 3]
    errors = [r["std_error"] for r in read_table(config.out).to_pylist() if r["computation"] == "rrs_wor" and r["k"] == 3]
    assert estimate["monte_carlo_error_of_mean"] == pytest.approx(np.sqrt(np.sum(np.square(errors))) / len(errors))
    rrs_wor = next(line for line in lines if " rrs_wor " in line)
    assert rrs_wor.split()[-2:] == [f"{estimate['mean']:.4f}*", f"({estimate['monte_carlo_error_of_mean']:.2g})"]
    optimum = next(line for line in lines if " optimum_iid " in line)
    assert "*" not in optimum


def test_the_reading_example_of_the_docs_runs(swept, monkeypatch, capsys):
    """docs/sweep.md's Python example, as written, on a sweep folder named as it says."""
    config, _ = swept
    (example,) = re.findall(r"```python\n(.*?)```", DOCS.read_text(), flags=re.S)
    monkeypatch.chdir(Path(config.out).parent)
    exec(compile(example, str(DOCS), "exec"), {})
    printed = capsys.readouterr().out.split()
    table = read_table(config.out)
    chosen = table.filter(pc.and_(pc.equal(table["computation"], "optimum_iid"), pc.equal(table["k"], 2)))
    assert printed[0] == "8" and float(printed[-1]) == pytest.approx(np.mean(chosen["value"].to_pylist()))


def test_help_states_true_defaults_in_the_options_syntax():
    """``--no-figures`` said ``(default: True)`` although giving it turns figures off; the
    tuple defaults were shown as Python tuples the options do not accept."""
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.choices and "sweep" in a.choices).choices
    for command in ("sweep", "corpus"):
        text = subparsers[command].format_help()
        assert "(default: True)" not in text and "(default: False)" not in text
        assert "(default: (" not in text and "(default: None)" not in text
    sweep_help = " ".join(subparsers["sweep"].format_help().split())
    assert "(default: 1,2,3,4,5,6,7,8)" in sweep_help
    assert "do not draw the figures (drawn by default)" in sweep_help


def test_corpus_settings_are_checked_before_any_model_loads(tmp_path, capsys):
    """``--shard-size 0`` was refused only after every text had been scored."""
    status = main(["corpus", "--pair", f"{tmp_path / 'a'},{tmp_path / 'b'}", "--shard-size", "0",
                   "--out", str(tmp_path / "c"), "--quiet"])
    err = capsys.readouterr().err
    assert status == 2
    assert err.strip() == "otm corpus: error: --shard-size must be an integer >= 1, got 0"


def test_a_folder_that_is_no_model_is_named_so(tmp_path, capsys):
    """An empty folder as a model asked for sentencepiece."""
    empty = tmp_path / "empty"
    empty.mkdir()
    status = main(["corpus", "--pair", f"{empty},{empty}", "--out", str(tmp_path / "c"), "--quiet"])
    err = capsys.readouterr().err
    assert status == 2
    assert f"{str(empty)!r} is not a Hugging Face model folder (no config.json)" in err
    assert len(err.strip().splitlines()) == 1


def test_the_corpus_writer_refuses_a_shard_size_below_one(tmp_path):
    from otm.corpus import CorpusWriter

    with pytest.raises(InvalidArgumentError, match="shard_size must be an integer >= 1"):
        CorpusWriter(tmp_path / "c", vocab_size=4, shard_size=0)
    assert not (tmp_path / "c").exists()
