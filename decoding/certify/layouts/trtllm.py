"""TensorRT-LLM's EAGLE-3 dynamic-tree rejection sampling layout
(``DynamicTreeOpsConverter.verify_dynamic_tree_rejection_out`` in
``tensorrt_llm/_torch/speculative/dynamic_tree_ops.py``, the PyTorch backend's one-model EAGLE-3
worker with a dynamic tree, calling ``torch.ops.trtllm.verify_dynamic_tree_rejection_out_op``,
kernel ``verifyDynamicTreeRejectionKernel`` in
``cpp/tensorrt_llm/kernels/speculativeDecoding/dynamicTreeKernels.cu``), an adapter from it to the
toolkit's tree verifier contract (:mod:`decoding.certify.trees`), and a plain PyTorch
implementation of the algorithm it publishes.

The contract is the target-only one that TensorRT-LLM PR #15098 ("fix output distribution
correctness for Eagle3 dynamic-tree rejection sampling") introduced, op
``verify_dynamic_tree_rejection_out_op(draftTokens, targetProbs, retrieveNextToken,
retrieveNextSibling, treeValid, acceptIndex, acceptTokenNum, acceptToken, numSpecStep, seed,
offset)``; the earlier signatures (``p / q`` rejection with ``candidates`` and draft
probabilities, later with deduplicated draft-probability rows, ``draft_prob_indices``, compact
target supports and draft logits) are gone. The layout, for ``num_gens`` requests, each with a draft tree of
``N`` tree positions (position 0 the root, the last verified token; every other position one
draft)::

    draft_tokens          [num_gens, N - 1] int64  the token of tree position i + 1 (the root excluded)
    target_logits_tree    [num_gens * N, V]        row g * N + i: the target's logits after position i
    retrieve_next_token   [num_gens, N] int32      position i's first child, -1 if none
    retrieve_next_sibling [num_gens, N] int32      position i's next sibling, -1 if none (the order tried)
    tree_valid            [num_gens] bool          False: no tree yet, the token comes from the root's law
    temperatures          [num_gens] float32       (top_k, top_p: [num_gens] or None)
    num_spec_step         max_draft_len + 1        (seed, offset: the Philox stream)
    -> accept_index       [num_gens, num_spec_step] int64  slot 0 the root (0), slot d the position of the
                                                           d-th accepted draft
       accept_token_num   [num_gens] int64                 accepted drafts
       accept_token       [num_gens, num_spec_step] int64  the emitted tokens: the accepted drafts,
                                                           then the bonus/correction token at slot
                                                           accept_token_num

A sampler in this layout is ``sampler(draft_tokens=..., target_logits_tree=...,
retrieve_next_token=..., retrieve_next_sibling=..., tree_valid=..., temperatures=..., top_k=...,
top_p=..., num_gens=..., num_spec_step=..., seed=..., offset=...) -> (accept_index,
accept_token_num, accept_token)`` (keyword arguments, as the worker passes them; the shipped one
is a bound ``DynamicTreeOpsConverter(...).verify_dynamic_tree_rejection_out``).

The published algorithm (:func:`verify_dynamic_tree_rejection`): the target law of every tree
position is the softmax of its logits at the request's temperature (a one-hot argmax at
``T <= 1e-4``). From the root, at the last accepted position (the parent) with law ``p``, one
coin ``u`` in ``[0, 1)`` is drawn and the children are tried in sibling order, accumulating
their masses ``c = p(x_1) + ... + p(x_j)``; the first child with ``u <= c`` is accepted and becomes
the parent. When every child is rejected the token is drawn from ``p`` with the tried tokens
removed (renormalised by ``1 - c``; from ``p`` itself when ``1 - c <= 1e-10``); at a leaf, or at
``num_spec_step - 1`` accepted drafts, from ``p``. So ``Y ~ p`` at every node and the walk
moves to the child equal to ``Y``: lossless for a tree whose siblings are distinct tokens
(EAGLE-3's top-k children are); no draft probabilities are read. A repeated sibling counts its
mass twice (lossy: certify with ``scheme="without_replacement"`` or ``"greedy"``); a child of
probability 0 is accepted when ``u`` is exactly 0 (``u <= 0``: ``2^-24`` per float32 coin); and
the kernel records at most :data:`MAX_TRIED_PER_LEVEL` tried tokens per node, so past that many
siblings the residual keeps some rejected ones (lossy). ``top_k`` / ``top_p`` are not modelled
here: the reference refuses them.

:func:`trtllm_tree_verifier` presents a sampler as a tree verifier: it builds the linked lists
from the toolkit's tree (:func:`decoding.certify.layouts.sglang.tree_layout`), passes
``temperature * log p`` as logits (so the temperature gives ``p`` back), a seed drawn from the
certification's generator, and reads the accepted position and the token back after checking
that ``accept_index`` is a path from the root whose emitted tokens are the drafts
(:class:`~decoding.certify.assertions.IndexMismatch` otherwise).
"""
from __future__ import annotations

