"""Recordings (decoding.runtime.recording): round trip, the recorded tokens (top-m of p and of q,
sparse laws whole) with a checked merged tail, consistency with the decode, the dtype-aware sum
tolerance, and tampered, truncated or corrupt files refused with a typed one-line error."""
import json

import numpy as np
import pytest
import torch

from decoding.models.tiny import build_tiny_pair
from decoding.runtime.loop import speculative_decode
from decoding.runtime.recording import RECORDING_FORMAT, Recorder, load_recording
from decoding.runtime.trees import parse_tree
from otm.errors import InputFileError, InvalidDistributionError
from otm.tolerances import SUM_TOLERANCE, sum_tolerance

pytestmark = pytest.mark.usefixtures("one_torch_thread")

QWEN_VOCAB = 151_936


@pytest.fixture(scope="module")
def pair():
    return build_tiny_pair(vocab_size=8, seed=1, dtype=torch.float64)


def _record(pair, top_m, tmp_path, rule="rrs", tree="chains:2,2", sparse_limit=0, top_p=1.0, name="run.npz"):
    recorder = Recorder(top_m=top_m, sparse_limit=sparse_limit, rule=rule, tree=tree, seed=4)
    result = speculative_decode(pair, [[1, 2], [3]], rule, tree, top_p=top_p, max_new_tokens=10,
                                generator=torch.Generator().manual_seed(4), record=recorder, progress=False)
    return result, load_recording(recorder.save(tmp_path / name))


def _resave(tmp_path, rec, name="bad.npz", meta=None, **changes):
    np.savez(tmp_path / name, meta=np.asarray(json.dumps(meta or rec.meta)), **{**rec.arrays, **changes})
    return tmp_path / name


def test_full_recording_round_trip(pair, tmp_path):
    result, rec = _record(pair, 64, tmp_path)
    a = rec.arrays
    assert rec.meta["format"] == RECORDING_FORMAT
    assert rec.meta["full"]
    assert rec.meta["vocab_size"] == 8
    assert rec.meta["dtype"] == "float64"
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


def test_top_m_records_both_laws_on_the_union_of_their_top_tokens(pair, tmp_path):
    """p and q are recorded on one token set, the top-3 of p and the top-3 of q, by decreasing
    p; the merged tail is what the recorded tokens leave of each law."""
    _, full = _record(pair, 64, tmp_path, name="full.npz")
    _, top = _record(pair, 3, tmp_path, name="top.npz")
    a = top.arrays
    assert not top.meta["full"]
    for i in range(full.n_events):
        p, ids = full.dense(i, "p"), a["p_ids"][i]
        listed = ids[ids >= 0]
        expected = set(np.argsort(-p, kind="stable")[:3].tolist())
        if a["k"][i] > 0:
            q = full.dense(i, "q")
            expected |= set(np.argsort(-q, kind="stable")[:3].tolist())
            assert (a["q_ids"][i] == ids).all()
            assert np.allclose(a["q_probs"][i][ids >= 0], q[listed])
            assert abs(a["q_rest"][i] - (1 - q[listed].sum())) <= SUM_TOLERANCE
        assert set(listed.tolist()) == expected
        assert np.allclose(a["p_probs"][i][ids >= 0], p[listed])
        assert (np.diff(a["p_probs"][i][ids >= 0]) <= 0).all()  # by decreasing p
        assert abs(a["p_rest"][i] - (1 - p[listed].sum())) <= SUM_TOLERANCE


def test_a_sparse_law_is_recorded_whole_so_its_tail_is_zero(pair, tmp_path):
    """With top-p, every token of positive probability is recorded (sparse_limit), so the
    merged tails are exactly 0; with sparse_limit=0 the top-1 leaves a positive tail."""
    _, whole = _record(pair, 1, tmp_path, top_p=0.6, sparse_limit=8, name="whole.npz")
    _, cut = _record(pair, 1, tmp_path, top_p=0.6, sparse_limit=0, name="cut.npz")
    assert (whole.arrays["p_rest"] == 0).all() and (whole.arrays["q_rest"] == 0).all()
    assert (cut.arrays["p_rest"] > 0).any()


