"""What a person or a program touches first: every ``--json`` is JSON on stdout and nothing
else (run as a separate process, as a pipe into a JSON parser sees it), the solver never
writes to the console, and bad arguments are one line with exit status 2, never the
"unexpected ... please report it" reserved for bugs."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from otm_app.cli import build_parser, main
from proofs.table4 import METHODS, reproduction_verdict
from tests.decoding.corpus_support import synthetic_corpus


def _otm(*argv: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "otm_app.cli", *argv], capture_output=True, text=True, cwd=cwd,
                          timeout=600)


def _json_commands() -> set:
    """The subcommands whose parser has ``--json``."""
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return {name for name, parser in sub.choices.items() if any("--json" in a.option_strings for a in parser._actions)}


def test_a_highs_solver_writes_nothing_to_stdout():
    """HiGHS 1.16 prints a banner from C++ when a ``Highs`` object is made; the backend's
    object must not (checked at the file descriptor, in a fresh process)."""
    code = ("import numpy as np, otm;"
            "from solvers.highs import new_highs; new_highs(); new_highs();"
            "p = np.array([0.5, 0.3, 0.2]); q = np.array([0.2, 0.3, 0.5]);"
            "otm.solve_optimum(p, q, 2, method='full_lp')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""


@pytest.fixture(scope="module")
def json_runs(tmp_path_factory):
    """Every ``--json`` subcommand on small inputs, each in its own process: ``{name: [runs]}``."""
    tmp = tmp_path_factory.mktemp("json")
    synthetic_corpus(tmp, seed=0, rows=4, vocab=12)
    recording = tmp / "run.npz"
    runs = {
        "acceptance": [_otm("acceptance", "--example", "spechub-fig5", "--json"),
                       _otm("acceptance", "--example", "spechub-fig5", "--method", "full_lp", "--json")],
        "theorems": [_otm("theorems", "--paper", "khisti", "--instances", "2", "--json")],
        "reproduce": [_otm("reproduce", "list", "--json"), _otm("reproduce", "spechub-table4", "--pairs", "2", "--json")],
        "decode": [_otm("decode", "--pair", "tiny", "--rule", "importance_sampling_truncated", "--prompt", "1,2,3",
                        "--max-new-tokens", "4", "--json"),
                   _otm("decode", "--pair", "tiny", "--rule", "rrs", "--prompt", "1,2,3", "--max-new-tokens", "4",
                        "--record", str(recording), "--json")],
        "sweep": [_otm("sweep", str(tmp / "corpus"), "--out", str(tmp / "sweep"), "--ks", "1-2", "--temperatures", "1",
                       "--computations", "optimum_iid,rrs", "--workers", "1", "--no-figures", "--quiet", "--json")],
        "report": [_otm("report", "--no-models", "--out", str(tmp / "report"), "--k-max", "2", "--temperatures", "1",
                        "--sweep-positions", "2", "--positions", "2", "--quiet", "--json")],
    }
    runs["validate"] = [_otm("validate", str(recording), "--json")]
    return runs


def test_every_json_command_is_covered(json_runs):
    assert set(json_runs) == _json_commands()


@pytest.mark.parametrize("command", sorted(_json_commands()))
def test_json_stdout_is_one_json_document(json_runs, command):
    for done in json_runs[command]:
        assert done.returncode in (0, 1, 3), f"{done.args}: {done.stderr[-2000:]}"
        json.loads(done.stdout)  # the whole of stdout, banner-free
        assert "unexpected" not in done.stderr, done.stderr[-2000:]


def test_report_without_models(json_runs):
    """The no-models report of the runs above: toy mode, the theorem suite, report.md, figures
    (one run of the theorem suite serves both tests)."""
    (done,) = json_runs["report"]
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert summary["mode"] == "toy"
    assert summary["theorems"]
    assert (Path(summary["out"]) / "report.md").exists()
    assert summary["figures"]


def run(capsys, *argv):
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("argv, says", [
    (("theorems", "--instances", "0"), "instances must be an integer in 1.."),
    (("theorems", "--instances", "-1"), "instances must be an integer in 1.."),
    (("theorems", "--instances", "1000000000000"), "instances must be an integer in 1.."),
    (("reproduce", "spechub-table4", "--pairs", "1000000000000"), "pairs must be an integer in 2.."),
    (("report", "--no-models", "--k-max", "100000"), "--k-max must be in 1..32"),
    (("report", "--no-models", "--out", "/dev/null/x"), "cannot make this folder"),
    (("report", "--texts", "/nonexistent.txt", "--no-decode"), "unknown built-in text"),
    (("acceptance", "--example", "spechub-fig5", "--temperature", "nan"), "temperature must be a finite number"),
    (("acceptance", "--example", "spechub-fig5", "--time-budget", "-1"), "--time-budget"),
    (("acceptance", "--target", "/nonexistent.npy", "--draft", "/nonexistent.npy"), "no such file"),
    (("acceptance", "--target", "/tmp", "--draft", "/nonexistent.npy"),
     "--target: /tmp is a directory; expected a .npy or .json file of numbers"),
    (("decode", "--pair", "tiny", "--prompt", "1,2", "--max-new-tokens", "0"), "--max-new-tokens"),
    (("decode", "--pair", "tiny", "--prompt", "1,2", "--top-p", "nan"), "--top-p"),
    (("decode", "--pair", "tiny", "--prompt", "1,2", "--device", "bogus"), "not a torch device"),
    (("decode", "--pair", "tiny", "--prompt", "1,2", "--rule", "traversal", "--tree", "kary:2,40"), "MAX_TREE_NODES"),
    (("decode", "--pair", "tiny", "--prompt", "1,2", "--tree", "chain:1000000000"), "MAX_TREE_NODES"),
    (("decode", "--pair", "tiny", "--prompt", "1,2", "--record", "/dev/null/x.npz"), "--record"),
    (("decode", "--pair", "/tmp,/tmp", "--prompt", "hi"), "not a Hugging Face model folder"),
    (("validate", "/nonexistent.npz"), "no such recording"),
    (("validate", "/etc/passwd"), "not a readable otm decode recording"),
    (("sweep", "/nonexistent"), "not an otm corpus"),
    (("sweep", "/nonexistent", "--ks", "100000000"), "--ks"),
    (("sweep", "/nonexistent", "--scheduler", "garbage://x"), "not a scheduler address"),
    (("corpus", "--pair", "tiny", "--shard-size", "0"), "--shard-size"),
])
def test_bad_arguments_are_refused_before_any_work(capsys, argv, says):
    status, out, err = run(capsys, *argv)
    assert status == 2
    assert says in err
    assert "unexpected" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert out == ""


def test_acceptance_at_a_huge_k_answers(capsys):
    """The rules' cost estimate at k = 10^6 overflowed a float (``float(k) ** k``)."""
    status, out, err = run(capsys, "acceptance", "--example", "spechub-fig5", "-k", "1000000", "--json")
    assert status == 0, err
    summary = json.loads(out)
    assert summary["optimal"]["iid"] == pytest.approx(1.0)
    assert "longer than the age of the universe" in summary["notes"]["rules.rrs_wor"]


