"""The compiled row of the optimal verifier (decoding.verifiers.optimal.unsorted_rows) against the
torch functions it is written from, on full sorted rows (every rank its own entry), where
both must compute the same floats:

- ``power`` is :func:`decoding.verifiers.optimal.iid.power`, bit for bit;
- ``ranked_parameters`` is :func:`decoding.verifiers.optimal.iid.ranked_parameters`, bit for
  bit (``test_every_bucket_refined_is_the_full_path`` in
  tests/decoding/test_verifier_optimal_buckets.py, through the merged row of every bucket
  refined);
- ``draw`` given those parameters is :func:`decoding.verifiers.optimal.iid.verify_rows`, draw
  for draw, on the families of tests/decoding/optimal_cases.py in float32 and float64; a
  missing matching is shown to change draws.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from decoding.verifiers.optimal import iid as optimal, unsorted_rows as optimal_merged

from .optimal_cases import FAMILIES, case
from .test_verifier_optimal_buckets import PARAMETERS

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("k", range(1, 10))
def test_power_is_the_torch_power_bit_for_bit(k):
    values = torch.rand(2000, generator=torch.Generator().manual_seed(k), dtype=torch.float64)
    compiled = [optimal_merged.power(float(v), k) for v in values]
    assert torch.equal(torch.tensor(compiled, dtype=torch.float64), optimal.power(values, k))


def _compiled_draws(p, q, drafts, uniforms, no_exchanges_in_h: bool = False) -> tuple[list[int], list[int]]:
    """The compiled draw of every row on its full sorted row (the torch sort's order), with
    the compiled parameters; ``no_exchanges_in_h``: the flow of ``H`` set to 0 (deliberately
    broken)."""
    k = drafts.shape[1]
    full = optimal.row_parameters(p, q, k)
    ranks = optimal.token_ranks(full.order, drafts)
    tokens, indices = [], []
    for row in range(p.shape[0]):
        order = full.order[row].numpy()
        p_r, q_r = p[row, full.order[row]].double().numpy(), q[row, full.order[row]].double().numpy()
        params = list(optimal_merged.ranked_parameters(p_r, q_r, k))
        if no_exchanges_in_h:
            params[PARAMETERS.index("flow_h")] = 0.0
        x = drafts[row].numpy()
        token, index, _ = optimal_merged.draw(*params, order, q_r, p[row, x].numpy(), q[row, x].numpy(), x,
                                              ranks[row].numpy(), uniforms[row].double().numpy())
        tokens.append(int(token))
        indices.append(int(index))
    return tokens, indices


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(FAMILIES), vocab=st.integers(2, 60), k=st.integers(1, 6), seed=st.integers(0, 2**31 - 1),
       dtype=st.sampled_from([torch.float32, torch.float64]))
def test_draw_is_the_torch_draw(name, vocab, k, seed, dtype):
    p, q, drafts, uniforms = case(name, 16, vocab, k, seed, dtype)
    torch_draw = optimal.verify_rows(optimal.row_parameters(p, q, k), p, q, drafts, uniforms)
    assert _compiled_draws(p, q, drafts, uniforms) == (torch_draw.tokens.tolist(), torch_draw.accepted_index.tolist())


def test_a_missing_matching_changes_draws():
    """Deliberately broken: no exchanges in ``H`` (its flow set to 0); the draw-for-draw
    check fails."""
    p, q, drafts, uniforms = case("q_zeros", 200, 30, 3, 4, torch.float64)  # H matches in most rows
    torch_draw = optimal.verify_rows(optimal.row_parameters(p, q, 3), p, q, drafts, uniforms)
    assert _compiled_draws(p, q, drafts, uniforms) == (torch_draw.tokens.tolist(), torch_draw.accepted_index.tolist())
    assert _compiled_draws(p, q, drafts, uniforms, no_exchanges_in_h=True) != (torch_draw.tokens.tolist(), torch_draw.accepted_index.tolist())
