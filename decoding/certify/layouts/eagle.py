"""EAGLE's layout (``evaluate_posterior`` in ``eagle/model/utils.py`` of SafeAILab/EAGLE, the
reference code of EAGLE-2 and EAGLE-3, Li et al. 2024, arXiv:2406.16858 and arXiv:2503.01840),
an adapter from it to the toolkit's tree verifier contract (:mod:`decoding.certify.trees`), and
a plain PyTorch implementation of the algorithm it publishes.

The layout (one sequence: batch size 1; the draft tree is given by its root-to-leaf paths)::

    evaluate_posterior(logits,           # [P, D + 1, V] the target's logits after each path prefix:
                                         #   logits[j, i] follows candidates[j, :i + 1]
                       candidates,       # [P, D + 1] int64 path j's tokens, column 0 the root, -1 padded
                       logits_processor) # None: greedy; else called as processor(None, logits [1, V])
        -> (best_candidate, accept_length, sample_p)

The step emits ``candidates[best_candidate, 1:accept_length + 1]`` and then a token drawn from
``sample_p`` (``[V]``, ``torch.multinomial``) or, greedy, its argmax (``sample_p`` is then the
logits row) -- as EAGLE's ``update_inference_inputs`` does.

The published sampling branch (:func:`evaluate_posterior`): from the root, at the accepted
prefix, ``p`` = softmax of the processed logits; the distinct children of the prefix (over
every path that shares it, in path order) are tried in turn: child ``x`` is accepted with
probability ``p(x)`` (the draft law is taken as a point mass, ``q(x) = 1``), else ``p(x)`` is
set to 0 and ``p`` renormalised. When a child is accepted the walk goes on from it; when all
are rejected the token is drawn from the renormalised ``p``; at a leaf (or the full depth)
from the processed logits there. That is recursive rejection sampling with point-mass drafts,
``Y ~ p`` at every node: lossless for any tree (duplicate siblings are tried once).

:func:`eagle_tree_verifier` presents such a function as a tree verifier, one call per row (the
layout has no batch): the paths are the toolkit tree's root-to-leaf paths (:func:`tree_paths`); the
logits are ``temperature * log p`` (so the temperature processor gives back ``p``), padded
positions hold the sentinel law of :func:`decoding.certify.layouts.vllm.sentinel_law`; Python's
``random`` and torch's global generator are seeded from the certification's generator and
restored afterwards.
"""
from __future__ import annotations

import random
from typing import Callable

import torch

from otm.errors import InvalidArgumentError, ShapeMismatchError

from decoding.runtime.trees import Tree
from decoding.validation.own_tree_verifier import TreeVerifierOutput

from ..assertions import IndexMismatch
from .vllm import logits_of, sentinel_law

#: ``evaluate_posterior(logits [P, D + 1, V], candidates [P, D + 1], logits_processor)
#: -> (best_candidate, accept_length, sample_p [V])``.
EvaluatePosterior = Callable[[torch.Tensor, torch.Tensor, "Callable | None"], tuple]


class TemperatureProcessor:
    """A logits processor in the Hugging Face calling convention (``processor(input_ids,
    scores)``) that divides the logits by ``temperature`` (EAGLE's ``prepare_logits_processor``
    with only a temperature)."""

    def __init__(self, temperature: float):
        self.temperature = temperature

    def __call__(self, input_ids, scores: torch.Tensor) -> torch.Tensor:
        return scores / self.temperature


def tree_paths(tree: Tree) -> torch.Tensor:
    """``[P, D + 1]`` int64: the root-to-leaf paths of ``tree`` (node ids) in depth-first
    order, so that siblings come in node order, padded with -1 (EAGLE's ``retrieve_indices``)."""
    leaves = sorted(tree.path(node) for node in range(tree.n_nodes) if tree.n_children[node] == 0)
    paths = torch.full((len(leaves), tree.max_depth + 1), -1, dtype=torch.int64)
    for row, path in enumerate(leaves):
        paths[row, : len(path)] = torch.as_tensor(path)
    return paths


# --------------------------------------------------------------------------- the published algorithm


