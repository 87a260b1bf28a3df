"""otm.tables, otm.families and otm.plots figures.

Oracles: the closed forms of SpecTr (Sun et al. 2023), App. B.2 against the max-flow optimum on explicit
vectors; the closed-form per-position path against enumeration on small vocabularies;
Khisti's Example 1 condition in exact rationals; "no rule beats its own optimum".
"""
from fractions import Fraction

import numpy as np
import pytest
from matplotlib.figure import Figure

from otm import families, plots, tables
from otm.families import (
    acceptance_vs_similarity,
    bernoulli_table_vs_k,
    bernoulli_table_vs_target,
    similarity_pair,
    three_token_pair,
    three_token_table,
    toy_logit_pair,
    uniform_table,
)
from otm.tables import (
    CLOSED_FORM_RULES,
    OPTIMAL_IID,
    OPTIMAL_WOR,
    AcceptanceTable,
    acceptance_point,
    acceptance_vs_k,
    acceptance_vs_temperature,
    optimum_violations,
    position_acceptances,
)
from otm.distributions import logits_to_probs
from otm.errors import InvalidDistributionError, NotApplicableError, ShapeMismatchError, UnknownNameError
from otm.optimum import optimal_acceptance
from otm.rules import rule_acceptance
from otm.tolerances import AGREEMENT_TOLERANCE

#: Cheap rules for sweeps (the LP-based importance-sampling rules are covered elsewhere).
FAST_RULES = ("single", "rrs", "rrs_wor", "specinfer", "kseq", "spechub", "greedy")


@pytest.fixture
def logits():
    return toy_logit_pair(np.random.default_rng(7), 5)


def test_acceptance_vs_k_matches_the_core_and_marks_inapplicable_cells(logits):
    p, q = similarity_pair(*logits, 0.4)
    table = acceptance_vs_k(p, q, [1, 2, 3], rules=FAST_RULES)
    for i, k in enumerate([1, 2, 3]):
        assert table.columns[OPTIMAL_IID][i] == pytest.approx(optimal_acceptance(p, q, k), abs=AGREEMENT_TOLERANCE)
        assert table.columns["kseq"][i] == pytest.approx(float(rule_acceptance("kseq", p, q, k)), abs=AGREEMENT_TOLERANCE)
    assert np.isnan(table.columns["single"][1:]).all()
    assert not np.isnan(table.columns["single"][0])
    assert np.isnan(table.columns["spechub"][[0, 2]]).all()
    assert not np.isnan(table.columns["spechub"][1])
    assert set(table.notes) == {"single", "spechub"}
    assert optimum_violations(table) == []
    # k = 1: every rule is Leviathan's single draft, 1 - TV(p, q)
    assert table.columns["rrs"][0] == pytest.approx(np.minimum(p, q).sum(), abs=AGREEMENT_TOLERANCE)


def test_optimum_violations_catches_a_rule_above_its_optimum(logits):
    p, q = similarity_pair(*logits, 0.4)
    table = acceptance_vs_k(p, q, [2, 3], rules=("rrs", "rrs_wor"))
    broken = dict(table.columns)
    broken["rrs"] = table.columns[OPTIMAL_IID] + 1e-6
    broken["rrs_wor"] = table.columns[OPTIMAL_WOR].copy()
    broken["rrs_wor"][1] += 1e-3
    found = optimum_violations(AcceptanceTable("k", "drafts", table.values, broken))
    assert len(found) == 2
    assert found[0].startswith("rrs exceeds optimum_iid")
    assert "rrs_wor exceeds optimum_without_replacement" in found[1]


def test_identical_models_accept_everything(logits):
    table = acceptance_vs_similarity(*logits, [1.0], k=2, rules=FAST_RULES)
    for name, values in table.columns.items():
        if name != "single":
            assert values[0] == pytest.approx(1.0, abs=AGREEMENT_TOLERANCE), name


def test_temperature_sweep_uses_the_same_temperature_for_both_models(logits):
    z, w = logits
    table = acceptance_vs_temperature(z, w, [0.5, 2.0], k=2, rules=("rrs",))
    expected = optimal_acceptance(logits_to_probs(z, 2.0), logits_to_probs(w, 2.0), 2)
    assert table.columns[OPTIMAL_IID][1] == pytest.approx(expected, abs=AGREEMENT_TOLERANCE)
    assert table.parameter == "temperature"
    assert "k = 2" in table.title


