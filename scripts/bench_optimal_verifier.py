"""Per-row cost of the optimal verifiers at the Qwen vocabulary, side by side with one
``torch.argsort`` of the rows and with the RRS verifier on the same rows, in one run.

    .venv/bin/python scripts/bench_optimal_verifier.py [--rows 64] [--vocab 151936]
        [--ks 2,3,4,5,6,7,8] [--repeats 5] [--threads 1] [--dtype float32] [--json FILE]
        [--vocabs 8192,16384,...] [--device cpu|cuda] [--wor-rows 2]

Rows: ``--rows`` random softmax pairs at ``--vocab`` tokens, target logits ``N(0, 2.5^2)``
and draft logits = target + ``N(0, 1.5^2)`` (seeded), given to every verifier as
probabilities in ``--dtype``. For each ``k`` and each draft scheme (i.i.d.:
:mod:`decoding.verifiers.optimal.iid`; without replacement: :mod:`decoding.verifiers.optimal.latent`)
the drafts are drawn once, then each of these is timed ``--repeats`` times (median, in ms
per row = the batched call's time / rows):

- ``optimal``: the optimal verifier's ``verify`` on all rows in one call;
- ``sorted``, ``merged``: its full path on every row (no lazy rows), with the stable sort of
  every ratio key (:func:`decoding.verifiers.optimal.iid.verify_sorted`) and with the merged rows of :mod:`decoding.verifiers.optimal.unsorted`
  (i.i.d. drafts only; the two give the same draws);
- ``argsort``: ``torch.argsort(p / q, dim=-1)`` on the same rows (one batched sort);
- ``row sort``: :func:`decoding.verifiers.optimal.iid.stable_sort_rows` of the float64 ratio
  bits, the sort the optimal verifier does (one row at a time, torch's radix sort), into
  buffers kept from one repeat to the next (the median excludes their first touch);
- ``rrs``: :mod:`decoding.verifiers.rrs` ``verify`` on the same rows and drafts;
- for drafts without replacement also ``rrs_wor`` (:mod:`decoding.verifiers.rrs_wor`), and at
  ``k = 2`` ``optimal_pair_wor`` (:mod:`decoding.verifiers.optimal.pair`, the verifier
  attaining the without-replacement optimum; its rows go to the CPU from any device);
- for drafts without replacement at ``k >= 3``, ``optimal_wor`` (:mod:`decoding.verifiers.optimal.wor`,
  the verifier attaining the without-replacement optimum) on the first ``--wor-rows`` rows
  (default 2; 0 leaves it out), one row per call and once each, as a decode meets each row:
  its set-up of the row is part of the time (a set-up is kept only for a call that repeats the
  row). Median ms per answered row, how many it refused (a walk its bounds leave open,
  past the nesting's limit) and the fraction of the answered rows it accepted. Its passes are
  compiled code shared among torch's threads (``--threads``), as in decoding.

``accepted`` columns: the fraction of rows whose verifier accepted a draft, over all
repeats (each repeat draws fresh uniforms); the optimal verifier's expectation is
``alpha*`` of the i.i.d. law (column ``alpha*``, the mean over rows of the prefix scan).
With ``--device cuda`` the rows, drafts and generators live on the GPU and every timed call
ends with ``torch.cuda.synchronize()``; the merged rows are a CPU path (columns ``-``) and
the optimal verifier takes its sorted path there (``torch.sort`` of the batch on the GPU).
Prints a markdown table and the machine's load average (timings on a shared machine move
with it). With ``--vocabs``, first a table of the two full paths per row at each of those
vocabularies (``k = 2``, the same kind of rows): where the merged rows start to pay off
(:data:`decoding.verifiers.optimal.unsorted.MIN_VOCAB`); and the water-level verifier's rows
one after another, two drafts without replacement each, sorted and merged rows first
(:func:`decoding.verifiers.optimal.pair.verify_row`).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np
import torch

from decoding.verifiers import rrs, rrs_wor
from decoding.verifiers.optimal import iid as optimal, unsorted as optimal_buckets
from decoding.verifiers.optimal import latent as optimal_latent
from decoding.verifiers.optimal import pair as optimal_pair_wor
from decoding.verifiers.optimal import wor as optimal_wor
from decoding.verifiers.base import Scratch
from otm.errors import NotApplicableError
from otm.formulations.prefix_scan import iid_optimum_for_ks

QWEN_VOCAB = 151_936


def softmax_rows(rows: int, vocab: int, dtype: torch.dtype, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``([rows, vocab], [rows, vocab])`` target and draft probabilities (module docstring)."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, vocab, generator=g, dtype=torch.float64) * 2.5
    draft_logits = logits + torch.randn(rows, vocab, generator=g, dtype=torch.float64) * 1.5
    return torch.softmax(logits, -1).to(dtype), torch.softmax(draft_logits, -1).to(dtype)


def timed(function, repeats: int) -> tuple[float, list]:
    """``(median seconds, results)`` of ``repeats`` calls after one warm-up call; on a GPU
    each call's time runs until the device has finished its work."""
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    function()
    sync()
    times, results = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        results.append(function())
        sync()
        times.append(time.perf_counter() - start)
    return float(np.median(times)), results


