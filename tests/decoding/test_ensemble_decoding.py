"""Speculative Ensemble in real decoding (Speculative Ensemble, Fu et al. 2025).

Oracle: the exact law of the first ``LENGTH`` generated tokens under autoregressive
sampling from the ensemble ``r``, by enumerating all ``VOCAB^LENGTH`` sequences; ``r`` is
computed in numpy float64 with :mod:`otm.rules.speculative_ensemble` and
:func:`otm.distributions.logits_to_probs` (independently of :mod:`decoding.ensemble.verify`).
Sample: the first ``LENGTH`` tokens of ``RUNS`` independent decodes (one batch, one seed).
Test: Pearson chi-square (:func:`decoding.validation.stats.chi_square_test`, cells with expected
count < 5 pooled) at false-alarm rate ``FALSE_ALARM`` per test: a correct decoder fails
a given test with probability 1e-3 (seeds are fixed, so outcomes are deterministic).
Deliberately broken decoders (a bonus token committed without verification; tokens
verified against ``p`` instead of ``r``) must fail the same test.
"""
import itertools

import numpy as np
import pytest
import torch

from decoding.ensemble.loop import ensemble_autoregressive_decode, speculative_ensemble_decode
from decoding.ensemble.verify import (
    contrastive_ensemble_probs,
    make_ensemble,
    verify_against_ensemble,
    weighted_ensemble_probs,
)
from decoding.models.tiny import build_tiny_pair, tiny_causal_lm, tiny_config
from decoding.validation.stats import binomial_z_test, chi_square_test
from decoding.verifiers.base import VerifierOutput
from otm.distributions import logits_to_probs, total_variation
from otm.errors import InvalidDistributionError, NotApplicableError, ShapeMismatchError, UnknownNameError
from otm.rules import rule_acceptance, rule_output_distribution
from otm.rules.speculative_ensemble import contrastive_ensemble, weighted_ensemble
from otm.tolerances import AGREEMENT_TOLERANCE

#: False-alarm rate of each chi-square / z test (probability that a correct decoder fails).
FALSE_ALARM = 1e-3
VOCAB = 4
LENGTH = 3
RUNS = 6000
PROMPT = [1, 3]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def models():
    """Three tiny float64 Qwen2 models: q (draft-like), p (target), and an unrelated third."""
    pair = build_tiny_pair(vocab_size=VOCAB, seed=0, draft_noise=0.6, dtype=torch.float64)
    third = tiny_causal_lm(tiny_config(VOCAB), seed=7, dtype=torch.float64)
    return [pair.draft, pair.target, third]


def next_probs(model, prefixes, temperature) -> np.ndarray:  # [len(prefixes), V] float64
    with torch.no_grad():
        logits = model(input_ids=torch.tensor(prefixes)).logits[:, -1].double().numpy()
    return np.stack([logits_to_probs(row, temperature) for row in logits])


def oracle_r(model_probs, ensemble, params) -> np.ndarray:
    """``r`` per row from the models' laws ``model_probs`` (list of ``[rows, V]``), by otm."""
    if ensemble == "contrastive":
        q, p = model_probs
        return np.stack([contrastive_ensemble(p[i], q[i], params["mu"]) for i in range(len(p))])
    if "lam" in params:
        q, p = model_probs
        return np.stack([weighted_ensemble(p[i], q[i], params["lam"]) for i in range(len(p))])
    return sum(w * probs for w, probs in zip(params["weights"], model_probs))


def exact_ensemble_law(models, ensemble, params, temperature) -> np.ndarray:  # [V ** LENGTH]
    """Law of the first LENGTH tokens of autoregressive sampling from r (lexicographic)."""
    law = np.ones(1)
    for length in range(LENGTH):
        prefixes = [PROMPT + list(s) for s in itertools.product(range(VOCAB), repeat=length)]
        r = oracle_r([next_probs(m, prefixes, temperature) for m in models], ensemble, params)
        law = (law[:, None] * r).ravel()
    return law / law.sum()


def counts_of(tokens: torch.Tensor) -> np.ndarray:
    codes = np.ravel_multi_index(tokens[:, :LENGTH].T.numpy(), (VOCAB,) * LENGTH)
    return np.bincount(codes, minlength=VOCAB**LENGTH)


def decode(models, ensemble, params, gammas, temperature=1.0, seed=0, verifier=None, runs=RUNS):
    return speculative_ensemble_decode(
        models, [PROMPT] * runs, ensemble, **params, gammas=gammas, temperature=temperature,
        max_new_tokens=LENGTH, generator=torch.Generator().manual_seed(seed), verifier=verifier,
    )


