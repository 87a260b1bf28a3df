"""The fast paths of the batched verifiers against plain oracles: row chunking, the
blocked argmax of SpecHub's hub, the O(A log A) truncation order and the O(V) alphabet of
truncated IS, the row deduplication of its plans, the k-SEQ grid bracket (at a large
vocabulary, and refined only where a decision needs it), the inverse-CDF overshoot and
the V-sized pass counter of the benchmark.
Every check is also run on a deliberately broken input and shown to fail."""
from __future__ import annotations

from fractions import Fraction
from unittest import mock

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import decoding.verifiers.base as base
from decoding.verifiers import get_verifier, importance_sampling_truncated, kseq, spechub
from decoding.verifiers.optimal import iid as optimal
from decoding.verifiers.optimal import latent as optimal_latent
from decoding.verifiers.base import VerifierOutput, inverse_cdf, sample_weighted
from decoding.verifiers.reference import _inverse_cdf
from otm.errors import InvalidDistributionError
from otm.rules.importance_sampling_truncated import truncation_order
from otm.rules.kseq import optimal_division_factor
from otm.rules.registry import rule_spec
from otm.tolerances import AGREEMENT_TOLERANCE

import bench_verifier_cost

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _rows(rows: int, vocab: int, seed: int, dtype=torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    """``(p, q)`` ``[rows, vocab]``: correlated softmaxes of Zipf-like logits (q = p + noise)."""
    g = torch.Generator().manual_seed(seed)
    logits = -1.5 * torch.log(torch.arange(1, vocab + 1, dtype=torch.float64)) + torch.randn(rows, vocab, generator=g, dtype=torch.float64)
    p = torch.softmax(logits, -1)
    q = torch.softmax(logits + 0.7 * torch.randn(rows, vocab, generator=g, dtype=torch.float64), -1)
    return p.to(dtype), q.to(dtype)


def _outputs(rule: str, p: torch.Tensor, q: torch.Tensor, k: int) -> tuple[list, list]:
    verifier = get_verifier(rule)
    qs = q.unsqueeze(1).expand(-1, k, -1)
    drafts = verifier.sample_drafts(qs if verifier.draft_scheme == "independent" else q, k, torch.Generator().manual_seed(1))
    out = verifier.verify(p, qs, drafts, torch.Generator().manual_seed(2))
    return out.tokens.tolist(), out.accepted_index.tolist()


# ---------------------------------------------------------------- row chunks

#: The verifiers that run on row chunks (:func:`decoding.verifiers.base.map_row_chunks`).
CHUNKED = ("single", "rrs", "rrs_wor", "specinfer", "kseq", "spechub", "importance_sampling_truncated", "greedy",
           "optimal", "optimal_latent")


@pytest.mark.parametrize("rule", CHUNKED)
def test_chunking_does_not_change_any_draw(rule, monkeypatch):
    """Rows never share randomness: one row per chunk gives the draws of one chunk."""
    k = min(rule_spec(rule).ks[1] or 3, 3)  # the most drafts up to 3 (the registry)
    p, q = _rows(24, 700, seed=len(rule))
    monkeypatch.setattr(base, "CPU_CHUNK_BYTES", 1 << 40)
    whole = _outputs(rule, p, q, k)
    monkeypatch.setattr(base, "CPU_CHUNK_BYTES", 1)
    assert base.chunk_rows(24, 700, p) == 1
    assert _outputs(rule, p, q, k) == whole


def test_misaligned_chunks_are_detected():
    """The comparison can fail: chunks concatenated in the wrong order."""
    p, q = _rows(24, 700, seed=5)
    tokens, _ = _outputs("rrs", p, q, 3)
    chunk = 6
    shuffled = [t for start in reversed(range(0, 24, chunk)) for t in tokens[start : start + chunk]]
    assert shuffled != tokens


def test_map_row_chunks_concatenates_in_order():
    x = torch.arange(10).unsqueeze(1).expand(10, 3).double()
    out = base.map_row_chunks(lambda t: VerifierOutput(t[:, 0].long(), -t[:, 0].long()), x)
    assert out.tokens.tolist() == list(range(10))
    assert out.accepted_index.tolist() == [-i for i in range(10)]


def test_map_row_chunks_on_selected_rows_returns_their_results_in_order(monkeypatch):
    """``rows=``: only those rows, gathered chunk by chunk, in their order; a function
    returning a tensor is concatenated along the rows."""
    monkeypatch.setattr(base, "CPU_CHUNK_BYTES", 2 * 3 * 8)  # two rows per chunk
    x = torch.arange(10).unsqueeze(1).expand(10, 3).double()
    rows = torch.tensor([1, 4, 5, 8, 9])
    out = base.map_row_chunks(lambda t, w: t[:, 0] * 10 + w, x, torch.arange(10.0), rows=rows)
    assert out.tolist() == [11.0, 44.0, 55.0, 88.0, 99.0]
    none = base.map_row_chunks(lambda t, w: t[:, 0] * 10 + w, x, torch.arange(10.0), rows=rows[:0])
    assert none.shape == (0,)


def test_map_row_chunks_reads_consecutive_rows_in_place(monkeypatch):
    """A chunk of consecutive selected rows is a view of the input (chunks [1, 2] and [9]
    here), any other chunk a copy ([5, 8]); the results are the same either way."""
    monkeypatch.setattr(base, "CPU_CHUNK_BYTES", 2 * 3 * 8)
    x = torch.arange(10).unsqueeze(1).expand(10, 3).double().contiguous()
    in_place = []

    def record(t):
        in_place.append(t.data_ptr() == x[int(t[0, 0])].data_ptr())
        return t[:, 0] * 10

    out = base.map_row_chunks(record, x, rows=torch.tensor([1, 2, 5, 8, 9]))
    assert out.tolist() == [10.0, 20.0, 50.0, 80.0, 90.0]
    assert in_place == [True, False, True]


# ---------------------------------------------------------------- SpecHub's hub

def _last_argmax(x: torch.Tensor) -> torch.Tensor:  # deliberately broken: ties to the higher index
    return x.shape[-1] - 1 - torch.argmax(x.flip(-1), dim=-1)


@pytest.mark.parametrize("vocab", [1, 5, 128, 129, 1000, 4097])
def test_blocked_hub_is_the_first_maximum(vocab):
    g = torch.Generator().manual_seed(vocab)
    x = torch.rand(8, vocab, generator=g)
    if vocab > 3:
        x[0, [1, vocab - 1]] = 2.0  # a tie across blocks
        x[1, [vocab // 2, vocab // 2 + 1]] = 2.0  # a tie inside a block
        x[2, -1] = 3.0  # the maximum in the tail block
    expected = torch.argmax(x, dim=-1)  # documented: the first maximal value
    assert torch.equal(spechub.hub_tokens(x), expected)
    if vocab > 3:
        assert not torch.equal(_last_argmax(x), expected)


# ---------------------------------------------------------------- truncated IS

def _embedded(values: np.ndarray, alphabet: np.ndarray, vocab: int) -> np.ndarray:
    full = np.zeros(vocab)
    full[alphabet] = values
    return full


def _free_count_by_sorting(key: np.ndarray, alphabet: np.ndarray, vocab: int, s: int) -> int:
    """The oracle: otm's truncation order over the whole vocabulary (key = p - (a + b) / 2)."""
    rank = truncation_order(_embedded(key, alphabet, vocab), np.zeros(vocab), np.zeros(vocab))
    return int((rank[alphabet] < s).sum())


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.sampled_from([0.0, 0.1, 0.2, 0.25, 0.5]), min_size=2, max_size=12),
    size=st.integers(1, 12),
    s=st.integers(0, 14),
    seed=st.integers(0, 10),
)
def test_alphabet_and_free_count_equal_the_sorted_orders(values, size, s, seed):
    """Many ties (values from a small set), zero keys interleaved with outside tokens."""
    p = np.array(values)
    size = min(size, p.size)
    alphabet = importance_sampling_truncated.top_tokens(p, size)
    assert np.array_equal(alphabet, np.sort(np.argsort(-p, kind="stable")[:size]))
    rng = np.random.default_rng(seed)
    key = rng.choice([-0.2, 0.0, 0.1, 0.3], size=alphabet.size)
    assert importance_sampling_truncated.free_count(key, alphabet, p.size, s) == _free_count_by_sorting(key, alphabet, p.size, s)


def test_batched_alphabets_equal_the_stable_sort():
    p = torch.tensor([[0.1, 0.3, 0.1, 0.3, 0.2, 0.0], [0.0, 0.0, 0.5, 0.0, 0.5, 0.0], [1 / 6] * 6], dtype=torch.float64)
    for size in range(1, 6):
        batched = importance_sampling_truncated.batched_top_tokens(p, size)
        for row, alphabet in zip(p.numpy(), batched):
            assert np.array_equal(alphabet, importance_sampling_truncated.top_tokens(row, size))
            assert np.array_equal(alphabet, np.sort(np.argsort(-row, kind="stable")[:size]))


@settings(max_examples=100, deadline=None)
@given(vocab=st.integers(2, 30), levels=st.integers(1, 5), seed=st.integers(0, 2**31 - 1), data=st.data())
def test_batched_alphabets_with_ties_equal_the_stable_sort(vocab, levels, seed, data):
    """Rows whose values come from ``levels`` distinct numbers (ties across the alphabet's
    boundary in most rows, none in some): the topk shortcut and the tie scan together give
    the first ``size`` tokens of the stable sort by ``-p``."""
    size = data.draw(st.integers(1, vocab - 1))
    g = torch.Generator().manual_seed(seed)
    p = torch.randint(0, levels, (4, vocab), generator=g).double() + torch.rand(4, 1, generator=g, dtype=torch.float64)
    p[0] = torch.rand(vocab, generator=g, dtype=torch.float64)  # almost surely no tie
    for row, alphabet in zip(p.numpy(), importance_sampling_truncated.batched_top_tokens(p, size)):
        assert np.array_equal(alphabet, np.sort(np.argsort(-row, kind="stable")[:size]))


def test_alphabets_from_topk_alone_are_detected():
    """Deliberately broken: ``topk``'s own ``size`` indices also for a row tied across the
    boundary, where torch splits the tie by no fixed rule (on this row it does not take the
    lowest ids: 1, 6, 7, 8, 9 in torch 2.13)."""
    p = torch.tensor([[0.2] * 10 + [0.1] * 10], dtype=torch.float64)
    expected = np.sort(np.argsort(-p[0].numpy(), kind="stable")[:5])
    assert np.array_equal(importance_sampling_truncated.batched_top_tokens(p, 5)[0], expected)
    assert not np.array_equal(np.sort(torch.topk(p, 5, dim=1).indices[0].numpy()), expected)


def test_truncated_is_refuses_a_row_without_a_finite_positive_sum():
    p = torch.tensor([[0.5, 0.5, 0.0], [float("nan"), 0.5, 0.5]], dtype=torch.float64)
    qs = torch.full((2, 2, 3), 1 / 3, dtype=torch.float64)
    drafts = torch.zeros(2, 2, dtype=torch.int64)
    with pytest.raises(InvalidDistributionError, match="finite positive sum"):
        importance_sampling_truncated.verify(p, qs, drafts, None, alphabet_size=2)
    importance_sampling_truncated.verify(p[:1], qs[:1], drafts[:1], None, alphabet_size=2)


def test_free_count_that_forgets_the_outside_tokens_is_detected():
    """The comparison can fail: ranking the alphabet among itself only, forgetting that the
    tokens outside it (key 0) come first on ties with a lower index."""
    alphabet, key, vocab, s = np.array([3, 4]), np.array([0.0, -0.1]), 5, 2
    among_alphabet = np.argsort(np.argsort(-key, kind="stable"), kind="stable")
    assert int((among_alphabet < s).sum()) != _free_count_by_sorting(key, alphabet, vocab, s)
    assert importance_sampling_truncated.free_count(key, alphabet, vocab, s) == _free_count_by_sorting(key, alphabet, vocab, s)


def test_distinct_rows_never_merges_rows_with_equal_fingerprints():
    # a . w = b . w for w = linspace(1, 2, 3) = [1, 1.5, 2]: the same fingerprint, different rows
    a, b = [0.5, 0.0, 0.5], [0.0, 1.0, 0.0]
    p = torch.tensor([a, b, a, b, a], dtype=torch.float64)
    q = torch.full((5, 3), 1 / 3, dtype=torch.float64)
    first, which = importance_sampling_truncated.distinct_rows(p, q)
    assert len(first) == 2
    assert torch.equal(p[first[which]], p)
    assert torch.equal(q[first[which]], q)
    merged = torch.zeros(5, dtype=torch.int64)  # deliberately broken: grouped by fingerprint only
    assert not torch.equal(p[first[merged]], p)


def test_distinct_rows_lists_first_rows_ascending():
    """Rows whose fingerprints decrease with the row index (so ``torch.unique`` numbers the
    pairs backwards): ``first`` comes out ascending, and when every row is distinct it is
    every row in order, so ``take_rows`` hands the rows over without a copy."""
    p = torch.eye(4, dtype=torch.float64).flip(1)  # one-hot at 3, 2, 1, 0: fingerprints 2, 5/3, 4/3, 1
    q = torch.full((4, 4), 0.25, dtype=torch.float64)
    first, which = importance_sampling_truncated.distinct_rows(p, q)
    assert first.tolist() == [0, 1, 2, 3]
    assert torch.equal(base.take_rows(p, first)[which], p)
    first, which = importance_sampling_truncated.distinct_rows(torch.cat([p, p[:2]]), torch.cat([q, q[:2]]))
    assert first.tolist() == [0, 1, 2, 3] and which.tolist() == [0, 1, 2, 3, 0, 1]
    first_bad, which_bad = first.flip(0), 3 - which[:4]  # deliberately broken: a valid pairing, unsorted
    assert torch.equal(first_bad[which_bad], first[which[:4]])
    assert not torch.equal(base.take_rows(p, first_bad)[which_bad], p)  # take_rows hands over p as it is


# ---------------------------------------------------------------- k-SEQ at a large vocabulary

@pytest.mark.parametrize("k", [2, 3, 8])
def test_kseq_grid_bracket_equals_otm_g_star_at_a_large_vocabulary(k):
    """20,000 tokens: the histogram has 2^12 grid buckets and the last bucket holds many
    tokens; rows with q = 0 where p > 0, p = q and disjoint supports included."""
    p, q = _rows(6, 20_000, seed=k)
    q[1, :50] = 0.0
    q[1] /= q[1].sum()
    p[2] = q[2]
    p[3, 10_000:] = 0.0
    q[3, :10_000] = 0.0
    p[3] /= p[3].sum()
    q[3] /= q[3].sum()
    batched = kseq.optimal_division_factor(p, q, k).numpy()
    exact = np.array([optimal_division_factor(pi, qi, k) for pi, qi in zip(p.numpy(), q.numpy())])
    np.testing.assert_allclose(batched, exact, rtol=0, atol=AGREEMENT_TOLERANCE)
    assert batched[2] == 1.0


def test_kseq_with_a_shifted_validity_test_is_detected(monkeypatch):
    """The comparison can fail: ``f(g) <= 0`` tested at ``1.001 g``."""
    p, q = _rows(6, 20_000, seed=1)
    exact = np.array([optimal_division_factor(pi, qi, 3) for pi, qi in zip(p.numpy(), q.numpy())])
    too_small = kseq._too_small
    monkeypatch.setattr(kseq, "_too_small", lambda beta, g, k: too_small(beta, 1.001 * g, k))
    batched = kseq.optimal_division_factor(p, q, 3).numpy()
    assert np.abs(batched - exact).max() > AGREEMENT_TOLERANCE


def _kseq_draws(p, q, k, factor=None):
    qs = q.unsqueeze(1).expand(-1, k, -1)
    drafts = kseq.sample_drafts(q, k, torch.Generator().manual_seed(k))
    g = torch.Generator().manual_seed(7)
    out = kseq.verify(p, qs, drafts, g) if factor is None else kseq.verify_with_factor(p, qs, drafts, factor, g)
    return out.tokens.tolist(), out.accepted_index.tolist()


@pytest.mark.parametrize("bits", [1, 4, 12])
@pytest.mark.parametrize("k", [2, 4])
def test_kseq_refines_g_star_wherever_the_bracket_leaves_a_test_open(bits, k, monkeypatch):
    """``verify`` refines ``g*`` only for the rows whose tests its grid bracket leaves open
    (and for the residual); its draws are those of ``g*`` for every row, even on a grid of
    2 buckets where most rows need the refinement."""
    monkeypatch.setattr(kseq, "HISTOGRAM_BITS", bits)
    p, q = _rows(64, 3000, seed=bits + k)
    assert _kseq_draws(p, q, k) == _kseq_draws(p, q, k, kseq.optimal_division_factor(p, q, k))


def test_kseq_with_the_unrefined_bracket_end_is_detected(monkeypatch):
    """The comparison can fail: the upper end of a 2-bucket bracket for every row."""
    monkeypatch.setattr(kseq, "HISTOGRAM_BITS", 1)
    p, q = _rows(64, 3000, seed=3)
    bracket_end = kseq._division_factors(p, q, 2, lambda rows, low, high: torch.zeros_like(low, dtype=torch.bool))
    assert _kseq_draws(p, q, 2, bracket_end) != _kseq_draws(p, q, 2, kseq.optimal_division_factor(p, q, 2))


# ---------------------------------------------------------------- inverse CDF

def test_overshoot_goes_to_the_first_token_where_the_cdf_reaches_its_total():
    """``u * total`` rounding up to ``total`` (emulated with ``u = 1``): the token returned
    has positive weight, in the batched sampler and in the plain reference alike; a
    tail weight that the float CDF absorbs is not returned."""
    weights = torch.tensor([[0.5, 0.5, 0.0, 0.0], [1.0, 1e-30, 0.0, 0.0]], dtype=torch.float32)
    tokens = inverse_cdf(weights.cumsum(dim=-1), torch.ones(2, 1)).squeeze(1)
    assert tokens.tolist() == [1, 0]
    assert _inverse_cdf([0.5, 0.5, 0.0, 0.0], 1.0) == 1
    clamped = torch.searchsorted(weights.cumsum(-1), weights.sum(-1, keepdim=True), right=True).clamp(max=3)
    assert (weights.gather(1, clamped) == 0).all()  # deliberately broken: the last token, of weight 0


def test_sample_weighted_follows_the_weights():
    weights = torch.tensor([[0.0, 2.0, 0.0, 6.0]], dtype=torch.float64).expand(4, 4)
    u = torch.tensor([0.0, 0.2499, 0.25, 0.9999], dtype=torch.float64)
    assert sample_weighted(weights, u).tolist() == [1, 1, 3, 3]


# ---------------------------------------------------------------- row-wise scans and sorts

@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 5), vocab=st.integers(1, 300), ties=st.integers(1, 8), seed=st.integers(0, 2**31 - 1),
       dtype=st.sampled_from([torch.float32, torch.float64]))
