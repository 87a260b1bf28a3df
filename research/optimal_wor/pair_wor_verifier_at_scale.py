"""The water-level verifier for two drafts without replacement at the real vocabulary: what
its float levels realise, and what it costs beside the RRS verifiers.

    python -m research.optimal_wor.pair_wor_verifier_at_scale --corpus DIR [--positions 8]
        [--temperature 1.0] [--bits 200] [--pairs 16] [--checks 1000] [--agree 200] [--repeats 3] [--seed 0]
        [--out FILE]

``DIR`` is an otm corpus (``otm corpus --pair qwen2.5-coder --out DIR``); ``--positions``
positions evenly spaced over it give ``p`` (target) and ``q`` (draft), softmaxes of the
stored logits at ``--temperature``, over the full vocabulary. For every position:

- **levels**: the compiled nesting of every water level
  (:func:`decoding.verifiers.optimal.pair_levels.row_levels`, float64): its time, lazy
  refreshes per cut, the largest level, how many levels were found above 1 and set to 1,
  and the flux it estimates uncarried;
- **realised law**: the selection law ``x'`` those float levels realise, computed with
  ``--bits``-bit floats (mpmath) by :func:`otm.rules.water_levels.pair.realised_selection`:
  ``sum |x' - x|`` (``x`` the law the verifier checks against; the output law is off ``p`` by
  at most this in total variation) and ``alpha* - sum min(p, x')`` (acceptance lost to the
  floats; ``alpha*`` the prefix scan without replacement);
- **bounds**: ``--checks`` pairs drawn without replacement from ``q``, each with a uniform
  ``u``: of those on one side of the cut with ``Y > 0``, the share whose ``u < Y`` the
  bounds of :func:`decoding.verifiers.optimal.pair_levels.yield_decision` settle without
  the nesting, and how many of their verdicts contradict the full nesting's level;
- **merged rows**: the same ``--checks`` pairs and uniforms through the merged path
  (:func:`decoding.verifiers.optimal.pair_merged_rows.merged_row`, float32 inputs
  normalised as in ``verify``): the share it draws itself (the rest go back to the sorted
  path) and, of the first ``--agree`` it draws, how many differ from the sorted path's draw
  (:func:`decoding.verifiers.optimal.pair.sorted_row`);
- **cost**: ``--pairs`` rows of this position, each with two distinct drafts drawn from
  ``q``, verified by the batched verifiers ``optimal_pair_wor``, ``rrs_wor``,
  ``optimal_latent`` and ``rrs`` (on the same drafts, for time only: not lossless for this
  law), float32 inputs as in decoding, ``torch.set_num_threads(1)``; ms per row, the least
  of ``--repeats`` calls after the same call once as a warm-up (one call moves by up to 2x
  on a shared VM); one batched ``torch.argsort(p / q, dim=-1)`` of those rows (float32, the
  least of ``--repeats``); and the sorted path alone (``sorted_row`` on the same rows, one after
  another), for the comparison.

Prints one markdown table (and writes it to ``--out``) with the command, the machine and
the wall time. Costs about ``positions x (13 s at 200 bits + 2 x pairs x 0.3 s + agree x 10 ms)``: the
defaults take 3 to 4 minutes.
"""
from __future__ import annotations

import argparse
import sys
import time

import mpmath
import numpy as np
import torch
from tqdm.auto import tqdm

from decoding.verifiers import get_verifier
from decoding.verifiers.optimal.pair import UNIT, ratio_order, sorted_row
from decoding.verifiers.optimal.pair_merged_rows import BUCKETS, DRAWN, SIGN_MARGIN, merged_row
from decoding.verifiers.optimal.pair_levels import first_run, row_levels, row_setup, yield_decision
from otm.corpus import Corpus
from otm.formulations.prefix_scan import prefix_scan
from otm.rules.water_levels.pair import realised_selection
from scripts.certify_optimal_verifier import corpus_report

#: The verifiers timed side by side (``rrs``: on distinct drafts, for time only).
TIMED = ("optimal_pair_wor", "rrs_wor", "optimal_latent", "rrs")


