"""The ``otm`` command line: each subcommand end to end on small inputs, and bad input
as a clear error with exit status 2 (never a traceback or a NaN)."""
import json

import numpy as np
import pytest

from otm_app.cli import main


def run(capsys, *argv):
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_acceptance_json_on_files(tmp_path, capsys):
    np.save(tmp_path / "p.npy", np.array([0.1, 0.6, 0.3]))
    (tmp_path / "q.json").write_text("[0.5, 0.3, 0.2]")
    status, out, _ = run(capsys, "acceptance", "--target", str(tmp_path / "p.npy"), "--draft", str(tmp_path / "q.json"), "-k", "2", "--json")
    summary = json.loads(out)
    assert status == 0
    assert summary["vocab_size"] == 3
    assert summary["k"] == 2
    assert summary["optimal"]["iid"] == pytest.approx(0.85)
    assert summary["optimal"]["without_replacement"] == pytest.approx(1.0)
    assert summary["rules"]["spechub"] == pytest.approx(1.0)
    assert summary["rules"]["rrs_wor"] == pytest.approx(0.94)
    assert all(v is None or v <= summary["optimal"]["without_replacement"] + 1e-12 for v in summary["rules"].values())


def test_acceptance_with_logits_and_temperature_zero(tmp_path, capsys):
    (tmp_path / "p.json").write_text("[2.0, 1.0, 0.0]")
    (tmp_path / "q.json").write_text("[0.0, 1.0, 2.0]")
    status, out, _ = run(capsys, "acceptance", "--target", str(tmp_path / "p.json"), "--draft", str(tmp_path / "q.json"),
                         "-k", "1", "--logits", "--temperature", "0", "--json")
    assert status == 0
    assert json.loads(out)["optimal"]["iid"] == 0.0  # disjoint one-hots


@pytest.mark.parametrize("content, message", [("[0.5, NaN]", "NaN"), ("[0.5, 0.2]", "sums to"), ("[1.5, -0.5]", "negative")])
def test_bad_input_is_a_clear_error(tmp_path, capsys, content, message):
    (tmp_path / "p.json").write_text(content)
    (tmp_path / "q.json").write_text("[0.5, 0.5]")
    status, out, err = run(capsys, "acceptance", "--target", str(tmp_path / "p.json"), "--draft", str(tmp_path / "q.json"))
    assert status == 2
    assert message in err
    assert "Traceback" not in err


def test_length_mismatch_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "p.json").write_text("[0.5, 0.5]")
    (tmp_path / "q.json").write_text("[0.2, 0.3, 0.5]")
    status, _, err = run(capsys, "acceptance", "--target", str(tmp_path / "p.json"), "--draft", str(tmp_path / "q.json"))
    assert status == 2
    assert "same vocabulary" in err


def test_theorems_json(capsys):
    status, out, _ = run(capsys, "theorems", "--paper", "leviathan", "--instances", "2", "--json")
    rows = json.loads(out)
    assert status == 0
    assert rows
    assert all({"id", "paper", "claim", "method", "instances", "worst_slack", "status"} <= set(r) for r in rows)


def test_decode_tree_record_and_validate(tmp_path, capsys):
    record = tmp_path / "run.npz"
    status, out, _ = run(capsys, "decode", "--pair", "tiny", "--rule", "spechub", "--tree", "binary:2", "--temperature", "1",
                         "--max-new-tokens", "6", "--prompt", "1,2,3", "--record", str(record), "--json")
    summary = json.loads(out)
    assert status == 0
    assert summary["tokens_generated"] >= 6
    assert 1 <= summary["block_efficiency"] <= 3
    assert {"rule", "tree", "target_calls", "acceptance_by_depth", "wall_seconds"} <= set(summary)
    status, out, _ = run(capsys, "validate", str(record), "--json")
    assert status == 0
    assert "spechub" in out


def test_decode_ensemble(capsys):
    status, out, _ = run(capsys, "decode", "--pair", "tiny", "--rule", "ensemble_contrastive", "--mu", "0.2", "--temperature", "1",
                         "--max-new-tokens", "5", "--prompt", "1,2", "--json")
    summary = json.loads(out)
    assert status == 0
    assert summary["tokens_generated"] == 5
    assert len(summary["model_calls"]) == 2


