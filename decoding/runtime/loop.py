"""The speculative decoding loop with draft trees, and plain autoregressive sampling.

One step of :func:`speculative_decode` (SpecTr, Sun et al. 2023, §7; Leviathan et al. 2023, Alg. 1 for one chain):

1. draft the tree level by level: one draft-model forward per depth with the tree
   attention mask (:mod:`decoding.runtime.tree_attention`), the children of each node drawn with the
   rule's joint law from ``q`` there (:func:`decoding.runtime.tree_walk.draft_children`);
2. one target forward for the root and every node of the tree (tree attention over the
   target's key/value cache) gives ``p`` at every node;
3. walk the tree (:func:`decoding.runtime.tree_walk.walk_tree`, SpecTr (Sun et al. 2023), Alg. 3), or,
   for a sequence-level rule (``block`` on a chain, ``traversal`` on any tree;
   :data:`otm.sequences.registry.SEQUENCE_RULES`), verify it as a whole
   (:func:`decoding.runtime.tree_walk.walk_sequence`): the accepted drafts plus one
   residual or bonus token are appended; both caches keep the accepted path.

``p`` and ``q`` are the models' next-token laws after temperature and nucleus (top-p)
filtering (:func:`probs_from_logits`), the same transform as :func:`autoregressive_decode`,
so the output follows the target's sampling law exactly. Temperature 0 gives one-hot laws
(greedy decoding; drafts are the draft's argmax and the output is the target's argmax).

All rows of a batch run in lock step (rows are independent: a batch of ``n`` copies of
one prompt is ``n`` independent decodes). Device and dtype are parameters.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from decoding.runtime.tree_attention import TreeCache
from decoding.runtime.tree_walk import (
    NodeRules,
    SequenceRule,
    draft_children,
    resolve_rules,
    resolve_sequence_rule,
    walk_sequence,
    walk_tree,
)
from decoding.runtime.trees import Tree, parse_tree
from decoding.verifiers.base import draw_uniforms, sample_weighted
from otm.errors import InvalidArgumentError, InvalidDistributionError, NotApplicableError
from otm.sequences.registry import SEQUENCE_RULES


class DecodeStopped(NotApplicableError):
    """A verifier refused a row part-way through :func:`speculative_decode` (a typed
    :class:`otm.errors.NotApplicableError` of the verifier: for example ``optimal_wor``'s walk
    that neither its bounds nor its nesting's time limit settle). The message is the
    verifier's, with how far the decode got; ``tokens`` holds each row's new tokens up to
    the refused step, so what was generated is not lost; ``texts`` and ``record`` are for a
    caller that turns them into text and saves the recording (``otm decode`` does, with the
    prompts decoded before)."""

    def __init__(self, message: str, tokens: list[list[int]]):
        super().__init__(message)
        self.tokens = tokens
        self.texts: list = []
        self.record: str | None = None


def probs_from_logits(
    logits: torch.Tensor,  # [..., vocab]
    temperature: float,
    top_p: float = 1.0,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:  # [..., vocab]
    """Sampling law from logits: ``softmax(logits / T)`` restricted to the smallest set of
    most likely tokens whose mass reaches ``top_p`` (ties broken by token order), then
    renormalised. ``T = 0`` gives the one-hot law of the argmax (first maximum).
    Computed in ``dtype`` (default: float32 for half precision models, else the logits' dtype).
    ``-inf`` logits are allowed (a masked token); a NaN or ``+inf`` logit, or a row that is
    ``-inf`` everywhere, is a :class:`otm.errors.InvalidDistributionError` (a model that
    overflows in half precision gives them), found from the rows' maxima the softmax needs
    anyway: ``amax`` propagates NaN."""
    if not (temperature >= 0 and math.isfinite(temperature)):
        raise InvalidDistributionError(f"temperature must be a finite number >= 0 (0 = argmax), got {temperature}")
    if not (0 < top_p <= 1):
        raise InvalidDistributionError(f"top_p must be in (0, 1], got {top_p}")
    if dtype is None:
        dtype = torch.float32 if logits.dtype in (torch.float16, torch.bfloat16) else logits.dtype
    logits = logits.to(dtype)
    top = logits.amax(dim=-1, keepdim=True)
    _check_row_maxima(top)
    if temperature == 0:
        return torch.nn.functional.one_hot(logits.argmax(dim=-1), logits.shape[-1]).to(dtype)
    # shift by the maximum before dividing: a tiny temperature then gives the limit law, never NaN
    probs = torch.softmax((logits - top) / temperature, dim=-1)
    if top_p < 1:
        sorted_probs, order = probs.sort(dim=-1, descending=True, stable=True)
        before = sorted_probs.cumsum(dim=-1) - sorted_probs  # mass strictly before each token
        keep_sorted = before < top_p
        keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
        probs = torch.where(keep, probs, torch.zeros_like(probs))
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


def _check_row_maxima(top: torch.Tensor) -> None:
    """The typed error of :func:`probs_from_logits` for rows whose maximum logit is NaN (a NaN
    in the row), ``+inf`` or ``-inf`` (every logit ``-inf``)."""
    bad = ~torch.isfinite(top).flatten()
    if bad.any():
        row = int(bad.nonzero()[0])
        value = float(top.flatten()[row])
        what = "a NaN" if math.isnan(value) else "+inf" if value > 0 else "only -inf (no token has positive probability)"
        raise InvalidDistributionError(f"logits row {row} (of {bad.numel()}) contains {what}: the model's output is not a "
                                       f"distribution")


@dataclass
class DecodeResult:
    """What a decode returns.

    Attributes:
        tokens: generated token ids per row (at most ``max_new_tokens``, cut after an EOS).
        target_calls: target forwards after the prompt (one per step).
        block_efficiency: tokens produced per target call, before the cut at
            ``max_new_tokens`` (``accepted drafts + 1`` averaged over steps and rows).
        acceptance_by_depth: for each draft depth ``d = 1..D``, the fraction of
            verifications at depth ``d`` that accepted a draft (conditional on reaching it).
        wall_seconds: wall-clock time of the decode (prefill included).
        draft_calls: draft forwards after the prompt.
        steps_tokens: per step, the mean number of tokens produced per row.
        attempts_by_depth, accepts_by_depth: the counts behind ``acceptance_by_depth``.
        rule, tree: names of the rule and the tree spec.
    """

    tokens: list[list[int]]
    target_calls: int
    block_efficiency: float
    acceptance_by_depth: list[float]
    wall_seconds: float
    draft_calls: int = 0
    steps_tokens: list[float] = field(default_factory=list)
    attempts_by_depth: list[int] = field(default_factory=list)
    accepts_by_depth: list[int] = field(default_factory=list)
    rule: str = ""
    tree: str = ""

    @property
    def tokens_generated(self) -> int:
        return sum(len(t) for t in self.tokens)

    def summary(self) -> dict:
        """The ``otm decode --json`` fields."""
        return {
            "rule": self.rule,
            "tree": self.tree,
            "tokens_generated": self.tokens_generated,
            "target_calls": self.target_calls,
            "draft_calls": self.draft_calls,
            "block_efficiency": self.block_efficiency,
            "acceptance_by_depth": self.acceptance_by_depth,
            "wall_seconds": self.wall_seconds,
        }


def _models(pair_or_models):
    if isinstance(pair_or_models, (tuple, list)):
        return pair_or_models[0], pair_or_models[1]
    return pair_or_models.draft, pair_or_models.target


def _prompt_batch(prompt_ids, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Prompts (one list of ids, a list of lists, or a ``[batch, L]`` tensor) as a
    left-padded ``[batch, L]`` int64 tensor and its ``[batch, L]`` validity mask."""
    if isinstance(prompt_ids, torch.Tensor):
        ids = prompt_ids.to(device=device, dtype=torch.int64)
        ids = ids.unsqueeze(0) if ids.ndim == 1 else ids
        rows = [row.tolist() for row in ids]
    else:
        rows = [list(prompt_ids)] if prompt_ids and not isinstance(prompt_ids[0], (list, tuple)) else [list(r) for r in prompt_ids]
    if not rows or any(len(r) == 0 for r in rows):
        raise InvalidDistributionError("every prompt needs at least one token id")
    width = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), width, dtype=torch.int64)
    valid = torch.zeros(len(rows), width, dtype=torch.bool)
    for b, r in enumerate(rows):
        ids[b, width - len(r):] = torch.as_tensor(r, dtype=torch.int64)
        valid[b, width - len(r):] = True
    return ids.to(device), valid.to(device)


