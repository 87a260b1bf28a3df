"""Traversal verification (Weng, Hu, Chen, Liu, Mei, Qiu, Tian, Shi, "Traversal Verification
for Speculative Tree Decoding", NeurIPS 2025, arXiv:2505.12398), exactly.

The algorithm as implemented (our reading of the paper; docs/sequences.md, section 5, says
which steps the text leaves implicit). Every node ``s`` of the draft tree keeps a target
law ``P_s`` (initially ``p(. | s)``), a draft law ``Q_s`` (the law its next child was drawn
from) and a weight ``alpha_s``; ``alpha_root = 1`` and a child ``c`` gets
``alpha_{s c} = min(1, alpha_s P_s(c) / Q_s(c))`` (block verification's weight along the
path). Repeat: take the first leaf of the remaining tree in post-order (depth first,
children in draft order) and accept the path to it with probability ``alpha_leaf``; if
accepted, emit the path and a token from ``P_leaf`` and stop. Otherwise delete the leaf and
update its parent ``s`` (``Q_j`` = the law the deleted child was drawn from):

    S = sum_y (alpha_s P_s(y) - Q_j(y))^+,   P_s <- norm((alpha_s P_s - Q_j)^+),
    alpha_s <- S / (S + 1 - alpha_s),        Q_s <- law of the next child,

and recompute the weights below ``s``. On a chain this is block verification (Sun et al.
2025, arXiv:2403.10444): the update gives ``alpha_s = h``, its stop probability.

Why it is lossless (proof in docs/sequences.md): by induction from the leaves, the subtree
of a child with input weight ``a`` is accepted (the path ends in it) with probability ``a``
and then emits tokens whose target extension is ``P(. | s c)``; so at its parent the
children are single-draft speculative sampling steps on the augmented target
``(alpha_s P_s, stop: 1 - alpha_s)``, and the updates above are recursive rejection
sampling (SpecHub, Sun et al., EMNLP 2024, arXiv:2411.05289, Alg. 1) on it, with the next
child's conditional law as proposal: lossless for any sequential draft law (i.i.d., without
replacement, ...).

The exact law is computed by the same recursion: a subtree's outcome depends only on its
root's prefix and input weight, so it is memoised on ``(prefix, weight)``. Every
recursion here runs on :func:`otm.sequences.trampoline.run`, so any depth works.
"""
from __future__ import annotations

from . import trampoline
from ._arith import clip_to_one, normalised, positive_part, total
from .draft_trees import node_draft_laws, sequential_conditionals
from .model import SequenceModel
from .output_law import OutputLaw, add_mass


def updated_after_rejection(alpha, target_law, proposal):
    """``(alpha', P')`` after a child drawn from ``proposal`` (``[V]``) was rejected at a node
    with weight ``alpha`` and target law ``target_law`` (module docstring)."""
    diff = alpha * target_law - proposal
    excess = total(positive_part(diff))
    rejected = excess + 1 - alpha  # = sum (proposal - alpha P)^+, > 0 whenever a rejection is possible
    if not rejected:  # alpha = 1 and P = proposal: no child can be rejected, the state is never used
        return alpha, target_law
    return excess / rejected, normalised(positive_part(diff))


def traversal_law(model: SequenceModel, depth: int, k: int, draft="without_replacement") -> OutputLaw:
    """The exact law of traversal verification's output on a random draft tree of ``depth``
    levels, ``k`` drafts per node from ``draft`` (:func:`otm.sequences.draft_trees.node_draft_law_function`;
    the paper's trees draw siblings without replacement, which is the default).

    >>> from fractions import Fraction as F
    >>> from otm.sequences.model import context_independent_model
    >>> m = context_independent_model([F(1, 3), F(2, 3)], [F(2, 3), F(1, 3)], 3)
    >>> traversal_law(m, 2, 1).expected_accepted()      # a chain: block verification's 11/9
    Fraction(11, 9)
    """
    laws = node_draft_laws(model, depth, k, draft)
    conditionals = {s: sequential_conditionals(law) for s, law in laws.items()}
    cache: dict = {}

    def subtree(s: tuple, weight):
        """``({suffix: mass}, P(reject s))`` for the subtree at ``s`` with input weight
        ``weight`` (a :mod:`otm.sequences.trampoline` step, like :func:`children`)."""
        key = (s, weight)
        if key not in cache:
            if len(s) == depth:
                p = model.target(s)
                cache[key] = ({(y,): weight * p[y] for y in range(model.vocab_size) if p[y]}, 1 - weight)
            else:
                accepted: dict = {}
                rejected = yield children(s, (), weight, model.target(s), model.one(), accepted)
                cache[key] = (accepted, rejected)
        return cache[key]

    def children(s, drawn, alpha, target_law, prob, accepted):
        """Process the children after ``drawn`` were rejected; returns P(reject s) * ``prob``."""
        if len(drawn) == k:  # s is now a leaf: accept with alpha, the token from its residual
            for y in range(model.vocab_size):
                add_mass(accepted, (y,), prob * alpha * target_law[y])
            return prob * (1 - alpha)
        law = conditionals[s][drawn]
        alpha_next, target_next = updated_after_rejection(alpha, target_law, _vector(law, model))
        rejected = model.zero()
        for c, q_c in law.items():
            weight = clip_to_one(alpha * target_law[c] / q_c)
            sub_accepted, sub_rejected = yield subtree(s + (c,), weight)
            for suffix, m in sub_accepted.items():
                add_mass(accepted, (c,) + suffix, prob * q_c * m)
            if sub_rejected:
                rejected += (yield children(s, drawn + (c,), alpha_next, target_next, prob * q_c * sub_rejected, accepted))
        return rejected

    accepted, _ = trampoline.run(subtree((), model.one()))
    return OutputLaw(accepted, "traversal")


