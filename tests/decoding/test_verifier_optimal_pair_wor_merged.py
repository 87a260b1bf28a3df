"""The water-level verifier on merged rows (:mod:`decoding.verifiers.optimal.pair_merged_rows`).

The sorted path (:func:`decoding.verifiers.optimal.pair.sorted_row`) is the oracle: it is
held to the exact law and to its reference by the tests of
tests/decoding/test_verifier_optimal_pair_wor.py. Here every row the merged path draws is
drawn as the sorted path draws it (rows cut into few buckets, so that most ranks sit in
blocks), the bounds on the cuts inside a block are checked against the exact bounds of those
cuts on the sorted row, and a wrong sign test or a wrong inner bound is caught.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from decoding.verifiers.optimal import pair as verifier
from decoding.verifiers.optimal import pair_merged_rows as merged
from decoding.verifiers.optimal import pair_levels as kernel
#: Bound of an inner cut against the exact bound there: both are float ratios of sums taken in
#: different orders.
BOUND_TOLERANCE = 1e-9


def _row(rng, vocab: int, family: int) -> tuple[np.ndarray, np.ndarray]:
    """Normalised float64 ``(p, q)``: Dirichlet rows, correlated softmax rows, a dominant draft
    token (``q > 1/2``), zeros in ``p`` and tokens with ``q = 0``."""
    if family == 0:
        p, q = rng.dirichlet(np.full(vocab, 0.3)), rng.dirichlet(np.full(vocab, 0.3))
    elif family == 1:
        z = 3 * rng.normal(size=vocab)
        p, q = np.exp(z - z.max()), np.exp(z + 0.5 * rng.normal(size=vocab) - z.max())
    else:
        p = rng.dirichlet(np.full(vocab, 0.05))
        q = 0.7 * p + 0.3 * rng.dirichlet(np.full(vocab, 0.05))
        q[rng.integers(vocab)] += 3 * q.sum()
    if family == 1:
        q[rng.random(vocab) < 0.1] = 0.0
        p[rng.random(vocab) < 0.1] = 0.0
    return p / p.sum(), q / q.sum()


def _draws(buckets: int, margin: float, rows: int = 90, per_row: int = 8, seed: int = 0):
    """``(drawn, same)``: how many draws the merged path took, and how many equal the sorted
    path's."""
    rng = np.random.default_rng(seed)
    drawn = same = 0
    for trial in range(rows):
        vocab = int(rng.integers(20, 400))
        p, q = _row(rng, vocab, trial % 3)
        keys, ids = np.empty(vocab, np.int64), np.empty(vocab, np.int64)
        for _ in range(per_row):
            d0, d1 = (int(t) for t in rng.choice(vocab, size=2, replace=False, p=q))
            u = rng.random(3)
            token, index, outcome = merged.merged_row(p, q, d0, d1, u, buckets, margin, keys, ids)
            if outcome == merged.DRAWN:
                drawn += 1
                same += (int(token), int(index)) == verifier.sorted_row(p, q, (d0, d1), u)
    return drawn, same


@pytest.mark.parametrize("buckets", [4, 16, 64])
def test_merged_rows_draw_as_the_sorted_rows(buckets):
    drawn, same = _draws(buckets, merged.SIGN_MARGIN)
    assert drawn >= 0.75 * 90 * 8  # the merged path draws most rows itself
    assert same == drawn


@st.composite
def awkward_rows(draw):
    """Rows that stress the bucket layout: ratios tied in blocks (quantised ``p`` and ``q``),
    ``q`` down to 1e-300 (subnormal ratios), zeros in either, a dominant draft token."""
    vocab = draw(st.integers(3, 300))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    p, q = rng.exponential(size=vocab), rng.exponential(size=vocab)
    if draw(st.booleans()):
        p, q = np.ceil(4 * p), np.ceil(4 * q)  # few distinct ratios: ties
    if draw(st.booleans()):
        q[rng.random(vocab) < 0.2] = 1e-300
    if draw(st.booleans()):
        p[rng.random(vocab) < 0.3] = 0.0
    if draw(st.booleans()):
        q[rng.random(vocab) < 0.3] = 0.0
    if draw(st.booleans()):
        q[int(rng.integers(vocab))] += 10 * q.sum()
    p[0] += 1.0
    q[1] += 1.0
    q[2] += 1.0
    return p / p.sum(), q / q.sum(), draw(st.sampled_from([2, 4, 16, 4096]))


@settings(max_examples=150, deadline=None)
@given(row=awkward_rows(), seed=st.integers(0, 2**32 - 1))
def test_awkward_rows_draw_as_the_sorted_rows(row, seed):
    p, q, buckets = row
    rng = np.random.default_rng(seed)
    vocab = len(p)
    keys, ids = np.empty(vocab, np.int64), np.empty(vocab, np.int64)
    for _ in range(6):
        d0, d1 = (int(t) for t in rng.choice(vocab, size=2, replace=False, p=q))
        u = rng.random(3)
        token, index, outcome = merged.merged_row(p, q, d0, d1, u, buckets, merged.SIGN_MARGIN, keys, ids)
        if outcome == merged.DRAWN:
            assert (int(token), int(index)) == verifier.sorted_row(p, q, (d0, d1), u)


def test_a_wrong_sign_test_is_caught():
    """With a negative margin, mixed buckets pass for blocks of one sign."""
    drawn, same = _draws(16, -0.5)
    assert same < drawn


