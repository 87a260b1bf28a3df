"""Traversal verification of a batch of draft trees, batched and seeded.

Traversal verification (Weng, Hu, Chen, Liu, Mei, Qiu, Tian, Shi, "Traversal Verification
for Speculative Tree Decoding", NeurIPS 2025, arXiv:2505.12398), as written in
docs/sequences.md, section 5 (exact law: :func:`otm.sequences.traversal_law`). The tree is
the decoding loop's (:class:`decoding.runtime.trees.Tree`, breadth-first, node 0 = the
root); every node ``s`` carries its draft token, ``p(. | s)`` and, when it has children,
``q(. | s)``.

The algorithm, as the depth-first recursion ``visit(s, a)`` (equivalent to taking the first
leaf of the remaining tree in post-order, docs/sequences.md):

- ``alpha = a`` (``1`` at the root), ``P = p(. | s)``;
- for each child ``c`` of ``s`` in order, with ``Q_c`` the law it was drawn from given the
  siblings before it (i.i.d.: ``q(. | s)``; without replacement: ``q(. | s)`` with those
  siblings' tokens removed and renormalised, or the point mass on ``c``'s token once the
  support is exhausted): ``visit(c, min(1, alpha P(x_c) / Q_c(x_c)))``; if nothing below
  ``c`` was accepted, update ``S = sum (alpha P - Q_c)^+``,
  ``alpha <- S / (S + 1 - alpha)``, ``P <- norm((alpha P - Q_c)^+)`` (unchanged when
  ``S + 1 - alpha = 0``: no child can then be rejected);
- then ``s`` is a leaf of the remaining tree: it is accepted with probability ``alpha``
  (the path to ``s`` is accepted and a token is emitted from ``P``).

At the root ``alpha`` stays exactly 1 (``S / (S + 0)``), so the root always accepts in
the end: the step emits the accepted node's path and one token. A zero-mass ``P`` (only
with ``alpha = 0``, never accepted in exact arithmetic) falls back to ``p(. | s)``.

Randomness contract (:func:`uniforms_per_row`, as :mod:`decoding.verifiers.base`):
:func:`verify` draws exactly one ``torch.rand(batch, n_nodes + 1, generator=generator,
dtype=torch.float64, device=target_probs.device)`` (:data:`decoding.verifiers.base.SAMPLING_DTYPE`); column ``j`` is the coin of node
``j`` (node ``j`` is accepted when ``u_j < alpha_j`` at its leaf test), column ``n_nodes``
drives the emitted token (inverse CDF, :func:`decoding.verifiers.base.sample_residual`).
On a chain the coins are block verification's ``eta_0..eta_g`` in the same columns
(:mod:`decoding.verifiers.block`), and both give the same output draw for draw.
:func:`decoding.verifiers.reference_sequences.traversal` reproduces it row by row.

Cost: a loop over the tree's nodes, depth first without recursion
(:mod:`otm.sequences.trampoline`, so chains of any depth work); each node's work is a few
passes over ``[batch, vocab]``, for every row at once (rows already accepted are computed
and ignored).

Expected accepted lengths given the drafted tree (:func:`expected_accepted`), for
measuring the gain over node-wise verification without coin noise (docs/sequences.md,
section 9): traversal verification's, and that of the node-wise walk of recursive
rejection sampling on the same tree (``nodewise=True``; the decoding loop's walk for
``rrs_wor``, SpecHub, Sun, Zhou, Chen, Sun, EMNLP 2024, arXiv:2411.05289, Alg. 1).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from otm.errors import InvalidDistributionError, ShapeMismatchError, UnknownNameError
from otm.sequences import trampoline

from .base import draw_uniforms, gather_tokens, normalise, sample_iid, sample_residual, sample_without_replacement
from .block import capped_ratio

__all__ = [
    "SIBLING_SCHEMES", "TraversalOutput", "after_rejection", "child_weight", "draft_scheme", "expected_accepted",
    "sample_drafts", "uniforms_per_row", "verify", "verify_with_uniforms",
]

#: The sibling law of the paper's trees (the other supported one is ``"iid"``).
draft_scheme = "without_replacement"

#: Sibling schemes this verifier knows the conditional laws of.
SIBLING_SCHEMES = ("iid", "without_replacement")


@dataclass(frozen=True)
class TraversalOutput:
    """What traversal verification returns for a batch of trees.

    Attributes:
        accepted_node: ``[batch]`` int64, the accepted node (its path from the root is
            accepted; ``0``, the root: no draft accepted).
        tokens: ``[batch]`` int64, the emitted token.
    """

    accepted_node: torch.Tensor
    tokens: torch.Tensor


def uniforms_per_row(n_nodes: int) -> int:
    """One coin per node and one uniform for the emitted token."""
    return int(n_nodes) + 1


def check_scheme(scheme: str) -> str:
    """``scheme`` if it is one of :data:`SIBLING_SCHEMES`, else :class:`UnknownNameError`."""
    if scheme not in SIBLING_SCHEMES:
        raise UnknownNameError(f"traversal verification knows the sibling schemes {', '.join(SIBLING_SCHEMES)}; got {scheme!r}")
    return scheme


def sample_drafts(draft_probs: torch.Tensor, k: int, generator: torch.Generator | None,
                  scheme: str = draft_scheme) -> torch.Tensor:
    """``[batch, k]`` siblings from ``draft_probs`` ``[batch, vocab]`` with ``scheme``."""
    if check_scheme(scheme) == "iid":
        return sample_iid(draft_probs, k, generator)
    return sample_without_replacement(draft_probs, k, generator)


def child_weight(
    alpha: torch.Tensor,  # [batch]
    target: torch.Tensor,  # [batch, vocab], P at the parent
    proposal: torch.Tensor,  # [batch, vocab], Q_c
    token: torch.Tensor,  # [batch], the child's token
) -> torch.Tensor:  # [batch]
    """``min(1, alpha P(x) / Q(x))`` (:func:`decoding.verifiers.block.capped_ratio`)."""
    return capped_ratio(alpha * gather_tokens(target, token), gather_tokens(proposal, token))


def after_rejection(
    alpha: torch.Tensor,  # [batch]
    target: torch.Tensor,  # [batch, vocab]
    proposal: torch.Tensor,  # [batch, vocab]
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(alpha', P')`` after the child drawn from ``proposal`` was rejected (module
    docstring): ``alpha' = S / (S + 1 - alpha)``, ``P' = norm((alpha P - Q)^+)``."""
    excess_part = (alpha.unsqueeze(1) * target - proposal).clamp(min=0.0)
    excess = excess_part.sum(dim=-1)
    rejected = excess + 1 - alpha
    possible = rejected > 0
    new_alpha = torch.where(possible, excess / torch.where(possible, rejected, torch.ones_like(rejected)), alpha)
    new_target = torch.where(possible.unsqueeze(1), normalise(excess_part), target)
    return new_alpha.clamp(0.0, 1.0), new_target


