"""Block and traversal verification inside the decoding loop (decoding.runtime.loop).

- End-to-end losslessness, as tests/decoding/test_e2e_lossless.py: the exact law of the
  first ``LENGTH`` tokens of the tiny target (all ``V^LENGTH`` sequences enumerated) against
  ``RUNS`` seeded speculative decodes, Pearson chi-square at ``FALSE_ALARM = 1e-3`` per test
  (seeds fixed: deterministic); a deliberately broken verifier (traversal without the
  residual update between siblings, block verification with the token-wise residual)
  must be rejected by the same test.
- Temperature 0: the speculative decode equals the target's greedy decode.
- Typed errors: block verification on a tree, a recording, an unknown sibling scheme.

Run: .venv/bin/python -m pytest tests/decoding/test_sequence_decoding.py -q
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from decoding.models.tiny import build_tiny_pair
from decoding.runtime.loop import autoregressive_decode, probs_from_logits, speculative_decode
from decoding.runtime.recording import Recorder
from decoding.runtime.trees import parse_tree
from decoding.runtime.tree_walk import resolve_sequence_rule
from decoding.verifiers import block, traversal
from otm.errors import NotApplicableError, UnknownNameError

FALSE_ALARM = 1e-3
VOCAB = 5
LENGTH = 3
RUNS = 6000
PROMPT = [1, 3]

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def pair():
    return build_tiny_pair(vocab_size=VOCAB, seed=0, draft_noise=0.6, dtype=torch.float64)


def exact_law(model) -> np.ndarray:  # [V ** LENGTH]
    """Law of the first LENGTH tokens of autoregressive sampling at temperature 1,
    sequences in lexicographic order."""
    law = np.ones(1)
    for length in range(LENGTH):
        prefixes = [PROMPT + list(s) for s in itertools.product(range(VOCAB), repeat=length)]
        with torch.no_grad():
            logits = model(input_ids=torch.tensor(prefixes)).logits[:, -1]
        law = (law[:, None] * probs_from_logits(logits, 1.0).numpy()).ravel()
    return law


def decode_pvalue(pair, rule, tree, seed=0) -> tuple[float, object]:
    """Chi-square p-value of the first LENGTH tokens of RUNS seeded decodes against
    :func:`exact_law` (cells with expected count < 5 lumped)."""
    result = speculative_decode(pair, [PROMPT] * RUNS, rule, tree, max_new_tokens=LENGTH,
                                generator=torch.Generator().manual_seed(seed), progress=False)
    assert all(len(t) == LENGTH for t in result.tokens)
    counts = np.zeros(VOCAB**LENGTH)
    for row in result.tokens:
        counts[np.ravel_multi_index(row[:LENGTH], (VOCAB,) * LENGTH)] += 1
    expected = exact_law(pair.target) * RUNS
    big = expected >= 5
    observed, expected = np.append(counts[big], counts[~big].sum()), np.append(expected[big], expected[~big].sum())
    return float(chisquare(observed, expected).pvalue), result


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
    pvalue, result = decode_pvalue(pair, _rule(rule, tree), tree)
    assert pvalue > FALSE_ALARM, f"{rule} on {tree}: chi-square p-value {pvalue:.2e}"
    assert result.block_efficiency > 1.0  # drafts were accepted
    assert result.rule == rule.split("-")[0]
    assert all(0 <= a <= 1 for a in result.acceptance_by_depth if a is not None)


def test_traversal_without_the_residual_update_is_detected(pair, monkeypatch):
    update = traversal.after_rejection
    monkeypatch.setattr(traversal, "after_rejection", lambda alpha, target, proposal: (update(alpha, target, proposal)[0], target))
    pvalue, _ = decode_pvalue(pair, "traversal", "ternary:2")
    assert pvalue < FALSE_ALARM


def test_block_with_the_tokenwise_residual_is_detected(monkeypatch):
    """The token-wise residual differs from block verification's only after a stop with
    w < 1 where two or more tokens have w p > q: on the tiny pair of seed 0 the first three
    tokens' law moves by 0.001 in total variation (undetectable with RUNS decodes), on
    seed 2 by 0.038 (computed exactly with otm.sequences on the pair's tables)."""
    other = build_tiny_pair(vocab_size=VOCAB, seed=2, draft_noise=0.6, dtype=torch.float64)
    assert decode_pvalue(other, "block", "chain:3")[0] > FALSE_ALARM
    monkeypatch.setattr(block, "residual_weights", lambda weight, target, draft: (target - draft).clamp(min=0.0))
    assert decode_pvalue(other, "block", "chain:3")[0] < FALSE_ALARM


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


# ---------------------------------------------------------------- scripts/bench_sequence_verifiers.py

def _bench_script():
    import importlib
    import sys
    from pathlib import Path

    scripts = str(Path(__file__).resolve().parents[2] / "scripts")
    if scripts not in sys.path:
        sys.path.insert(0, scripts)
    return importlib.import_module("bench_sequence_verifiers")


def _tables(pair, temperature: float, g: int):
    """The tiny pair after PROMPT as an otm.sequences model (plain causal forwards)."""
    from otm.sequences import sequence_model

    target, draft = {}, {}
    for n in range(g + 1):
        prefixes = list(itertools.product(range(VOCAB), repeat=n))
        ids = torch.tensor([PROMPT + list(s) for s in prefixes])
        with torch.no_grad():
            p = probs_from_logits(pair.target(input_ids=ids).logits[:, -1], temperature).numpy()
            q = probs_from_logits(pair.draft(input_ids=ids).logits[:, -1], temperature).numpy()
        for s, p_row, q_row in zip(prefixes, p, q):
            target[s], draft[s] = p_row / p_row.sum(), q_row / q_row.sum()
    return sequence_model(target, draft)


def test_bench_chain_estimates_are_exact_given_the_chain(pair):
    """Per chain, the script's token-wise and block values (tree-attention forwards) equal
    otm.sequences' computation on tables from plain forwards, and their means over chains
    estimate the exact expected accepted lengths (block: docs/sequences.md, Lemma 2) - a
    z-test at 1e-4; token-wise values do not estimate block verification's E[tau]."""
    from scipy.stats import norm

    from otm.sequences import block_expected_accepted, tokenwise_expected_accepted
    from otm.sequences.block_verification import block_weights

    bench, g, chains = _bench_script(), 2, 1000
    estimates = bench.chain_estimates(pair, PROMPT, g, chains, (0.6, 1.0), torch.Generator().manual_seed(0))

    def z_pvalue(values, exact):
        return 2 * norm.sf(abs(values.mean() - float(exact)) / (values.std(ddof=1) / np.sqrt(len(values))))

    for temperature, est in estimates.items():
        model = _tables(pair, temperature, g)
        for x, tokenwise, block_value in list(zip(est.tokens.tolist(), est.tokenwise, est.block))[:200]:
            x = tuple(x)
            ratios = [model.target(x[:i])[x[i]] / model.draft(x[:i])[x[i]] for i in range(g)]
            assert np.isclose(tokenwise, np.cumprod(np.minimum(ratios, 1)).sum(), rtol=1e-9, atol=0)
            assert np.isclose(block_value, sum(block_weights(model, x)[1:]), rtol=1e-9, atol=0)
        exact_block = block_expected_accepted(model, g)
        assert z_pvalue(est.block, exact_block) > 1e-4
        assert z_pvalue(est.tokenwise, tokenwise_expected_accepted(model, g)) > 1e-4
        assert z_pvalue(est.tokenwise, exact_block) < 1e-4, "the test cannot tell token-wise from block"


def test_bench_script_runs_on_the_tiny_pair(tmp_path):
    out = tmp_path / "table.md"
    data = _bench_script().main(["--pair", "tiny", "--chains", "4", "--positions", "2", "--g", "3", "--out", str(out)])
    text = out.read_text()
    assert "| code | 0.6 |" in text and "| prose | 1 |" in text and "--pair tiny" in text
    assert all((c.block >= c.tokenwise - 1e-12).all() for cells in data["results"].values() for c in cells)


def test_bench_incremental_prefix_equals_a_fresh_forward(pair):
    """Positions of one text share the caches (PrefixCaches); the second position's chains
    and ratios equal those of fresh caches on the same prefix and the same draws."""
    bench = _bench_script()
    ids = [1, 3, 0, 2, 4, 4, 1]
    caches = bench.PrefixCaches(pair)
    caches.estimates(ids, 3, 2, 5, (1.0,), torch.Generator().manual_seed(0))
    shared = caches.estimates(ids, 7, 2, 5, (1.0,), torch.Generator().manual_seed(1))[1.0]
    fresh = bench.chain_estimates(pair, ids, 2, 5, (1.0,), torch.Generator().manual_seed(1))[1.0]
    assert (shared.tokens == fresh.tokens).all()
    assert np.allclose(shared.ratios, fresh.ratios, rtol=1e-9, atol=0)
