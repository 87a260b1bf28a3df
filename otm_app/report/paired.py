"""Step 3 of ``otm report``, paired: every rule's expected tokens per target call on the same
drafted trees, the verifiers' coins integrated out.

A short decode per rule (:func:`otm_app.report.decode.decode_rules`) mixes three kinds of
noise: the contexts it happens to visit, the drafts, and the verifier's coins; with a few
dozen steps per rule its block efficiencies cannot order the rules. Here the rules are
compared as the sequence verifiers are (:mod:`otm_app.report.decode`, docs/sequences.md,
section 9), on shared contexts and shared drafts:

- **contexts**: evenly spaced positions of the report's scored texts (the text up to the
  position, teacher-forced into both models' key/value caches);
- **trees**: at each context one tree is drafted per draft law in use (i.i.d. siblings for
  ``rrs``, ``kseq``, ``optimal``; without replacement for ``rrs_wor``, ``optimal_wor``; the
  hub law for ``spechub``; greedy drafts for ``greedy``; a chain for ``single``), all of
  them in one forest under the context's last token, so one draft forward per depth and
  one target forward give ``p`` and ``q`` at every node. Rules of one draft law are
  evaluated on the same tree; rules of different laws on trees drafted at the same context;
- **the value**: for each rule, ``E[tau | tree]``, the expected number of drafts the
  decoding loop's node-wise walk (:func:`decoding.runtime.tree_walk.walk_tree`) accepts on
  that tree, its coins integrated out exactly by the walk's dynamic programme (our
  derivation, as :func:`otm.sequences.tree_rules.tree_walk_law` but given the drafts). At an
  active set ``A`` of nodes (one node, or, for a rule whose drafts are i.i.d., every node
  holding the accepted token: SpecTr's merge, Sun et al. 2023, Alg. 3) with candidate
  children ``x = (x_1..x_k)``, the walk moves to the children holding token ``t`` with
  probability ``m(t | x)`` (:func:`descent_probabilities`), so

      E[tau | tree] = sum over the active sets A the walk can reach of reach(A) sum_t m_A(t | x_A),
      reach(root) = 1,  reach(A_t) = reach(A) m_A(t | x_A).

  Averaged over the drafts, ``E[tau | tree] + 1`` is the rule's expected tokens per target
  call at that context: unbiased, with no coin noise, and paired across rules.

``m(t | x)`` is the rule's exact conditional law given the drafts (:mod:`otm.rules`: the
kernels its exact laws are enumerated with), restricted to the drafted tokens: for every
rule here the output is a drafted token exactly when the verifier accepts a draft (the
rule's membership acceptance equals its "a draft was accepted" probability, docs/theory.md),
except k-SEQ, whose residual can draw a rejected draft's token; the loop does not descend
then, so k-SEQ's ``m`` is its kernel without the residual. At a node with one child the
loop verifies with ``single`` whatever the rule, so ``m`` is ``min(1, p(x) / q(x))`` there.
The tests hold ``m`` and ``E[tau | tree]`` to the verifiers' own draws.
"""
from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence

import numpy as np
import torch

from decoding.runtime.loop import probs_from_logits
from decoding.runtime.tree_attention import TreeCache
from decoding.runtime.tree_walk import NodeRules, resolve_rules
from decoding.runtime.trees import Tree, parse_tree
from decoding.verifiers import VERIFIERS
from otm.errors import NotApplicableError
from otm.rules import greedy, kseq, optimal, optimal_wor, rrs_wor, spechub, specinfer, water_levels
from otm.rules.enumeration import canonical_output_law, validate_pair
from otm.rules.water_levels.pair import with_representable_weights

from .decode import mean_and_error, release_free_heap, rule_tree

#: The rule every other is compared with when it is among the rules (else the first rule
#: that is evaluated): recursive rejection sampling with i.i.d. drafts, the common baseline.
BASELINE_RULE = "rrs"