def levels_row(p: np.ndarray, q: np.ndarray, bits: int, checks: int, seed: int) -> dict:
    """The compiled levels of one row, what they realise in ``bits``-bit floats, and the
    yield bounds' verdicts on ``checks`` drafted pairs (:func:`bound_checks`)."""
    order = ratio_order(p, q)
    n = len(order)
    flux, levels, selection = np.empty(n + 1), np.empty(n + 1), np.empty(n)
    start = time.perf_counter()
    m, alpha, refreshes, clipped, uncarried = row_levels(p[order], q[order], UNIT, flux, levels, selection)
    seconds = time.perf_counter() - start
    with mpmath.workprec(bits):
        q_wide = [mpmath.mpf(float(v)) for v in q[order]]
        total = mpmath.fsum(q_wide)
        realised = realised_selection([v / total for v in q_wide], [mpmath.mpf(float(v)) for v in levels], m)
        p_wide = [mpmath.mpf(float(v)) for v in p[order]]
        p_total = mpmath.fsum(mpmath.mpf(float(v)) for v in p)
        off = mpmath.fsum(abs(a - mpmath.mpf(float(b))) for a, b in zip(realised, selection))
        accepted = mpmath.fsum(min(a / p_total, b) for a, b in zip(p_wide, realised))
    optimum = prefix_scan(p, q, 2, "without_replacement").value
    bounds = bound_checks(p[order], q[order] / q[order].sum(), levels, m, checks, np.random.default_rng(seed))
    return {**bounds, "n": n, "ms": 1e3 * seconds, "refreshes": refreshes / n, "top": float(levels.max()), "clipped": clipped,
            "uncarried": uncarried, "off": float(off), "lost": optimum - float(accepted), "optimum": optimum,
            "alpha": alpha}


def bound_checks(p_ranked: np.ndarray, q_ranked: np.ndarray, levels: np.ndarray, cut: int, checks: int,
                 rng: np.random.Generator) -> dict:
    """The yield bounds' verdicts on ``checks`` drafted pairs (ranks), each with a uniform,
    against the full nesting's ``levels``: same-side pairs with ``Y > 0``, how many the
    bounds settle and how many of those verdicts are wrong."""
    flux, sums, pairs = same_side_pairs(p_ranked, q_ranked, levels, cut, checks, rng)
    counted = settled = wrong = 0
    for low, high, u, y in pairs:
        verdict, _ = yield_decision(flux, *sums, *first_run(flux, low, high), low, high, u)
        counted += 1
        settled += verdict != 0
        wrong += verdict != 0 and (verdict > 0) != (u < y)
    return {"same_side": counted, "settled": settled, "wrong": wrong}


def same_side_pairs(p_ranked: np.ndarray, q_ranked: np.ndarray, levels: np.ndarray, cut: int, checks: int,
                    rng: np.random.Generator) -> tuple:
    """``(flux, (qt, qe, wt, we), pairs)``: the row's minimal flux and range sums
    (:func:`~decoding.verifiers.optimal.pair_levels.row_setup`) and, of ``checks`` pairs of
    ranks drawn without replacement from ``q``, each with a uniform ``u``, those on one side of
    the cut with ``Y > 0`` (``Y`` from the full nesting's ``levels``), as ``(low, high, u, Y)``."""
    n = len(q_ranked)
    flux, flux_lo = np.empty(n + 1), np.empty(n + 1)
    qt, qe, wt, we, _, _ = row_setup(p_ranked, q_ranked, UNIT, flux, flux_lo, np.empty(n))
    first = rng.choice(n, size=checks, p=q_ranked)
    pairs = []
    for a, u in zip(first.tolist(), rng.random(checks).tolist()):
        rest = q_ranked.copy()
        rest[a] = 0.0
        b = int(rng.choice(n, p=rest / rest.sum()))
        low, high = min(a, b), max(a, b)
        y = float(levels[low + 1:high + 1].min())
        if not (low < cut <= high or y <= 0.0):
            pairs.append((low, high, u, y))
    return flux, (qt, qe, wt, we), pairs


