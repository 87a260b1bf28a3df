"""``otm decode``: speculative decoding of prompts with a model pair, a rule and a tree.

``otm decode --pair qwen2.5-coder|tiny|DRAFT,TARGET --rule R --tree SPEC --temperature T
[--top-p P] --max-new-tokens N --prompt TEXT|--prompts FILE [--seed S] [--record FILE] [--json]``

:func:`run_decode` takes the parsed ``argparse.Namespace`` (attribute names as the flags,
``max_new_tokens``, ``top_p``; optional ``device``, ``dtype``) and returns the summary
dict that ``--json`` prints (:meth:`decoding.loop.DecodeResult.summary` plus ``pair``,
``temperature``, ``top_p``, ``seed``, ``prompts``, ``texts``). Prompts are decoded one at a
time (batch 1, as in deployment); the counts are summed and the rates averaged over steps.

``--rule ensemble_weighted|ensemble_contrastive`` runs the Speculative Ensemble instead
(seed 004, :func:`decoding.ensemble.speculative_ensemble_decode`: the draft and target
take turns proposing, every token verified against ``r = E(q, p)``; ``--lam``, ``--mu``,
``--gammas``); it decodes chains, so ``--tree`` does not apply.

With ``--pair tiny`` there is no tokenizer: a prompt is a comma- or space-separated list
of token ids (``"1,2,3"``) and the outputs are ids.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from otm.errors import OTMError

#: dtype names accepted by ``--dtype``.
DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16, "float16": torch.float16}


def load_named_pair(pair: str, device, dtype):
    """``qwen2.5-coder`` (the embedded pair), ``tiny`` (:func:`decoding.models.tiny.build_tiny_pair`)
    or ``DRAFT,TARGET`` (local paths or cached hub ids, :func:`decoding.models.hf.load_pair`)."""
    if pair == "qwen2.5-coder":
        from decoding.models.qwen import load_qwen_pair

        return load_qwen_pair(device, dtype)
    if pair == "tiny":
        from decoding.models.tiny import build_tiny_pair

        return build_tiny_pair(device=device, dtype=dtype)
    draft, sep, target = pair.partition(",")
    if not sep or not draft or not target:
        raise OTMError(f"--pair must be qwen2.5-coder, tiny or DRAFT,TARGET, got {pair!r}")
    from decoding.models.hf import load_pair

    return load_pair(draft, target, device, dtype)


def _prompt_texts(args) -> list[str]:
    prompt, prompts = getattr(args, "prompt", None), getattr(args, "prompts", None)
    if (prompt is None) == (prompts is None):
        raise OTMError("give exactly one of --prompt TEXT or --prompts FILE")
    if prompt is not None:
        return [prompt]
    path = Path(prompts)
    if not path.exists():
        raise OTMError(f"no such prompts file: {prompts}")
    texts = [line for line in path.read_text().splitlines() if line.strip()]
    if not texts:
        raise OTMError(f"{prompts}: no prompt (one per non-empty line)")
    return texts


def _encode(pair, text: str) -> list[int]:
    if pair.tokenizer is None:
        try:
            ids = [int(t) for t in text.replace(",", " ").split()]
        except ValueError:
            raise OTMError(f"--pair {pair.name} has no tokenizer: give prompts as token ids, e.g. '1,2,3'") from None
        if not ids or min(ids) < 0 or max(ids) >= pair.vocab_size:
            raise OTMError(f"prompt token ids must be in [0, {pair.vocab_size}), got {text!r}")
        return ids
    return pair.tokenizer(text)["input_ids"]


def _decode_text(pair, ids: list[int]):
    return ids if pair.tokenizer is None else pair.tokenizer.decode(ids)


#: ``--rule`` values that run the Speculative Ensemble (seed 004) rather than a tree.
ENSEMBLE_RULES = {"ensemble_weighted": "weighted", "ensemble_contrastive": "contrastive"}


def run_decode(args) -> dict:
    """Run ``otm decode`` (module docstring); writes ``--record`` if given."""
    from decoding.loop import speculative_decode
    from decoding.recording import Recorder
    from decoding.trees import parse_tree

    device = getattr(args, "device", None) or "cpu"
    dtype = DTYPES[getattr(args, "dtype", None) or "float32"]
    texts = _prompt_texts(args)
    seed = getattr(args, "seed", None)
    seed = 0 if seed is None else int(seed)
    top_p = getattr(args, "top_p", None) or 1.0
    if args.rule in ENSEMBLE_RULES:
        pair = load_named_pair(args.pair, device, dtype)
        return _run_ensemble(args, pair, texts, torch.Generator(device=device).manual_seed(seed), seed)
    if not getattr(args, "tree", None):
        raise OTMError(f"--rule {args.rule} needs --tree SPEC (e.g. binary:3)")
    tree = parse_tree(args.tree)
    pair = load_named_pair(args.pair, device, dtype)
    generator = torch.Generator(device=device).manual_seed(seed)
    recorder = Recorder(rule=args.rule, tree=args.tree, temperature=args.temperature, top_p=top_p,
                        pair=pair.name, seed=seed) if getattr(args, "record", None) else None
    eos = getattr(pair.tokenizer, "eos_token_id", None) if pair.tokenizer is not None else None
    results, outputs = [], []
    for text in texts:
        result = speculative_decode(
            pair, _encode(pair, text), args.rule, tree, temperature=args.temperature, top_p=top_p,
            max_new_tokens=args.max_new_tokens, generator=generator, device=device, record=recorder,
            progress=not getattr(args, "json", False), eos_token_id=eos,
        )
        results.append(result)
        outputs.append(_decode_text(pair, result.tokens[0]))
    steps = [s for r in results for s in r.steps_tokens]
    attempts = np.sum([r.attempts_by_depth for r in results], axis=0).tolist()
    accepts = np.sum([r.accepts_by_depth for r in results], axis=0).tolist()
    summary = results[0].summary()
    summary.update(
        pair=pair.name, temperature=args.temperature, top_p=top_p, seed=seed, prompts=len(texts),
        tokens_generated=sum(r.tokens_generated for r in results),
        target_calls=sum(r.target_calls for r in results),
        draft_calls=sum(r.draft_calls for r in results),
        block_efficiency=float(np.mean(steps)),
        acceptance_by_depth=[None if n == 0 else a / n for a, n in zip(accepts, attempts)],
        wall_seconds=sum(r.wall_seconds for r in results),
        texts=outputs,
    )
    if recorder is not None:
        summary["record"] = str(recorder.save(args.record))
    return summary


def _run_ensemble(args, pair, texts: list[str], generator, seed: int) -> dict:
    """``otm decode --rule ensemble_*``: one Speculative Ensemble decode per prompt."""
    from decoding.ensemble import speculative_ensemble_decode

    gammas = [int(g) for g in str(getattr(args, "gammas", None) or "1").split(",")]
    results, outputs = [], []
    for text in texts:
        result = speculative_ensemble_decode(
            pair, _encode(pair, text), ENSEMBLE_RULES[args.rule], lam=getattr(args, "lam", None),
            mu=getattr(args, "mu", None), gammas=gammas if len(gammas) > 1 else gammas[0],
            temperature=args.temperature, max_new_tokens=args.max_new_tokens, generator=generator,
        )
        results.append(result)
        outputs.append(_decode_text(pair, result.tokens[0].tolist()))
    calls = np.sum([r.model_calls for r in results], axis=0).tolist()
    verified = sum(sum(r.verifications) for r in results)
    accepted = sum(sum(r.accepts) for r in results)
    tokens = sum(r.tokens_generated for r in results)
    return dict(
        rule=args.rule, pair=pair.name, temperature=args.temperature, seed=seed, prompts=len(texts),
        gammas=gammas, tokens_generated=tokens, model_calls=calls, tokens_per_call=tokens / max(sum(calls), 1),
        acceptance_rate=None if verified == 0 else accepted / verified,
        wall_seconds=sum(r.wall_seconds for r in results), texts=outputs,
    )
