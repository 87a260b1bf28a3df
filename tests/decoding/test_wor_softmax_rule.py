"""scripts/wor_softmax_rule.py: Lemma 16's softmax rules reach every law inside ``P`` (a law of random
weights, fitted again), the weights that minimise each side's bound-constrained program make a rule
that attains ``alpha*`` without replacement (its law below ``p`` on ``U`` and above it on ``H``), and
it does not when an ingredient is broken (no priority for ``U``, a side's weights not its
program's, a wrong Hessian)."""
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

#: A fitted law against its target, and the rule's law against ``p`` on the wrong side of it (L1):
#: the programs' stopping rule, with room for the rounding of the laws' sums.
LAW_TOLERANCE = 1e-13

#: The rule's acceptance against ``alpha*`` (the prefix scan): rounding of sums over the tokens.
OPTIMUM_TOLERANCE = 1e-13

INSTANCES = list(wor_softmax_rule.instances(40, seed=3))


def _sides(rule: dict, n: int):
    """``(tokens, choices, below)`` of the sides with something to choose."""
    for side, whole in ((set(range(n)) - rule["H"], False), (rule["H"], True)):
        choices = wor_softmax_rule.side_choices(rule["sets"], side, whole)
        if choices:
            yield np.array(sorted(side)), choices, not whole


@settings(max_examples=30, deadline=None)
@given(st.integers(0, len(INSTANCES) - 1), st.integers(0, 2**32 - 1))
def test_a_softmax_law_is_reached_again(which, seed):
    """Lemma 16 (a) on points known to lie inside ``P``: the law of random weights, fitted from zero
    with no constraint on the weights."""
    p, q, k = INSTANCES[which]
    choices = wor_softmax_rule.side_choices(wor_softmax_rule.draft_sets(list(q), k), set(range(len(p))), whole=False)
    theta = np.random.default_rng(seed).normal(scale=2.0, size=len(p))
    target, _ = wor_softmax_rule.softmax_law(theta, choices)
    fitted, _, residual = wor_softmax_rule.minimise(choices, target, np.arange(len(p)))
    assert residual <= LAW_TOLERANCE
    assert np.abs(wor_softmax_rule.softmax_law(fitted, choices)[0] - target).sum() <= LAW_TOLERANCE


def test_the_hessian_is_the_derivative_of_the_law():
    """The Newton step's Jacobian against central differences of the law."""
    p, q, k = INSTANCES[0]
    choices = wor_softmax_rule.side_choices(wor_softmax_rule.draft_sets(list(q), k), set(range(len(p))), whole=False)
    theta = np.random.default_rng(0).normal(size=len(p))
    _, hessian = wor_softmax_rule.softmax_law(theta, choices)
    step = 1e-6
    for a in range(len(p)):
        up, down = theta.copy(), theta.copy()
        up[a] += step
        down[a] -= step
        law_up, law_down = wor_softmax_rule.softmax_law(up, choices)[0], wor_softmax_rule.softmax_law(down, choices)[0]
        column = (law_up - law_down) / (2 * step)
        assert np.allclose(column, hessian[:, a], atol=1e-8)


def test_the_kkt_residual_reads_the_bounds():
    """At the bound a gradient into the constraint is optimal; a free weight needs a zero gradient."""
    theta, linear, tokens = np.array([0.0, -1.0]), np.zeros(2), np.arange(2)
    assert wor_softmax_rule.kkt_residual(theta, np.array([-0.25, 0.0]), linear, tokens, below=True) == 0.0
    assert wor_softmax_rule.kkt_residual(theta, np.array([0.25, 0.0]), linear, tokens, below=True) == 0.25
    assert wor_softmax_rule.kkt_residual(theta, np.array([0.0, 0.5]), linear, tokens, below=True) == 0.5
    assert wor_softmax_rule.kkt_residual(-theta, np.array([0.25, 0.0]), linear, tokens, below=False) == 0.0


@pytest.mark.parametrize("which", range(len(INSTANCES)))
def test_the_rule_attains_the_optimum(which):
    p, q, k = INSTANCES[which]
    row = wor_softmax_rule.instance_row(p, q, k)
    assert abs(row["gap"]) <= OPTIMUM_TOLERANCE
    rule = wor_softmax_rule.softmax_rule(p, q, k)
    law = wor_softmax_rule.selection_law(rule)
    by_sides = np.zeros(len(p))
    for tokens, choices, below in _sides(rule, len(p)):
        side_law, _ = wor_softmax_rule.softmax_law(rule["theta"], choices)
        by_sides += side_law
        # the certificate of optimality, without the prefix scan: x <= p on U, x >= p on H
        wrong_side = np.maximum(side_law - p, 0.0) if below else np.maximum(p - side_law, 0.0)
        assert wrong_side[tokens].sum() <= LAW_TOLERANCE
        assert (rule["theta"][tokens] <= 0.0).all() if below else (rule["theta"][tokens] >= 0.0).all()
    # the law over the draft sets (a U member first) is the two sides' merged choices
    assert np.abs(law - by_sides).sum() <= 1e-14


@pytest.mark.parametrize("which", range(10))
def test_i_i_d_drafts_too(which):
    """Lemma 16 holds for any draft law: the sets of distinct i.i.d. drafts, against ``alpha*(p, q^k)``."""
    p, q, k = INSTANCES[which]
    assert abs(wor_softmax_rule.instance_row(p, q, k, sampling="iid")["gap"]) <= OPTIMUM_TOLERANCE


def test_without_the_priority_of_U_it_falls_short():
    gaps = [wor_softmax_rule.instance_row(p, q, k, priority=False)["gap"] for p, q, k in INSTANCES]
    assert max(gaps) > 1e-3


@pytest.mark.parametrize("side", ["U", "H"])
def test_without_a_sides_program_it_falls_short(side):
    """One side's weights left at 0 (the uniform choice within it) instead of its program's."""
    shortfalls = []
    for p, q, k in INSTANCES:
        rule = wor_softmax_rule.softmax_rule(p, q, k)
        for tokens, _, below in _sides(rule, len(p)):
            if below == (side == "U"):
                rule["theta"][tokens] = 0.0
        shortfalls.append(rule["alpha"] - np.minimum(p, wor_softmax_rule.selection_law(rule)).sum())
    assert max(shortfalls) > 1e-3


def test_a_wrong_hessian_does_not_converge(monkeypatch):
    """Newton's steps with the outer products left out of the Hessian stop short of the optimum."""
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
    assert max(residuals) > wor_softmax_rule.KKT_TOLERANCE


def test_the_table(capsys):
    assert wor_softmax_rule.main(["--instances", "20"]) == 0
    (row,) = table_rows(capsys.readouterr().out)
    assert row[0].strip() == "20" and row[3].strip() == "0"
