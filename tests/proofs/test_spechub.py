"""SpecHub (Sun et al. 2024) checks hold on the real core and fail on broken ingredients."""
from __future__ import annotations

import networkx as nx
import numpy as np

from otm.formulations.full_lp import solve_full_lp
from otm.formulations.simplified_lp import reconstruct_coupling, solve_simplified_lp
from proofs import spechub
from tests.proofs.proofs_support import law_for_wrong_target, rule_swapped, shifted_solver

N = 6


def rng():
    return np.random.default_rng(1)


def test_thm1_holds_and_fails_on_a_shifted_optimum():
    assert spechub.check_thm1(N, rng()).status == "holds"
    assert spechub.check_thm1(N, rng(), simplified=shifted_solver(solve_simplified_lp, -0.01)).status == "fails"


def test_reconstruction_holds_and_fails_without_renormalisation():
    assert spechub.check_thm1_reconstruction(N, rng()).status == "holds"

    def unnormalised(p, law, accepted):
        plan = np.asarray(reconstruct_coupling(p, law, accepted), dtype=np.float64)
        member = np.zeros(plan.shape, dtype=bool)
        member[np.arange(len(plan))[:, None], law.tuples] = True
        return np.where(member, plan, 1.5 * plan)  # residual mass not renormalised

    assert spechub.check_thm1_reconstruction(N, rng(), reconstruct=unnormalised).status == "fails"


def test_thm2_and_cor1_hold_and_fail_on_a_perturbed_rule():
    assert spechub.check_thm2(N, rng()).status == "holds"
    assert spechub.check_cor1(N, rng()).status == "holds"
    assert spechub.check_thm2(N, rng(), law_fn=law_for_wrong_target).status == "fails"
    assert spechub.check_cor1(N, rng(), law_fn=law_for_wrong_target).status == "fails"


def test_thm3_thm4_hold_and_fail_when_spechub_is_replaced_by_one_draft():
    weak = rule_swapped({"spechub": ("single", 1)})
    assert spechub.check_thm3(N, rng()).status == "holds"
    assert spechub.check_thm3(N, rng(), acceptance_fn=weak).status == "fails"
    assert spechub.check_thm4(N, rng()).status == "holds"
    assert spechub.check_thm4(N, rng(), acceptance_fn=weak).status == "fails"


def test_fig5_is_exact_and_fails_for_the_wrong_rule():
    check = spechub.check_fig5()
    assert check.status == "holds"
    assert check.worst_slack == 0
    assert spechub.check_fig5(acceptance_fn=rule_swapped({"rrs_wor": ("rrs", 2)})).status == "fails"


def test_appendix_f_holds_and_fails_without_the_pair_edges():
    assert spechub.check_appendix_f(N, rng()).status == "holds"

    def no_pair_edges(p, law):
        graph = spechub.appendix_f_graph(p, law)
        graph.remove_edges_from([(u, v) for u, v in list(graph.edges) if u != "s" and v != "t"])
        return graph

    assert spechub.check_appendix_f(N, rng(), graph_fn=no_pair_edges).status == "fails"


def test_appendix_f_graph_shape():
    from otm.draft_laws import table_law

    law = table_law([[0, 1], [1, 1]], [0.25, 0.75], 2)
    graph = spechub.appendix_f_graph(np.array([0.5, 0.5]), law)
    assert graph.edges["s", 0]["capacity"] == 0.25
    assert graph.edges["s", 1]["capacity"] == 0.75
    assert graph.edges[0, 1]["capacity"] == 0.25
    assert not graph.has_edge(1, 1)
    assert nx.maximum_flow_value(graph, "s", "t") == float(solve_full_lp([0.5, 0.5], law).acceptance)
