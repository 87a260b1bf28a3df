"""The lazy rows of the optimal verifier (decoding.verifiers.optimal.identical_drafts, used by
decoding.verifiers.optimal.iid.verify_tuples) against the full path (row_parameters and
verify_rows on every row), draw for draw:

- hypothesis over families with exact ties of ``p/q`` (integer weights), one-hot rows,
  ``p = q``, disjoint supports, ``q`` with zeros, in float64 and float32, with half the
  rows drafting one token ``k`` times: the same tokens and accepted indices;
- the bounds themselves: ``sigma_up`` above the full path's float ``sigma`` (so its
  ``x``) and ``p_low`` below its float ``p``, at the drafted rank;
- the lazy path is really taken on peaked rows (the comparison is not vacuous);
- a deliberately broken bound (ties on the wrong side: a strict ratio test without
  the widening ``TAU``) makes the lazy verifier differ from the full one.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings

from decoding.verifiers.optimal import iid as optimal, identical_drafts as optimal_lazy
from decoding.verifiers.base import gather_tokens

from .optimal_cases import FAMILIES, case, case_parameters

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _full(p, q, drafts, uniforms):
    """Every row the full way."""
    return optimal.verify_rows(optimal.row_parameters(p, q, drafts.shape[1]), p, q, drafts, uniforms)


def _assert_same(p, q, drafts, uniforms):
    lazy, full = optimal.verify_tuples(p, q, drafts, uniforms), _full(p, q, drafts, uniforms)
    assert lazy.tokens.tolist() == full.tokens.tolist()
    assert lazy.accepted_index.tolist() == full.accepted_index.tolist()


@settings(max_examples=80, deadline=None)
@given(**case_parameters(9))
def test_lazy_equals_full_draw_for_draw(name, vocab, k, seed, dtype):
    _assert_same(*case(name, 64, vocab, k, seed, dtype))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", FAMILIES)
def test_bounds_hold_at_the_drafted_rank(name, dtype):
    k = 3
    p, q, drafts, _ = case(name, 300, 7, k, 11, dtype)
    tokens = drafts[:, 0]
    sigma_up, p_low = optimal_lazy.selection_upper_bound(p, q, tokens, k)
    params = optimal.row_parameters(p, q, k)
    ranks = optimal.token_ranks(params.order, tokens.unsqueeze(1)).squeeze(1)
    own = gather_tokens(params.own, ranks)
    p_full = gather_tokens(p, tokens).double() / params.target_mass.squeeze(1)
    drafted = gather_tokens(q, tokens) > 0
    assert (own[drafted] <= sigma_up[drafted]).all()
    assert (p_low <= p_full).all()


def test_lazy_rows_are_taken_on_peaked_rows():
    p, q, drafts, uniforms = case("dirichlet", 400, 50, 2, 3, torch.float64)
    same = optimal_lazy.identical_drafts(drafts)
    sure = optimal_lazy.certified_acceptance(p, q, drafts[:, 0], uniforms[:, 5].double(), 2) & same
    assert sure.sum() >= 0.5 * same.sum() > 0


def _ties_on_the_wrong_side(target_probs, draft_probs, tokens, k, scratch=None, masses=None, rows=None):
    """Broken: a strict ratio test without ``TAU`` leaves out the tokens tied with ``a``
    that rank before it (lower ids), so ``C`` and ``sigma_a`` are underestimated."""
    if rows is not None:
        target_probs, draft_probs = target_probs[rows], draft_probs[rows]
    p_a, q_a = gather_tokens(target_probs, tokens), gather_tokens(draft_probs, tokens)
    below = target_probs * q_a.unsqueeze(1) < draft_probs * p_a.unsqueeze(1)
    c = torch.where(below, draft_probs, 0.0).sum(1, dtype=torch.float64) / draft_probs.sum(1, dtype=torch.float64)
    w = q_a.double() / draft_probs.sum(1, dtype=torch.float64)
    return (c + w) ** k - c**k, p_a.double() / target_probs.sum(1, dtype=torch.float64)


def _tied_instance(rows: int = 2000):
    """``p = (8, 8, 4)``, ``q = (9, 9, 2)`` (unnormalised), both drafts token 1, tied
    with token 0 (ratio 8/9), which ranks before it: ``C = 0.45``, ``sigma_1 = 0.6075``,
    ``x_1 = 0.41 > p_1 = 0.4`` (``H = {0, 1}``), so the full path rejects for
    ``u4 >= 40/41``; without token 0 the bound would be ``0.2025 < p_1``."""
    p = torch.tensor([[8.0, 8.0, 4.0]]).expand(rows, -1)
    q = torch.tensor([[9.0, 9.0, 2.0]]).expand(rows, -1)
    drafts = torch.ones(rows, 2, dtype=torch.int64)
    return p, q, drafts, torch.rand(rows, optimal.uniforms_per_row(2), generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def test_broken_bound_fails_draw_for_draw(monkeypatch):
    case = _tied_instance()
    _assert_same(*case)
    monkeypatch.setattr(optimal_lazy, "selection_upper_bound", _ties_on_the_wrong_side)
    with pytest.raises(AssertionError):
        _assert_same(*case)


def _tier_one(p, q, tokens, k):
    """The first tier's ``(sigma_up, p_low)``: ``S^ = M^``, every token in the set."""
    masses = optimal_lazy._masses(p, q)
    return optimal_lazy._bound(masses[0], gather_tokens(p, tokens), gather_tokens(q, tokens), *masses, k,
                               optimal_lazy.relative_slack(p.shape[1], k))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", FAMILIES)
