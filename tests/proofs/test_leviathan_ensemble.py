"""Leviathan et al. (2023) and Speculative Ensemble (Fu et al. 2025) checks hold and fail on broken ingredients."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from otm.rules import rule_law
from proofs import speculative_ensemble as ensemble, leviathan
from tests.proofs.proofs_support import law_for_wrong_target

N = 5


def rng():
    return np.random.default_rng(4)


def test_expected_tokens():
    assert leviathan.check_expected_tokens(max_gamma=4).status == "holds"
    no_bonus = lambda a, g: (1 - a**g) / (1 - a)  # noqa: E731
    assert leviathan.check_expected_tokens(formula=no_bonus, max_gamma=4).status == "fails"


def test_walltime_operations():
    assert leviathan.check_walltime_operations().status == "holds"
    wrong = lambda a, g, c: leviathan.expected_tokens(a, g) / (g * c + 2)  # noqa: E731
    assert leviathan.check_walltime_operations(walltime=wrong).status == "fails"


def test_table():
    assert leviathan.check_table().status == "holds"
    assert leviathan.check_table(rows_fn=lambda: leviathan.reproduce_table(c=0.05)).status == "fails"
    row = leviathan.reproduce_table()[0]
    assert round(row["speed"], 2) == 1.96
    assert round(row["operations"], 2) == 1.53


def test_alpha_tv():
    assert leviathan.check_alpha_tv().status == "holds"
    assert leviathan.check_alpha_tv(law_fn=law_for_wrong_target).status == "fails"


def test_ensemble_a1_eq7():
    assert ensemble.check_a1(N, rng()).status == "holds"
    verify_against_p = lambda rule, p, q, k, **kw: rule_law("single", p, q, 1)  # noqa: E731
    assert ensemble.check_a1(N, rng(), law_fn=verify_against_p).status == "fails"
    assert ensemble.check_eq7(N, rng()).status == "holds"
    normalised_reading = lambda q, r: 1 - 0.25 * float(np.abs(q - r).sum())  # noqa: E731
    assert ensemble.check_eq7(N, rng(), formula=normalised_reading).status == "fails"


def halved_acceptance(rule, p, q, k, **params):
    return SimpleNamespace(acceptance=0.5 * float(rule_law(rule, p, q, k, **params).acceptance))


def test_thm3_2_cor3_3():
    assert ensemble.check_thm3_2(N, rng()).status == "holds"
    assert ensemble.check_thm3_2(N, rng(), law_fn=halved_acceptance).status == "fails"
    assert ensemble.check_cor3_3(N, rng()).status == "holds"
    assert ensemble.check_cor3_3(N, rng(), law_fn=halved_acceptance).status == "fails"


def test_speed_theorems():
    assert ensemble.check_speed_theorems().status == "holds"
    with_bonus = lambda a, g, c: (1 - a ** (g + 1)) * (1 + c) / ((1 - a) * (1 + c * g))  # noqa: E731
    assert ensemble.check_speed_theorems(speed=with_bonus).status == "fails"
    assert ensemble.check_cor3_5(N, rng()).status == "holds"
    assert ensemble.check_cor3_5(N, rng(), speed=lambda a, g, c: 0.9).status == "fails"