@pytest.mark.parametrize("option, says", [
    (("--top-p", "0.9"), "--top-p does not apply to --rule ensemble_weighted"),
    (("--tree", "chains:2,2"), "--tree does not apply to --rule ensemble_weighted"),
])
def test_decode_ensemble_refuses_options_it_would_ignore(capsys, option, says):
    """The speculative ensemble samples r = E(q, p) along chains: a nucleus or a draft tree
    was silently ignored; now a one-line error before any model is loaded."""
    status, out, err = run(capsys, "decode", "--pair", "tiny", "--rule", "ensemble_weighted", *option,
                           "--max-new-tokens", "3", "--prompt", "1,2", "--json")
    assert status == 2 and out == ""
    assert says in err and _one_line(err), err


def test_decode_ensemble_takes_top_p_one_as_none(capsys):
    status, out, err = run(capsys, "decode", "--pair", "tiny", "--rule", "ensemble_weighted", "--top-p", "1",
                           "--max-new-tokens", "3", "--prompt", "1,2", "--json")
    assert status == 0, err
    assert json.loads(out)["tokens_generated"] == 3


def test_decode_without_tree_uses_the_default_two_chains(capsys):
    status, out, _ = run(capsys, "decode", "--pair", "tiny", "--rule", "rrs", "--prompt", "1,2", "--max-new-tokens", "4", "--json")
    assert status == 0
    assert json.loads(out)["tree"] == "chains:2,4"


def _one_line(err: str) -> bool:
    return len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("name, write", [
    ("p.json", lambda path: path.write_text('{"p": [0.5, 0.5]}')),
    ("p.json", lambda path: path.write_text("[0.5, ")),
    ("p.npy", lambda path: np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)),
    ("p.txt", lambda path: path.write_text("0.5 0.5")),
])
def test_malformed_files_are_one_line_errors_naming_the_option(tmp_path, capsys, name, write):
    write(tmp_path / name)
    (tmp_path / "q.json").write_text("[0.5, 0.5]")
    status, _, err = run(capsys, "acceptance", "--target", str(tmp_path / name), "--draft", str(tmp_path / "q.json"))
    assert status == 2
    assert _one_line(err)
    assert "--target" in err


def test_a_bad_draft_file_is_reported_as_the_draft(tmp_path, capsys):
    (tmp_path / "p.json").write_text("[0.5, 0.5]")
    (tmp_path / "q.json").write_text("[0.7, 0.7]")
    status, _, err = run(capsys, "acceptance", "--target", str(tmp_path / "p.json"), "--draft", str(tmp_path / "q.json"))
    assert status == 2
    assert "q (draft, --draft)" in err


