"""Where the optimal verifier's time goes, stage by stage, per row (docs/optimal-verifier.md#measured-cost).

    .venv/bin/python scripts/profile_optimal_rows.py [--pair qwen2.5-coder|zipf] [--rows 64]
        [--ks 2,4,8] [--repeats 5] [--threads 1] [--buckets 4096]

Rows as in ``scripts/bench_verifier_cost.py`` (real next-token laws of the pair at
``V = 151,936``, temperature 1, float32; or its synthetic Zipf-like rows). For each ``k``
the i.i.d. drafts are drawn once; the rows whose ``k`` drafts are one token are the *lazy*
rows, the others the *full* rows. Medians of ``--repeats`` calls after a warm-up, in ms per
row of the rows concerned:

- ``rrs``: :mod:`decoding.verifiers.rrs` ``verify`` on all rows (per row of all rows);
- ``lazy``: :func:`decoding.verifiers.optimal.identical_drafts.certified_acceptance` on the lazy rows;
- ``cut``: :func:`decoding.verifiers.optimal.unsorted_rows.cut` of each full row (the ratio keys
  and their range, the bucket ids with the histograms, the sign test);
- ``gather``: :func:`decoding.verifiers.optimal.unsorted_rows.gather` of each full row's first
  round (the mixed buckets and the drafts'; its bucket ids copied aside, so read from
  further away in the caches than in a call, where the gather follows the row's cut);
- ``merged``: the first round's merged row, its parameters and the draw of each full row
  (:func:`decoding.verifiers.optimal.unsorted_rows.merged_row`, ``ranked_parameters``, ``draw``);
- ``full``: :func:`decoding.verifiers.optimal.unsorted.verify_rows` on the full rows, every
  round included (on ``--threads`` threads), with ``rounds`` = the mean number of draws per
  full row.
"""
from __future__ import annotations

import argparse

import numpy as np
import torch

from decoding.verifiers import rrs
from decoding.verifiers.optimal import iid as optimal, unsorted as optimal_buckets, unsorted_rows as optimal_merged
from decoding.verifiers.optimal.identical_drafts import certified_acceptance, identical_drafts
from bench_verifier_cost import QWEN_VOCAB, pair_logits, timed, zipf_logits


def median_ms(function, repeats: int) -> float:
    """Median ms of ``repeats`` calls after a warm-up (:func:`bench_verifier_cost.timed`)."""
    return 1e3 * timed(function, repeats)["median"]


def rows_of(pair: str, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(p, q)`` float32 ``[rows, V]`` probabilities at temperature 1."""
    if pair == "zipf":
        target, draft = zipf_logits(rows, QWEN_VOCAB, torch.Generator().manual_seed(0))
    else:
        from otm_app.commands.decode import load_named_pair

        loaded = load_named_pair(pair, "cpu", torch.float32)
        target, draft = pair_logits(loaded, rows)
        loaded.release()
    return torch.softmax(target, dim=-1), torch.softmax(draft, dim=-1)


def profile(p: torch.Tensor, q: torch.Tensor, k: int, repeats: int, buckets: int) -> dict:
    rows = p.shape[0]
    g = torch.Generator().manual_seed(k)
    drafts = optimal.sample_drafts(q, k, g)
    uniforms = torch.rand(rows, optimal.uniforms_per_row(k), generator=g, dtype=torch.float64)
    same = identical_drafts(drafts)
    lazy, full = same.nonzero().squeeze(1), (~same).nonzero().squeeze(1)
    entry = {"k": k, "lazy_rows": lazy.numel(), "full_rows": full.numel()}
    draft_probs = q.unsqueeze(1).expand(rows, k, q.shape[1])
    entry["rrs"] = median_ms(lambda: rrs.verify(p, draft_probs, drafts, torch.Generator().manual_seed(1)), repeats) / rows
    if lazy.numel():
        u4 = uniforms[lazy, 2 * k + 1]
        entry["lazy"] = median_ms(lambda: certified_acceptance(p, q, drafts[lazy, 0], u4, k, lazy, optimal.CHUNK_BYTES), repeats) / lazy.numel()
    if full.numel():
        vocab, margin = p.shape[1], optimal_buckets.sign_margin(p.shape[1], k)
        keys, ids = np.empty(vocab, np.int64), np.empty(vocab, np.int32)
        p_np, q_np = p.numpy(), q.numpy()
        picked = full.tolist()
        drafts_np, uniforms_np = drafts.numpy(), uniforms.numpy()

        def cut(row: int):
            return optimal_merged.cut(p_np[row], q_np[row], k, buckets, margin, keys, ids)

        entry["cut"] = median_ms(lambda: [cut(row) for row in picked], repeats) / len(picked)
        first_round = []  # per full row: its cut, its first-round buckets and a copy of its bucket ids
        for row in picked:
            target, draft, sizes, lower, _, sign = cut(row)
            refined = (sizes > 0) & (sign == 0)
            refined[ids[drafts_np[row]]] = True
            first_round.append((row, target, draft, sizes, lower, refined, ids.copy()))

        def gather():
            return [optimal_merged.gather(p_np[row], q_np[row], row_ids, refined, sizes)
                    for row, _, _, sizes, _, refined, row_ids in first_round]

        entry["gather"] = median_ms(gather, repeats) / len(picked)
        members = gather()

        def merged_round():
            for (row, target, draft, sizes, lower, refined, _), found in zip(first_round, members):
                x = drafts_np[row]
                order, _, p_r, q_r, _ = optimal_merged.merged_row(found, (sizes > 0) & ~refined, lower, target, draft)
                ranks = np.array([np.flatnonzero(order == token)[0] for token in x])
                optimal_merged.draw(*optimal_merged.ranked_parameters(p_r, q_r, k), order, q_r, p_np[row, x], q_np[row, x], x,
                                    ranks, uniforms_np[row])

        entry["merged"] = median_ms(merged_round, repeats) / len(picked)
        entry["full"] = median_ms(lambda: optimal_buckets.verify_rows(p, q, drafts, uniforms, rows=full, buckets=buckets), repeats) / len(picked)
        rounds = [optimal_merged.verify_row(p_np[row], q_np[row], drafts_np[row], uniforms_np[row], buckets, margin, keys, ids)[2]
                  for row in picked]
        entry["rounds"] = sum(rounds) / len(rounds)
    return entry


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pair", default="qwen2.5-coder", help="qwen2.5-coder or zipf")
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--ks", default="2,4,8")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--buckets", type=int, default=optimal_buckets.BUCKETS,
                        help="buckets per row of the merged rows (decoding.verifiers.optimal.unsorted.BUCKETS)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    p, q = rows_of(args.pair, args.rows)
    results = [profile(p, q, int(k), args.repeats, args.buckets) for k in args.ks.split(",")]
    print(f"{args.rows} rows of {args.pair}, V = {p.shape[1]:,}, {args.buckets:,} buckets, {args.threads} thread(s), "
          f"median of {args.repeats}; ms per row")
    print("| k | lazy rows | full rows | rrs | lazy | cut | gather | merged (round 1) | full (all rounds) | rounds |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for e in results:
        cells = [f"{e[name]:.2f}" if name in e else "-" for name in ("rrs", "lazy", "cut", "gather", "merged", "full")]
        rounds = f"{e['rounds']:.2f}" if "rounds" in e else "-"
        print(f"| {e['k']} | {e['lazy_rows']} | {e['full_rows']} | " + " | ".join(cells) + f" | {rounds} |")
    return results


if __name__ == "__main__":
    main()