def accepted_fraction(outputs) -> float:
    return float(np.mean([(out.accepted_index >= 0).double().mean().item() for out in outputs]))


def full_paths(p: torch.Tensor, q: torch.Tensor, drafts: torch.Tensor, repeats: int) -> tuple[float, float]:
    """Seconds (median) of the sorted and the merged full path on every row (the merged
    rows: NaN on a GPU, a CPU path)."""
    k, scratch = drafts.shape[1], Scratch()
    uniforms = torch.rand(p.shape[0], optimal.uniforms_per_row(k), generator=torch.Generator().manual_seed(5), dtype=p.dtype)
    uniforms = uniforms.to(p.device)
    sorted_s, _ = timed(lambda: optimal.verify_sorted(p, q, drafts, uniforms, scratch=scratch), repeats)
    if p.device.type != "cpu":
        return sorted_s, float("nan")
    merged_s, _ = timed(lambda: optimal_buckets.verify_rows(p, q, drafts, uniforms, scratch=scratch), repeats)
    return sorted_s, merged_s


def pair_paths(p: torch.Tensor, q: torch.Tensor, repeats: int) -> tuple[float, float]:
    """Seconds (median) of the water-level verifier's rows (:mod:`decoding.verifiers.optimal.pair`)
    on every row, two drafts without replacement each: the sorted row and the merged row
    first (``verify_row``; a row the merged row leaves undecided goes to the sorted row)."""
    p64, q64 = (rows_.double().cpu().numpy() for rows_ in (p, q))
    p64, q64 = p64 / p64.sum(1, keepdims=True), q64 / q64.sum(1, keepdims=True)
    drafts = rrs_wor.sample_drafts(torch.from_numpy(q64), 2, torch.Generator().manual_seed(6)).tolist()
    uniforms = np.random.default_rng(6).random((len(p64), 3))
    cases = list(zip(p64, q64, (tuple(d) for d in drafts), uniforms))
    sorted_s, _ = timed(lambda: [optimal_pair_wor.sorted_row(*case) for case in cases], repeats)
    merged_s, _ = timed(lambda: [optimal_pair_wor.verify_row(*case) for case in cases], repeats)
    return sorted_s, merged_s


def fresh_rows(p: torch.Tensor, draft_probs: torch.Tensor, drafts: torch.Tensor, seed: int) -> dict:
    """``optimal_wor`` on each row alone, each row once (module docstring): the median ms per
    answered row, the rows refused and the fraction of the answered rows accepted."""
    sync = torch.cuda.synchronize if p.device.type == "cuda" else (lambda: None)
    times, accepted, refused = [], [], 0
    for b in range(p.shape[0]):
        g = torch.Generator(p.device).manual_seed(seed + b)
        start = time.perf_counter()
        try:
            out = optimal_wor.verify(p[b:b + 1], draft_probs[b:b + 1], drafts[b:b + 1], g)
        except NotApplicableError:
            refused += 1
            continue
        sync()
        times.append(time.perf_counter() - start)
        accepted.append(int(out.accepted_index[0]) >= 0)
    nan = float("nan")
    return {"optimal_wor_ms": 1e3 * float(np.median(times)) if times else nan, "optimal_wor_rows": p.shape[0],
            "optimal_wor_refused": refused, "accepted_optimal_wor": float(np.mean(accepted)) if accepted else nan}


def warm_optimal_wor(vocab: int, dtype: torch.dtype, device: torch.device) -> None:
    """Load ``optimal_wor``'s compiled code (numba's cache) on a row of its own, so the first timed
    row does not pay it."""
    p, q = (rows_.to(device) for rows_ in softmax_rows(1, vocab, dtype, seed=99))
    drafts = rrs_wor.sample_drafts(q, 3, torch.Generator(device).manual_seed(99))
    try:
        optimal_wor.verify(p, q.unsqueeze(1).expand(1, 3, vocab), drafts, torch.Generator(device).manual_seed(99))
    except NotApplicableError:
        pass