#: A difference smaller than this many standard errors is reported as unresolved.
RESOLUTION_SIGMAS = 2.0


def _kseq_kernel(p: np.ndarray, q: np.ndarray, k: int):
    """k-SEQ's kernel at ``g*`` without its residual: the loop descends only on an accepted
    draft (module docstring)."""
    return kseq.kernel(p, q, k, kseq.optimal_division_factor(p, q, k), np.zeros_like(p))


def _water_level_kernel(p: np.ndarray, q: np.ndarray, k: int):
    """``K(. | x)`` of the water-level rule (:mod:`otm.rules.optimal_wor`; at two drafts
    :mod:`otm.rules.optimal_wor`): select by the water levels, accept ``Z`` with
    ``min(1, p(Z) / x(Z))``, else draw from ``norm(max(p - x, 0))``. At two drafts the
    selection comes from the verifier's compiled construction
    (:func:`decoding.verifiers.optimal.pair_levels.pair_yield`: ``x``, and ``Y``, the
    probability that the pair selects its member of lower rank), since the exact law's
    construction of the levels (:func:`otm.rules.water_levels.pair.pair_parameters`) runs in
    Python over the ranks, minutes on a real row; from three drafts, from
    :func:`otm.rules.water_levels.parameters.wor_parameters` with the verifier's compiled clock masses."""
    if k >= 3:
        from decoding.verifiers.optimal.clock_masses import CompiledClockSetMasses

        params = water_levels.wor_parameters(p, q, k, clock_masses=CompiledClockSetMasses)
        return functools.partial(optimal_wor.conditional_output_law, params)
    from decoding.verifiers.optimal.pair import UNIT, full_ratio_order
    from decoding.verifiers.optimal.pair_levels import pair_yield

    q = with_representable_weights(q)
    order = full_ratio_order(p, q)
    support = int(np.count_nonzero(q > 0))
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size)
    ranked_p, ranked_q = p[order[:support]], q[order[:support]]

    def kernel(draft_tuple):
        x = np.zeros_like(p)
        if support == 1:  # exhausted support: the q = 0 draft is selected with probability p of it
            fixed = 1 if q[draft_tuple[1]] <= 0 else 0
            x[order[0]], x[draft_tuple[fixed]] = 1.0 - p[draft_tuple[fixed]], p[draft_tuple[fixed]]
            chances = [x[t] for t in draft_tuple]
        else:
            low, high = sorted(int(rank[t]) for t in draft_tuple)
            selection = np.empty(support)
            yielded = pair_yield(ranked_p, ranked_q, UNIT, low, high, selection)[0]
            x[order[:support]] = selection
            chances = [yielded, 1.0 - yielded] if rank[draft_tuple[0]] == low else [1.0 - yielded, yielded]
        return canonical_output_law(p, x, draft_tuple, chances)

    return kernel


#: Rule -> ``(p, q, k) -> kernel``, ``kernel(draft tuple) -> ([V] row, _)``: the row's
#: entries at the drafted tokens are ``m(t | x)`` (module docstring).
KERNELS: dict[str, Callable] = {
    "single": lambda p, q, k: specinfer.kernel(p, [q]),
    "rrs": lambda p, q, k: specinfer.kernel(p, [q] * k),
    "rrs_wor": lambda p, q, k: rrs_wor.kernel(p, q),
    "kseq": _kseq_kernel,
    "spechub": lambda p, q, k: spechub.kernel(p, q),
    "greedy": greedy.kernel,
    "optimal": lambda p, q, k: functools.partial(optimal.conditional_output_law, optimal.selection_parameters(p, q, k)),
    "optimal_wor": _water_level_kernel,
}


