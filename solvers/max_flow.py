"""Maximum flow with its minimum-cut certificate, on networkx's flow algorithms.

Max-flow / min-cut theorem: the largest ``source -> sink`` flow value equals the smallest
capacity of an edge cut separating them. :func:`max_flow` returns both and checks that
they agree (:func:`check_flow`), so a returned value is certified.

The algorithm is a parameter like in ``networkx.maximum_flow`` (``flow_func``); the default
is :func:`networkx.algorithms.flow.dinitz` (``O(V^2 E)``, blocking flows on level graphs).
networkx's own default, ``preflow_push``, has a better worst-case bound but crashes with a
``KeyError`` on float capacities near the subnormal range (networkx 3.6.1; found by the
hypothesis test ``test_float_capacities_are_certified`` with a capacity of 1.1e-308), and
probabilities that small do occur in real distributions.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from fractions import Fraction
import math

import networkx as nx
from networkx.algorithms.flow import dinitz
from networkx.algorithms.flow.utils import build_flow_dict

from solvers.errors import InvalidProblemError, SolverError, UnboundedFlowError
from solvers.tolerances import FLOW_TOLERANCE

Node = Hashable
Number = float | int | Fraction


@dataclass(frozen=True)
class FlowResult:
    """A maximum flow and a minimum cut.

    ``flow[u][v]`` is the flow on edge ``(u, v)`` (every edge of the network appears);
    ``cut = (source_side, sink_side)`` partitions the nodes; ``cut_capacity`` is the total
    capacity of the edges from ``source_side`` to ``sink_side`` and equals ``value``.
    """

    value: Number
    flow: dict[Node, dict[Node, Number]]
    cut: tuple[frozenset, frozenset]
    cut_capacity: Number
    algorithm: str
    backend: str = "networkx"


def _capacity(value, edge) -> Number | None:
    """A finite capacity, or ``None`` for unbounded (``None`` or ``+inf``)."""
    if value is None:
        return None
    if not isinstance(value, (int, float, Fraction)) and not hasattr(value, "__float__"):
        raise InvalidProblemError(f"capacity of edge {edge} is not a number: {value!r}")
    number = float(value)
    if math.isnan(number) or number < 0:
        raise InvalidProblemError(f"capacity of edge {edge} is {value!r}; capacities must be >= 0 (omit for unbounded)")
    if math.isinf(number):
        return None
    return value if isinstance(value, (int, Fraction)) else number


def as_flow_network(edges_or_graph, capacity: str = "capacity") -> nx.DiGraph:
    """A fresh ``DiGraph`` whose finite capacities sit in ``"capacity"`` (unbounded edges
    carry no attribute, the networkx convention).

    ``edges_or_graph`` is a ``networkx.DiGraph`` (attribute ``capacity``, missing = unbounded)
    or an iterable of ``(u, v)`` (unbounded), ``(u, v, capacity)`` or ``(u, v, {capacity: c})``;
    parallel edges of a list are merged by adding their capacities.
    """
    out = nx.DiGraph()
    if isinstance(edges_or_graph, nx.Graph):
        if edges_or_graph.is_multigraph() or not edges_or_graph.is_directed():
            raise InvalidProblemError("give a networkx.DiGraph (convert a Graph with G.to_directed(); "
                                      "merge parallel edges of a MultiDiGraph)")
        out.add_nodes_from(edges_or_graph.nodes)
        items = ((u, v, d.get(capacity)) for u, v, d in edges_or_graph.edges(data=True))
    else:
        items = []
        for edge in edges_or_graph:
            if len(edge) == 2:
                items.append((edge[0], edge[1], None))
            elif len(edge) == 3:
                third = edge[2]
                items.append((edge[0], edge[1], third.get(capacity) if isinstance(third, dict) else third))
            else:
                raise InvalidProblemError(f"an edge must be (u, v), (u, v, capacity) or (u, v, attrs); got {edge!r}")
    for u, v, raw in items:
        cap = _capacity(raw, (u, v))
        if out.has_edge(u, v):
            old = out[u][v].get("capacity")
            if old is None or cap is None:
                out[u][v].pop("capacity", None)
            else:
                out[u][v]["capacity"] = old + cap
        elif cap is None:
            out.add_edge(u, v)
        else:
            out.add_edge(u, v, capacity=cap)
    return out


def _residual_cut(G: nx.DiGraph, source: Node, flow: dict, tolerance: float) -> tuple[frozenset, frozenset]:
    """Nodes reachable from ``source`` along edges with residual capacity above
    ``tolerance * (1 + capacity)`` (forward) or flow above ``tolerance`` (backward)."""
    seen, stack = {source}, [source]
    while stack:
        u = stack.pop()
        nexts = [v for v in G.successors(u)
                 if "capacity" not in G[u][v] or G[u][v]["capacity"] - flow[u][v] > tolerance * (1 + G[u][v]["capacity"])]
        nexts += [w for w in G.predecessors(u) if flow[w][u] > tolerance]
        for v in nexts:
            if v not in seen:
                seen.add(v)
                stack.append(v)
    return frozenset(seen), frozenset(set(G) - seen)


def check_flow(G: nx.DiGraph, source: Node, sink: Node, result: FlowResult, tolerance: float = FLOW_TOLERANCE) -> list[str]:
    """Violations of ``result`` as a certified maximum flow of ``G`` (empty list: valid).

    Checks ``0 <= flow <= capacity`` on every edge, conservation at every node other than
    ``source`` and ``sink``, ``value`` = net flow out of ``source``, that ``cut`` separates
    them, and ``cut_capacity`` = sum of capacities from source side to sink side = ``value``
    (each up to ``tolerance * (1 + scale)``; exact for int/Fraction capacities).
    """
    caps = [d["capacity"] for _, _, d in G.edges(data=True) if "capacity" in d]
    scale = 1 + float(max(caps, default=0))
    slack = tolerance * scale
    problems = []
    for u, v, d in G.edges(data=True):
        f = result.flow.get(u, {}).get(v)
        if f is None:
            problems.append(f"edge ({u!r}, {v!r}) missing from the flow")
        elif f < -slack or ("capacity" in d and f - d["capacity"] > slack):
            problems.append(f"flow {f} on ({u!r}, {v!r}) outside [0, {d.get('capacity', 'inf')}]")
    if problems:
        return problems
    net = {n: sum(result.flow[n][v] for v in G.successors(n)) - sum(result.flow[w][n] for w in G.predecessors(n)) for n in G}
    problems += [f"flow not conserved at {n!r}: net outflow {net[n]}" for n in G
                 if n not in (source, sink) and abs(net[n]) > slack]
    if abs(net[source] - result.value) > slack:
        problems.append(f"value {result.value} != net outflow of the source {net[source]}")
    S, T = result.cut
    if source not in S or sink not in T or S & T or (S | T) != set(G):
        problems.append("cut does not partition the nodes with the source and sink on separate sides")
        return problems
    crossing = [(u, v) for u in S for v in G.successors(u) if v in T]
    if any("capacity" not in G[u][v] for u, v in crossing):
        problems.append("the cut crosses an unbounded edge")
    cut_cap = sum((G[u][v]["capacity"] for u, v in crossing), 0)
    if abs(cut_cap - result.cut_capacity) > slack:
        problems.append(f"cut_capacity {result.cut_capacity} != capacity of the cut edges {cut_cap}")
    if abs(cut_cap - result.value) > tolerance * (1 + abs(float(result.value))):
        problems.append(f"cut capacity {cut_cap} != flow value {result.value}: not a certified maximum")
    return problems


def max_flow(
    edges_or_graph,
    source: Node,
    sink: Node,
    flow_func: Callable | None = None,
    capacity: str = "capacity",
    tolerance: float = FLOW_TOLERANCE,
) -> FlowResult:
    """Maximum ``source -> sink`` flow and a minimum cut, certified (:func:`check_flow`).

    ``flow_func`` is any networkx flow algorithm (``dinitz`` by default,
    ``preflow_push``, ``edmonds_karp``, ``shortest_augmenting_path``, ``boykov_kolmogorov``).
    Integer or :class:`~fractions.Fraction` capacities give exact results.

    Raises :class:`InvalidProblemError` for bad input, :class:`UnboundedFlowError` when an
    unbounded path joins source and sink, and :class:`SolverError` if the algorithm's answer
    fails its certificate.

    >>> r = max_flow([("s", "a", 2), ("a", "t", 1), ("s", "t", 1)], "s", "t")
    >>> r.value, sorted(r.cut[0])
    (2, ['a', 's'])
    """
    G = as_flow_network(edges_or_graph, capacity)
    for name, node in (("source", source), ("sink", sink)):
        if node not in G:
            raise InvalidProblemError(f"{name} {node!r} is not a node of the network")
    if source == sink:
        raise InvalidProblemError(f"source and sink are the same node {source!r}")
    func = flow_func or dinitz
    try:
        R = func(G, source, sink, capacity="capacity")
    except nx.NetworkXUnbounded as exc:
        raise UnboundedFlowError(f"an unbounded path joins {source!r} to {sink!r}: the maximum flow is infinite") from exc
    flow = build_flow_dict(G, R)
    cut = _residual_cut(G, source, flow, tolerance)
    cut_capacity = sum((G[u][v]["capacity"] for u in cut[0] for v in G.successors(u)
                        if v in cut[1] and "capacity" in G[u][v]), 0)
    result = FlowResult(R.graph["flow_value"], flow, cut, cut_capacity, getattr(func, "__name__", str(func)))
    problems = check_flow(G, source, sink, result, tolerance)
    if problems:
        raise SolverError(f"{result.algorithm} returned an uncertified flow: " + "; ".join(problems))
    return result
