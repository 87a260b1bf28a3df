"""The optimal verifier's selection law given the drafts on float rows
(otm.rules.optimal._iid_selection): the array sweep gives the very floats of the loop over
blocks it replaced (the paired comparison of ``otm report`` calls it at every node)."""
import numpy as np
import pytest

from otm.rules import optimal


def _row(rng, vocab, scale):
    logits = scale * rng.standard_normal((2, vocab))
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    return probs[0] / probs[0].sum(), probs[1] / probs[1].sum()


def _loop(params, ranks, monkeypatch):
    with monkeypatch.context() as patch:
        patch.setattr(optimal, "is_exact", lambda values: True)  # the loop, which also takes floats
        return optimal._iid_selection(params, ranks)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("k", [2, 3, 8])
def test_the_array_sweep_gives_the_loops_floats(seed, k, monkeypatch):
    rng = np.random.default_rng(seed)
    p, q = _row(rng, 300 if seed % 2 else 3_000, 1.0)
    params = optimal.selection_parameters(p, q, k)
    moving = np.flatnonzero([len(optimal.block_distribution(params, r)) > 1 for r in range(params.order.size)])
    assert moving.size  # positions that can move to several blocks
    for _ in range(5):
        ranks = [int(r) for r in rng.choice(params.order.size, size=k)]
        ranks[0] = int(rng.choice(moving))
        ranks[-1] = ranks[0]  # repeated tokens: a merged node's drafts
        fast = optimal._iid_selection(params, ranks)
        assert fast == _loop(params, ranks, monkeypatch)
        assert sum(fast) == pytest.approx(1.0, abs=1e-12)  # one position is selected