def descent_probabilities(rule: str, target_probs, draft_probs, drafts: Sequence[int]) -> dict[int, float]:
    """``{t: m(t | x)}`` over the distinct drafted tokens ``t`` (module docstring): the
    probability that the decoding loop's walk, verifying the drafts ``x`` (``k`` tokens) at
    a node with target ``p`` (``[V]``) and draft ``q`` (``[V]``) with ``rule``, moves to the
    children holding ``t``. ``rule`` is a key of :data:`KERNELS`; ``k = 1`` is ``single``'s."""
    p, q = validate_pair(target_probs, draft_probs)
    drafts = tuple(int(x) for x in drafts)
    k = len(drafts)
    row, _ = KERNELS["single" if k == 1 else rule](p, q, k)(drafts)
    return {t: float(row[t]) for t in dict.fromkeys(drafts)}


def expected_accepted(rules: NodeRules, tree: Tree, tokens: Sequence[int], target_probs: dict, draft_probs: dict) -> float:
    """``E[tau | tree]`` of the node-wise walk with ``rules`` (module docstring) on one drafted
    tree: ``tokens`` ``[n_nodes]`` (the root's unused), ``target_probs`` and ``draft_probs``
    ``{node: [V]}`` at every node with children. A rule without i.i.d. drafts moves to the
    first child holding the accepted token (its drafts are distinct but for an exhausted
    support, where the subtrees of equal tokens are alike)."""
    total = 0.0
    frontier = [((0,), 1.0)]
    while frontier:
        active, reach = frontier.pop()
        children = [int(c) for node in active for c in tree.children(node)]
        if not children:
            continue
        node = active[0]  # every node of the set has the same prefix, so the same p and q
        drafts = [int(tokens[c]) for c in children]
        for token, moved in descent_probabilities(rules.name, target_probs[node], draft_probs[node], drafts).items():
            if moved <= 0:
                continue
            holders = [c for c, t in zip(children, drafts) if t == token]
            total += reach * moved
            frontier.append((tuple(holders if rules.merge else holders[:1]), reach * moved))
    return total


def forest(trees: Sequence[Tree]) -> tuple[Tree, list[np.ndarray]]:
    """One breadth-first tree holding every tree of ``trees`` under a shared root, and
    ``index[g][u]``: the forest node of node ``u`` of tree ``g`` (``index[g][0] = 0``)."""
    index = [np.zeros(tree.n_nodes, dtype=np.int64) for tree in trees]
    parent = [-1]
    for depth in range(1, max(tree.max_depth for tree in trees) + 1):
        for g, tree in enumerate(trees):
            for u in tree.level(depth):
                index[g][u] = len(parent)
                parent.append(int(index[g][tree.parent[u]]))
    return Tree(np.array(parent)), index


