"""TensorRT-LLM's EAGLE-3 dynamic-tree layout (decoding.certify.layouts.trtllm): the plain
target-only rejection sampling on a worked example, certified through the adapter (distinct
siblings; i.i.d. siblings are lossy), the #15098 class (a wrong logits slice) failing, and the
adapter's checks of accept_index and accept_token."""
import math

import numpy as np
import pytest
import torch

from decoding.certify import IndexMismatch, OutputLawMismatch
from decoding.certify.layouts.sglang import tree_layout
from decoding.certify.layouts.trtllm import trtllm_tree_verifier, verify_dynamic_tree_rejection
from decoding.certify.trees import assert_tree_lossless
from decoding.certify.zoo import target_only_node_law, tree_zoo
from decoding.runtime.trees import parse_tree
from otm.errors import InvalidArgumentError, ShapeMismatchError
from otm.sequences import random_model, tree_walk_law

from .conftest import N, check_tree_bug

#: V = 4, length 3: trees up to depth 2, p changing from node to node.
MODEL = random_model(4, 3, np.random.default_rng(7))

#: A statistical check here fails a correct sampler with probability at most this.
MISS = 1e-9

#: The worked example's tree: the root has children 1 and 2, node 1 has children 3 and 4.
EXAMPLE = parse_tree("[[[],[]],[]]")

#: Logits of probability 0.
NEVER = -1e9

reference = trtllm_tree_verifier(verify_dynamic_tree_rejection)


def run_example(seed: int, tree_valid: bool = True):
    """The layout's call on the worked example: drafts 2, 1 under the root, 3, 0 under node 1;
    the root's law a point mass on 2, node 1's half on 3 (a child) and half on 1 (not one),
    node 3's a point mass on 0."""
    rows = {0: [NEVER, NEVER, 0, NEVER], 1: [NEVER, 0, NEVER, 0], 3: [0, NEVER, NEVER, NEVER]}
    logits = torch.tensor([rows.get(node, [0.0] * 4) for node in range(5)])
    _, next_token, next_sibling = tree_layout(EXAMPLE, 1)
    return verify_dynamic_tree_rejection(
        draft_tokens=torch.tensor([[2, 1, 3, 0]]), target_logits_tree=logits, retrieve_next_token=next_token.int(),
        retrieve_next_sibling=next_sibling.int(), tree_valid=torch.tensor([tree_valid]), temperatures=torch.ones(1),
        num_gens=1, num_spec_step=3, seed=seed)


def test_target_only_walk_on_a_worked_example():
    """Node 1 is accepted whatever the coin; then either node 3 (token 3) is accepted and node
    3's law gives the bonus 0, or both children are rejected and the residual without them is
    token 1."""
    outcomes = set()
    for seed in range(40):
        accept_index, accept_token_num, accept_token = run_example(seed)
        count = int(accept_token_num[0])
        outcomes.add((count, tuple(accept_index[0, : count + 1].tolist()), tuple(accept_token[0, : count + 1].tolist())))
    assert outcomes == {(2, (0, 1, 3), (2, 3, 0)), (1, (0, 1), (2, 1))}


def test_an_invalid_tree_emits_a_token_of_the_root_law():
    accept_index, accept_token_num, accept_token = run_example(0, tree_valid=False)
    assert accept_token_num.tolist() == [0] and accept_index[0, 0] == 0 and accept_token[0, 0] == 2


@pytest.mark.parametrize("tree", ["kary:2,2", "branching:3;2,1"])
def test_target_only_rejection_is_lossless_with_distinct_siblings_and_accepts_as_its_exact_law(tree):
    certificate = assert_tree_lossless(reference, tree, MODEL, scheme="without_replacement", n=N)
    assert "detected" in certificate.control
    if tree == "kary:2,2":
        exact = float(tree_walk_law(MODEL, 2, 2, target_only_node_law("without_replacement")).expected_accepted())
        # Hoeffding: the mean of N rows in [0, 2] (weights at most 1) is this close with probability 1 - MISS
        assert abs(certificate.expected_accepted - exact) <= 2 * math.sqrt(math.log(2 / MISS) / (2 * N))


def test_iid_siblings_are_lossy():
    """A repeated sibling counts its target mass twice."""
    with pytest.raises(OutputLawMismatch, match="not P"):
        assert_tree_lossless(reference, "kary:2,2", MODEL, scheme="iid", n=N)


def test_the_wrong_logits_slice_of_15098_fails_naming_the_stream():
    (bug,) = [bug for bug in tree_zoo() if bug.layout == "trtllm"]
    check_tree_bug(bug, N)


def corrupted(change):
    """The reference with ``change(accept_index, accept_token_num, accept_token)`` applied to its output."""

    def sampler(**kwargs):
        out = verify_dynamic_tree_rejection(**kwargs)
        change(*out)
        return out

    return trtllm_tree_verifier(sampler)


def test_the_adapter_refuses_an_index_off_the_tree_and_tokens_that_are_not_the_drafts():
    def off_path(accept_index, accept_token_num, accept_token):
        accept_token_num.fill_(1)
        accept_index[:, 1] = 4  # a grandchild of the root

    def misread(accept_index, accept_token_num, accept_token):
        accept_token_num.fill_(1)
        accept_index[:, 1] = 1
        accept_token[:, 0] = (accept_token[:, 0] + 1) % 4

    with pytest.raises(IndexMismatch, match="not a path"):
        assert_tree_lossless(corrupted(off_path), "kary:2,2", MODEL, scheme="without_replacement", n=200)
    with pytest.raises(IndexMismatch, match="not the drafts"):
        assert_tree_lossless(corrupted(misread), "kary:2,2", MODEL, scheme="without_replacement", n=200)


def test_the_adapter_and_the_reference_refuse_what_they_cannot_run():
    with pytest.raises(ShapeMismatchError, match="accept_index"):
        assert_tree_lossless(trtllm_tree_verifier(lambda **kwargs: (torch.zeros(1, 1), torch.zeros(1), torch.zeros(1, 1))),
                             "kary:2,2", MODEL, scheme="without_replacement", n=200)
    with pytest.raises(InvalidArgumentError, match="temperature"):
        trtllm_tree_verifier(verify_dynamic_tree_rejection, temperature=0.0)
    with pytest.raises(InvalidArgumentError, match="top_k"):
        verify_dynamic_tree_rejection(draft_tokens=torch.zeros(1, 1, dtype=torch.int64), target_logits_tree=torch.zeros(2, 4),
                                      retrieve_next_token=torch.tensor([[1, -1]]), retrieve_next_sibling=torch.tensor([[-1, -1]]),
                                      tree_valid=torch.tensor([True]), temperatures=torch.ones(1), top_k=torch.tensor([2]),
                                      num_gens=1, num_spec_step=2)
