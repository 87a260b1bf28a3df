"""Drafting a tree and walking it: SpecTr (Sun et al. 2023), Alg. 3 (SpecTr's DraftSelection), batched.

Drafting (:func:`draft_children`): the children of a node are drawn together from the draft
distribution ``q`` at that node with the joint law of the rule in use, ``k`` = number of
children (``sample_drafts`` of the rule's verifier). A node with one child uses the
single-draft rule for both drawing and verifying (Leviathan et al., Leviathan et al. 2023, Alg. 1).

Walk (:func:`walk_tree`), for each row: start with the active set ``{root}``.
At an active set with candidate children ``x_1..x_k`` (the children of its nodes), apply
the rule with the target ``p`` at the set's prefix and the drafts' ``q``: on
``accepted_index == -1`` output the residual token and stop; otherwise descend with
``Y = x_i``. At a set without children take the bonus token ``Y ~ p`` there and stop.

SpecTr (Sun et al. 2023), Alg. 3 keeps, after selecting ``Y``, every candidate sequence whose next token is
``Y`` (``S_next``), so duplicate draft tokens merge their subtrees. This is lossless when
the rule's drafts are i.i.d. (draft scheme ``"iid"``): given the first tokens and the
selection, the continuations of all candidates that start with ``Y`` are i.i.d. from
``q(. | prefix, Y)``, so together they are i.i.d. drafts for the next level (a verifier
is called with ``k`` = their number). For the other schemes (without replacement, hub,
greedy) the union of two groups does not follow the rule's joint law, so only the
accepted child is kept (its subtree was drawn from ``q(. | prefix, Y)`` alone, which is
enough for losslessness). Why the walk is lossless: at each level the rule outputs
``Y ~ p(. | prefix)`` given the history (the rule is lossless for its joint law), and
the bonus token is drawn from ``p``; by induction the emitted tokens follow the target's
autoregressive law (SpecTr, Sun et al. 2023, Thm 3).

Sequence-level verifiers (:func:`walk_sequence`, the names of
:data:`otm.sequences.registry.SEQUENCE_RULES`) decide on the whole drafted chain or tree at
once instead of node by node: block verification (Sun et al., ICLR 2025,
arXiv:2403.10444; :mod:`decoding.verifiers.block`) on a chain, traversal verification
(Weng et al., NeurIPS 2025, arXiv:2505.12398; :mod:`decoding.verifiers.traversal`) on any
tree. Drafting is the same (:func:`draft_children`, siblings from the verifier's sibling
scheme); the step emits the accepted node's path plus one token, lossless by
docs/sequences.md (sections 2 and 5). A :class:`SequenceRule` may carry an ``observe``
callback that sees every drafted tree with its ``p`` and ``q`` before it is verified
(``otm report`` uses it to compute, on the same trees, the exact expected accepted lengths
of the sequence verifier and of its node-wise counterpart).
"""
from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

import numpy as np
import torch

from decoding.runtime.trees import Tree
from decoding.verifiers import get_verifier
from decoding.verifiers.base import draw_uniforms, sample_iid, sample_weighted, sample_without_replacement
from decoding.verifiers.protocol import as_verifier_output
from otm.errors import NotApplicableError, UnknownNameError
from otm.sequences.registry import SIBLING_SCHEMES, SequenceRuleSpec, sequence_rule_spec


@dataclass(frozen=True)
class NodeRules:
    """The verifier used at a node with ``k`` children: ``rule`` for ``k >= 2``,
    ``single`` for ``k = 1``. ``merge`` says whether Alg. 3's merge of equal drafts applies
    (the rule's ``draft_scheme`` is ``"iid"``)."""

    name: str
    rule: object
    single: object

    def for_k(self, k: int):
        return self.single if k == 1 else self.rule

    @property
    def merge(self) -> bool:
        return getattr(self.rule, "draft_scheme", None) == "iid"


