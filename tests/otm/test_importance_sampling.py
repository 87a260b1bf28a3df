"""Rules 'importance_sampling', 'importance_sampling_wor' and 'importance_sampling_truncated' (Khisti et al. 2025, Thm 1, 4,
§4, Remark 3): exact laws are lossless, the LP-weighted ones attain the OTM optimum of their draft law, and the truncation
keeps its penalty bound."""
from fractions import Fraction as F

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otm.draft_laws import iid_law, without_replacement_law
from otm.errors import InvalidDraftCountError, ShapeMismatchError
from otm.distributions import as_exact_distribution
from otm.formulations.canonical_lp import canonical_two_step_law
from otm.formulations.max_flow import solve_max_flow
from otm.formulations.prefix_scan import prefix_scan
from otm.rules import importance_sampling, importance_sampling_truncated
from otm.rules.base import RuleLaw
from otm.tolerances import AGREEMENT_TOLERANCE


@st.composite
def pairs(draw, max_vocab=6):
    V = draw(st.integers(1, max_vocab))

    def vector():
        w = np.array(draw(st.lists(st.integers(0, 5), min_size=V, max_size=V)), dtype=float)
        if w.sum() == 0:
            w[draw(st.integers(0, V - 1))] = 1
        return w / w.sum()

    return vector(), vector(), draw(st.integers(1, 3))


def optimum(p, q, k):
    return float(solve_max_flow(p, iid_law(q, k)).acceptance)


@settings(max_examples=30)
@given(pairs())
def test_is_optimal_reaches_the_optimum_and_outputs_p(instance):
    p, q, k = instance
    law = importance_sampling.exact_law(p, q, k)
    assert isinstance(law, RuleLaw)
    assert abs(law.acceptance - optimum(p, q, k)) <= AGREEMENT_TOLERANCE
    assert np.abs(law.output_distribution - p).max() <= AGREEMENT_TOLERANCE
    assert law.draft_law.name == "iid"
    assert law.draft_law.k == k


def test_is_optimal_exact():
    p = as_exact_distribution(["1/5", "3/10", "1/2"])
    q = as_exact_distribution(["1/2", "3/10", "1/5"])
    law = importance_sampling.exact_law(p, q, 2, backend="exact")
    assert law.acceptance == F(43, 50)  # Khisti Thm 3: min_S p(S) + 1 - q(S)^2
    assert list(law.output_distribution) == list(p)


@settings(max_examples=30)
@given(pairs())
def test_wor_rule_reaches_the_without_replacement_optimum_and_outputs_p(instance):
    """Khisti et al. 2025, Thm 4: the LP weights over the without-replacement tuples attain
    alpha*(p, Q_wor), the max flow of that law and the prefix scan without replacement."""
    p, q, k = instance
    k = min(k, len(q))  # an exhausted support (k above the tokens with q > 0) included
    law = importance_sampling.exact_law_without_replacement(p, q, k)
    flow = float(solve_max_flow(p, without_replacement_law(q, k)).acceptance)
    assert abs(law.acceptance - flow) <= AGREEMENT_TOLERANCE
    if k <= np.count_nonzero(q):  # the prefix scan refuses an exhausted support
        assert abs(law.acceptance - prefix_scan(p, q, k, "without_replacement").value) <= AGREEMENT_TOLERANCE
    assert np.abs(law.output_distribution - p).max() <= AGREEMENT_TOLERANCE
    assert law.draft_law.name == "without_replacement"


def test_wor_rule_exact_and_above_the_iid_optimum():
    """In exact rationals: output == p, acceptance == the prefix scan without replacement,
    strictly above the i.i.d. optimum (so it is not the i.i.d. rule on these drafts)."""
    p = as_exact_distribution(["1/2", "1/3", "1/6"])
    q = as_exact_distribution(["1/10", "3/5", "3/10"])
    law = importance_sampling.exact_law_without_replacement(p, q, 2, backend="exact")
    assert list(law.output_distribution) == list(p)
    assert law.acceptance == prefix_scan(p, q, 2, "without_replacement").value
    assert law.acceptance > prefix_scan(p, q, 2).value


