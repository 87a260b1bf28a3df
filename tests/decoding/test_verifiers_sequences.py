"""The batched sequence verifiers (block and traversal verification) against their
plain-Python references and their exact laws in otm.sequences.

- Draw for draw: on the same uniforms (the randomness contracts of
  decoding.verifiers.block / traversal) the batched verifier and
  decoding.verifiers.reference_sequences give identical outputs on float64 rows.
- Law: on small exact models (otm.sequences.model) ``ROWS`` chains or trees are drafted
  from the model's draft, verified, and the output sequences (accepted draft path plus
  the emitted token, i.e. the joint law of the accepted length or node and the token)
  pass a Pearson chi-square test against the exact law
  (otm.sequences.block_verification_law / traversal_law, enumerated in Fractions) at
  ``ALPHA = 1e-4`` per test (decoding.validation.stats.chi_square_test; seeds fixed, so
  the outcome is deterministic; about 20 such tests: a correct verifier fails one with
  probability below 0.2 %).
- The same law test FAILS for deliberately broken verifiers: block verification with the
  token-wise residual ``norm((p - q)^+)``, traversal without the residual update between
  siblings.

Run: .venv/bin/python -m pytest tests/decoding/test_verifiers_sequences.py -q
"""
from __future__ import annotations

import functools
import sys
import zlib

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from decoding.runtime.trees import parse_tree
from decoding.validation.own_tree_verifier import PrefixTables, enumerate_trees
from decoding.validation.stats import chi_square_test
from decoding.verifiers import block, traversal
from decoding.verifiers.base import draw_uniforms
from decoding.verifiers.reference_sequences import block as block_reference
from decoding.verifiers.reference_sequences import run_rows, traversal as traversal_reference
from otm.errors import InvalidDraftCountError, NotApplicableError, ShapeMismatchError, UnknownNameError
from otm.sequences import block_expected_accepted, tokenwise_expected_accepted, traversal_law, tree_walk_expected_accepted
from otm.sequences.registry import SEQUENCE_RULES, sequence_rule_spec
from otm.tolerances import AGREEMENT_TOLERANCE
from tests.otm.sequences.support import context_switch_model, degenerate_models, exact_model, exact_models

ALPHA = 1e-4
ROWS = 20_000

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _seed(*parts) -> int:
    return zlib.crc32(repr(parts).encode())


# ---------------------------------------------------------------- exact models as tensors

class ModelTensors:
    """A :class:`otm.sequences.model.SequenceModel` as two ``[n_prefixes, V]`` float64
    tables, prefixes in order of length then lexicographically (:meth:`code`)."""

    def __init__(self, model):
        self.vocab = model.vocab_size
        prefixes = [s for n in range(model.length) for s in model.sequences(n)]
        self.offset = [sum(self.vocab**m for m in range(n)) for n in range(model.length + 1)]
        self.target = torch.tensor([[float(v) for v in model.target(s)] for s in prefixes], dtype=torch.float64)
        self.draft = torch.tensor([[float(v) for v in model.draft(s)] for s in prefixes], dtype=torch.float64)

    def child_code(self, code: torch.Tensor, depth: int, token: torch.Tensor) -> torch.Tensor:  # [n]
        """Code of ``prefix + (token,)`` from the code of ``prefix`` (of length ``depth``)."""
        return self.offset[depth + 1] + (code - self.offset[depth]) * self.vocab + token


def draft_chains(tables: ModelTensors, g: int, rows: int, generator):
    """``(tokens [rows, g], target [rows, g + 1, V], draft [rows, g, V])``: chains drafted
    from the model's draft, with ``p`` and ``q`` at every prefix."""
    code = torch.zeros(rows, dtype=torch.int64)
    tokens, targets, drafts = [], [tables.target[code]], []
    for depth in range(g):
        q = tables.draft[code]
        x = block.sample_drafts(q, 1, generator)[:, 0]
        code = tables.child_code(code, depth, x)
        tokens.append(x)
        drafts.append(q)
        targets.append(tables.target[code])
    return torch.stack(tokens, 1), torch.stack(targets, 1), torch.stack(drafts, 1)


