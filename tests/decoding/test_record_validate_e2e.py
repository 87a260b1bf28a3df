"""`otm decode --record` then `otm validate`, end to end through the command line in-process
(otm_app.cli.main): the verdict is PASS with exactly checked nodes for several rules on the
tiny pair, NOT CHECKED (exit 3) when nothing could be computed exactly, FAIL (exit 1) or a
refusal (exit 2) for tampered recordings, and `--json`'s decode figures agree with the
recording. The last test runs the Qwen pair at the default dtype (marked qwen and slow)."""
import json

import numpy as np
import pytest
import torch

from decoding.models.tiny import build_tiny_pair
from decoding.runtime.loop import speculative_decode
from decoding.runtime.recording import DEFAULT_TOP_M, Recorder, load_recording
from otm_app.cli import main
from otm_app.configs import DecodeConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")

#: Exit statuses of `otm validate` (its --help).
PASS, FAIL, ERROR, NOT_CHECKED = 0, 1, 2, 3


def _decode(capsys, path, rule, tree, *extra, tokens=8):
    status = main(["decode", "--pair", "tiny", "--rule", rule, "--tree", tree, "--max-new-tokens", str(tokens),
                   "--prompt", "1,2,3", "--record", str(path), "--json", *extra])
    assert status == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _validate(capsys, path):
    status = main(["validate", str(path), "--json"])
    captured = capsys.readouterr()
    return status, (json.loads(captured.out) if captured.out else None), captured.err


def _resave(rec, path, **changes):
    np.savez_compressed(path, meta=np.asarray(json.dumps(rec.meta)), **{**rec.arrays, **changes})
    return path


@pytest.mark.parametrize("rule,tree", [("rrs", "chains:2,2"), ("kseq", "chains:3,1"), ("rrs_wor", "binary:2"),
                                       ("spechub", "binary:2"), ("greedy", "chains:3,2"), ("optimal", "binary:2")])
def test_decode_record_validate_passes_with_exact_nodes(tmp_path, capsys, rule, tree):
    path = tmp_path / "run.npz"
    _decode(capsys, path, rule, tree)
    status, summary, _ = _validate(capsys, path)
    assert status == PASS
    assert summary["verdict"]["status"] == "pass" and summary["verdict"]["passed"]
    assert summary["by_rule"][rule]["n_exact"] > 0
    assert summary["verdict"]["checked"].startswith(f"{sum(g['n_exact'] for g in summary['by_rule'].values())} of ")
    main(["validate", str(path)])
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("PASS: ")


def test_decode_figures_agree_with_the_recording(tmp_path, capsys):
    """block_efficiency is the mean over steps of accepted drafts + 1 (before the cut at
    --max-new-tokens), tokens_per_target_call is tokens_generated / target_calls, and
    acceptance_by_depth[d - 1] is the fraction of verifications at draft depth d that
    accepted: all three recomputed from the recording (batch 1: one row per step)."""
    path = tmp_path / "run.npz"
    summary = _decode(capsys, path, "rrs", "chains:2,3", tokens=13)
    a = load_recording(path).arrays
    steps = np.unique(a["step"])
    per_step = [int((a["accepted_index"][a["step"] == s] >= 0).sum()) + 1 for s in steps]
    assert summary["target_calls"] == len(steps)
    assert summary["block_efficiency"] == pytest.approx(np.mean(per_step), abs=1e-12)
    assert summary["tokens_per_target_call"] == pytest.approx(summary["tokens_generated"] / summary["target_calls"], abs=1e-12)
    assert sum(per_step) >= summary["tokens_generated"] == 13  # the last step may produce more than is kept
    verified = a["k"] > 0
    for depth, rate in enumerate(summary["acceptance_by_depth"]):
        at = verified & (a["depth"] == depth)
        assert rate == (None if not at.any() else pytest.approx((a["accepted_index"][at] >= 0).mean(), abs=1e-12))


def test_nothing_exact_is_not_checked_and_says_why(tmp_path, capsys):
    """A top-2 recording of 8-token laws, none kept whole: every node only bounded. The old
    verdict said PASS with 0 exact nodes; now NOT CHECKED, exit status 3, with the reason."""
    recorder = Recorder(top_m=2, sparse_limit=0, rule="rrs", tree="chains:2,2")
    speculative_decode(build_tiny_pair(), [1, 2, 3], "rrs", "chains:2,2", max_new_tokens=8,
                       generator=torch.Generator().manual_seed(0), record=recorder, progress=False)
    path = recorder.save(tmp_path / "top2.npz")
    status, summary, _ = _validate(capsys, path)
    assert status == NOT_CHECKED
    verdict = summary["verdict"]
    assert verdict["status"] == "not_checked" and not verdict["passed"]
    assert verdict["checked"].startswith("0 of ")
    assert any("only bounded" in line for line in verdict["unchecked"])
    assert any("--record-top-m full" in line for line in verdict["unchecked"])
    main(["validate", str(path)])
    assert capsys.readouterr().out.startswith("NOT CHECKED: ")


