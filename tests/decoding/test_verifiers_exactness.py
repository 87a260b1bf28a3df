"""Every batched verifier against its exact law in otm.rules.

For each rule, instance and k: ``N`` rows of the same instance go through
``sample_drafts`` and ``verify``; then

- the output tokens pass a chi-square test against ``otm.rules.rule_output_distribution``;
- the membership acceptance ``Y in S(X)`` passes a binomial z-test against
  ``otm.rule_acceptance``, and ``accepted_index >= 0`` one against
  ``details["draft_accepted"]`` where the exact law reports it;
- the draft tuples pass a chi-square test against the rule's exact joint draft law.

False-alarm rate: ``ALPHA = 1e-4`` per test (decoding.validation.stats); with about 400 such tests,
a correct implementation fails the suite with probability below 4 %, and the seeds are
fixed (derived from the test's name), so the suite is deterministic. Deliberately
broken samplers must fail the same tests.
"""
from __future__ import annotations

import zlib

import numpy as np
import pytest
import torch

from decoding.validation.stats import binomial_z_test, chi_square_test
from decoding.verifiers import VERIFIERS, get_verifier, kseq, rrs, rrs_wor, spechub
from decoding.verifiers.base import VerifierOutput
from otm.errors import InvalidDraftCountError
from otm.rules import rule_law, rule_specs

ALPHA = 1e-4
ROWS = 20_000

pytestmark = pytest.mark.usefixtures("one_torch_thread")

V = 6

_rng = np.random.default_rng(20240601)
_P = _rng.dirichlet(np.ones(V))
_Q = _rng.dirichlet(np.ones(V))


def _one_hot(i: int) -> np.ndarray:
    out = np.zeros(V)
    out[i] = 1.0
    return out


#: (p, q) instances over V = 6 tokens: generic and degenerate.
INSTANCES = {
    "generic": (_P, _Q),
    "p_equals_q": (_Q, _Q),
    "one_hot_q": (_P, _one_hot(2)),
    "one_hot_p": (_one_hot(2), _Q),
    # equal masses and ratios p / q tied in pairs (2, 1/2, 1: exact in float64)
    "ties": (np.array([0.2, 0.2, 0.1, 0.1, 0.2, 0.2]), np.array([0.1, 0.1, 0.2, 0.2, 0.2, 0.2])),
    "temperature_zero": (_one_hot(1), _one_hot(3)),
    "temperature_zero_same": (_one_hot(4), _one_hot(4)),
    "q_zero_where_p_positive": (_P, np.array([0.0, 0.5, 0.0, 0.3, 0.2, 0.0])),
    "disjoint": (np.array([0.6, 0.4, 0, 0, 0, 0]), np.array([0, 0, 0.1, 0.2, 0.3, 0.4])),
    # p / q past the float64 range (denormal q), a q = 0 token of lower id: the ratio order
    # must keep the tiny-q tokens among the drafted ones (otm.formulations.prefix_scan.ratio_order)
    "denormal_q": (np.array([0.2, 0.1, 0.3, 0.1, 0.2, 0.1]), np.array([0.0, 5e-324, 1e-310, 0.5, 0.3, 0.2])),
    # a dominant draft token (q = 1 in float64) whose complement is denormal: q / (1 - q) and
    # 1 / q(rest) overflow, and the p / q of its partners (every second draft without
    # replacement) overflow too
    "dominant_denormal_complement": (np.array([0.2, 0.1, 0.3, 0.1, 0.2, 0.1]),
                                     np.array([0.0, 2e-313, 1.0, 3e-311, 4e-312, 0.0])),
}

#: The same in float32 rows (a top logit 90-100 nats above the rest, or 9-10 at T = 0.1): the
#: complement is a float32 denormal; the law is that of the same values in float64.
FLOAT32_DOMINANT = (np.array([0.2, 0.1, 0.3, 0.1, 0.2, 0.1]),
                    np.array([0.0, 2e-42, 1.0, 3e-40, 4e-41, 0.0], dtype=np.float32).astype(np.float64))