CASES = {
    "weighted-2": (2, "weighted", {"lam": 0.5}, (2, 1), 1.0),
    "weighted-2-lam0.3": (2, "weighted", {"lam": 0.3}, (1, 2), 0.7),
    "weighted-2-T0": (2, "weighted", {"lam": 0.5}, (1, 1), 0.0),
    "contrastive-2": (2, "contrastive", {"mu": 0.5}, (1, 1), 1.0),
    "contrastive-2-mu0.1": (2, "contrastive", {"mu": 0.1}, (2, 1), 1.0),
    "weighted-3": (3, "weighted", {"weights": (1 / 3, 1 / 3, 1 / 3)}, (1, 1, 1), 1.0),
    "weighted-3-uneven": (3, "weighted", {"weights": (0.5, 0.3, 0.2)}, (2, 1, 1), 1.0),
}


@pytest.mark.parametrize("case", list(CASES))
def test_first_tokens_follow_ensemble_law(models, case):
    n, ensemble, params, gammas, temperature = CASES[case]
    result = decode(models[:n], ensemble, params, gammas, temperature)
    law = exact_ensemble_law(models[:n], ensemble, params, temperature)
    fit = chi_square_test(counts_of(result.tokens), law, alpha=FALSE_ALARM)
    assert fit.passed, f"{case}: {fit.reason}"
    # the alternate framework was exercised: tokens generated by a non-default model
    # (bonus tokens) were verified by the others
    assert result.verifications[1] > 0
    assert result.tokens.shape == (RUNS, LENGTH)


def _bonus_unverified(ensemble_probs, proposal_probs, tokens, proposer_ids, generator) -> VerifierOutput:
    """Broken: tokens generated by a non-default model (the bonus tokens, with
    gamma = 1) are committed without verification (§3.3's warning)."""
    out = verify_against_ensemble(ensemble_probs, proposal_probs, tokens, generator)
    bonus = proposer_ids != 0
    return VerifierOutput(torch.where(bonus, tokens, out.tokens), torch.where(bonus, 0, out.accepted_index))


def _against_target(logits, temperature):
    """Broken ensemble: verification against the target ``p`` (model 1) instead of ``r``."""
    return make_ensemble("weighted", 2, lam=0.0)(logits, temperature)


@pytest.mark.parametrize(
    "ensemble, params, verifier",
    [
        ("weighted", {"lam": 0.5}, _bonus_unverified),
        ("contrastive", {"mu": 0.5}, _bonus_unverified),
        (_against_target, {}, None),
    ],
    ids=["bonus-unverified-weighted", "bonus-unverified-contrastive", "verify-against-p"],
)
def test_broken_variants_fail(models, ensemble, params, verifier):
    result = decode(models[:2], ensemble, params, (1, 1), verifier=verifier)
    reference = ("weighted", {"lam": 0.5}) if callable(ensemble) else (ensemble, params)
    fit = chi_square_test(counts_of(result.tokens), exact_ensemble_law(models[:2], *reference, 1.0), alpha=FALSE_ALARM)
    assert not fit.passed, f"a broken decoder passed: {fit.reason}"


def _first_step_laws(models, temperature=1.0):
    return [next_probs(m, [PROMPT], temperature)[0] for m in models[:2]]  # q, p at the prompt


@pytest.mark.parametrize("rule, params", [("ensemble_weighted", {"lam": 0.5}), ("ensemble_contrastive", {"mu": 0.5})])
def test_single_step_acceptance_matches_otm(models, rule, params):
    """The first verification (model 0's proposal, gamma_0 = 1) accepts with probability
    ``otm.rule_acceptance(rule, p, q, 1) = 1 - TV(q, r)`` (eq. (7), normalised TV), and the
    first token follows ``r = otm.rules.rule_output_distribution``."""
    q, p = _first_step_laws(models)
    exact = float(rule_acceptance(rule, p, q, 1, **params))
    r_exact = rule_output_distribution(rule, p, q, 1, **params)
    assert exact == pytest.approx(1 - total_variation(q, r_exact), abs=AGREEMENT_TOLERANCE)
    # the torch ensemble agrees with otm's, and so does sum min(q, r)
    with torch.no_grad():
        logits = torch.stack([m(input_ids=torch.tensor([PROMPT])).logits[:, -1] for m in models[:2]])
    r_torch = make_ensemble(rule.removeprefix("ensemble_"), 2, **params)(logits, 1.0)[0].numpy()
    np.testing.assert_allclose(r_torch, r_exact, atol=AGREEMENT_TOLERANCE)
    assert np.minimum(q, r_torch).sum() == pytest.approx(exact, abs=AGREEMENT_TOLERANCE)
    # sampled: one verification per row
    runs = 20000
    result = speculative_ensemble_decode(
        models[:2], [PROMPT] * runs, rule.removeprefix("ensemble_"), **params, gammas=(1, 1),
        max_new_tokens=1, generator=torch.Generator().manual_seed(3),
    )
    assert result.verifications == [runs, 0]
    fit = binomial_z_test(result.accepts[0], runs, exact, alpha=FALSE_ALARM)
    assert fit.passed, fit.reason
    tokens_fit = chi_square_test(np.bincount(result.tokens[:, 0].numpy(), minlength=VOCAB), r_exact, alpha=FALSE_ALARM)
    assert tokens_fit.passed, tokens_fit.reason