def resolve_rules(rule, single=None) -> NodeRules:
    """``rule``: a rule name (``decoding.verifiers.get_verifier``) or a verifier object
    (``draft_scheme``, ``sample_drafts``, ``verify``); ``single``: the ``k = 1`` verifier
    (default: the ``"single"`` rule)."""
    name = rule if isinstance(rule, str) else getattr(rule, "name", getattr(rule, "__name__", type(rule).__name__))
    rule_obj = get_verifier(rule) if isinstance(rule, str) else rule
    single_obj = get_verifier("single") if single is None else single
    return NodeRules(name=str(name).rsplit(".", 1)[-1], rule=rule_obj, single=single_obj)


def draft_children(
    tree: Tree,
    depth: int,
    tokens: torch.Tensor,  # [batch, n_nodes] int64, filled in place for the nodes at depth + 1
    draft_probs: torch.Tensor,  # [batch, n_nodes, vocab], q at every node of depth <= depth
    rules: NodeRules,
    generator: torch.Generator | None,
) -> None:
    """Draw the children of every node at ``depth`` (one ``sample_drafts`` call per
    distinct number of children)."""
    batch, _, vocab = draft_probs.shape
    level = tree.level(depth)
    for k in np.unique(tree.n_children[level]):
        if k == 0:
            continue
        parents = level[tree.n_children[level] == k]
        q = draft_probs[:, parents].reshape(-1, vocab)
        drafts = rules.for_k(int(k)).sample_drafts(q, int(k), generator)  # [batch * m, k]
        children = np.concatenate([tree.children(p) for p in parents])
        tokens[:, children] = drafts.reshape(batch, -1)


@dataclass
class WalkResult:
    """Outcome of :func:`walk_tree` for a batch of rows.

    Attributes:
        path_nodes: ``[batch, max_depth]`` int64, accepted draft nodes root-first, ``-1`` padded.
        n_accepted: ``[batch]`` int64, number of accepted drafts.
        final_token: ``[batch]`` int64, the residual or bonus token that ends the step.
        attempts: ``[max_depth]`` int64, rows that verified drafts at depth ``d + 1``.
        accepts: ``[max_depth]`` int64, rows that accepted a draft at depth ``d + 1``.
    """

    path_nodes: torch.Tensor
    n_accepted: torch.Tensor
    final_token: torch.Tensor
    attempts: np.ndarray
    accepts: np.ndarray


def _path_nodes(tree: Tree, node: torch.Tensor) -> torch.Tensor:  # [batch] -> [batch, max(max_depth, 1)]
    """The draft nodes from the root to ``node`` (root excluded, ``node`` included),
    root-first and ``-1`` padded: one climb of the tree for all rows at once, a few
    operations on ``[batch]`` arrays per level."""
    current = node.cpu().numpy()
    table = np.full((len(current), max(tree.max_depth, 1)), -1, dtype=np.int64)
    for depth in range(tree.max_depth, 0, -1):
        here = tree.depth[current] == depth
        table[here, depth - 1] = current[here]
        current = np.where(here, tree.parent[current], current)
    return torch.as_tensor(table, device=node.device)