def crossover(rows: int, vocabs: list[int], repeats: int, dtype: torch.dtype, device: torch.device) -> list[dict]:
    """Per-row ms of the two full paths at each vocabulary (``k = 2``), and of the water-level
    verifier's sorted and merged rows."""
    results = []
    for vocab in vocabs:
        p, q = (rows_.to(device) for rows_ in softmax_rows(rows, vocab, dtype))
        drafts = optimal.sample_drafts(q, 2, torch.Generator(device).manual_seed(vocab))
        sorted_s, merged_s = full_paths(p, q, drafts, repeats)
        pair_sorted_s, pair_merged_s = pair_paths(p, q, repeats)
        results.append({"vocab": vocab, "sorted_ms": 1e3 * sorted_s / rows, "merged_ms": 1e3 * merged_s / rows,
                        "pair_sorted_ms": 1e3 * pair_sorted_s / rows, "pair_merged_ms": 1e3 * pair_merged_s / rows})
    return results


def run(rows: int, vocab: int, ks: list[int], repeats: int, dtype: torch.dtype, device: torch.device,
        wor_rows: int = 0) -> list[dict]:
    if wor_rows and max(ks) >= 3:
        warm_optimal_wor(vocab, dtype, device)
    p, q = softmax_rows(rows, vocab, dtype)
    alphas = np.array([iid_optimum_for_ks(p[b].double().numpy(), q[b].double().numpy(), ks) for b in range(rows)])
    p, q = p.to(device), q.to(device)
    ratio = p / q
    sort_s, _ = timed(lambda: torch.argsort(ratio, dim=-1), repeats)
    keys = (p.double() / q.double()).view(torch.int64)
    scratch = Scratch()  # the verifier's buffers are reused from call to call in one run; so are these
    row_sort_s, _ = timed(lambda: optimal.stable_sort_rows(keys, scratch), repeats)
    results = []
    for j, k in enumerate(ks):
        draft_probs = q.unsqueeze(1).expand(rows, k, vocab)
        for sampling, module, baselines in (
            ("iid", optimal, {"rrs": rrs}),
            ("without_replacement", optimal_latent, {"rrs": rrs, "rrs_wor": rrs_wor}),
        ):
            g = torch.Generator(device).manual_seed(1000 + k)
            drafts = module.sample_drafts(q, k, g)
            ours_s, ours = timed(lambda m=module, d=drafts, g=g, dp=draft_probs: m.verify(p, dp, d, g), repeats)
            entry = {
                "sampling": sampling,
                "k": k,
                "optimal_ms": 1e3 * ours_s / rows,
                "argsort_ms": 1e3 * sort_s / rows,
                "row_sort_ms": 1e3 * row_sort_s / rows,
                "accepted_optimal": accepted_fraction(ours),
                "alpha_star_iid": float(alphas[:, j].mean()),
            }
            if module is optimal:
                sorted_s, merged_s = full_paths(p, q, drafts, repeats)
                entry["sorted_ms"], entry["merged_ms"] = 1e3 * sorted_s / rows, 1e3 * merged_s / rows
            if module is optimal_latent and k == 2:
                baselines = {**baselines, "optimal_pair_wor": optimal_pair_wor}
            for name, baseline in baselines.items():
                base_s, base = timed(lambda m=baseline, d=drafts, g=g, dp=draft_probs: m.verify(p, dp, d, g), repeats)
                entry[f"{name}_ms"] = 1e3 * base_s / rows
                entry[f"accepted_{name}"] = accepted_fraction(base)
            if module is optimal_latent and k >= 3 and wor_rows:
                entry.update(fresh_rows(p[:wor_rows], draft_probs[:wor_rows], drafts[:wor_rows], 2000 + k))
            entry["ratio_to_rrs"] = entry["optimal_ms"] / entry["rrs_ms"]
            results.append(entry)
    return results


