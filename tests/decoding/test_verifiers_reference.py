"""The batched verifiers against their plain-Python references (decoding.verifiers.reference).

Both consume the same uniforms (the randomness contract of decoding.verifiers.base), so
on float64 inputs they must give identical tokens and accepted indices row by row
(a disagreement needs a uniform within ~1e-16 of a decision boundary). Also: the
batched k-SEQ factor g* and the truncated-IS selection law against otm's exact values.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from decoding.verifiers import VERIFIERS, get_verifier, importance_sampling_truncated, kseq
from decoding.verifiers.base import draw_uniforms
from decoding.verifiers.reference import REFERENCES, run_reference
from otm.errors import UnknownNameError
from otm.rules import rule_law, rule_specs
from otm.rules.kseq import optimal_division_factor
from otm.tolerances import AGREEMENT_TOLERANCE

V = 6
ROWS = 600
#: Truncated IS solves LPs per distinct row: a few distinct instances, repeated.
IS_INSTANCES = 4

#: rule with a verifier -> the k values tested: those of 1, 2, 3 it is defined for (the registry).
DRAFT_COUNTS = {spec.name: tuple(k for k in (1, 2, 3) if spec.allows(k)) for spec in rule_specs(verifier=True)}

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _instances(rule: str, k: int, seed: int):
    """``(p [ROWS, V], draft_probs [ROWS, k, V])``: random rows with sparse entries
    (zeros, one-hot rows) mixed in so that the degenerate branches are exercised."""
    rng = np.random.default_rng(seed)
    distinct = IS_INSTANCES if rule == "importance_sampling_truncated" else ROWS

    def laws(shape):
        x = rng.dirichlet(np.full(V, 0.6), size=shape)
        x[rng.random(x.shape) < 0.2] = 0.0
        x[..., 0] += 1e-3  # at least one positive entry
        return x / x.sum(-1, keepdims=True)

    p = laws(distinct)
    q = laws((distinct, k)) if rule == "specinfer" else np.repeat(laws(distinct)[:, None], k, axis=1)
    if rule == "rrs_wor":  # k distinct drafts need k positive entries
        q = np.repeat(rng.dirichlet(np.ones(V), size=distinct)[:, None], k, axis=1)
    reps = ROWS // distinct
    return torch.as_tensor(np.repeat(p, reps, axis=0)), torch.as_tensor(np.repeat(q, reps, axis=0))


@pytest.mark.parametrize("rule, k", [(r, k) for r, ks in DRAFT_COUNTS.items() for k in ks])
def test_batched_equals_reference_draw_for_draw(rule, k):
    verifier = get_verifier(rule)
    p, qs = _instances(rule, k, seed=1000 * k + len(rule))
    g = torch.Generator().manual_seed(7)
    drafts = verifier.sample_drafts(qs if verifier.draft_scheme == "independent" else qs[:, 0], k, g)
    state = g.get_state()
    out = verifier.verify(p, qs, drafts, g)
    g.set_state(state)
    uniforms = draw_uniforms(g, p.shape[0], verifier.uniforms_per_row(k), p)
    tokens, indices = run_reference(rule, p, qs, drafts, uniforms)
    assert out.tokens.tolist() == tokens
    assert out.accepted_index.tolist() == indices


def _exhausted_rrs_wor(k: int, seed: int):
    """``(p [ROWS, V], draft_probs [ROWS, k, V])`` where every q has 1 to 3 positive
    entries (one-hot rows included), so k >= 2 often exceeds the support."""
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(V, 0.6), size=ROWS)
    p[rng.random(p.shape) < 0.3] = 0.0
    p[:, 0] += 1e-3
    p /= p.sum(1, keepdims=True)
    p[: ROWS // 6] = np.eye(V)[rng.integers(0, V, ROWS // 6)]  # one-hot targets (temperature 0)
    q = np.zeros((ROWS, V))
    for row, size in zip(q, rng.integers(1, 4, ROWS)):
        support = rng.choice(V, size=size, replace=False)
        row[support] = rng.dirichlet(np.ones(size))
    q[ROWS // 2 : ROWS // 2 + 50] = p[ROWS // 2 : ROWS // 2 + 50]  # p = q
    return torch.as_tensor(p), torch.as_tensor(np.repeat(q[:, None], k, axis=1))


def _rrs_wor_outputs(verifier, p, qs, k: int, seed: int):
    """``(batched tokens, batched indices, reference tokens, reference indices)``."""
    g = torch.Generator().manual_seed(seed)
    drafts = verifier.sample_drafts(qs[:, 0], k, g)
    state = g.get_state()
    out = verifier.verify(p, qs, drafts, g)
    g.set_state(state)
    tokens, indices = run_reference("rrs_wor", p, qs, drafts, draw_uniforms(g, p.shape[0], verifier.uniforms_per_row(k), p))
    return out.tokens.tolist(), out.accepted_index.tolist(), tokens, indices


@pytest.mark.parametrize("k", [2, 3, 4, V])
def test_rrs_wor_exhausted_support_equals_reference(k):
    """Drafts past the support of q (point-mass verification): batched == reference."""
    p, qs = _exhausted_rrs_wor(k, seed=50 + k)
    assert ((qs[:, 0] > 0).sum(-1) < k).float().mean() > 0.3  # the branch is exercised
    batched_tokens, batched_indices, tokens, indices = _rrs_wor_outputs(get_verifier("rrs_wor"), p, qs, k, seed=k)
    assert batched_tokens == tokens
    assert batched_indices == indices
    support = (qs[:, 0] > 0).sum(-1).tolist()
    assert any(i >= m for i, m in zip(indices, support))  # a deterministic draft was accepted


def test_rrs_wor_accepting_fixed_drafts_surely_disagrees_with_the_reference(monkeypatch):
    """The comparison can fail: fixed drafts past the support checked with q_i(x) = 0."""
    from decoding.verifiers import rrs_wor

    monkeypatch.setattr(rrs_wor, "with_fallback", lambda weights, fallback: weights)
    p, qs = _exhausted_rrs_wor(3, seed=9)
    batched_tokens, _, tokens, _ = _rrs_wor_outputs(rrs_wor, p, qs, 3, seed=3)
    assert batched_tokens != tokens


def test_every_verifier_has_a_reference():
    assert set(REFERENCES) == set(VERIFIERS)
    with pytest.raises(UnknownNameError):
        run_reference("nope", torch.zeros(1, 2), torch.zeros(1, 1, 2), torch.zeros(1, 1, dtype=torch.int64),
                      torch.zeros(1, 2))


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_kseq_factor_equals_otm_g_star(k):
    rng = np.random.default_rng(k)
    p, q = rng.dirichlet(np.ones(V), size=20), rng.dirichlet(np.ones(V), size=20)
    q[:5, :2] = 0.0  # q zero where p positive
    q /= q.sum(1, keepdims=True)
    p[5:8] = q[5:8]  # p = q: g* = 1
    batched = kseq.optimal_division_factor(torch.as_tensor(p), torch.as_tensor(q), k).numpy()
    exact = np.array([optimal_division_factor(pi, qi, k) for pi, qi in zip(p, q)])
    np.testing.assert_allclose(batched, exact, rtol=0, atol=AGREEMENT_TOLERANCE)


@pytest.mark.parametrize("k, s, alphabet_size", [(1, 5, 40), (2, 5, 40), (3, 2, 40), (2, 2, 4), (3, 5, 3)])
def test_is_truncated_selection_law_equals_enumeration(k, s, alphabet_size):
    """The recursion for the selection law P_I (no V^k enumeration) equals otm's
    enumerated ``selection_law``; the pair rules equal otm's on the alphabet."""
    rng = np.random.default_rng(k + s)
    for _ in range(3):
        _assert_plan_is_the_law(rng.dirichlet(np.ones(V)), rng.dirichlet(np.ones(V)), k, s, alphabet_size)


