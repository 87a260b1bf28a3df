"""Node-by-node verification of a draft tree with any selection rule of the registry, exactly.

The walk (SpecTr, Sun et al., NeurIPS 2023, arXiv:2310.15141, Alg. 3; SpecInfer, Miao et
al. 2024, arXiv:2305.09781): at node ``s`` the rule sees the ``k`` drafted children
``X ~ Q_s`` (its own joint draft law built from ``q(. | s)``) and outputs ``Y`` with law
``p(. | s)`` (a lossless rule). If ``Y`` is one of the drafted children (membership
acceptance, :class:`otm.rules.base.RuleLaw`) the walk moves to that child; otherwise the
step ends and emits the accepted path followed by ``Y``. At depth ``d`` the bonus token
``y ~ p(. | s)`` ends the step.

Exact law (derived here): a child's subtree is drafted independently of the rule's decision
at its parent, so with ``a_s(y) = P(Y = y, y in S(X))`` (``details["accepted_per_token"]``)
and ``r_s`` the rule's output law,

    reach(()) = 1,   reach(s y) = reach(s) a_s(y),
    m(s y) = reach(s) (r_s(y) - a_s(y))  (|s| < d),   m(s y) = reach(s) p(y | s)  (|s| = d),

and ``E[tau] = sum_{|u| >= 1} reach(u)``, i.e. the dynamic programme
``E(s) = sum_y a_s(y) (1 + E(s y))``, ``E = 0`` at depth ``d``. With ``k = 1`` and the rule
``"single"`` this is token-wise verification of a chain.
"""
from __future__ import annotations

from ..errors import NotApplicableError
from ..rules import rule_law
from .model import SequenceModel, check_block_length
from .output_law import OutputLaw, add_mass


def node_law_function(rule, **params):
    """``(p, q, k) -> RuleLaw`` for a registry name (:func:`otm.rules.rule_law`) or a callable
    with that signature (your own verifier's exact law; ``params`` go to it too)."""
    if callable(rule):
        return lambda p, q, k: rule(p, q, k, **params)
    return lambda p, q, k: rule_law(rule, p, q, k, **params)


def node_tables(model: SequenceModel, depth: int, k: int, rule, **params) -> dict:
    """``{s: (a_s, r_s)}`` (each ``[V]``) for every node ``s`` the walk reaches with
    positive probability, ``|s| < depth``."""
    depth = check_block_length(depth, "depth")
    model.require_length(depth + 1, f"a tree of depth {depth}")
    law_of = node_law_function(rule, **params)
    tables: dict = {}
    frontier = [()]
    while frontier:
        s = frontier.pop()
        law = law_of(model.target(s), model.draft(s), k)
        accepted = law.details.get("accepted_per_token")
        if accepted is None:
            raise NotApplicableError(f"rule {rule!r} reports no details['accepted_per_token'] (its law is not enumerated), "
                                     "so the walk cannot continue at the accepted child; use an enumerated rule")
        tables[s] = (accepted, law.output_distribution)
        if len(s) + 1 < depth:
            frontier.extend(s + (y,) for y in range(model.vocab_size) if accepted[y])
    return tables


def tree_walk_law(model: SequenceModel, depth: int, k: int, rule, **params) -> OutputLaw:
    """The exact law of the walk's output (module docstring).

    >>> from fractions import Fraction as F
    >>> from otm.sequences.model import context_independent_model
    >>> m = context_independent_model([F(1, 3), F(2, 3)], [F(2, 3), F(1, 3)], 3)
    >>> tree_walk_law(m, 2, 1, "single").expected_accepted()     # token-wise on a chain
    Fraction(10, 9)
    """
    tables = node_tables(model, depth, k, rule, **params)
    masses: dict = {}
    reach = {(): model.one()}
    for s in sorted(tables, key=len):
        accepted, output = tables[s]
        for y in range(model.vocab_size):
            add_mass(masses, s + (y,), reach[s] * (output[y] - accepted[y]))
            if accepted[y]:
                reach[s + (y,)] = reach[s] * accepted[y]
    for s, r in reach.items():
        if len(s) == depth:
            p = model.target(s)
            for y in range(model.vocab_size):
                add_mass(masses, s + (y,), r * p[y])
    return OutputLaw(masses, f"tree walk ({rule if isinstance(rule, str) else getattr(rule, '__name__', 'custom')})")


def tree_walk_expected_accepted(model: SequenceModel, depth: int, k: int, rule, **params):
    """``E[tau]`` of the walk by the dynamic programme ``E(s) = sum_y a_s(y) (1 + E(s y))``."""
    tables = node_tables(model, depth, k, rule, **params)
    expected: dict = {}  # E(s), deepest nodes first (a child reached with a_s(y) > 0 is a node or at depth d)
    for s in sorted(tables, key=len, reverse=True):
        accepted = tables[s][0]
        expected[s] = sum((accepted[y] * (1 + (expected[s + (y,)] if len(s) + 1 < depth else model.zero()))
                           for y in range(model.vocab_size) if accepted[y]), model.zero())
    return expected[()]