def _merged_flux(p, q, buckets):
    """The merged row of ``(p, q)`` with no bucket refined but the kernel's own choices
    (:func:`merged.merged_parameters`): its tokens (-1 for a block), its entries' first ranks,
    flux, sums and ``blocks``, and the sorted row's flux and sums."""
    vocab = len(p)
    keys, ids = np.empty(vocab, np.int64), np.empty(vocab, np.int64)
    overflow, token, bucket, _, n, sizes, flux, _, _, qt, qe, wt, we, m, blocks = merged.merged_parameters(
        p, q, np.empty(0, np.int64), buckets, merged.SIGN_MARGIN, keys, ids)
    assert not overflow
    token, bucket = token[:n], bucket[:n]
    start = np.concatenate([[0], np.cumsum([1 if t >= 0 else sizes[b] for t, b in zip(token, bucket)])])
    order = verifier.ratio_order(p, q)
    s_flux, s_lo = np.empty(len(order) + 1), np.empty(len(order) + 1)
    s_sums = kernel.row_setup(p[order], q[order], verifier.UNIT, s_flux, s_lo, np.empty(len(order)))
    return token, start, flux, (qt, qe, wt, we, m), blocks, s_flux, s_sums


def _inner_bound_failures(p, q, buckets, scale=1.0) -> tuple[int, int]:
    """(failures, checked): blocks whose inner bound (times ``scale``) exceeds the exact
    ``F(j) / Q_[f,t](j)`` at one of their inner cuts, over runs ``[f, t]`` of whole entries
    around them (every cut of the run carrying flux)."""
    token, start, flux, sums, blocks, s_flux, s_sums = _merged_flux(p, q, buckets)
    qt, qe, wt, we, _ = sums
    sqt, sqe, swt, swe, _, _ = s_sums
    failures = checked = 0
    for e in np.flatnonzero(token < 0):
        if start[e + 1] - start[e] < 2 or not (flux[e] > 0 and flux[e + 1] > 0):
            continue
        f, t = kernel.first_run(flux, e, e + 1) if e + 1 < len(token) else (e, e)
        t = max(t, e)
        bound = kernel._inner_bound(flux, qt, qe, wt, we, f, e, t, blocks) * scale
        exact = min(s_flux[j] / kernel._across(sqt, sqe, swt, swe, start[f], j, start[t + 1] - 1)[0]
                    for j in range(start[e] + 1, start[e + 1]))
        checked += 1
        failures += bound > exact * (1 + BOUND_TOLERANCE)
    return failures, checked


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), family=st.integers(0, 2), buckets=st.sampled_from([8, 32, 64]))
def test_inner_bounds_are_below_the_exact_bounds(seed, family, buckets):
    """The certificate of the cuts inside a block: its bound never exceeds ``F(j) / Q(j)`` at
    any of them, on runs of whole entries (the sorted row gives the exact values)."""
    rng = np.random.default_rng(seed)
    p, q = _row(rng, int(rng.integers(30, 300)), family)
    failures, _ = _inner_bound_failures(p, q, buckets)
    assert failures == 0


def test_inner_bounds_are_checked_and_a_raised_bound_is_caught():
    rng = np.random.default_rng(7)
    checked = raised = 0
    for trial in range(30):
        p, q = _row(rng, 200, trial % 3)
        checked += _inner_bound_failures(p, q, 64)[1]
        raised += _inner_bound_failures(p, q, 64, scale=3.0)[0]
    assert checked > 50 and raised > 0


@pytest.mark.parametrize("case", ["p_equals_q", "one_hot_p", "disjoint", "dominant_draft", "zeros_in_q", "sharp"])
def test_degenerate_rows_at_a_large_vocabulary(case):
    """Rows of 2,048 tokens go through the merged path in ``verify``: every case gives a valid
    token, drawn as the sorted path draws it."""
    vocab = 2048
    rng = np.random.default_rng(3)
    p, q = rng.dirichlet(np.full(vocab, 0.2)), rng.dirichlet(np.full(vocab, 0.2))
    if case == "p_equals_q":
        p = q.copy()
    elif case == "one_hot_p":
        p = np.zeros(vocab)
        p[5] = 1.0
    elif case == "disjoint":
        p[: vocab // 2], q[vocab // 2:] = 0.0, 0.0
    elif case == "dominant_draft":
        q[9] += 50 * q.sum()
    elif case == "zeros_in_q":
        q[rng.random(vocab) < 0.5] = 0.0
    elif case == "sharp":
        p = np.exp(40 * np.log(p + 1e-300))
    p, q = p / p.sum(), q / q.sum()
    for _ in range(12):  # the merged path inside verify_row, against the sorted path
        drafts = tuple(int(t) for t in rng.choice(vocab, size=2, replace=False, p=q))
        u = rng.random(3)
        assert verifier.verify_row(p, q, drafts, u) == verifier.sorted_row(p, q, drafts, u)
    rows = 24
    target = torch.from_numpy(p).float().expand(rows, vocab).contiguous()
    draft = torch.from_numpy(q).float().expand(rows, 2, vocab).contiguous()
    drafts = verifier.sample_drafts(draft[:, 0], 2, torch.Generator().manual_seed(0))
    out = verifier.verify(target, draft, drafts, torch.Generator().manual_seed(1))
    tokens = out.tokens.tolist()
    assert all(0 <= t < vocab and target[0, t] > 0 for t in tokens)
    assert all(i == -1 or tokens[r] == int(drafts[r, i]) for r, i in enumerate(out.accepted_index.tolist()))