def test_wor_optimality_check_catches_a_worse_selection():
    """The weights matter: on the same draft law, selecting the first draft (law q) accepts
    it with sum min(p, q), and its membership acceptance falls below the optimum, which the
    check tells apart from the LP weights."""
    p = as_exact_distribution(["1/2", "1/3", "1/6"])
    q = as_exact_distribution(["1/10", "3/5", "3/10"])
    law = without_replacement_law(q, 2)
    first_draft = np.zeros((len(law.tuples), 2), dtype=object)
    first_draft[:, 0], first_draft[:, 1] = F(1), F(0)
    worse = canonical_two_step_law(p, law, first_draft)
    assert list(worse.output_distribution) == list(p)  # still lossless
    assert worse.selection_acceptance == sum(min(a, b) for a, b in zip(p, q))
    assert worse.acceptance < prefix_scan(p, q, 2, "without_replacement").value


def test_wor_rule_refuses_more_drafts_than_tokens():
    with pytest.raises(InvalidDraftCountError, match="k=3 distinct drafts without replacement from a vocabulary of 2"):
        importance_sampling.exact_law_without_replacement([0.5, 0.5], [0.5, 0.5], 3)


@settings(max_examples=30)
@given(pairs(), st.integers(0, 6), st.one_of(st.none(), st.integers(1, 6)))
def test_is_truncated_is_lossless_and_below_the_optimum(instance, s, alphabet_size):
    p, q, k = instance
    law = importance_sampling_truncated.exact_law(p, q, k, s=s, alphabet_size=alphabet_size)
    assert np.abs(law.output_distribution - p).max() <= AGREEMENT_TOLERANCE
    assert law.acceptance <= optimum(p, q, k) + AGREEMENT_TOLERANCE
    assert law.details["selection_acceptance"] <= law.acceptance + AGREEMENT_TOLERANCE


@settings(max_examples=30)
@given(pairs())
def test_full_truncation_parameter_is_the_pair_optimum(instance):
    """s >= V, no alphabet truncation, k = 2: the truncated LP is the full pair LP."""
    p, q, _ = instance
    law = importance_sampling_truncated.exact_law(p, q, 2, s=len(p), alphabet_size=None)
    assert abs(law.acceptance - optimum(p, q, 2)) <= AGREEMENT_TOLERANCE


@settings(max_examples=30)
@given(pairs(), st.integers(0, 6))
def test_truncation_penalty_bound_holds(instance, s):
    """alpha*(k=2) - (truncated selection acceptance) <= penalty_bound (our eq. 12)."""
    p, q, _ = instance
    stage = importance_sampling_truncated.exact_law(p, q, 2, s=s, alphabet_size=None).details["stages"][0]
    assert optimum(p, q, 2) - stage["selection_acceptance"] <= stage["penalty_bound"] + AGREEMENT_TOLERANCE


def test_penalty_bound_check_can_fail():
    """The check above rejects a wrong bound: sum over Omega_2 of (p - q)^+ is too small."""
    p, q = np.array([0.39, 0.09, 0.1, 0.42]), np.array([0.5, 0.09, 0.06, 0.35])
    stage = importance_sampling_truncated.exact_law(p, q, 2, s=1, alphabet_size=None).details["stages"][0]
    gap = optimum(p, q, 2) - stage["selection_acceptance"]
    assert gap <= stage["penalty_bound"] + AGREEMENT_TOLERANCE  # ours holds (tight here)
    omega_2 = importance_sampling_truncated.truncation_order(p, q, q) >= 1
    wrong_bound = np.maximum(p - q, 0)[omega_2].sum()
    assert gap > wrong_bound + AGREEMENT_TOLERANCE


def _stages_on_the_whole_vocabulary(p, q, k, s):
    """The plain reference: every pair stage over all ``V`` tokens (a ``[V, V]`` rule)."""
    stages, previous = [], q
    for _ in range(k - 1):
        stages.append(importance_sampling_truncated.pair_stage(p, previous, q, s))
        previous = stages[-1]["law"]
    return stages


def _assert_same_stages(compact, whole):
    for mine, full in zip(compact, whole, strict=True):
        tokens = mine["tokens"]
        assert np.array_equal(mine["select_first"], full["select_first"][np.ix_(tokens, tokens)])
        np.testing.assert_allclose(mine["law"], full["law"][tokens], rtol=0, atol=AGREEMENT_TOLERANCE)
        assert np.all(np.delete(full["law"], tokens) == 0)
        for key in ("selection_acceptance", "penalty_bound"):
            assert abs(mine[key] - full[key]) <= AGREEMENT_TOLERANCE