def test_row_wise_cumsum_and_sort_equal_the_batched_ops_bit_for_bit(rows, vocab, ties, seed, dtype):
    """:func:`decoding.verifiers.base.cumsum_rows` and
    :func:`decoding.verifiers.optimal.iid.stable_sort_rows` (in blocks of rows on the CPU: the
    scan above ``SCAN_BYTES``, here set to 0, one row per block, and to two rows' bytes; the
    sort one row at a time from ``SORT_ROW_BY_ROW_VOCAB`` tokens on, here set to 0, and as it
    is at these lengths, in one call) return exactly what the batched ``cumsum`` and stable
    ``argsort`` return, keys with many ties included (``ties`` distinct values)."""
    g = torch.Generator().manual_seed(seed)
    values = torch.rand(rows, vocab, generator=g, dtype=torch.float64).to(dtype)
    for scan_bytes in (0, 2 * vocab * values.element_size()):
        with mock.patch.object(base, "SCAN_BYTES", scan_bytes):
            assert torch.equal(base.cumsum_rows(values), values.cumsum(dim=-1))
    keys = torch.randint(0, ties, (rows, vocab), generator=g, dtype=torch.int64)
    for row_by_row in (0, optimal.SORT_ROW_BY_ROW_VOCAB):
        with mock.patch.object(optimal, "SORT_ROW_BY_ROW_VOCAB", row_by_row):
            values, order = optimal.stable_sort_rows(keys)
        assert torch.equal(order, torch.argsort(keys, dim=-1, stable=True))
        assert torch.equal(values, torch.sort(keys, dim=-1).values)


