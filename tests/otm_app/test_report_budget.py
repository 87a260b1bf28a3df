"""``otm report``'s load probe (otm_app/report/budget.py) on a fake ``/proc``: only the
runnable threads of other processes count, never the report's own process or its children."""
import os
import threading

import pytest

from otm_app.report import budget


def _process(proc, pid, ppid, states, name="python", session=None):
    """A fake ``proc/<pid>`` with ``stat``, ``autogroup`` and one ``task/<tid>/stat`` per thread state."""
    folder = proc / str(pid)
    (folder / "task").mkdir(parents=True)
    (folder / "stat").write_text(f"{pid} ({name}) {states[0]} {ppid} 1 1 0 -1\n")
    (folder / "autogroup").write_text(f"/autogroup-{session or pid} nice 0\n")
    for index, state in enumerate(states):
        tid = pid if index == 0 else pid * 100 + index
        (folder / "task" / str(tid)).mkdir()
        (folder / "task" / str(tid) / "stat").write_text(f"{tid} ({name}) {state} {ppid} 1 1 0 -1\n")


@pytest.fixture
def proc(tmp_path):
    """Us (pid 10) with four spinning torch threads, a Dask worker child (11, two busy
    threads) and its own child (12); others: a busy pytest (20, three runnable of five
    threads, a command name with spaces and parentheses), an idle shell (21), and the loop
    parent 1."""
    root = tmp_path / "proc"
    _process(root, 1, 0, "S")
    _process(root, 10, 1, "RRRRS")
    _process(root, 11, 10, "RR")
    _process(root, 12, 11, "R")
    _process(root, 20, 1, "RRRSS", name="py (test) x", session=7)
    _process(root, 21, 1, "S", name="bash", session=7)
    _process(root, 22, 21, "R", session=7)  # the busy pytest's session: one share of the cores
    _process(root, 30, 1, "R", session=9)
    (root / "sys" / "kernel").mkdir(parents=True)
    (root / "sys" / "kernel" / "sched_autogroup_enabled").write_text("1\n")
    (root / "loadavg").write_text("9.1 5 3 12/188 20586\n")  # not a process: ignored
    return root


def test_process_tree_is_us_and_our_descendants(proc):
    assert budget.process_tree(10, proc) == {10, 11, 12}
    assert budget.process_tree(1, proc) == {1, 10, 11, 12, 20, 21, 22, 30}


def test_only_other_processes_runnable_threads_count(proc, monkeypatch):
    """The old probe measured our share of a core, so our own spinning threads and live Dask
    workers counted as other work (x8.6 before step 3); now they are left out."""
    assert budget.runnable_threads({10, 11, 12}, proc) == 5
    assert budget.runnable_threads(set(), proc) == 12
    assert budget.runnable_threads({10, 11, 12}, proc, by_session=True) == 2  # sessions 7 and 9
    monkeypatch.setattr(budget.os, "getpid", lambda: 10)
    assert budget.other_busy_threads(proc, samples=3, pause=0.0) == 2.0
    (proc / "sys" / "kernel" / "sched_autogroup_enabled").write_text("0\n")
    assert budget.other_busy_threads(proc, samples=3, pause=0.0) == 5.0


def test_the_probe_averages_its_samples(proc, monkeypatch):
    monkeypatch.setattr(budget.os, "getpid", lambda: 10)
    counts = iter([3, 0, 6, 3])
    monkeypatch.setattr(budget, "runnable_threads", lambda ours, proc, by_session: next(counts))
    assert budget.other_busy_threads(proc, samples=4, pause=0.0) == 3.0


def test_a_thread_that_ends_while_read_is_skipped(proc, monkeypatch):
    """A process or thread may end between listing and reading: it is not counted, no error."""
    real = budget._read
    monkeypatch.setattr(budget, "_read", lambda path: None if path.parent.name == "2001" else real(path))
    assert budget.runnable_threads({10, 11, 12}, proc) == 4


def test_no_proc_means_no_other_load(tmp_path):
    assert budget.other_busy_threads(tmp_path / "missing", samples=2, pause=0.0) == 0.0


def test_this_reading_thread_is_runnable_in_the_real_proc():
    """On the machine itself the probe's own thread reads as runnable, which is why the
    report's process is left out of the count."""
    stat = budget.PROC / str(os.getpid()) / "task" / str(threading.get_native_id()) / "stat"
    if not stat.is_file():
        pytest.skip("no /proc")
    assert budget._stat(stat.read_text()) == ("R", os.getppid())
    assert os.getpid() in budget.process_tree(os.getppid())