def draft_trees(tables: ModelTensors, tree, rows: int, generator, scheme: str):
    """``(tokens, target, draft)``, each ``[rows, n_nodes(, V)]``: trees drafted from the
    model's draft, siblings with ``scheme``, in breadth-first order."""
    n = tree.n_nodes
    codes = torch.zeros(rows, n, dtype=torch.int64)
    tokens = torch.zeros(rows, n, dtype=torch.int64)
    for node in range(n):
        kids = tree.children(node)
        if len(kids):
            q = tables.draft[codes[:, node]]
            drawn = traversal.sample_drafts(q, len(kids), generator, scheme)
            for j, child in enumerate(kids):
                tokens[:, child] = drawn[:, j]
                codes[:, child] = tables.child_code(codes[:, node], int(tree.depth[node]), drawn[:, j])
    return tokens, tables.target[codes], tables.draft[codes]


def law_check(law, sequences: list[tuple]):
    """Chi-square of the observed output sequences against an exact :class:`OutputLaw`
    (an unseen sequence lands in a cell of probability 0, which fails outright)."""
    cells = sorted(law.masses)
    index = {s: j for j, s in enumerate(cells)}
    counts = np.bincount([index.get(s, len(cells)) for s in sequences], minlength=len(cells) + 1)
    probs = np.array([float(law.masses[s]) for s in cells] + [0.0])
    return chi_square_test(counts, probs / probs.sum(), ALPHA)


def block_outputs(model, g: int, seed: int, verify=block.verify) -> list[tuple]:
    generator = torch.Generator().manual_seed(seed)
    tokens, target, draft = draft_chains(ModelTensors(model), g, ROWS, generator)
    out = verify(target, draft, tokens, generator)
    assert (target[torch.arange(ROWS), out.n_accepted].gather(1, out.tokens[:, None]) > 0).all()
    return [tuple(x[:tau]) + (y,) for x, tau, y in zip(tokens.tolist(), out.n_accepted.tolist(), out.tokens.tolist())]


def traversal_outputs(model, depth: int, k: int, scheme: str, seed: int) -> list[tuple]:
    tree = parse_tree(f"kary:{k},{depth}")
    generator = torch.Generator().manual_seed(seed)
    tokens, target, draft = draft_trees(ModelTensors(model), tree, ROWS, generator, scheme)
    out = traversal.verify(tree, tokens, target, draft, generator, scheme)
    assert (target[torch.arange(ROWS), out.accepted_node].gather(1, out.tokens[:, None]) > 0).all()
    paths = [tree.path(node)[1:] for node in range(tree.n_nodes)]
    return [tuple(row[v] for v in paths[node]) + (y,)
            for row, node, y in zip(tokens.tolist(), out.accepted_node.tolist(), out.tokens.tolist())]


BLOCK_CASES = {
    "V3 g2 seed0": (lambda: exact_model(3, 3, 0), 2),
    "V3 g2 seed4": (lambda: exact_model(3, 3, 4), 2),
    "V2 g3 seed1": (lambda: exact_model(2, 4, 1), 3),
    "V3 g3 seed2": (lambda: exact_model(3, 4, 2), 3),
    "V4 g1 seed3": (lambda: exact_model(4, 2, 3), 1),
    "context switch g2": (context_switch_model, 2),
    **{f"{name} g2": ((lambda name=name: degenerate_models(3)[name]), 2) for name in degenerate_models(3)},
}

#: name -> (model factory, depth, k, sibling scheme).
TRAVERSAL_CASES = {
    "V3 d2 k2 wor": (lambda: exact_model(3, 3, 0), 2, 2, "without_replacement"),
    "V3 d2 k2 iid": (lambda: exact_model(3, 3, 1), 2, 2, "iid"),
    "V4 d1 k3 wor": (lambda: exact_model(4, 2, 2), 1, 3, "without_replacement"),
    "V2 d3 k2 iid": (lambda: exact_model(2, 4, 3), 3, 2, "iid"),
    "V3 d2 k3 wor": (lambda: exact_model(3, 3, 4), 2, 3, "without_replacement"),
    "context switch d2 k2 wor": (context_switch_model, 2, 2, "without_replacement"),
    "q with zeros d2 k3 wor (exhausted support)": (lambda: degenerate_models(3)["q with zeros"], 2, 3, "without_replacement"),
    "one-hot draft d2 k2 iid": (lambda: degenerate_models(3)["one-hot draft"], 2, 2, "iid"),
    "p equals q d2 k2 wor": (lambda: degenerate_models(3)["p equals q"], 2, 2, "without_replacement"),
}