#: Values of k tested beyond 2 and 3: optimal_wor's walk goes down past a second member at k = 4.
MORE_DRAFT_COUNTS = {"optimal_wor": (4,)}

#: rule with a verifier -> the values of k tested: those of 2, 3 it is defined for (the registry;
#: its smallest k where none is), and :data:`MORE_DRAFT_COUNTS`.
DRAFT_COUNTS = {
    spec.name: (tuple(k for k in (2, 3) if spec.allows(k)) or spec.ks[:1]) + MORE_DRAFT_COUNTS.get(spec.name, ())
    for spec in rule_specs(verifier=True)
}

CASES = [(rule, name, k) for rule, ks in DRAFT_COUNTS.items() for name in INSTANCES for k in ks]

_SUPPORT_TWO = np.array([0.0, 0.7, 0.0, 0.0, 0.3, 0.0])

#: rrs_wor with fewer tokens of positive q than drafts: ``(p, q, k)``.
RRS_WOR_EXHAUSTED = {
    "one_hot_q": (_P, _one_hot(2), 4),
    "temperature_zero": (_one_hot(1), _one_hot(3), 6),
    "support_two": (_P, _SUPPORT_TWO, 3),
    "support_two_all_drafted": (_P, _SUPPORT_TWO, 6),
    "p_equals_q_support_two": (_SUPPORT_TWO, _SUPPORT_TWO, 4),
    "disjoint_support_two": (np.array([0.5, 0.0, 0.2, 0.3, 0.0, 0.0]), _SUPPORT_TWO, 4),
}


def _seed(*parts) -> int:
    return zlib.crc32(repr(parts).encode())


def _draft_rows(rule: str, q: np.ndarray, k: int) -> np.ndarray:
    """``[k, V]`` per-draft laws: SpecInfer's drafts get different laws (q rolled)."""
    if rule == "specinfer":
        return np.stack([np.roll(q, i) for i in range(k)])
    return np.tile(q, (k, 1))


def _exact(rule: str, p: np.ndarray, q: np.ndarray, k: int):
    return rule_law(rule, p, _draft_rows(rule, q, k) if rule == "specinfer" else q, k)


def _run(verifier, p, q_rows, k, rows, seed, dtype=torch.float64, device="cpu", drafts=None):
    """``(draft_tokens [rows, k], VerifierOutput)`` for ``rows`` copies of one instance."""
    g = torch.Generator(device=device).manual_seed(seed)
    target = torch.as_tensor(p, dtype=dtype, device=device).expand(rows, -1).contiguous()
    draft_probs = torch.as_tensor(q_rows, dtype=dtype, device=device).expand(rows, -1, -1).contiguous()
    sampler_input = draft_probs if verifier.draft_scheme == "independent" else draft_probs[:, 0]
    sample = drafts or verifier.sample_drafts
    tokens = sample(sampler_input, k, g)
    return tokens, verifier.verify(target, draft_probs, tokens, g)


def _law_checks(law, draft_tokens: torch.Tensor, out: VerifierOutput) -> dict:
    """Every statistical check of one run, by name."""
    y = out.tokens.cpu().numpy()
    x = draft_tokens.cpu().numpy()
    n = len(y)
    checks = {
        "output": chi_square_test(np.bincount(y, minlength=V), law.output_distribution, ALPHA),
        "membership": binomial_z_test(int((x == y[:, None]).any(axis=1).sum()), n, float(law.acceptance), ALPHA),
    }
    if "draft_accepted" in law.details:
        accepted = int((out.accepted_index.cpu().numpy() >= 0).sum())
        checks["draft_accepted"] = binomial_z_test(accepted, n, float(law.details["draft_accepted"]), ALPHA)
    if law.draft_law is not None:
        # each row's index among the law's tuples (len(tuples) for a tuple outside it), by its
        # digits in base V, without a Python tuple per row
        tuples = law.draft_law.tuples  # [m, k]
        assert ((x >= 0) & (x < V)).all(), "draft ids past the vocabulary"
        digits = V ** np.arange(x.shape[1])
        index_of = np.full(V ** x.shape[1], len(tuples))
        index_of[tuples @ digits] = np.arange(len(tuples))
        index = index_of[x @ digits]
        probs = np.append(law.draft_law.probs.astype(np.float64), 0.0)
        checks["drafts"] = chi_square_test(np.bincount(index, minlength=len(probs)), probs, ALPHA)
    return checks


