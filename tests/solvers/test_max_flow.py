"""max_flow(): a hand-computed instance, every networkx algorithm, the certificate checker
on broken flows, and random networks against the LP backends (hypothesis)."""
from __future__ import annotations

import dataclasses
from fractions import Fraction as F

import networkx as nx
import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from networkx.algorithms.flow import boykov_kolmogorov, dinitz, edmonds_karp, preflow_push, shortest_augmenting_path

from solvers.errors import InvalidProblemError, UnboundedFlowError
from solvers.max_flow import as_flow_network, check_flow, max_flow
from solvers.problem import LinearProgram
from solvers.registry import solve
from solvers.tolerances import FLOW_TOLERANCE

# Bipartite membership network: source -> tuples (1/3, 2/3) -> tokens (unbounded) -> sink (1/2, 1/2).
# Tuple x1 reaches tokens a, b; x2 only b. By hand: x1 sends 1/3 to a, x2 sends 1/2 to b: 5/6.
# Minimum cut {s, x2, b} | {x1, a, t}: s->x1 (1/3) + b->t (1/2) = 5/6.
HAND = [("s", "x1", F(1, 3)), ("s", "x2", F(2, 3)), ("x1", "a"), ("x1", "b"), ("x2", "b"),
        ("a", "t", F(1, 2)), ("b", "t", F(1, 2))]
ALGORITHMS = [preflow_push, edmonds_karp, dinitz, boykov_kolmogorov, shortest_augmenting_path]


@pytest.mark.parametrize("flow_func", ALGORITHMS, ids=lambda f: f.__name__)
def test_hand_instance_exact(flow_func):
    result = max_flow(HAND, "s", "t", flow_func=flow_func)
    assert result.value == F(5, 6)
    assert result.cut_capacity == F(5, 6)
    assert result.cut == (frozenset({"s", "x2", "b"}), frozenset({"x1", "a", "t"}))
    assert result.algorithm == flow_func.__name__
    assert result.backend == "networkx"
    assert check_flow(as_flow_network(HAND), "s", "t", result, tolerance=0) == []


def test_digraph_input_missing_capacity_is_unbounded_and_not_mutated():
    G = nx.DiGraph()
    G.add_edge("s", "a", capacity=2.0)
    G.add_edge("a", "t")  # unbounded
    G.add_edge("s", "t", capacity=0.5)
    before = nx.to_dict_of_dicts(G)
    result = max_flow(G, "s", "t")
    assert result.value == pytest.approx(2.5, abs=FLOW_TOLERANCE)
    assert nx.to_dict_of_dicts(G) == before


def test_parallel_edges_in_a_list_add_up():
    assert max_flow([("s", "t", 1), ("s", "t", 2)], "s", "t").value == 3


def test_unbounded_path_raises():
    with pytest.raises(UnboundedFlowError):
        max_flow([("s", "a"), ("a", "t"), ("s", "t", 1)], "s", "t")


def test_no_path_gives_zero_with_a_cut():
    result = max_flow([("s", "a", 1), ("b", "t", 1)], "s", "t")
    assert result.value == 0
    assert result.cut_capacity == 0
    assert "s" in result.cut[0]


@pytest.mark.parametrize("edges, source, sink, match", [
    ([("s", "t", -1)], "s", "t", ">= 0"),
    ([("s", "t", float("nan"))], "s", "t", ">= 0"),
    ([("s", "t", "big")], "s", "t", "not a number"),
    ([("s", "t", 1)], "s", "s", "same node"),
    ([("s", "t", 1)], "s", "u", "not a node"),
    ([("s",)], "s", "t", "an edge must be"),
    (nx.Graph([("s", "t")]), "s", "t", "DiGraph"),
])
def test_bad_input_is_a_typed_error(edges, source, sink, match):
    with pytest.raises(InvalidProblemError, match=match):
        max_flow(edges, source, sink)