def test_usage_errors_are_one_line_with_exit_2(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["reproduce", "spechub-table4", "--reading", "foo"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert _one_line(err)
    assert "gaussian_logits" in err


def test_cuda_on_a_cpu_build_is_a_one_line_error(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    status, _, err = run(capsys, "decode", "--pair", "tiny", "--prompt", "1,2", "--device", "cuda")
    assert status == 2
    assert _one_line(err)
    assert "--device cpu" in err


def test_an_unexpected_error_is_one_line_too(capsys, monkeypatch):
    from otm_app.commands import acceptance

    monkeypatch.setattr(acceptance, "load_pair", lambda config: (_ for _ in ()).throw(RuntimeError("boom")))
    status, _, err = run(capsys, "acceptance", "--example", "spechub-fig5")
    assert status == 2
    assert _one_line(err)
    assert "boom" in err
    assert "OTM_TRACEBACK" in err


def test_decode_help_shows_defaults_and_the_rules(capsys):
    with pytest.raises(SystemExit):
        main(["decode", "--help"])
    out = capsys.readouterr().out
    assert "chains:2,4" in out
    assert "(default: rrs)" in out
    assert "importance_sampling_truncated" in out


def test_acceptance_names_the_method_and_each_rule_law(capsys):
    status, out, _ = run(capsys, "acceptance", "--example", "spechub-fig5")
    assert status == 0
    assert "(prefix_scan)" in out
    assert "(hub drafts)" in out
    assert "(greedy drafts)" in out


def test_acceptance_on_an_ordinary_vocabulary_answers_in_seconds_and_says_what_it_skipped(tmp_path, capsys):
    rng = np.random.default_rng(0)
    np.save(tmp_path / "p.npy", rng.dirichlet(np.ones(1000)))
    np.save(tmp_path / "q.npy", rng.dirichlet(np.ones(1000)))
    status, out, _ = run(capsys, "acceptance", "--target", str(tmp_path / "p.npy"), "--draft", str(tmp_path / "q.npy"), "--json")
    summary = json.loads(out)
    assert status == 0
    assert summary["wall_seconds"] < 30
    assert summary["rules"]["importance_sampling"] is None
    assert "skipped" in summary["notes"]["rules.importance_sampling"]
    assert summary["rules"]["rrs_wor"] is not None  # the k = 2 closed form


def test_acceptance_prices_the_rules_by_the_drafts_support_not_the_vocabulary(tmp_path, capsys):
    """A draft on 3 of 151,936 tokens (a top-k draft) has 9 draft tuples at k = 2: the rules
    without a closed form are computed, not skipped as 80 days of work (the estimate used to
    count tuples over the whole vocabulary); those that attain their law's optimum equal it."""
    vocab = 151_936
    p = np.random.default_rng(0).dirichlet(np.full(vocab, 0.1))
    q = np.zeros(vocab)
    q[np.argsort(-p)[[0, 5, 50]]] = [0.5, 0.3, 0.2]
    np.save(tmp_path / "p.npy", p)
    np.save(tmp_path / "q.npy", q)
    status, out, _ = run(capsys, "acceptance", "--target", str(tmp_path / "p.npy"), "--draft", str(tmp_path / "q.npy"), "--json")
    summary = json.loads(out)
    assert status == 0
    for rule, law in [("importance_sampling", "iid"), ("importance_sampling_wor", "without_replacement"),
                      ("optimal_wor", "without_replacement")]:
        assert summary["rules"][rule] == pytest.approx(summary["optimal"][law], abs=1e-9), (rule, summary["notes"])
    assert summary["rules"]["importance_sampling_truncated"] is not None


def test_validate_prints_a_verdict_first(tmp_path, capsys):
    record = tmp_path / "run.npz"
    run(capsys, "decode", "--pair", "tiny", "--rule", "rrs", "--tree", "binary:2", "--max-new-tokens", "6",
        "--prompt", "1,2,3", "--record", str(record), "--json")
    status, out, _ = run(capsys, "validate", str(record))
    assert status == 0
    assert out.splitlines()[0].startswith("PASS")


@pytest.fixture
def refusing_third_walk(monkeypatch) -> list:
    """The decode loop's tree walk raises a verifier's typed refusal at its third call (as
    ``optimal_wor`` refuses a walk its bounds and its nesting's time limit leave open); the
    list of calls made, which a test may set to move the refusal."""
    from decoding.runtime import loop
    from otm.errors import NotApplicableError

    original, calls = loop.walk_tree, []

    def refuse_third(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise NotApplicableError("optimal_wor: this walk is left open")
        return original(*args, **kwargs)

    monkeypatch.setattr(loop, "walk_tree", refuse_third)
    return calls


def test_decode_keeps_what_it_generated_when_a_verifier_refuses(refusing_third_walk, capsys):
    """A verifier's typed refusal part-way through a decode (as ``optimal_wor`` refuses a walk
    that neither its bounds nor its nesting's time limit settle) is one error line and exit
    status 2, and the tokens generated before it are printed, as text or under ``--json``;
    a refusal at the first step prints no token."""
    calls = refusing_third_walk
    argv = ("decode", "--pair", "tiny", "--rule", "rrs", "--tree", "chains:2,2", "--max-new-tokens", "40",
            "--prompt", "1,2,3")
    status, out, err = run(capsys, *argv)
    assert status == 2
    (line,) = err.strip().splitlines()[-1:]
    assert line.startswith("otm decode: error: optimal_wor: this walk is left open (the decode stopped there, after ")
    made = int(line.split("after ")[1].split(" new tokens")[0])
    assert 2 <= made <= 6  # two steps of at most two drafts and one more token each
    assert "generated before the verifier stopped" in out
    assert len(out.strip().splitlines()[-1].replace(",", " ").split()) == made  # the tiny pair prints ids
    calls.clear()
    status, out, _ = run(capsys, *argv, "--json")
    assert status == 2
    stopped = json.loads(out)
    assert "left open" in stopped["stopped"] and len(stopped["texts"]) == 1
    calls[:] = [1, 1]  # the next call, the first step, refuses
    status, out, err = run(capsys, *argv)
    assert status == 2 and "after 0 new tokens in 1 target calls" in err


def test_a_stopped_decode_saves_its_recording(refusing_third_walk, tmp_path, capsys):
    """With ``--record``, a decode that a verifier stops part-way saves the verifications made
    before the refusal (the refusal in ``meta["stopped"]``) and says where; ``otm validate``
    reads it. A refusal before any verification writes nothing."""
    from decoding.runtime.recording import load_recording

    calls = refusing_third_walk
    record = tmp_path / "stopped.npz"
    argv = ("decode", "--pair", "tiny", "--rule", "rrs", "--tree", "chains:2,2", "--max-new-tokens", "40",
            "--prompt", "1,2,3", "--record", str(record))
    status, out, _ = run(capsys, *argv, "--json")
    assert status == 2
    stopped = json.loads(out)
    assert stopped["record"] == str(record)
    recording = load_recording(record)
    assert "left open" in recording.meta["stopped"]
    assert set(recording.arrays["step"].tolist()) == {0, 1}  # the two steps before the refused one
    status, out, _ = run(capsys, "validate", str(record))
    assert status == 0 and out.splitlines()[0].startswith("PASS")
    record.unlink()
    calls[:] = [1, 1]  # the first step refuses: nothing recorded, nothing written
    status, out, _ = run(capsys, *argv)
    assert status == 2 and not record.exists() and "record" not in out.split("-" * 60)[0]


def test_files_of_the_wrong_kind_are_one_line_errors(tmp_path, capsys):
    """A text file, or a NumPy file of the other kind, given as a vector or as a recording: one
    error line that says what the file is, exit status 2 (a .npy given to ``otm validate`` was an
    unexpected TypeError, a text file a message about pickles)."""
    np.save(tmp_path / "p.npy", np.array([0.5, 0.5]))
    with open(tmp_path / "z.npy", "wb") as handle:  # an archive under a .npy name
        np.savez(handle, a=np.array([0.5, 0.5]))
    (tmp_path / "text.npy").write_text("hello")
    cases = [
        (("acceptance", "--target", str(tmp_path / "text.npy"), "--draft", str(tmp_path / "p.npy")), "not a NumPy file"),
        (("acceptance", "--target", str(tmp_path / "z.npy"), "--draft", str(tmp_path / "p.npy")), "an .npz archive, expected a .npy array"),
        (("validate", str(tmp_path / "p.npy")), "a .npy array, expected an .npz archive"),
        (("validate", str(tmp_path / "text.npy")), "not a NumPy file"),
    ]
    for argv, says in cases:
        status, _, err = run(capsys, *argv)
        (line,) = err.strip().splitlines()
        assert status == 2 and says in line and "unexpected" not in line, line


def test_acceptance_reports_what_k_allows_and_refuses_contradictory_flags(capsys):
    """``-k`` above the vocabulary still has an i.i.d. optimum and i.i.d. rules: those are
    printed, the without-replacement column and rules are n/a with a note (the whole command
    used to stop at the first scheme that could not draw k distinct tokens). A negative time
    budget and ``--example`` beside files are one-line errors."""
    status, out, _ = run(capsys, "acceptance", "--example", "spechub-fig5", "-k", "4", "--json")
    summary = json.loads(out)
    assert status == 0
    assert summary["optimal"]["iid"] == pytest.approx(1.0) and summary["optimal"]["without_replacement"] is None
    assert "distinct drafts without replacement from a vocabulary of 3" in summary["notes"]["optimal.without_replacement"]
    assert summary["rules"]["rrs"] is not None and summary["rules"]["rrs_wor"] is None
    for argv, says in [(("--example", "spechub-fig5", "--time-budget", "-3"), "--time-budget must be"),
                       (("--example", "spechub-fig5", "--target", "p.npy"), "not both")]:
        status, _, err = run(capsys, "acceptance", *argv)
        (line,) = err.strip().splitlines()
        assert status == 2 and says in line


def test_decode_refuses_an_empty_top_p_and_no_tokens(capsys):
    """``--top-p 0`` meant "no top-p" (``0 or 1.0``), and ``--max-new-tokens 0`` (or negative)
    generated one token: both are one-line errors now, before any model is loaded."""
    from decoding.runtime.loop import autoregressive_decode, speculative_decode
    from otm.errors import InvalidArgumentError

    base = ("decode", "--pair", "tiny", "--rule", "rrs", "--prompt", "1,2,3")
    for extra, says in [(("--top-p", "0"), "--top-p must be in (0, 1]"), (("--max-new-tokens", "0"), ">= 1, got 0"),
                        (("--max-new-tokens", "-2"), ">= 1, got -2")]:
        status, _, err = run(capsys, *base, *extra)
        (line,) = err.strip().splitlines()
        assert status == 2 and says in line
    for decode in (speculative_decode, autoregressive_decode):
        with pytest.raises(InvalidArgumentError, match="max_new_tokens must be an integer >= 1"):
            decode(None, [1, 2], *(("rrs", "chain:2") if decode is speculative_decode else ()), max_new_tokens=0)
