"""The optimal verifier's merged rows (decoding.verifiers.optimal.unsorted) against the full
path (row_parameters: the stable sort of every ratio key):

- a row with every bucket refined is the full path's row, parameter for parameter, bit
  for bit;
- every bucket the sign test calls pure has that strict sign of ``e`` at every rank in the
  full path (and a sign test without its margin is shown to be wrong);
- after the first refinement, the parameters at every token entry are the full path's at
  that token (within ``PARAMETER_TOLERANCE``: the sums run in another order) and the cut is
  at the same token;
- draws equal the full path's, draw for draw, on Zipf-like rows with many buckets (also in
  bfloat16 and float16), on the families of tests/decoding/optimal_cases.py, with coarse buckets (several refinement
  rounds, shown to happen), on degenerate rows and with the rows shared among two threads;
  a classification that calls every bucket pure is shown to change draws;
- buckets split into runs (large buckets of degenerate rows): draws equal the plain-Python
  reference on every input family of scripts/bench_input_families.py with splits several
  levels deep, and the sorted path's at ``V = 151,936``; every run is a stretch of consecutive
  ranks of the full sort (a split that breaks that is shown to be caught).

The merged rows are built with the compiled steps of :mod:`decoding.verifiers.optimal.unsorted_rows`
(the cut, the gather, the merge and the parameters), which :func:`optimal_buckets.verify_rows`
runs one row at a time.
"""
from __future__ import annotations

from fractions import Fraction
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import bench_input_families
from decoding.verifiers.optimal import iid as optimal, unsorted as optimal_buckets, unsorted_rows as optimal_merged, row_passes as optimal_numba, reference as reference_optimal
from otm.errors import ShapeMismatchError

from .optimal_cases import FAMILIES, case, case_parameters, compiled_cut

pytestmark = pytest.mark.usefixtures("one_torch_thread")

#: Absolute tolerance on normalised cumulative sums summed in two orders (float64, ``V`` of
#: a few thousand terms of at most 1: the rounding errors are below ``V * 2^-53 ~ 1e-12``).
PARAMETER_TOLERANCE = 1e-11


def zipf_rows(rows: int, vocab: int, k: int, seed: int, dtype=torch.float32):
    """``(p, q, drafts, uniforms)``: Zipf-like target softmax rows over a random order, the
    draft a noisy copy (the shape of real next-token laws), i.i.d. drafts."""
    g = torch.Generator().manual_seed(seed)
    rank = torch.argsort(torch.rand(rows, vocab, generator=g), dim=1).double() + 1
    logits = -1.2 * torch.log(rank) + torch.randn(rows, vocab, generator=g, dtype=torch.float64)
    p = torch.softmax(logits, dim=1).to(dtype)
    q = torch.softmax(logits + 0.8 * torch.randn(rows, vocab, generator=g, dtype=torch.float64), dim=1).to(dtype)
    drafts = optimal.sample_drafts(q, k, g)
    return p, q, drafts, torch.rand(rows, optimal.uniforms_per_row(k), generator=g, dtype=dtype)


def _assert_same_draws(p, q, drafts, uniforms, rows=None, **options):
    rows = torch.arange(p.shape[0]) if rows is None else rows
    merged = optimal_buckets.verify_rows(p, q, drafts, uniforms, rows=rows, **options)
    full = optimal.verify_rows(optimal.row_parameters(p[rows], q[rows], drafts.shape[1]), p[rows], q[rows], drafts[rows], uniforms[rows])
    assert merged.tokens.tolist() == full.tokens.tolist()
    assert merged.accepted_index.tolist() == full.accepted_index.tolist()


#: The names of :func:`decoding.verifiers.optimal.unsorted_rows.ranked_parameters`' results.
PARAMETERS = ("own", "gains", "losses", "target_cumulative", "cut", "support", "gains_h", "losses_h", "flow_u",
              "flow_h", "target_mass", "draft_mass")