def test_a_scan_of_many_short_rows_runs_a_call_per_block_not_per_row(monkeypatch):
    """:func:`decoding.verifiers.base.cumsum_rows` on 10,000 rows of 6 tokens (480 kB, over a
    ``SCAN_BYTES`` set to 100 kB) runs 5 cumulative sums, not one per row: drafts sampled
    for a large batch of short rows (:func:`decoding.verifiers.base.sample_iid`) took a
    call per row."""
    calls, original = [], torch.cumsum
    monkeypatch.setattr(torch, "cumsum", lambda *a, **kw: calls.append(1) or original(*a, **kw))
    values = torch.rand(10_000, 6, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    with mock.patch.object(base, "SCAN_BYTES", 100_000):
        assert torch.equal(base.cumsum_rows(values), values.cumsum(dim=-1))
    assert len(calls) == 5


def _exact_prefix_sums(values: torch.Tensor) -> list[list[Fraction]]:
    rows = []
    for row in values.double().tolist():
        total, sums = Fraction(0), []
        for value in row:
            total += Fraction(value)
            sums.append(total)
        rows.append(sums)
    return rows


def _within_two_level_rounding(scan: torch.Tensor, values: torch.Tensor, block: int) -> bool:
    """Every prefix sum of ``scan`` within the two-level summation bound of the exact one:
    ``(block + blocks + 1) * eps`` times the row's total (non-negative values)."""
    eps, blocks = torch.finfo(values.dtype).eps, -(-values.shape[1] // block)
    for got, exact in zip(scan.double().tolist(), _exact_prefix_sums(values)):
        bound = (block + blocks + 1) * eps * float(exact[-1])
        if any(abs(Fraction(g) - e) > Fraction(bound) for g, e in zip(got, exact)):
            return False
    return True


@settings(max_examples=50, deadline=None)
@given(n=st.integers(2048, 400_000))
def test_the_scan_block_divides_the_row_when_it_can(n):
    """:func:`decoding.verifiers.base.scan_block`: the divisor of ``n`` nearest to 1,024 within
    [256, 4,096] (brute force), else 1,024."""
    near = [d for d in range(256, 4097) if n % d == 0]
    expected = min(near, key=lambda d: (abs(d - 1024), d)) if near else 1024
    assert base.scan_block(n) == expected
    assert base.scan_block(151_936) == 1187


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 4), blocks=st.integers(2, 40), rest=st.integers(0, 15), seed=st.integers(0, 2**31 - 1),
       dtype=st.sampled_from([torch.float32, torch.float64]), strided=st.booleans())
