"""`otm validate` (decoding.validation.recordings, otm_app.commands.validate): per-node rule acceptance vs
the OTM optimum from recordings, exact on full recordings, valid bounds on top-m ones."""
import json

import numpy as np
import pytest
import torch

from decoding.runtime.loop import speculative_decode
from decoding.models.tiny import build_tiny_pair
from decoding.runtime.recording import Recorder, load_recording
from decoding.validation.recordings import (
    Bounds,
    node_instance,
    rule_scheme,
    validate_node,
    validate_recording,
)
from otm.draft_laws import ONE_Q_SCHEMES
from otm_app.commands.validate import run_validate
from otm_app.configs import ValidateConfig
from otm.optimum import optimal_acceptance
from otm.rules import rule_acceptance
from otm.tolerances import AGREEMENT_TOLERANCE, SUM_TOLERANCE

#: Values from a full recording are computed on float64 laws renormalised within
#: SUM_TOLERANCE of the model's, so they agree with the dense recomputation to about that.
RECORDING_TOLERANCE = 10 * SUM_TOLERANCE

CASES = [("rrs", "chains:2,2"), ("kseq", "chains:3,1"), ("rrs_wor", "binary:2"), ("spechub", "binary:2"), ("greedy", "chains:3,2")]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def pair():
    return build_tiny_pair(vocab_size=8, seed=1, dtype=torch.float64)


def _record(pair, path, rule, tree, top_m, top_p=1.0, tokens=12, seed=3, sparse_limit=0):
    """A recording of a decode of the tiny pair; ``sparse_limit=0``: every 8-token law is cut
    to the top-``top_m`` tokens (else the recorder keeps small supports whole)."""
    recorder = Recorder(top_m=top_m, rule=rule, tree=tree, sparse_limit=sparse_limit)
    speculative_decode(pair, [[1, 2], [3]], rule, tree, top_p=top_p, max_new_tokens=tokens,
                       generator=torch.Generator().manual_seed(seed), record=recorder, progress=False)
    return load_recording(recorder.save(path))


@pytest.fixture(scope="module")
def recordings(pair, tmp_path_factory):
    """(full, top-3) recordings of the same decode (the recorder draws no randomness)."""
    base = tmp_path_factory.mktemp("rec")
    return {(rule, m): _record(pair, base / f"{rule}_{m}.npz", rule, tree, m) for rule, tree in CASES for m in (64, 3)}


def _contains(bounds: Bounds, value: float) -> bool:
    return bounds.lo - RECORDING_TOLERANCE <= value <= bounds.hi + RECORDING_TOLERANCE


@pytest.mark.parametrize("rule,tree", CASES)
def test_full_recording_is_exact_and_matches_dense_recomputation(recordings, rule, tree):
    rec = recordings[(rule, 64)]
    result = validate_recording(rec)
    assert result.nodes
    assert not result.skipped
    for n in result.nodes:
        assert n.rule.exact
        assert n.optimum.exact
        assert n.best.exact
        p, q = rec.dense(n.event, "p"), rec.dense(n.event, "q")
        name = rule if n.k >= 2 else "single"
        assert n.rule_name == name
        assert n.scheme == rule_scheme(name)
        assert abs(n.rule.value - float(rule_acceptance(name, p, q, n.k))) <= RECORDING_TOLERANCE
        assert abs(n.optimum.value - float(optimal_acceptance(p, q, n.k, draft_scheme=n.scheme))) <= RECORDING_TOLERANCE
        assert n.rule.value <= n.optimum.value + RECORDING_TOLERANCE <= n.best.value + 2 * RECORDING_TOLERANCE
    by_rule = result.summary["by_rule"][rule]
    assert by_rule["n_exact"] == by_rule["n_nodes"]
    assert by_rule["gap"] >= -RECORDING_TOLERANCE
    # E[accepted | p, q] = rule acceptance at every node: the z-test passes (alpha = 1e-4)
    assert by_rule["acceptance_test"]["passed"]


