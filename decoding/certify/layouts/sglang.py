"""SGLang's tree speculative sampling layout (``sgl_kernel.tree_speculative_sampling_target_only``
and ``sgl_kernel.verify_tree_greedy``, called by ``EagleVerifyInput.verify`` in
``python/sglang/srt/speculative/eagle_info.py``), an adapter from it to the toolkit's tree
verifier contract (:mod:`decoding.certify.trees`), and plain PyTorch implementations of the
two algorithms SGLang publishes for it.

The layout, for a batch of ``bs`` requests, each with a draft tree of ``N`` nodes flattened
(node 0 the root, the last verified token; every other node one draft)::

    candidates           [bs, N] int64   node i's token
    retrive_index        [bs, N] int64   node i's row in the flattened batch (b * N + i)
    retrive_next_token   [bs, N] int64   node i's first child, -1 if none
    retrive_next_sibling [bs, N] int64   node i's next sibling, -1 if none (siblings in the order tried)
    uniform_samples      [bs, N] float32 the coin of each node (used when it is the parent)
    uniform_samples_for_final_sampling [bs] float32
    target_probs         [bs, N, V]      the target's law after node i (temperature, top-k, top-p applied)
    draft_probs          [bs, N, V]      zeros (SGLang's caller passes zeros: the rule is target-only);
                                         the kernel writes into it
    -> predicts          [bs * N] int32  at each accepted node's row, the next token (mutated)
       accept_index      [bs, S] int32   rows of the accepted nodes from the root, then -1 (S = depth + 1;
                                         the caller fills it with -1)
       accept_token_num  [bs] int32      accepted drafts

The emitted tokens of request ``b`` are ``predicts[accept_index[b, j]]`` for ``j = 0..accept_token_num[b]``.
A sampler in this layout is ``sampler(predicts, accept_index, accept_token_num, candidates,
retrive_index, retrive_next_token, retrive_next_sibling, uniform_samples,
uniform_samples_for_final_sampling, target_probs, draft_probs, threshold_single, threshold_acc,
deterministic)`` (keyword arguments, as SGLang's caller passes them; the shipped kernel is
``sgl_kernel.tree_speculative_sampling_target_only``).

The published algorithm (:func:`tree_speculative_sampling_target_only`): from the root, with
the parent's coin ``u``, the children are tried in sibling order, accumulating their target
mass ``c``; the first child with ``u <= c / threshold_acc`` (or ``p(x) >= threshold_single``)
is accepted and becomes the parent; a rejected child's ``draft_probs`` entry is set to its
``p(x)``. At the last accepted node the token is drawn from ``max(p - draft_probs, 0)`` (from
``p`` at the full depth) by inverse CDF with the final coin. With both thresholds 1 this draws
``Y ~ p`` at every node and moves to the child equal to ``Y``: lossless for any draft tree
whose siblings are distinct tokens (EAGLE's top-k trees are), with acceptance
``p(children)`` per node. Two children with one token count its mass twice: certify with
distinct siblings (``scheme="without_replacement"`` or ``"greedy"``). It accepts a child of
target probability 0 when the coin is exactly 0 (``u <= 0``; ``2^-24`` per float32 coin).
:func:`verify_tree_greedy` is the ``T = 0`` path: the child equal to the target's argmax.

:func:`sglang_tree_verifier` presents a sampler as a tree verifier: it builds the linked lists
from the toolkit's tree (siblings in node order), draws the coins from the certification's
generator, passes ``draft_probs`` as zeros, and reads the accepted node and token back, after
checking that ``accept_index`` is a path from the root and that the emitted tokens along it
are the drafts (:class:`~decoding.certify.assertions.IndexMismatch` otherwise).
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from otm.errors import InvalidDistributionError

from decoding.runtime.trees import Tree
from decoding.validation.own_tree_verifier import TreeVerifierOutput

from ..assertions import IndexMismatch

#: ``sampler(predicts, accept_index, accept_token_num, candidates, retrive_index,
#: retrive_next_token, retrive_next_sibling, uniform_samples, uniform_samples_for_final_sampling,
#: target_probs, draft_probs, threshold_single, threshold_acc, deterministic) -> None`` (mutates its outputs).
SglangSampler = Callable[..., None]


def tree_layout(tree: Tree, batch: int, device=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(retrive_index, retrive_next_token, retrive_next_sibling)``, each ``[batch, N]`` int64,
    of ``tree`` (breadth-first, node 0 the root) for ``batch`` requests: a node's first child
    is its lowest-numbered one and siblings follow in node order."""
    n_nodes = tree.n_nodes
    next_token = np.full(n_nodes, -1, dtype=np.int64)
    next_sibling = np.full(n_nodes, -1, dtype=np.int64)
    for node in np.flatnonzero(tree.n_children):
        children = tree.children(node)
        next_token[node] = children[0]
        next_sibling[children[:-1]] = children[1:]
    index = torch.arange(batch, device=device)[:, None] * n_nodes + torch.arange(n_nodes, device=device)
    return index, *(torch.as_tensor(links, device=device).expand(batch, n_nodes).contiguous()
                    for links in (next_token, next_sibling))