def _merged(cut, refined: torch.Tensor, k: int) -> SimpleNamespace:
    """The merged row of a cut (:func:`tests.decoding.optimal_cases.compiled_cut`) with the
    ``refined`` buckets' tokens as entries, and its parameters."""
    chosen = refined.numpy()
    members = optimal_merged.gather(cut.p, cut.q, cut.ids.numpy(), chosen, cut.sizes.numpy())
    keep = (cut.present & ~refined).numpy()
    row = optimal_merged.merged_row(members, keep, cut.lower.numpy(), cut.target.numpy(), cut.draft.numpy())
    order, keys, p_r, q_r, bucket = (torch.from_numpy(a) for a in row)
    params = {name: torch.from_numpy(value) if isinstance(value, np.ndarray) else value
              for name, value in zip(PARAMETERS, optimal_merged.ranked_parameters(row[2], row[3], k))}
    return SimpleNamespace(order=order, keys=keys, draft=q_r, bucket=bucket.long(), **params)


def _first_round(cut, drafts: torch.Tensor) -> torch.Tensor:
    """The buckets refined before the first draw: the mixed ones and the drafts'."""
    refined = cut.present & (cut.sign == 0)
    refined[cut.ids[drafts].long()] = True
    return refined


@pytest.mark.parametrize("k", [1, 2, 5])
@pytest.mark.parametrize("name", FAMILIES)
def test_every_bucket_refined_is_the_full_path(name, k):
    """Also the compiled ``ranked_parameters`` against the torch one, bit for bit."""
    p, q, _, _ = case(name, 6, 9, k, 5, torch.float64)
    for row in range(p.shape[0]):
        cut = compiled_cut(p[row], q[row], k)
        merged = _merged(cut, cut.present.clone(), k)
        full = optimal.row_parameters(p[row : row + 1], q[row : row + 1], k)
        for field in ("order", "keys", "draft", "own", "gains", "losses", "target_cumulative"):
            assert torch.equal(getattr(merged, field), getattr(full, field)[0]), field
        for field in ("cut", "support", "gains_h", "losses_h", "flow_u", "flow_h", "target_mass", "draft_mass"):
            assert getattr(merged, field) == getattr(full, field).flatten()[0].item(), field


def _full_excess(p, q, k):
    """The full path's ``e`` by rank and the token of each rank (one row)."""
    params = optimal.row_parameters(p, q, k)
    p_r = p[0, params.order[0]].double() / params.target_mass[0]
    return p_r - params.own[0], params.order[0]


def _sign_violations(p, q, k, margin=None) -> int:
    """Ranks whose full-path ``e`` contradicts the sign the test gives their bucket."""
    cut = compiled_cut(p[0], q[0], k, margin=margin)
    excess, order = _full_excess(p, q, k)
    bucket = cut.ids[order].long()
    sign, infinite = cut.sign[bucket], cut.lower[bucket] == optimal_merged.INF_KEY
    wrong_positive = (sign > 0) & ~infinite & (excess <= 0)
    wrong_infinite = (sign > 0) & infinite & (excess < 0)
    wrong_negative = (sign < 0) & (excess >= 0)
    return int((wrong_positive | wrong_infinite | wrong_negative).sum())


@pytest.mark.parametrize("k", [1, 2, 4, 8])
def test_pure_buckets_have_one_strict_sign(k):
    p, q, _, _ = zipf_rows(4, 4000, k, 7 + k)
    for row in range(p.shape[0]):
        cut = compiled_cut(p[row], q[row], k)
        assert (cut.sign[cut.present] != 0).float().mean() > 0.5  # most buckets are merged
        assert _sign_violations(p[row : row + 1], q[row : row + 1], k) == 0


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(FAMILIES), vocab=st.integers(2, 40), k=st.integers(1, 6), seed=st.integers(0, 2**31 - 1))
def test_pure_buckets_have_one_strict_sign_on_families(name, vocab, k, seed):
    p, q, _, _ = case(name, 1, vocab, k, seed, torch.float64)
    assert _sign_violations(p, q, k) == 0


def test_sign_test_without_margin_is_wrong():
    """Deliberately broken: a negative margin calls buckets pure whose ``e`` changes sign."""
    p, q, _, _ = zipf_rows(4, 4000, 2, 9)
    assert sum(_sign_violations(p[r : r + 1], q[r : r + 1], 2, margin=-0.5) for r in range(4)) > 0