@pytest.mark.parametrize("rule, instance, k", CASES)
def test_sampler_matches_exact_law(rule, instance, k):
    p, q = INSTANCES[instance]
    law = _exact(rule, p, q, k)
    tokens, out = _run(get_verifier(rule), p, _draft_rows(rule, q, k), k, ROWS, _seed(rule, instance, k))
    assert out.tokens.dtype == torch.int64
    assert out.accepted_index.dtype == torch.int64
    assert ((out.tokens >= 0) & (out.tokens < V)).all(), "token ids past the vocabulary"
    assert (torch.as_tensor(p)[out.tokens] > 0).all(), "a token of target probability 0 was output"
    accepted = out.accepted_index >= 0
    chosen = tokens.gather(1, out.accepted_index.clamp(min=0).unsqueeze(1)).squeeze(1)
    assert (chosen[accepted] == out.tokens[accepted]).all(), "accepted_index does not point at the output token"
    for name, result in _law_checks(law, tokens, out).items():
        assert result.passed, f"{rule}/{instance}/k={k} {name}: {result.reason}"


@pytest.mark.parametrize("rule", ["rrs_wor", "optimal_wor"])
@pytest.mark.parametrize("instance", sorted(RRS_WOR_EXHAUSTED))
def test_without_replacement_exhausted_support_matches_exact_law(rule, instance):
    """Drafts past the support of q are the lowest-index q = 0 tokens, verified against
    their point mass (rrs_wor) or selected by x (optimal_wor, the same set every time); the
    sampler follows otm's exact law (output == p)."""
    p, q, k = RRS_WOR_EXHAUSTED[instance]
    law = _exact(rule, p, q, k)
    assert np.allclose(law.output_distribution.astype(float), p, atol=1e-12)
    tokens, out = _run(get_verifier(rule), p, np.tile(q, (k, 1)), k, ROWS, _seed("exhausted", instance))
    assert (torch.as_tensor(p)[out.tokens] > 0).all()
    for name, result in _law_checks(law, tokens, out).items():
        assert result.passed, f"{rule}/{instance} {name}: {result.reason}"


#: The float32 instances: ``(p, q)``, which of the rule's ``k`` (first or last) and the seed tag.
FLOAT32_CASES = {"generic": (INSTANCES["generic"], 0, "f32"), "dominant": (FLOAT32_DOMINANT, -1, "f32 dominant")}


