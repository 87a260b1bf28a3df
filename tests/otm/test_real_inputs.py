"""Real inputs at real scale: families of what users actually pass (float32 / bfloat16 /
float16 softmax outputs at V up to 151,936, low and tiny temperatures, extreme logits,
masked vocabularies, huge k, bad parameters), each either answered correctly and fast or
refused with a typed error that names the argument. Every "accepted" family is checked
against an oracle, every "refused" family against the error type and message."""
from __future__ import annotations

import math
import time
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import otm
from otm.distributions import as_distribution, logits_to_probs
from otm.errors import InvalidDistributionError, InvalidDraftCountError, NotApplicableError, OTMError
from otm.tolerances import AGREEMENT_TOLERANCE, softmax_sum_tolerance, sum_tolerance

QWEN_VOCAB = 151_936
DTYPES = (torch.float32, torch.bfloat16, torch.float16)

#: A refusal must come before any real work: well under a second even on a busy machine.
REFUSAL_SECONDS = 1.0


def _logits(seed: int, vocab: int, scale: float) -> torch.Tensor:
    return torch.randn(vocab, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * scale


# ----------------------------------------------------------------------- low-precision softmax


@settings(max_examples=12)
@given(seed=st.integers(0, 10**6), vocab=st.sampled_from([2, 50, 1000, 32_000]), scale=st.sampled_from([0.1, 1.0, 5.0, 30.0]),
       dtype=st.sampled_from(DTYPES), temperature=st.sampled_from([0.1, 0.7, 1.0, 2.0]))
def test_low_precision_softmax_outputs_are_accepted_and_renormalised(seed, vocab, scale, dtype, temperature):
    z = _logits(seed, vocab, scale)
    p = torch.softmax((z / temperature).to(dtype), dim=-1)
    q = torch.softmax((0.8 * z / temperature).to(dtype), dim=-1)
    solution = otm.solve_optimum(p, q, 2)
    note = solution.details["inputs"]["p"]
    assert note["dtype"] == str(dtype).replace("torch.", "")
    assert abs(note["sum_error"]) <= note["tolerance"]
    reference = otm.optimal_acceptance(p.double().numpy() / p.double().sum().item(), q.double().numpy() / q.double().sum().item(), 2)
    assert abs(solution.value - reference) <= AGREEMENT_TOLERANCE


@pytest.mark.parametrize("dtype", DTYPES)
def test_llm_vocabulary_softmax_in_every_dtype(dtype):
    z = _logits(0, QWEN_VOCAB, 3.0)
    p, q = torch.softmax(z.to(dtype), dim=-1), torch.softmax((z + _logits(1, QWEN_VOCAB, 1.0)).to(dtype), dim=-1)
    assert 0 < otm.optimal_acceptance(p, q, 4) <= 1
    assert 0 < float(otm.rule_acceptance("rrs", p, q, 4)) <= 1


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rule", list(otm.RULES))
def test_every_rule_takes_a_softmax_tensor_in_every_dtype(rule, dtype):
    """A model's softmax as it comes (a torch tensor in its dtype) is a valid input of every
    rule's exact law, the same law as the float64 numbers it holds (importance sampling read a
    bfloat16 tensor through numpy, which has no bfloat16, and raised TypeError)."""
    spec = otm.rule_spec(rule)
    k = min(max(spec.ks[0], 2), spec.ks[1] or 2)
    z = _logits(7, 6, 2.0)
    p, q = torch.softmax(z.to(dtype), dim=-1), torch.softmax((0.5 * z).to(dtype), dim=-1)
    as_float64 = [t.double().numpy() / t.double().sum().item() for t in (p, q)]
    assert abs(otm.rule_acceptance(rule, p, q, k) - otm.rule_acceptance(rule, *as_float64, k)) <= AGREEMENT_TOLERANCE


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "float64"])
def test_genuinely_unnormalised_vectors_are_still_refused(dtype):
    vocab = 1000
    tolerance = sum_tolerance(dtype, vocab)
    p = np.full(vocab, (1 + 3 * tolerance) / vocab)
    with pytest.raises(InvalidDistributionError, match="sums to"):
        as_distribution(torch.tensor(p).to(getattr(torch, dtype)) if dtype != "float64" else p)


def test_the_tolerance_rule_grows_with_the_vocabulary_and_the_dtype():
    assert softmax_sum_tolerance("float32", QWEN_VOCAB) > softmax_sum_tolerance("float32", 1000)
    assert softmax_sum_tolerance("bfloat16", 1000) > softmax_sum_tolerance("float16", 1000) > softmax_sum_tolerance("float32", 1000)
    assert sum_tolerance("float64", 10) == 1e-6


