"""Certify the optimal verifiers on real next-token laws at V = 151,936 with the
bring-your-own-verifier entry point (:func:`decoding.validation.own_verifier.validate_verifier`).

    .venv/bin/python scripts/certify_optimal_verifier.py --corpus DIR [--positions 4]
        [--ks 2,4] [--temperature 1.0] [--top-p MASS] [--samples 4000]
        [--rules optimal,optimal_latent] [--seed 0] [--out FILE]

``DIR`` is an otm corpus (``otm corpus --pair qwen2.5-coder --out DIR`` writes one from the
built-in texts). ``--positions`` positions evenly spaced over the corpus give ``p`` (target)
and ``q`` (draft) = softmax of the stored logits at ``--temperature`` (float64, the full
vocabulary), with ``--top-p`` each cut to its own nucleus as ``otm decode --top-p`` does (the
vectors keep all ``V`` entries, zeros outside the nucleus). For every position, ``k`` and rule, ``validate_verifier`` draws ``--samples``
draft tuples from the rule's draft law, runs the rule's batched verifier
(:data:`decoding.verifiers.VERIFIERS`, float32 inputs as in decoding) and reports:

- the chi-square test of the output law against ``p`` (small cells pooled, ``alpha`` = 0.01):
  PASS means no evidence of a lossy verifier;
- the estimated acceptance with its Wilson interval, the rule's exact acceptance
  (``optimal``: ``alpha*(p, q^k)``, the prefix scan) and the z-test against it, and the
  optimum of the draft law ``alpha*(p, Q)``.

Prints one markdown table (and writes it to ``--out``), with the command, the machine and
the wall time. ``--rules optimal_pair_wor --ks 2`` certifies the water-level verifier for two
drafts without replacement (its exact acceptance is the optimum without replacement; ``--rules
optimal_wor --ks 2`` runs the same verifier through the rule for any ``k``; at ``k >= 3`` it
answers the walks its bounds decide and those whose levels nest within its time limit, and
refuses a batch that holds any other, docs/optimal-verifier.md#water-levels-for-drafts-without-replacement: such a
certification is reported as ``REFUSED`` with the verifier's one-line reason, not as a pass
or a fail). Each
verification of ``--samples`` rows at this vocabulary costs about ``samples x 3 ms`` (8
certifications of 3,000 rows took 71 s, 2026-11-26; the water-level verifier up to ``samples x
80 ms``): the defaults take a minute or two.
"""
from __future__ import annotations

import argparse
import platform
import shlex
import sys
import time
from pathlib import Path

import torch
from tqdm.auto import tqdm

from decoding.validation.own_verifier import validate_verifier
from decoding.verifiers import VERIFIERS
from otm.corpus import Corpus
from otm.errors import NotApplicableError

#: Seconds per verified row at V = 151,936 for the time estimate (module docstring); the
#: water-level verifier costs 1.3-8 ms per row (docs/optimal-verifier.md#water-levels-for-drafts-without-replacement; the
#: certification of its section took 46 s for 6,000 rows on 2 threads).
SECONDS_PER_ROW = {"optimal_pair_wor": 0.008, "optimal_wor": 0.008}
DEFAULT_SECONDS_PER_ROW = 0.003


def main(argv=None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", required=True, help="an otm corpus folder (otm corpus --out DIR)")
    parser.add_argument("--positions", type=int, default=4)
    parser.add_argument("--ks", default="2,4")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-p", type=float, default=None, help="cut each law to its own nucleus of this mass")
    parser.add_argument("--samples", type=int, default=4000)
    parser.add_argument("--rules", default="optimal,optimal_latent")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="also write the markdown here")
    args = parser.parse_args(argv)
    ks = [int(k) for k in args.ks.split(",")]
    rules = args.rules.split(",")
    corpus = Corpus(args.corpus)
    rows = corpus.spaced_rows(args.positions, args.temperature, args.top_p)
    print(f"{len(rows) * len(ks) * len(rules)} certifications of {args.samples} rows at V = {corpus.vocab_size:,}: "
          f"about {len(rows) * len(ks) * args.samples * sum(SECONDS_PER_ROW.get(r, DEFAULT_SECONDS_PER_ROW) for r in rules) / 60:.1f}"
          " minutes", file=sys.stderr)
    start = time.perf_counter()
    lines = ["| text | position | k | rule | law test (p-value) | acceptance (99% interval) | exact acceptance | "
             "z-test vs exact | alpha*(p, Q) of the draft law | verdict |", "|---|---|---|---|---|---|---|---|---|---|"]
    work = [(row, k, rule) for row in rows for k in ks for rule in rules]
    for (text, position, p, q), k, rule in tqdm(work, desc="certifying", file=sys.stderr):
        try:
            report = validate_verifier(VERIFIERS[rule].verify, rule, p, q, k, mode="sampling", samples=args.samples,
                                       seed=args.seed, dtype=torch.float32)
        except NotApplicableError as exc:
            lines.append(f"| {text} | {position} | {k} | {rule} | - | - | - | - | - | REFUSED: {str(exc).splitlines()[0]} |")
            continue
        low, high = report.acceptance_interval
        exact = "n/a" if report.expected_acceptance is None else f"{report.expected_acceptance:.4f}"
        z = "n/a" if report.acceptance_test is None else f"p = {report.acceptance_test.p_value:.2f}"
        lines.append(f"| {text} | {position} | {k} | {rule} | p = {report.law_test.p_value:.2f} | {report.acceptance:.4f} "
                     f"({low:.4f}, {high:.4f}) | {exact} | {z} | {report.optimum:.4f} | {'PASS' if report.passed else 'FAIL'} |")
    return corpus_report("scripts/certify_optimal_verifier.py", argv, args.corpus, corpus,
                         f"T = {args.temperature}{'' if args.top_p is None else f', top-p {args.top_p}'}, "
                         f"{args.samples} rows per certification", time.perf_counter() - start,
                         lines, args.out)


def corpus_report(program: str, argv, folder: str, corpus: Corpus, settings: str, wall: float, lines: list,
                  out: str | None) -> str:
    """The Markdown a corpus script prints (and writes to ``out``): a line with the command
    (``python {program} {argv}``: ``program`` a script's path or ``-m`` and a module), the corpus,
    ``settings``, the machine, torch's threads and the wall time, then ``lines``."""
    command = f"python {program} " + shlex.join(argv if argv is not None else sys.argv[1:])
    threads = torch.get_num_threads()
    header = (f"Command: `{command}`; corpus {Path(folder).name} ({corpus.meta.get('source', 'n/a')}), "
              f"V = {corpus.vocab_size:,}, {settings}; {platform.machine()}, torch {torch.__version__}, "
              f"{threads} thread{'s' if threads != 1 else ''}; wall {wall:.0f} s.")
    text = "\n".join([header, "", *lines])
    print(text)
    if out:
        Path(out).write_text(text + "\n")
    return text


if __name__ == "__main__":
    main()