# --------------------------------------------------------------------------- the published algorithms


def _walk(accept_index, accept_token_num, predicts, candidates, retrive_index, retrive_next_token, retrive_next_sibling,
          accept) -> torch.Tensor:
    """Walk every request's tree from the root: at the last accepted node (the parent) its
    children are tried in sibling order, ``accept(parent [bs], token [bs], tried [bs], first)``
    saying which are taken (``tried``: the rows with a child here; ``first``: the parent's first
    child); a taken child's token is the parent's prediction and the child the next parent. Fills
    ``accept_index`` and ``accept_token_num``; returns the last accepted node of each row."""
    bs = candidates.shape[0]
    rows = torch.arange(bs, device=candidates.device)
    node = torch.zeros(bs, dtype=torch.int64, device=candidates.device)
    accepted = torch.zeros_like(node)
    going = torch.ones(bs, dtype=torch.bool, device=candidates.device)
    accept_index[:, 0] = retrive_index[:, 0].to(accept_index.dtype)
    for _ in range(accept_index.shape[1] - 1):
        child = torch.where(going, retrive_next_token[rows, node], -1)
        moved, first = torch.zeros_like(going), True
        while (child >= 0).any():
            tried = child >= 0
            at = child.clamp(min=0)
            token = candidates[rows, at]
            take = tried & accept(node, token, tried, first)
            predicts[retrive_index[rows, node][take]] = token[take].to(predicts.dtype)
            accepted = accepted + take
            accept_index[rows[take], accepted[take]] = retrive_index[rows, at][take].to(accept_index.dtype)
            node = torch.where(take, at, node)
            moved |= take
            child = torch.where(tried & ~take, retrive_next_sibling[rows, at], -1)
            first = False
        going &= moved
    accept_token_num.copy_(accepted)
    return node


def tree_speculative_sampling_target_only(predicts, accept_index, accept_token_num, candidates, retrive_index,
                                          retrive_next_token, retrive_next_sibling, uniform_samples,
                                          uniform_samples_for_final_sampling, target_probs, draft_probs,
                                          threshold_single: float = 1.0, threshold_acc: float = 1.0,
                                          deterministic: bool = True) -> None:
    """SGLang's target-only tree speculative sampling in its layout (module docstring), from
    its published contract; float64 arithmetic. Mutates ``predicts``, ``accept_index``,
    ``accept_token_num`` and ``draft_probs``."""
    bs = candidates.shape[0]
    rows = torch.arange(bs, device=candidates.device)
    probs = target_probs.double()
    threshold_acc = max(float(threshold_acc), 1e-9)
    mass = torch.zeros(bs, dtype=torch.float64, device=candidates.device)

    def accept(parent, token, tried, first):
        nonlocal mass
        p_x = probs[rows, parent, token]
        mass = torch.where(tried, (0 if first else mass) + p_x, mass)
        take = (uniform_samples.double()[rows, parent] <= mass / threshold_acc) | (p_x >= threshold_single)
        rejected = tried & ~take
        draft_probs[rows[rejected], parent[rejected], token[rejected]] = target_probs[rows, parent, token][rejected]
        return take

    node = _walk(accept_index, accept_token_num, predicts, candidates, retrive_index, retrive_next_token,
                 retrive_next_sibling, accept)
    full_depth = accept_token_num.long() == accept_index.shape[1] - 1  # no draft probs for the bonus token
    residual = (probs[rows, node] - draft_probs.double()[rows, node] * ~full_depth[:, None]).clamp(min=0)
    predicts[retrive_index[rows, node]] = inverse_cdf(residual, uniform_samples_for_final_sampling).to(predicts.dtype)


def inverse_cdf(weights: torch.Tensor, coins: torch.Tensor) -> torch.Tensor:  # [bs, V], [bs] -> [bs]
    """SGLang's final sampling: per row, the first token whose cumulative weight exceeds
    ``coin * sum(weights)``; when rounding leaves none, the last token of positive weight (the
    last token if there is none)."""
    weights = weights.double()
    threshold = coins.double() * weights.sum(dim=1)
    sampled = (weights.cumsum(dim=1) <= threshold[:, None]).sum(dim=1)
    vocab = weights.shape[1]
    positive = weights > 0
    last_positive = torch.where(positive.any(dim=1), vocab - 1 - positive.flip(1).int().argmax(dim=1), vocab - 1)
    return torch.where(sampled < vocab, sampled, last_positive)