def evaluate_posterior(logits: torch.Tensor, candidates: torch.Tensor, logits_processor) -> tuple:
    """EAGLE's posterior evaluation in its layout (module docstring), from its published
    contract: greedy when ``logits_processor`` is None (the longest path whose drafts are the
    target's argmax at every prefix; ``sample_p`` is the logits row after it), else the
    sampling branch, its coins from torch's global generator.
    Returns ``(best_candidate, accept_length, sample_p)``."""
    if logits_processor is None:
        matches = (candidates[:, 1:] == logits[:, :-1].argmax(dim=-1)).long().cumprod(dim=1).sum(dim=1)
        best = int(matches.argmax())
        return torch.tensor(best), int(matches[best]), logits[best, int(matches[best])]

    def processed(row: int, position: int) -> torch.Tensor:
        return torch.softmax(logits_processor(None, logits[row, position][None])[0], dim=-1)

    paths = candidates.tolist()
    best, length, residual = 0, 0, None  # length: accepted drafts
    while length + 1 < len(paths[0]):
        sharing = [row for row, path in enumerate(paths) if path[: length + 1] == paths[best][: length + 1]]
        p = processed(sharing[0], length)
        tried, moved = set(), False
        for row in sharing:
            token = paths[row][length + 1]
            if token < 0 or token in tried:
                continue
            tried.add(token)
            if float(torch.rand(())) <= float(p[token]):
                best, length, moved = row, length + 1, True
                break
            p = p.clone()
            p[token] = 0
            p = p / p.sum()
        if not moved:
            residual = p if tried else None
            break
    return torch.tensor(best), length, residual if residual is not None else processed(best, length)


# --------------------------------------------------------------------------- the adapter


def eagle_tree_verifier(evaluate_posterior_function: EvaluatePosterior, *, temperature: float = 1.0,
                        processor: Callable[[float], Callable] = TemperatureProcessor):
    """``evaluate_posterior_function`` (EAGLE's layout) as a tree verifier of the toolkit's
    contract (module docstring). ``temperature > 0``: the sampling branch, with the logits
    processor ``processor(temperature)`` (default :class:`TemperatureProcessor`; EAGLE's own:
    ``lambda t: prepare_logits_processor(temperature=t)``); ``temperature = 0``: the greedy
    branch (``logits_processor=None``, the argmax emitted), deterministic, so only a
    point-mass target can certify it."""
    if not temperature >= 0:
        raise InvalidArgumentError(f"temperature must be >= 0 (0: the greedy branch), got {temperature!r}")
    logits_processor = processor(temperature) if temperature > 0 else None

    def tree_verify(tree, draft_tokens, target_probs, draft_probs, generator):  # [b, N], [b, N, V], [b, N, V]
        device = draft_tokens.device
        paths = tree_paths(tree).to(device)
        padded = paths < 0
        at = paths.clamp(min=0)
        sentinel = logits_of(sentinel_law(target_probs[:, 0]), 1.0)[:, None, None]  # [b, 1, 1, V]
        all_candidates = torch.where(padded, -1, draft_tokens[:, at])  # [b, P, D + 1]
        all_logits = torch.where(padded[..., None], sentinel, logits_of(target_probs[:, at], temperature))  # [b, P, D + 1, V]
        nodes = torch.zeros(draft_tokens.shape[0], dtype=torch.int64, device=device)
        tokens = torch.zeros_like(nodes)
        seed = int(torch.randint(2**62, (1,), generator=generator, device=generator.device if generator else "cpu"))
        state = random.getstate()
        try:
            with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
                torch.manual_seed(seed)
                random.seed(seed)
                for row in range(draft_tokens.shape[0]):
                    result = evaluate_posterior_function(all_logits[row], all_candidates[row], logits_processor)
                    nodes[row], tokens[row] = _accepted(result, paths, target_probs.shape[-1], logits_processor is None)
        finally:
            random.setstate(state)
        return TreeVerifierOutput(nodes, tokens)

    return tree_verify


def _accepted(result, paths: torch.Tensor, vocab: int, greedy: bool) -> tuple[int, int]:
    """``(accepted node, emitted token)`` from ``evaluate_posterior``'s result (module docstring)."""
    if not isinstance(result, tuple) or len(result) != 3:
        raise ShapeMismatchError(f"evaluate_posterior must return (best_candidate, accept_length, sample_p), "
                                 f"got {type(result).__name__}")
    best, length, sample_p = int(result[0]), int(result[1]), result[2]
    if not 0 <= best < paths.shape[0] or not 0 <= length < paths.shape[1] or paths[best, length] < 0:
        raise IndexMismatch(f"evaluate_posterior accepted {length} drafts of path {best}, which is not a path of the "
                            f"draft tree of that length ({paths.shape[0]} paths of at most {paths.shape[1] - 1} drafts)")
    if not isinstance(sample_p, torch.Tensor) or sample_p.shape != (vocab,):
        got = tuple(sample_p.shape) if isinstance(sample_p, torch.Tensor) else type(sample_p).__name__
        raise ShapeMismatchError(f"sample_p must be a [V={vocab}] tensor, got {got}")
    token = sample_p.argmax() if greedy else torch.multinomial(sample_p.float(), 1)[0]
    return int(paths[best, length]), int(token)


__all__ = ["EvaluatePosterior", "TemperatureProcessor", "eagle_tree_verifier", "evaluate_posterior", "tree_paths"]
