"""Block and traversal verification inside the decoding loop (decoding.runtime.loop).

- End-to-end losslessness (tests/decoding/lossless_support.py, shared with
  tests/decoding/test_e2e_lossless.py): the exact law of the first ``LENGTH`` tokens of the
  tiny target (all ``V^LENGTH`` sequences enumerated) against ``RUNS`` seeded speculative
  decodes, Pearson chi-square at ``FALSE_ALARM = 1e-3`` per test (seeds fixed:
  deterministic); a deliberately broken verifier (traversal without the
  residual update between siblings, block verification with the token-wise residual)
  must be rejected by the same test.
- Temperature 0: the speculative decode equals the target's greedy decode.
- Typed errors: block verification on a tree, a recording, an unknown sibling scheme.

Run: .venv/bin/python -m pytest tests/decoding/test_sequence_decoding.py -q
"""
from __future__ import annotations

import itertools
import sys

import numpy as np
import pytest
import torch

from decoding.models.tiny import build_tiny_pair
from decoding.runtime.loop import autoregressive_decode, probs_from_logits, speculative_decode
from decoding.runtime.recording import Recorder
from decoding.runtime.trees import parse_tree
from decoding.runtime.tree_walk import resolve_sequence_rule, walk_sequence
from decoding.verifiers import block, traversal
from otm.errors import NotApplicableError, UnknownNameError
from tests.decoding.lossless_support import FALSE_ALARM, PROMPT, VOCAB, decode_law_pvalue, tiny_lossless_pair

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def pair():
    return tiny_lossless_pair()


CASES = [
    ("block", "chain:3"),
    ("block", "chains:1,2"),
    ("traversal", "binary:2"),
    ("traversal", "chains:3,2"),
    ("traversal", "branching:3;2,1"),
    ("traversal", "chain:3"),
    ("traversal-iid", "ternary:2"),
]


def _rule(name: str, tree: str):
    if name == "traversal-iid":
        return resolve_sequence_rule("traversal", parse_tree(tree), scheme="iid")
    return name


@pytest.mark.parametrize("rule, tree", CASES)
def test_first_tokens_follow_target_law(pair, rule, tree):
    pvalue, result = decode_law_pvalue(pair, _rule(rule, tree), tree)
    assert pvalue > FALSE_ALARM, f"{rule} on {tree}: chi-square p-value {pvalue:.2e}"
    assert result.block_efficiency > 1.0  # drafts were accepted
    assert result.rule == rule.split("-")[0]
    assert all(0 <= a <= 1 for a in result.acceptance_by_depth if a is not None)


def test_traversal_without_the_residual_update_is_detected(pair, monkeypatch):
    update = traversal.after_rejection
    monkeypatch.setattr(traversal, "after_rejection", lambda alpha, target, proposal: (update(alpha, target, proposal)[0], target))
    pvalue, _ = decode_law_pvalue(pair, "traversal", "ternary:2")
    assert pvalue < FALSE_ALARM


def test_block_with_the_tokenwise_residual_is_detected(monkeypatch):
    """The token-wise residual differs from block verification's only after a stop with
    w < 1 where two or more tokens have w p > q: on the tiny pair of seed 0 the first three
    tokens' law moves by 0.001 in total variation (undetectable with RUNS decodes), on
    seed 2 by 0.038 (computed exactly with otm.sequences on the pair's tables)."""
    other = build_tiny_pair(vocab_size=VOCAB, seed=2, draft_noise=0.6, dtype=torch.float64)
    assert decode_law_pvalue(other, "block", "chain:3")[0] > FALSE_ALARM
    monkeypatch.setattr(block, "residual_weights", lambda weight, target, draft: (target - draft).clamp(min=0.0))
    assert decode_law_pvalue(other, "block", "chain:3")[0] < FALSE_ALARM


@pytest.fixture(scope="module")
def greedy_pair():
    return build_tiny_pair(vocab_size=8, seed=3, draft_noise=0.25, dtype=torch.float64)