def _progress(total: int, enabled: bool):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="tok", desc="decode", leave=False)


def _append(out: list[list[int]], done: np.ndarray, new_tokens: list[list[int]], max_new: int, eos) -> int:
    """Append each row's step tokens (cut at ``max_new`` / EOS); returns tokens added."""
    added = 0
    for b, toks in enumerate(new_tokens):
        if done[b]:
            continue
        for t in toks:
            out[b].append(t)
            added += 1
            if len(out[b]) >= max_new or (eos is not None and t == eos):
                done[b] = True
                break
    return added


def speculative_decode(
    pair_or_models,
    prompt_ids,
    rule,
    tree: str | Tree,
    temperature: float = 1.0,
    top_p: float = 1.0,
    max_new_tokens: int = 32,
    generator: torch.Generator | None = None,
    device=None,
    dtype: torch.dtype | None = None,
    record=None,
    progress: bool = True,
    eos_token_id: int | None = None,
    single_rule=None,
) -> DecodeResult:
    """Speculative decoding with a draft tree (module docstring).

    Args:
        pair_or_models: a :class:`decoding.models.hf.ModelPair` or ``(draft, target)``;
            both must share the vocabulary.
        prompt_ids: one prompt (list of ids), several (list of lists, left-padded
            internally) or a ``[batch, L]`` tensor.
        rule: a rule name (``single, rrs, rrs_wor, specinfer, kseq, spechub,
            importance_sampling_truncated, greedy``), a verifier object, or a
            sequence-level verifier: ``block`` (``tree`` must be a chain) or ``traversal``
            (a name, or a :class:`decoding.runtime.tree_walk.SequenceRule` for another
            sibling scheme).
        tree: a :class:`decoding.runtime.trees.Tree` or a spec string (:func:`decoding.runtime.trees.parse_tree`).
        temperature, top_p: the sampling law of both models (:func:`probs_from_logits`).
        generator: a ``torch.Generator`` on ``device`` (all randomness comes from it).
        device, dtype: where the models run (default: the target's); the models are moved there.
        record: a :class:`decoding.runtime.recording.Recorder` that receives every verification
            (node-wise rules only).
        progress: show a tqdm progress bar.
        eos_token_id: a row stops after emitting it.
        single_rule: verifier for nodes with one child (default ``"single"``; node-wise rules only).
    """
    _check_max_new_tokens(max_new_tokens)
    start = time.perf_counter()
    draft_model, target_model, device = _place_models(pair_or_models, device, dtype)
    tree = parse_tree(tree)
    rules = _resolve_rules(rule, tree, single_rule, record)
    ids, valid = _prompt_batch(prompt_ids, device)
    batch = ids.shape[0]
    target_cache, draft_cache = TreeCache(target_model, batch, device), TreeCache(draft_model, batch, device)
    if ids.shape[1] > 1:
        target_cache.prefill(ids[:, :-1], valid[:, :-1])
        draft_cache.prefill(ids[:, :-1], valid[:, :-1])
    last = ids[:, -1]
    draft_pending, draft_pending_valid = ids[:, -1:], torch.ones(batch, 1, dtype=torch.bool, device=device)
    out: list[list[int]] = [[] for _ in range(batch)]
    done = np.zeros(batch, dtype=bool)
    attempts = np.zeros(max(tree.max_depth, 1), dtype=np.int64)
    accepts = np.zeros_like(attempts)
    steps_tokens: list[float] = []
    target_calls = draft_calls = 0
    bar = _progress(batch * max_new_tokens, progress)
    while not done.all():
        if record is not None:
            record.begin_step()
        tokens, draft_probs, calls = _draft_tree(draft_cache, tree, last, draft_pending, draft_pending_valid, rules,
                                                 generator, temperature, top_p, check_memory=target_calls == 0)
        draft_calls += calls
        target_probs = _target_laws(target_cache, tree, tokens, temperature, top_p)
        target_calls += 1
        try:
            if isinstance(rules, SequenceRule):
                walk = walk_sequence(tree, tokens, target_probs, draft_probs, rules, generator)
            else:
                walk = walk_tree(tree, tokens, target_probs, draft_probs, rules, generator, recorder=record)
        except NotApplicableError as exc:
            if bar is not None:
                bar.close()
            raise DecodeStopped(f"{exc} (the decode stopped there, after {sum(map(len, out))} new tokens in "
                                f"{target_calls} target calls)", out) from exc
        attempts += walk.attempts
        accepts += walk.accepts
        target_cache.commit(walk.path_nodes)
        draft_cache.commit(walk.path_nodes)
        draft_pending, draft_pending_valid = _draft_pending(tree, tokens, walk)
        last = walk.final_token
        steps_tokens.append(float((walk.n_accepted + 1).double().mean()))
        added = _append(out, done, _step_tokens(tokens, walk), max_new_tokens, eos_token_id)
        if bar is not None:
            bar.update(added)
    if bar is not None:
        bar.close()
    with np.errstate(invalid="ignore", divide="ignore"):
        by_depth = np.where(attempts > 0, accepts / np.maximum(attempts, 1), np.nan)
    return DecodeResult(
        tokens=out,
        target_calls=target_calls,
        block_efficiency=float(np.mean(steps_tokens)),
        acceptance_by_depth=[None if np.isnan(v) else float(v) for v in by_depth],
        wall_seconds=time.perf_counter() - start,
        draft_calls=draft_calls,
        steps_tokens=steps_tokens,
        attempts_by_depth=attempts.tolist(),
        accepts_by_depth=accepts.tolist(),
        rule=rules.name,
        tree=tree.spec or str(tree.nested()),
    )


