"""The batched verifier of rule 'optimal_wor' (decoding.verifiers.optimal.wor): its walk is the
rule's selection law, a walk that does not go down is caught by the law checks, two drafts go
to the water-level verifier at any vocabulary, and the limits and bad inputs are typed errors.
(The registry-wide tests hold it to its exact law and to its reference, draw for draw.)"""
from __future__ import annotations

from fractions import Fraction as F

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from decoding.verifiers.optimal import wor as verifier
from otm.errors import InvalidDistributionError, InvalidDraftCountError, NotApplicableError
from otm.formulations.prefix_scan import prefix_scan
from otm.rules import optimal_wor as rule, water_levels
from otm.rules import rule_law
from otm.rules.water_levels.bounds import walk_decision
from decoding.validation.stats import binomial_z_test, chi_square_test

ALPHA = 1e-4
P = np.array([0.05, 0.1, 0.3, 0.2, 0.25, 0.1])
Q = np.array([0.3, 0.25, 0.1, 0.15, 0.05, 0.15])


def test_the_walk_draws_the_rules_chances():
    """For levels on a grid, the share of ``u`` in a fine grid for which the walk selects each
    member equals :func:`otm.rules.optimal_wor.member_chances` (to the grid's step)."""
    rng = np.random.default_rng(0)
    grid = (np.arange(4000) + 0.5) / 4000
    for _ in range(30):
        n = int(rng.integers(3, 8))
        levels = [0.0] + [float(v) for v in rng.integers(0, 9, size=n - 1) / 8] + [0.0]
        ranks = [int(r) for r in rng.choice(n, size=int(rng.integers(2, n + 1)), replace=False)]
        chances = rule.member_chances([F(v) for v in levels], ranks)
        counts = np.bincount([verifier.walk(levels, ranks, float(u)) for u in grid], minlength=len(ranks))
        assert np.allclose(counts / len(grid), [float(c) for c in chances], atol=1 / len(grid))