def test_bernoulli_closed_form_tables_match_the_max_flow_optimum():
    ks, targets = [1, 2, 4, 8], [0.1, 0.25, 0.6, 0.9]
    by_k = bernoulli_table_vs_k(0.25, targets, ks)
    by_a = bernoulli_table_vs_target(0.25, targets, ks)
    for i, a in enumerate(targets):
        for j, k in enumerate(ks):
            flow = optimal_acceptance([1 - a, a], [0.75, 0.25], k, method="max_flow")
            assert by_k.columns[f"p = Ber({a:g})"][j] == pytest.approx(flow, abs=AGREEMENT_TOLERANCE)
            assert by_a.columns[f"k = {k}"][i] == pytest.approx(flow, abs=AGREEMENT_TOLERANCE)
    assert np.all(by_k.columns["p = Ber(0.25)"] == 1.0)  # p = q: the green line of Fig. 2


def test_uniform_table_matches_the_prefix_scan():
    table = uniform_table(12, [6, 3], [1, 2, 3])
    for m in (6, 3):
        p = np.r_[np.full(m, 1 / m), np.zeros(12 - m)]
        expected = [optimal_acceptance(p, np.full(12, 1 / 12), k) for k in (1, 2, 3)]
        np.testing.assert_allclose(table.columns[f"p = U({m}), r = {12 / m:g}"], expected, atol=AGREEMENT_TOLERANCE)


def test_three_token_pair_reproduces_example_1_exactly():
    """Khisti et al. 2025, Example 1: k = 2 reaches 1 iff p_(1) >= 1/9 and p_(1) + p_(2) >= 4/9."""
    for t in (Fraction(1, 9), Fraction(2, 9), Fraction(1, 3), Fraction(5, 9)):
        for first in (Fraction(1, 3), Fraction(1, 6)):
            if t > 1 - first:
                continue
            p, q = three_token_pair(t, first)
            s = sorted(p)
            expected = s[0] >= Fraction(1, 9) and s[0] + s[1] >= Fraction(4, 9)
            assert (optimal_acceptance(p, q, 2, method="max_flow") == 1) == expected, (t, first)
    with pytest.raises(InvalidDistributionError):
        three_token_pair(0.9)


def test_three_token_table_has_single_draft_at_k1_and_optimum_one_in_the_middle():
    table = three_token_table([0.2, 1 / 3], rules=("single", "specinfer"))
    assert table.columns[OPTIMAL_IID].tolist() == pytest.approx([1.0, 1.0])
    single = table.columns[families.SINGLE_AT_K1]
    assert single[1] == pytest.approx(1.0)
    assert single[0] < 1  # k = 1: only at p = q
    assert table.columns["specinfer"][0] < 1


def test_position_closed_forms_agree_with_enumeration(logits):
    """The closed-form path (any V) against rule enumeration (the slow reference) at V = 5."""
    rng = np.random.default_rng(3)
    rows = [similarity_pair(*logits, lam) for lam in rng.uniform(0, 1, 3)] + [(np.eye(5)[0], np.full(5, 0.2))]
    p_rows, q_rows = np.array([r[0] for r in rows]), np.array([r[1] for r in rows])
    table = position_acceptances(p_rows, q_rows, [1, 2, 3], label="toy")
    for i, (p, q) in enumerate(rows):
        reference = acceptance_vs_k(p, q, [1, 2, 3], rules=CLOSED_FORM_RULES, closed_forms=False)
        for name, values in table.columns.items():
            covered = ~np.isnan(values[i])
            np.testing.assert_allclose(values[i][covered], reference.columns[name][covered], atol=AGREEMENT_TOLERANCE, err_msg=name)
    assert np.isnan(table.columns["rrs_wor"][:, 2]).all()
    assert "no closed form" in table.notes["rrs_wor"]
    assert np.isfinite(table.columns["rrs_wor"][:, 1]).all()
    assert optimum_violations(table) == []
    mean = table.mean_over_positions()
    np.testing.assert_allclose(mean.columns["rrs"], table.columns["rrs"].mean(axis=0))
    assert np.isnan(mean.columns["spechub"][0])
    assert not np.isnan(mean.columns["spechub"][1])
    np.testing.assert_allclose(table.gap("kseq")[:, table.k_index(2)], table.columns[OPTIMAL_IID][:, 1] - table.columns["kseq"][:, 1])


def test_degenerate_inputs_give_numbers_not_nans():
    one_hot, uniform = np.array([0.0, 1.0, 0.0]), np.full(3, 1 / 3)
    table = acceptance_vs_k(one_hot, uniform, [1, 2], rules=("rrs", "kseq", "greedy"))
    np.testing.assert_allclose(table.columns["rrs"], [1 / 3, 1 - (2 / 3) ** 2], atol=AGREEMENT_TOLERANCE)
    single_token = acceptance_vs_k([1.0], [1.0], [1], rules=("rrs",))
    assert single_token.columns[OPTIMAL_IID][0] == 1.0
    assert single_token.columns["rrs"][0] == 1.0
    # without replacement past the draft support: the tail is deterministic, both tokens drafted
    wor = acceptance_vs_k([0.5, 0.5], [1.0, 0.0], [2, 3], rules=())
    assert wor.columns[OPTIMAL_WOR][0] == pytest.approx(1.0)
    assert wor.columns[OPTIMAL_IID][0] == pytest.approx(0.5)
    # k > V drafts without replacement do not exist: NaN with a reason, not an error
    assert np.isnan(wor.columns[OPTIMAL_WOR][1])
    assert OPTIMAL_WOR in wor.notes