def walk_tree(
    tree: Tree,
    tokens: torch.Tensor,  # [batch, n_nodes] int64 (node 0 = root, unused)
    target_probs: torch.Tensor,  # [batch, n_nodes, vocab], p at every node
    draft_probs: torch.Tensor,  # [batch, n_nodes, vocab], q at every node with children
    rules: NodeRules,
    generator: torch.Generator | None,
    recorder=None,
) -> WalkResult:
    """SpecTr (Sun et al. 2023), Alg. 3 on every row (module docstring). ``recorder.add(...)``, when given,
    receives every verification and bonus draw (:class:`decoding.runtime.recording.Recorder`)."""
    batch, n_nodes, vocab = target_probs.shape
    device = target_probs.device
    parent = torch.as_tensor(np.maximum(tree.parent, 0), device=device)
    node_depth = torch.as_tensor(tree.depth, device=device)
    rows_all = torch.arange(batch, device=device)
    active = torch.zeros(batch, n_nodes, dtype=torch.bool, device=device)
    active[:, 0] = True
    running = torch.ones(batch, dtype=torch.bool, device=device)
    last = torch.zeros(batch, dtype=torch.int64, device=device)
    final = torch.full((batch,), -1, dtype=torch.int64, device=device)
    attempts = np.zeros(max(tree.max_depth, 1), dtype=np.int64)
    accepts = np.zeros_like(attempts)
    for depth in range(tree.max_depth + 1):
        cand = active[:, parent] & (node_depth == depth + 1).unsqueeze(0)  # [batch, n_nodes]
        k_rows = torch.where(running, cand.sum(dim=1), -1)
        first_active = active.int().argmax(dim=1)  # [batch]
        next_active = torch.zeros_like(active)
        for k in torch.unique(k_rows).tolist():
            if k < 0:
                continue
            rows = rows_all[k_rows == k]
            p = target_probs[rows, first_active[rows]]  # [n, vocab]
            if k == 0:  # leaf: bonus token from p
                out_tokens = sample_weighted(p, draw_uniforms(generator, len(rows), 1, p)[:, 0])
                final[rows] = out_tokens
                running[rows] = False
                if recorder is not None:
                    recorder.add(rows, depth, first_active[rows], p, None, None, None, out_tokens)
                continue
            cand_idx = cand[rows].nonzero()[:, 1].view(len(rows), k)  # [n, k], node order
            q = draft_probs[rows.unsqueeze(1), parent[cand_idx]]  # [n, k, vocab]
            drafts = tokens[rows.unsqueeze(1), cand_idx]  # [n, k]
            out = as_verifier_output(rules.for_k(k).verify(p, q, drafts, generator), drafts)
            if recorder is not None:
                recorder.add(rows, depth, first_active[rows], p, q[:, 0], drafts, out.accepted_index, out.tokens)
            attempts[depth] += len(rows)
            ok = out.accepted_index >= 0
            accepts[depth] += int(ok.sum())
            rejected = rows[~ok]
            final[rejected] = out.tokens[~ok]
            running[rejected] = False
            acc_rows = rows[ok]
            chosen = cand_idx[ok].gather(1, out.accepted_index[ok].unsqueeze(1)).squeeze(1)
            last[acc_rows] = chosen
            if rules.merge:
                same = tokens[acc_rows] == out.tokens[ok].unsqueeze(1)
                next_active[acc_rows] = cand[acc_rows] & same
            else:
                next_active[acc_rows, chosen] = True
        active = next_active
        if not bool(running.any()):
            break
    path = _path_nodes(tree, last)
    return WalkResult(path, (path >= 0).sum(dim=1), final, attempts, accepts)


@dataclass(frozen=True)
class SequenceRule:
    """A sequence-level verifier in the decoding loop (module docstring).

    Attributes:
        spec: its registry entry (:class:`otm.sequences.registry.SequenceRuleSpec`).
        verifier: its batched module (:mod:`decoding.verifiers.block` or ``.traversal``).
        scheme: how the siblings of a node are drawn (and verified): ``"iid"`` or
            ``"without_replacement"`` (default: the registry's).
        observe: ``None``, or a callable ``observe(tree, tokens, target_probs,
            draft_probs)`` that :func:`walk_sequence` calls with every step's drafted trees
            before verifying them (it must not modify them and draws no randomness, so
            the decode is unchanged).
    """

    spec: SequenceRuleSpec
    verifier: ModuleType
    scheme: str
    observe: Callable | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    def for_k(self, k: int):
        """The drafting interface of :class:`NodeRules` (:func:`draft_children`): itself."""
        return self

    def sample_drafts(self, draft_probs: torch.Tensor, k: int, generator: torch.Generator | None) -> torch.Tensor:
        """``[batch, k]`` siblings from ``draft_probs`` ``[batch, vocab]`` with :attr:`scheme`
        (one child: a plain draw, the same law for both schemes)."""
        if self.scheme == "iid" or k == 1:
            return sample_iid(draft_probs, k, generator)
        return sample_without_replacement(draft_probs, k, generator)


