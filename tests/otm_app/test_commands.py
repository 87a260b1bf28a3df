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
