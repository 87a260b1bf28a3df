"""Verifier cost: batched verification of many rows at once, as a ratio to transformers'
own single-draft speculative sampling on the same rows in the same run.

    .venv/bin/python scripts/bench_verifier_cost.py [--pair qwen2.5-coder|tiny|zipf] [--rows 64]
        [--ks 2,4,8] [--repeats 7] [--threads 1] [--rules rrs,kseq] [--quick] [--json FILE]

Rows. ``--pair qwen2.5-coder`` takes real next-token laws: one forward of the target and
one of the draft over the first ``rows`` tokens of the built-in texts
(:data:`decoding.models.texts.BUILTIN_TEXTS`, concatenated) gives ``rows`` pairs of logits at
``V = 151,936`` (temperature 1). ``zipf`` builds correlated Zipf-like logits at the same
``V`` (no model); ``tiny`` uses the tiny test pair (:func:`decoding.models.tiny.build_tiny_pair`).

What is timed (``--repeats`` runs each, min and median reported, ``torch.set_num_threads``):

- ``ours``: ``verify(p, q, drafts, generator)`` of :mod:`decoding.verifiers` on all rows in
  one batched call, ``p, q`` given as probabilities (``q`` broadcast to ``[rows, k, V]``
  without a copy), drafts drawn once beforehand with the rule's ``sample_drafts``;
- ``ours+softmax``: the same plus the two softmaxes from logits (what transformers' function
  computes inside);
- ``hf_loop``: ``transformers.generation.utils._speculative_sampling`` called once per row.
  That function handles one sequence (``batch = 1``; it squeezes the batch axis and returns
  a scalar ``n_matches``) with a chain of ``gamma`` candidates. For one row and one draft
  we pass ``candidate_input_ids = [[x]]``, ``candidate_logits = [1, 1, V]`` (the draft's
  logits), ``candidate_length = 1`` and ``new_logits = [1, 2, V]`` (the target's logits
  at the candidate and, for the bonus token after an acceptance, the same row again: in a
  real run that is the next position's logits, which costs the same). This is exactly the
  work transformers does to verify one single-draft row;
- ``hf_chain``: one call with the ``rows`` rows laid out as a chain of ``gamma = rows``
  candidates (``candidate_logits = [1, rows, V]``, ``new_logits = [1, rows + 1, V]``): the
  same softmaxes and ratio tests in one batched call, but only one residual (at the first
  rejection), so it is a lower bound on what transformers could do for ``rows`` rows.

Ratios are ``ours / hf_loop`` and ``ours / hf_chain`` from the medians; transformers'
function starts from logits, so ``(ours + softmax) / hf_*`` is the like-for-like ratio.

V-sized passes (column ``V-sized passes / row``): one more, untimed call of each function
runs under a :class:`torch.utils._python_dispatch.TorchDispatchMode` that counts the
elements every aten op touches (:class:`PassCounter`): views count 0; ops that read or
write only indexed entries (``gather``, ``index``, ``index_select``, ``searchsorted``,
in-place ``scatter_`` / ``index_put_``) count the entries they move; factories
(``new_zeros``, ``zeros_like``, ...) count their output; every other op counts its
largest tensor (input or output). The total divided by ``rows x V`` is the number of
V-sized passes per row: an elementwise op, reduction, scan, copy or sort over one
``[vocab]`` row counts 1, whatever its dtype; ``softmax`` and ``multinomial`` count 1
though they sweep the row several times inside; numpy and numba work (the plans of
``importance_sampling_truncated``; the compiled passes over the vocabulary of ``optimal`` and
``optimal_latent`` on the CPU, :mod:`decoding.verifiers.optimal.row_passes`, counted in the
docstring of :mod:`decoding.verifiers.optimal.unsorted`) is not seen. Mean over :data:`PASS_RUNS` calls with
fresh uniforms (the lazy verifiers' count depends on how many rows are rejected). The
module docstring of each verifier derives the same count analytically.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np
import torch

from torch.utils._python_dispatch import TorchDispatchMode

from decoding.verifiers import get_verifier
from otm.rules import rule_spec, rule_specs

QWEN_VOCAB = 151_936
#: Rules timed: every rule with a verifier (specinfer with one q is rrs); ``single`` is our
#: own k = 1 verifier.
RULES = tuple(s.name for s in rule_specs(verifier=True) if s.draft_scheme != "independent")


def zipf_logits(rows: int, vocab: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``[rows, vocab]`` target and draft logits: Zipf-like (``-4.8 log rank``) over a random
    permutation per row, Gumbel noise, and the draft = target + N(0, 0.7^2) noise."""
    rank = torch.argsort(torch.rand(rows, vocab, generator=generator), dim=1).double() + 1
    gumbel = -torch.log(-torch.log(torch.rand(rows, vocab, generator=generator, dtype=torch.float64)))
    target = -4.8 * torch.log(rank) + gumbel
    draft = target + 0.7 * torch.randn(rows, vocab, generator=generator, dtype=torch.float64)
    return target.float(), draft.float()


