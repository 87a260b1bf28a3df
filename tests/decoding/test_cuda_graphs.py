"""CUDA graphs of the optimal verifier's full path (decoding.verifiers.cuda_graphs): a
replay gives the eager call's draws bit for bit, on fresh inputs every call (a stale
replay, one that did not copy its inputs in, would repeat the last call's draws and fail).
The eager CUDA path itself is tested against the exact law in test_verifiers_exactness.py.
Off CUDA, calls run eagerly and nothing is captured."""
from __future__ import annotations

import pytest
import torch

from decoding.verifiers import cuda_graphs
from decoding.verifiers.optimal import iid as optimal
from decoding.verifiers.optimal import latent as optimal_latent
from decoding.verifiers.cuda_graphs import GraphedFunction

from .optimal_cases import softmax_rows

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def _calls(graphed: GraphedFunction, batch: int, vocab: int, k: int, device: str, calls: int = 4):
    """``calls`` calls of one signature on fresh rows, drafts and uniforms: (graphed, eager)
    outputs of each."""
    results = []
    for call in range(calls):
        p, q = softmax_rows(batch, vocab, 100 * k + call, torch.float32, device)
        drafts = optimal.sample_drafts(q, k, torch.Generator(device).manual_seed(call))
        u = torch.rand(batch, optimal.uniforms_per_row(k), generator=torch.Generator(device).manual_seed(50 + call),
                       dtype=p.dtype, device=device)
        eager = optimal.verify_sorted(p, q, drafts, u)
        results.append((graphed(p, q, drafts, u), (eager.tokens, eager.accepted_index)))
    return results


@cuda
@pytest.mark.parametrize("k", [2, 5])
@pytest.mark.parametrize("vocab", [4096, 151_936])
def test_a_replay_draws_what_the_eager_path_draws(k, vocab):
    graphed = GraphedFunction(optimal._full_path)
    results = _calls(graphed, 16, vocab, k, "cuda")
    assert graphed.failed is None and graphed.captured == 1
    for (tokens, accepted), (eager_tokens, eager_accepted) in results:
        assert torch.equal(tokens, eager_tokens) and torch.equal(accepted, eager_accepted)
    assert not all(torch.equal(results[0][1][0], r[1][0]) for r in results[1:])  # the calls differ


@cuda
def test_the_verifiers_replay_on_cuda():
    """``verify`` of both optimal verifiers on CUDA: the same draws from the same generator
    state whether the full path ran eagerly (first call of a shape) or from its graph."""
    p, q = softmax_rows(8, 4096, 7, torch.float32, "cuda")
    for module in (optimal, optimal_latent):
        outs = []
        for _ in range(3):
            drafts = module.sample_drafts(q, 3, torch.Generator("cuda").manual_seed(1))
            out = module.verify(p, q.unsqueeze(1).expand(8, 3, 4096), drafts, torch.Generator("cuda").manual_seed(2))
            outs.append((out.tokens, out.accepted_index))
        assert all(torch.equal(a, b) for out in outs[1:] for a, b in zip(out, outs[0]))
    assert optimal.graphed_full_path.failed is None and optimal.graphed_full_path.captured >= 1


@cuda
def test_at_most_max_graphs_signatures_are_kept():
    graphed = GraphedFunction(optimal._full_path, max_graphs=2)
    for batch in (2, 3, 4):
        _calls(graphed, batch, 512, 2, "cuda", calls=2)
    assert graphed.captured == 2


def test_off_cuda_nothing_is_captured():
    graphed = GraphedFunction(optimal._full_path)
    for (tokens, accepted), (eager_tokens, eager_accepted) in _calls(graphed, 4, 512, 2, "cpu", calls=3):
        assert torch.equal(tokens, eager_tokens) and torch.equal(accepted, eager_accepted)
    assert graphed.captured == 0


@cuda
def test_a_stale_replay_is_caught(monkeypatch):
    """The check above on a broken graph that replays without copying its inputs in."""
    def stale(self, tensors):
        self.graph.replay()
        return tuple(out.clone() for out in self.outputs)

    monkeypatch.setattr(cuda_graphs._Graph, "__call__", stale)
    graphed = GraphedFunction(optimal._full_path)
    results = _calls(graphed, 16, 4096, 2, "cuda")
    assert graphed.captured == 1
    assert not all(torch.equal(tokens, eager) for (tokens, _), (eager, _) in results)
