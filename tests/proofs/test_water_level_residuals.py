"""Water levels are probabilities (docs/optimal-verifier-proofs.md#water-levels-are-probabilities), followed claim by
claim along the nesting (proofs.water_level_residuals): every claim holds on exact instances,
k = 2..4, drafts without replacement and i.i.d.; the certificate fails on broken levels, on a
draft law without the exchange property, and the construction refuses out of the ratio order."""
from __future__ import annotations

import dataclasses
from fractions import Fraction as F

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from otm.draft_laws import iid_law, without_replacement_law
from otm.errors import NotApplicableError
from otm.formulations.prefix_scan import ratio_order
from otm.rules.water_levels.construction import water_level_parameters
from otm.rules.water_levels.set_masses import draft_sets, set_masses
from proofs.water_level_residuals import ResidualRun, residual_runs, run_slacks


@st.composite
def instances(draw):
    """Exact ``(p, q, k, draft law)``, zeros allowed, more than ``k`` tokens with ``q > 0``."""
    V = draw(st.integers(3, 7))
    k = draw(st.integers(2, min(4, V - 1)))
    p = draw(st.lists(st.integers(0, 9), min_size=V, max_size=V))
    q = draw(st.lists(st.integers(0, 9), min_size=V, max_size=V))
    assume(sum(p) > 0 and sum(1 for v in q if v > 0) > k)
    law = draw(st.sampled_from([without_replacement_law, iid_law]))
    return (np.array([F(v, sum(p)) for v in p], dtype=object), np.array([F(v, sum(q)) for v in q], dtype=object),
            k, law)


def construction(p, q, k, law, order=None):
    params = water_level_parameters(p, q, ratio_order(p, q) if order is None else order, set_masses(k, law))
    q_ranked = [q[t] for t in params.order]
    return params, q_ranked, draft_sets(q_ranked, k, law)


@settings(max_examples=60, deadline=None)
@given(instances())
def test_every_claim_of_the_proof_holds_at_every_run(instance):
    p, q, k, law = instance
    params, q_ranked, sets = construction(p, q, k, law)
    runs, left = residual_runs(params, sets)
    assert left == [0] * len(left)  # the levels realise x
    assert all(0 <= level <= 1 for level in params.levels)
    for run in runs:
        assert all(level > run.level for level in params.levels[run.first + 1:run.last + 1])
        slacks = run_slacks(run, q_ranked, sets)
        assert slacks.total == 0
        assert min(slacks.sorted_ratio, slacks.flux, slacks.suffixes, slacks.key, slacks.lowest_law) >= 0, slacks
        assert slacks.key == slacks.suffixes  # (d) is (c) rewritten: (1 - s) M_R(j) - rem(j) = y([j, t]) - ...


def test_the_residual_starts_at_x_and_the_first_runs_are_the_positive_flux_runs():
    p = np.array([F(1, 10), F(2, 10), F(3, 10), F(4, 10)], dtype=object)
    q = np.array([F(4, 10), F(3, 10), F(2, 10), F(1, 10)], dtype=object)
    params, q_ranked, sets = construction(p, q, 2, without_replacement_law)
    runs, _ = residual_runs(params, sets)
    x = [params.selection[t] for t in params.order]
    first = [run for run in runs if run.level == 0]
    assert first and all(run.residual == x[run.first:run.last + 1] for run in first)
    positive = [j for j in range(1, len(x)) if params.flux[j] > 0]
    assert sorted(j for run in first for j in range(run.first + 1, run.last + 1)) == positive


def test_halved_levels_leave_a_residual():
    p = np.array([F(1, 10), F(1, 10), F(2, 10), F(2, 10), F(4, 10)], dtype=object)
    q = np.array([F(3, 10), F(3, 10), F(2, 10), F(1, 10), F(1, 10)], dtype=object)
    params, _, sets = construction(p, q, 3, without_replacement_law)
    assert max(params.levels) > 0
    halved = dataclasses.replace(params, levels=[level / 2 for level in params.levels])
    assert residual_runs(params, sets)[1] == [0] * len(params.order)
    assert residual_runs(halved, sets)[1] != [0] * len(params.order)


def test_a_law_without_the_exchange_property_breaks_claim_e():
    """Claim (e) is the exchange lemma at work: a table law whose lowest-member law grows
    along the ranks faster than q fails it."""
    q_ranked = [F(1, 3)] * 3
    sets = {frozenset({0}): F(1, 5), frozenset({1}): F(4, 5)}
    run = ResidualRun(F(0), 0, 2, [F(1, 5), F(4, 5), F(0)])
    assert run_slacks(run, q_ranked, sets).lowest_law < 0


@pytest.mark.parametrize("swap", ["lowest", "highest", "reversed"])
def test_out_of_the_ratio_order_the_levels_pass_one(swap):
    """The ratio order is the ingredient the proof needs: with two ranks swapped (or all
    reversed) some instance needs a level above 1, which the construction refuses."""
    rng = np.random.default_rng(5)
    refused = 0
    for _ in range(40):
        V = int(rng.integers(3, 8))
        p = np.array([F(int(v), 1) for v in rng.integers(1, 10, V)], dtype=object)
        q = np.array([F(int(v), 1) for v in rng.integers(1, 10, V)], dtype=object)
        p, q = p / sum(p), q / sum(q)
        order = ratio_order(p, q).copy()
        if swap == "lowest":
            order[[0, 1]] = order[[1, 0]]
        elif swap == "highest":
            order[[V - 2, V - 1]] = order[[V - 1, V - 2]]
        else:
            order = order[::-1].copy()
        try:
            construction(p, q, 2, without_replacement_law, order)
        except NotApplicableError:
            refused += 1
    assert refused > 0