def test_tampered_recordings_fail_or_are_refused(tmp_path, capsys):
    path = tmp_path / "run.npz"
    _decode(capsys, path, "rrs", "chains:2,1", tokens=60)
    rec = load_recording(path)
    a = rec.arrays
    two = np.flatnonzero(a["k"] == 2)
    # the recorded acceptances altered consistently: every verification rejects, the output
    # a token that is not a draft; the laws untouched. The z-test against the exact rates fails.
    output, index = a["output"].copy(), a["accepted_index"].copy()
    for i in two:
        output[i] = next(t for t in range(8) if t not in a["drafts"][i, :2])
        index[i] = -1
    status, summary, _ = _validate(capsys, _resave(rec, tmp_path / "rejects.npz", output=output, accepted_index=index))
    assert status == FAIL
    assert summary["verdict"]["status"] == "fail"
    assert any("recorded acceptance differs" in r for r in summary["verdict"]["reasons"])
    # the accepted index altered alone: it no longer points at the output, refused
    index = a["accepted_index"].copy()
    accepted = two[a["accepted_index"][two] >= 0]
    assert len(accepted)
    index[accepted] = 1 - index[accepted]
    different = a["drafts"][accepted, 0] != a["drafts"][accepted, 1]
    assert different.any()
    status, _, err = _validate(capsys, _resave(rec, tmp_path / "index.npz", accepted_index=index))
    assert status == ERROR and "not the accepted draft" in err and len(err.strip().splitlines()) == 1
    # the probabilities altered: p scaled by 0.9, the remainder no longer completes them
    status, _, err = _validate(capsys, _resave(rec, tmp_path / "probs.npz", p_probs=a["p_probs"] * 0.9))
    assert status == ERROR and "remainder" in err and len(err.strip().splitlines()) == 1
    # a truncated file: one line, exit 2
    data = path.read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[: len(data) // 3])
    status, _, err = _validate(capsys, tmp_path / "cut.npz")
    assert status == ERROR and err.startswith("otm validate: error: ") and "unexpected" not in err


def test_decode_refuses_what_it_cannot_record(tmp_path, capsys):
    """--record into a missing folder is refused before decoding; --record with an ensemble
    rule, which has no recording, is refused rather than ignored."""
    assert main(["decode", "--pair", "tiny", "--prompt", "1,2", "--record", str(tmp_path / "no" / "run.npz")]) == ERROR
    assert "no such folder" in capsys.readouterr().err
    assert main(["decode", "--pair", "tiny", "--rule", "ensemble_weighted", "--lam", "0.5", "--prompt", "1,2",
                 "--record", str(tmp_path / "run.npz")]) == ERROR
    assert "--record does not apply" in capsys.readouterr().err
    assert not (tmp_path / "run.npz").exists()
    (tmp_path / "prompts.txt").write_bytes(b"\xff\xfe\x00binary")
    assert main(["decode", "--pair", "tiny", "--prompts", str(tmp_path / "prompts.txt")]) == ERROR
    assert "UTF-8" in capsys.readouterr().err


def test_record_top_m_option(tmp_path, capsys, monkeypatch):
    """--record-top-m N keeps N tokens of each law (default DEFAULT_TOP_M), 'full' whole rows,
    refused before decoding when the recording could exceed RECORDING_BYTES_LIMIT."""
    assert DecodeConfig().record_top_m == DEFAULT_TOP_M
    _decode(capsys, tmp_path / "full.npz", "rrs", "chains:2,2", "--record-top-m", "full", tokens=4)
    assert load_recording(tmp_path / "full.npz").meta["full"]
    _decode(capsys, tmp_path / "three.npz", "rrs", "chains:2,2", "--record-top-m", "3", tokens=4)
    assert load_recording(tmp_path / "three.npz").meta["top_m"] == 3
    with pytest.raises(SystemExit):
        main(["decode", "--pair", "tiny", "--prompt", "1", "--record-top-m", "0"])
    capsys.readouterr()
    from otm_app.commands import decode

    monkeypatch.setattr(decode, "RECORDING_BYTES_LIMIT", 1000)
    assert main(["decode", "--pair", "tiny", "--prompt", "1", "--record", str(tmp_path / "big.npz"),
                 "--record-top-m", "full"]) == ERROR
    assert "GiB" in capsys.readouterr().err and not (tmp_path / "big.npz").exists()


@pytest.mark.qwen
@pytest.mark.slow
def test_qwen_default_dtype_records_and_validates(tmp_path, capsys, qwen_wheels):
    """The Qwen pair at the default dtype (bfloat16, its sampling laws float32, V = 151,936):
    a float32 softmax sums to 1 only within ~1e-5, which the recording's fixed 1e-6 used to
    refuse. Whole rows, so every node is exact and the verdict is PASS."""
    path = tmp_path / "qwen.npz"
    status = main(["decode", "--pair", "qwen2.5-coder", "--rule", "rrs", "--tree", "chains:2,2", "--max-new-tokens", "4",
                   "--prompt", "def binary_search(", "--record", str(path), "--record-top-m", "full", "--json"])
    assert status == 0, capsys.readouterr().err
    capsys.readouterr()
    assert load_recording(path).meta["dtype"] == "float32"
    status, summary, err = _validate(capsys, path)
    assert status == PASS, (err, summary and summary["verdict"])
    assert summary["by_rule"]["rrs"]["n_exact"] > 0
