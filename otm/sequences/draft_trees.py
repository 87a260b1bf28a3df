"""Random draft trees: ``k`` drafts per node, drawn from the node's draft law, to depth ``d``.

At every node ``s`` (the prefix of tokens from the root) with ``|s| < d`` the draft model
proposes ``k`` children ``(x_1..x_k)`` from a joint draft law built from ``q(. | s)``
(:func:`otm.draft_laws.draft_law`: ``"iid"``, ``"without_replacement"``, ``"hub"``,
``"greedy"``, or any callable ``(q, k) -> DraftLaw``), independently of everything else; each child, duplicates included,
gets its own subtree. This is the tree of SpecTr (Sun et al., NeurIPS 2023,
arXiv:2310.15141, Sec. 7), SpecInfer (Miao et al. 2024, arXiv:2305.09781) and Traversal
Verification (Weng et al. 2025, arXiv:2505.12398).

A verifier that emits an accepted path plus one token can only use which token paths the
tree holds, so for the tree-level optimum the law of the **path set** (the set of non-empty
prefixes present) is what matters: :func:`path_set_law`.
"""
from __future__ import annotations

from collections.abc import Callable

from ..draft_laws import ONE_Q_SCHEMES, DraftLaw, draft_law
from ..errors import UnknownNameError
from . import trampoline
from .model import SequenceModel, check_block_length


def node_draft_law_function(draft) -> Callable:
    """The ``(q, k) -> DraftLaw`` constructor of a scheme name
    (:data:`otm.draft_laws.ONE_Q_SCHEMES`) or a callable."""
    if callable(draft):
        return draft
    if draft not in ONE_Q_SCHEMES:
        raise UnknownNameError(f"unknown draft scheme {draft!r}; known: {', '.join(ONE_Q_SCHEMES)}, "
                               "or pass a callable (q, k) -> DraftLaw")
    return lambda q, k: draft_law(draft, q, k)


def sequential_conditionals(law: DraftLaw) -> dict:
    """``{drawn: {token: probability}}``: the law of the next draft given the drafts
    ``drawn`` so far (a tuple, ``()`` for the first), from the joint law's prefix masses.
    For i.i.d. drafts every entry is ``q``; without replacement, ``q`` renormalised off the
    drawn tokens (:func:`otm.draft_laws.without_replacement_law`)."""
    prefix_mass: dict = {}
    for row, prob in zip(law.tuples.tolist(), law.probs):
        for j in range(law.k + 1):
            prefix_mass[tuple(row[:j])] = prefix_mass.get(tuple(row[:j]), 0) + prob
    out: dict = {}
    for prefix, mass in prefix_mass.items():
        if prefix:
            out.setdefault(prefix[:-1], {})[prefix[-1]] = mass / prefix_mass[prefix[:-1]]
    return out


def node_draft_laws(model: SequenceModel, depth: int, k: int, draft="without_replacement") -> dict:
    """``{s: DraftLaw}`` for every prefix ``s`` with ``|s| < depth`` (without replacement a
    node can hold a token with ``q = 0`` once the support is exhausted, so every prefix may
    be a node)."""
    depth = check_block_length(depth, "depth")
    model.require_length(depth + 1, f"a tree of depth {depth}")
    build = node_draft_law_function(draft)
    return {s: build(model.draft(s), k) for n in range(depth) for s in model.sequences(n)}


def path_set_law(model: SequenceModel, depth: int, k: int, draft="without_replacement") -> dict:
    """``{frozenset of paths: probability}``: the law of the set of token paths (non-empty
    prefixes) of a random draft tree of ``depth`` levels with ``k`` drafts per node.

    >>> from fractions import Fraction as F
    >>> from otm.sequences.model import context_independent_model
    >>> m = context_independent_model([F(1, 2), F(1, 2)], [F(1, 2), F(1, 2)], 2)
    >>> law = path_set_law(m, 1, 2, "iid")
    >>> sorted((sorted(s), p) for s, p in law.items())
    [([(0,)], Fraction(1, 4)), ([(0,), (1,)], Fraction(1, 2)), ([(1,)], Fraction(1, 4))]
    """
    laws = node_draft_laws(model, depth, k, draft)
    cache: dict = {}

    def subtree(s: tuple):
        """The path-set law of the subtree at ``s`` (a :mod:`otm.sequences.trampoline` step)."""
        if len(s) == depth:
            return {frozenset(): model.one()}
        if s not in cache:
            law = laws[s]
            out: dict = {}
            for row, prob in zip(law.tuples.tolist(), law.probs):
                sets = {frozenset(): prob}
                for c in row:
                    child = s + (c,)
                    below = yield subtree(child)
                    sets = _union_product(sets, {t | {child}: m for t, m in below.items()})
                for t, m in sets.items():
                    out[t] = out.get(t, 0) + m
            cache[s] = out
        return cache[s]

    return trampoline.run(subtree(()))


def _union_product(left: dict, right: dict) -> dict:
    """The law of ``L | R`` for independent random sets ``L ~ left``, ``R ~ right``."""
    out: dict = {}
    for a, ma in left.items():
        for b, mb in right.items():
            out[a | b] = out.get(a | b, 0) + ma * mb
    return out