def _conditional_law(
    remaining: torch.Tensor,  # [batch, vocab], q at the parent with the earlier siblings removed
    token: torch.Tensor,  # [batch]
) -> torch.Tensor:  # [batch, vocab]
    """``norm(remaining)``, or the point mass on ``token`` where ``remaining`` has no mass
    (without replacement past the support of ``q``)."""
    mass = remaining.sum(dim=-1, keepdim=True)
    point = torch.zeros_like(remaining).scatter_(1, token.unsqueeze(1), 1.0)
    return torch.where(mass > 0, remaining / torch.where(mass > 0, mass, torch.ones_like(mass)), point)


class _SiblingScan:
    """A node's state while its children are tried in order (module docstring): ``alpha``,
    ``target`` (``P``) and the draft mass not yet drawn. :meth:`weight` is the next child's
    weight ``min(1, alpha P(x_c) / Q_c(x_c))``, :meth:`reject` moves past that child."""

    def __init__(
        self,
        alpha: torch.Tensor,  # [batch]
        target: torch.Tensor,  # [batch, vocab], p at the node
        draft: torch.Tensor,  # [batch, vocab], q at the node
        without_replacement: bool,
    ):
        self.alpha, self.target, self.draft, self.remaining = alpha, target, draft, draft
        self.without_replacement = without_replacement
        self.proposal = draft

    def weight(self, token: torch.Tensor) -> torch.Tensor:  # [batch] -> [batch]
        self.proposal = _conditional_law(self.remaining, token) if self.without_replacement else self.draft
        return child_weight(self.alpha, self.target, self.proposal, token)

    def reject(self, token: torch.Tensor) -> None:  # [batch]
        self.alpha, self.target = after_rejection(self.alpha, self.target, self.proposal)
        if self.without_replacement:
            self.remaining = self.remaining.scatter(1, token.unsqueeze(1), 0.0)