@pytest.mark.parametrize("bad, message", [
    (np.array([0.5 + 0.1j, 0.5]), "complex"),
    (torch.tensor([0.5 + 0.1j, 0.5]), "complex"),
    (np.array(["0.5", "x"], dtype=object), "numeric"),
    (np.array([[0.5, 0.5]]), "1-D"),
    (np.array([]), "empty"),
    (np.array([0.5, np.nan]), "NaN"),
    (np.array([1.5, -0.5]), "negative"),
])
def test_malformed_vectors_are_typed_errors(bad, message):
    with pytest.raises(InvalidDistributionError, match=message):
        as_distribution(bad)


# ----------------------------------------------------------------------- logits and temperatures


@settings(max_examples=30)
@given(st.lists(st.floats(min_value=-1e308, max_value=1e308, allow_nan=False), min_size=1, max_size=40),
       st.sampled_from([1e-300, 1e-30, 1e-6, 0.05, 1.0, 1e6, 1e300]))
def test_finite_logits_at_any_positive_temperature_give_a_distribution(logits, temperature):
    probs = logits_to_probs(logits, temperature)
    assert np.isfinite(probs).all()
    assert abs(probs.sum() - 1) <= 1e-12
    assert probs[int(np.argmax(logits))] == probs.max()


def test_tiny_temperature_is_the_argmax_limit_not_nan():
    assert logits_to_probs([0.0, 2.0, 1.0], 1e-320).tolist() == [0.0, 1.0, 0.0]
    assert logits_to_probs([3.0, 3.0, 1.0], 1e-300).tolist() == [0.5, 0.5, 0.0]
    assert logits_to_probs([3.0, 3.0, 1.0], 0).tolist() == [1.0, 0.0, 0.0]  # T = 0: lowest index


@pytest.mark.parametrize("kwargs, message", [
    ({"temperature": float("nan")}, "temperature"), ({"temperature": -1.0}, "temperature"),
    ({"temperature": float("inf")}, "temperature"), ({"temperature": "1"}, "temperature"),
    ({"top_k": 0}, "top_k"), ({"top_k": 1.5}, "top_k"), ({"top_k": True}, "top_k"),
    ({"top_p": 1.5}, "top_p"), ({"top_p": 0.0}, "top_p"), ({"top_p": float("nan")}, "top_p"),
])
def test_bad_sampling_parameters_are_typed_errors(kwargs, message):
    with pytest.raises(InvalidDistributionError, match=message):
        logits_to_probs([1.0, 2.0, 3.0], **kwargs)


def test_top_p_masked_pairs_at_llm_scale():
    z = _logits(2, QWEN_VOCAB, 3.0).numpy()
    p = logits_to_probs(z, 0.7, top_p=0.9)
    q = logits_to_probs(z + _logits(3, QWEN_VOCAB, 1.0).numpy(), 0.7, top_p=0.9)
    assert (q == 0).sum() > QWEN_VOCAB // 2
    for draft_scheme in ("iid", "hub", "greedy"):
        assert 0 < otm.optimal_acceptance(p, q, 2, draft_scheme=draft_scheme) <= 1


# ----------------------------------------------------------------------- refusals in milliseconds


def _refused_fast(call, error, message):
    start = time.perf_counter()
    with pytest.raises(error, match=message):
        call()
    assert time.perf_counter() - start < REFUSAL_SECONDS


@pytest.mark.parametrize("rule, k", [("importance_sampling_truncated", 2), ("importance_sampling", 2), ("rrs_wor", 3)])
def test_rules_without_a_closed_form_refuse_at_llm_scale(rule, k):
    p = np.full(QWEN_VOCAB, 1 / QWEN_VOCAB)
    _refused_fast(lambda: otm.rule_acceptance(rule, p, p, k), NotApplicableError, "smaller vocabulary")


@pytest.mark.parametrize("vocab", [12_000, 20_000])
def test_truncated_importance_sampling_refuses_mid_sized_vocabularies_before_allocating(vocab):
    p = np.full(vocab, 1 / vocab)
    _refused_fast(lambda: otm.rule_acceptance("importance_sampling_truncated", p, p, 2), NotApplicableError, "MAX_RULE_SECONDS")


def _draft_on_few_tokens(vocab: int, tokens: int):
    """A full target and a draft on ``tokens`` tokens (a top-k draft), and the same pair with
    every token of ``q = 0`` merged into one."""
    p = logits_to_probs(_logits(5, vocab, 2.0).numpy(), 1.0)
    drafted = np.argsort(-p, kind="stable")[:tokens]
    q = np.zeros(vocab)
    q[drafted] = np.linspace(1.0, 2.0, tokens) / np.linspace(1.0, 2.0, tokens).sum()
    return p, q, np.append(p[drafted], 1 - p[drafted].sum()), np.append(q[drafted], 0.0)


