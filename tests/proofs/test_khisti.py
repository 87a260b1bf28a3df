"""Khisti et al. (2025) checks hold on the real core and fail on broken ingredients."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from otm.formulations.canonical_lp import solve_canonical_lp
from otm.rules import rule_law
from proofs import khisti
from tests.proofs.proofs_support import law_for_wrong_target, shifted_solver

N = 5


def rng():
    return np.random.default_rng(3)


def test_thm1_thm4():
    assert khisti.check_thm1(N, rng()).status == "holds"
    assert khisti.check_thm4(N, rng()).status == "holds"
    broken = shifted_solver(solve_canonical_lp, -0.01)
    assert khisti.check_thm1(N, rng(), canonical=broken).status == "fails"
    assert khisti.check_thm4(N, rng(), canonical=broken).status == "fails"


def test_two_step():
    assert khisti.check_two_step(N, rng()).status == "holds"
    assert khisti.check_two_step(N, rng(), law_fn=law_for_wrong_target).status == "fails"


def test_two_step_without_replacement_part_is_live():
    """The latent i.i.d. verifier on the same drafts without replacement is lossless but stops at
    the i.i.d. optimum: put in place of the LP weights, the check fails."""
    def latent_for_lp_weights(rule, p, q, k):
        return rule_law("optimal_latent" if rule == "importance_sampling_wor" else rule, p, q, k)

    assert khisti.check_two_step(N, rng(), law_fn=latent_for_lp_weights).status == "fails"


def test_thm2_and_conjecture():
    assert khisti.check_acceptance_one(2, N, rng()).status == "holds"
    assert khisti.check_acceptance_one(3, N, rng()).status == "holds"
    one_draft_condition = lambda p, q, k: khisti.power_margin(p, q, 1)  # noqa: E731
    assert khisti.check_acceptance_one(2, N, rng(), margin_fn=one_draft_condition).status == "fails"


def test_iff_slack():
    assert khisti.iff_slack(1.0, 0.1) == 0.0
    assert khisti.iff_slack(0.9, -0.1) == 0.0
    assert khisti.iff_slack(0.95, -0.1) < 0


def test_thm3():
    assert khisti.check_thm3(N, rng()).status == "holds"

    def single_draft_formula(p, q):
        return min(sum(p[m]) + 1 - sum(q[m]) for m in khisti.subsets(len(p)))

    assert khisti.check_thm3(N, rng(), closed_form=single_draft_formula).status == "fails"


def test_example1():
    assert khisti.check_example1(denominator=9).status == "holds"
    singletons_only = lambda p: sorted(p)[0] >= khisti.Fraction(1, 9)  # noqa: E731
    assert khisti.check_example1(denominator=9, condition=singletons_only).status == "fails"


def test_eq12():
    assert khisti.check_eq12(8, rng()).status == "holds"

    def no_penalty(rule, p, q, k, **params):
        law = rule_law(rule, p, q, k, **params)
        stages = [{**stage, "penalty_bound": 0.0} for stage in law.details["stages"]]
        return SimpleNamespace(details={**law.details, "stages": stages})

    assert khisti.check_eq12(8, rng(), law_fn=no_penalty).status == "fails"