def _parameters_agree(p, q, drafts, k, margin=None) -> bool:
    """After the first refinement (the mixed buckets and the drafts' buckets), the merged
    row's parameters at every token entry are the full path's at that token, and the cut
    splits the tokens where the full path's does."""
    full = optimal.row_parameters(p, q, k)
    for row in range(p.shape[0]):
        cut = compiled_cut(p[row], q[row], k, margin=margin)
        merged = _merged(cut, _first_round(cut, drafts[row]), k)
        entries = (merged.order >= 0).nonzero().squeeze(1)
        ranks = optimal.token_ranks(full.order[row : row + 1], merged.order[entries].unsqueeze(0)).squeeze(0)
        for field in ("own", "gains", "losses", "target_cumulative"):
            got, want = getattr(merged, field)[entries], getattr(full, field)[row, ranks]
            if not torch.allclose(got, want, rtol=0, atol=PARAMETER_TOLERANCE):
                return False
        tokens_in = torch.where(merged.order >= 0, 1, cut.sizes[merged.bucket])
        if int(tokens_in[: merged.cut].sum()) != int(full.cut[row]):
            return False
    return True


@pytest.mark.parametrize("k", [2, 4, 8])
def test_merged_parameters_at_token_entries_are_the_full_paths(k):
    p, q, drafts, _ = zipf_rows(6, 3000, k, 21 + k)
    assert _parameters_agree(p, q, drafts, k)


@pytest.mark.parametrize("k", [1, 2, 3, 8])
def test_draws_equal_the_full_path_on_zipf_rows(k):
    p, q, drafts, uniforms = zipf_rows(40, 3000, k, 100 + k)
    _assert_same_draws(p, q, drafts, uniforms)
    _assert_same_draws(p, q, drafts, uniforms, rows=torch.tensor([3, 7, 8, 30]))


@settings(max_examples=60, deadline=None)
@given(**case_parameters(30))
def test_draws_equal_the_full_path_on_families(name, vocab, k, seed, dtype):
    _assert_same_draws(*case(name, 24, vocab, k, seed, dtype))


def _rounds(p, q, drafts, uniforms, buckets: int) -> list[int]:
    """Draws per row of :func:`decoding.verifiers.optimal.unsorted_rows.verify_row`."""
    vocab, k = p.shape[1], drafts.shape[1]
    work = np.empty(vocab, np.int64), np.empty(vocab, np.int32)
    margin = optimal_buckets.sign_margin(vocab, k)
    return [optimal_merged.verify_row(p[r].numpy(), q[r].numpy(), drafts[r].numpy(), uniforms[r].double().numpy(),
                                      buckets, margin, *work)[2] for r in range(p.shape[0])]


@pytest.mark.parametrize("buckets", [16, 64])
def test_coarse_buckets_take_several_rounds_and_the_same_draws(buckets):
    rows = zipf_rows(30, 2000, 2, 5)
    _assert_same_draws(*rows, buckets=buckets)
    assert max(_rounds(*rows, buckets)) > 1  # some rows were refined and drawn again


def test_degenerate_rows_draw_as_the_full_path():
    vocab = 50
    g = torch.Generator().manual_seed(0)
    base = torch.softmax(torch.randn(vocab, generator=g, dtype=torch.float64), 0)
    one_hot = torch.zeros(vocab, dtype=torch.float64)
    one_hot[3] = 1.0
    truncated = torch.where(base >= base.topk(5).values[-1], base, 0.0)
    negative_zero = base.clone()
    negative_zero[::7] = -0.0
    tiny = base.clone()
    tiny[4] = 1e-310  # subnormal q: p / q overflows to inf with q > 0
    pairs = [(base, base), (one_hot, base), (base, one_hot), (one_hot, one_hot), (truncated, base),
             (base, truncated), (negative_zero, base), (base, negative_zero), (base, tiny)]
    p = torch.stack([a for a, _ in pairs]).repeat(20, 1)
    q = torch.stack([b for _, b in pairs]).repeat(20, 1)
    for k in (1, 2, 4):
        drafts = optimal.sample_drafts(q / q.sum(1, keepdim=True), k, g)
        uniforms = torch.rand(p.shape[0], optimal.uniforms_per_row(k), generator=g, dtype=torch.float64)
        _assert_same_draws(p, q, drafts, uniforms)