def table(results: list[dict]) -> str:
    lines = [
        (
            "| drafts | k | optimal (ms/row) | full path: sorted | merged (ms/row) | argsort (ms/row) "
            "| row sort (ms/row) | rrs (ms/row) | optimal / rrs "
            "| rrs_wor (ms/row) | accepted: optimal | rrs | rrs_wor | alpha* (iid) "
            "| optimal_pair_wor (ms/row) | accepted: optimal_pair_wor "
            "| optimal_wor (ms/row, fresh rows) | optimal_wor refused | accepted: optimal_wor |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for e in results:
        wor_ms = "-" if "rrs_wor_ms" not in e else f"{e['rrs_wor_ms']:.2f}"
        wor_accepted = "-" if "accepted_rrs_wor" not in e else f"{e['accepted_rrs_wor']:.3f}"
        pair_ms = "-" if "optimal_pair_wor_ms" not in e else f"{e['optimal_pair_wor_ms']:.2f}"
        pair_accepted = "-" if "accepted_optimal_pair_wor" not in e else f"{e['accepted_optimal_pair_wor']:.3f}"
        if "optimal_wor_ms" in e:
            wor_accepted_rows = "-" if np.isnan(e["accepted_optimal_wor"]) else f"{e['accepted_optimal_wor']:.3f}"
            wor_ms_row = "-" if np.isnan(e["optimal_wor_ms"]) else f"{e['optimal_wor_ms']:.1f}"
            fresh = f"{wor_ms_row} | {e['optimal_wor_refused']} of {e['optimal_wor_rows']} | {wor_accepted_rows}"
        else:
            fresh = "- | - | -"
        merged = "-" if np.isnan(e.get("merged_ms", np.nan)) else f"{e['merged_ms']:.2f}"
        full = "| - | - " if "sorted_ms" not in e else f"| {e['sorted_ms']:.2f} | {merged} "
        lines.append(
            f"| {e['sampling']} | {e['k']} | {e['optimal_ms']:.2f} {full}| {e['argsort_ms']:.2f} | {e['row_sort_ms']:.2f} "
            f"| {e['rrs_ms']:.2f} "
            f"| {e['ratio_to_rrs']:.1f} | {wor_ms} | {e['accepted_optimal']:.3f} "
            f"| {e['accepted_rrs']:.3f} | {wor_accepted} | {e['alpha_star_iid']:.3f} | {pair_ms} | {pair_accepted} | {fresh} |"
        )
    return "\n".join(lines)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=QWEN_VOCAB)
    parser.add_argument("--ks", default="2,3,4,5,6,7,8")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    parser.add_argument("--json", default=None, help="also write the results to this file")
    parser.add_argument("--vocabs", default=None, help="also time the two full paths at these vocabularies (k = 2)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (rows, drafts and generators on that device)")
    parser.add_argument("--wor-rows", type=int, default=2,
                        help="time optimal_wor (k >= 3 without replacement) on this many fresh rows (seconds each; 0: not)")
    args = parser.parse_args(argv)
    if args.wor_rows < 0:
        parser.error(f"--wor-rows must be 0 or more, got {args.wor_rows}")
    device = torch.device(args.device)
    torch.set_num_threads(args.threads)
    ks = [int(k) for k in args.ks.split(",")]
    vocabs = crossover(args.rows, [int(v) for v in args.vocabs.split(",")], args.repeats, getattr(torch, args.dtype), device) if args.vocabs else []
    if vocabs:
        print("| V | full path, sorted (ms/row) | merged (ms/row) | optimal_pair_wor: sorted rows (ms/row) | "
              "merged rows first |\n|---|---|---|---|---|")
        print("\n".join(f"| {e['vocab']:,} | {e['sorted_ms']:.2f} | {e['merged_ms']:.2f} | {e['pair_sorted_ms']:.3f} | "
                         f"{e['pair_merged_ms']:.3f} |" for e in vocabs))
    wor_rows = min(args.wor_rows, args.rows)
    if wor_rows and max(ks) >= 3:
        print(f"optimal_wor (k >= 3 without replacement): {wor_rows} fresh row(s) per k, each set up once "
              "(up to a few seconds a row at the Qwen vocabulary)", flush=True)
    results = run(args.rows, args.vocab, ks, args.repeats, getattr(torch, args.dtype), device, wor_rows)
    info = {
        "rows": args.rows,
        "vocab": args.vocab,
        "dtype": args.dtype,
        "threads": args.threads,
        "repeats": args.repeats,
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "load_average": os.getloadavg(),
    }
    print(f"{args.rows} rows, V = {args.vocab:,}, {args.dtype}, device {info['device']}, torch {torch.__version__}, "
          f"{args.threads} thread(s), median of {args.repeats}; load average {info['load_average']}")
    print(table(results))
    data = {"info": info, "results": results, "vocabs": vocabs}
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(data, handle, indent=1)
    return data


if __name__ == "__main__":
    main()
