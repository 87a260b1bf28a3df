"""``otm decode``: speculative decoding of prompts with a model pair, a rule and a tree.

``otm decode --pair qwen2.5-coder|tiny|DRAFT,TARGET --rule R --tree SPEC --temperature T
[--top-p P] --max-new-tokens N --prompt TEXT|--prompts FILE [--seed S] [--record FILE
[--record-top-m M|full]] [--json]``

:func:`run_decode` takes a :class:`otm_app.configs.DecodeConfig` and returns the summary
dict that ``--json`` prints (:meth:`decoding.runtime.loop.DecodeResult.summary` plus ``pair``,
``temperature``, ``top_p``, ``seed``, ``prompts``, ``texts``, ``tokens_per_target_call``;
docs/validate.md lists the keys). Prompts are decoded one at a time (batch 1, as in
deployment); the counts are summed. ``block_efficiency`` is the mean over steps of the
tokens a step produces (accepted drafts + 1), counted before the cut at
``--max-new-tokens``; ``tokens_per_target_call`` is ``tokens_generated / target_calls``,
after it (the last step of a prompt can produce more tokens than are kept).

``--rule ensemble_weighted|ensemble_contrastive`` runs the Speculative Ensemble instead
(Speculative Ensemble, Fu et al. 2025, :func:`decoding.ensemble.speculative_ensemble_decode`: the draft and target
take turns proposing, every token verified against ``r = E(q, p)``; ``--lam``, ``--mu``,
``--gammas``); it decodes chains, so ``--tree`` does not apply.

``--rule block|traversal`` runs a sequence-level verifier
(:data:`otm.sequences.registry.SEQUENCE_RULES`): block verification on a chain (default
tree ``chain:4``; a tree with branching is refused with a typed error), traversal
verification on any tree (siblings drawn without replacement). Neither makes node-wise
verifications, so ``--record`` is refused for them.

With ``--pair tiny`` there is no tokenizer: a prompt is a comma- or space-separated list
of token ids (``"1,2,3"``) and the outputs are ids.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

from otm.errors import InputFileError, OTMError
from otm.rules import rule_spec
from otm.sequences.registry import SEQUENCE_RULES

from ..configs import DecodeConfig

#: The draft tree when ``--tree`` is not given: two draft chains of four tokens (k = 2
#: drafts at the root, the classic multi-draft set-up of SpecTr and SpecInfer).
DEFAULT_TREE = "chains:2,4"

#: The draft tree of a chain verifier (``--rule block``) when ``--tree`` is not given.
DEFAULT_CHAIN = "chain:4"

#: The most a recording may hold in memory (``--record-top-m full`` keeps 24 bytes per token
#: and event: about 3.6 MB per event at the Qwen pair's 151,936 tokens).
RECORDING_BYTES_LIMIT = 2 * 2**30

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


def check_device(device: str) -> torch.device:
    """``device`` as a torch device, or :class:`OTMError` when torch cannot use it here
    (``cuda`` on a CPU-only build or without a GPU, a bad name)."""
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise OTMError(f"--device {device!r} is not a torch device: {exc}") from None
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise OTMError(f"--device {device}: this torch build ({torch.__version__}) sees no CUDA device; use --device cpu")
    if parsed.type == "cuda" and parsed.index is not None and parsed.index >= torch.cuda.device_count():
        raise OTMError(f"--device {device}: only {torch.cuda.device_count()} CUDA device(s) here")
    if parsed.type not in ("cpu", "cuda"):
        raise OTMError(f"--device {device}: only cpu and cuda devices are supported")
    return parsed


def _prompt_texts(args: DecodeConfig) -> list[str]:
    prompt, prompts = args.prompt, args.prompts
    if (prompt is None) == (prompts is None):
        raise OTMError("give exactly one of --prompt TEXT or --prompts FILE")
    if prompt is not None:
        return [prompt]
    path = Path(prompts)
    if not path.is_file():
        raise InputFileError(f"no such prompts file: {prompts}")
    try:
        texts = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError) as exc:
        raise InputFileError(f"--prompts {prompts}: not a readable UTF-8 text file ({exc})") from None
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


#: The ensemble kind of each Speculative Ensemble rule (they decode chains, not trees).
ENSEMBLE_KIND = {"ensemble_weighted": "weighted", "ensemble_contrastive": "contrastive"}


def _say_before_starting(rule: str, device: torch.device, widest: int, top_p: float) -> None:
    """What a verifier's optional hooks (:mod:`decoding.verifiers.protocol`) say before the decode
    starts: ``compile_seconds(device)``, that it compiles code at its first use on a machine, and
    ``caveat(widest, top_p)``, a cost or refusal that depends on the set-up."""
    from decoding.verifiers import VERIFIERS

    module = VERIFIERS.get(rule)
    hook = getattr(module, "compile_seconds", None)
    seconds = hook(device) if hook is not None else 0.0
    if seconds:
        print(f"otm decode: the {rule} verifier compiles its per-row code at its first use on this machine "
              f"(about {seconds:.0f} s; cached afterwards)", file=sys.stderr, flush=True)
    caveat = getattr(module, "caveat", None)
    line = caveat(widest, top_p) if caveat is not None else None
    if line:
        print(f"otm decode: {line}", file=sys.stderr, flush=True)


def run_decode(args: DecodeConfig) -> dict:
    """Run ``otm decode`` (module docstring); writes ``--record`` if given."""
    from decoding.runtime.loop import DecodeStopped, speculative_decode
    from decoding.runtime.recording import Recorder
    from decoding.runtime.tree_walk import resolve_sequence_rule
    from decoding.runtime.trees import parse_tree

    sequence = SEQUENCE_RULES.get(args.rule)
    rule = sequence or rule_spec(args.rule)
    device = check_device(args.device)
    dtype = DTYPES[args.dtype]
    texts = _prompt_texts(args)
    seed = int(args.seed)
    top_p = 1.0 if args.top_p is None else float(args.top_p)  # not `or`: --top-p 0 is an error, not "none"
    if not 0 < top_p <= 1:
        raise OTMError(f"--top-p must be in (0, 1] (1 = none), got {args.top_p}")
    if args.max_new_tokens < 1:
        raise OTMError(f"--max-new-tokens must be an integer >= 1, got {args.max_new_tokens}")
    if args.record and not Path(args.record).absolute().parent.is_dir():
        raise InputFileError(f"--record {args.record}: no such folder {Path(args.record).absolute().parent}")
    if sequence is None and not rule.lossless:
        if args.record:
            raise OTMError(f"--record does not apply to --rule {rule.name}: the speculative ensemble verifies against "
                           "r = E(q, p), not p, so there is no OTM gap to validate")
        if top_p < 1:
            raise OTMError(f"--top-p does not apply to --rule {rule.name}: the speculative ensemble samples r = E(q, p) "
                           "of the tempered laws, which Fu et al. 2025 define without a nucleus; leave --top-p unset")
        if args.tree:
            raise OTMError(f"--tree does not apply to --rule {rule.name}: the speculative ensemble proposes chains "
                           "of --gammas tokens")
        pair = load_named_pair(args.pair, device, dtype)
        return _run_ensemble(args, pair, texts, torch.Generator(device=device).manual_seed(seed), seed)
    tree_spec = args.tree or (DEFAULT_CHAIN if sequence is not None and sequence.tree_shape == "chain" else DEFAULT_TREE)
    tree = parse_tree(tree_spec)
    if sequence is not None:  # refuse a tree or a recording the verifier cannot take, before loading models
        resolve_sequence_rule(sequence.name, tree, recording=bool(args.record))
    _say_before_starting(rule.name, device, int(tree.n_children.max()), top_p)
    pair = load_named_pair(args.pair, device, dtype)
    generator = torch.Generator(device=device).manual_seed(seed)
    recorder = None
    if args.record:
        _check_recording_size(args, tree, len(texts), pair.vocab_size)
        recorder = Recorder(top_m=args.record_top_m, rule=rule.name, tree=tree_spec, temperature=args.temperature,
                            top_p=top_p, pair=pair.name, seed=seed)
    eos = getattr(pair.tokenizer, "eos_token_id", None) if pair.tokenizer is not None else None
    results, outputs = [], []
    for text in texts:
        try:
            result = speculative_decode(
                pair, _encode(pair, text), rule.name, tree, temperature=args.temperature, top_p=top_p,
                max_new_tokens=args.max_new_tokens, generator=generator, device=device, record=recorder,
                progress=not args.json, eos_token_id=eos,
            )
        except DecodeStopped as exc:  # keep what was generated: the prompts before, and this one so far
            exc.texts = outputs + [_decode_text(pair, exc.tokens[0])]
            if recorder is not None and recorder.events:  # and the verifications recorded up to the refusal
                recorder.meta["stopped"] = str(exc)
                exc.record = str(recorder.save(args.record))
            raise
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
        tokens_per_target_call=sum(r.tokens_generated for r in results) / sum(r.target_calls for r in results),
        acceptance_by_depth=[None if n == 0 else a / n for a, n in zip(accepts, attempts)],
        wall_seconds=sum(r.wall_seconds for r in results),
        texts=outputs,
    )
    if recorder is not None:
        summary["record"] = str(recorder.save(args.record))
    return summary


def _check_recording_size(args: DecodeConfig, tree, prompts: int, vocab: int) -> None:
    """Refuse a recording of whole rows that could exceed :data:`RECORDING_BYTES_LIMIT`: at most
    ``max_depth + 1`` events per step and at least one token per step, 24 bytes per token."""
    if args.record_top_m is not None and args.record_top_m < vocab:
        return
    events = prompts * args.max_new_tokens * (tree.max_depth + 1)
    size = events * 24 * vocab
    if size > RECORDING_BYTES_LIMIT:
        raise OTMError(f"--record-top-m full: up to {events} events of {vocab} tokens could take {size / 2**30:.1f} GiB, "
                       f"more than {RECORDING_BYTES_LIMIT / 2**30:.0f} GiB; use fewer --max-new-tokens or prompts, "
                       "or --top-p below 1 with the default --record-top-m")


def _run_ensemble(args: DecodeConfig, pair, texts: list[str], generator, seed: int) -> dict:
    """``otm decode --rule ensemble_*``: one Speculative Ensemble decode per prompt."""
    from decoding.ensemble.loop import speculative_ensemble_decode

    try:
        gammas = [int(g) for g in str(args.gammas or "1").split(",")]
    except ValueError:
        raise OTMError(f"--gammas must be comma-separated integers (draft,target), got {args.gammas!r}") from None
    results, outputs = [], []
    for text in texts:
        result = speculative_ensemble_decode(
            pair, _encode(pair, text), ENSEMBLE_KIND[args.rule], lam=args.lam,
            mu=args.mu, gammas=gammas if len(gammas) > 1 else gammas[0],
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


#: Summary keys printed by ``otm decode`` without ``--json``, in order.
PRINTED_KEYS = ("rule", "tree", "pair", "tokens_generated", "target_calls", "block_efficiency", "tokens_per_target_call",
                "acceptance_by_depth", "model_calls", "tokens_per_call", "acceptance_rate", "wall_seconds", "record")

#: What the plain-text output adds after a key's value (docs/validate.md).
KEY_NOTES = {
    "block_efficiency": "(mean over steps of accepted drafts + 1, before the cut at --max-new-tokens)",
    "tokens_per_target_call": "(tokens_generated / target_calls)",
    "acceptance_by_depth": "(per draft depth 1..D: verifications there that accepted a draft)",
}


def decode_command(config: DecodeConfig) -> int:
    """``otm decode``: run, then print the summary (key per line, then the texts) or JSON. A
    verifier that refuses a row part-way (:class:`decoding.runtime.loop.DecodeStopped`) still
    gets the texts generated up to there printed (under ``--json``, as ``{"stopped": message,
    "texts": [...]}``), and with ``--record`` the verifications made up to there saved (their
    path printed, under ``"record"``; the refusal in the recording's ``meta["stopped"]``),
    before its one-line error and exit status 2."""
    import json

    from decoding.runtime.loop import DecodeStopped

    try:
        summary = run_decode(config)
    except DecodeStopped as exc:
        kept = {"stopped": str(exc), "texts": exc.texts} | ({"record": exc.record} if exc.record else {})
        if config.json:
            print(json.dumps(kept, indent=2, default=str))
        else:
            if exc.record:
                print(f"{'record':<24}{exc.record} (the verifications before the verifier stopped)")
            for text in exc.texts:
                print("-" * 60 + " (generated before the verifier stopped)")
                print(text)
        raise
    if config.json:
        print(json.dumps(summary, indent=2, default=str))
        return 0
    for key in PRINTED_KEYS:
        if key in summary:
            print(f"{key:<24}{summary[key]}" + (f" {KEY_NOTES[key]}" if key in KEY_NOTES else ""))
    for text in summary.get("texts", []):
        print("-" * 60)
        print(text)
    return 0