def test_tokens_of_target_zero_are_one_negative_bucket():
    """A top-k truncated target (most of ``p`` is 0): its zero keys are bucket 0, of sign
    -1, merged into one entry instead of refined; the draws are the full path's."""
    p, q, drafts, uniforms = zipf_rows(20, 4000, 2, 31)
    p = torch.where(p >= p.topk(40, dim=1).values[:, -1:], p, 0.0)
    drafts = optimal.sample_drafts(q, 2, torch.Generator().manual_seed(3))
    for row in range(p.shape[0]):
        cut = compiled_cut(p[row], q[row], 2)
        assert cut.present[0] and cut.sign[0] == -1
        assert (cut.ids == 0).sum() >= 3900
    assert _sign_violations(p[:1], q[:1], 2) == 0
    _assert_same_draws(p, q, drafts, uniforms)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("k", [2, 5])
def test_half_precision_rows_draw_as_the_full_path(dtype, k):
    """bfloat16 and float16 rows, which the compiled passes read widened to float32."""
    _assert_same_draws(*zipf_rows(40, 3000, k, 31 + k, dtype))


def test_subnormal_ratios_are_left_mixed_and_draw_as_the_full_path():
    """float64 rows with ratios below the smallest normal float64: those buckets are not
    classified (a subnormal ratio can be off by more than a relative 2^-53)."""
    p, q, drafts, uniforms = zipf_rows(10, 500, 3, 12, torch.float64)
    p[:, :50] = 1e-310
    p = p / p.sum(dim=1, keepdim=True)
    cut = compiled_cut(p[0], q[0], 3)
    subnormal = cut.present & (cut.lower > 0) & (cut.lower < optimal_merged.NORMAL_KEY)
    assert subnormal.any() and (cut.sign[subnormal] == 0).all()
    _assert_same_draws(p, q, drafts, uniforms)


def _exact_d(q_by_rank: torch.Tensor, k: int) -> list[float]:
    """``d`` at every rank in exact arithmetic (the mean of ``k v^(k-1)`` over its block,
    ``(C_{j+1}^k - C_j^k) / q_j`` with ``C`` normalised), rounded once to float64."""
    masses = [Fraction(float(x)) for x in q_by_rank]
    total, before, out = sum(masses), Fraction(0), []
    for mass in masses:
        after = before + mass
        out.append(float((after**k - before**k) / (mass * total ** (k - 1))) if mass > 0 else float("nan"))
        before = after
    return out


def _bounds_violations(p, q, drafts, k, shift: int = 0) -> tuple[int, int]:
    """Ranks of merged entries (after the first refinement) whose exact ``d`` lies outside the
    float bounds of :func:`optimal_merged.block_mean_bounds` for their entry, beyond a relative
    ``1e-12`` (``shift``: the bounds of another entry, deliberately broken); and the number
    of ranks checked."""
    full = optimal.row_parameters(p, q, k)
    wrong, checked = 0, 0
    for row in range(p.shape[0]):
        cut = compiled_cut(p[row], q[row], k)
        merged = _merged(cut, _first_round(cut, drafts[row]), k)
        exact = torch.tensor(_exact_d(full.draft[row], k), dtype=torch.float64)
        bucket_of_rank = cut.ids[full.order[row]].long()
        for entry in (merged.order < 0).nonzero().squeeze(1).tolist():
            low, high = optimal_merged.block_mean_bounds(merged.draft.numpy(), entry + shift, merged.draft_mass, k)
            d = exact[(bucket_of_rank == merged.bucket[entry]) & (full.draft[row] > 0)]
            wrong += int(((d < low * (1 - 1e-12)) | (d > high * (1 + 1e-12))).sum())
            checked += d.numel()
    return wrong, checked


@pytest.mark.parametrize("k", [1, 2, 4, 8])
def test_block_mean_bounds_hold_at_every_rank_of_a_merged_entry(k):
    """A partner in a merged entry: the bounds on ``d`` over a merged entry hold, in exact arithmetic, at every
    rank it stands for in the full path; the bounds of the next entry do not."""
    p, q, drafts, _ = zipf_rows(3, 2000, k, 50 + k, torch.float64)
    wrong, checked = _bounds_violations(p, q, drafts, k)
    assert wrong == 0 and checked > 1000
    if k > 1:
        assert _bounds_violations(p, q, drafts, k, shift=1)[0] > 0


