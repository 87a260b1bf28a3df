"""The chain optimum: closed forms against both LP formulations (exact rational simplex and
HiGHS certified exactly), block verification attains the draft-prefix optimum, the
any-output optimum is the tree formula.

Run: .venv/bin/python -m pytest tests/otm/sequences/test_sequence_lp.py -q
"""
from __future__ import annotations

from fractions import Fraction as F

import numpy as np
import pytest
from hypothesis import given, settings

from otm.errors import UnknownNameError
from otm.sequences import (
    any_output_optimum,
    block_expected_accepted,
    draft_prefix_optimum,
    optimal_through_masses,
    random_model,
    solve_chain_optimum,
    tokenwise_expected_accepted,
)
from otm.sequences.sequence_lp import chain_coupling_lp
from otm.tolerances import AGREEMENT_TOLERANCE

from .support import (
    context_switch_model,
    degenerate_models,
    exact_model,
    exact_models,
    paper_model,
)


def test_paper_example_all_formulations():
    m = paper_model()
    assert draft_prefix_optimum(m, 2) == F(11, 9)
    assert any_output_optimum(m, 2) == F(12, 9)
    for formulation in ("coupling", "through_masses"):
        assert solve_chain_optimum(m, 2, formulation, backend="exact").value == F(11, 9)
    assert solve_chain_optimum(m, 2, outputs="any", backend="exact").value == F(12, 9)


@pytest.mark.parametrize("vocab_size, g", [(2, 2), (2, 3), (3, 2)])
@pytest.mark.parametrize("seed", range(2))
def test_exact_simplex_agrees_with_the_closed_forms(vocab_size, g, seed):
    m = exact_model(vocab_size, g + 1, seed, concentration=3.0)
    optimum = draft_prefix_optimum(m, g)
    assert optimum == block_expected_accepted(m, g)
    for formulation in ("coupling", "through_masses"):
        result = solve_chain_optimum(m, g, formulation, backend="exact")
        assert result.exact and result.value == optimum
    result = solve_chain_optimum(m, g, outputs="any", backend="exact")
    assert result.value == any_output_optimum(m, g) >= optimum


@settings(max_examples=25)
@given(exact_models(lengths=(2, 3)))
def test_certified_highs_agrees_with_the_closed_forms(instance):
    m, g = instance
    optimum = draft_prefix_optimum(m, g)
    for formulation in ("coupling", "through_masses"):
        result = solve_chain_optimum(m, g, formulation)
        assert result.exact and result.value == optimum
    assert solve_chain_optimum(m, g, outputs="any").value == any_output_optimum(m, g)
    assert tokenwise_expected_accepted(m, g) <= optimum <= any_output_optimum(m, g)


def test_greedy_through_masses_are_a_feasible_optimal_point():
    m = context_switch_model()
    masses = optimal_through_masses(m, 2)
    for u, a in masses.items():
        parent = masses.get(u[:-1], 1) if len(u) > 1 else 1
        assert a <= m.draft_prob(u) and a <= parent * m.target(u[:-1])[u[-1]]
    assert sum(masses.values()) == solve_chain_optimum(m, 2, "through_masses", backend="exact").value


@pytest.mark.parametrize("name", sorted(degenerate_models()))
def test_degenerate_instances(name):
    m = degenerate_models()[name]
    assert solve_chain_optimum(m, 2, backend="exact").value == draft_prefix_optimum(m, 2)
    assert solve_chain_optimum(m, 2, outputs="any", backend="exact").value == any_output_optimum(m, 2)


def test_float_model_uses_float_values():
    m = exact_model(3, 3, seed=4, concentration=2.0)
    result = solve_chain_optimum(m.as_float(), 2)
    assert not result.exact
    assert abs(result.value - float(draft_prefix_optimum(m, 2))) < AGREEMENT_TOLERANCE


def test_badly_scaled_float_instance_still_gives_the_optimum():
    """Rows with probabilities down to 1e-19: HiGHS may fail its own 1e-9 check there; the
    value is returned (``verified`` says whether it passed) and is still the optimum."""
    rng = np.random.default_rng(33)
    m = random_model(int(rng.integers(2, 5)), 4, rng, concentration=0.3)
    result = solve_chain_optimum(m, 2)
    assert abs(result.value - draft_prefix_optimum(m, 2)) < 1e-9


def test_lp_sizes_are_reported():
    m = exact_model(2, 4, seed=1, concentration=5.0)
    rows = chain_coupling_lp(m, 3)
    result = solve_chain_optimum(m, 3)
    assert result.num_variables == len(rows.labels)
    assert (result.num_equalities, result.num_inequalities) == (2**3, 2**4)
    assert result.verified
    assert result.seconds >= 0 and result.plan()


def test_unknown_names():
    m = paper_model()
    with pytest.raises(UnknownNameError, match="formulation"):
        solve_chain_optimum(m, 2, formulation="dual")
    with pytest.raises(UnknownNameError, match="output model"):
        solve_chain_optimum(m, 2, outputs="everything")
    with pytest.raises(UnknownNameError, match="through-mass"):
        solve_chain_optimum(m, 2, formulation="through_masses", outputs="any")