def test_single_step_acceptance_detects_a_wrong_law(models):
    """The z-test of the single-step check can fail: verifying against p (lam = 0) has the
    acceptance 1 - TV(q, p), far from the lam = 0.5 value."""
    q, p = _first_step_laws(models)
    exact = float(rule_acceptance("ensemble_weighted", p, q, 1, lam=0.5))
    runs = 20000
    result = speculative_ensemble_decode(
        models[:2], [PROMPT] * runs, "weighted", lam=0.0, gammas=1, max_new_tokens=1,
        generator=torch.Generator().manual_seed(3),
    )
    assert not binomial_z_test(result.accepts[0], runs, exact, alpha=FALSE_ALARM).passed


def test_verifier_on_fixed_rows_follows_r():
    """verify_against_ensemble on batched rows: output law r, acceptance sum min(s, r);
    degenerate rows (r = s one-hot, disjoint supports) give no NaN."""
    generator = torch.Generator().manual_seed(5)
    q = np.array([0.6, 0.3, 0.1, 0.0])
    p = np.array([0.1, 0.2, 0.3, 0.4])
    r = weighted_ensemble(p, q, 0.25)
    rows = 20000
    s_t = torch.tensor(q).expand(rows, -1).contiguous()
    x = torch.multinomial(s_t, 1, generator=generator)[:, 0]
    out = verify_against_ensemble(torch.tensor(r).expand(rows, -1).contiguous(), s_t, x, generator)
    assert chi_square_test(np.bincount(out.tokens.numpy(), minlength=4), r, alpha=FALSE_ALARM).passed
    accepted = int((out.accepted_index == 0).sum())
    assert binomial_z_test(accepted, rows, float(rule_acceptance("ensemble_weighted", p, q, 1, lam=0.25)), alpha=FALSE_ALARM).passed
    one_hot = torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]], dtype=torch.float64)
    other = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
    out = verify_against_ensemble(other, one_hot, torch.tensor([1, 0]), generator)
    assert out.tokens.tolist() == [1, 2]
    assert out.accepted_index.tolist() == [0, -1]


def test_temperature_zero_contrastive_is_greedy(models):
    """T = 0: r is the one-hot of argmax(l_p - mu l_q); speculative and plain decoding give
    the same deterministic sequence, with no NaN."""
    kwargs = dict(mu=0.5, temperature=0.0, max_new_tokens=8)
    spec = speculative_ensemble_decode(models[:2], [PROMPT] * 3, "contrastive", gammas=(2, 1), generator=torch.Generator().manual_seed(0), **kwargs)
    plain = ensemble_autoregressive_decode(models[:2], [PROMPT] * 3, "contrastive", generator=torch.Generator().manual_seed(1), **kwargs)
    assert torch.equal(spec.tokens, plain.tokens)
    assert (spec.tokens == spec.tokens[0]).all()
    ids = list(PROMPT)
    with torch.no_grad():
        for _ in range(8):
            lq, lp = (m(input_ids=torch.tensor([ids])).logits[0, -1] for m in models[:2])
            ids.append(int((lp - 0.5 * lq).argmax()))
    assert spec.tokens[0].tolist() == ids[len(PROMPT):]