# ---------------------------------------------------------------- the laws

@pytest.mark.parametrize("case", sorted(BLOCK_CASES))
def test_block_verifier_follows_the_exact_law(case):
    factory, g = BLOCK_CASES[case]
    model = factory()
    result = law_check(sequence_rule_spec("block").exact_law(model, g), block_outputs(model, g, _seed("block", case)))
    assert result.passed, f"block {case}: {result.reason}"


@pytest.mark.parametrize("case", sorted(TRAVERSAL_CASES))
def test_traversal_verifier_follows_the_exact_law(case):
    factory, depth, k, scheme = TRAVERSAL_CASES[case]
    model = factory()
    law = sequence_rule_spec("traversal").exact_law(model, depth, k, scheme)
    result = law_check(law, traversal_outputs(model, depth, k, scheme, _seed("traversal", case)))
    assert result.passed, f"traversal {case}: {result.reason}"


def test_block_verifier_in_float32_follows_the_exact_law():
    model, g = exact_model(3, 3, 4), 2
    generator = torch.Generator().manual_seed(_seed("float32"))
    tokens, target, draft = draft_chains(ModelTensors(model), g, ROWS, generator)
    out = block.verify(target.float(), draft.float(), tokens, generator)
    sequences = [tuple(x[:t]) + (y,) for x, t, y in zip(tokens.tolist(), out.n_accepted.tolist(), out.tokens.tolist())]
    result = law_check(sequence_rule_spec("block").exact_law(model, g), sequences)
    assert result.passed, result.reason


# ---------------------------------------------------------------- the checks can fail

@pytest.mark.parametrize("vocab, seed", [(3, 4), (4, 7)])
def test_block_with_the_tokenwise_residual_fails(monkeypatch, vocab, seed):
    """After a stop at i >= 1 (w_i < 1) the token must come from norm((w_i p - q)^+); the
    token-wise residual norm((p - q)^+) is lossy where two or more tokens have w p > q
    (V = 3, seed 4: it emits outputs of probability 0; V = 4, seed 7: every output is
    possible and the chi-square statistic rejects it)."""
    model, g = exact_model(vocab, 3, seed), 2
    law = sequence_rule_spec("block").exact_law(model, g)
    assert law_check(law, block_outputs(model, g, _seed("broken block", vocab))).passed
    monkeypatch.setattr(block, "residual_weights", lambda weight, target, draft: (target - draft).clamp(min=0.0))
    assert not law_check(law, block_outputs(model, g, _seed("broken block", vocab))).passed


@pytest.mark.parametrize("scheme", ["without_replacement", "iid"])
def test_traversal_without_the_residual_update_fails(monkeypatch, scheme):
    """Between siblings the parent's target law must become norm((alpha P - Q)^+); keeping
    P (with alpha still updated) is lossy."""
    model, depth, k = exact_model(3, 3, 0), 2, 2
    law = sequence_rule_spec("traversal").exact_law(model, depth, k, scheme)
    assert law_check(law, traversal_outputs(model, depth, k, scheme, _seed("broken traversal", scheme))).passed
    update = traversal.after_rejection
    monkeypatch.setattr(traversal, "after_rejection", lambda alpha, target, proposal: (update(alpha, target, proposal)[0], target))
    assert not law_check(law, traversal_outputs(model, depth, k, scheme, _seed("broken traversal", scheme))).passed


def test_traversal_with_the_wrong_sibling_law_fails():
    """Siblings drawn without replacement but verified as i.i.d. (Q_c = q instead of the
    conditional law) are lossy: the sibling scheme is part of the verifier."""
    model, depth, k = exact_model(3, 3, 0), 2, 2
    tree = parse_tree(f"kary:{k},{depth}")
    generator = torch.Generator().manual_seed(_seed("wrong scheme"))
    tokens, target, draft = draft_trees(ModelTensors(model), tree, ROWS, generator, "without_replacement")
    out = traversal.verify(tree, tokens, target, draft, generator, "iid")
    paths = [tree.path(node)[1:] for node in range(tree.n_nodes)]
    sequences = [tuple(row[v] for v in paths[node]) + (y,)
                 for row, node, y in zip(tokens.tolist(), out.accepted_node.tolist(), out.tokens.tolist())]
    assert not law_check(sequence_rule_spec("traversal").exact_law(model, depth, k, "without_replacement"), sequences).passed


# ---------------------------------------------------------------- draw for draw

