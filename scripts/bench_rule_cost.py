"""Measured cost per draft tuple of the rules whose exact law enumerates the draft law:
the constants behind :func:`otm.rules.estimated_seconds` (which decides what ``otm
acceptance``, the tables and the report skip, and what ``otm.rule_law`` refuses).

    python scripts/bench_rule_cost.py

For each rule without a closed form at the sizes shown, the exact law is timed (median of
3) on Dirichlet pairs; seconds per tuple = time / number of tuples. The largest value of a
rule is the constant to use (``seconds_per_lp_tuple`` for the LP rules, the enumeration
constant for the others).
"""
from __future__ import annotations

import math
import statistics
import time

import numpy as np
from tqdm import tqdm

from otm.rules import rule_law
from otm.rules.registry import ENUMERATION_SECONDS_PER_TUPLE, rule_spec

CASES = [("importance_sampling", 6, 2), ("importance_sampling", 10, 2), ("importance_sampling", 5, 3),
         ("importance_sampling_wor", 6, 2), ("importance_sampling_wor", 10, 2), ("importance_sampling_wor", 6, 3),
         ("importance_sampling_truncated", 6, 2), ("importance_sampling_truncated", 12, 2), ("importance_sampling_truncated", 6, 3),
         ("rrs_wor", 8, 3), ("rrs_wor", 12, 3), ("rrs", 8, 3), ("kseq", 8, 3), ("spechub", 60, 2), ("greedy", 60, 3)]


def tuples(rule: str, vocab: int, k: int) -> int:
    scheme = rule_spec(rule).draft_scheme
    return math.perm(vocab, k) if scheme == "without_replacement" else 2 * (vocab - 1) if scheme == "hub" else vocab - k + 1 if scheme == "greedy" else vocab**k


def main() -> None:
    rng = np.random.default_rng(0)
    rows = ["| rule | V | k | tuples | seconds (median of 3) | seconds per tuple | registry constant |", "|---|---|---|---|---|---|---|"]
    for rule, vocab, k in tqdm(CASES, desc="rules"):
        p, q = rng.dirichlet(np.ones(vocab)), rng.dirichlet(np.ones(vocab))
        params = {} if rule.startswith("importance") else {"method": "enumeration"}
        times = []
        for _ in range(3):
            start = time.perf_counter()
            rule_law(rule, p, q, k, **params)
            times.append(time.perf_counter() - start)
        n = tuples(rule, vocab, k)
        spec = rule_spec(rule)
        constant = spec.seconds_per_lp_tuple or ENUMERATION_SECONDS_PER_TUPLE
        rows.append(f"| {rule} | {vocab} | {k} | {n} | {statistics.median(times):.3g} | {statistics.median(times) / n:.2e} | {constant:.0e} |")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