def test_calling_every_bucket_pure_is_caught():
    """Deliberately broken: merging the buckets where ``e`` changes sign (a margin of
    ``-inf`` calls every bucket of normal keys positive). The parameters at the token
    entries move; with coarse buckets (large mixed buckets) draws change too."""
    p, q, drafts, _ = zipf_rows(6, 3000, 2, 23)
    coarse = zipf_rows(60, 3000, 2, 8)
    assert _parameters_agree(p, q, drafts, 2)
    _assert_same_draws(*coarse, buckets=64)
    with pytest.raises(AssertionError):
        _assert_same_draws(*coarse, buckets=64, margin=-np.inf)
    assert not _parameters_agree(p, q, drafts, 2, margin=-np.inf)


def test_rows_shared_among_threads_draw_as_one_thread():
    p, q, drafts, uniforms = zipf_rows(23, 3000, 4, 17)
    one = optimal_buckets.verify_rows(p, q, drafts, uniforms)
    torch.set_num_threads(2)  # the fixture restores the count
    two = optimal_buckets.verify_rows(p, q, drafts, uniforms)
    assert torch.equal(one.tokens, two.tokens) and torch.equal(one.accepted_index, two.accepted_index)
    _assert_same_draws(p, q, drafts, uniforms)


def test_strided_rows_draw_as_contiguous_rows():
    """The compiled rows read strided NumPy views in place: rows of a transposed tensor and
    every other column of a wider one draw as their contiguous copies."""
    p, q, drafts, uniforms = zipf_rows(12, 3000, 3, 41, torch.float64)
    wide_p, wide_q = torch.zeros(12, 6000, dtype=torch.float64), torch.zeros(12, 6000, dtype=torch.float64)
    wide_p[:, ::2], wide_q[:, ::2] = p, q
    views = [(wide_p[:, ::2], wide_q[:, ::2]), (p.t().contiguous().t(), q.t().contiguous().t())]
    want = optimal_buckets.verify_rows(p, q, drafts, uniforms)
    for strided_p, strided_q in views:
        assert not strided_p.is_contiguous()
        got = optimal_buckets.verify_rows(strided_p, strided_q, drafts, uniforms)
        assert torch.equal(got.tokens, want.tokens) and torch.equal(got.accepted_index, want.accepted_index)


def test_draft_tokens_outside_the_vocabulary_are_rejected():
    p, q, drafts, uniforms = zipf_rows(3, 100, 2, 1)
    for bad in (-1, 100):
        wrong = drafts.clone()
        wrong[1, 0] = bad
        with pytest.raises(ShapeMismatchError, match=r"token ids in \[0, 100\)"):
            optimal_buckets.verify_rows(p, q, wrong, uniforms)


def test_no_rows():
    p, q, drafts, uniforms = zipf_rows(3, 100, 2, 1)
    out = optimal_buckets.verify_rows(p, q, drafts, uniforms, rows=torch.zeros(0, dtype=torch.int64))
    assert out.tokens.numel() == out.accepted_index.numel() == 0


def test_the_cpu_verifier_takes_the_merged_path(monkeypatch):
    p, q, drafts, uniforms = zipf_rows(8, 500, 3, 2)
    seen = []
    monkeypatch.setattr(optimal_buckets, "MIN_VOCAB", 500)
    real = optimal_buckets.verify_rows
    monkeypatch.setattr(optimal_buckets, "verify_rows", lambda *a, **kw: seen.append(1) or real(*a, **kw))
    out = optimal.verify_tuples(p, q, drafts, uniforms)
    full = optimal.verify_rows(optimal.row_parameters(p, q, 3), p, q, drafts, uniforms)
    assert seen and out.tokens.tolist() == full.tokens.tolist()


#: The vocabulary of the real models (Qwen2.5): where one bucket of a degenerate row holds
#: most of the tokens and is split into runs instead of gathered.
REAL_VOCAB = 151_936
#: Split parameters that make a vocabulary of tens of tokens split, several levels deep.
SMALL_SPLITS = {"buckets": 8, "split_tokens": 3, "fanout": 4}


def _family_rows(family: str, rows: int, vocab: int, k: int, seed: int):
    """``(p, q, drafts, uniforms)`` of an input family of ``scripts/bench_input_families.py``."""
    g = torch.Generator().manual_seed(seed)
    p, q = bench_input_families.PURE_FAMILIES[family](rows, vocab, g)
    drafts = optimal.sample_drafts(q, k, g)
    return p, q, drafts, torch.rand(rows, optimal.uniforms_per_row(k), generator=g, dtype=torch.float64)


