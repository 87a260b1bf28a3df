"""Step 3 of ``otm report``: a short speculative decoding per rule on the model pair, and
its block efficiency (tokens produced per target call, SpecTr (Sun et al. 2023), §7).

Each rule drafts a tree (default ``binary:3``: the rule draws 2 children at every node,
depth 3, so 14 draft tokens per step); ``single`` draws one draft per node (``chain:D``
with the same depth). Every rule decodes the same prompts with the same seed, one prompt
at a time (batch 1, as in deployment).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from decoding.runtime.trees import parse_tree
from decoding.verifiers import VERIFIERS


def rule_tree(rule: str, tree: str) -> str:
    """The tree spec a rule decodes with: ``tree``, or a chain of the same depth for ``single``."""
    if rule == "single":
        return f"chain:{max(parse_tree(tree).max_depth, 1)}"
    return tree


def decode_rules(pair, prompts: Sequence[tuple[str, list]], rules: Sequence[str], tree: str, temperature: float, max_new_tokens: int, seed: int, progress: bool = True) -> list[dict]:
    """Block efficiency of each rule that has a verifier (:data:`decoding.verifiers.VERIFIERS`).

    Returns:
        one dict per rule: ``rule``, ``tree``, ``block_efficiency`` (mean tokens per target
        call over all steps of all prompts), ``tokens_generated``, ``target_calls``,
        ``acceptance_by_depth``, ``wall_seconds``; rules without a verifier get
        ``skipped`` with the reason.
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
        rows.append({
            "rule": rule,
            "tree": spec,
            "block_efficiency": float(np.mean(steps)),
            "tokens_generated": int(tokens),
            "target_calls": int(calls),
            "acceptance_by_depth": [None if n == 0 else float(a / n) for a, n in zip(accepts, attempts)],
            "wall_seconds": seconds,
        })
    return rows


__all__ = ["decode_rules", "rule_tree"]