def test_theorems_that_check_nothing_do_not_succeed(capsys, monkeypatch):
    import otm_app.commands.theorems as command

    rows = [{"id": "a.b", "status": "not checkable", "instances": 0, "worst_slack": None, "method": "", "note": "x",
             "counterexample": None}]
    monkeypatch.setattr(command, "run_theorems", lambda **kwargs: rows)
    status, _, err = run(capsys, "theorems")
    assert status == 1
    assert "nothing was checked" in err


def _table(entries: dict, reading: str = "stated") -> dict:
    """A Table 4 result whose every entry is ``entries.get(method, default)``: (mean, se, paper)."""
    cells = []
    for T in (0.1, 0.5):
        methods = {}
        for m in METHODS:
            mean, se, paper = entries.get((T, m), (0.5, 0.01, 0.5))
            methods[m] = {"mean": mean, "se": se, "paper": paper, "z": (mean - paper) / se if se > 1e-12 else None}
        cells.append({"T": T, "lam": 0.7, "methods": methods})
    return {"reading": reading, "cells": cells}


def test_table4_verdict_says_whether_it_reproduces():
    assert reproduction_verdict(_table({}))["reproduces"]
    off = reproduction_verdict(_table({(0.5, "RRS"): (0.56, 0.01, 0.5)}))  # 6 s.e. away
    assert not off["reproduces"] and off["agree"] == off["entries"] - 1
    assert "--reading gaussian_logits" in off["note"]
    flat = reproduction_verdict(_table({(0.1, "OTM"): (1.0, 0.0, 0.9037)}))  # every pair 1: no z, still off
    assert not flat["reproduces"]
    assert "--reading" not in reproduction_verdict(_table({(0.5, "RRS"): (0.56, 0.01, 0.5)}, "gaussian_logits"))["note"]


def test_reproduce_prints_its_verdict_and_lists_tables(capsys):
    status, out, _ = run(capsys, "reproduce", "spechub-table4", "--pairs", "3")
    assert status == 0
    assert "reproduce" in out.strip().splitlines()[-1]
    status, out, _ = run(capsys, "reproduce", "list")
    assert status == 0 and "spechub-table4" in out and "gaussian_logits" in out


def test_help_texts_say_each_default_once(capsys):
    """``(default: ...)`` once per option, never ``(default: None)`` after a help text that
    already says what the default is, nor ``(default: True)`` on a switch that turns something off."""
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name, parser in sub.choices.items():
        text = " ".join(parser.format_help().split())
        for action in parser._actions:
            if not action.option_strings or action.help in (None, "==SUPPRESS=="):
                continue
            help_text = " ".join(parser._get_formatter()._expand_help(action).split())
            assert help_text.count("(default:") <= 1, f"otm {name} {action.option_strings[0]}: {help_text}"
            if "default" in (action.help or "").lower():
                assert "(default: None)" not in help_text, f"otm {name} {action.option_strings[0]}: {help_text}"
            if action.option_strings[0].startswith("--no-"):
                assert "(default: True)" not in help_text, f"otm {name} {action.option_strings[0]}: {help_text}"
        assert text