@pytest.mark.parametrize("rule", ["rrs", "kseq", "optimal"])
def test_auto_takes_the_closed_form_where_the_coupling_would_be_large(rule):
    """A draft on 5 of 151,936 tokens at k = 5 has 3,125 draft tuples, few enough to
    enumerate, but their coupling has 475 million entries (3.8 GB, tens of seconds): ``auto``
    takes the closed form, which agrees with the enumeration of the merged instance (these
    rules' acceptance does not change when the tokens of q = 0 are merged)."""
    p, q, p_merged, q_merged = _draft_on_few_tokens(QWEN_VOCAB, 5)
    law = otm.rule_law(rule, p, q, 5)
    assert law.details["method"] == "closed_form"
    merged = otm.rule_law(rule, p_merged, q_merged, 5, method="enumeration")
    assert abs(law.acceptance - merged.acceptance) <= AGREEMENT_TOLERANCE


@pytest.mark.parametrize("rule, k, params", [("optimal_latent", 1, {}), ("rrs", 5, {"method": "enumeration"})])
def test_an_enumeration_past_memory_is_refused_before_allocating(rule, k, params):
    """The coupling of 151,936 tuples (or of 3,125 asked for by name) over 151,936 tokens
    is refused with a typed error, not numpy's MemoryError."""
    p, q, _, _ = _draft_on_few_tokens(QWEN_VOCAB, QWEN_VOCAB if k == 1 else 5)
    with pytest.raises(NotApplicableError, match="MAX_COUPLING_ENTRIES"):
        otm.rule_law(rule, p, q, k, **params)


@pytest.mark.parametrize("method", ["full_lp", "canonical_lp", "simplified_lp", "max_flow"])
def test_every_formulation_on_a_draft_of_few_tokens_at_the_real_vocabulary(method):
    """q on 3 of 151,936 tokens, p on all of them: every formulation agrees with the closed
    form and certifies it. The full LP shares one column among the 151,933 undrafted tokens
    (it ran for minutes before), the canonical LP drops their t_y (their rows' tolerance
    added up to a value 4.8e-6 above the min cut); the full plan still has p as its columns."""
    p, q, _, _ = _draft_on_few_tokens(QWEN_VOCAB, 3)
    solution = otm.solve_optimum(p, q, 2, method=method)
    assert abs(solution.value - otm.optimal_acceptance(p, q, 2)) <= AGREEMENT_TOLERANCE
    assert solution.verified_gap <= AGREEMENT_TOLERANCE
    if method == "full_lp":
        plan = solution.details["coupling"]
        np.testing.assert_allclose(plan.sum(axis=0), p, rtol=0, atol=AGREEMENT_TOLERANCE)
        np.testing.assert_allclose(plan.sum(axis=1), otm.draft_law("iid", q, 2).probs, rtol=0, atol=AGREEMENT_TOLERANCE)


def test_the_full_lp_whose_plan_passes_2_gib_is_refused_before_it_is_built():
    """p and q on 5 disjoint tokens of 151,936 at k = 5: 3,125 tuples and one LP column, but the
    returned plan [3125, 151936] is 3.8 GB (it took 13.5 s to fill)."""
    p, q, _, _ = _draft_on_few_tokens(QWEN_VOCAB, 5)
    target = np.zeros(QWEN_VOCAB)
    target[np.argsort(p, kind="stable")[:5]] = 0.2
    with pytest.raises(NotApplicableError, match="MAX_COUPLING_ENTRIES"):
        otm.solve_optimum(target, q, 5, method="full_lp")


def test_the_full_lp_past_its_size_is_refused_before_it_is_built():
    """90,000 tuples over 300 tokens (few enough for the max flow): 27 million variables,
    refused with a typed error."""
    p = np.full(300, 1 / 300)
    with pytest.raises(NotApplicableError, match="MAX_FULL_LP_VARIABLES"):
        otm.solve_optimum(p, p, 2, method="full_lp")


@pytest.mark.parametrize("method", ["max_flow", "simplified_lp", "canonical_lp", "full_lp"])
def test_a_flow_over_hundreds_of_thousands_of_tuples_is_refused_before_it_starts(method):
    """The hub law of a full row has 303,870 tuples: the max flow (and the LPs it certifies)
    would run for hours; each is refused with a typed error that names the closed form."""
    p = logits_to_probs(_logits(6, QWEN_VOCAB, 2.0).numpy(), 1.0)
    with pytest.raises(NotApplicableError, match="MAX_FLOW_TUPLES.*closed_form"):
        otm.solve_optimum(p, p, 2, draft_scheme="hub", method=method)
    assert otm.solve_optimum(p, p, 2, draft_scheme="hub").value == pytest.approx(1.0, abs=AGREEMENT_TOLERANCE)


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_rule_without_a_closed_form_refuses_a_whole_softmax_tensor_in_every_dtype(dtype):
    """The cost check read q through numpy, which has no bfloat16: a bfloat16 row skipped it,
    and the pair water levels nested over 151,936 tokens for hours instead of refusing."""
    z = _logits(8, QWEN_VOCAB, 3.0)
    p, q = torch.softmax(z.to(dtype), dim=-1), torch.softmax((z + _logits(9, QWEN_VOCAB, 1.0)).to(dtype), dim=-1)
    assert otm.rules.draft_support(q) == int((q > 0).sum())
    with pytest.raises(NotApplicableError, match="MAX_RULE_SECONDS"):
        otm.rule_acceptance("optimal_pair_wor", p, q, 2)