def test_first_tier_bound_holds_and_decides_rows_alone(name, dtype):
    """The first tier bounds the full path's ``sigma`` at the drafted rank; on peaked rows it
    decides some rows without the ratio test."""
    k = 3
    p, q, drafts, uniforms = case(name, 300, 7, k, 11, dtype)
    tokens = drafts[:, 0]
    sigma_up, _ = _tier_one(p, q, tokens, k)
    params = optimal.row_parameters(p, q, k)
    own = gather_tokens(params.own, optimal.token_ranks(params.order, tokens.unsqueeze(1)).squeeze(1))
    drafted = gather_tokens(q, tokens) > 0
    assert (own[drafted] <= sigma_up[drafted]).all()
    if name == "dirichlet":
        sigma_up, p_low = _tier_one(p, q, tokens, k)
        assert (uniforms[:, 2 * k + 1].double() * sigma_up < p_low).any()


def test_broken_first_tier_fails_draw_for_draw(monkeypatch):
    """Deliberately broken: the first tier with ``S^ = q_a`` (as if ``a`` ranked first, so
    ``C = 0``) accepts where the full path rejects."""
    case = _tied_instance()
    real = optimal_lazy._bound

    def first_ranked(mass_up_to, p_a, q_a, *rest):
        return real(q_a.double() if mass_up_to is rest[0] else mass_up_to, p_a, q_a, *rest)

    monkeypatch.setattr(optimal_lazy, "_bound", first_ranked)
    with pytest.raises(AssertionError):
        _assert_same(*case)


@pytest.mark.parametrize("chunk_bytes", [None, 7 * 8])  # the default chunks, one row per chunk
def test_certified_acceptance_on_selected_rows_is_that_of_those_rows(chunk_bytes):
    """``rows=`` reads the selected rows in place; the verdicts are those of the same rows
    passed alone (both tiers: some rows are left to the ratio test)."""
    p, q, drafts, uniforms = case("ties", 120, 7, 3, 4, torch.float64)
    rows = torch.tensor([0, 1, 2, 5, 6, 40, 41, 90, 119])
    u4 = uniforms[:, 2 * 3 + 1].double()
    alone = optimal_lazy.certified_acceptance(p[rows], q[rows], drafts[rows, 0], u4[rows], 3)
    selected = optimal_lazy.certified_acceptance(p, q, drafts[rows, 0], u4[rows], 3, rows=rows, chunk_bytes=chunk_bytes)
    assert selected.tolist() == alone.tolist()
    sigma_up, p_low = _tier_one(p[rows], q[rows], drafts[rows, 0], 3)
    first_tier = u4[rows] * sigma_up < p_low
    assert (alone & ~first_tier).any() and not alone.all()  # the second tier decided some rows


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_certified_acceptance_on_two_threads_is_that_of_one(dtype):
    """On the CPU the rows are shared among ``torch.get_num_threads()`` threads
    (:func:`decoding.verifiers.base.share_rows`); both tiers give the verdicts of one thread."""
    p, q, drafts, uniforms = case("ties", 120, 7, 3, 4, dtype)
    rows = torch.arange(0, 120, 3)
    u4 = uniforms[:, 2 * 3 + 1].double()
    one = optimal_lazy.certified_acceptance(p, q, drafts[rows, 0], u4[rows], 3, rows=rows)
    torch.set_num_threads(2)  # the fixture restores the count
    two = optimal_lazy.certified_acceptance(p, q, drafts[rows, 0], u4[rows], 3, rows=rows)
    assert one.tolist() == two.tolist() and one.any() and not one.all()