@pytest.mark.parametrize("k", [2, 3])
def test_is_truncated_plan_is_the_law_at_the_real_vocabulary(k):
    """V = 151,936 with the draft on 60 tokens (a top-k draft): the exact law runs its stages
    on the draft's support, the plan on the alphabet with its free tokens counted over the
    vocabulary (``free_count``); they agree."""
    rng = np.random.default_rng(k)
    vocab = 151_936
    p = rng.dirichlet(np.full(vocab, 0.05))
    q = np.zeros(vocab)
    drafted = np.concatenate([np.argsort(-p)[:30], rng.choice(vocab, 30, replace=False)])
    q[drafted] = rng.dirichlet(np.ones(drafted.size))
    _assert_plan_is_the_law(p, q / q.sum(), k, 5, 40)


def _assert_plan_is_the_law(p, q, k, s, alphabet_size):
    law = rule_law("importance_sampling_truncated", p, q, k, s=s, alphabet_size=alphabet_size)
    plan = importance_sampling_truncated.selection_plan(p, q, k, s, alphabet_size)
    assert np.array_equal(plan.alphabet, np.flatnonzero(law.details["alphabet"]))
    selection = law.details["selection_law"]
    np.testing.assert_allclose(plan.selection_law, selection[plan.alphabet], atol=AGREEMENT_TOLERANCE)
    assert np.all(selection[~law.details["alphabet"]] == 0)
    np.testing.assert_allclose(law.output_distribution, p, rtol=0, atol=AGREEMENT_TOLERANCE)
    for mine, stage in zip(plan.select_first, law.details["stages"], strict=True):
        at = np.searchsorted(plan.alphabet, stage["tokens"])  # the stage tokens: q > 0 on the alphabet
        assert np.array_equal(plan.alphabet[at], stage["tokens"])
        np.testing.assert_allclose(mine[np.ix_(at, at)], stage["select_first"], atol=AGREEMENT_TOLERANCE)


def test_a_broken_batched_sampler_disagrees_with_the_reference(monkeypatch):
    """The comparison can fail: RRS whose residuals are not renormalised."""
    from decoding.verifiers import rrs

    monkeypatch.setattr(rrs, "normalise", lambda weights: weights)
    p, qs = _instances("rrs", 3, seed=11)
    g = torch.Generator().manual_seed(3)
    drafts = rrs.sample_drafts(qs[:, 0], 3, g)
    state = g.get_state()
    out = rrs.verify(p, qs, drafts, g)
    g.set_state(state)
    tokens, _ = run_reference("rrs", p, qs, drafts, draw_uniforms(g, p.shape[0], rrs.uniforms_per_row(3), p))
    assert out.tokens.tolist() != tokens
