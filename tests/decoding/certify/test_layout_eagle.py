"""EAGLE's layout (decoding.certify.layouts.eagle): the paths of a tree, the plain
evaluate_posterior's greedy and sampling branches on worked examples, the sampling branch
certified through the adapter (duplicate siblings included: they are tried once), the
adapter's checks, and the caller's random state left as it was."""
import random

import numpy as np
import pytest
import torch

from decoding.certify import IndexMismatch
from decoding.certify.layouts.eagle import eagle_tree_verifier, evaluate_posterior, tree_paths
from decoding.certify.trees import assert_tree_lossless
from decoding.certify.zoo import tree_zoo
from decoding.runtime.trees import parse_tree
from otm.errors import InvalidArgumentError, ShapeMismatchError
from otm.sequences import random_model

from .conftest import N_PER_ROW_CALLS, check_tree_bug

#: V = 4, length 3: trees up to depth 2, p changing from node to node.
MODEL = random_model(4, 3, np.random.default_rng(7))

#: The worked example's tree: the root has children 1 and 2, node 1 has children 3 and 4.
EXAMPLE = parse_tree("[[[],[]],[]]")

#: Logits of probability 0.
NEVER = -1e9


def test_the_paths_of_a_tree():
    assert tree_paths(EXAMPLE).tolist() == [[0, 1, 3], [0, 1, 4], [0, 2, -1]]


def example(rows):
    """``(logits [3, 3, 4], candidates [3, 3])`` of the worked example with node laws ``rows``
    (``{node: [4] logits}``): tokens 2 and 1 under the root, 3 and 0 under node 1."""
    paths = tree_paths(EXAMPLE)
    tokens = torch.tensor([0, 2, 1, 3, 0])
    candidates = torch.where(paths < 0, -1, tokens[paths.clamp(min=0)])
    table = torch.stack([torch.tensor(rows.get(node, [0.0] * 4)) for node in range(5)])
    return table[paths.clamp(min=0)], candidates


def test_the_greedy_branch_takes_the_longest_argmax_path():
    logits, candidates = example({0: [0, 0, 5, 0], 1: [5, 0, 0, 0], 3: [0, 0, 0, 7]})
    best, length, sample_p = evaluate_posterior(logits, candidates, None)
    assert (int(best), length) == (1, 2) and int(sample_p.argmax()) == 0  # node 4 (token 0), then the row after it


def test_the_sampling_branch_walks_and_takes_the_residual():
    """The root's law is a point mass on token 2 (node 1): accepted whatever the coin. Node 1's law
    puts 0.5 on token 3 and 0.5 on token 1 (not a child): token 3 is tried first; if rejected, the
    residual is token 1; if accepted, node 3 is a leaf and its own law gives the token."""
    logits, candidates = example({0: [NEVER, NEVER, 0, NEVER], 1: [NEVER, 0, NEVER, 0], 3: [NEVER, NEVER, NEVER, 0]})
    outcomes = set()
    torch.manual_seed(0)
    for _ in range(40):
        best, length, sample_p = evaluate_posterior(logits, candidates, lambda ids, scores: scores)
        outcomes.add((int(best), length, int(sample_p.argmax()), float(sample_p.max())))
    assert outcomes == {(0, 2, 3, 1.0), (0, 1, 1, 1.0)}


def test_the_sampling_branch_is_lossless():
    verify = eagle_tree_verifier(evaluate_posterior, temperature=0.7)
    certificate = assert_tree_lossless(verify, "kary:2,2", MODEL, scheme="without_replacement", n=N_PER_ROW_CALLS)
    assert "detected" in certificate.control and certificate.expected_accepted > 0.5


def test_duplicate_siblings_are_tried_once():
    verify = eagle_tree_verifier(evaluate_posterior, temperature=1.3)
    assert_tree_lossless(verify, "kary:3,1", MODEL, scheme="iid", n=N_PER_ROW_CALLS, control=False)


def test_the_adapter_checks_the_result_and_restores_the_random_state():
    def past_the_path(logits, candidates, logits_processor):
        best, _, sample_p = evaluate_posterior(logits, candidates, logits_processor)
        return best, candidates.shape[1], sample_p

    def short_law(logits, candidates, logits_processor):
        best, length, sample_p = evaluate_posterior(logits, candidates, logits_processor)
        return best, length, sample_p[:2]

    for wrong, error, match in ((past_the_path, IndexMismatch, "not a path of the draft tree"),
                                (short_law, ShapeMismatchError, r"sample_p must be a \[V=4\] tensor")):
        with pytest.raises(error, match=match):
            assert_tree_lossless(eagle_tree_verifier(wrong), "kary:2,1", MODEL, n=100, control=False)
    with pytest.raises(InvalidArgumentError, match="temperature must be >= 0"):
        eagle_tree_verifier(evaluate_posterior, temperature=-1.0)
    random.seed(5)
    torch.manual_seed(5)
    python_state, torch_state = random.getstate(), torch.get_rng_state()
    assert_tree_lossless(eagle_tree_verifier(evaluate_posterior), "kary:2,1", MODEL, n=100, control=False)
    assert random.getstate() == python_state and torch.equal(torch.get_rng_state(), torch_state)


@pytest.mark.parametrize("bug", [bug for bug in tree_zoo() if bug.layout == "eagle"], ids=lambda bug: bug.name)
def test_the_zoo_bugs_fail_where_the_correct_function_passes(bug):
    check_tree_bug(bug, N_PER_ROW_CALLS)