def test_check_flow_detects_broken_certificates():
    G = as_flow_network(HAND)
    good = max_flow(HAND, "s", "t")
    flow = {u: dict(d) for u, d in good.flow.items()}
    flow["x1"]["a"] += F(1, 10)  # breaks conservation at x1 and a
    assert any("conserved" in p for p in check_flow(G, "s", "t", dataclasses.replace(good, flow=flow)))
    over = {u: dict(d) for u, d in good.flow.items()}
    over["a"]["t"] = F(1)  # above capacity 1/2
    assert check_flow(G, "s", "t", dataclasses.replace(good, flow=over))
    wrong_cut = dataclasses.replace(good, cut=(frozenset({"s"}), frozenset(set(G) - {"s"})), cut_capacity=F(1))
    assert any("not a certified maximum" in p for p in check_flow(G, "s", "t", wrong_cut))
    inflated = dataclasses.replace(good, value=F(1), cut_capacity=F(1))
    assert check_flow(G, "s", "t", inflated)


def flow_lp(G: nx.DiGraph, source, sink, exact: bool) -> LinearProgram:
    """max net outflow of the source over flows: conservation rows, 0 <= f <= capacity."""
    edges = list(G.edges)
    nodes = [n for n in G if n not in (source, sink)]
    A = np.zeros((len(nodes), len(edges)), dtype=object if exact else float)
    c = np.zeros(len(edges), dtype=object if exact else float)
    A[...] = 0
    c[...] = 0
    for k, (u, v) in enumerate(edges):
        if u in nodes:
            A[nodes.index(u), k] += 1
        if v in nodes:
            A[nodes.index(v), k] -= 1
        c[k] += (u == source) - (v == source)
    upper = np.array([G[u][v].get("capacity", np.inf) for u, v in edges], dtype=object if exact else float)
    return LinearProgram(c=c, A_eq=A if nodes else None, b_eq=np.zeros(len(nodes)) if nodes else None,
                         upper=upper, sense="max")


@st.composite
def networks(draw):
    n = draw(st.integers(2, 6))
    pairs = [(u, v) for u in range(n) for v in range(n) if u != v]
    chosen = draw(st.lists(st.sampled_from(pairs), min_size=1, max_size=12, unique=True))
    caps = draw(st.lists(st.one_of(st.integers(0, 9), st.none()), min_size=len(chosen), max_size=len(chosen)))
    return [(u, v) if cap is None else (u, v, cap) for (u, v), cap in zip(chosen, caps)], n


@given(networks())
def test_random_networks_match_the_lp(net):
    edges, n = net
    G = as_flow_network(edges)
    G.add_nodes_from([0, n - 1])
    source, sink = 0, n - 1
    try:
        result = max_flow(G, source, sink)
    except UnboundedFlowError:
        assert solve(flow_lp(G, source, sink, exact=False), backend="highs").status.name == "UNBOUNDED"
        return
    assert check_flow(G, source, sink, result, tolerance=0) == []  # integer capacities: exact
    assert solve(flow_lp(G, source, sink, exact=True), backend="exact").objective == result.value
    assert solve(flow_lp(G, source, sink, exact=False), backend="highs").objective == pytest.approx(
        result.value, abs=FLOW_TOLERANCE)


@given(st.lists(st.floats(0.0, 1.0), min_size=6, max_size=6))
@example(caps=[1.0, 1e-09, 0.01, 0.00390625, 0.0, 0.0])  # a capacity at the tolerance: cut 0.01390625 + 1e-9
@example(caps=[0.0, 1e-09, 0.0, 0.0, 0.0, 1.0])  # HiGHS passes 1e-9 through its feasibility tolerance
def test_float_capacities_are_certified(caps):
    """Float flows are certified to ``FLOW_TOLERANCE * (1 + value)`` (:func:`check_flow`): an edge
    whose residual is within that is saturated, so the cut may count it, and the LP may pass
    that much through its own tolerance. An absolute ``FLOW_TOLERANCE`` failed both examples
    by about ``1e-18``."""
    edges = [("s", "x1", caps[0]), ("s", "x2", caps[1]), ("x1", "a"), ("x1", "b"), ("x2", "b"),
             ("a", "t", caps[2]), ("b", "t", caps[3]), ("x2", "a", caps[4]), ("s", "t", caps[5])]
    result = max_flow(edges, "s", "t")
    lp_value = solve(flow_lp(as_flow_network(edges), "s", "t", exact=False), backend="highs").objective
    allowance = FLOW_TOLERANCE * (1 + abs(result.value))
    assert abs(result.value - lp_value) <= allowance
    assert abs(result.cut_capacity - result.value) <= allowance
