"""The per-node optimal rule as a node law for tree walks: at every node, a coupling that
attains the OTM optimum ``alpha*(p, Q)`` of that node (docs/theory.md, section 1), from the
exact max-flow plan (:func:`otm.optimum.solve_optimum`, ``method="max_flow"``).

Walking a tree with it (:func:`otm.sequences.tree_rules.tree_walk_law`,
``rule=optimal_node_rule("iid")``) gives the best any node-by-node rule can do on that tree
law, which separates two gaps to the tree-level optimum (:mod:`otm.sequences.tree_lp`): the
rule's own suboptimality at a node, and what verifying the tree as a whole adds.

The plan's accepted masses ``a(y) = sum_x pi(x, y) [y in S(x)]`` are the walk's
``accepted_per_token``; the coupling is completed to output law ``p`` by matching the
leftover masses (SpecHub, Sun et al., EMNLP 2024, arXiv:2411.05289, after Thm 1), which adds
no membership (the plan is already a maximum), so the step stops with ``p(y) - a(y)``.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..optimum import solve_optimum
from ..rules.base import RuleLaw


def optimal_node_law(p, q, k: int, draft: str = "iid") -> RuleLaw:
    """A :class:`otm.rules.base.RuleLaw` attaining ``alpha*(p, Q)``, ``Q`` the ``draft`` law
    of ``k`` drafts from ``q`` (exact for exact inputs).

    >>> from fractions import Fraction as F
    >>> import numpy as np
    >>> law = optimal_node_law(np.array([F(1, 2), F(1, 2)], dtype=object), np.array([F(1), F(0)], dtype=object), 2)
    >>> law.acceptance, law.details["accepted_per_token"].tolist()
    (Fraction(1, 2), [Fraction(1, 2), Fraction(0, 1)])
    """
    solution = solve_optimum(p, q, k, draft_scheme=draft, method="max_flow")
    exact = solution.exact
    p = np.asarray(p, dtype=object if exact else np.float64)
    accepted = np.array([Fraction(0)] * p.size, dtype=object) if exact else np.zeros(p.size)
    for (_, token), mass in solution.plan.items():
        accepted[token] += mass
    return RuleLaw(solution.value, p, None, {"accepted_per_token": accepted, "method": "max_flow plan",
                                              "draft": draft})


def optimal_node_rule(draft: str = "iid"):
    """``(p, q, k) -> RuleLaw``: :func:`optimal_node_law` for the ``draft`` scheme, a ``rule=``
    for :mod:`otm.sequences.tree_rules`."""
    def rule(p, q, k):
        return optimal_node_law(p, q, k, draft)

    rule.__name__ = f"optimal_node_{draft}"
    return rule