def verify_tree_greedy(predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
                       retrive_next_sibling, target_predict) -> None:
    """SGLang's greedy tree verification (``T = 0``) in its layout: the child equal to the
    target's prediction at the parent (``target_predict [bs, N]``, by the parent's flattened
    row) is accepted; the prediction at the last accepted node is the emitted token."""
    flat = target_predict.reshape(-1)
    rows = torch.arange(candidates.shape[0], device=candidates.device)
    node = _walk(accept_index, accept_token_num, predicts, candidates, retrive_index, retrive_next_token,
                 retrive_next_sibling, lambda parent, token, tried, first: token == flat[retrive_index[rows, parent]])
    last = retrive_index[rows, node]
    predicts[last] = flat[last].to(predicts.dtype)


# --------------------------------------------------------------------------- the adapter


def accepted_path(tree: Tree, candidates, predicts, accept_index, accept_token_num) -> TreeVerifierOutput:
    """The accepted node and emitted token of every row, after checking that ``accept_index``
    is a path from the root of ``tree`` and that the emitted tokens along it are the drafts."""
    bs, n_nodes = candidates.shape
    depth = tree.max_depth
    accepted = accept_token_num.long()
    if accepted.shape != (bs,) or ((accepted < 0) | (accepted > depth)).any():
        raise InvalidDistributionError(f"accept_token_num must hold, per request, a number of accepted drafts in "
                                       f"0..{depth}")
    rows = torch.arange(bs, device=candidates.device)
    local = accept_index.long() - rows[:, None] * n_nodes  # [bs, depth + 1] node of each accepted position
    on_path = torch.arange(depth + 1, device=candidates.device) <= accepted[:, None]
    in_tree = (local >= 0) & (local < n_nodes)
    at = local.clamp(0, n_nodes - 1)
    parent = torch.as_tensor(tree.parent, device=candidates.device)[at]
    linked = torch.cat([at[:, :1] == 0, parent[:, 1:] == at[:, :-1]], dim=1)
    emitted = predicts.long()[(rows[:, None] * n_nodes + at)]  # [bs, depth + 1] the prediction at each node
    drafted = torch.cat([emitted[:, :-1] == candidates.gather(1, at[:, 1:]), torch.ones_like(on_path[:, :1])], dim=1)
    next_on_path = torch.cat([on_path[:, 1:], torch.zeros_like(on_path[:, :1])], dim=1)
    wrong = (on_path & ~(in_tree & linked)).any(dim=1)
    misread = (next_on_path & ~drafted).any(dim=1) & ~wrong
    if wrong.any():
        raise IndexMismatch(f"accept_index is not a path of the draft tree from the root in {int(wrong.sum()):,} of "
                            f"{bs:,} rows")
    if misread.any():
        raise IndexMismatch(f"the emitted tokens predicts[accept_index] along the accepted path are not the drafts in "
                            f"{int(misread.sum()):,} of {bs:,} rows")
    return TreeVerifierOutput(at[rows, accepted], emitted[rows, accepted])


def sglang_tree_verifier(sampler: SglangSampler, *, threshold_single: float = 1.0, threshold_acc: float = 1.0):
    """``sampler`` (SGLang's layout) as a tree verifier of the toolkit's contract (module
    docstring); ``threshold_single`` and ``threshold_acc`` are passed to it (SGLang's
    ``--speculative-accept-threshold-single`` and ``-acc``; 1 is the lossless rule)."""

    def tree_verify(tree, draft_tokens, target_probs, draft_probs, generator):  # [b, N], [b, N, V], [b, N, V]
        bs, n_nodes = draft_tokens.shape
        device = draft_tokens.device
        retrive_index, next_token, next_sibling = tree_layout(tree, bs, device)
        predicts = torch.full((bs * n_nodes,), -1, dtype=torch.int32, device=device)
        accept_index = torch.full((bs, tree.max_depth + 1), -1, dtype=torch.int32, device=device)
        accept_token_num = torch.zeros(bs, dtype=torch.int32, device=device)
        candidates = draft_tokens.long().contiguous()
        sampler(predicts=predicts, accept_index=accept_index, accept_token_num=accept_token_num, candidates=candidates,
                retrive_index=retrive_index, retrive_next_token=next_token, retrive_next_sibling=next_sibling,
                uniform_samples=torch.rand(bs, n_nodes, generator=generator, device=device),
                uniform_samples_for_final_sampling=torch.rand(bs, generator=generator, device=device),
                target_probs=target_probs.contiguous(), draft_probs=torch.zeros_like(target_probs),
                threshold_single=threshold_single, threshold_acc=threshold_acc, deterministic=True)
        return accepted_path(tree, candidates, predicts, accept_index, accept_token_num)

    return tree_verify


__all__ = [
    "SglangSampler", "accepted_path", "inverse_cdf", "sglang_tree_verifier", "tree_layout", "tree_speculative_sampling_target_only",
    "verify_tree_greedy",
]