@settings(max_examples=40)
@given(pairs(max_vocab=7), st.integers(0, 7))
def test_stages_on_the_draft_support_are_the_whole_vocabulary_stages(instance, s):
    """The stages run on the support of q (what keeps the rule within memory at V = 151,936):
    the same rule on every pair of positive probability, the same laws and bounds."""
    p, q, k = instance
    compact = importance_sampling_truncated.successive_stages(p, q, max(k, 2), s)
    _assert_same_stages(compact, _stages_on_the_whole_vocabulary(p, q, max(k, 2), s))


def test_the_stage_comparison_catches_free_tokens_counted_on_the_support_alone():
    """Deliberately broken: the first s tokens of the support made free, where a token of
    q = 0 and large p - q holds a free place of the whole vocabulary's order."""
    p, q = np.array([0.5, 0.2, 0.2, 0.1]), np.array([0.0, 0.4, 0.3, 0.3])
    tokens = np.flatnonzero(q > 0)
    broken = [{**importance_sampling_truncated.pair_stage(p[tokens], q[tokens], q[tokens], 2), "tokens": tokens}]
    whole = _stages_on_the_whole_vocabulary(p, q, 2, 2)
    _assert_same_stages(importance_sampling_truncated.successive_stages(p, q, 2, 2), whole)
    with pytest.raises(AssertionError):
        _assert_same_stages(broken, whole)


def test_single_draft_truncated_rule_is_speculative_sampling():
    p, q = np.array([0.2, 0.3, 0.5]), np.array([0.5, 0.3, 0.2])
    law = importance_sampling_truncated.exact_law(p, q, 1, alphabet_size=None)
    assert abs(law.acceptance - np.minimum(p, q).sum()) <= AGREEMENT_TOLERANCE


def test_truncated_alphabet_post_processing_keeps_p():
    p, q = np.array([0.4, 0.3, 0.2, 0.1]), np.array([0.1, 0.2, 0.3, 0.4])
    law = importance_sampling_truncated.exact_law(p, q, 3, s=2, alphabet_size=2)
    assert law.details["alphabet"].tolist() == [True, True, False, False]
    assert np.abs(law.output_distribution - p).max() <= AGREEMENT_TOLERANCE
    full = importance_sampling_truncated.exact_law(p, q, 3, s=4, alphabet_size=None)
    assert law.acceptance < full.acceptance


def test_successive_stages_chain_the_selection_laws():
    """Remark 3: stage m's law is the law of Y_m, the marginal of the selection rule."""
    p, q = np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.4, 0.3, 0.2, 0.1])
    law = importance_sampling_truncated.exact_law(p, q, 3, s=2, alphabet_size=None)
    stages = law.details["stages"]
    assert len(stages) == 2
    assert np.abs(stages[-1]["law"] - law.details["selection_law"][stages[-1]["tokens"]]).max() <= AGREEMENT_TOLERANCE
    assert abs(stages[-1]["law"].sum() - 1) <= AGREEMENT_TOLERANCE


@pytest.mark.parametrize("rule", [importance_sampling, importance_sampling_truncated])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_p_equal_q_and_degenerate_inputs(rule, k):
    for p, q in [([0.25, 0.75], [0.25, 0.75]), ([1.0], [1.0]), ([0.0, 1.0], [1.0, 0.0]), ([0.5, 0.5], [1.0, 0.0])]:
        law = rule.exact_law(p, q, k)
        assert np.isfinite(law.output_distribution).all()
        assert np.abs(law.output_distribution - np.asarray(p)).max() <= AGREEMENT_TOLERANCE
        if p == q:
            assert abs(law.acceptance - 1.0) <= AGREEMENT_TOLERANCE


def test_bad_input_is_a_typed_error():
    with pytest.raises(ShapeMismatchError):
        importance_sampling.exact_law([0.5, 0.5], [1.0], 2)
    with pytest.raises(InvalidDraftCountError):
        importance_sampling.exact_law([0.5, 0.5], [0.5, 0.5], 0)
    with pytest.raises(InvalidDraftCountError):
        importance_sampling_truncated.exact_law([0.5, 0.5], [0.5, 0.5], 2, s=-1)
    with pytest.raises(InvalidDraftCountError):
        importance_sampling_truncated.exact_law([0.5, 0.5], [0.5, 0.5], 2, alphabet_size=0)
