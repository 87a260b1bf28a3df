"""The compiled passes of the optimal verifier (decoding.verifiers.optimal.row_passes) against
plain torch versions written here, on the row families of tests/decoding/optimal_cases.py
in every dtype and on degenerate rows (``q = 0``, ``0 / 0``, ``-0.0``, subnormal ``q``,
ratios at the top of the float64 range):

- the cut (:func:`decoding.verifiers.optimal.unsorted_rows.cut`: keys, range, bucket ids, both
  histograms and the bucket sizes) equals the torch cut bit for bit, and a one-ulp change
  of one ``p`` is seen;
- keys at or above ``inf`` land in the last bucket even when the largest finite ratio
  shares its high bits with ``inf`` (where clamping the shifted key, as the torch cut once
  did, puts them in the last finite bucket);
- the members of chosen buckets equal a ``nonzero`` over the bucket ids, with the sorted
  path's keys (:func:`decoding.verifiers.optimal.iid.ratio_keys`) and ``p``, ``q`` in float64;
- the two sums of the lazy rows are within the bound ``gamma_V`` of their exact value
  (``math.fsum``), and the tie-widened masked sum takes the torch ratio test's tokens in
  float32 and float64.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings

from decoding.verifiers.optimal import iid as optimal, unsorted as optimal_buckets, identical_drafts as optimal_lazy, unsorted_rows as optimal_merged, row_passes as optimal_numba
from decoding.verifiers.base import Scratch

from .optimal_cases import case, case_parameters, compiled_cut

pytestmark = pytest.mark.usefixtures("one_torch_thread")

INF_KEY = optimal_numba.INF_KEY


def torch_cut(p: torch.Tensor, q: torch.Tensor, buckets: int = optimal_buckets.BUCKETS):
    """One row cut in torch operations: ``(bucket ids, p sums, q sums, sizes)``."""
    size = buckets + 2
    p64, q64 = p.double(), q.double()
    keys = (p64 / q64).abs().view(torch.int64)
    finite, positive = keys < INF_KEY, (keys > 0) & (keys < INF_KEY)
    if positive.any():
        first, last = int(keys[positive].min()), int(keys[finite].max())
        step = ((last - first) // buckets).bit_length()
        count = ((last - first) >> step) + 1
    else:
        first, step, count = INF_KEY, 0, 0
    ids = (((keys - first) >> step) + 1).clamp(1, max(count, 1))
    ids = torch.where(keys == 0, 0, torch.where(keys >= INF_KEY, count + 1, ids))
    sums = [torch.zeros(size, dtype=torch.float64).scatter_add_(0, ids, values) for values in (p64, q64)]
    return ids.int(), sums[0], sums[1], torch.bincount(ids, minlength=size)


def _assert_cut_equal(p: torch.Tensor, q: torch.Tensor):
    for row in range(p.shape[0]):
        cut = compiled_cut(p[row], q[row], 2)
        ids, target, draft, sizes = torch_cut(p[row], q[row])
        assert torch.equal(cut.ids, ids)
        assert torch.equal(cut.target, target)
        assert torch.equal(cut.draft, draft)
        assert torch.equal(cut.sizes, sizes)


@settings(max_examples=40, deadline=None)
@given(**case_parameters(300))
def test_cut_equals_torch_bit_for_bit(name, vocab, k, seed, dtype):
    p, q, _, _ = case(name, 4, vocab, k, seed, dtype)
    _assert_cut_equal(p, q)


def _degenerate_rows() -> tuple[torch.Tensor, torch.Tensor]:
    p = torch.tensor([[0.5, 0.0, -0.0, 0.25, 0.25, 0.0],   # p = 0 and -0.0
                      [0.2, 0.2, 0.2, 0.2, 0.2, 0.0],      # q = 0 with p > 0, 0 / 0
                      [1.0, 0.0, 0.0, 0.0, 0.0, 0.0],      # one-hot
                      [0.4, 0.1, 0.1, 0.1, 0.1, 0.2]], dtype=torch.float64)
    q = torch.tensor([[0.1, 0.3, 0.2, 0.2, 0.2, 0.0],
                      [0.5, 0.0, 0.3, 0.2, 0.0, 0.0],
                      [0.0, 0.2, 0.2, 0.2, 0.2, 0.2],
                      [4e-320, 0.2, 0.2, 0.2, 0.2, 0.2]], dtype=torch.float64)  # a subnormal q: the ratio overflows
    return p, q


def test_cut_equals_torch_on_degenerate_rows():
    _assert_cut_equal(*_degenerate_rows())


def test_a_one_ulp_change_is_seen():
    """Deliberately broken: the torch cut of a row with its largest ``p`` moved by one ulp is
    not the compiled cut of the row (the comparison can fail)."""
    p, q, _, _ = case("dirichlet", 1, 200, 2, 3, torch.float64)
    moved, top = p.clone(), int(p[0].argmax())
    moved[0, top] = torch.nextafter(moved[0, top], torch.tensor(1.0, dtype=torch.float64))
    assert not torch.equal(compiled_cut(p[0], q[0], 2).target, torch_cut(moved[0], q[0])[1])


def test_infinite_keys_go_to_the_last_bucket_next_to_huge_ratios():
    """A float64 row with ratios 1e-100 and 1.7e308 and a token with ``q = 0``: the shifted
    key of ``inf`` falls in the last finite bucket, so clamping it (the torch cut before the
    compiled one) put the ``q = 0`` token among finite ratios; it belongs to the last
    bucket, and the merged rows draw as the full path."""
    p = torch.tensor([[1e-100, 1.0, 0.5, 0.25]], dtype=torch.float64)
    q = torch.tensor([[1.0, 1.0 / 1.7e308, 0.0, 0.5]], dtype=torch.float64)
    cut = compiled_cut(p[0], q[0], 2)
    keys = (p[0] / q[0]).abs().view(torch.int64)
    first, last = int(keys[0]), int(keys[1])
    step = ((last - first) // optimal_buckets.BUCKETS).bit_length()
    finite = ((last - first) >> step) + 1  # buckets of positive finite keys
    clamped = min(((INF_KEY - first) >> step) + 1, finite + 1)
    assert clamped == finite  # the clamped bucket of inf is a finite one
    assert int(cut.ids[2]) == finite + 1 and int(cut.sizes[finite + 1]) == 1
    drafts = torch.tensor([[1, 3], [3, 0]])
    for seed in range(20):
        uniforms = torch.rand(1, optimal.uniforms_per_row(2), generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
        for draft in drafts:
            x = draft.unsqueeze(0)
            merged = optimal_buckets.verify_rows(p, q, x, uniforms)
            full = optimal.verify_rows(optimal.row_parameters(p, q, 2), p, q, x, uniforms)
            assert merged.tokens.tolist() == full.tokens.tolist()


@settings(max_examples=30, deadline=None)
@given(**case_parameters(300))
def test_members_equal_a_nonzero_over_the_bucket_ids(name, vocab, k, seed, dtype):
    p, q, _, _ = case(name, 2, vocab, k, seed, dtype)
    rng = np.random.default_rng(seed)
    for row in range(2):
        cut = compiled_cut(p[row], q[row], k)
        chosen = rng.random(cut.sizes.shape[0]) < 0.5
        members = [torch.from_numpy(a) for a in optimal_merged.gather(cut.p, cut.q, cut.ids.numpy(), chosen, cut.sizes.numpy())]
        ids = torch.from_numpy(chosen)[cut.ids.long()].nonzero().squeeze(1)
        assert torch.equal(members[0], ids)
        assert torch.equal(members[1], optimal.ratio_keys(p[row, ids], q[row, ids]))
        assert torch.equal(members[2], p[row, ids].double())
        assert torch.equal(members[3], q[row, ids].double())
        assert torch.equal(members[4].long(), cut.ids[ids].long())


def _within_gamma(value: float, terms: np.ndarray):
    """``|value - exact| <= gamma_n * exact`` for a float sum of ``n`` non-negative terms
    (Higham 2002, eq. 4.4), ``exact`` by ``math.fsum``."""
    exact, n = math.fsum(terms.tolist()), terms.size
    assert abs(value - exact) <= n * 2.0**-53 / (1 - n * 2.0**-53) * exact


@settings(max_examples=30, deadline=None)
@given(**case_parameters(3000))
def test_lazy_sums_are_within_their_bound(name, vocab, k, seed, dtype):
    p, q, drafts, _ = case(name, 3, vocab, k, seed, dtype)
    draft_mass, target_mass = optimal_lazy._masses(p, q)
    tokens = drafts[:, 0]
    within = optimal_lazy._draft_mass_up_to(p, q, p[torch.arange(3), tokens], q[torch.arange(3), tokens], Scratch(), None)
    for row in range(3):
        _within_gamma(float(draft_mass[row]), q[row].double().numpy())
        _within_gamma(float(target_mass[row]), p[row].double().numpy())
        if dtype in (torch.float32, torch.float64):  # the torch ratio test's tokens, in the rows' dtype
            p_a, q_a = p[row, tokens[row]], q[row, tokens[row]]
            up_to = p[row] * q_a <= q[row] * (p_a * (1.0 + optimal_lazy.TAU))
            _within_gamma(float(within[row]), q[row][up_to].double().numpy())


def test_a_wrong_sum_is_outside_the_bound():
    """Deliberately broken: a sum missing one term is caught by the bound check."""
    q = case("dirichlet", 1, 500, 2, 1, torch.float64)[1][0].numpy()
    with pytest.raises(AssertionError):
        _within_gamma(math.fsum(q[1:].tolist()), q)