def _vector(law: dict, model: SequenceModel):
    """``[V]`` a ``{token: probability}`` law as a vector of the model's number type."""
    out = model.target(()) * 0
    for token, prob in law.items():
        out[token] = prob
    return out


def traversal_law_by_enumeration(model: SequenceModel, depth: int, k: int, draft="without_replacement") -> OutputLaw:
    """The same law by running the algorithm literally (module docstring) on every draft tree
    and every accept/reject outcome: leaves taken in post-order, deleted, parents updated,
    weights recomputed. The slow reference :func:`traversal_law` is tested against
    (``k ** depth`` leaves per tree; small instances only)."""
    laws = node_draft_laws(model, depth, k, draft)
    conditionals = {s: sequential_conditionals(law) for s, law in laws.items()}
    masses: dict = {}

    def trees(s: tuple):
        """``[(tree, probability)]``; a tree is ``(prefix, (child trees))`` (a trampoline step)."""
        if len(s) == depth:
            return [((s, ()), model.one())]
        out = []
        law = laws[s]
        for row, prob in zip(law.tuples.tolist(), law.probs):
            combos = [((), prob)]
            for c in row:
                below = yield trees(s + (c,))
                combos = [(done + (child,), m * mc) for done, m in combos for child, mc in below]
            out.extend(((s, children), m) for children, m in combos)
        return out

    def first_leaf(node, deleted):
        """The post-order first leaf below ``node`` among the nodes not deleted: ``[root..leaf]``."""
        path = [node]
        while True:
            remaining = [c for c in path[-1][1] if id(c) not in deleted]
            if not remaining:
                return path
            path.append(remaining[0])

    def reweigh(node, state, deleted):
        """Recompute the weights down the chain of first remaining children below ``node``
        (the next leaf tested lies on it; other weights are recomputed when their turn comes)."""
        while remaining := [c for c in node[1] if id(c) not in deleted]:
            alpha, target_law, drawn = state[id(node)]
            child = remaining[0]
            q_c = conditionals[node[0]][drawn][child[0][-1]]
            child_alpha = clip_to_one(alpha * target_law[child[0][-1]] / q_c)
            state[id(child)] = (child_alpha, state[id(child)][1], state[id(child)][2])
            node = child

    def test_leaves(root, parents, state, prob):
        """Test the first leaf, delete it on rejection and update its parent, until a leaf
        is accepted surely or the root is reached."""
        deleted: frozenset = frozenset()
        while True:
            path = first_leaf(root, deleted)
            leaf = path[-1]
            alpha, target_law, _ = state[id(leaf)]
            for y in range(model.vocab_size):
                add_mass(masses, leaf[0] + (y,), prob * alpha * target_law[y])
            if alpha == 1 or len(path) == 1:
                return
            parent = parents[id(leaf)]
            p_alpha, p_target, drawn = state[id(parent)]
            proposal = _vector(conditionals[parent[0]][drawn], model)
            new_alpha, new_target = updated_after_rejection(p_alpha, p_target, proposal)
            state = dict(state)
            state[id(parent)] = (new_alpha, new_target, drawn + (leaf[0][-1],))
            deleted = deleted | {id(leaf)}
            reweigh(parent, state, deleted)
            prob = prob * (1 - alpha)

    for tree, prob in trampoline.run(trees(())):
        parents, state, stack = {}, {}, [tree]
        while stack:
            node = stack.pop()
            state[id(node)] = (model.one(), model.target(node[0]), ())
            for child in node[1]:
                parents[id(child)] = node
                stack.append(child)
        reweigh(tree, state, set())  # only the first-child chain is tested before a deletion
        test_leaves(tree, parents, state, prob)
    return OutputLaw(masses, "traversal")