def test_the_sum_tolerance_follows_the_recorded_dtype_and_vocabulary(tmp_path):
    """A float32 softmax over Qwen's 151,936 tokens sums to 1 only within ~4e-6 (a fixed 1e-6
    refused such a recording: `otm decode --pair qwen2.5-coder --record` then `otm validate`
    failed); the same sum error in a float64 recording is still refused."""
    g = torch.Generator().manual_seed(0)
    p, q = (torch.softmax(torch.randn(1, QWEN_VOCAB, generator=g) * 3, dim=-1) for _ in range(2))
    off = float(abs(p.double().sum() - 1))
    assert SUM_TOLERANCE < off <= sum_tolerance("float32", QWEN_VOCAB)
    drafts = q.argmax(dim=1, keepdim=True)
    recorder = Recorder(rule="single", tree="chain:1")
    recorder.begin_step()
    recorder.add(torch.tensor([0]), 0, torch.tensor([0]), p, q, drafts, torch.tensor([0]), drafts[:, 0])
    rec = load_recording(recorder.save(tmp_path / "qwen_like.npz"))
    assert rec.meta["dtype"] == "float32" and rec.sum_tolerance == sum_tolerance("float32", QWEN_VOCAB)
    with pytest.raises(InvalidDistributionError, match="float64 softmax over V = 151936"):
        load_recording(_resave(tmp_path, rec, meta={**rec.meta, "dtype": "float64"}))


def test_tampered_recordings_are_rejected(pair, tmp_path):
    _, rec = _record(pair, 3, tmp_path)
    a = rec.arrays
    with pytest.raises(InvalidDistributionError, match="remainder"):
        load_recording(_resave(tmp_path, rec, p_rest=a["p_rest"] + 0.01))  # no longer completes the mass
    with pytest.raises(InvalidDistributionError, match="NaN"):
        load_recording(_resave(tmp_path, rec, p_probs=np.where(a["p_ids"] >= 0, np.nan, 0.0)))
    accepted = np.flatnonzero(a["accepted_index"] >= 0)
    assert len(accepted)
    index = a["accepted_index"].copy()
    index[accepted[0]] = 1 - index[accepted[0]]  # points at the other draft
    drafts = a["drafts"].copy()
    drafts[accepted[0], 1 - a["accepted_index"][accepted[0]]] = (a["output"][accepted[0]] + 1) % 8
    with pytest.raises(InvalidDistributionError, match="not the accepted draft"):
        load_recording(_resave(tmp_path, rec, accepted_index=index, drafts=drafts))
    event = int(np.flatnonzero(a["k"] > 0)[0])
    drafts_p = a["drafts_p"].copy()
    drafts_p[event, 0] += 0.01
    if np.isin(a["drafts"][event, 0], a["p_ids"][event]):
        with pytest.raises(InvalidDistributionError, match="drafts_p differs"):
            load_recording(_resave(tmp_path, rec, drafts_p=drafts_p))
    ids = a["p_ids"].copy()
    ids[0, 1] = ids[0, 0]
    with pytest.raises(InvalidDistributionError, match="listed twice"):
        load_recording(_resave(tmp_path, rec, p_ids=ids))
    with pytest.raises(InvalidDistributionError, match="outside"):
        load_recording(_resave(tmp_path, rec, output=a["output"] + 8))
    with pytest.raises(InvalidDistributionError, match="shape"):
        load_recording(_resave(tmp_path, rec, step=a["step"][:-1]))
    with pytest.raises(InvalidDistributionError, match="vocab_size"):
        load_recording(_resave(tmp_path, rec, meta={**rec.meta, "vocab_size": "8"}))
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    with pytest.raises(InvalidDistributionError, match="not an otm decode recording"):
        load_recording(tmp_path / "other.npz")
    with pytest.raises(InvalidDistributionError):
        Recorder().arrays()


def test_a_damaged_file_is_a_typed_error(pair, tmp_path):
    """A truncated or corrupt .npz, cut or with bytes flipped anywhere, is a one-line
    InputFileError or InvalidDistributionError (`otm validate`: exit 2), never a zlib or
    numpy error (a zlib error used to come out as "unexpected error")."""
    _, rec = _record(pair, 3, tmp_path)
    data = (tmp_path / "run.npz").read_bytes()
    path = tmp_path / "damaged.npz"
    damaged = [data[:at] + bytes(b ^ 0xFF for b in data[at:at + 16]) + data[at + 16:]
               for at in np.linspace(0, len(data) - 16, 25).astype(int)]
    damaged += [data[: len(data) // 2]]
    for blob in damaged:
        path.write_bytes(blob)
        try:
            load_recording(path)
        except (InputFileError, InvalidDistributionError) as exc:
            assert str(path) in str(exc) and "\n" not in str(exc)
    np.savez(path, meta=np.asarray("{not json"), **rec.arrays)
    with pytest.raises(InputFileError, match="not a readable"):
        load_recording(path)