DEGENERATE = [f for f in bench_input_families.PURE_FAMILIES if f != bench_input_families.TYPICAL]


@pytest.mark.parametrize("k", [1, 2, 4])
@pytest.mark.parametrize("family", DEGENERATE)
def test_split_runs_draw_as_the_reference_on_degenerate_families(family, k):
    """Many small rows whose buckets are split into runs, several levels deep: every draw is
    the plain-Python reference's (``decoding.verifiers.optimal.reference``), token and index."""
    p, q, drafts, uniforms = _family_rows(family, 150, 40, k, 7 + k)
    merged = optimal_buckets.verify_rows(p, q, drafts, uniforms, **SMALL_SPLITS)
    for r in range(p.shape[0]):
        want = reference_optimal.optimal(p[r], q[r].unsqueeze(0), drafts[r], uniforms[r])
        assert (merged.tokens[r].item(), merged.accepted_index[r].item()) == want, r


@pytest.mark.parametrize("family", DEGENERATE)
def test_degenerate_rows_at_the_real_vocabulary_draw_as_the_full_path(family):
    """A few rows at ``V = 151,936`` with the default buckets and splits (one bucket of these
    rows holds most of the vocabulary): the sorted path's draws."""
    for k in (2, 4):
        _assert_same_draws(*_family_rows(family, 3, REAL_VOCAB, k, k))


def _runs_are_rank_intervals(p, q, keys, ids, table, k) -> bool:
    """Whether every run of a run table (:func:`optimal_merged.split_runs`) holds a stretch of
    consecutive ranks of the full sort, as many as its size, and is placed (``FIRST_KEY``,
    ``FIRST_ID``) after the rank before it and at or before its first rank."""
    order = optimal.row_parameters(p.unsqueeze(0), q.unsqueeze(0), k).order[0]
    run_of_rank = torch.from_numpy(ids.astype(np.int64))[order]
    place = [(min(int(keys[t]), optimal_merged.INF_KEY), int(t)) for t in order]
    for run in torch.unique(run_of_rank).tolist():
        ranks = (run_of_rank == run).nonzero().squeeze(1)
        if ranks[-1] - ranks[0] + 1 != ranks.numel() or table[run, optimal_merged.SIZE] != ranks.numel():
            return False
        at = (int(table[run, optimal_merged.FIRST_KEY]), int(table[run, optimal_merged.FIRST_ID]))
        first = int(ranks[0])
        if not (first == 0 or place[first - 1] < at) or not at <= place[first]:
            return False
    return True


def test_split_runs_are_stretches_of_consecutive_ranks():
    """One-hot ``p`` (keys 0 on all but one token, ties by id) and ``p = q`` (one key) split two
    levels deep: each run is an interval of ranks of the full sort; a run moved one token off
    its boundary (deliberately broken: split at the wrong index) is not."""
    for family in ("onehot_p", "p_eq_q", "ties"):
        p, q, _, _ = _family_rows(family, 1, 300, 2, 3)
        cut = compiled_cut(p[0], q[0], 2, buckets=8)
        ids, keys = cut.ids.numpy().copy(), np.empty(300, np.int64)
        optimal_numba.ratio_key_range(cut.p, cut.q, keys)
        table, sums = optimal_merged.bucket_runs(cut.lower.numpy(), cut.upper.numpy(), cut.sizes.numpy(),
                                                 cut.sign.numpy(), cut.target.numpy(), cut.draft.numpy(), 300)
        for _ in range(2):
            large = (table[:, optimal_merged.SIZE] > 16) & (table[:, optimal_merged.STATE] == optimal_merged.KEPT)
            table, sums, _ = optimal_merged.split_runs(cut.p, cut.q, keys, ids, table, sums, large, 16, 8)
        assert table.shape[0] > 8 + 2 + 8  # split twice
        assert _runs_are_rank_intervals(p[0], q[0], keys, ids, table, 2), family
        new = np.nonzero((table[:, optimal_merged.STATE] == optimal_merged.KEPT) & (table[:, optimal_merged.SIZE] > 1))[0]
        a, b = table[new[new >= 10][:2], optimal_merged.ID_LO]  # the first tokens of two new runs, swapped
        broken = ids.copy()
        broken[a], broken[b] = ids[b], ids[a]
        assert not _runs_are_rank_intervals(p[0], q[0], keys, broken, table, 2), family