class TextCaches:
    """Both models' key/value caches holding a growing prefix of one text, so that its
    positions share one incremental forward: each :meth:`draft` forwards the tokens since
    the previous position, then a forest, and keeps the prefix only."""

    def __init__(self, pair, token_ids: Sequence[int]):
        self.device = next(pair.target.parameters()).device
        self.draft_cache = TreeCache(pair.draft, 1, self.device)
        self.target_cache = TreeCache(pair.target, 1, self.device)
        self.token_ids = [int(t) for t in token_ids]
        self.committed = 0

    def draft(self, end: int, trees: Sequence[Tree], samplers: Sequence[NodeRules], temperature: float,
              generator: torch.Generator) -> list[tuple]:
        """Every tree drafted after ``token_ids[:end]`` with its sampler (one draft forward
        per depth, one target forward over the nodes with children); per tree
        ``(tokens [n_nodes], {node: p}, {node: q})``, ``p`` and ``q`` float64 ``[V]``
        (:func:`float64_law`), computed once per forest node (the trees share the root)."""
        whole, index = forest(trees)
        inner = [int(v) for v in np.flatnonzero(whole.n_children > 0) if v > 0]
        pending = torch.tensor([self.token_ids[self.committed:end]], dtype=torch.int64, device=self.device)
        valid = torch.ones_like(pending, dtype=torch.bool)
        tokens = torch.zeros(whole.n_nodes, dtype=torch.int64, device=self.device)
        self.draft_cache.begin_step(whole)
        draft_logits = {0: self.draft_cache.forward_step(pending, valid)[0, -1]}
        draft_probs: dict[int, torch.Tensor] = {}  # forest node -> q (float32), the law its drafts are drawn from

        def q_at(v: int) -> torch.Tensor:
            if v not in draft_probs:
                draft_probs[v] = probs_from_logits(draft_logits[v], temperature)
            return draft_probs[v]

        for depth in range(whole.max_depth):
            for tree, at, rules in zip(trees, index, samplers):
                for u in tree.level(depth):
                    k = int(tree.n_children[u])
                    if k:
                        q = q_at(int(at[u])).unsqueeze(0)
                        tokens[torch.as_tensor(at[tree.children(u)])] = rules.for_k(k).sample_drafts(q, k, generator)[0]
            level = [v for v in inner if whole.depth[v] == depth + 1]
            if level:
                out = self.draft_cache.forward_step(node_tokens=tokens[level].unsqueeze(0), nodes=level)[0]
                draft_logits.update(zip(level, out))
        self.target_cache.begin_step(whole)
        out = self.target_cache.forward_step(pending, valid, tokens[inner].unsqueeze(0), inner)[0, pending.shape[1] - 1:]
        target_logits = dict(zip([0, *inner], out))
        prefix_only = torch.full((1, 1), -1, dtype=torch.int64, device=self.device)
        self.draft_cache.commit(prefix_only)
        self.target_cache.commit(prefix_only)
        self.committed = end
        laws = {v: (float64_law(probs_from_logits(target_logits[v], temperature)), float64_law(q_at(v))) for v in target_logits}
        drafted = []
        for tree, at in zip(trees, index):
            nodes = [int(u) for u in np.flatnonzero(tree.n_children > 0)]
            drafted.append((tokens[torch.as_tensor(at)].tolist(), {u: laws[int(at[u])][0] for u in nodes},
                            {u: laws[int(at[u])][1] for u in nodes}))
        return drafted


def float64_law(law: torch.Tensor) -> np.ndarray:
    """A ``[V]`` law in float64, renormalised: the models' float32 softmax sums to 1 only to
    its rounding (up to about 5e-5 at ``V = 151,936``); the verifiers compute in float64 too."""
    law = law.double()
    return (law / law.sum()).cpu().numpy()


def draft_groups(rules: Sequence[str], tree: str) -> tuple[dict, list[dict]]:
    """The rules grouped by the tree they are evaluated on: ``{(tree spec, draft law):
    [rules]}`` (one tree per draft law; a chain has one law whatever the rule), and the
    rules that cannot be evaluated, with the reason."""
    groups: dict = {}
    skipped = []
    for rule in rules:
        if rule not in VERIFIERS or rule not in KERNELS:
            why = "no batched verifier" if rule not in VERIFIERS else "no exact conditional law given the drafts"
            skipped.append({"rule": rule, "reason": why})
            continue
        spec = rule_tree(rule, tree)
        law = VERIFIERS[rule].draft_scheme if parse_tree(spec).n_children.max() > 1 else "one draft per node"
        groups.setdefault((spec, law), []).append(rule)
    return groups, skipped


def context_rows(scored, count: int) -> list[tuple[int, int]]:
    """``count`` evenly spaced ``(text, position)`` of the scored texts (all of them when
    ``count`` covers them); the context of ``(i, j)`` is text ``i``'s first ``j + 1`` tokens."""
    from .position_sweep import spaced_rows

    texts = scored.text_of_row
    starts = np.concatenate([[0], np.cumsum([s.n_positions for s in scored.scores])])
    return [(int(texts[r]), int(r - starts[texts[r]])) for r in spaced_rows(texts.size, count)]