from typing import Callable

import torch

from otm.errors import InvalidArgumentError, ShapeMismatchError

from .sglang import accepted_path, inverse_cdf, tree_layout
from .vllm import logits_of

#: ``sampler(draft_tokens, target_logits_tree, retrieve_next_token, retrieve_next_sibling, tree_valid,
#: temperatures, top_k, top_p, num_gens, num_spec_step, seed, offset) -> (accept_index,
#: accept_token_num, accept_token)`` (keyword arguments).
TrtllmSampler = Callable[..., tuple]

#: Temperatures at or below this are greedy: the target law is a one-hot argmax.
GREEDY_TEMPERATURE = 1e-4

#: Tried siblings the kernel records per node for the residual.
MAX_TRIED_PER_LEVEL = 32

#: A residual mass at or below this is taken as empty: the token comes from ``p`` itself.
EMPTY_RESIDUAL = 1e-10


def target_probs_of(target_logits_tree: torch.Tensor, temperatures: torch.Tensor, num_gens: int) -> torch.Tensor:
    """``[num_gens, N, V]`` float64: each tree position's softmax at its request's temperature
    (a one-hot argmax at ``T <= GREEDY_TEMPERATURE``)."""
    logits = target_logits_tree.double().reshape(num_gens, -1, target_logits_tree.shape[-1])
    temperature = temperatures.double().reshape(num_gens, 1, 1)
    greedy = temperature <= GREEDY_TEMPERATURE
    soft = torch.softmax(logits / torch.where(greedy, 1.0, temperature), dim=-1)
    hard = torch.nn.functional.one_hot(logits.argmax(dim=-1), logits.shape[-1]).double()
    return torch.where(greedy, hard, soft)


