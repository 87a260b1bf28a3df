"""Step 3 of ``otm report``: a short speculative decoding per rule on the model pair, and
its block efficiency (tokens produced per target call, SpecTr (Sun et al. 2023), §7).

Each rule drafts a tree (default ``binary:3``: the rule draws 2 children at every node,
depth 3, so 14 draft tokens per step); ``single`` draws one draft per node (``chain:D``
with the same depth). Every rule decodes the same prompts with the same seed, one prompt
at a time (batch 1, as in deployment).

The sequence verifiers (:func:`decode_sequence_verifiers`): block verification (Sun,
Mendlovic, Leviathan, Aharoni, Ro, Beirami, Suresh, ICLR 2025, arXiv:2403.10444) decodes
on ``chain:D`` and traversal verification (Weng et al., NeurIPS 2025, arXiv:2505.12398) on
the report's tree, with the same prompts, budget and seed. At every step, on the drafted
chain or tree itself, the expected accepted length of the sequence verifier and of its
node-wise counterpart (token-wise ``single`` on the chain, ``rrs_wor`` on the tree) is
computed with the verifiers' coins integrated out (:func:`decoding.verifiers.block.expected_accepted`,
:func:`decoding.verifiers.block.tokenwise_expected_accepted`,
:func:`decoding.verifiers.traversal.expected_accepted`; docs/sequences.md, section 9): a
paired comparison on the same drafts, far less noisy than two separate decodes.
"""
from __future__ import annotations

import ctypes
import dataclasses
import functools
import math
from collections.abc import Sequence

import numpy as np
import torch

from decoding.runtime.trees import parse_tree
from decoding.validation.stats import ratio_and_error
from decoding.verifiers import VERIFIERS, block, traversal
from otm.rules.registry import rule_spec
from otm.sequences.registry import SEQUENCE_RULES
from otm.tolerances import AGREEMENT_TOLERANCE

#: (sequence verifier, the node-wise rule it is compared with on the same drafts).
SEQUENCE_COMPARISONS = (("block", "single"), ("traversal", "rrs_wor"))


def rule_tree(rule: str, tree: str) -> str:
    """The tree spec a rule decodes with: ``tree``, or a chain of the same depth for a rule that
    verifies one draft at a time (a rule of :mod:`otm.rules.registry` defined for ``k = 1`` only,
    a sequence verifier of :mod:`otm.sequences.registry` whose tree shape is a chain)."""
    chain = SEQUENCE_RULES[rule].tree_shape == "chain" if rule in SEQUENCE_RULES else rule_spec(rule).ks[1] == 1
    if chain:
        return f"chain:{max(parse_tree(tree).max_depth, 1)}"
    return tree


def decode_rules(pair, prompts: Sequence[tuple[str, list]], rules: Sequence[str], tree: str, temperature: float, max_new_tokens: int, seed: int, progress: bool = True) -> list[dict]:
    """Block efficiency of each rule that has a verifier (:data:`decoding.verifiers.VERIFIERS`).

    Returns:
        one dict per rule: ``rule``, ``tree``, ``block_efficiency`` (realised: mean tokens per
        target call over all steps of all prompts), ``block_efficiency_error`` (its standard
        error over steps), ``steps``, ``tokens_generated``, ``target_calls``,
        ``acceptance_by_depth``, ``wall_seconds``; rules without a verifier get ``skipped``
        with the reason.
    """
    from decoding.runtime.loop import speculative_decode

    eos = getattr(pair.tokenizer, "eos_token_id", None) if pair.tokenizer is not None else None
    rows = []
    for rule in rules:
        if rule not in VERIFIERS:
            rows.append({"rule": rule, "skipped": "no batched verifier in decoding.verifiers"})
            continue
        spec = rule_tree(rule, tree)
        generator = torch.Generator().manual_seed(seed)
        steps, calls, tokens, seconds = [], 0, 0, 0.0
        attempts = accepts = None
        for _, prompt in prompts:
            result = speculative_decode(
                pair, prompt, rule, spec, temperature=temperature, max_new_tokens=max_new_tokens,
                generator=generator, progress=progress, eos_token_id=eos,
            )
            steps += result.steps_tokens
            calls += result.target_calls
            tokens += result.tokens_generated
            seconds += result.wall_seconds
            attempts = np.add(attempts, result.attempts_by_depth) if attempts is not None else np.asarray(result.attempts_by_depth)
            accepts = np.add(accepts, result.accepts_by_depth) if accepts is not None else np.asarray(result.accepts_by_depth)
            release_free_heap()
        efficiency, error = mean_and_error(steps)
        rows.append({
            "rule": rule,
            "tree": spec,
            "block_efficiency": efficiency,
            "block_efficiency_error": error,
            "steps": len(steps),
            "tokens_generated": int(tokens),
            "target_calls": int(calls),
            "acceptance_by_depth": [None if n == 0 else float(a / n) for a, n in zip(accepts, attempts)],
            "wall_seconds": seconds,
        })
    return rows