def compare_rules(pair, scored, rules: Sequence[str], tree: str, temperature: float, positions: int, seed: int,
                  progress=None) -> dict:
    """The paired comparison (module docstring) at ``positions`` contexts of ``scored``.

    Returns:
        ``baseline``, ``positions``, ``temperature``, ``rows`` (per evaluated rule: ``rule``,
        ``tree``, ``draft_law``, ``expected_tokens`` ``[mean, standard error]`` over positions of
        ``E[tau | tree] + 1``, ``difference`` from the baseline the same way, paired by position
        (``None`` for the baseline), ``resolved``: ``|difference| >= RESOLUTION_SIGMAS``
        standard errors), ``skipped`` (rules with the reason: no conditional law given the
        drafts, or one that refused a drafted tree, :class:`otm.errors.NotApplicableError`),
        ``resolution_sigmas``, ``wall_seconds``.
    """
    start = time.perf_counter()
    groups, skipped = draft_groups(rules, tree)
    evaluated = [rule for members in groups.values() for rule in members]
    baseline = BASELINE_RULE if BASELINE_RULE in evaluated else (evaluated[0] if evaluated else None)
    trees = [parse_tree(spec) for spec, _ in groups]
    samplers = [resolve_rules(members[0]) for members in groups.values()]
    node_rules = {rule: resolve_rules(rule) for rule in evaluated}
    generator = torch.Generator().manual_seed(seed)
    values: dict[str, list[float]] = {rule: [] for rule in evaluated}
    contexts = context_rows(scored, positions) if evaluated else []
    caches: dict[int, TextCaches] = {}
    refused: dict[str, str] = {}  # a rule whose law refuses some drafted tree is left out, with why
    for text, position in progress(contexts) if progress else contexts:
        if text not in caches:  # contexts come text by text: one text's caches at a time
            caches = {text: TextCaches(pair, scored.scores[text].token_ids)}
        drafted = caches[text].draft(position + 1, trees, samplers, temperature, generator)
        release_free_heap()
        for (tokens, target_probs, draft_probs), members, shape in zip(drafted, groups.values(), trees):
            for rule in (rule for rule in members if rule not in refused):
                try:
                    values[rule].append(1 + expected_accepted(node_rules[rule], shape, tokens, target_probs, draft_probs))
                except NotApplicableError as exc:
                    refused[rule] = f"refused a drafted tree: {exc}"
    skipped += [{"rule": rule, "reason": why} for rule, why in refused.items()]
    kept = [rule for rule in evaluated if rule not in refused]
    baseline = baseline if baseline in kept else (kept[0] if kept else None)
    rows = []
    for (spec, law), members in groups.items():
        for rule in (rule for rule in members if rule in kept):
            difference = None if rule == baseline else mean_and_error(np.subtract(values[rule], values[baseline]))
            rows.append({"rule": rule, "tree": spec, "draft_law": law, "expected_tokens": mean_and_error(values[rule]),
                         "difference": difference, "resolved": difference is None or resolved(difference)})
    order = {rule: i for i, rule in enumerate(rules)}
    rows.sort(key=lambda row: order[row["rule"]])
    return {"baseline": baseline, "positions": len(contexts), "temperature": temperature, "rows": rows, "skipped": skipped,
            "resolution_sigmas": RESOLUTION_SIGMAS, "wall_seconds": time.perf_counter() - start}


def resolved(difference: Sequence[float]) -> bool:
    """Whether a ``[mean, standard error]`` difference is at least ``RESOLUTION_SIGMAS``
    standard errors from 0 (an undefined error, from fewer than two positions, is not)."""
    mean, error = difference
    return bool(math.isfinite(error) and mean != 0 and abs(mean) >= RESOLUTION_SIGMAS * error)


__all__ = ["BASELINE_RULE", "KERNELS", "RESOLUTION_SIGMAS", "TextCaches", "compare_rules", "context_rows", "descent_probabilities",
           "draft_groups", "expected_accepted", "float64_law", "forest", "resolved"]
