"""A decoding step whose per-node tensors would not fit in memory is refused before they are
allocated, with a typed error naming the tree, the estimate and the free memory."""
import pytest
import torch

import decoding.runtime.loop as loop
from decoding.models.tiny import build_tiny_pair
from decoding.runtime.trees import parse_tree
from otm.errors import InvalidArgumentError


def test_step_bytes_counts_every_per_node_tensor():
    assert loop.step_bytes(2, 10, 151_936, torch.float32) == loop.STEP_TENSORS * 2 * 10 * 151_936 * 4
    assert loop.step_bytes(1, 1, 8, torch.float64) == loop.STEP_TENSORS * 8 * 8


def test_available_bytes_reads_the_machine():
    free = loop.available_bytes(torch.device("cpu"))
    assert free is None or free > 0


def test_a_tree_too_large_for_memory_is_refused_before_its_tensors(monkeypatch):
    tree = parse_tree("kary:2,11")  # 4095 nodes: 5 x 4095 x 151,936 x 4 B = 11.6 GiB per step
    monkeypatch.setattr(loop, "available_bytes", lambda device: 4 * 2**30)
    with pytest.raises(InvalidArgumentError, match=r"kary:2,11 \(4095 nodes\).*GiB per step, more than the 4.0 GiB"):
        loop.check_step_memory(1, tree, 151_936, torch.float32, torch.device("cpu"))
    loop.check_step_memory(1, parse_tree("chains:2,4"), 151_936, torch.float32, torch.device("cpu"))  # 0.03 GiB


def test_decode_refuses_before_allocating_the_step(monkeypatch):
    allocated = []
    real_zeros = torch.zeros

    def zeros(*shape, **kwargs):
        allocated.append(shape)
        return real_zeros(*shape, **kwargs)

    pair = build_tiny_pair(vocab_size=8, seed=3)
    monkeypatch.setattr(loop, "available_bytes", lambda device: 1000)  # less than one step needs
    with pytest.raises(InvalidArgumentError, match="GiB per step"):
        monkeypatch.setattr(loop.torch, "zeros", zeros)
        loop.speculative_decode(pair, [1, 2, 3], "rrs", "chains:2,4", max_new_tokens=4, progress=False)
    monkeypatch.setattr(loop.torch, "zeros", real_zeros)
    n_nodes = parse_tree("chains:2,4").n_nodes
    assert (1, n_nodes, 8) not in allocated  # the step's draft laws were never allocated
