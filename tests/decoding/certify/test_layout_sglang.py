"""SGLang's tree layout (decoding.certify.layouts.sglang): the linked lists, the plain
implementations of its target-only and greedy tree verification on a worked example, the
target-only rule certified through the adapter (distinct siblings; duplicate siblings and
relaxed thresholds are lossy), the adapter's checks of accept_index and predicts."""
import math

import numpy as np
import pytest
import torch

from decoding.certify import IndexMismatch, OutputLawMismatch
from decoding.certify.layouts.sglang import (
    sglang_tree_verifier,
    tree_layout,
    tree_speculative_sampling_target_only,
    verify_tree_greedy,
)
from decoding.certify.trees import assert_tree_lossless
from decoding.certify.zoo import target_only_node_law, tree_zoo
from decoding.runtime.trees import parse_tree
from otm.sequences import random_model, tree_walk_law

from .conftest import N, check_tree_bug

#: V = 4, length 3: trees up to depth 2, p changing from node to node.
MODEL = random_model(4, 3, np.random.default_rng(7))

#: A statistical check here fails a correct sampler with probability at most this.
MISS = 1e-9

#: The worked example's tree: the root has children 1 and 2, node 1 has children 3 and 4.
EXAMPLE = parse_tree("[[[],[]],[]]")

target_only = sglang_tree_verifier(tree_speculative_sampling_target_only)


def test_the_linked_lists_of_a_tree():
    index, next_token, next_sibling = tree_layout(EXAMPLE, 2)
    assert index.tolist() == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    assert next_token[1].tolist() == [1, 3, -1, -1, -1]
    assert next_sibling[1].tolist() == [-1, 2, -1, 4, -1]


def example_outputs():
    """The layout's outputs for one request of the worked example, as SGLang's caller allocates them."""
    return (torch.full((5,), -1, dtype=torch.int32), torch.full((1, 3), -1, dtype=torch.int32),
            torch.zeros(1, dtype=torch.int32))


def test_target_only_walk_on_a_worked_example():
    """Root coin 0.25: node 1 (token 2, p = 0.3) is accepted. Node 1's coin 0.9: its children
    (tokens 3 and 0, masses 0.5 and 0.2) are rejected and removed; the final coin 0.5 picks
    token 2 from the residual (0, 0.1, 0.2, 0)."""
    target = torch.zeros(1, 5, 4)
    target[0, 0] = torch.tensor([0.1, 0.2, 0.3, 0.4])
    target[0, 1] = torch.tensor([0.2, 0.1, 0.2, 0.5])
    candidates = torch.tensor([[0, 2, 1, 3, 0]])
    coins = torch.tensor([[0.25, 0.9, 0.5, 0.5, 0.5]])
    predicts, accept_index, accept_token_num = example_outputs()
    draft_probs = torch.zeros_like(target)
    tree_speculative_sampling_target_only(predicts, accept_index, accept_token_num, candidates, *tree_layout(EXAMPLE, 1),
                                          coins, torch.tensor([0.5]), target, draft_probs)
    assert accept_token_num.tolist() == [1] and accept_index.tolist() == [[0, 1, -1]]
    assert predicts[:2].tolist() == [2, 2]
    assert draft_probs[0, 1].tolist() == pytest.approx([0.2, 0.0, 0.0, 0.5])

    predicts, accept_index, accept_token_num = example_outputs()
    verify_tree_greedy(predicts, accept_index, accept_token_num, candidates, *tree_layout(EXAMPLE, 1),
                       target.argmax(dim=-1))
    assert accept_token_num.tolist() == [0] and accept_index.tolist() == [[0, -1, -1]] and predicts[0] == 3


@pytest.mark.parametrize("scheme", ["without_replacement", "greedy"])
def test_target_only_sampling_is_lossless_with_distinct_siblings_and_accepts_as_its_exact_law(scheme):
    certificate = assert_tree_lossless(target_only, "kary:2,2", MODEL, scheme=scheme, n=N)
    assert "detected" in certificate.control
    exact = float(tree_walk_law(MODEL, 2, 2, target_only_node_law(scheme)).expected_accepted())
    # Hoeffding: the mean of N rows in [0, 2] (weights at most 1) is this close with probability 1 - MISS
    assert abs(certificate.expected_accepted - exact) <= 2 * math.sqrt(math.log(2 / MISS) / (2 * N))


def test_an_unbalanced_tree_with_leaves_above_the_full_depth():
    assert_tree_lossless(target_only, "branching:3;2,1", MODEL, scheme="without_replacement", n=N)


def test_duplicate_siblings_are_counted_twice():
    """The layout's precondition: i.i.d. siblings repeat tokens, whose mass the walk adds twice."""
    with pytest.raises(OutputLawMismatch, match="are not P"):
        assert_tree_lossless(target_only, "kary:3,1", MODEL, scheme="iid", n=N, control=False)


def test_relaxed_acceptance_thresholds_are_lossy():
    relaxed = sglang_tree_verifier(tree_speculative_sampling_target_only, threshold_acc=0.5)
    with pytest.raises(OutputLawMismatch, match="are not P"):
        assert_tree_lossless(relaxed, "kary:2,1", MODEL, scheme="without_replacement", n=N, control=False)


def test_the_adapter_checks_accept_index_and_predicts():
    def off_the_tree(**kwargs):
        tree_speculative_sampling_target_only(**kwargs)
        kwargs["accept_index"][:, 0] = 1  # the path does not start at the root

    def wrong_predicts(**kwargs):
        tree_speculative_sampling_target_only(**kwargs)
        kwargs["predicts"].add_(1).remainder_(4)  # every emitted token moved

    for sampler, match in ((off_the_tree, "accept_index is not a path"), (wrong_predicts, "are not the drafts")):
        with pytest.raises(IndexMismatch, match=match):
            assert_tree_lossless(sglang_tree_verifier(sampler), "kary:2,2", MODEL, scheme="without_replacement",
                                 n=1_000, control=False)


@pytest.mark.parametrize("bug", [bug for bug in tree_zoo() if bug.layout == "sglang"], ids=lambda bug: bug.name)
def test_the_zoo_bugs_fail_where_the_correct_sampler_passes(bug):
    check_tree_bug(bug, N)