def test_the_models_work_is_shared_by_their_threads():
    """The models' cost is one core's work, divided among their threads; the kernels run on one."""
    one = budget.decoding_parts(2e9, 151_936, 20, 24, 48, 27, {"rrs": 7}, 1)
    two = budget.decoding_parts(2e9, 151_936, 20, 24, 48, 27, {"rrs": 7}, 2)
    assert two[0] == (pytest.approx(one[0][0] / 2), 2) and one[1] == two[1] == (pytest.approx(48 * 7 * budget.DEFAULT_KERNEL_SECONDS), 1)
    assert budget.load_and_score_parts(2e9, 800, 2)[0][0] == pytest.approx(budget.load_and_score_parts(2e9, 800, 1)[0][0] / 2)


def test_step_3_runs_the_models_on_a_fixed_thread_count(monkeypatch):
    """A bfloat16 product's rounding on the CPU depends on the thread count, so step 3 runs on
    DECODE_THREADS whatever the machine (its numbers once moved with the core count), and
    gives the thread count back afterwards."""
    import torch

    from otm_app.configs import ReportConfig
    from otm_app.report import run
    from otm_app.report.sources import load_report_pair, score_report_texts

    pair = load_report_pair("tiny")
    scored = score_report_texts(pair, [], 0)
    seen = []
    monkeypatch.setattr(run, "_decode_step", lambda *args: seen.append(torch.get_num_threads()) or ({}, {}, {}))
    monkeypatch.setattr(budget, "other_busy_threads", lambda: 0.0)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        run._decode(ReportConfig(pair="tiny"), pair, scored, [], budget.StepClock(quiet=True), None)
        assert seen == [run.DECODE_THREADS] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_where_sessions_share_the_cores_a_step_gets_its_sessions_share(monkeypatch):
    """With autogroup each busy session gets an equal share of the cores, whatever its threads:
    the report's threads share one session's, and sessions of one thread leave the rest."""
    monkeypatch.setattr(budget.os, "cpu_count", lambda: 2)
    assert budget.slowdown(1, 0.0, by_session=True) == 1.0 and budget.slowdown(2, 1.0, by_session=True) == 2.0
    assert budget.slowdown(1, 3.0, by_session=True) == 2.0 and budget.slowdown(2, 3.0, by_session=True) == 4.0
    assert budget.slowdown(2, 3.0, by_session=False) == 2.5  # threads shared fairly


def test_no_autogroup_file_means_threads_share_fairly(tmp_path):
    assert budget.shares_by_session(tmp_path) is False


def test_step_3_gets_the_texts_without_their_logits():
    """Step 3 held every text's teacher-forced logits (2 x rows x V float32, 0.9 GB for the
    built-in texts) beside both models; it reads only the texts' token ids and row counts."""
    from otm_app.report.run import without_logits
    from otm_app.report.sources import load_report_pair, score_report_texts

    scored = score_report_texts(load_report_pair("tiny"), [], 0)
    light = without_logits(scored)
    assert [s.n_positions for s in light.scores] == [s.n_positions for s in scored.scores]
    assert (light.text_of_row == scored.text_of_row).all() and light.kinds == scored.kinds
    assert all((a.token_ids == b.token_ids).all() for a, b in zip(light.scores, scored.scores))
    assert all(s.target_logits.nbytes == s.draft_logits.nbytes == 0 for s in light.scores)


def test_each_decode_gives_its_free_heap_back(monkeypatch):
    """Each decode allocates and frees [nodes, V] tensors of a few MB at every step; the C heap
    kept their high-water mark (step 3's resident memory crept up by about 0.5 GB over the
    default decodes), so the heap is trimmed after each decode, and calling it is harmless."""
    from otm_app.report import decode
    from otm_app.report.sources import load_report_pair

    decode.release_free_heap()
    calls = []
    monkeypatch.setattr(decode, "release_free_heap", lambda: calls.append(1))
    pair = load_report_pair("tiny")
    rows = decode.decode_rules(pair, [("a", [1, 2, 3]), ("b", [4, 5])], ["rrs", "single"], "binary:2", 1.0, 3, 0, progress=False)
    assert len(rows) == 2 and len(calls) == 4  # 2 rules x 2 prompts