@pytest.mark.parametrize("rule,tree", CASES)
def test_top_m_bounds_contain_the_exact_values(recordings, rule, tree):
    full, top = validate_recording(recordings[(rule, 64)]), validate_recording(recordings[(rule, 3)])
    assert [n.event for n in full.nodes] == [n.event for n in top.nodes]
    some_inexact = False
    for exact, bounded in zip(full.nodes, top.nodes):
        assert _contains(bounded.rule, exact.rule.value), (bounded.event, bounded.rule, exact.rule)
        assert _contains(bounded.optimum, exact.optimum.value), (bounded.event, bounded.optimum, exact.optimum)
        assert _contains(bounded.best, exact.best.value)
        for scheme in ONE_Q_SCHEMES:
            if isinstance(exact.schemes[scheme], Bounds):
                assert _contains(bounded.schemes[scheme], exact.schemes[scheme].value), (scheme, bounded.event)
        assert bounded.accepted == exact.accepted
        some_inexact |= not bounded.rule.exact
        if not bounded.rule.exact:
            assert bounded.rule.note  # says why
    assert some_inexact  # the top-3 recording of an 8-token vocabulary does leave tails


def test_a_wrong_bound_is_caught(recordings):
    """The containment check can fail: the naive merged value, taken as exact (the tail
    treated as one token), is outside the truth at some node."""
    rec_top, full = recordings[("rrs", 3)], validate_recording(recordings[("rrs", 64)])
    missed = 0
    for exact in full.nodes:
        if exact.k < 2:
            continue
        node = node_instance(rec_top, exact.event)
        p, q = node.merged()
        naive = Bounds.point(optimal_acceptance(p, q, exact.k, "iid"))
        missed += not _contains(naive, exact.optimum.value)
    assert missed > 0


def test_top_p_draft_law_makes_truncated_recording_exact(pair, tmp_path):
    """With top-p the tails of p and q are exactly 0 once m covers the kept tokens: exact."""
    rec = _record(pair, tmp_path / "tp.npz", "rrs", "chains:2,2", top_m=6, top_p=0.6)
    full = _record(pair, tmp_path / "tpfull.npz", "rrs", "chains:2,2", top_m=64, top_p=0.6)
    assert not rec.meta["full"]
    a, b = validate_recording(rec), validate_recording(full)
    checked = 0
    for x, y in zip(a.nodes, b.nodes):
        if node_instance(rec, x.event).q_tail == 0:
            checked += 1
            assert x.rule.exact
            assert x.optimum.exact
            assert abs(x.rule.value - y.rule.value) <= RECORDING_TOLERANCE
            assert abs(x.optimum.value - y.optimum.value) <= RECORDING_TOLERANCE
    assert checked > 0


def _synthetic(tmp_path, p, q, drafts, output, rule="rrs", top_m=64):
    """A one-event recording built through the Recorder (degenerate distributions)."""
    recorder = Recorder(top_m=top_m, rule=rule, tree="synthetic")
    recorder.begin_step()
    target = torch.tensor([p], dtype=torch.float64)
    draft = torch.tensor([q], dtype=torch.float64)
    x = torch.tensor([drafts])
    index = torch.tensor([drafts.index(output) if output in drafts else -1])
    recorder.add(torch.tensor([0]), 0, torch.tensor([0]), target, draft, x, index, torch.tensor([output]))
    return load_recording(recorder.save(tmp_path / "syn.npz"))