def _children_lists(parent: np.ndarray) -> list[list[int]]:  # parent: [n_nodes]
    """The children of every node, in node order (one pass over ``parent``)."""
    children: list[list[int]] = [[] for _ in parent]
    for node, up in enumerate(parent.tolist()[1:], start=1):
        children[up].append(node)
    return children


def check_tree_inputs(
    parent: np.ndarray,  # [n_nodes]
    draft_tokens: torch.Tensor,  # [batch, n_nodes]
    target_probs: torch.Tensor,  # [batch, n_nodes, vocab]
    draft_probs: torch.Tensor,  # [batch, n_nodes, vocab]
) -> tuple[int, int, int]:
    """Shape, dtype and device checks; returns ``(batch, n_nodes, vocab)``."""
    if not isinstance(target_probs, torch.Tensor) or not target_probs.is_floating_point() or target_probs.ndim != 3:
        raise ShapeMismatchError("target_probs must be a floating tensor [batch, n_nodes, vocab]")
    batch, n_nodes, vocab = target_probs.shape
    if n_nodes != len(parent):
        raise ShapeMismatchError(f"target_probs has {n_nodes} nodes, the tree {len(parent)}")
    if not isinstance(draft_probs, torch.Tensor) or draft_probs.shape != target_probs.shape:
        raise ShapeMismatchError(f"draft_probs must have the shape of target_probs {tuple(target_probs.shape)} "
                                 "(q at every node; rows of leaves are not read)")
    if draft_probs.dtype != target_probs.dtype or draft_probs.device != target_probs.device:
        raise InvalidDistributionError(f"draft_probs ({draft_probs.dtype}, {draft_probs.device}) and target_probs "
                                       f"({target_probs.dtype}, {target_probs.device}) must share dtype and device")
    if not isinstance(draft_tokens, torch.Tensor) or draft_tokens.shape != (batch, n_nodes) or draft_tokens.dtype != torch.int64:
        raise ShapeMismatchError(f"draft_tokens must be int64 of shape [batch={batch}, n_nodes={n_nodes}] "
                                 "(node 0, the root, is not read)")
    return batch, n_nodes, vocab


def verify_with_uniforms(
    tree,
    draft_tokens: torch.Tensor,  # [batch, n_nodes]
    target_probs: torch.Tensor,  # [batch, n_nodes, vocab]
    draft_probs: torch.Tensor,  # [batch, n_nodes, vocab]
    uniforms: torch.Tensor,  # [batch, n_nodes + 1]
    scheme: str = draft_scheme,
) -> TraversalOutput:
    """Traversal verification on pre-drawn uniforms (module docstring); ``tree`` is a
    :class:`decoding.runtime.trees.Tree` (only ``tree.parent`` is read)."""
    parent = np.asarray(tree.parent)
    batch, n_nodes, _ = check_tree_inputs(parent, draft_tokens, target_probs, draft_probs)
    without_replacement = check_scheme(scheme) == "without_replacement"
    children = _children_lists(parent)
    done = torch.zeros(batch, dtype=torch.bool, device=target_probs.device)
    accepted_node = torch.zeros(batch, dtype=torch.int64, device=target_probs.device)
    emit = torch.zeros_like(target_probs[:, 0])

    def visit(node: int, alpha: torch.Tensor):
        """The module docstring's ``visit(s, a)``, a :mod:`otm.sequences.trampoline` step."""
        nonlocal done, accepted_node, emit
        scan = _SiblingScan(alpha, target_probs[:, node], draft_probs[:, node], without_replacement)
        for child in children[node]:
            yield visit(child, scan.weight(draft_tokens[:, child]))
            scan.reject(draft_tokens[:, child])
        accept = ~done & (uniforms[:, node] < scan.alpha)
        accepted_node = torch.where(accept, node, accepted_node)
        emit = torch.where(accept.unsqueeze(1), scan.target, emit)
        done = done | accept

    trampoline.run(visit(0, torch.ones(batch, dtype=target_probs.dtype, device=target_probs.device)))
    fallback = target_probs[torch.arange(batch, device=target_probs.device), accepted_node]
    tokens = sample_residual(emit, fallback, uniforms[:, n_nodes])
    return TraversalOutput(accepted_node=accepted_node, tokens=tokens)


