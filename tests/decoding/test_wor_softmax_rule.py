"""scripts/wor_softmax_rule.py: Lemma 16's softmax rules reach every law they aim at inside ``P``, the
fitted rule attains ``alpha*`` without replacement as closely as the law it aims at (the linear
program's tolerance), and it does not
when an ingredient is broken (no priority for ``U``, a non-optimal law to aim at, a wrong Hessian)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import wor_softmax_rule  # noqa: E402

from tests.decoding.corpus_support import table_rows  # noqa: E402

#: The fitted law against its target (L1): the fit's stopping rule, with room for the rounding of the
#: law's sums.
FIT_TOLERANCE = 1e-12

#: The law the rule is fitted to, against ``alpha*``: HiGHS's feasibility tolerance (1e-7 on the
#: choice probabilities, times the sets' masses, summed over a few tokens).
TARGET_TOLERANCE = 1e-8

#: The fitted rule's acceptance against its target's: the fit's residual, and rounding.
FIT_GAP = 1e-13

INSTANCES = list(wor_softmax_rule.instances(40, seed=3))


def _choices(p, q, k):
    rule = wor_softmax_rule.fitted_rule(p, q, k)
    U = set(range(len(p))) - rule["H"]
    return rule, wor_softmax_rule.side_choices(rule["sets"], U, whole=False)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, len(INSTANCES) - 1), st.integers(0, 2**32 - 1))
def test_a_softmax_law_is_reached_again_by_the_fit(which, seed):
    """Lemma 16 on points known to lie inside ``P``: the law of random weights, fitted from zero."""
    p, q, k = INSTANCES[which]
    sets = wor_softmax_rule.draft_sets(q, k)
    choices = wor_softmax_rule.side_choices(sets, set(range(len(p))), whole=False)
    theta = np.random.default_rng(seed).normal(scale=2.0, size=len(p))
    target, _ = wor_softmax_rule.softmax_law(theta, choices)
    fitted, _, residual = wor_softmax_rule.fit(choices, target, np.arange(len(p)))
    assert residual <= FIT_TOLERANCE
    assert np.abs(wor_softmax_rule.softmax_law(fitted, choices)[0] - target).sum() <= FIT_TOLERANCE


def test_the_hessian_is_the_derivative_of_the_law():
    """The Newton step's Jacobian against central differences of the law."""
    p, q, k = INSTANCES[0]
    choices = wor_softmax_rule.side_choices(wor_softmax_rule.draft_sets(q, k), set(range(len(p))), whole=False)
    theta = np.random.default_rng(0).normal(size=len(p))
    _, hessian = wor_softmax_rule.softmax_law(theta, choices)
    step = 1e-6
    for a in range(len(p)):
        up, down = theta.copy(), theta.copy()
        up[a] += step
        down[a] -= step
        column = (wor_softmax_rule.softmax_law(up, choices)[0] - wor_softmax_rule.softmax_law(down, choices)[0]) / (2 * step)
        assert np.allclose(column, hessian[:, a], atol=1e-8)


@pytest.mark.parametrize("which", range(len(INSTANCES)))
def test_the_fitted_rule_attains_the_optimum(which):
    p, q, k = INSTANCES[which]
    row = wor_softmax_rule.instance_row(p, q, k)
    assert row["residual"] <= FIT_TOLERANCE
    assert abs(row["target gap"]) <= TARGET_TOLERANCE
    assert abs(row["gap"] - row["target gap"]) <= FIT_GAP
    rule = wor_softmax_rule.fitted_rule(p, q, k)
    by_sides = np.zeros(len(p))
    for side, whole in ((set(range(len(p))) - rule["H"], False), (rule["H"], True)):
        choices = wor_softmax_rule.side_choices(rule["sets"], side, whole)
        if choices:
            by_sides += wor_softmax_rule.softmax_law(rule["theta"], choices)[0]
    # the law over the draft sets (a U member first) is the two sides' merged choices
    assert np.abs(wor_softmax_rule.selection_law(rule) - by_sides).sum() <= 1e-14


def test_without_the_priority_of_U_it_falls_short():
    gaps = [wor_softmax_rule.instance_row(p, q, k, priority=False)["gap"] for p, q, k in INSTANCES]
    assert max(gaps) > 1e-3


def test_aimed_at_a_law_that_is_not_optimal_it_falls_short():
    """The weights fitted to the uniform choice within each side (inside ``P``, not optimal)."""
    shortfalls = []
    for p, q, k in INSTANCES[:10]:
        rule = wor_softmax_rule.fitted_rule(p, q, k)
        for side, whole in ((set(range(len(p))) - rule["H"], False), (rule["H"], True)):
            choices = wor_softmax_rule.side_choices(rule["sets"], side, whole)
            if choices:
                uniform, _ = wor_softmax_rule.softmax_law(np.zeros(len(p)), choices)
                tokens = np.array(sorted(side))
                theta, _, _ = wor_softmax_rule.fit(choices, uniform, tokens)
                rule["theta"][tokens] = theta[tokens]
        shortfalls.append(rule["alpha"] - np.minimum(p, wor_softmax_rule.selection_law(rule)).sum())
    assert max(shortfalls) > 1e-3


def test_a_wrong_hessian_does_not_converge(monkeypatch):
    """Newton's steps with the outer products left out of the Hessian stop short of the target."""
    exact = wor_softmax_rule.softmax_law

    def without_outer(theta, choices):
        law, _ = exact(theta, choices)
        diagonal = np.zeros((len(theta), len(theta)))
        for members, mass in choices:
            weights = np.exp(theta[members] - theta[members].max())
            diagonal[members, members] += mass * weights / weights.sum()
        return law, diagonal

    monkeypatch.setattr(wor_softmax_rule, "softmax_law", without_outer)
    residuals = [wor_softmax_rule.instance_row(p, q, k)["residual"] for p, q, k in INSTANCES[:10]]
    assert max(residuals) > FIT_TOLERANCE


def test_a_cut_that_is_not_optimal_is_refused():
    """Below ``p`` on every token with ``p`` scaled to half: no law of the choices sums to their mass."""
    p, q, k = INSTANCES[0]
    choices = wor_softmax_rule.side_choices(wor_softmax_rule.draft_sets(q, k), set(range(len(p))), whole=False)
    with pytest.raises(ValueError, match="no law of these choices"):
        wor_softmax_rule.deepest_optimal_law(choices, p / 2, below=True)


def test_the_table(capsys):
    assert wor_softmax_rule.main(["--instances", "20"]) == 0
    (row,) = table_rows(capsys.readouterr().out)
    assert row[0].strip() == "20" and row[4].strip() == "0"