def as_verified(p: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``p``, ``q`` as the verifier sees them in decoding: float32, then normalised in float64."""
    p, q = p.astype(np.float32).astype(np.float64), q.astype(np.float32).astype(np.float64)
    return p / p.sum(), q / q.sum()


def least_ms_per_row(call, repeats: int, rows: int) -> float:
    """ms per row of ``call()`` over ``rows`` rows: the least of ``repeats`` calls after one
    warm-up call."""
    call()
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return 1e3 * best / rows


def merged_checks(p: np.ndarray, q: np.ndarray, checks: int, agree: int, seed: int) -> dict:
    """Of ``checks`` pairs drawn without replacement from ``q`` with three uniforms each: how
    many the merged path draws itself, and how many of the first ``agree`` of those differ
    from the sorted path's draw."""
    p, q = as_verified(p, q)
    rng = np.random.default_rng(seed)
    keys, ids = np.empty(len(p), np.int64), np.empty(len(p), np.int64)
    drawn = compared = differ = 0
    for _ in range(checks):
        pair = tuple(int(t) for t in rng.choice(len(q), size=2, replace=False, p=q))
        u = rng.random(3)
        token, index, outcome = merged_row(p, q, pair[0], pair[1], u, BUCKETS, SIGN_MARGIN, keys, ids)
        if outcome == DRAWN:
            drawn += 1
            if compared < agree:
                compared += 1
                differ += (int(token), int(index)) != sorted_row(p, q, pair, u)
    return {"drawn": drawn, "compared": compared, "differ": differ}


def sorted_cost(p: np.ndarray, q: np.ndarray, pairs: int, seed: int, repeats: int) -> float:
    """ms per row of the sorted path alone on ``pairs`` rows (the least of ``repeats``)."""
    p, q = as_verified(p, q)
    rng = np.random.default_rng(seed)
    cases = [(tuple(int(t) for t in rng.choice(len(q), size=2, replace=False, p=q)), rng.random(3)) for _ in range(pairs)]
    return least_ms_per_row(lambda: [sorted_row(p, q, pair, u) for pair, u in cases], repeats, pairs)


def timed_rows(p: np.ndarray, q: np.ndarray, pairs: int, seed: int, repeats: int) -> dict:
    """ms per row of each verifier of :data:`TIMED` on ``pairs`` rows of one position, and of
    one batched argsort of their ratios (the least of ``repeats`` calls after a warm-up)."""
    target = torch.as_tensor(p, dtype=torch.float32).expand(pairs, -1).contiguous()
    draft = torch.as_tensor(q, dtype=torch.float32).expand(pairs, -1).contiguous()
    drafts = get_verifier("rrs_wor").sample_drafts(draft, 2, torch.Generator().manual_seed(seed))
    draft_probs = draft.unsqueeze(1).expand(-1, 2, -1)
    out = {name: least_ms_per_row(lambda v=get_verifier(name).verify: v(target, draft_probs, drafts,
                                                                        torch.Generator().manual_seed(seed)),
                                  repeats, pairs)
           for name in TIMED}
    ratio = target / draft
    out["argsort"] = least_ms_per_row(lambda: torch.argsort(ratio, dim=-1), repeats, pairs)
    return out


def main(argv=None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", required=True, help="an otm corpus folder (otm corpus --out DIR)")
    parser.add_argument("--positions", type=int, default=8)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--bits", type=int, default=200)
    parser.add_argument("--pairs", type=int, default=16)
    parser.add_argument("--checks", type=int, default=1000)
    parser.add_argument("--agree", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="also write the markdown here")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    row_levels(np.array([0.5, 0.5]), np.array([0.5, 0.5]), UNIT, *(np.empty(s) for s in (3, 3, 2)))  # load the compiled code
    corpus = Corpus(args.corpus)
    rows = corpus.spaced_rows(args.positions, args.temperature)
    print(f"{len(rows)} positions at V = {corpus.vocab_size:,}: about {len(rows) * (13 + 0.6 * args.pairs + 0.01 * args.agree) / 60:.0f} "
          "minutes", file=sys.stderr)
    start = time.perf_counter()
    lines = ["| text | position | support | alpha* | levels (ms) | refreshes per cut | largest level | set to 1 | "
             "uncarried (estimate) | sum abs(x' - x) | alpha* - accepted | settled by the bounds | wrong verdicts | "
             "drawn by merged rows | differ from sorted | "
             + " | ".join(f"{name} (ms/row)" for name in TIMED) + " | argsort (ms/row) | sorted path (ms/row) | "
             "optimal_pair_wor / rrs_wor |",
             "|" + "---|" * (18 + len(TIMED))]
    for text, position, p, q in tqdm(rows, desc="rows", file=sys.stderr):
        r = levels_row(p, q, args.bits, args.checks, args.seed + position)
        g = merged_checks(p, q, args.checks, args.agree, args.seed + position)
        t = timed_rows(p, q, args.pairs, args.seed + position, args.repeats)
        t["sorted"] = sorted_cost(p, q, args.pairs, args.seed + position, args.repeats)
        lines.append(f"| {text} | {position} | {r['n']:,} | {r['optimum']:.6f} | {r['ms']:.0f} | {r['refreshes']:.1f} | "
                     f"{r['top']:.9f} | {r['clipped']} | {r['uncarried']:.1e} | {r['off']:.1e} | {r['lost']:.1e} | "
                     f"{r['settled']} of {r['same_side']} | {r['wrong']} | "
                     f"{g['drawn']} of {args.checks} | {g['differ']} of {g['compared']} | "
                     + " | ".join(f"{t[name]:.2f}" for name in TIMED) + f" | {t['argsort']:.2f} | {t['sorted']:.2f}"
                     + f" | {t['optimal_pair_wor'] / t['rrs_wor']:.1f} |")
    return corpus_report("-m research.optimal_wor.pair_wor_verifier_at_scale", argv, args.corpus, corpus,
                         f"T = {args.temperature}, realised law in {args.bits}-bit floats", time.perf_counter() - start,
                         lines, args.out)


if __name__ == "__main__":
    main()