def _place_models(pair_or_models, device, dtype) -> tuple[torch.nn.Module, torch.nn.Module, torch.device]:
    """``(draft, target, device)``: the models moved to ``device``/``dtype`` (default: the target's device)."""
    draft_model, target_model = _models(pair_or_models)
    device = torch.device(device) if device is not None else next(target_model.parameters()).device
    if dtype is not None or device != next(target_model.parameters()).device:
        draft_model.to(device=device, dtype=dtype)
        target_model.to(device=device, dtype=dtype)
    return draft_model, target_model, device


def _resolve_rules(rule, tree: Tree, single_rule, record) -> NodeRules | SequenceRule:
    """The node-wise verifiers of ``rule`` (with ``single_rule`` at one-child nodes), or its
    sequence-level verifier for ``tree``."""
    if isinstance(rule, SequenceRule) or (isinstance(rule, str) and rule in SEQUENCE_RULES):
        if single_rule is not None:
            raise NotApplicableError(f"single_rule applies to node-wise rules; {rule} verifies the whole tree")
        return resolve_sequence_rule(rule, tree, recording=record is not None)
    return resolve_rules(rule, single_rule) if not isinstance(rule, NodeRules) else rule


def _draft_tree(draft_cache: TreeCache, tree: Tree, last: torch.Tensor, pending: torch.Tensor,
                pending_valid: torch.Tensor, rules, generator, temperature: float, top_p: float,
                check_memory: bool) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Step 1: draft the tree below ``last`` (``[batch]``), one draft forward per depth.

    ``pending`` (``[batch, m]``, valid where ``pending_valid``) are the tokens the draft cache
    has not seen yet. Returns the tree's tokens ``[batch, nodes]`` (node 0 is ``last``), the
    draft laws at every node ``[batch, nodes, V]`` (zero at leaves) and the draft calls made;
    ``check_memory`` checks one step's memory once ``V`` is known (:func:`check_step_memory`).
    """
    batch, device = last.shape[0], last.device
    has_children = tree.n_children > 0
    tokens = torch.zeros(batch, tree.n_nodes, dtype=torch.int64, device=device)
    tokens[:, 0] = last
    draft_cache.begin_step(tree)
    logits = draft_cache.forward_step(pending, pending_valid)
    calls = 1
    q_root = probs_from_logits(logits[:, -1], temperature, top_p)
    if check_memory:
        check_step_memory(batch, tree, q_root.shape[-1], q_root.dtype, device)
    draft_probs = torch.zeros(batch, tree.n_nodes, q_root.shape[-1], dtype=q_root.dtype, device=device)
    draft_probs[:, 0] = q_root
    for depth in range(tree.max_depth):
        draft_children(tree, depth, tokens, draft_probs, rules, generator)
        nodes = tree.level(depth + 1)
        nodes = nodes[has_children[nodes]]
        if len(nodes):
            logits = draft_cache.forward_step(node_tokens=tokens[:, nodes], nodes=nodes)
            calls += 1
            draft_probs[:, nodes] = probs_from_logits(logits, temperature, top_p)
    return tokens, draft_probs, calls


def _target_laws(target_cache: TreeCache, tree: Tree, tokens: torch.Tensor, temperature: float,
                 top_p: float) -> torch.Tensor:  # [batch, nodes, V]
    """Step 2: one target forward for the root and every node of the tree: ``p`` at every node."""
    batch, device = tokens.shape[0], tokens.device
    target_cache.begin_step(tree)
    logits = target_cache.forward_step(
        tokens[:, :1], torch.ones(batch, 1, dtype=torch.bool, device=device), tokens[:, 1:], range(1, tree.n_nodes)
    )
    return probs_from_logits(logits, temperature, top_p)


def _draft_pending(tree: Tree, tokens: torch.Tensor, walk) -> tuple[torch.Tensor, torch.Tensor]:
    """The tokens the draft cache has to read at the next step (``[batch, 2]`` and its
    validity): the last accepted node when it is a leaf (never forwarded), then the final token."""
    has_children = torch.as_tensor(tree.n_children > 0, device=tokens.device)
    last_node = walk.path_nodes.gather(1, (walk.n_accepted - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
    leaf_pending = (walk.n_accepted > 0) & ~has_children[last_node.clamp(min=0)]
    leaf_token = tokens.gather(1, last_node.clamp(min=0).unsqueeze(1)).squeeze(1)
    pending = torch.stack([torch.where(leaf_pending, leaf_token, 0), walk.final_token], dim=1)
    return pending, torch.stack([leaf_pending, torch.ones_like(leaf_pending)], dim=1)


def _step_tokens(tokens: torch.Tensor, walk) -> list[list[int]]:
    """Each row's new tokens of a step: its accepted path, then the final (residual or bonus) token."""
    path_tokens = torch.where(walk.path_nodes >= 0, tokens.gather(1, walk.path_nodes.clamp(min=0)), -1)
    return [[t for t in row if t >= 0] + [f] for row, f in zip(path_tokens.tolist(), walk.final_token.tolist())]