def test_huge_k_is_answered_or_refused_quickly_never_hangs():
    rng = np.random.default_rng(0)
    p, q = rng.dirichlet(np.ones(50)), rng.dirichlet(np.ones(50))
    _refused_fast(lambda: otm.rule_acceptance("rrs", np.tile(p, 3000) / 3000, np.tile(q, 3000) / 3000, 10**6),
                  NotApplicableError, "MAX_CLOSED_FORM_WORK")
    _refused_fast(lambda: otm.rule_acceptance("greedy", p, q, 10**9), InvalidDraftCountError, "greedy")
    _refused_fast(lambda: otm.optimal_acceptance(p, q, 10**6, draft_scheme="without_replacement"), InvalidDraftCountError, "k=")
    start = time.perf_counter()
    assert otm.rule_acceptance("kseq", p, q, 10**6) <= 1
    assert otm.optimal_acceptance(p, q, 10**6) <= 1
    assert time.perf_counter() - start < 5 * REFUSAL_SECONDS
    _refused_fast(lambda: otm.rule_acceptance("importance_sampling", p, q, 10**5), NotApplicableError, "MAX_RULE_SECONDS")


@pytest.mark.parametrize("g", [float("nan"), float("inf"), "2"])
def test_kseq_division_factor_must_be_a_finite_number(g):
    with pytest.raises(InvalidDistributionError, match="division factor g"):
        otm.rule_acceptance("kseq", [0.5, 0.5], [0.9, 0.1], 2, g=g)


def test_kseq_division_factor_below_g_star_is_refused():
    with pytest.raises(NotApplicableError, match="g >= g"):
        otm.rule_acceptance("kseq", [0.5, 0.5], [0.9, 0.1], 2, g=0.5)


def test_every_error_is_an_otm_error():
    from solvers.errors import BackendUnavailableError, InvalidProblemError, SolverError, UnknownBackendError

    for error in (SolverError, UnknownBackendError, InvalidProblemError, BackendUnavailableError, InvalidDistributionError):
        assert issubclass(error, OTMError)
    assert issubclass(UnknownBackendError, ValueError)


# ----------------------------------------------------------------------- certified LP values


def test_lp_value_on_probabilities_spanning_thirty_orders_carries_an_honest_gap():
    """HiGHS works to ~1e-9 per constraint: on probabilities spanning 30 orders of magnitude
    its value can be off by more than its own duality gap says. The verified gap is the
    distance between a feasible plan and a cut, so the exact optimum must lie within it."""
    V = 7
    p = np.array([10.0**-e for e in (0, 2, 5, 9, 14, 20, 30)])
    q = np.array([10.0**-e for e in (30, 1, 0, 4, 12, 3, 8)])
    p, q = p / p.sum(), q / q.sum()
    exact = otm.optimal_acceptance(np.array([Fraction(v) for v in p], dtype=object) / sum(Fraction(v) for v in p),
                                   np.array([Fraction(v) for v in q], dtype=object) / sum(Fraction(v) for v in q), 3)
    for method in ("full_lp", "simplified_lp", "canonical_lp"):
        solution = otm.solve_optimum(p, q, 3, method=method)
        assert 0 <= solution.verified_gap
        assert solution.cut_value >= float(exact) - 1e-15
        assert abs(solution.value - float(exact)) <= solution.verified_gap + 1e-15, (method, solution.value, float(exact))
    assert V == p.size


def test_the_gap_check_fails_on_a_tampered_plan():
    """A plan scaled up by 1% is infeasible; made feasible again it cannot certify more than the optimum."""
    from otm.formulations._lp import feasible_accepted_value

    p, q = np.array([0.2, 0.3, 0.5]), np.array([0.5, 0.3, 0.2])
    law = otm.draft_law("iid", q, 2)
    solution = otm.solve_optimum(p, q, 2, method="simplified_lp")
    inflated = {key: 1.01 * mass for key, mass in solution.plan.items()}
    assert sum(inflated.values()) > solution.cut_value + 1e-3  # the raw inflated value would claim too much
    assert feasible_accepted_value(p, law, inflated, exact=False) <= solution.cut_value + 1e-15
    assert math.isclose(feasible_accepted_value(p, law, solution.plan, exact=False), solution.value, abs_tol=1e-9)