def test_bad_input_raises_typed_errors(logits):
    p, q = similarity_pair(*logits, 0.5)
    with pytest.raises(UnknownNameError, match="unknown rule"):
        acceptance_point(p, q, 2, rules=("nope",))
    with pytest.raises(UnknownNameError, match="optimum column"):
        acceptance_point(p, q, 2, rules=(), optima=("best",))
    with pytest.raises(InvalidDistributionError, match="similarity"):
        similarity_pair(*logits, 1.5)
    with pytest.raises(ShapeMismatchError):
        acceptance_vs_temperature(np.zeros(3), np.zeros(4), [1.0], 2)
    with pytest.raises(ShapeMismatchError):
        position_acceptances(p[None], q[None, :4], [1])
    with pytest.raises(NotApplicableError, match="no closed form"):
        position_acceptances(p[None], q[None], [2], rules=("importance_sampling",))
    with pytest.raises(InvalidDistributionError):
        acceptance_vs_k([0.5, 0.6], q[:2], [1])
    table = position_acceptances(p[None], q[None], [2], rules=("rrs",))
    with pytest.raises(UnknownNameError, match="k=3"):
        table.k_index(3)
    with pytest.raises(UnknownNameError, match="no column"):
        table.gap("kseq")


def test_to_text_shows_na_and_notes(logits):
    p, q = similarity_pair(*logits, 0.5)
    text = acceptance_vs_k(p, q, [1, 2], rules=("spechub",)).to_text()
    assert "n/a" in text
    assert "note: spechub" in text


def _labelled(fig: Figure) -> None:
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert ax.get_xlabel()
    assert ax.get_ylabel()
    assert ax.get_title()
    assert "[" in ax.get_xlabel()
    assert "[" in ax.get_ylabel()  # units
    assert ax.get_legend() is not None
    assert ax.get_legend().get_texts()


def test_every_plot_is_labelled(logits):
    p, q = similarity_pair(*logits, 0.5)
    table = acceptance_vs_k(p, q, [1, 2, 3], rules=("rrs", "spechub"))
    _labelled(plots.plot_acceptance_table(table))
    _labelled(plots.plot_gap_table(table))
    positions = position_acceptances(np.array([p, q]), np.array([q, p]), [1, 2], rules=("rrs", "kseq"))
    _labelled(plots.plot_position_acceptance(positions, 2))
    _labelled(plots.plot_position_gaps(positions, 2))
    rows = [{"id": "a.x", "status": "holds", "worst_slack": 0.0}, {"id": "a.y", "status": "fails", "worst_slack": -0.1}]
    _labelled(plots.plot_check_slacks(rows))
    _labelled(plots.plot_output_laws(p, {"mine": q}))
    _labelled(plots.plot_acceptance_intervals({"mine": (0.5, (0.45, 0.55)), "other": (0.6, (0.58, 0.62))}, 0.57, expected=0.5))
    with pytest.raises(UnknownNameError):
        plots.plot_acceptance_table(table, columns=["nope"])


def test_module_exports():
    for module in (tables, families, plots):
        assert set(module.__all__) <= set(dir(module))


def test_default_sweeps_answer_in_seconds_by_skipping_lp_rules():
    """acceptance_vs_k over k = 1..8 at V = 6 with every rule: the LP rules would enumerate
    6^8 tuples; they are skipped with the estimate instead of running for hours."""
    rng = np.random.default_rng(0)
    p, q = rng.dirichlet(np.ones(6)), rng.dirichlet(np.ones(6))
    table = acceptance_vs_k(p, q, range(1, 9))
    assert np.isnan(table.columns["importance_sampling"][-1])
    assert "skipped" in table.notes["importance_sampling"]
    assert np.isfinite(table.columns["importance_sampling"][0])
    assert np.isfinite(table.columns["rrs"]).all()
    # optimal_latent enumerates up to k^k latent sequences per tuple: k = 5, 6 (720 tuples)
    # would take minutes, so they are skipped too; k > 6 is not defined without replacement.
    latent = table.columns["optimal_latent"]
    assert np.isfinite(latent[:4]).all()
    assert np.isnan(latent[4])
    assert "skipped" in table.notes["optimal_latent"]