def test_the_blocked_scan_is_a_cumulative_sum(rows, blocks, rest, seed, dtype, strided):
    """:func:`decoding.verifiers.base.blocked_cumsum` (the GPU scan of long rows, run here on
    the CPU with blocks of 16) against exact prefix sums, within the rounding bound of a
    two-level summation; into ``out`` or a new tensor, from contiguous or strided rows. The
    same check fails on a scan that forgets the blocks' offsets."""
    block, vocab = 16, 16 * blocks + rest
    g = torch.Generator().manual_seed(seed)
    values = torch.rand(rows, 2, vocab, generator=g, dtype=torch.float64).to(dtype)
    values = values[:, 0] if strided else values[:, 0].contiguous()
    out = torch.empty(rows, vocab, dtype=dtype)
    scan = base.blocked_cumsum(values, out, block=block)
    assert scan.data_ptr() == out.data_ptr() and torch.equal(base.blocked_cumsum(values, block=block), scan)
    assert _within_two_level_rounding(scan, values, block)
    no_offsets = torch.cat([values[:, : 16 * blocks].unflatten(1, (blocks, 16)).cumsum(2).flatten(1), values[:, 16 * blocks :].cumsum(1)], 1)
    assert not _within_two_level_rounding(no_offsets, values, block)


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(0, 9), vocab=st.integers(1, 3000), seed=st.integers(0, 2**31 - 1),
       dtype=st.sampled_from([torch.float32, torch.float64, torch.bfloat16, torch.float16]))