@pytest.mark.parametrize("case", sorted(FLOAT32_CASES))
@pytest.mark.parametrize("rule", list(VERIFIERS))
def test_float32_inputs_follow_the_law(rule, case):
    """Every verifier on float32 rows: the generic instance, and :data:`FLOAT32_DOMINANT`, where
    ``1 / q(rest)`` overflowed float32 in the without-replacement, SpecHub and greedy verifiers,
    whose residuals then drew token ids past the vocabulary."""
    (p, q), which, tag = FLOAT32_CASES[case]
    k = DRAFT_COUNTS[rule][which]
    law = _exact(rule, p, q, k)
    tokens, out = _run(get_verifier(rule), p, _draft_rows(rule, q, k), k, ROWS, _seed(rule, tag), torch.float32)
    assert ((out.tokens >= 0) & (out.tokens < V)).all(), f"{rule}: token ids past the vocabulary"
    for name, result in _law_checks(law, tokens, out).items():
        assert result.passed, f"{rule} float32 {case} {name}: {result.reason}"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("rule", list(VERIFIERS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cuda_follows_the_law(rule, dtype):
    k = DRAFT_COUNTS[rule][-1]
    p, q = INSTANCES["generic"]
    law = _exact(rule, p, q, k)
    tokens, out = _run(get_verifier(rule), p, _draft_rows(rule, q, k), k, ROWS, _seed(rule, "cuda"), dtype, "cuda")
    assert out.tokens.device.type == "cuda"
    assert tokens.device.type == "cuda"
    for name, result in _law_checks(law, tokens, out).items():
        assert result.passed, f"{rule} cuda {dtype} {name}: {result.reason}"


def test_is_truncated_with_a_truncated_alphabet_follows_the_law():
    from decoding.verifiers import importance_sampling_truncated

    p, q = INSTANCES["generic"]
    for k, s, alphabet_size in [(2, 2, 4), (3, 3, 3), (1, 5, 2)]:
        law = rule_law("importance_sampling_truncated", p, q, k, s=s, alphabet_size=alphabet_size)
        g = torch.Generator().manual_seed(_seed("alphabet", k))
        target = torch.as_tensor(p).expand(ROWS, -1).contiguous()
        drafts = importance_sampling_truncated.sample_drafts(torch.as_tensor(q).expand(ROWS, -1), k, g)
        qs = torch.as_tensor(q).expand(ROWS, k, -1)
        out = importance_sampling_truncated.verify(target, qs, drafts, g, s=s, alphabet_size=alphabet_size)
        for name, result in _law_checks(law, drafts, out).items():
            assert result.passed, f"importance_sampling_truncated k={k} s={s} alphabet={alphabet_size} {name}: {result.reason}"


# ---------------------------------------------------------------- the checks can fail

#: An instance where the broken samplers below are far from the law.
BROKEN_P = np.array([0.05, 0.05, 0.1, 0.2, 0.3, 0.3])
BROKEN_Q = np.array([0.4, 0.3, 0.15, 0.1, 0.05, 0.0])


def _failed(checks: dict) -> list[str]:
    return [name for name, result in checks.items() if not result.passed]


def test_the_correct_samplers_pass_on_the_broken_instance():
    for rule, k in [("rrs", 3), ("kseq", 3), ("spechub", 2)]:
        law = rule_law(rule, BROKEN_P, BROKEN_Q, k)
        tokens, out = _run(get_verifier(rule), BROKEN_P, np.tile(BROKEN_Q, (k, 1)), k, ROWS, _seed("ok", rule))
        assert not _failed(_law_checks(law, tokens, out)), rule


def test_residual_without_renormalisation_fails(monkeypatch):
    monkeypatch.setattr(rrs, "normalise", lambda weights: weights)
    law = rule_law("rrs", BROKEN_P, BROKEN_Q, 3)
    tokens, out = _run(rrs, BROKEN_P, np.tile(BROKEN_Q, (3, 1)), 3, ROWS, _seed("broken", "rrs"))
    assert "output" in _failed(_law_checks(law, tokens, out))


def test_kseq_with_a_factor_below_g_star_fails():
    k = 3
    g_star = float(rule_law("kseq", BROKEN_P, BROKEN_Q, k).details["g_star"])
    assert g_star > 1.2
    law = rule_law("kseq", BROKEN_P, BROKEN_Q, k)
    factor = torch.tensor(1.0 + 0.5 * (g_star - 1.0), dtype=torch.float64)

    class BelowGStar:
        draft_scheme = "iid"
        sample_drafts = staticmethod(kseq.sample_drafts)

        @staticmethod
        def verify(target, draft_probs, tokens, g):
            return kseq.verify_with_factor(target, draft_probs, tokens, factor, g)

    tokens, out = _run(BelowGStar, BROKEN_P, np.tile(BROKEN_Q, (k, 1)), k, ROWS, _seed("broken", "kseq"))
    assert "output" in _failed(_law_checks(law, tokens, out))


def test_rrs_wor_accepting_fixed_drafts_surely_fails(monkeypatch):
    """Without the point-mass law, a draft past the support of q has q_i(x) = 0 and the
    test ``u * 0 < p_res(x)`` accepts it surely whenever p_res(x) > 0: not lossless."""
    p, q, k = RRS_WOR_EXHAUSTED["support_two"]
    law = rule_law("rrs_wor", p, q, k)
    monkeypatch.setattr(rrs_wor, "with_fallback", lambda weights, fallback: weights)
    tokens, out = _run(rrs_wor, p, np.tile(q, (k, 1)), k, ROWS, _seed("broken", "rrs_wor"))
    assert "output" in _failed(_law_checks(law, tokens, out))


def test_spechub_without_the_hub_law_fails():
    law = rule_law("spechub", BROKEN_P, BROKEN_Q, 2)
    tokens, out = _run(spechub, BROKEN_P, np.tile(BROKEN_Q, (2, 1)), 2, ROWS, _seed("broken", "spechub"),
                       drafts=rrs.sample_drafts)
    failed = _failed(_law_checks(law, tokens, out))
    assert "output" in failed
    assert "drafts" in failed


# ---------------------------------------------------------------- degenerate inputs

@pytest.mark.parametrize("rule", list(VERIFIERS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_degenerate_rows_in_one_batch_give_valid_tokens(rule, dtype):
    """Every degenerate instance in one batch: no NaN-driven garbage, never a token of
    target probability 0, accepted_index consistent."""
    k = DRAFT_COUNTS[rule][0]
    names = list(INSTANCES)
    reps = 200
    p = torch.as_tensor(np.repeat([INSTANCES[n][0] for n in names], reps, axis=0), dtype=dtype)
    q_rows = np.repeat([_draft_rows(rule, INSTANCES[n][1], k) for n in names], reps, axis=0)
    qs = torch.as_tensor(q_rows, dtype=dtype)
    verifier = get_verifier(rule)
    g = torch.Generator().manual_seed(_seed("degenerate", rule))
    drafts = verifier.sample_drafts(qs if verifier.draft_scheme == "independent" else qs[:, 0], k, g)
    assert not torch.isnan(p).any()
    out = verifier.verify(p, qs, drafts, g)
    assert ((out.tokens >= 0) & (out.tokens < V)).all()
    assert (p.gather(1, out.tokens.unsqueeze(1)) > 0).all()
    assert ((out.accepted_index >= -1) & (out.accepted_index < k)).all()


def test_without_replacement_completes_an_exhausted_support():
    """Rows with fewer than k positive entries get the lowest-index q = 0 tokens after
    their support (otm.draft_laws.without_replacement_law); k > V is a typed error."""
    q = torch.tensor([[0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.1, 0.2, 0.3, 0.4]], dtype=torch.float64)
    drafts = get_verifier("rrs_wor").sample_drafts(q, 4, torch.Generator().manual_seed(0))
    assert sorted(drafts[0, :2].tolist()) == [0, 1]
    assert drafts[0, 2:].tolist() == [2, 3]
    assert drafts[1].tolist() == [2, 0, 1, 3]
    assert sorted(drafts[2].tolist()) == [0, 1, 2, 3]
    with pytest.raises(InvalidDraftCountError, match="vocabulary of 4"):
        get_verifier("rrs_wor").sample_drafts(q, 5, torch.Generator().manual_seed(0))


def test_denormal_draft_probabilities_with_unscaled_clocks_fail(monkeypatch):
    """The ``denormal_q`` instance at ``k = 4``: the fourth draft is the token of ``q = 1e-310``
    (beside one of ``5e-324``) all but surely. With the clocks unscaled (``E / q``, as before
    :data:`decoding.verifiers.base.RING_SCALE`) both rings overflow to a tie, the lower index
    wins, and the drafts fail their law."""
    from decoding.verifiers import base

    p, q = INSTANCES["denormal_q"]
    law = _exact("optimal_wor", p, q, 4)
    monkeypatch.setattr(base, "RING_SCALE", 1.0)
    tokens, out = _run(get_verifier("optimal_wor"), p, _draft_rows("optimal_wor", q, 4), 4, 2_000, 0)
    assert not _law_checks(law, tokens, out)["drafts"].passed
