"""The power table of docs/certify-engine-sampler.md: what the certification assertions
detect with probability 0.99 at a sample count, and the sample count a deviation needs.

Pure arithmetic of decoding.certify.bounds (no verifier runs), so every machine prints the
same numbers; the header records the date and the machine anyway, and the one timed line
(assert_rule on the toolkit's RRS at V = 64, k = 2, default n) is this machine's.

    python scripts/certify_power_table.py            # markdown on stdout
"""
from __future__ import annotations

import argparse
import datetime
import platform
import time

import numpy as np
import torch

from decoding.certify import DEFAULT_ALPHA, DEFAULT_ROWS, assert_rule, power
from decoding.certify.assertions import TESTS
from decoding.certify.bounds import samples_needed
from decoding.verifiers import get_verifier

#: Sample counts (rows of weight one) of the table's columns.
SAMPLES = (20_000, 100_000, 200_000, 1_000_000, 10_000_000)

#: Vocabularies (tokens of positive p) of its rows.
VOCABULARIES = (8, 64, 512)

#: Deviations whose needed sample counts are listed.
DEVIATIONS = (0.05, 0.02, 0.01, 0.005, 0.001)


def power_rows(alpha: float, k: int) -> list[str]:
    header = "| tokens | " + " | ".join(f"n = {n:,}" for n in SAMPLES) + " |"
    lines = [header, "|---" * (len(SAMPLES) + 1) + "|"]
    for vocab in VOCABULARIES:
        cells = [f"{power(n, vocab, k, alpha=alpha).tv:.4f}" for n in SAMPLES]
        lines.append(f"| {vocab} | " + " | ".join(cells) + " |")
    acceptance = [f"{power(n, 64, k, alpha=alpha, assertion='rule').acceptance:.4f}" for n in SAMPLES]
    lines.append("| acceptance, assert_rule (any vocabulary, worst case) | " + " | ".join(acceptance) + " |")
    return lines


def needed_rows(alpha: float) -> list[str]:
    share = alpha / TESTS["lossless"]
    lines = ["| TV | " + " | ".join(f"{vocab} tokens" for vocab in VOCABULARIES) + " |",
             "|---" * (len(VOCABULARIES) + 1) + "|"]
    for tv in DEVIATIONS:
        lines.append(f"| {tv:g} | " + " | ".join(f"{samples_needed(tv, vocab, share):,}" for vocab in VOCABULARIES) + " |")
    return lines


def timed_line() -> str:
    rng = np.random.default_rng(0)
    p, q = rng.dirichlet(np.full(64, 0.5)), rng.dirichlet(np.full(64, 0.5))
    torch.set_num_threads(1)
    start = time.perf_counter()
    assert_rule(get_verifier("rrs").verify, "rrs", p, q, 2)
    return (f"assert_rule on the toolkit's RRS, V = 64, k = 2, n = {DEFAULT_ROWS:,} with its controls: "
            f"{time.perf_counter() - start:.2f} s on one CPU thread")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--alpha", type=float, default=DEFAULT_ALPHA, help="false-alarm rate of an assertion")
    parser.add_argument("-k", type=int, default=2, help="drafts (for the acceptance row)")
    args = parser.parse_args()
    print(f"Generated {datetime.date.today().isoformat()} on {platform.node() or 'this machine'} "
          f"({platform.machine()}, {platform.processor() or platform.system()}, torch {torch.__version__}), "
          f"alpha = {args.alpha:g}.\n")
    print("Smallest total variation of the output law from p (and acceptance change) detected with probability "
          "0.99 by assert_lossless:\n")
    print("\n".join(power_rows(args.alpha, args.k)))
    print("\nSamples needed to detect a total variation with probability 0.99:\n")
    print("\n".join(needed_rows(args.alpha)))
    print("\n" + timed_line())


if __name__ == "__main__":
    main()
