"""Measured cost of ``optimal_wor``'s water levels at ``k >= 3`` drafts: the constants behind
:func:`otm.rules.water_levels.parameters.estimated_seconds` (what ``otm acceptance
--time-budget`` prices the rule at).

    python scripts/bench_water_level_cost.py

Each case times :func:`otm.rules.water_levels.parameters.wor_parameters` (median of 3) on a float
row whose draft is close to the target, as real rows are (deep nestings), and divides by what the
estimate counts: the drafts of every ordered draft tuple where they are enumerated, the entries ``rank x
quadrature node x draft`` where the set masses come from the clock integral. The largest value
of each kind, with a margin for a loaded machine, is the constant to use; the table goes to
docs/benchmarks.md with the date and the machine.
"""
from __future__ import annotations

import math
import statistics
import time

import numpy as np

from otm.rules.water_levels.clock_masses import node_count
from otm.rules.water_levels.parameters import CLOCK_SECONDS_PER_ENTRY, ENUMERATED_SECONDS_PER_DRAFT, wor_parameters

#: ``(k, tokens of q > 0)``: both paths, the enumeration up to near its limit of tuples.
CASES = [(3, 40), (3, 80), (4, 25), (3, 200), (3, 800), (4, 200)]


def row(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``(p, q)``: softmaxes of correlated logits (a draft close to the target)."""
    logits = 3 * rng.normal(size=n)
    p, q = (np.exp(v - v.max()) for v in (logits, logits + rng.normal(size=n)))
    return p / p.sum(), q / q.sum()


def main() -> None:
    rng = np.random.default_rng(0)
    lines = ["| k | tokens | path | seconds (median of 3) | per draft of a tuple | per entry | constant |", "|---|---|---|---|---|---|---|"]
    for k, n in CASES:
        p, q = row(n, rng)
        times = []
        for _ in range(3):
            start = time.perf_counter()
            params = wor_parameters(p, q, k)
            times.append(time.perf_counter() - start)
        seconds = statistics.median(times)
        clock = "clock integral" in params.arithmetic
        entries = n * node_count(np.sort(q), k) * k
        per_tuple = "" if clock else f"{seconds / (k * math.perm(n, k)):.2e}"
        per_entry = f"{seconds / entries:.2e}" if clock else ""
        constant = CLOCK_SECONDS_PER_ENTRY if clock else ENUMERATED_SECONDS_PER_DRAFT
        lines.append(f"| {k} | {n} | {'clock' if clock else 'tuples'} | {seconds:.3g} | {per_tuple} | {per_entry} | {constant:.0e} |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