#: Tensors of ``[batch, nodes, V]`` that one decoding step holds at once: the draft laws,
#: the target's logits and laws, and the temporaries of a top-p or temperature transform.
STEP_TENSORS = 5


def step_bytes(batch: int, n_nodes: int, vocab: int, dtype: torch.dtype) -> int:
    """Estimated bytes of one decoding step's per-node tensors (:data:`STEP_TENSORS` of
    ``[batch, n_nodes, vocab]`` in ``dtype``), the bulk of a step at an LLM vocabulary."""
    return STEP_TENSORS * batch * n_nodes * vocab * torch.empty((), dtype=dtype).element_size()


def available_bytes(device: torch.device) -> int | None:
    """Free memory where a step's tensors live: ``MemAvailable`` of ``/proc/meminfo`` on the
    CPU, the CUDA allocator's free memory on a GPU; ``None`` where it cannot be read."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo") as handle:
            fields = dict(line.split(":", 1) for line in handle)
        return int(fields["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return None


def check_step_memory(batch: int, tree: Tree, vocab: int, dtype: torch.dtype, device: torch.device) -> None:
    """Refuse a tree whose step would not fit in memory, before its tensors are allocated
    (a draft tree of thousands of nodes at a 151,936-token vocabulary needs tens of GB)."""
    need, free = step_bytes(batch, tree.n_nodes, vocab, dtype), available_bytes(device)
    if free is not None and need > free:
        raise InvalidArgumentError(
            f"draft tree {tree.spec or tree.n_nodes} ({tree.n_nodes} nodes) x batch {batch} at a vocabulary of {vocab:,} "
            f"needs about {need / 2**30:.1f} GiB per step, more than the {free / 2**30:.1f} GiB free on {device}; "
            "use a smaller tree or fewer prompts at once")


def _check_max_new_tokens(max_new_tokens) -> None:
    """A decode generates at least one token (``0`` used to generate one anyway)."""
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, (int, np.integer)) or max_new_tokens < 1:
        raise InvalidArgumentError(f"max_new_tokens must be an integer >= 1, got {max_new_tokens!r}")


def autoregressive_decode(
    model: torch.nn.Module,
    prompt_ids,
    temperature: float = 1.0,
    top_p: float = 1.0,
    max_new_tokens: int = 32,
    generator: torch.Generator | None = None,
    device=None,
    progress: bool = True,
    eos_token_id: int | None = None,
) -> DecodeResult:
    """Plain autoregressive sampling from ``model`` (one forward per token), the reference
    law of :func:`speculative_decode`; same prompt handling, sampling law and cache."""
    _check_max_new_tokens(max_new_tokens)
    start = time.perf_counter()
    device = torch.device(device) if device is not None else next(model.parameters()).device
    ids, valid = _prompt_batch(prompt_ids, device)
    batch = ids.shape[0]
    cache = TreeCache(model, batch, device)
    pending, pending_valid = ids, valid
    out: list[list[int]] = [[] for _ in range(batch)]
    done = np.zeros(batch, dtype=bool)
    calls = 0
    bar = _progress(batch * max_new_tokens, progress)
    while not done.all():
        cache.begin_step(None)
        logits = cache.forward_step(pending, pending_valid)
        cache.commit(torch.zeros(batch, 0, dtype=torch.int64, device=device))
        calls += 1
        probs = probs_from_logits(logits[:, -1], temperature, top_p)
        token = sample_weighted(probs, draw_uniforms(generator, batch, 1, probs)[:, 0])
        pending, pending_valid = token.unsqueeze(1), torch.ones(batch, 1, dtype=torch.bool, device=device)
        added = _append(out, done, [[t] for t in token.tolist()], max_new_tokens, eos_token_id)
        if bar is not None:
            bar.update(added)
    if bar is not None:
        bar.close()
    return DecodeResult(out, calls, 1.0, [], time.perf_counter() - start, steps_tokens=[1.0] * calls, rule="autoregressive")