@pytest.mark.parametrize("rule, tree", [("block", "chain:4"), ("block", "chains:1,3"), ("traversal", "binary:3"),
                                        ("traversal", "ternary:2"), ("traversal", "branching:3;2,1;1")])
def test_temperature_zero_is_target_greedy(greedy_pair, rule, tree):
    """One-hot p and q (with more siblings than the support of q: the fixed drafts of
    sampling without replacement) still give the target's greedy decode."""
    prompts = [[1, 2, 3], [4], [0, 7]]
    reference = autoregressive_decode(greedy_pair.target, prompts, temperature=0.0, max_new_tokens=12, progress=False)
    result = speculative_decode(greedy_pair, prompts, rule, tree, temperature=0.0, max_new_tokens=12,
                                generator=torch.Generator().manual_seed(0), progress=False)
    assert result.tokens == reference.tokens
    assert sum(result.accepts_by_depth) > 0


def test_draft_equals_target_accepts_everything():
    same = build_tiny_pair(vocab_size=VOCAB, seed=0, draft_noise=0.0, dtype=torch.float64)
    for rule, tree in [("block", "chain:3"), ("traversal", "binary:3")]:
        result = speculative_decode(same, [PROMPT] * 50, rule, tree, max_new_tokens=4,
                                    generator=torch.Generator().manual_seed(0), progress=False)
        assert result.block_efficiency == 4.0, rule
        assert result.acceptance_by_depth == [1.0, 1.0, 1.0], rule


def test_typed_errors(greedy_pair):
    with pytest.raises(NotApplicableError, match="traversal"):
        speculative_decode(greedy_pair, [1], "block", "binary:2", max_new_tokens=2, progress=False)
    with pytest.raises(NotApplicableError, match="record"):
        speculative_decode(greedy_pair, [1], "traversal", "binary:2", max_new_tokens=2, progress=False,
                           record=Recorder(rule="traversal", tree="binary:2", temperature=1.0, top_p=1.0))
    with pytest.raises(UnknownNameError):
        resolve_sequence_rule("traversal", parse_tree("binary:2"), scheme="hub")
    with pytest.raises(UnknownNameError):
        resolve_sequence_rule("blocks", parse_tree("chain:2"))