def verify(
    tree,
    draft_tokens: torch.Tensor,  # [batch, n_nodes], node 0 (the root) not read
    target_probs: torch.Tensor,  # [batch, n_nodes, vocab], p at every node
    draft_probs: torch.Tensor,  # [batch, n_nodes, vocab], q at every node with children
    generator: torch.Generator | None,
    scheme: str = draft_scheme,
) -> TraversalOutput:
    """Traversal verification of every row's tree (siblings drawn with ``scheme``): one
    ``torch.rand(batch, n_nodes + 1)`` draw (module docstring), then
    :func:`verify_with_uniforms`."""
    batch, n_nodes, _ = check_tree_inputs(np.asarray(tree.parent), draft_tokens, target_probs, draft_probs)
    uniforms = draw_uniforms(generator, batch, uniforms_per_row(n_nodes), target_probs)
    return verify_with_uniforms(tree, draft_tokens, target_probs, draft_probs, uniforms, scheme)


def expected_accepted(
    tree,
    draft_tokens: torch.Tensor,  # [batch, n_nodes], node 0 (the root) not read
    target_probs: torch.Tensor,  # [batch, n_nodes, vocab], p at every node with children (other rows not read)
    draft_probs: torch.Tensor,  # [batch, n_nodes, vocab], q at every node with children
    scheme: str = draft_scheme,
    *,
    nodewise: bool = False,
) -> torch.Tensor:  # [batch]
    """``sum_v E[1{the accepted path passes v} | G_v]`` over the non-root nodes ``v`` of
    every row's tree, ``G_v`` = the tokens of ``v``, of its ancestors and of the earlier
    siblings of each: an unbiased estimate of ``E[tau]`` whose only randomness is the
    draft's (docs/sequences.md, section 9, Proposition 4, our derivation).

    With ``w_c`` the weight of child ``c`` when its turn comes (:class:`_SiblingScan`,
    after the earlier siblings' rejections) and ``reach`` the probability that ``c``'s
    parent is visited:

    - traversal verification (``nodewise=False``): the subtree of ``c`` ends the step with
      probability ``w_c`` once visited (averaged over the drafts below ``c``), so ``c``
      adds ``reach * w_c`` and the next sibling is visited with ``reach * (1 - w_c)``;
      ``c``'s own children start from ``alpha = w_c`` and the same ``reach``;
    - the node-wise walk of recursive rejection sampling (``nodewise=True``: every node
      starts again from ``alpha = 1``, ``P = p(. | node)``, and keeps only the accepted
      child, as :func:`decoding.runtime.tree_walk.walk_tree` does for a rule whose drafts
      are not i.i.d.): ``c`` is accepted with ``reach * w_c`` exactly, and its children are
      reached with that. With ``"without_replacement"`` this is ``rrs_wor`` (and ``single``
      at nodes with one child); with ``"iid"`` it is ``rrs`` without the merge of equal
      drafts. Here the value is ``E[tau | tree]``.

    On a chain, ``nodewise=False`` is :func:`decoding.verifiers.block.expected_accepted`
    and ``nodewise=True`` :func:`decoding.verifiers.block.tokenwise_expected_accepted`.
    """
    parent = np.asarray(tree.parent)
    batch, n_nodes, _ = check_tree_inputs(parent, draft_tokens, target_probs, draft_probs)
    without_replacement = check_scheme(scheme) == "without_replacement"
    children = _children_lists(parent)
    total = torch.zeros(batch, dtype=target_probs.dtype, device=target_probs.device)

    def visit(node: int, alpha: torch.Tensor, reach: torch.Tensor):
        """A :mod:`otm.sequences.trampoline` step."""
        nonlocal total
        scan = _SiblingScan(alpha, target_probs[:, node], draft_probs[:, node], without_replacement)
        for child in children[node]:
            weight = scan.weight(draft_tokens[:, child])
            total = total + reach * weight
            if nodewise:
                yield visit(child, torch.ones_like(weight), reach * weight)
            else:
                yield visit(child, weight, reach)
            reach = reach * (1 - weight)
            scan.reject(draft_tokens[:, child])

    ones = torch.ones(batch, dtype=target_probs.dtype, device=target_probs.device)
    trampoline.run(visit(0, ones, ones))
    return total