def test_no_documented_option_lacks_help(capsys):
    """Every option of every subcommand says what it is (``--seed`` and ``--json`` included)."""
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    missing = [f"otm {name} {a.option_strings[0]}" for name, parser in sub.choices.items()
               for a in parser._actions if a.option_strings and a.help is None]
    assert not missing, missing


def _parsed(*argv):
    return build_parser().parse_args(list(argv))


def test_draft_counts_have_one_name_per_meaning_across_commands():
    """As ``--temperature``/``--temperatures`` and ``--top-p``/``--top-ps``: ``-k/--k`` is one
    draft count (``acceptance``), ``--ks`` a list of them (``sweep``), ``--k-max K`` every
    ``k = 1..K`` (``report``, whose ``-k`` meant that). Each command's help names its own."""
    for flag in ("-k", "--k"):
        assert _parsed("acceptance", flag, "3").k == 3
    assert _parsed("sweep", "corpus", "--ks", "2,4").ks == (2, 4)
    assert _parsed("sweep", "corpus", "--ks", "1-3").ks == (1, 2, 3)
    assert _parsed("report", "--k-max", "3").k_max == 3
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert "-k K, --k K" in sub.choices["acceptance"].format_help()
    assert "--ks KS" in sub.choices["sweep"].format_help()
    report_help = sub.choices["report"].format_help()
    assert "--k-max K" in report_help and " -k " not in report_help and "--k " not in report_help


@pytest.mark.parametrize("argv, says", [
    # -k is one count elsewhere; in report it was --k-max (and --k would abbreviate it)
    (("report", "-k", "3"), "otm report takes --k-max K"),
    (("report", "--k", "3"), "otm report takes --k-max K"),
    (("sweep", "corpus", "-k", "2"), "unrecognized arguments: -k"),
    (("report", "--rule-positions", "4"), "unrecognized arguments: --rule-positions"),
    (("report", "--wor-positions", "4"), "unrecognized arguments: --wor-positions"),
    (("theorems", "--paper", "beyond"), "invalid choice: 'beyond'"),  # now theory, like sequences: its document
    (("acceptance", "--sampling", "iid"), "--sampling is now --draft-scheme"),
    (("acceptance", "--sampling"), "--sampling is now --draft-scheme"),
    (("corpus", "--model-dtype", "float32"), "--model-dtype is now --dtype"),
])
def test_removed_spellings_are_one_line_errors(capsys, argv, says):
    with pytest.raises(SystemExit) as stopped:
        main(list(argv))
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1, err


def test_a_draft_scheme_is_draft_scheme_everywhere():
    """``--draft-scheme`` on the command line, as ``draft_scheme=`` in the Python API and a
    rule's ``draft_scheme`` in the registry."""
    assert _parsed("acceptance").draft_scheme == "iid"
    assert _parsed("acceptance", "--draft-scheme", "without_replacement").draft_scheme == "without_replacement"
    help_text = next(a for a in build_parser()._actions if a.dest == "command").choices["acceptance"].format_help()
    assert "--draft-scheme" in help_text and "--sampling" not in help_text


def test_dtype_is_the_models_dtype_in_every_command():
    """``--dtype`` is the dtype the models run in for corpus as for decode and report (float64
    was never a storage dtype); the corpus' storage is ``--logits-dtype``."""
    for command in ("decode", "report", "corpus"):
        assert _parsed(command, "--dtype", "float64").dtype == "float64"
    assert _parsed("decode").dtype == _parsed("report").dtype == _parsed("corpus").dtype == "bfloat16"
    corpus = _parsed("corpus", "--logits-dtype", "float32")
    assert (corpus.dtype, corpus.logits_dtype) == ("bfloat16", "float32")
    assert _parsed("corpus").logits_dtype == "float16"


def test_corpus_says_both_dtypes_at_start(capsys, tmp_path):
    status, out, err = run(capsys, "corpus", "--pair", "tiny", "--out", str(tmp_path / "c"), "--dtype", "float32",
                           "--logits-dtype", "float32")
    assert status == 0, err
    assert err.splitlines()[0] == "models in float32, logits stored as float32"
    assert json.loads((tmp_path / "c" / "corpus.json").read_text())["dtype"] == "float32"
    status, out, err = run(capsys, "corpus", "--pair", "tiny", "--out", str(tmp_path / "q"), "--quiet")
    assert status == 0 and "models in" not in err, err


@pytest.mark.parametrize("argv, new", [
    (("acceptance", "--example", "spechub-fig5", "--sampling", "iid"), "--draft-scheme"),
    (("corpus", "--pair", "tiny", "--model-dtype", "float32"), "--dtype"),
])
def test_old_spellings_are_refused_in_a_process(argv, new):
    done = _otm(*argv)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and new in done.stderr, done.stderr


def test_the_toolkits_own_results_are_the_paper_theory():
    assert _parsed("theorems", "--paper", "theory").paper == "theory"
