"""The subcommands as library functions: typed configs in, summaries out (no argparse)."""
import dataclasses

import pytest

from decoding.runtime.recording import load_recording
from otm.errors import OTMError
from otm_app.commands.decode import run_decode
from otm_app.configs import DecodeConfig


def test_run_decode_tiny_json_and_record(tmp_path):
    args = DecodeConfig(pair="tiny", rule="kseq", tree="chains:3,2", temperature=1.0, top_p=None,
                        max_new_tokens=6, prompt="1,2,3", prompts=None, seed=2, record=str(tmp_path / "rec"), json=True)
    summary = run_decode(args)
    for key in ("rule", "tree", "tokens_generated", "target_calls", "block_efficiency", "acceptance_by_depth", "wall_seconds"):
        assert key in summary
    assert summary["tokens_generated"] == 6
    assert summary["rule"] == "kseq"
    assert summary["tree"] == "chains:3,2"
    assert load_recording(summary["record"]).meta["rule"] == "kseq"
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("1 2\n\n4,5\n")
    args = dataclasses.replace(args, prompt=None, prompts=str(prompts), record=None)
    assert run_decode(args)["prompts"] == 2
    with pytest.raises(OTMError, match="exactly one"):
        run_decode(dataclasses.replace(args, prompt="hello"))


def test_decode_says_when_the_optimal_verifier_compiles(monkeypatch, capsys):
    """``otm decode --rule optimal`` on the CPU says, before it starts, that the verifier's
    per-row code is compiled at its first use on the machine, and only then."""
    from decoding.verifiers.optimal import unsorted as optimal_buckets

    args = DecodeConfig(pair="tiny", rule="optimal", tree="chains:2,2", temperature=1.0, top_p=None,
                        max_new_tokens=2, prompt="1,2,3", prompts=None, seed=0, record=None, json=True)
    monkeypatch.setattr(optimal_buckets, "compiled_on_this_machine", lambda: False)
    run_decode(args)
    assert "compiles its per-row code at its first use" in capsys.readouterr().err
    monkeypatch.setattr(optimal_buckets, "compiled_on_this_machine", lambda: True)
    run_decode(args)
    assert "compiles" not in capsys.readouterr().err
    run_decode(dataclasses.replace(args, rule="rrs"))
    assert "compiles" not in capsys.readouterr().err


def test_decode_says_when_the_pair_verifier_compiles(monkeypatch, capsys):
    """The announcement comes from the verifier module's ``compile_seconds`` hook, not from a
    list of names: the water-level verifier says it too (on any device: its rows run on the CPU)."""
    from decoding.verifiers.optimal import pair as optimal_pair_wor
    args = DecodeConfig(pair="tiny", rule="optimal_pair_wor", tree="chains:2,2", temperature=1.0, top_p=None,
                        max_new_tokens=2, prompt="1,2,3", prompts=None, seed=0, record=None, json=True)
    monkeypatch.setattr(optimal_pair_wor, "compile_seconds", lambda device: 10.0)
    run_decode(args)
    assert "(about 10 s; cached afterwards)" in capsys.readouterr().err
    monkeypatch.setattr(optimal_pair_wor, "compile_seconds", lambda device: 0.0)
    run_decode(args)
    assert "compiles" not in capsys.readouterr().err


def test_decode_says_what_optimal_wor_costs_without_top_p(capsys):
    """The verifier's ``caveat`` hook: with three drafts at a node and no top-p, ``otm decode
    --rule optimal_wor`` says before it starts what rows take and that open walks are
    refused; with top-p, or two drafts per node, it says nothing of the kind."""
    args = DecodeConfig(pair="tiny", rule="optimal_wor", tree="kary:3,1", temperature=1.0, top_p=None,
                        max_new_tokens=2, prompt="1,2,3", prompts=None, seed=0, record=None, json=True)
    run_decode(args)
    assert "refuses the rows whose walk its bounds leave open" in capsys.readouterr().err
    for quiet in (dataclasses.replace(args, top_p=0.99), dataclasses.replace(args, tree="chains:2,2")):
        run_decode(quiet)
        assert "refuses" not in capsys.readouterr().err


def test_the_pair_verifier_needs_no_compiling_after_a_call():
    import numpy as np
    import torch

    from decoding.verifiers.optimal import pair as optimal_pair_wor
    p = torch.tensor([[0.2, 0.3, 0.5]], dtype=torch.float64)
    q = torch.tensor([[0.5, 0.3, 0.2]], dtype=torch.float64)
    optimal_pair_wor.verify(p, q.unsqueeze(1).expand(-1, 2, -1), torch.tensor([[0, 1]]), None)  # a merged row
    optimal_pair_wor.sorted_row(p[0].numpy(), q[0].numpy(), (0, 1), np.full(3, 0.5))  # where one goes back
    assert optimal_pair_wor.compile_seconds(torch.device("cpu")) == 0.0


def test_compiled_on_this_machine_after_a_call():
    import torch

    from decoding.verifiers.optimal import unsorted as optimal_buckets

    p = torch.softmax(torch.randn(2, 2000, generator=torch.Generator().manual_seed(0)), dim=1)
    drafts = torch.tensor([[0, 1], [2, 3]])
    optimal_buckets.verify_rows(p, p.flip(1), drafts, torch.rand(2, 7, dtype=torch.float64))
    assert optimal_buckets.compiled_on_this_machine()
