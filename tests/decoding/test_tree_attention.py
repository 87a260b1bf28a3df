"""Tree attention (decoding.runtime.tree_attention): one forward of a whole tree over a KV cache
gives the logits of plain causal forwards of every root-to-node path."""
import pytest
import torch

from decoding.models.tiny import build_tiny_pair
from decoding.runtime.tree_attention import TREE_LOGIT_TOLERANCE, TreeCache
from decoding.runtime.trees import parse_tree
from otm.tolerances import AGREEMENT_TOLERANCE

PROMPTS = torch.tensor([[0, 3, 1, 4, 2], [0, 0, 0, 5, 6]])
VALID = torch.tensor([[1, 1, 1, 1, 1], [0, 0, 0, 1, 1]], dtype=torch.bool)  # row 1 is left-padded


def plain_logits(model, ids):  # last-position logits of a causal forward of one sequence
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits[0, -1]


def _max_gap(model, cache, tree, tokens, histories, logits):
    gap = 0.0
    for b, history in enumerate(histories):
        for node in range(tree.n_nodes):
            ref = plain_logits(model, history + tokens[b, tree.path(node)[1:]].tolist())
            gap = max(gap, float((ref - logits[b, node]).abs().max()))
    return gap


@pytest.mark.parametrize("dtype, tol", [(torch.float64, AGREEMENT_TOLERANCE), (torch.float32, TREE_LOGIT_TOLERANCE)])
@pytest.mark.parametrize("spec", ["branching:2;2,1;1", "chains:3,2"])
def test_tree_logits_equal_path_forwards_over_two_steps(dtype, tol, spec):
    model = build_tiny_pair(vocab_size=8, hidden_size=16, num_layers=2, dtype=dtype).target
    tree = parse_tree(spec)
    gen = torch.Generator().manual_seed(0)
    cache = TreeCache(model, 2, "cpu")
    cache.prefill(PROMPTS[:, :-1], VALID[:, :-1])
    histories = [PROMPTS[b][VALID[b]].tolist() for b in range(2)]
    for step in range(2):
        tokens = torch.randint(0, 8, (2, tree.n_nodes), generator=gen)
        tokens[:, 0] = torch.tensor([h[-1] for h in histories])
        cache.begin_step(tree)
        logits = cache.forward_step(tokens[:, :1], torch.ones(2, 1, dtype=torch.bool), tokens[:, 1:], range(1, tree.n_nodes))
        assert _max_gap(model, cache, tree, tokens, histories, logits) <= tol
        # commit a different path per row: deepest leaf for row 0, first child for row 1
        leaf = int(tree.depth.argmax())
        path0 = tree.path(leaf)[1:]
        paths = torch.tensor([path0, [tree.children(0)[0]] + [-1] * (len(path0) - 1)])
        cache.commit(paths)
        final = [7, 6]
        for b in range(2):
            histories[b] = histories[b] + [int(tokens[b, n]) for n in paths[b].tolist() if n >= 0] + [final[b]]
        assert cache.length.tolist() == [len(h) - 1 for h in histories]  # the final tokens are the next roots


def test_level_by_level_equals_one_shot():
    model = build_tiny_pair(vocab_size=8, dtype=torch.float64).draft
    tree = parse_tree("binary:3")
    tokens = torch.randint(0, 8, (2, tree.n_nodes), generator=torch.Generator().manual_seed(1))
    results = []
    for by_level in (False, True):
        cache = TreeCache(model, 2, "cpu")
        cache.prefill(PROMPTS[:, :-1], VALID[:, :-1])
        cache.begin_step(tree)
        one = torch.ones(2, 1, dtype=torch.bool)
        if by_level:
            parts = [cache.forward_step(PROMPTS[:, -1:], one)]
            for d in range(1, tree.max_depth + 1):
                nodes = tree.level(d)
                parts.append(cache.forward_step(node_tokens=tokens[:, nodes], nodes=nodes))
            results.append(torch.cat(parts, dim=1))
        else:
            results.append(cache.forward_step(PROMPTS[:, -1:], one, tokens[:, 1:], range(1, tree.n_nodes)))
    assert float((results[0] - results[1]).abs().max()) <= AGREEMENT_TOLERANCE


def test_plain_causal_mask_over_the_tree_is_detected():
    """The check can fail: forwarding the flattened tree causally (siblings see each
    other) gives logits that differ from the path forwards."""
    model = build_tiny_pair(vocab_size=8, dtype=torch.float64).target
    tree = parse_tree("binary:2")
    tokens = torch.randint(0, 8, (1, tree.n_nodes), generator=torch.Generator().manual_seed(2))
    history = PROMPTS[0].tolist()
    tokens[0, 0] = history[-1]
    with torch.no_grad():
        flat = model(input_ids=torch.cat([PROMPTS[:1, :-1], tokens], dim=1)).logits[0, -tree.n_nodes:]
    cache = TreeCache(model, 1, "cpu")
    gap = _max_gap(model, cache, tree, tokens, [history[:-1]], flat.unsqueeze(0))
    assert gap > TREE_LOGIT_TOLERANCE