def _sample(k: int, rows: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    target = torch.tensor(P).expand(rows, -1).contiguous()
    drafts_probs = torch.tensor(Q).expand(rows, k, -1).contiguous()
    tokens = verifier.sample_drafts(drafts_probs[:, 0], k, g)
    return tokens, verifier.verify(target, drafts_probs, tokens, g)


def test_a_walk_that_never_goes_down_is_caught(monkeypatch):
    """Selecting the highest-ranked draft always (the max-ratio rule) keeps the canonical check
    against the unchanged ``x``: the output law is then not p, and the chi-square test says so."""
    k, rows = 3, 20_000
    law = rule_law("optimal_wor", P, Q, k)
    tokens, out = _sample(k, rows, 7)
    assert chi_square_test(np.bincount(out.tokens.numpy(), minlength=len(P)), P, ALPHA).passed
    accepted = int((tokens == out.tokens[:, None]).any(dim=1).sum())
    assert binomial_z_test(accepted, rows, float(law.acceptance), ALPHA).passed
    monkeypatch.setattr(verifier, "walk", lambda levels, ranks, u: int(np.argmax(ranks)))
    _, broken = _sample(k, rows, 7)
    assert not chi_square_test(np.bincount(broken.tokens.numpy(), minlength=len(P)), P, ALPHA).passed


def test_past_the_tuple_enumeration_it_draws_p_with_the_clock_masses():
    """150 tokens, k = 3 (3.3 million ordered triples): the levels come from the clock
    integral's set masses, and the verifier's output law is p (chi-square) and its acceptance
    the optimum without replacement of the prefix scan (z-test)."""
    rng = np.random.default_rng(0)
    V, k, rows = 150, 3, 20_000
    logits = 3 * rng.normal(size=V)  # a draft close to the target, as real rows are: deep levels
    p, q = (np.exp(v - v.max()) / np.exp(v - v.max()).sum() for v in (logits, logits + rng.normal(size=V)))
    params = water_levels.wor_parameters(p, q, k)
    assert "clock integral" in params.arithmetic and max(params.levels) > 0.5
    g = torch.Generator().manual_seed(0)
    target = torch.tensor(p).expand(rows, -1).contiguous()
    drafts_probs = torch.tensor(q).expand(rows, k, -1).contiguous()
    tokens = verifier.sample_drafts(drafts_probs[:, 0], k, g)
    out = verifier.verify(target, drafts_probs, tokens, g)
    assert chi_square_test(np.bincount(out.tokens.numpy(), minlength=V), p, ALPHA).passed
    accepted = int((tokens == out.tokens[:, None]).any(dim=1).sum())
    optimum = prefix_scan(p, q, k, "without_replacement").value
    assert binomial_z_test(accepted, rows, float(optimum), ALPHA).passed


def test_equal_rows_of_a_call_share_the_residuals_order(monkeypatch):
    """The rows of a call that repeat a row make its residual order once, at the first residual,
    from the row's set-up (no sort of the row), and draw as rows verified one call each do."""
    from decoding.verifiers.optimal import pair as optimal_pair_wor
    V, k, rows = 150, 3, 40
    _, q = _clock_row(V)
    p = np.exp(2 * np.random.default_rng(3).normal(size=V))  # a target far from the draft: residuals
    p /= p.sum()
    target, drafts_probs = torch.tensor(p).expand(rows, -1), torch.tensor(q).expand(rows, k, -1)
    tokens = verifier.sample_drafts(drafts_probs[:, 0], k, torch.Generator().manual_seed(1))
    orders, sorts = [], []
    original, original_sort = verifier.residual_order, optimal_pair_wor.full_ratio_order
    monkeypatch.setattr(verifier, "residual_order", lambda *a: orders.append(1) or original(*a))
    monkeypatch.setattr(optimal_pair_wor, "full_ratio_order", lambda *a: sorts.append(1) or original_sort(*a))
    together = verifier.verify(target, drafts_probs, tokens, torch.Generator().manual_seed(2))
    assert int((together.accepted_index < 0).sum()) > 1  # several residuals, one order, no sort
    assert len(orders) == 1 and not sorts
    g = torch.Generator().manual_seed(2)
    uniforms = torch.rand(rows, verifier.uniforms_per_row(k), generator=g, dtype=torch.float64)
    alone = [verifier.verify_row(p, q, tuple(tokens[r].tolist()), uniforms[r].numpy()) for r in range(rows)]
    assert [(int(t), int(i)) for t, i in zip(together.tokens, together.accepted_index)] == alone


def test_broken_clock_masses_are_refused_not_drawn_from(monkeypatch):
    """Interval masses 10% low give levels that do not realise x: the certificate (the runs'
    lowest-member laws) refuses the row, in float64 and again in wide floats."""
    from otm.rules.water_levels import clock_masses as wor_clock_masses

    rng = np.random.default_rng(0)
    logits = 3 * rng.normal(size=150)
    p, q = (np.exp(v - v.max()) / np.exp(v - v.max()).sum() for v in (logits, logits + rng.normal(size=150)))
    original = wor_clock_masses.ClockSetMasses.across
    monkeypatch.setattr(wor_clock_masses.ClockSetMasses, "across", lambda self, f, j, t: 0.9 * original(self, f, j, t))
    with pytest.raises(NotApplicableError, match="do not realise x"):
        water_levels.wor_parameters(p, q, 3)


def test_a_compiled_nesting_that_stops_short_is_refused(monkeypatch):
    """The verifier's path (the compiled masses and nesting of
    decoding.verifiers.optimal.clock_masses): levels 10% short in float64 fail the certificate, and
    the wide-float redo (the Python nesting on the compiled masses) is certified instead."""
    from decoding.verifiers.optimal.clock_masses import CompiledClockSetMasses

    rng = np.random.default_rng(0)
    logits = 3 * rng.normal(size=150)
    p, q = (np.exp(v - v.max()) / np.exp(v - v.max()).sum() for v in (logits, logits + rng.normal(size=150)))
    assert water_levels.wor_parameters(p, q, 3, clock_masses=CompiledClockSetMasses).arithmetic.startswith("float64")
    original = CompiledClockSetMasses.water_levels

    def short(self, flux, lo, hi, levels, unit):
        done = original(self, flux, lo, hi, levels, unit)
        levels[:] = [0.9 * v for v in levels]
        return done

    monkeypatch.setattr(CompiledClockSetMasses, "water_levels", short)
    params = water_levels.wor_parameters(p, q, 3, clock_masses=CompiledClockSetMasses)
    assert "256-bit floats (float64 levels did not realise x)" in params.arithmetic
    assert water_levels.parameters.clock_realised_error(params, q, 3, CompiledClockSetMasses) <= water_levels.CERTIFICATE_TOLERANCE


def test_levels_that_cannot_be_certified_on_the_clock_masses_are_refused(monkeypatch):
    """Where the levels fail the certificate in float64 and again in wide floats on the clock
    integral's float64 masses (here: made so, the float64 nesting returning level 2, capped to 1,
    and the masses halved), the refusal names those masses and the smallest q, not the rule."""
    from decoding.verifiers.optimal.clock_masses import CompiledClockSetMasses

    rng = np.random.default_rng(0)
    logits = 3 * rng.normal(size=150)  # 3.3 million triples: too many to enumerate instead
    p, q = (np.exp(v - v.max()) / np.exp(v - v.max()).sum() for v in (logits, logits + rng.normal(size=150)))
    original = CompiledClockSetMasses.across

    def too_high(self, flux, lo, hi, levels, unit):
        levels[:] = [2.0] * len(levels)
        return True

    monkeypatch.setattr(CompiledClockSetMasses, "water_levels", too_high)
    monkeypatch.setattr(CompiledClockSetMasses, "across", lambda self, f, j, t: 0.5 * original(self, f, j, t))
    with pytest.raises(NotApplicableError, match="cannot be certified on the clock integral's float64 set masses.*q down to"):
        water_levels.wor_parameters(p, q, 3, clock_masses=CompiledClockSetMasses)


def _clock_row(V: int = 150, seed: int = 0):
    """A softmax row pair of ``V`` tokens whose draft is close to its target, as real rows are
    (deep levels): past the tuple enumeration at ``k = 3``."""
    rng = np.random.default_rng(seed)
    logits = 3 * rng.normal(size=V)
    return tuple(np.exp(v - v.max()) / np.exp(v - v.max()).sum() for v in (logits, logits + rng.normal(size=V)))


def test_walks_decided_by_bounds_are_the_levels_walks():
    """On a row of the clock path, the walks the bounds decide (with the verifier's margin and
    windows) are the walks on the certified levels, and they decide many (110 of 300), with the
    runs' cuts read from whole runs (what a run of up to 4,096 ranks gets) and from spans alone,
    the runs' ends multiplied out from groups of 8 ranks (what a longer run gets:
    ``CompiledClockSetMasses.across_cuts``); with the set masses halved, some decided walk
    differs (the check can fail)."""
    from decoding.verifiers.optimal.clock_masses import CompiledClockSetMasses

    p, q = _clock_row()
    params = water_levels.wor_parameters(p, q, 3)
    setup = verifier.row_setup(p, q, 3)
    spans = type("Spans", (CompiledClockSetMasses,), {"eager_ranks": 0, "group": 8})
    by_spans = water_levels.clock_flux_setup(p, q, 3, clock_masses=spans)
    rng = np.random.default_rng(1)
    draws = [(rng.choice(len(q), 3, replace=False, p=q), float(rng.random())) for _ in range(300)]

    def disagreements(masses, flux=setup.flux):
        decided = wrong = 0
        for drafts, u in draws:
            verdict = walk_decision(flux, masses, [int(setup.rank[t]) for t in drafts], u,
                                    margin=verifier.BOUND_MARGIN, windows=verifier.BOUND_WINDOWS)
            if verdict is not None:
                decided += 1
                wrong += verdict != verifier.walk(params.levels, [int(params.rank[t]) for t in drafts], u)
        return decided, wrong

    decided, wrong = disagreements(setup.masses)
    assert wrong == 0 and decided > 80
    assert disagreements(by_spans.masses, np.asarray(by_spans.flux)) == (decided, 0)

    class Halved:
        def across(self, f, j, t):
            return 0.5 * setup.masses.across(f, j, t)

    assert disagreements(Halved())[1] > 0


@st.composite
def clock_rows(draw):
    """Float rows past the tuple enumeration at ``k = 3, 4`` (``V = 24..48``): softmax rows of
    any sharpness, and degenerate ones: ``p = q``, one-hot ``p``, disjoint supports, zeros in
    ``q`` (at least 12 tokens with ``q > 0``: more than 1,000 ordered triples), a dominant draft token."""
    V, k = draw(st.integers(24, 48)), draw(st.integers(3, 4))
    seed, kind = draw(st.integers(0, 2**31)), draw(st.sampled_from(["softmax", "p = q", "one-hot p", "disjoint",
                                                                      "zeros in q", "dominant"]))
    rng = np.random.default_rng(seed)
    scale = draw(st.sampled_from([0.3, 1.0, 3.0, 8.0]))
    p, q = (np.exp(scale * rng.normal(size=V)) for _ in range(2))
    if kind == "p = q":
        p = q.copy()
    elif kind == "one-hot p":
        p = np.zeros(V)
        p[int(rng.integers(V))] = 1.0
    elif kind == "disjoint":
        p[: V // 2], q[V // 2:] = 0.0, 0.0
    elif kind == "zeros in q":
        q[rng.choice(V, V // 3, replace=False)] = 0.0
    elif kind == "dominant":
        q[0] = 50 * q.sum()
    return p / p.sum(), q / q.sum(), k


@settings(max_examples=25, deadline=None)
@given(clock_rows())
def test_walks_decided_by_bounds_are_the_levels_walks_on_degenerate_rows(row):
    """On softmax and degenerate rows of the clock path, every walk the bounds decide (verifier's
    margin and windows) is the walk on the rule's certified levels."""
    p, q, k = row
    setup = verifier.row_setup(p, q, k)
    assert setup is not None  # more than 1,000 draft tuples, more than k tokens with q > 0
    params = water_levels.wor_parameters(p, q, k)
    rng = np.random.default_rng(0)
    for _ in range(40):
        drafts = rng.choice(len(q), k, replace=False, p=q)
        u = float(rng.random())
        verdict = walk_decision(setup.flux, setup.masses, [int(setup.rank[t]) for t in drafts], u,
                                margin=verifier.BOUND_MARGIN, windows=verifier.BOUND_WINDOWS)
        assert verdict is None or verdict == verifier.walk(params.levels, [int(params.rank[t]) for t in drafts], u)


def test_a_row_past_the_nesting_limit_is_drawn_where_the_bounds_decide(monkeypatch):
    """With the nesting's time limit at 0, a drafted set the bounds decide is drawn as the
    levels' path draws it (built without the limit; that path is the reference's draw for draw,
    tests/decoding/test_verifiers_reference.py), and one they leave open is refused with the
    nesting's one-line error."""
    from decoding.verifiers.optimal.clock_masses import CompiledClockSetMasses

    p, q = _clock_row()
    rng = np.random.default_rng(2)
    draws = [(tuple(int(t) for t in rng.choice(len(q), 3, replace=False, p=q)), rng.random(3)) for _ in range(60)]
    expected = [verifier.verify_row(p, q, drafts, uniforms) for drafts, uniforms in draws]
    monkeypatch.setattr(CompiledClockSetMasses, "max_nesting_seconds", 0.0)
    verifier._LEVELS.clear()
    setup = verifier.row_setup(p, q, 3)
    drawn = refused = 0
    for (drafts, uniforms), want in zip(draws, expected):
        try:
            got = verifier.verify_row(p, q, drafts, uniforms, setup)
        except NotApplicableError as refusal:
            assert "nest over runs" in str(refusal)
            refused += 1
            continue
        assert got == want
        drawn += 1
    verifier._LEVELS.clear()
    assert drawn > 12 and refused > 0


def test_two_drafts_go_to_the_water_level_verifier_at_any_vocabulary():
    rng = np.random.default_rng(3)
    V = 4096
    p, q = (torch.tensor(rng.dirichlet(np.ones(V) * 0.1)).unsqueeze(0) for _ in range(2))
    g = torch.Generator().manual_seed(0)
    tokens = verifier.sample_drafts(q, 2, g)
    out = verifier.verify(p, q.unsqueeze(1).expand(1, 2, V), tokens, torch.Generator().manual_seed(1))
    from decoding.verifiers.optimal import pair as optimal_pair_wor
    same = optimal_pair_wor.verify(p, q.unsqueeze(1).expand(1, 2, V), tokens, torch.Generator().manual_seed(1))
    assert out.tokens.tolist() == same.tokens.tolist() and out.accepted_index.tolist() == same.accepted_index.tolist()


def test_limits_and_bad_inputs_are_typed_errors(monkeypatch):
    from decoding.verifiers.optimal.clock_masses import CompiledClockSetMasses

    drafts = torch.tensor([[0, 1, 2]])
    V = 60_000  # 2e14 ordered triples; its checkpointed prefixes (917,364 floats at 163 nodes) above a
    p = torch.full((1, V), 1.0 / V, dtype=torch.float64)  # limit lowered to 100,000 floats (the 64 million
    monkeypatch.setattr(CompiledClockSetMasses, "max_table_floats", 100_000)  # hold 4 million such tokens)
    with pytest.raises(NotApplicableError, match="clock integral's tables"):
        verifier.verify(p, p.unsqueeze(1).expand(1, 3, V), drafts, None)
    monkeypatch.undo()
    V = 5_000  # tables within the limit, but p = q uniform: one run of flux over every rank,
    p = np.full(V, 1.0 / V)  # whose nesting is refused where the bounds leave the walk open
    setup = verifier.row_setup(p, p, 3)
    open_u = next(u for u in np.linspace(0.05, 0.95, 19)
                  if walk_decision(setup.flux, setup.masses, [0, 1, 2], u, margin=verifier.BOUND_MARGIN,
                                   windows=verifier.BOUND_WINDOWS) is None)
    with pytest.raises(NotApplicableError, match="nest over runs of up to 5,000 ranks.*left this walk open: drafts"):
        verifier.verify_row(p, p, (0, 1, 2), np.array([open_u, 0.5, 0.5]), setup)
    small = torch.tensor(P).unsqueeze(0)
    q3 = torch.tensor(Q).unsqueeze(0).unsqueeze(1).expand(1, 3, len(Q))
    with pytest.raises(NotApplicableError, match="cannot come from 3 draws"):
        verifier.verify(small, q3, torch.tensor([[0, 0, 1]]), None)
    with pytest.raises(InvalidDistributionError):
        verifier.verify(torch.tensor([[float("nan"), 0.5, 0.1, 0.1, 0.1, 0.2]]), q3, torch.tensor([[0, 1, 2]]), None)
    with pytest.raises(InvalidDistributionError):
        verifier.verify(torch.tensor([[-0.1, 0.6, 0.1, 0.1, 0.1, 0.2]]), q3, torch.tensor([[0, 1, 2]]), None)
    with pytest.raises(InvalidDraftCountError, match="k >= 2"):
        verifier.sample_drafts(torch.tensor(Q).unsqueeze(0), 1, None)


def test_a_whole_real_vocabulary_row_is_answered_or_refused_by_type():
    """A float32 softmax row of the real vocabulary (``V = 151,936``, no top-p) at ``k = 3``:
    set up in checkpointed prefixes only (no tables of ``e^{-q s}``, well within the limit),
    every drawn walk either drawn (a token of the vocabulary) or refused with the one-line
    error of a walk the bounds left open; and at least one drawn, so the path really runs."""
    V, k = 151_936, 3
    g = torch.Generator().manual_seed(7)
    logits = 4 * torch.randn(V, generator=g)
    p = torch.softmax(logits, -1).unsqueeze(0)
    q = torch.softmax(logits + torch.randn(V, generator=g), -1).unsqueeze(0)
    p64, q64 = (row[0].double().numpy() / row[0].double().sum().item() for row in (p, q))
    setup = verifier.row_setup(p64, q64, k)
    masses = setup.masses
    assert masses.table_floats(masses.n, masses.s.size, k) < masses.max_table_floats / 4
    drawn = 0
    for seed in range(4):
        drafts = verifier.sample_drafts(q, k, torch.Generator().manual_seed(seed))
        try:
            out = verifier.verify(p, q.unsqueeze(1).expand(1, k, V), drafts, torch.Generator().manual_seed(seed))
        except NotApplicableError as refusal:
            assert "left this walk open" in str(refusal) and "\n" not in str(refusal)
            continue
        assert 0 <= int(out.tokens[0]) < V
        drawn += 1
    assert drawn > 0
    assert verifier.row_setup(p64, q64, k) is setup  # kept for the calls that repeat the row


def test_a_whole_real_row_at_eight_drafts_is_kept_set_up():
    """The set-ups kept hold a whole row of the real vocabulary at ``k = 8`` and 450 nodes (more
    than the Qwen rows need) set up on a GPU (three set up on the CPU, whose checkpoints are
    sparser), so calls that repeat a row (a certification's chunks of one row) set it up once; and
    not two, which nothing needs (a lower peak meets the development VM's slow first
    touch of memory less often: research/optimal_wor/wor_fresh_rows.py)."""
    from decoding.verifiers.optimal.clock_masses import CompiledClockSetMasses, clock_masses

    whole = clock_masses("cuda").table_floats(151_936, 450, 8)  # checkpoints at every 64th rank
    assert whole <= verifier.SETUP_FLOATS_KEPT < 2 * whole
    on_the_cpu = CompiledClockSetMasses.table_floats(151_936, 450, 8)  # at every 256th: a third of it
    assert 3 * on_the_cpu <= verifier.SETUP_FLOATS_KEPT < 4 * on_the_cpu


def test_cheap_bounds_decide_every_walk_as_the_exact_bounds_do():
    """The walk's bounds read through the cheap lower bounds of (i) first (``highest_in``, the
    mass of the sets whose highest member lies above a cut) decide every walk, draw for draw, as
    the exact bounds alone do: on a row of the clock path at ``k = 3, 5`` with the runs read as
    spans (groups of 8 ranks), 300 draws each. With ``highest_in`` a third of what it is (no
    longer an upper bound of the interval masses), some decision changes (the check can fail)."""
    from decoding.verifiers.optimal.clock_masses import CompiledClockSetMasses

    p, q = _clock_row(V=400, seed=3)
    spans = {"eager_ranks": 0, "group": 8}
    cheap_masses = type("Cheap", (CompiledClockSetMasses,), spans)
    exact_masses = type("Exact", (CompiledClockSetMasses,), {**spans, "highest_in": None})
    broken_masses = type("Broken", (CompiledClockSetMasses,), {
        **spans, "highest_in": lambda self, lo, hi, t: CompiledClockSetMasses.highest_in(self, lo, hi, t) / 3})
    for k in (3, 5):
        rng = np.random.default_rng(k)
        draws = [(rng.choice(len(q), k, replace=False, p=q), float(rng.random())) for _ in range(300)]

        def verdicts(masses_class):
            setup = water_levels.clock_flux_setup(p, q, k, clock_masses=masses_class)
            flux = np.asarray(setup.flux, dtype=np.float64)
            return [walk_decision(flux, setup.masses, [int(setup.rank[t]) for t in drafts], u,
                                  margin=verifier.BOUND_MARGIN, windows=verifier.BOUND_WINDOWS) for drafts, u in draws]

        exact = verdicts(exact_masses)
        assert verdicts(cheap_masses) == exact
        assert sum(v is not None for v in exact) > 150
        assert verdicts(broken_masses) != exact


def test_highest_in_bounds_every_interval_mass_above():
    """``highest_in(lo, hi, t)`` is at least ``across(f, j, t)`` at every cut of every run of a
    clock row (k = 3 and 5), and within a relative 1e-9 of it at some (the bound is tight where
    the run reaches the lowest ranks)."""
    from decoding.verifiers.optimal.clock_masses import CompiledClockSetMasses

    p, q = _clock_row(V=200, seed=4)
    for k in (3, 5):
        masses = water_levels.clock_flux_setup(p, q, k, clock_masses=CompiledClockSetMasses).masses
        n = masses.n
        tightest = np.inf
        for f, t in [(0, n - 1), (0, n // 2), (n // 3, n - 1), (n // 4, n // 2)]:
            across = np.array([masses.across(f, j, t) for j in range(f + 1, t + 1)])
            upper = masses.highest_in(f + 1, t, t)
            assert np.all(upper >= across)
            tightest = min(tightest, float(np.min((upper - across) / upper)))
        assert tightest < 1e-9


def _tied(values: np.ndarray) -> np.ndarray:
    """``values`` rounded to 3 significant bits (many equal ratios, as bfloat16 rows have), renormalised."""
    mantissa, exponent = np.frexp(values)
    rounded = np.ldexp(np.round(mantissa * 8) / 8, exponent)
    return rounded / rounded.sum()


@settings(max_examples=30, deadline=None)
@given(clock_rows(), st.booleans())
def test_the_residual_order_from_the_set_up_is_the_rows_sort(row, tied):
    """The residual order made from a row's set-up (its ratio order, then the ``q = 0`` by id) is
    the verifier's sort of the row (:func:`full_ratio_order`) entry for entry, on rows with many
    tied ratios and zeros in ``q`` too; the zeros taken in another order break it."""
    from decoding.verifiers.optimal import pair as optimal_pair_wor
    p, q, k = row
    if tied:
        p, q = _tied(p), _tied(q)
    setup = verifier.row_setup(p, q, k)
    assume(setup is not None)
    made = verifier.residual_order(p, q, setup)
    np.testing.assert_array_equal(made, optimal_pair_wor.full_ratio_order(p, q))
    zeros = np.flatnonzero(q == 0)
    if zeros.size > 1:
        broken = np.concatenate([setup.order, zeros[::-1]])
        assert not np.array_equal(broken, made)


def _denormal_row(seed: int = 0):
    """300 tokens, ten of them with draft probabilities from 1e-300 down to 5e-324 and target
    mass 0.05 each more, and one ``q = 0`` token: past the enumeration, so on the clock path."""
    rng = np.random.default_rng(seed)
    p, q = rng.dirichlet(np.ones(300)), rng.dirichlet(np.ones(300))
    tiny = rng.choice(300, 10, replace=False)
    q[tiny] = [1e-310, 5e-324, 1e-300, 1e-320, 1e-305, 1e-310, 2e-310, 3e-310, 1e-309, 1e-308]
    p[tiny] += 0.05
    q[0] = 0.0
    return p / p.sum(), q / q.sum()


@pytest.mark.parametrize("k", [3, 4])
def test_denormal_draft_probabilities_follow_the_law(k):
    """Draft probabilities down to denormals (``90 / q`` overflows float64): the clock
    integral's range stops at ``RINGING_FLOOR`` and the rows still give ``p`` (chi-square) and
    the optimum without replacement (z-test), with no overflow, invalid or division warning."""
    p, q = _denormal_row()
    rows = 20_000
    g = torch.Generator().manual_seed(k)
    target = torch.as_tensor(p).expand(rows, -1).contiguous()
    draft_probs = torch.as_tensor(q).expand(rows, k, -1).contiguous()
    tokens = verifier.sample_drafts(draft_probs[:, 0], k, g)
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # underflow is the denormals' own
        out = verifier.verify(target, draft_probs, tokens, g)
    y = out.tokens.numpy()
    assert chi_square_test(np.bincount(y, minlength=300), p, ALPHA).passed
    accepted = int((tokens.numpy() == y[:, None]).any(axis=1).sum())
    assert binomial_z_test(accepted, rows, prefix_scan(p, q, k, "without_replacement").value, ALPHA).passed


def test_denormal_draft_probabilities_without_the_floor_fail(monkeypatch):
    """With the range waiting for the smallest clock, ``90 / 5e-324`` overflows and the row
    cannot be set up (as before the floor)."""
    from otm.rules.water_levels import clock_masses as wor_clock_masses

    monkeypatch.setattr(wor_clock_masses, "RINGING_FLOOR", 0.0)
    p, q = _denormal_row(seed=1)  # a row the verifier has not set up (it keeps set-ups by row)
    g = torch.Generator().manual_seed(0)
    draft_probs = torch.as_tensor(q).expand(4, 3, -1).contiguous()
    with pytest.raises(ValueError), np.errstate(all="ignore"):
        verifier.verify(torch.as_tensor(p).expand(4, -1).contiguous(), draft_probs,
                        verifier.sample_drafts(draft_probs[:, 0], 3, g), g)