@pytest.mark.parametrize("n", [2, 3])
def test_identical_models_accept_everything_and_reuse_bonus(n):
    """p = q (identical models), weighted: r = p, every verification accepts, and with
    gamma = 1 every call after the first n - 1 commits a token (the bonus token of one
    model is the proposal the next one verifies, Fig. 2-3): ``max_new + n - 1`` calls
    per row, against ``n * max_new`` for plain ensemble sampling."""
    same = build_tiny_pair(vocab_size=VOCAB, seed=0, draft_noise=0.0, dtype=torch.float64)
    models = [same.target] * n
    rows, max_new = 20, 10
    result = speculative_ensemble_decode(models, [PROMPT] * rows, "weighted", gammas=1, max_new_tokens=max_new,
                                         generator=torch.Generator().manual_seed(0))
    assert result.acceptance_rate == 1.0
    assert sum(result.model_calls) == rows * (max_new + n - 1)
    plain = ensemble_autoregressive_decode(models, [PROMPT] * rows, max_new_tokens=max_new, generator=torch.Generator().manual_seed(0))
    assert plain.tokens_per_call == pytest.approx(1 / n)
    assert result.tokens_per_call > plain.tokens_per_call
    contrastive = speculative_ensemble_decode(models[:2], [PROMPT] * rows, "contrastive", gammas=(2, 1), max_new_tokens=max_new,
                                              generator=torch.Generator().manual_seed(0))
    assert ((contrastive.tokens >= 0) & (contrastive.tokens < VOCAB)).all()


def test_vocabulary_of_one_token():
    config = tiny_config(vocab_size=1)
    models = [tiny_causal_lm(config, seed=s, dtype=torch.float64) for s in (0, 1)]
    for ensemble in ("weighted", "contrastive"):
        result = speculative_ensemble_decode(models, [0, 0], ensemble, gammas=(2, 1), max_new_tokens=5,
                                             generator=torch.Generator().manual_seed(0))
        assert result.tokens.tolist() == [[0] * 5]
        assert result.acceptance_rate == 1.0


def test_ensemble_probs_shapes_and_law():
    logits = torch.tensor([[[0.0, 1.0, 2.0]], [[2.0, 1.0, 0.0]], [[0.0, 0.0, 0.0]]], dtype=torch.float64)
    r = weighted_ensemble_probs(logits, 1.0, (0.5, 0.25, 0.25))
    expected = sum(w * logits_to_probs(logits[i, 0].numpy()) for i, w in enumerate((0.5, 0.25, 0.25)))
    np.testing.assert_allclose(r[0].numpy(), expected, atol=AGREEMENT_TOLERANCE)
    masked = torch.tensor([[[0.0, 1.0, -torch.inf]], [[1.0, 0.0, -torch.inf]]], dtype=torch.float64)
    r = contrastive_ensemble_probs(masked, 1.0, 0.1)
    assert r[0, 2] == 0
    assert torch.isfinite(r).all()
    amateur_only = torch.tensor([[[0.0, 1.0, -torch.inf]], [[1.0, 0.0, 0.0]]], dtype=torch.float64)
    with pytest.raises(NotApplicableError):  # q = 0 < p: l_p - mu l_q = +inf
        contrastive_ensemble_probs(amateur_only, 1.0, 0.1)


def test_bad_inputs_raise_typed_errors(models):
    g = torch.Generator().manual_seed(0)
    with pytest.raises(NotApplicableError):
        speculative_ensemble_decode(models[:1], PROMPT, generator=g)
    with pytest.raises(NotApplicableError):
        speculative_ensemble_decode(models, PROMPT, "contrastive", generator=g)
    with pytest.raises(NotApplicableError):
        speculative_ensemble_decode(models, PROMPT, "weighted", lam=0.5, generator=g)
    with pytest.raises(InvalidDistributionError):
        speculative_ensemble_decode(models[:2], PROMPT, "weighted", weights=(0.5, 0.6), generator=g)
    with pytest.raises(InvalidDistributionError):
        speculative_ensemble_decode(models[:2], PROMPT, "weighted", gammas=(1, 0), generator=g)
    with pytest.raises(InvalidDistributionError):
        speculative_ensemble_decode(models[:2], PROMPT, "contrastive", lam=0.5, generator=g)
    with pytest.raises(InvalidDistributionError):
        speculative_ensemble_decode(models[:2], PROMPT, temperature=-1.0, generator=g)
    with pytest.raises(UnknownNameError):
        speculative_ensemble_decode(models[:2], PROMPT, "product", generator=g)
    with pytest.raises(ShapeMismatchError):
        speculative_ensemble_decode(models[:2], [[1, 2], [3]], generator=g)
    empty = speculative_ensemble_decode(models[:2], PROMPT, max_new_tokens=0, generator=g)
    assert empty.tokens.shape == (1, 0)
    assert empty.acceptance_rate is None