def test_otm_decode_routes_the_sequence_verifiers(capsys):
    import json

    from otm_app.cli import EXIT_USAGE, main

    assert main(["decode", "--pair", "tiny", "--rule", "block", "--prompt", "1,2", "--max-new-tokens", "6", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["rule"] == "block" and summary["tree"] == "chain:4" and summary["tokens_generated"] == 6
    assert main(["decode", "--pair", "tiny", "--rule", "traversal", "--tree", "binary:2", "--prompt", "1,2",
                 "--max-new-tokens", "6", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rule"] == "traversal"
    assert main(["decode", "--pair", "tiny", "--rule", "block", "--tree", "binary:2", "--prompt", "1,2"]) == EXIT_USAGE
    assert "--rule traversal" in capsys.readouterr().err


# ---------------------------------------------------------------- deep chains

@pytest.mark.parametrize("rule", ["block", "traversal"])
def test_a_step_on_a_chain_deeper_than_the_recursion_limit(rule):
    """With p = q every draft is accepted: the step returns the whole chain as its path and
    counts every level as attempted and passed."""
    g, rows, vocab = sys.getrecursionlimit() + 100, 4, 3
    tree = parse_tree(f"chain:{g}")
    generator = torch.Generator().manual_seed(0)
    probs = torch.full((rows, tree.n_nodes, vocab), 1 / vocab, dtype=torch.float64)
    tokens = torch.randint(vocab, (rows, tree.n_nodes), generator=generator)
    walk = walk_sequence(tree, tokens, probs, probs.clone(), resolve_sequence_rule(rule, tree), generator)
    assert walk.n_accepted.tolist() == [g] * rows
    assert (walk.path_nodes == torch.arange(1, g + 1)).all()
    assert walk.attempts.tolist() == [rows] * g and walk.accepts.tolist() == [rows] * g


# ---------------------------------------------------------------- the observe hook

def test_observe_sees_every_step_and_changes_nothing(pair):
    """A SequenceRule's observe callback sees each step's drafted tree with p and q, draws no
    randomness: the decode's tokens are those of the same seed without it."""
    import dataclasses

    tree = parse_tree("binary:2")
    seen = []
    rule = dataclasses.replace(resolve_sequence_rule("traversal", tree),
                               observe=lambda t, tokens, p, q: seen.append((t.n_nodes, tokens.shape, p.shape, q.shape)))
    prompts = [PROMPT] * 4
    plain = speculative_decode(pair, prompts, "traversal", tree, max_new_tokens=6, generator=torch.Generator().manual_seed(1), progress=False)
    watched = speculative_decode(pair, prompts, rule, tree, max_new_tokens=6, generator=torch.Generator().manual_seed(1), progress=False)
    assert watched.tokens == plain.tokens
    assert len(seen) == watched.target_calls
    assert seen[0] == (7, (4, 7), (4, 7, VOCAB), (4, 7, VOCAB))
    assert resolve_sequence_rule(rule, tree, scheme="iid").observe is rule.observe


# ---------------------------------------------------------------- scripts/bench_sequence_verifiers.py

def _bench_script():
    import bench_sequence_verifiers

    return bench_sequence_verifiers


def _tables(pair, temperature: float, depth: int):
    """The tiny pair after PROMPT as an otm.sequences model (plain causal forwards, no tree
    attention), prefixes of at most ``depth`` tokens."""
    from otm.sequences import sequence_model

    target, draft = {}, {}
    for n in range(depth + 1):
        prefixes = list(itertools.product(range(VOCAB), repeat=n))
        ids = torch.tensor([PROMPT + list(s) for s in prefixes])
        with torch.no_grad():
            p = probs_from_logits(pair.target(input_ids=ids).logits[:, -1], temperature).numpy()
            q = probs_from_logits(pair.draft(input_ids=ids).logits[:, -1], temperature).numpy()
        for s, p_row, q_row in zip(prefixes, p, q):
            target[s], draft[s] = p_row / p_row.sum(), q_row / q_row.sum()
    return sequence_model(target, draft)


def test_bench_values_are_exact_given_the_drafts(pair):
    """The script's drafts (one forest, tree attention) give, per chain and tree, the values of
    the verifiers' expectation functions on tables from plain forwards; averaged over the
    drafts they estimate the exact E[tau] of all four verifiers and the exact paired gains
    (otm.sequences), z-tests at 1e-4; and the paired gain is detected (exact gains on this
    pair: 0.04 and 0.10 for chains, 0.02 and 0.06 for trees, at T = 0.6 and 1)."""
    from scipy.stats import norm

    from decoding.validation.own_tree_verifier import PrefixTables
    from otm.sequences import block_expected_accepted, tokenwise_expected_accepted, traversal_law, tree_walk_expected_accepted

    bench, g, copies = _bench_script(), 2, 600
    groups = bench.default_groups(g, copies, parse_tree("binary:2"), copies, (0.6, 1.0))
    drafted = bench.draft_after(pair, PROMPT, groups, torch.Generator().manual_seed(0))

    def z_pvalue(values, exact):
        return 2 * norm.sf(abs(values.mean() - float(exact)) / (values.std(ddof=1) / np.sqrt(len(values))))

    for item in drafted:
        group = item.group
        model = _tables(pair, group.temperature, group.shape.max_depth)
        tables = PrefixTables(model, group.shape.max_depth, torch.float64, "cpu")
        ids = tables.node_ids(group.shape, item.tokens)
        plain = bench.Drafted(group, item.tokens, tables.target[ids], tables.draft[ids])
        values, reference = bench.paired_values(item), bench.paired_values(plain)
        for mine, theirs in ((values.baseline, reference.baseline), (values.sequence, reference.sequence)):
            assert np.allclose(mine, theirs, rtol=1e-6, atol=0)  # float32 models: tree attention vs plain forwards
        if group.comparison == "chain":
            exact = (tokenwise_expected_accepted(model, g), block_expected_accepted(model, g))
        else:
            exact = (tree_walk_expected_accepted(model, 2, 2, "rrs_wor"), traversal_law(model, 2, 2).expected_accepted())
        gain = values.sequence - values.baseline  # paired: the same drafts
        assert z_pvalue(values.baseline, exact[0]) > 1e-4 and z_pvalue(values.sequence, exact[1]) > 1e-4
        assert z_pvalue(gain, exact[1] - exact[0]) > 1e-4
        assert z_pvalue(gain, 0.0) < 1e-4, f"{group.comparison}: the test cannot tell the verifiers apart"


def test_bench_comparison_with_plain_forwards_catches_a_missing_temperature(pair, monkeypatch):
    """The per-draft comparison above fails when the script forgets the temperature."""
    from decoding.validation.own_tree_verifier import PrefixTables

    bench = _bench_script()
    monkeypatch.setattr(bench, "_probs", lambda logits, temperature: torch.softmax(logits.double().cpu(), dim=-1))
    for item in bench.draft_after(pair, PROMPT, bench.default_groups(2, 50, parse_tree("binary:2"), 50, (0.6,)),
                                  torch.Generator().manual_seed(0)):
        tables = PrefixTables(_tables(pair, 0.6, 2), 2, torch.float64, "cpu")
        ids = tables.node_ids(item.group.shape, item.tokens)
        plain = bench.paired_values(bench.Drafted(item.group, item.tokens, tables.target[ids], tables.draft[ids]))
        assert not np.allclose(bench.paired_values(item).sequence, plain.sequence, rtol=1e-6, atol=0)


def test_bench_script_runs_on_the_tiny_pair(tmp_path):
    out = tmp_path / "table.md"
    data = _bench_script().main(["--pair", "tiny", "--chains", "4", "--trees", "3", "--positions", "2", "--g", "3",
                                 "--out", str(out), "--quiet"])
    text = out.read_text()
    for row in ("| `chain:3` | token-wise -> block | code | 0.6 |", "| `binary:2` | rrs_wor -> traversal | prose | 1 |",
                "| `chain:3` | token-wise -> block | all | 1 |", "--pair tiny"):
        assert row in text
    chains = [c for (name, _, _), cells in data["results"].items() if name == "chain" for c in cells]
    assert all((c.sequence >= c.baseline - 1e-12).all() for c in chains)  # block >= token-wise on every chain


def test_bench_forest_layout():
    bench = _bench_script()
    groups = bench.default_groups(2, 3, parse_tree("binary:2"), 2, (1.0,))
    tree, index = bench.forest(groups)
    assert tree.n_nodes == 1 + 3 * 2 + 2 * 6
    for group, nodes in zip(groups, index):
        assert nodes.shape == (group.copies, group.shape.n_nodes) and (nodes[:, 0] == 0).all()
        for u in range(1, group.shape.n_nodes):  # each copy keeps its shape
            assert (tree.parent[nodes[:, u]] == nodes[:, group.shape.parent[u]]).all()
    assert len(np.unique(np.concatenate([nodes[:, 1:].ravel() for nodes in index]))) == tree.n_nodes - 1


def test_bench_incremental_prefix_equals_a_fresh_forward(pair):
    """Positions of one text share the caches (PrefixCaches); the second position's drafts and
    laws equal those of fresh caches on the same prefix and the same draws."""
    bench = _bench_script()
    ids = [1, 3, 0, 2, 4, 4, 1]
    groups = bench.default_groups(2, 3, parse_tree("binary:2"), 2, (1.0,))
    caches = bench.PrefixCaches(pair)
    caches.draft_groups(ids, 3, groups, torch.Generator().manual_seed(0))
    shared = caches.draft_groups(ids, 7, groups, torch.Generator().manual_seed(1))
    fresh = bench.draft_after(pair, ids, groups, torch.Generator().manual_seed(1))
    for a, b in zip(shared, fresh):
        assert (a.tokens == b.tokens).all()
        assert torch.allclose(a.target_probs, b.target_probs, rtol=1e-9, atol=1e-12)
        assert torch.allclose(a.draft_probs, b.draft_probs, rtol=1e-9, atol=1e-12)