def pair_logits(pair, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``[rows, V]`` target and draft logits of a loaded :class:`decoding.models.hf.ModelPair`
    at ``rows`` consecutive positions of the built-in texts (for a pair without tokenizer:
    a fixed token sequence)."""
    from decoding.models.texts import BUILTIN_TEXTS

    if pair.tokenizer is not None:
        ids = pair.tokenizer("\n".join(t.text for t in BUILTIN_TEXTS))["input_ids"][:rows]
    else:
        ids = [(3 * i + 1) % pair.vocab_size for i in range(rows)]
    if len(ids) < rows:
        raise ValueError(f"only {len(ids)} tokens of text for {rows} rows")
    x = torch.tensor([ids])
    with torch.no_grad():
        target = pair.target(x).logits[0, :, : pair.vocab_size].float()
        draft = pair.draft(x).logits[0, :, : pair.vocab_size].float()
    return target.contiguous(), draft.contiguous()


#: Instrumented calls per function (their pass counts are averaged).
PASS_RUNS = 3

#: Ops that touch only the entries they gather or write, not their whole input.
_INDEXED_OPS = {"gather", "index", "searchsorted", "take", "index_select", "masked_select"}
_INDEXED_INPLACE_OPS = {"scatter_", "scatter_add_", "scatter_reduce_", "index_put_", "index_put", "masked_scatter_"}
#: Ops that read no input data (their input only gives a dtype, device or shape).
_FACTORY_OPS = {"new_zeros", "new_ones", "new_empty", "new_full", "empty_like", "zeros_like", "ones_like", "full_like",
                "rand_like", "randn_like"}


def _tensors(values) -> list[torch.Tensor]:
    """The tensors among ``values``, lists and tuples flattened."""
    found = []
    for value in values:
        if isinstance(value, (list, tuple)):
            found += _tensors(value)
        elif isinstance(value, torch.Tensor):
            found.append(value)
    return found


class PassCounter(TorchDispatchMode):
    """Counts the tensor elements every aten op touches (module docstring) in ``elements``."""

    def __init__(self):
        super().__init__()
        self.elements = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = func.overloadpacket.__name__
        if func.is_view:
            return out
        inputs, outputs = _tensors(list(args) + list(kwargs.values())), _tensors([out])
        if name in _INDEXED_OPS or name in _FACTORY_OPS:
            self.elements += sum(t.numel() for t in outputs)
        elif name in _INDEXED_INPLACE_OPS:
            self.elements += max((t.numel() for t in inputs[1:]), default=0)
        else:
            self.elements += max((t.numel() for t in inputs + outputs), default=0)
        return out


def passes_per_row(fn, rows: int, vocab: int, runs: int = PASS_RUNS) -> float:
    """Mean V-sized passes per row of ``fn()`` (:class:`PassCounter`) over ``runs`` calls."""
    total = 0
    for _ in range(runs):
        with PassCounter() as counter:
            fn()
        total += counter.elements
    return total / (runs * rows * vocab)


def timed(fn, repeats: int) -> dict:
    """Run ``fn`` once to warm up, then ``repeats`` times: min and median seconds."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return {"min": float(np.min(times)), "median": float(np.median(times)), "repeats": repeats}


def hf_functions():
    """transformers' single-draft speculative sampling and its version."""
    import transformers
    from transformers.generation.utils import _speculative_sampling

    return _speculative_sampling, transformers.__version__


def bench(target_logits: torch.Tensor, draft_logits: torch.Tensor, ks, rules, repeats: int, seed: int) -> dict:
    """Time every rule at every ``k`` and transformers' function on the same rows."""
    spec_sampling, hf_version = hf_functions()
    rows, vocab = target_logits.shape
    p, q = torch.softmax(target_logits, -1), torch.softmax(draft_logits, -1)
    g = torch.Generator().manual_seed(seed)
    one_draft = get_verifier("single").sample_drafts(q, 1, g)  # [rows, 1]
    new_logits_rows = [torch.stack([target_logits[i], target_logits[i]]).unsqueeze(0) for i in range(rows)]

    def hf_loop():
        for i in range(rows):
            spec_sampling(one_draft[i : i + 1], draft_logits[i].view(1, 1, vocab), 1, new_logits_rows[i])

    chain_new = torch.cat([target_logits, target_logits[-1:]]).unsqueeze(0)  # [1, rows + 1, V]
    chain_ids = one_draft.view(1, rows)

    def hf_chain():
        spec_sampling(chain_ids, draft_logits.unsqueeze(0), rows, chain_new)

    torch.manual_seed(seed)  # transformers' function draws from the global generator
    out = {"rows": rows, "vocab": vocab, "transformers": hf_version,
           "hf_loop": timed(hf_loop, repeats), "hf_chain": timed(hf_chain, repeats), "rules": []}
    for ref, fn in (("hf_loop", hf_loop), ("hf_chain", hf_chain)):
        out[ref]["passes"] = passes_per_row(fn, rows, vocab)
    for k in ks:
        for rule in rules:
            v = get_verifier(rule)
            kk = 1 if rule == "single" else k
            if (rule == "single" and k != ks[0]) or not rule_spec(rule).allows(kk):
                continue
            if rule == "rrs_wor" and kk > int((q > 0).sum(1).min()):
                continue
            drafts = v.sample_drafts(q, kk, g)
            q_k = q.unsqueeze(1).expand(rows, kk, vocab)

            def ours():
                v.verify(p, q_k, drafts, g)

            def ours_softmax():
                pp, qq = torch.softmax(target_logits, -1), torch.softmax(draft_logits, -1)
                v.verify(pp, qq.unsqueeze(1).expand(rows, kk, vocab), drafts, g)

            entry = {"rule": rule, "k": kk, "ours": timed(ours, repeats), "ours_softmax": timed(ours_softmax, repeats),
                     "passes": passes_per_row(ours, rows, vocab)}
            for ref in ("hf_loop", "hf_chain"):
                entry[f"ratio_{ref}"] = entry["ours"]["median"] / out[ref]["median"]
                entry[f"ratio_softmax_{ref}"] = entry["ours_softmax"]["median"] / out[ref]["median"]
            out["rules"].append(entry)
            print(f"  {rule:13s} k={kk}  ours {1e3 * entry['ours']['median']:9.1f} ms  "
                  f"ratio to hf_loop {entry['ratio_hf_loop']:.3f}  to hf_chain {entry['ratio_hf_chain']:.3f}  "
                  f"passes/row {entry['passes']:.2f}", file=sys.stderr, flush=True)
    return out


def markdown(result: dict, command: str) -> str:
    """The results as a markdown section (``passes / row`` shown when measured)."""
    ms = lambda t: f"{1e3 * t['min']:.1f} / {1e3 * t['median']:.1f}"  # noqa: E731
    passes = lambda t: f"{t['passes']:.2f}" if "passes" in t else "n/a"  # noqa: E731
    lines = [
        f"Rows: {result['rows']} x V = {result['vocab']:,} ({result['source']}), "
        f"{result['threads']} torch thread(s), {result['rules'][0]['ours']['repeats'] if result['rules'] else 0} timed repeats "
        f"after one warm-up; transformers {result['transformers']}. Command: `{command}`",
        "",
        f"transformers `_speculative_sampling`: per-row loop (`hf_loop`) {ms(result['hf_loop'])} ms (min / median), "
        f"{passes(result['hf_loop'])} V-sized passes per row; one chain call (`hf_chain`) {ms(result['hf_chain'])} ms, "
        f"{passes(result['hf_chain'])} passes per row.",
        "",
        "| rule | k | ours (ms, min / median) | ours / hf_loop | ours / hf_chain | ours + softmax (ms) "
        "| (ours + softmax) / hf_loop | (ours + softmax) / hf_chain | V-sized passes / row |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for e in result["rules"]:
        lines.append(f"| {e['rule']} | {e['k']} | {ms(e['ours'])} | {e['ratio_hf_loop']:.3f} | {e['ratio_hf_chain']:.3f} | "
                     f"{ms(e['ours_softmax'])} | {e['ratio_softmax_hf_loop']:.3f} | {e['ratio_softmax_hf_chain']:.3f} | "
                     f"{passes(e)} |")
    return "\n".join(lines)


def run(pair: str, rows: int, ks, repeats: int, threads: int, seed: int = 0, rules=RULES, logits=None) -> dict:
    """Build the rows (or take ``logits = (target, draft)``, ``[rows, V]`` each) and time
    them (module docstring); returns the result dict."""
    torch.set_num_threads(threads)
    if logits is not None:
        target, draft = logits
        source = f"{pair} logits on the built-in texts, temperature 1"
    elif pair == "zipf":
        target, draft = zipf_logits(rows, QWEN_VOCAB, torch.Generator().manual_seed(seed))
        source = "synthetic Zipf-like logits"
    else:
        from otm_app.commands.decode import load_named_pair

        loaded = load_named_pair(pair, "cpu", torch.float32)
        target, draft = pair_logits(loaded, rows)
        loaded.release()
        source = f"{pair} logits on the built-in texts, temperature 1"
    result = bench(target, draft, ks, rules, repeats, seed)
    result.update(source=source, threads=threads, pair=pair, machine=platform.processor() or platform.machine(),
                  load_average=os.getloadavg())
    return result


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pair", default="qwen2.5-coder", help="qwen2.5-coder, tiny or zipf")
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--ks", default="2,4,8")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rules", default=",".join(RULES), help="comma-separated rules to time (default: all)")
    parser.add_argument("--quick", action="store_true", help="8 rows, k in {2, 4}, 2 repeats (smoke test)")
    parser.add_argument("--json", help="write the result dict here")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.ks, args.repeats = 8, "2,4", 2
    ks = [int(k) for k in args.ks.split(",")]
    result = run(args.pair, args.rows, ks, args.repeats, args.threads, args.seed, rules=tuple(args.rules.split(",")))
    result["command"] = "python scripts/bench_verifier_cost.py " + " ".join(argv if argv is not None else sys.argv[1:])
    print(markdown(result, result["command"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()