@pytest.mark.parametrize("rule", ["rrs", "kseq", "rrs_wor", "spechub", "greedy"])
def test_degenerate_nodes_give_exact_finite_values(tmp_path, rule):
    for p, q, drafts, out in [([0.2, 0.3, 0.5], [0.0, 1.0, 0.0], [1, 1], 1),
                              ([0.25, 0.25, 0.5], [0.25, 0.25, 0.5], [2, 0], 2),
                              ([0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.5, 0.5], [2, 3], 0)]:
        if rule in ("rrs_wor", "greedy") and len(set(drafts)) < 2:
            drafts = [1, 0] if rule == "greedy" else drafts
            if rule == "rrs_wor":
                continue  # one-hot q has no two distinct drafts
        n = validate_node(_synthetic(tmp_path, p, q, drafts, out, rule), 0)
        assert n.rule.exact
        assert n.optimum.exact
        assert np.isfinite(n.rule.value)
        assert abs(n.rule.value - float(rule_acceptance(rule, p, q, 2))) <= AGREEMENT_TOLERANCE


def test_tampered_outputs_fail_the_empirical_acceptance_test(pair, tmp_path):
    rec = _record(pair, tmp_path / "long.npz", "rrs", "chains:2,1", top_m=64, tokens=60)
    assert validate_recording(rec).summary["by_rule"]["rrs"]["acceptance_test"]["passed"]
    arrays = dict(rec.arrays)
    output = arrays["output"].copy()
    two = arrays["k"] == 2
    for i in np.flatnonzero(two):  # every verification rejects: output a non-draft token
        output[i] = next(t for t in range(8) if t not in arrays["drafts"][i, :2])
    arrays["output"] = output
    tampered = type(rec)(rec.meta, arrays)
    test = validate_recording(tampered).summary["by_rule"]["rrs"]["acceptance_test"]
    assert not test["passed"]
    assert test["z"] < 0


def test_cli_writes_json_and_figures(recordings, tmp_path, capsys):
    path = tmp_path / "r.npz"
    rec = recordings[("kseq", 3)]
    np.savez_compressed(path, meta=np.asarray(json.dumps(rec.meta)), **rec.arrays)
    summary = run_validate(ValidateConfig(recording=str(path), json=True, out=str(tmp_path / "out")))
    printed = json.loads(capsys.readouterr().out)
    assert printed["by_rule"].keys() == summary["by_rule"].keys()
    assert "kseq/0" in printed["by_depth"]
    saved = json.loads((tmp_path / "out" / "validation.json").read_text())
    assert len(saved["nodes"]) == summary["validated"]
    for figure in summary["figures"]:
        assert (tmp_path / "out" / figure.rsplit("/", 1)[-1]).stat().st_size > 1000


def test_cli_missing_recording_is_a_clear_error(tmp_path):
    from otm.errors import OTMError

    with pytest.raises(OTMError, match="no such recording"):
        run_validate(ValidateConfig(recording=str(tmp_path / "nope.npz")))


def test_float32_laws_are_read_within_their_dtype_tolerance():
    """One tolerance policy for inputs (otm.tolerances.sum_tolerance of the input's dtype and V):
    a float32 law off from 1 by 2e-6 at V = 1000 is accepted (a fixed 1e-6 refused it, also
    after validate_verifier had converted it to float64), the same float64 law and a NaN are not."""
    from decoding.validation.own_verifier import validate_verifier
    from decoding.validation.stats import chi_square_test
    from decoding.verifiers import get_verifier
    from otm.errors import InvalidDistributionError

    vocab = 1000
    p = np.full(vocab, 1 / vocab, dtype=np.float32)
    p[0] += np.float32(2e-6)
    assert SUM_TOLERANCE < abs(float(p.astype(np.float64).sum()) - 1) < 3e-6
    counts = np.zeros(vocab)
    counts[:10] = 1
    assert chi_square_test(counts, p).passed
    with pytest.raises(InvalidDistributionError):
        chi_square_test(counts, p.astype(np.float64))
    with pytest.raises(InvalidDistributionError):
        chi_square_test(counts, np.where(np.arange(vocab) == 0, np.nan, 1 / vocab))
    report = validate_verifier(get_verifier("rrs").verify, "rrs", p, np.full(vocab, 1 / vocab, dtype=np.float32), k=2,
                               samples=500, seed=0)
    assert report.passed