class StepValues:
    """``observe`` callback of a :class:`decoding.runtime.tree_walk.SequenceRule`: per step
    and row, ``E[tau]`` of the sequence verifier and of its node-wise counterpart on the
    drafted chain or tree (module docstring), in float64 whatever the models' dtype (in
    float32 the per-chain inequality block >= token-wise, which :func:`sequence_checks`
    holds to 1e-9, is lost to rounding, by up to about 1e-7 on the Qwen pair)."""

    def __init__(self, rule: str, scheme: str):
        self.rule, self.scheme = rule, scheme
        self.sequence: list[float] = []
        self.baseline: list[float] = []

    def __call__(self, tree, tokens, target_probs, draft_probs) -> None:
        target_probs, draft_probs = target_probs.double(), draft_probs.double()
        if self.rule == "block":
            depth = tree.max_depth
            chain = (target_probs[:, : depth + 1], draft_probs[:, :depth], tokens[:, 1:])
            sequence, baseline = block.expected_accepted(*chain), block.tokenwise_expected_accepted(*chain)
        else:
            drafts = (tree, tokens, target_probs, draft_probs, self.scheme)
            sequence, baseline = traversal.expected_accepted(*drafts), traversal.expected_accepted(*drafts, nodewise=True)
        self.sequence += sequence.double().cpu().tolist()
        self.baseline += baseline.double().cpu().tolist()


@functools.cache
def _libc():
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc
        return None


def release_free_heap() -> None:
    """Give the free pages of the C heap back to the system (glibc's ``malloc_trim``; nothing
    where there is no glibc): a decode allocates and frees ``[nodes, V]`` tensors of a few MB
    at every step, and the heap they are carved from keeps its high-water mark resident."""
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)


def mean_and_error(values: Sequence[float]) -> list[float]:
    """``[mean, standard error]`` over samples (steps, or positions; NaN error with fewer than 2)."""
    x = np.asarray(values, dtype=np.float64)
    return [float(x.mean()), float(x.std(ddof=1) / math.sqrt(x.size)) if x.size > 1 else math.nan]


def decode_sequence_verifiers(pair, prompts: Sequence[tuple[str, list]], tree: str, temperature: float, max_new_tokens: int, seed: int,
                              progress: bool = True) -> list[dict]:
    """Block and traversal verification decoded as :func:`decode_rules` decodes a rule, each
    compared step by step with its node-wise counterpart on the same drafts (module docstring).

    Returns:
        one dict per :data:`SEQUENCE_COMPARISONS` entry: ``rule``, ``baseline``, ``tree``,
        ``block_efficiency`` (realised, of the sequence verifier's decode) and
        ``block_efficiency_error`` (its standard error over steps), ``steps``,
        ``expected_tokens`` with ``rule``, ``baseline`` and ``gain`` (``[mean, standard
        error]`` over steps of ``E[tau] + 1``, tokens per target call) and
        ``relative_gain`` (gain / baseline, with its delta-method error), ``min_gain`` (the
        smallest per-step gain), ``wall_seconds``.
    """
    from decoding.runtime.loop import speculative_decode
    from decoding.runtime.tree_walk import resolve_sequence_rule

    eos = getattr(pair.tokenizer, "eos_token_id", None) if pair.tokenizer is not None else None
    rows = []
    for rule, baseline in SEQUENCE_COMPARISONS:
        spec = rule_tree(rule, tree)
        resolved = resolve_sequence_rule(rule, parse_tree(spec))
        values = StepValues(rule, resolved.scheme)
        observed = dataclasses.replace(resolved, observe=values)
        generator = torch.Generator().manual_seed(seed)
        steps, seconds = [], 0.0
        for _, prompt in prompts:
            result = speculative_decode(pair, prompt, observed, spec, temperature=temperature, max_new_tokens=max_new_tokens,
                                        generator=generator, progress=progress, eos_token_id=eos)
            steps += result.steps_tokens
            seconds += result.wall_seconds
            release_free_heap()
        sequence, base = np.asarray(values.sequence) + 1, np.asarray(values.baseline) + 1
        efficiency, error = mean_and_error(steps)
        rows.append({
            "rule": rule,
            "baseline": baseline,
            "tree": spec,
            "block_efficiency": efficiency,
            "block_efficiency_error": error,
            "steps": len(values.sequence),
            "expected_tokens": {"rule": mean_and_error(sequence), "baseline": mean_and_error(base),
                                "gain": mean_and_error(sequence - base)},
            "relative_gain": list(ratio_and_error(sequence - base, base)),
            "min_gain": float((sequence - base).min()),
            "wall_seconds": seconds,
        })
    return rows


def sequence_checks(rows: list[dict]) -> list[str]:
    """What must hold of :func:`decode_sequence_verifiers`' rows, as messages (empty when all
    is well): every mean of expected tokens per call lies in ``[1, depth + 1]``, and block
    verification is never below token-wise verification on a drafted chain
    (``w_i >= prod_{j<=i} min(1, r_j)`` per chain, docs/sequences.md, section 2), to
    :data:`otm.tolerances.AGREEMENT_TOLERANCE`. (Traversal verification has no per-tree
    guarantee over ``rrs_wor``: docs/sequences.md, section 6.)"""
    problems = []
    for row in rows:
        depth = parse_tree(row["tree"]).max_depth
        for key in ("rule", "baseline"):
            mean = row["expected_tokens"][key][0]
            if not 1 - AGREEMENT_TOLERANCE <= mean <= depth + 1 + AGREEMENT_TOLERANCE:
                problems.append(f"{row[key]} on {row['tree']}: {mean:.6f} expected tokens per call, outside [1, {depth + 1}]")
        if row["rule"] == "block" and row["min_gain"] < -AGREEMENT_TOLERANCE:
            problems.append(f"block verification below token-wise verification on a drafted chain (by {-row['min_gain']:.3g})")
    return problems


__all__ = ["SEQUENCE_COMPARISONS", "StepValues", "decode_rules", "decode_sequence_verifiers", "mean_and_error", "release_free_heap", "rule_tree",
           "sequence_checks"]