def verify_dynamic_tree_rejection(*, draft_tokens, target_logits_tree, retrieve_next_token, retrieve_next_sibling,
                                  tree_valid, temperatures, top_k=None, top_p=None, num_gens: int, num_spec_step: int,
                                  seed: int = 0, offset: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """TensorRT-LLM's target-only dynamic-tree rejection sampling in its layout (module
    docstring), from its published contract; float64 arithmetic, coins from a torch generator
    seeded with ``(seed, offset)`` (the kernel's Philox stream draws other numbers: the law is
    the same, the samples are not)."""
    if top_k is not None or top_p is not None:
        raise InvalidArgumentError("the reference models temperature only: pass top_k=None and top_p=None")
    device = draft_tokens.device
    probs = target_probs_of(target_logits_tree, temperatures, num_gens)  # [g, N, V]
    generator = torch.Generator(device=device).manual_seed((int(seed) * 1_000_003 + int(offset)) % 2**63)
    rows = torch.arange(num_gens, device=device)
    tokens = torch.cat([torch.zeros_like(draft_tokens[:, :1]), draft_tokens], dim=1).long()  # [g, N] by position
    first_child, next_sibling = retrieve_next_token.long(), retrieve_next_sibling.long()
    accept_index = torch.zeros(num_gens, num_spec_step, dtype=torch.int64, device=device)
    accept_token = torch.zeros_like(accept_index)
    accepted = torch.zeros(num_gens, dtype=torch.int64, device=device)
    node = torch.zeros_like(accepted)
    removed = torch.zeros_like(probs[:, 0], dtype=torch.bool)  # [g, V] tried tokens of the node that stopped
    going = tree_valid.bool().clone()
    for _ in range(num_spec_step - 1):
        child = torch.where(going, first_child[rows, node], -1)
        coin = torch.rand(num_gens, generator=generator, device=device, dtype=torch.float64)
        mass = torch.zeros(num_gens, dtype=torch.float64, device=device)
        tried = torch.zeros_like(removed)
        count = torch.zeros_like(accepted)
        moved = torch.zeros_like(going)
        had_children = child >= 0
        while (child >= 0).any():
            live = child >= 0
            at = child.clamp(min=0)
            token = tokens[rows, at]
            mass = mass + torch.where(live, probs[rows, node, token], 0.0)
            take = live & (coin <= mass)
            accept_token[rows[take], accepted[take]] = token[take]
            accepted = accepted + take
            accept_index[rows[take], accepted[take]] = at[take]
            node = torch.where(take, at, node)
            moved |= take
            rejected = live & ~take
            recorded = rejected & (count < MAX_TRIED_PER_LEVEL)
            tried[rows[recorded], token[recorded]] = True
            count = count + recorded
            child = torch.where(rejected, next_sibling[rows, at], -1)
        stopped = going & had_children & ~moved
        removed = torch.where(stopped[:, None], tried, removed)
        going &= moved
    law = probs[rows, node]
    residual = law * ~removed
    residual = torch.where(residual.sum(dim=1, keepdim=True) > EMPTY_RESIDUAL, residual, law)
    final_coin = torch.rand(num_gens, generator=generator, device=device, dtype=torch.float64)
    accept_token[rows, accepted] = inverse_cdf(residual, final_coin)
    return accept_index, accepted, accept_token


def trtllm_tree_verifier(sampler: TrtllmSampler, *, temperature: float = 1.0):
    """``sampler`` (TensorRT-LLM's layout) as a tree verifier of the toolkit's contract (module
    docstring) at ``temperature > 0``."""
    if not temperature > GREEDY_TEMPERATURE:
        raise InvalidArgumentError(f"temperature must be > {GREEDY_TEMPERATURE:g} (the sampling path), got "
                                   f"{temperature!r}")

    def tree_verify(tree, draft_tokens, target_probs, draft_probs, generator):  # [b, N], [b, N, V], [b, N, V]
        bs, n_nodes = draft_tokens.shape
        device = draft_tokens.device
        _, next_token, next_sibling = tree_layout(tree, bs, device)
        seed = int(torch.randint(2**62, (1,), generator=generator, device=generator.device if generator else "cpu"))
        result = sampler(draft_tokens=draft_tokens[:, 1:].long().contiguous(),
                         target_logits_tree=logits_of(target_probs, temperature).reshape(bs * n_nodes, -1),
                         retrieve_next_token=next_token.int(), retrieve_next_sibling=next_sibling.int(),
                         tree_valid=torch.ones(bs, dtype=torch.bool, device=device),
                         temperatures=torch.full((bs,), float(temperature), device=device), top_k=None, top_p=None,
                         num_gens=bs, num_spec_step=tree.max_depth + 1, seed=seed, offset=0)
        if not isinstance(result, tuple) or len(result) != 3:
            raise ShapeMismatchError("the sampler must return (accept_index, accept_token_num, accept_token)")
        accept_index, accept_token_num, accept_token = (torch.as_tensor(t, device=device).long() for t in result)
        shape = (bs, tree.max_depth + 1)
        if accept_index.shape != shape or accept_token.shape != shape:
            raise ShapeMismatchError(f"accept_index and accept_token must be [num_gens, num_spec_step] = {list(shape)}, "
                                     f"got {list(accept_index.shape)} and {list(accept_token.shape)}")
        # SGLang's check reads the emitted token at each path position's flattened row
        rows = torch.arange(bs, device=device)[:, None]
        emitted = torch.full((bs * n_nodes,), -1, dtype=torch.int64, device=device)
        on_path = torch.arange(shape[1], device=device) <= accept_token_num.clamp(min=0)[:, None]
        emitted[(rows * n_nodes + accept_index.clamp(0, n_nodes - 1))[on_path]] = accept_token[on_path]
        return accepted_path(tree, draft_tokens.long(), emitted, rows * n_nodes + accept_index, accept_token_num)

    return tree_verify


__all__ = ["TrtllmSampler", "target_probs_of", "trtllm_tree_verifier", "verify_dynamic_tree_rejection"]
