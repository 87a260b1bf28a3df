"""The OTM optimum as a maximum flow, certified by a minimum cut.

SpecHub (Sun et al. 2024) App. F for k = 2 drafts, generalised here to any k and any joint law
``Q`` (the argument does not use either). The network:

    source -> tuple x        capacity Q(x)       (every x in the support of Q)
    tuple x -> token y       unbounded           (every y in S(x))
    token y -> sink          capacity p(y)

A flow is exactly a feasible point of SpecHub's simplified LP (flow on ``x -> y`` is
``pi(x, y)``), so the maximum flow is ``alpha*(p, Q)``.

Min cut: let ``H`` be the tokens on the source side of a finite cut. A tuple on the
source side has all of ``S(x)`` in ``H`` (otherwise an unbounded edge crosses), so the cut
costs at least ``p(H) + sum_{x : S(x) not in H} Q(x) = p(H) + 1 - Q(all drafts in H)``,
with equality when every tuple with ``S(x) in H`` is on the source side. Hence

    alpha*(p, Q) = min_H  p(H) + 1 - Q(all drafts in H)            (docs/theory.md)

and ``OTMSolution.cut`` (the token nodes on the source side of the cut the flow
algorithm returns) attains the minimum.

Float instances are solved in exact integer arithmetic: each capacity is rounded *down*
to a multiple of ``2**-FLOW_SCALE_BITS``. networkx's algorithms on raw float capacities
leave residuals like 1e-17 that should be 0, and then certify nothing (cut != flow by
~1e-7) or crash; on integers they are exact. Rounding down keeps the flow feasible for
the float instance (a lower bound on ``alpha*``) and the cut ``H`` evaluated on the float
instance is an upper bound; ``verified_gap`` is their difference, at most
``(number of tuples + V) * 2**-FLOW_SCALE_BITS``.
"""
from __future__ import annotations

from fractions import Fraction

import networkx as nx
import numpy as np

from solvers.max_flow import max_flow

from ..draft_laws import DraftLaw
from ..errors import NotApplicableError
from ..solution import OTMSolution, cut_solution
from ._instance import distinct_positions, law_probs, target_for

SOURCE, SINK = "source", "sink"

#: Float capacities are floored to integer multiples of ``2**-FLOW_SCALE_BITS``.
FLOW_SCALE_BITS = 64

#: The network is refused, before it is built, for a law of more draft tuples than this:
#: networkx's flow took 0.17 s at 1,024 tuples and 1.7 s at 4,096 (docs/benchmarks.md,
#: table (b)), about ``n^1.7``, so some minutes here and hours at the 2 million tuples a law
#: may enumerate. The LP formulations certify their values with this flow, so they stop here too.
MAX_FLOW_TUPLES = 2**17


def _capacity(value, exact: bool):
    return value if exact else int(np.floor(np.ldexp(float(value), FLOW_SCALE_BITS)))


def flow_network(p, law: DraftLaw) -> nx.DiGraph:
    """The network above; nodes ``"source"``, ``"sink"``, ``("tuple", t)``, ``("token", y)``.
    Capacities are Fractions when ``p`` and ``law`` are exact, otherwise integers: the
    float capacity times ``2**FLOW_SCALE_BITS``, rounded down."""
    p, exact = target_for(p, law)
    Q = law_probs(law, exact)
    G = nx.DiGraph()
    G.add_nodes_from([SOURCE, SINK])
    for t, mass in enumerate(Q):
        G.add_edge(SOURCE, ("tuple", t), capacity=_capacity(mass, exact))
    rows, tokens = distinct_positions(law)
    for t, y in zip(rows, tokens):
        G.add_edge(("tuple", int(t)), ("token", int(y)))  # no capacity: unbounded
    for y in np.unique(tokens):
        G.add_edge(("token", int(y)), SINK, capacity=_capacity(p[y], exact))
    return G


def check_flow_size(law: DraftLaw) -> None:
    """:class:`NotApplicableError` for a law of more than :data:`MAX_FLOW_TUPLES` tuples
    (called by the max flow and, before they solve anything, by the LPs it certifies)."""
    if len(law.probs) > MAX_FLOW_TUPLES:
        raise NotApplicableError(
            f"the max flow over {len(law.probs):,} draft tuples (which also certifies the LPs) would take "
            f"many minutes to hours (above MAX_FLOW_TUPLES={MAX_FLOW_TUPLES:,}); the closed form "
            "(method='closed_form') covers i.i.d., without-replacement, hub and greedy drafts"
        )


def solve_max_flow(p, law: DraftLaw, flow_func=None) -> OTMSolution:
    """Optimal acceptance as a max flow (SpecHub, Sun et al. 2024, App. F, any k and any ``Q``).

    Args:
        p: ``[V]`` target; law: the joint draft law ``Q``.
        flow_func: a networkx flow algorithm (default: :func:`solvers.max_flow`'s).

    Returns:
        :class:`OTMSolution` with ``value`` = the flow value, ``plan`` = the flow on tuple ->
        token edges, ``cut`` = the sorted token set ``H`` of the min cut, ``cut_value =
        min_cut_value(p, law, H)`` and ``verified_gap = cut_value - value``: 0 for exact
        (Fraction) inputs, at most ``(tuples + V) 2**-FLOW_SCALE_BITS`` for floats (module
        docstring).

    >>> from otm.draft_laws import iid_law
    >>> float(solve_max_flow([0.5, 0.5], iid_law([1.0, 0.0], 2)).acceptance)
    0.5
    """
    check_flow_size(law)
    _, exact = target_for(p, law)
    result = max_flow(flow_network(p, law), SOURCE, SINK, flow_func=flow_func)
    scale = 1 if exact else 2.0**-FLOW_SCALE_BITS
    accepted = {
        (u[1], v[1]): mass * scale
        for u, out in result.flow.items() if isinstance(u, tuple) and u[0] == "tuple"
        for v, mass in out.items() if mass > 0
    }
    cut_tokens = np.array(sorted(node[1] for node in result.cut[0] if isinstance(node, tuple) and node[0] == "token"),
                          dtype=np.int64)
    flow_value = Fraction(result.value) if exact else result.value * scale  # an empty flow's value is the int 0
    cut_value = min_cut_value(p, law, cut_tokens)
    all_in = law.all_in_probability(cut_tokens)
    return cut_solution(flow_value, "max_flow", cut_tokens, cut_value, all_in, exact, plan=accepted,
                        details={"algorithm": result.algorithm})


def min_cut_value(p, law: DraftLaw, token_set):
    """``p(H) + 1 - Q(all drafts in H)`` for a token set ``H`` (ids or a ``[V]`` bool
    mask): an upper bound on ``alpha*(p, Q)`` for every ``H``, equal to it at a min cut."""
    p, exact = target_for(p, law)
    mask = np.zeros(law.vocab_size, dtype=bool)
    token_set = np.asarray(token_set)
    if token_set.dtype == bool:
        mask = token_set
    else:
        mask[token_set.astype(np.int64)] = True
    all_in = law.all_in_probability(mask)
    return p[mask].sum() + 1 - (all_in if exact else float(all_in))