def test_token_order_sums_are_the_last_cumulative_sums(rows, vocab, seed, dtype):
    """:func:`decoding.verifiers.optimal.latent.token_order_sums` (a compiled pass, four rows
    at a time, and the rest one by one) is the last entry of the float64 cumulative sum, bit
    for bit; a pairwise float64 sum (torch's ``sum``), a different order, is not always."""
    g = torch.Generator().manual_seed(seed)
    probs = torch.rand(rows, vocab, generator=g, dtype=torch.float64).to(dtype)
    assert torch.equal(optimal_latent.token_order_sums(probs), probs.double().cumsum(dim=-1)[:, -1:])


def test_a_pairwise_sum_is_not_the_token_order_sum():
    """The check above fails for another summation order (float64 rows: float32 ones sum
    exactly in float64 at this length, in any order)."""
    probs = torch.rand(8, 3000, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    assert torch.equal(optimal_latent.token_order_sums(probs), probs.cumsum(dim=-1)[:, -1:])
    assert not torch.equal(probs.sum(dim=-1, keepdim=True), probs.cumsum(dim=-1)[:, -1:])


def test_an_unstable_row_sort_is_detected():
    """Deliberately broken: sorting tied keys without stability (here: by descending index
    within ties) is not the stable order the references use."""
    keys = torch.tensor([[1, 0, 1, 0, 1]] * 2)
    unstable = torch.argsort(keys * 10 - torch.arange(5), dim=-1)
    assert not torch.equal(unstable, optimal.stable_sort_rows(keys)[1])
    assert optimal.stable_sort_rows(keys)[1][0].tolist() == [1, 3, 0, 2, 4]


# ---------------------------------------------------------------- work arrays reused across chunks

@pytest.mark.parametrize("k", range(1, 10))
def test_power_into_buffers_equals_power_bit_for_bit(k):
    values = torch.rand(3, 50, dtype=torch.float64, generator=torch.Generator().manual_seed(k))
    kept = values.clone()
    out, base_buffer = torch.empty_like(values), torch.empty_like(values)
    assert torch.equal(optimal.power(values, k, out=out, base=base_buffer), optimal.power(values, k))
    assert torch.equal(values, kept)


def test_power_with_one_buffer_for_result_and_squares_is_detected():
    """Deliberately broken: ``out`` and ``base`` the same array (the squares overwrite the
    partial product), which :func:`decoding.verifiers.optimal.iid.power` rules out."""
    values = torch.rand(2, 20, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) + 0.5
    buffer = torch.empty_like(values)
    assert not torch.equal(optimal.power(values, 3, out=buffer, base=buffer), optimal.power(values, 3))


def test_scratch_reuses_one_buffer_per_name_and_grows_it():
    scratch = base.Scratch()
    a = scratch.take("a", (2, 3), torch.float64, torch.device("cpu"))
    assert scratch.take("a", (1, 3), torch.float64, torch.device("cpu")).data_ptr() == a.data_ptr()
    assert scratch.take("b", (1, 3), torch.float64, torch.device("cpu")).data_ptr() != a.data_ptr()
    grown = scratch.take("a", (4, 3), torch.float64, torch.device("cpu"))
    assert grown.shape == (4, 3) and grown.data_ptr() != a.data_ptr()
    assert scratch.take("a", (2, 3), torch.int64, torch.device("cpu")).dtype == torch.int64


def _parameters(params) -> list[torch.Tensor]:
    return [getattr(params, name).clone() for name in (
        "order", "keys", "draft", "own", "gains", "losses", "target_cumulative", "cut", "support", "gains_h", "losses_h",
        "flow_u", "flow_h", "target_mass", "draft_mass")]


@pytest.mark.parametrize("k", [1, 2, 5])
def test_row_parameters_in_a_used_scratch_equal_fresh_ones(k):
    """A scratch that held a larger chunk of other rows (with ties and q = 0 entries) gives
    the parameters of a fresh computation bit for bit, and so do the row-wise sorts and
    scans: the full path of the optimal verifier reuses one scratch for every chunk."""
    p, q = _rows(5, 300, seed=k)
    q[1, :40] = 0.0
    p[2] = q[2]
    scratch = base.Scratch()
    optimal.row_parameters(p[:5].flip(0), q[:5].flip(0), k, scratch)
    used = _parameters(optimal.row_parameters(p[:3], q[:3], k, scratch))
    fresh = _parameters(optimal.row_parameters(p[:3], q[:3], k))
    assert all(torch.equal(a, b) for a, b in zip(used, fresh, strict=True))
    batched = torch.argsort(torch.where(q[:3] > 0, p[:3] / q[:3], torch.inf).view(torch.int64), dim=-1, stable=True)
    assert torch.equal(used[0], batched)


@settings(max_examples=60, deadline=None)
@given(vocab=st.integers(2, 40), levels=st.integers(1, 4), seed=st.integers(0, 2**31 - 1),
       dtype=st.sampled_from([torch.float32, torch.float64]))
def test_sorted_ranks_equal_the_inverse_permutation(vocab, levels, seed, dtype):
    """Ranks found in the sorted keys (:func:`decoding.verifiers.optimal.iid.sorted_ranks`) are the
    inverse permutation's (:func:`decoding.verifiers.optimal.iid.token_ranks`) for every token,
    on rows with many exact ratio ties (``levels`` distinct values), zeros in ``q`` (keys
    ``inf``, tied by id) and zeros in ``p``."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randint(0, levels + 1, (3, vocab), generator=g).to(dtype)
    p = q * torch.randint(0, 3, (3, vocab), generator=g).to(dtype)
    p[:, 0] += 1.0  # some mass everywhere
    q[:, -1] += 1.0
    params = optimal.row_parameters(p, q, 2)
    tokens = torch.arange(vocab).expand(3, vocab)
    keys = optimal.ratio_keys(p.gather(1, tokens), q.gather(1, tokens))
    assert torch.equal(optimal.sorted_ranks(params, tokens, keys), optimal.token_ranks(params.order, tokens))


def test_sorted_ranks_of_tied_and_untied_rows_in_one_batch():
    """Rows whose drafted tokens tie with another token (``p = q``, ``p = 0``, ``q = 0``)
    interleaved with rows of distinct ratios: the tied rows' ranks (by the inverse
    permutation of those rows alone) land in their own rows."""
    g = torch.Generator().manual_seed(5)
    p, q = torch.rand(8, 9, generator=g, dtype=torch.float64), torch.rand(8, 9, generator=g, dtype=torch.float64)
    p[1], p[4, :5], q[6, 2:] = q[1], 0.0, 0.0
    params = optimal.row_parameters(p, q, 2)
    tokens = torch.randint(0, 9, (8, 3), generator=g)
    keys = optimal.ratio_keys(p.gather(1, tokens), q.gather(1, tokens))
    assert torch.equal(optimal.sorted_ranks(params, tokens, keys), optimal.token_ranks(params.order, tokens))


def test_sorted_ranks_without_the_tie_count_are_detected():
    """Deliberately broken: the first position of a block of equal keys for every token of
    the block."""
    p = torch.tensor([[1.0, 1.0, 1.0, 2.0]])
    q = torch.tensor([[1.0, 1.0, 1.0, 1.0]])
    params = optimal.row_parameters(p, q, 2)
    tokens = torch.arange(4).unsqueeze(0)
    keys = optimal.ratio_keys(p, q)
    first_only = torch.searchsorted(params.keys, keys)
    assert not torch.equal(first_only, optimal.token_ranks(params.order, tokens))
    assert torch.equal(optimal.sorted_ranks(params, tokens, keys), optimal.token_ranks(params.order, tokens))


# ---------------------------------------------------------------- the benchmark's pass counter

def test_pass_counter_counts_v_sized_passes():
    x = torch.rand(4, 1000)
    rows, first = torch.tensor([0, 2]), torch.zeros(4, 1, dtype=torch.int64)

    def work():
        y = x.view(4, 10, 100)  # a view: no pass
        x.sum(dim=-1)  # 1 pass over 4 rows
        torch.index_select(x, 0, rows)  # copies 2 of the 4 rows
        x.gather(1, first)  # 4 entries
        x.new_zeros(4, 10)  # reads nothing
        return y

    passes = bench_verifier_cost.passes_per_row(work, rows=4, vocab=1000, runs=1)
    assert passes == pytest.approx(1.5 + (4 + 40) / 4000)
    assert passes < 2  # counting the view, or new_zeros reading x, would give 3.5 or more


def test_share_rows_runs_every_part_once_and_raises_a_parts_error():
    """:func:`decoding.verifiers.base.share_rows`: parts ``0..parts-1`` each run once
    (``parts`` = torch's threads, at most the rows and the CPUs); an error in a part is raised
    to the caller."""
    seen = []
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        base.share_rows(lambda part, parts: seen.append((part, parts)), 5)
        expected = min(2, base.os.cpu_count() or 1)
        assert sorted(seen) == [(part, expected) for part in range(expected)]
        seen.clear()
        base.share_rows(lambda part, parts: seen.append((part, parts)), 1)
        assert seen == [(0, 1)]

        def failing(part: int, parts: int) -> None:
            if part == parts - 1:
                raise ValueError("part failed")

        with pytest.raises(ValueError, match="part failed"):
            base.share_rows(failing, 5)
    finally:
        torch.set_num_threads(threads)


def test_a_share_within_a_share_runs_in_the_pool_thread(monkeypatch):
    """A ``share_rows`` called from a thread of the pool (the clock masses' chunks of nodes
    within a share of rows) runs all its parts there: with one pool thread, the nested share
    would otherwise wait forever on work queued behind itself."""
    import threading

    monkeypatch.setattr(base.os, "cpu_count", lambda: 2)  # one pool thread beside the caller
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    inner: dict = {}

    def outer(part: int, parts: int) -> None:
        if part == 1:
            seen = []
            base.share_rows(lambda p, ps: seen.append((p, ps, threading.current_thread().name)), 4)
            inner["seen"] = seen

    done = threading.Event()
    worker = threading.Thread(target=lambda: (base.share_rows(outer, 2), done.set()), daemon=True)
    worker.start()
    assert done.wait(timeout=30), "a nested share deadlocked"
    assert sorted(p for p, _, _ in inner["seen"]) == [0, 1]
    assert all(name.startswith("verifier-rows") for _, _, name in inner["seen"])


def _share_in_child(out) -> None:
    torch.set_num_threads(2)
    seen = []
    base.share_rows(lambda part, parts: seen.append(part), 4)
    out.put(sorted(seen))


def test_share_rows_in_a_forked_child():
    """A child forked after its parent used the pool gets a pool of its own (the parent's
    threads do not exist in the child, so work handed to the inherited pool would hang)."""
    import multiprocessing

    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        base.share_rows(lambda part, parts: None, 4)  # the parent's pool exists
    finally:
        torch.set_num_threads(threads)
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    child = context.Process(target=_share_in_child, args=(out,))
    child.start()
    child.join(timeout=60)
    if child.exitcode is None:  # hung: do not leave it behind
        child.kill()
    assert child.exitcode == 0
    assert out.get(timeout=5) == list(range(min(2, base.os.cpu_count() or 1)))


def _heavy_tailed_float32_row(vocab: int = 151_936) -> torch.Tensor:
    """A float32 softmax row like a real one at ``V = 151,936``: 56,333 tokens below ``3e-8``,
    ``4.8e-4`` of the mass together."""
    logits = torch.randn(vocab, generator=torch.Generator().manual_seed(0)) * 3.0
    return torch.softmax(logits, dim=-1)


def test_the_inverse_cdf_of_a_float32_row_keeps_every_token(monkeypatch):
    """The law :func:`sample_weighted` samples from a float32 row (read off the CDF it hands to
    :func:`inverse_cdf`) is the row's law to ``1e-12`` in total variation. Summed in float32, the
    CDF dropped every weight below half an ulp of the sum before it: ``8.8e-4`` in total variation
    on this row (``1.4e-3`` on a real Qwen draft row at T = 1)."""
    q = _heavy_tailed_float32_row()
    seen = {}
    original = base.inverse_cdf
    monkeypatch.setattr(base, "inverse_cdf", lambda cdf, u: seen.setdefault("cdf", cdf) is not None and original(cdf, u))
    sample_weighted(q.unsqueeze(0), torch.rand(1, 1, dtype=torch.float64))
    cdf = seen["cdf"][0].double()
    law = torch.diff(cdf, prepend=torch.zeros(1, dtype=torch.float64)) / cdf[-1]
    truth = q.double() / q.double().sum()
    assert 0.5 * (law - truth).abs().sum().item() < 1e-12
    float32_law = torch.diff(torch.cumsum(q, 0).double(), prepend=torch.zeros(1, dtype=torch.float64))
    assert 0.5 * (float32_law / float32_law.sum() - truth).abs().sum().item() > 1e-4  # what the check guards


def test_without_replacement_clocks_of_a_float32_row_follow_its_law():
    """15,000 float32 tokens of ``q = 1e-9`` beside 5,000 that share the rest: the small ones are
    drawn first at their rate, ``1.5e-5`` together (a binomial z-test on 20,000 rows). From
    float32 uniforms every exponential below ``6e-8`` was 0, so each of them rang first with
    probability ``6e-8``: ``9e-4`` together, sixty times their mass (on a real Qwen draft row,
    the tokens below ``3e-8`` were drawn first with probability ``2.1e-3`` against their mass of
    ``5.0e-4`` at T = 1, and ``7.9e-3`` against ``1.7e-7`` at T = 0.1)."""
    from decoding.validation.stats import binomial_z_test

    q = torch.cat([torch.full((5_000,), (1 - 1.5e-5) / 5_000), torch.full((15_000,), 1e-9)]).to(torch.float32)
    small = q < 3e-8
    mass = float(q.double()[small].sum() / q.double().sum())
    g = torch.Generator().manual_seed(3)
    hits = rows = 0
    for _ in range(20):
        first = base.sample_without_replacement(q.expand(1_000, -1).contiguous(), 1, g)[:, 0]
        hits, rows = hits + int(small[first].sum()), rows + 1_000
    assert binomial_z_test(hits, rows, mass, 1e-4).passed, (hits, rows, mass)
