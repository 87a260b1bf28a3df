"""SpecTr (Sun et al. 2023) checks hold on the real core and fail on broken ingredients."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from otm.rules import rule_law
from proofs import spectr
from tests.proofs.proofs_support import law_for_wrong_target

N = 5


def rng():
    return np.random.default_rng(2)


def test_lemma1_monotone():
    assert spectr.check_lemma1_monotone(N, rng()).status == "holds"
    decreasing = lambda p, q, k: spectr.fast_optimum(p, q, 1) / k  # noqa: E731
    assert spectr.check_lemma1_monotone(N, rng(), optimum_fn=decreasing).status == "fails"


def test_lemma1_limit():
    assert spectr.check_lemma1_limit(N, rng()).status == "holds"
    assert spectr.check_lemma1_limit(N, rng(), limit_fn=lambda p, q: 1.0).status == "fails"


def test_lemma1_limit_values():
    assert spectr.lemma1_limit([0.5, 0.5], [1.0, 0.0]) == 0.5
    assert spectr.lemma1_rate([0.5, 0.5], [0.5, 0.5]) == 0.0


def test_thm1_bound():
    assert spectr.check_thm1(N, rng()).status == "holds"
    too_low = lambda p, q, k: spectr.thm1_bound(p, q, k) - 0.05  # noqa: E731
    assert spectr.check_thm1(N, rng(), bound_fn=too_low).status == "fails"


def test_thm2_valid():
    assert spectr.check_thm2_valid(N, rng()).status == "holds"
    assert spectr.check_thm2_valid(N, rng(), law_fn=law_for_wrong_target).status == "fails"


def test_thm2_approx():
    assert spectr.check_thm2_approx(N, rng()).status == "holds"

    def halved(rule, p, q, k, **params):
        law = rule_law(rule, p, q, k, **params)
        return SimpleNamespace(details={**law.details, "lower_bound": 0.55 * float(law.details["lower_bound"])})

    assert spectr.check_thm2_approx(N, rng(), law_fn=halved).status == "fails"


def test_lemma3():
    assert spectr.check_lemma3(N, rng()).status == "holds"

    def shifted_root(rule, p, q, k, **params):
        law = rule_law(rule, p, q, k, **params)
        return SimpleNamespace(details={**law.details, "g_star": float(law.details["g_star"]) + 0.5})

    assert spectr.check_lemma3(N, rng(), law_fn=shifted_root).status == "fails"


def test_app_b2_and_d1():
    assert spectr.check_appb2(2, rng()).status == "holds"
    one_draft = lambda p1, q1, k: min(p1, q1) + min(1 - p1, 1 - q1)  # noqa: E731
    assert spectr.check_appb2(2, rng(), bernoulli=one_draft).status == "fails"
    assert spectr.check_appd1().status == "holds"
    assert spectr.check_appd1(uniform=lambda r, k: 1 / r).status == "fails"


def test_thm3_sequences():
    assert spectr.check_thm3(10, rng()).status == "holds"

    def wrong_target_plan(p, q, k):
        return spectr.lp_plan(0.5 * p + 0.5 / p.size, q, k)

    assert spectr.check_thm3(10, rng(), plan_fns={"wrong": wrong_target_plan}).status == "fails"


def test_sequence_law_sums_to_one():
    target = spectr.ToyModel(2, np.random.default_rng(0))
    draft = spectr.ToyModel(2, np.random.default_rng(1))
    law = spectr.draft_selection_law(target, draft, 2, 2, spectr.kseq_plan)
    assert abs(sum(law.values()) - 1) < 1e-12
    assert all(len(s) == 3 for s in law)
