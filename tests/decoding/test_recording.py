"""Recordings (decoding.runtime.recording): round trip, top-m truncation with a checked remainder,
consistency with the decode, tampered files rejected."""
import json

import numpy as np
import pytest
import torch

from decoding.runtime.loop import speculative_decode
from decoding.models.tiny import build_tiny_pair
from decoding.runtime.recording import RECORDING_FORMAT, Recorder, load_recording
from decoding.runtime.trees import parse_tree
from otm.errors import InvalidDistributionError
from otm.tolerances import SUM_TOLERANCE


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def pair():
    return build_tiny_pair(vocab_size=8, seed=1, dtype=torch.float64)


def _record(pair, top_m, tmp_path, rule="rrs", tree="chains:2,2"):
    recorder = Recorder(top_m=top_m, rule=rule, tree=tree, seed=4)
    result = speculative_decode(pair, [[1, 2], [3]], rule, tree, max_new_tokens=10,
                                generator=torch.Generator().manual_seed(4), record=recorder, progress=False)
    return result, load_recording(recorder.save(tmp_path / "run.npz"))


def test_full_recording_round_trip(pair, tmp_path):
    result, rec = _record(pair, 64, tmp_path)
    a = rec.arrays
    assert rec.meta["format"] == RECORDING_FORMAT
    assert rec.meta["full"]
    assert rec.meta["vocab_size"] == 8
    assert rec.meta["rule"] == "rrs"
    assert rec.meta["tree"] == "chains:2,2"
    # every step of every row ends with exactly one residual or bonus event
    ends = (a["accepted_index"] == -1)
    assert ends.sum() == 2 * len(result.steps_tokens)
    # replay: per row, the outputs in event order are the generated tokens (cut at 10)
    for row in range(2):
        assert a["output"][a["row"] == row].tolist()[:10] == result.tokens[row]
    # accepted outputs are the accepted drafts; drafts_p / drafts_q are the laws at the drafts
    acc = a["accepted_index"] >= 0
    assert (a["drafts"][acc, a["accepted_index"][acc]] == a["output"][acc]).all()
    for i in np.flatnonzero(a["k"] > 0)[:20]:
        k = a["k"][i]
        p, q = rec.dense(i, "p"), rec.dense(i, "q")
        assert np.allclose(p[a["drafts"][i, :k]], a["drafts_p"][i, :k])
        assert np.allclose(q[a["drafts"][i, :k]], a["drafts_q"][i, :k])
        assert abs(p.sum() - 1) <= SUM_TOLERANCE
    tree = parse_tree("chains:2,2")
    assert set(a["k"].tolist()) <= {0, 1, 2}
    assert (a["depth"] <= tree.max_depth).all()


def test_top_m_keeps_the_largest_with_a_checked_remainder(pair, tmp_path):
    _, full = _record(pair, 64, tmp_path)
    _, top = _record(pair, 3, tmp_path)
    for i in range(full.n_events):
        p = full.dense(i, "p")
        ids = top.arrays["p_ids"][i]
        assert np.allclose(np.sort(p)[::-1][:3], top.arrays["p_probs"][i])
        assert np.allclose(p[ids], top.arrays["p_probs"][i])
        assert abs(top.arrays["p_rest"][i] - (1 - p[ids].sum())) <= SUM_TOLERANCE
    assert not top.meta["full"]


def test_tampered_recordings_are_rejected(pair, tmp_path):
    _, rec = _record(pair, 3, tmp_path)
    arrays = dict(rec.arrays)
    arrays["p_rest"] = arrays["p_rest"] + 0.01  # remainder no longer completes the mass
    np.savez(tmp_path / "bad.npz", meta=np.asarray(json.dumps(rec.meta)), **arrays)
    with pytest.raises(InvalidDistributionError, match="remainder"):
        load_recording(tmp_path / "bad.npz")
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    with pytest.raises(InvalidDistributionError, match="not an otm decode recording"):
        load_recording(tmp_path / "other.npz")
    with pytest.raises(InvalidDistributionError):
        Recorder().arrays()