def _random_rows(rng, shape, vocab: int) -> torch.Tensor:
    """Random laws ``shape + [vocab]`` with zeros and one-hot rows mixed in."""
    x = rng.dirichlet(np.full(vocab, 0.6), size=shape)
    x[rng.random(x.shape) < 0.2] = 0.0
    x[..., 0] += 1e-3
    one_hot = rng.random(shape) < 0.1
    x[one_hot] = np.eye(vocab)[rng.integers(vocab, size=int(one_hot.sum()))]
    return torch.as_tensor(x / x.sum(-1, keepdims=True))


@pytest.mark.parametrize("g", [1, 2, 4])
def test_block_equals_reference_draw_for_draw(g):
    rng = np.random.default_rng(g)
    rows, vocab = 2000, 5
    target, draft = _random_rows(rng, (rows, g + 1), vocab), _random_rows(rng, (rows, g), vocab)
    draft[: rows // 10] = target[: rows // 10, :g]  # p = q rows
    generator = torch.Generator().manual_seed(g)
    tokens = torch.stack([block.sample_drafts(draft[:, i], 1, generator)[:, 0] for i in range(g)], 1)
    state = generator.get_state()
    out = block.verify(target, draft, tokens, generator)
    generator.set_state(state)
    uniforms = draw_uniforms(generator, rows, block.uniforms_per_row(g), target)
    n_accepted, emitted = run_rows(block_reference, target, draft, tokens, uniforms)
    assert out.n_accepted.tolist() == n_accepted
    assert out.tokens.tolist() == emitted
    assert len(set(n_accepted)) == g + 1  # every accepted length occurs


@pytest.mark.parametrize("spec, scheme", [("binary:2", "without_replacement"), ("binary:2", "iid"),
                                          ("branching:3;2,0,1;1", "without_replacement"), ("ternary:1", "iid"),
                                          ("chains:2,3", "without_replacement")])
def test_traversal_equals_reference_draw_for_draw(spec, scheme):
    tree = parse_tree(spec)
    rng = np.random.default_rng(_seed(spec, scheme) % 2**32)
    rows, vocab = 1500, 5
    target, draft = _random_rows(rng, (rows, tree.n_nodes), vocab), _random_rows(rng, (rows, tree.n_nodes), vocab)
    generator = torch.Generator().manual_seed(3)
    tokens = torch.zeros(rows, tree.n_nodes, dtype=torch.int64)
    for node in range(tree.n_nodes):
        kids = tree.children(node)
        if len(kids):
            tokens[:, kids] = traversal.sample_drafts(draft[:, node], len(kids), generator, scheme)
    state = generator.get_state()
    out = traversal.verify(tree, tokens, target, draft, generator, scheme)
    generator.set_state(state)
    uniforms = draw_uniforms(generator, rows, traversal.uniforms_per_row(tree.n_nodes), target)
    nodes, emitted = run_rows(functools.partial(traversal_reference, tree.parent.tolist(), scheme=scheme), tokens, target, draft, uniforms)
    assert out.accepted_node.tolist() == nodes
    assert out.tokens.tolist() == emitted
    assert len(set(nodes)) > tree.n_nodes // 2


def _random_chain_tree(g: int, rows: int, seed: int, vocab: int = 5):
    """``(chain:g tree, tokens [rows, g + 1], target [rows, g + 1, V], draft [rows, g + 1, V],
    generator)``: random laws at every node (:func:`_random_rows`) and chains drafted from them."""
    rng = np.random.default_rng(seed)
    target, draft = _random_rows(rng, (rows, g + 1), vocab), _random_rows(rng, (rows, g + 1), vocab)
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.zeros(rows, g + 1, dtype=torch.int64)
    for node in range(g):
        tokens[:, node + 1] = block.sample_drafts(draft[:, node], 1, generator)[:, 0]
    return parse_tree(f"chain:{g}"), tokens, target, draft, generator


def test_traversal_on_a_chain_is_block_verification_draw_for_draw():
    """On a chain the coins of the nodes are block verification's eta_0..eta_g: same uniforms,
    same outputs (docs/sequences.md, section 5)."""
    g, rows = 3, 2000
    tree, tokens, target, draft, generator = _random_chain_tree(g, rows, seed=11)
    uniforms = draw_uniforms(generator, rows, g + 2, target)
    chain = block.verify_with_uniforms(target, draft[:, :g], tokens[:, 1:], uniforms)
    tree_out = traversal.verify_with_uniforms(tree, tokens, target, draft, uniforms, "iid")
    assert tree_out.accepted_node.tolist() == chain.n_accepted.tolist()
    assert tree_out.tokens.tolist() == chain.tokens.tolist()


def test_chains_deeper_than_the_recursion_limit():
    """Traversal verification walks a chain deeper than Python's recursion limit (no
    recursion): draw for draw block verification and the plain reference, and its expected
    accepted lengths are block verification's and the token-wise ones. Half the rows have
    p = q at every node, so their whole chain is accepted (the deepest path)."""
    g, rows = sys.getrecursionlimit() + 100, 16
    tree, tokens, target, draft, generator = _random_chain_tree(g, rows, seed=5, vocab=3)
    target[: rows // 2] = draft[: rows // 2]
    uniforms = draw_uniforms(generator, rows, g + 2, target)
    chain = block.verify_with_uniforms(target, draft[:, :g], tokens[:, 1:], uniforms)
    tree_out = traversal.verify_with_uniforms(tree, tokens, target, draft, uniforms, "iid")
    assert tree_out.accepted_node.tolist() == chain.n_accepted.tolist()
    assert tree_out.tokens.tolist() == chain.tokens.tolist()
    assert chain.n_accepted[: rows // 2].tolist() == [g] * (rows // 2)
    nodes, emitted = run_rows(functools.partial(traversal_reference, tree.parent.tolist(), scheme="iid"),
                              tokens, target, draft, uniforms)
    assert (nodes, emitted) == (tree_out.accepted_node.tolist(), tree_out.tokens.tolist())
    torch.testing.assert_close(traversal.expected_accepted(tree, tokens, target, draft, "iid"),
                               block.expected_accepted(target, draft[:, :g], tokens[:, 1:]),
                               rtol=0, atol=AGREEMENT_TOLERANCE)
    torch.testing.assert_close(traversal.expected_accepted(tree, tokens, target, draft, "iid", nodewise=True),
                               block.tokenwise_expected_accepted(target, draft[:, :g], tokens[:, 1:]),
                               rtol=0, atol=AGREEMENT_TOLERANCE)


# ---------------------------------------------------------------- degenerate and bad inputs

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_degenerate_rows_give_valid_tokens(dtype):
    """One-hot, p = q, disjoint supports, q with zeros in one batch: never NaN, never a token
    of target probability 0."""
    vocab = 4
    eye = torch.eye(vocab, dtype=torch.float64)
    uniform = torch.full((vocab,), 1 / vocab, dtype=torch.float64)
    pairs = [(eye[1], eye[3]), (eye[2], eye[2]), (uniform, uniform), (torch.tensor([0.5, 0.5, 0, 0]), torch.tensor([0, 0, 0.5, 0.5])),
             (uniform, torch.tensor([0.7, 0.3, 0, 0]))]
    reps, g = 50, 3
    target = torch.stack([p for p, _ in pairs]).repeat_interleave(reps, 0)[:, None].expand(-1, g + 1, -1).to(dtype).contiguous()
    draft = torch.stack([q for _, q in pairs]).repeat_interleave(reps, 0)[:, None].expand(-1, g, -1).to(dtype).contiguous()
    generator = torch.Generator().manual_seed(0)
    tokens = torch.stack([block.sample_drafts(draft[:, i], 1, generator)[:, 0] for i in range(g)], 1)
    out = block.verify(target, draft, tokens, generator)
    rows = torch.arange(len(target))
    assert (target[rows, out.n_accepted].gather(1, out.tokens[:, None]) > 0).all()
    tree = parse_tree("binary:2")
    node_target = target[:, :1].expand(-1, tree.n_nodes, -1).contiguous()
    node_draft = draft[:, :1].expand(-1, tree.n_nodes, -1).contiguous()
    tree_tokens = torch.zeros(len(target), tree.n_nodes, dtype=torch.int64)
    for node in range(3):
        tree_tokens[:, tree.children(node)] = traversal.sample_drafts(node_draft[:, node], 2, generator)
    tree_out = traversal.verify(tree, tree_tokens, node_target, node_draft, generator)
    assert (node_target[rows, tree_out.accepted_node].gather(1, tree_out.tokens[:, None]) > 0).all()


def test_bad_inputs_are_typed_errors():
    p = torch.full((2, 3, 4), 0.25, dtype=torch.float64)
    x = torch.zeros(2, 2, dtype=torch.int64)
    with pytest.raises(ShapeMismatchError, match="draft_probs"):
        block.verify(p, p, x, None)
    with pytest.raises(ShapeMismatchError, match="draft_tokens"):
        block.verify(p, p[:, :2], x.int(), None)
    with pytest.raises(InvalidDraftCountError):
        block.verify(p[:, :1], p[:, :0], x[:, :0], None)
    tree = parse_tree("binary:1")
    with pytest.raises(ShapeMismatchError, match="nodes"):
        traversal.verify(tree, x, p[:, :2], p[:, :2], None)
    with pytest.raises(UnknownNameError, match="sibling"):
        traversal.verify(tree, torch.zeros(2, 3, dtype=torch.int64), p, p, None, "hub")


def test_registry():
    assert list(SEQUENCE_RULES) == ["block", "traversal"]
    assert sequence_rule_spec("block").tree_shape == "chain" and sequence_rule_spec("traversal").tree_shape == "tree"
    assert sequence_rule_spec("traversal").reference.arxiv == "2505.12398"
    with pytest.raises(UnknownNameError, match="rrs"):
        sequence_rule_spec("rrs")
    with pytest.raises(NotApplicableError, match="traversal"):
        sequence_rule_spec("block").exact_law(exact_model(2, 3, 0), 2, k=2)
    model = exact_model(2, 3, 5)
    chain = sequence_rule_spec("traversal").exact_law(model, 2, 1)
    assert chain.masses == sequence_rule_spec("block").exact_law(model, 2).masses
    for name, spec in SEQUENCE_RULES.items():
        assert __import__(f"decoding.verifiers.{spec.verifier}", fromlist=["verify"]).draft_scheme == spec.draft_scheme, name


# ---------------------------------------------------------------- expected accepted lengths given the drafts

def _enumerated(model, spec: str, scheme: str):
    """Every draft tree of shape ``spec`` with ``Q > 0`` as tensors, with its exact weight:
    ``(tree, tokens [n, n_nodes], target [n, n_nodes, V], draft [n, n_nodes, V], weights [n])``."""
    tree = parse_tree(spec)
    trees = enumerate_trees(model, tree, scheme, limit=50_000)
    tokens = torch.as_tensor(np.stack([t for t, _ in trees]))
    tables = PrefixTables(model, tree.max_depth, torch.float64, "cpu")
    ids = tables.node_ids(tree, tokens)
    return tree, tokens, tables.target[ids], tables.draft[ids], torch.tensor([float(w) for _, w in trees], dtype=torch.float64)


def _chain_expectations(model, g: int) -> tuple[float, float]:
    """``(token-wise, block)``: the estimators averaged exactly over every drafted chain."""
    _, tokens, target, draft, weights = _enumerated(model, f"chain:{g}", "iid")
    chain = (target, draft[:, :g], tokens[:, 1:])
    return float(weights @ block.tokenwise_expected_accepted(*chain)), float(weights @ block.expected_accepted(*chain))


def _tree_expectations(model, depth: int, k: int, scheme: str) -> tuple[float, float]:
    """``(node-wise walk, traversal)`` averaged exactly over every drafted ``kary:k,depth`` tree."""
    tree, tokens, target, draft, weights = _enumerated(model, f"kary:{k},{depth}", scheme)
    nodewise = traversal.expected_accepted(tree, tokens, target, draft, scheme, nodewise=True)
    return float(weights @ nodewise), float(weights @ traversal.expected_accepted(tree, tokens, target, draft, scheme))


@settings(max_examples=25, deadline=None)
@given(exact_models(vocab_sizes=(2, 3), lengths=(1, 2, 3)))
def test_chain_expectations_are_the_exact_expected_lengths(case):
    """Averaged exactly over the drafted chains, the per-chain values are token-wise and block
    verification's exact E[tau] (docs/sequences.md, section 9)."""
    model, g = case
    tokenwise, block_value = _chain_expectations(model, g)
    assert abs(tokenwise - float(tokenwise_expected_accepted(model, g))) < AGREEMENT_TOLERANCE
    assert abs(block_value - float(block_expected_accepted(model, g))) < AGREEMENT_TOLERANCE


@pytest.mark.parametrize("case", sorted(TRAVERSAL_CASES))
def test_tree_expectations_are_the_exact_expected_lengths(case):
    """Averaged exactly over the drafted trees: traversal verification's exact E[tau]
    (Proposition 4) and the node-wise RRS walk's (rrs_wor / rrs without merging)."""
    factory, depth, k, scheme = TRAVERSAL_CASES[case]
    model = factory()
    nodewise, traversal_value = _tree_expectations(model, depth, k, scheme)
    assert abs(traversal_value - float(traversal_law(model, depth, k, scheme).expected_accepted())) < AGREEMENT_TOLERANCE
    rule = "rrs_wor" if scheme == "without_replacement" else "rrs"
    assert abs(nodewise - float(tree_walk_expected_accepted(model, depth, k, rule))) < AGREEMENT_TOLERANCE


@settings(max_examples=15, deadline=None)
@given(exact_models(vocab_sizes=(2, 3), lengths=(2,)), st.sampled_from(["iid", "without_replacement"]))
def test_tree_expectations_on_random_models(case, scheme):
    model, depth = case
    nodewise, traversal_value = _tree_expectations(model, depth, 2, scheme)
    assert abs(traversal_value - float(traversal_law(model, depth, 2, scheme).expected_accepted())) < AGREEMENT_TOLERANCE
    rule = "rrs_wor" if scheme == "without_replacement" else "rrs"
    assert abs(nodewise - float(tree_walk_expected_accepted(model, depth, 2, rule))) < AGREEMENT_TOLERANCE


def test_expectations_on_a_chain_agree_and_block_dominates_per_chain():
    """Per drafted chain: traversal's value is block verification's, the node-wise walk's is
    token-wise verification's, and block >= token-wise (w_i >= prod min(1, r_j))."""
    g = 4
    tree, tokens, target, draft, _ = _random_chain_tree(g, 2000, seed=12)
    chain = (target, draft[:, :g], tokens[:, 1:])
    tokenwise, block_value = block.tokenwise_expected_accepted(*chain), block.expected_accepted(*chain)
    assert torch.allclose(traversal.expected_accepted(tree, tokens, target, draft, "iid"), block_value, rtol=0, atol=AGREEMENT_TOLERANCE)
    assert torch.allclose(traversal.expected_accepted(tree, tokens, target, draft, "iid", nodewise=True), tokenwise,
                          rtol=0, atol=AGREEMENT_TOLERANCE)
    assert (block_value >= tokenwise - AGREEMENT_TOLERANCE).all() and (block_value > tokenwise + 0.01).any()
    assert not (block_value.isnan().any() or tokenwise.isnan().any())


def test_expectations_detect_a_broken_verifier(monkeypatch):
    """The same exact comparison fails for traversal without the residual update between
    siblings and for block verification's weights replaced by token-wise products."""
    model = exact_model(3, 3, 0)
    exact_traversal = float(traversal_law(model, 2, 2, "without_replacement").expected_accepted())
    update = traversal.after_rejection
    monkeypatch.setattr(traversal, "after_rejection", lambda alpha, target, proposal: (update(alpha, target, proposal)[0], target))
    assert abs(_tree_expectations(model, 2, 2, "without_replacement")[1] - exact_traversal) > 1e-3
    monkeypatch.undo()
    model, g = exact_model(3, 4, 2), 3
    monkeypatch.setattr(block, "block_weights", lambda target, draft, tokens: torch.cat(
        [torch.ones(len(tokens), 1, dtype=target.dtype),
         block.capped_ratio(*block._drafted_probabilities(target, draft, tokens)).cumprod(dim=1)], dim=1))
    assert abs(_chain_expectations(model, g)[1] - float(block_expected_accepted(model, g))) > 1e-3


def test_expectations_typed_errors():
    p = torch.full((2, 3, 4), 0.25, dtype=torch.float64)
    x = torch.zeros(2, 2, dtype=torch.int64)
    with pytest.raises(ShapeMismatchError, match="draft_probs"):
        block.expected_accepted(p, p, x)
    with pytest.raises(ShapeMismatchError, match="draft_tokens"):
        block.tokenwise_expected_accepted(p, p[:, :2], x.int())
    with pytest.raises(UnknownNameError, match="sibling"):
        traversal.expected_accepted(parse_tree("binary:1"), torch.zeros(2, 3, dtype=torch.int64), p, p, "hub")