def resolve_sequence_rule(rule, tree: Tree, scheme: str | None = None, recording: bool = False) -> SequenceRule:
    """``rule`` (a name of :data:`otm.sequences.registry.SEQUENCE_RULES` or a
    :class:`SequenceRule`) checked against ``tree``: a chain verifier refuses a tree with a
    node of two or more children (:class:`otm.errors.NotApplicableError` saying what to use),
    and a recording is refused (recordings hold node-wise verifications, which these
    verifiers do not make)."""
    if isinstance(rule, SequenceRule):
        resolved = rule if scheme is None else dataclasses.replace(rule, scheme=scheme)
    else:
        spec = sequence_rule_spec(rule)
        resolved = SequenceRule(spec, importlib.import_module(f"decoding.verifiers.{spec.verifier}"), scheme or spec.draft_scheme)
    if resolved.scheme not in SIBLING_SCHEMES:
        raise UnknownNameError(f"sibling scheme {resolved.scheme!r} for {resolved.name}; choose one of {', '.join(SIBLING_SCHEMES)}")
    if resolved.spec.tree_shape == "chain" and int(tree.n_children.max()) > 1:
        raise NotApplicableError(
            f"{resolved.name} verification verifies one draft chain, but the tree {tree.spec or tree.nested()} has a node "
            f"with {int(tree.n_children.max())} children: use a chain (--tree chain:D or chains:1,D), or --rule traversal "
            "for draft trees"
        )
    if recording:
        raise NotApplicableError(
            f"a recording holds node-wise verifications (otm validate compares each with the per-node optimum); "
            f"{resolved.name} verification decides on the whole draft {resolved.spec.tree_shape}: decode without --record"
        )
    return resolved


def walk_sequence(
    tree: Tree,
    tokens: torch.Tensor, target_probs: torch.Tensor, draft_probs: torch.Tensor,  # the step's tensors, as walk_tree's
    rule: SequenceRule, generator: torch.Generator | None,
) -> WalkResult:
    """One sequence-level verification of every row's tree (module docstring), as a
    :class:`WalkResult`. A chain (node ``i`` at depth ``i``) goes to block verification as
    ``p`` at nodes ``0..D``, ``q`` at nodes ``0..D-1`` and the drafts of nodes ``1..D``.
    ``attempts[d]`` counts the rows whose accepted path reaches a node with children at
    depth ``d``, ``accepts[d]`` those whose path reaches depth ``d + 1``, so
    ``accepts / attempts`` is the rate of going one level deeper, as for the node-wise walk.
    ``rule.observe``, when set, sees the tensors first."""
    if rule.observe is not None:
        rule.observe(tree, tokens, target_probs, draft_probs)
    if rule.spec.tree_shape == "chain":
        depth = tree.max_depth
        out = rule.verifier.verify(target_probs, draft_probs[:, :depth], tokens[:, 1:], generator)
        node = out.n_accepted
    else:
        out = rule.verifier.verify(tree, tokens, target_probs, draft_probs, generator, rule.scheme)
        node = out.accepted_node
    device = target_probs.device
    path = _path_nodes(tree, node)
    n_accepted = torch.as_tensor(tree.depth, device=device)[node]
    with_root = torch.cat([torch.zeros_like(path[:, :1]), path.clamp(min=0)], dim=1)
    has_children = torch.as_tensor(tree.n_children > 0, device=device)
    levels = torch.arange(max(tree.max_depth, 1), device=device)  # d = 0..max_depth-1
    reached = n_accepted.unsqueeze(1) >= levels  # [batch, max_depth]: the path reaches depth d
    attempts = (reached & has_children[with_root[:, :-1]]).sum(dim=0).cpu().numpy()
    accepts = (n_accepted.unsqueeze(1) > levels).sum(dim=0).cpu().numpy()
    return WalkResult(path, n_accepted, out.tokens, attempts, accepts)
