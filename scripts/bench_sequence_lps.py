"""Sizes and run times of the sequence-level LPs (otm.sequences), and the tree gaps.

Part 1: for each LP (chain coupling, chain through-mass, chain any-output, tree optimum)
and each size, the number of variables and rows and the wall time with the exact rational
simplex (when at most 300 variables) and with HiGHS followed by exact certification
(solvers.certify). Part 2: on random exact instances, the tree optimum against the
node-optimal walk, traversal verification and the node-wise rules.

Run: .venv/bin/python scripts/bench_sequence_lps.py            (about a minute on 2 cores)
"""
from __future__ import annotations

import time

import numpy as np

from otm.errors import OTMError
from otm.sequences import (
    optimal_node_rule,
    random_model,
    solve_chain_optimum,
    solve_tree_optimum,
    traversal_law,
    tree_walk_expected_accepted,
)

EXACT_LIMIT = 300


def model(vocab_size: int, length: int, seed: int = 0):
    return random_model(vocab_size, length, np.random.default_rng(seed), concentration=1.0, denominator=12)


def timed(solve, *args, **kwargs):
    start = time.perf_counter()
    try:
        result = solve(*args, **kwargs)
    except OTMError as exc:  # report, do not stop the table
        return None, f"{type(exc).__name__}: {str(exc)[:60]}"
    return result, f"{time.perf_counter() - start:.3f}s" + ("" if result.exact else " (not certified)")


def size_row(name, solve, args, kwargs):
    result, highs = timed(solve, *args, **kwargs)
    if result is None:
        print(f"| {name} | - | - | - | - | {highs} |")
        return
    exact = "-"
    if result.num_variables <= EXACT_LIMIT:
        exact_result, exact = timed(solve, *args, **dict(kwargs, backend="exact"))
        assert exact_result is None or exact_result.value == result.value or not result.exact
    print(f"| {name} | {result.num_variables} | {result.num_equalities} | {result.num_inequalities} | {exact} | {highs} |")


def sizes() -> None:
    print("| LP | variables | = rows | <= rows | exact simplex | HiGHS + certify |")
    print("|---|---|---|---|---|---|")
    for vocab_size, g in [(2, 2), (3, 2), (2, 3), (3, 3), (4, 3), (2, 4)]:
        m = model(vocab_size, g + 1)
        size_row(f"chain coupling V={vocab_size} g={g}", solve_chain_optimum, (m, g), {})
        size_row(f"chain through-mass V={vocab_size} g={g}", solve_chain_optimum, (m, g, "through_masses"), {})
        size_row(f"chain any-output V={vocab_size} g={g}", solve_chain_optimum, (m, g), {"outputs": "any"})
    for vocab_size, depth, k, draft in [(2, 2, 2, "iid"), (3, 2, 2, "without_replacement"), (3, 2, 2, "iid"),
                                        (2, 3, 2, "iid"), (3, 3, 2, "without_replacement"), (4, 2, 2, "without_replacement"),
                                        (4, 2, 3, "without_replacement")]:
        m = model(vocab_size, depth + 1)
        size_row(f"tree V={vocab_size} d={depth} k={k} {draft}", solve_tree_optimum, (m, depth, k, draft), {})


def gaps(instances: int = 6) -> None:
    print("\n| instance | draft | tree optimum | node-optimal walk | traversal | node-wise rules |")
    print("|---|---|---|---|---|---|")
    for seed in range(instances):
        m = model(3, 3, seed)
        for draft, rules in (("without_replacement", ("rrs_wor",)), ("iid", ("rrs", "kseq"))):
            optimum = solve_tree_optimum(m, 2, 2, draft).value
            node = tree_walk_expected_accepted(m, 2, 2, optimal_node_rule(draft))
            tv = traversal_law(m, 2, 2, draft).expected_accepted()
            walks = ", ".join(f"{r} {float(tree_walk_expected_accepted(m, 2, 2, r)):.4f}" for r in rules)
            print(f"| V=3 d=2 k=2 seed {seed} | {draft} | {float(optimum):.4f} | {float(node):.4f} | {float(tv):.4f} | {walks} |")


if __name__ == "__main__":
    sizes()
    gaps()
