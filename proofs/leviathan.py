"""Checks of Leviathan et al. (2023) (slides on Leviathan et al., Fast Inference from Transformers via
Speculative Decoding): expected tokens per step, walltime (Thm 3.8), operations
(Thm 3.11), their numerical table, and ``alpha = 1 - TV(p, q)``.

Cost model of the paper: one step runs the draft ``gamma`` times (cost ``c`` each,
relative to one target run; ``c_hat`` in arithmetic operations) and the target once on
``gamma + 1`` positions. With i.i.d. acceptances of probability ``alpha`` the number of
tokens a step produces is ``N = min(first rejection, gamma) + 1``.
"""
from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np

import otm
import sympy as sp

from .check import EXHAUSTIVE, SYMBOLIC, Check, SlackSearch, identity_slack
from .instances import exact_grid

PAPER = "leviathan"
SEED = "Leviathan et al. (2023)"

#: The slides' table: (alpha, gamma) -> (operations, speed), printed to two decimals.
PAPER_TABLE = (
    (0.6, 2, 1.53, 1.96),
    (0.7, 3, 1.58, 2.53),
    (0.8, 2, 1.23, 2.44),
    (0.8, 5, 1.63, 3.69),
    (0.9, 2, 1.11, 2.71),
    (0.9, 10, 1.60, 6.86),
)

#: The table prints two decimals: a reproduced value within half a unit of the last digit matches.
TABLE_ROUNDING = 0.005


def expected_tokens(alpha, gamma):
    """``E[N] = (1 - alpha^(gamma+1)) / (1 - alpha)`` (``gamma + 1`` at ``alpha = 1``)."""
    return gamma + 1 if alpha == 1 else (1 - alpha ** (gamma + 1)) / (1 - alpha)


def walltime_factor(alpha, gamma, c):
    """Thm 3.8: ``(1 - alpha^(gamma+1)) / ((1 - alpha)(gamma c + 1))``."""
    return expected_tokens(alpha, gamma) / (gamma * c + 1)


def operations_factor(alpha, gamma, c_hat):
    """Thm 3.11: ``(1 - alpha)(c_hat gamma + gamma + 1) / (1 - alpha^(gamma+1))``."""
    return (c_hat * gamma + gamma + 1) / expected_tokens(alpha, gamma)


def _symbolic_tokens(gamma: int):
    """``E[N]`` from its distribution: ``P(N = i + 1) = alpha^i (1 - alpha)``, ``i < gamma``;
    ``P(N = gamma + 1) = alpha^gamma``."""
    a = sp.Symbol("alpha")
    return a, sum((i + 1) * a**i * (1 - a) for i in range(gamma)) + (gamma + 1) * a**gamma


def check_expected_tokens(formula=expected_tokens, max_gamma: int = 12) -> Check:
    """E[tokens per step] from the distribution of N, symbolically, for gamma = 1..max_gamma."""
    check = Check(
        id="leviathan.expected_tokens", paper=PAPER, source=f"{SEED}, 'Metrics - Acceptance Length'",
        claim="With acceptance rate alpha and gamma drafts, a step produces (1 - alpha^(gamma+1)) / (1 - alpha) tokens in expectation.",
        formula="E[N] = sum_{i<gamma} (i+1) alpha^i (1-alpha) + (gamma+1) alpha^gamma = (1 - alpha^(gamma+1)) / (1 - alpha)",
        method=f"{SYMBOLIC}+{EXHAUSTIVE}",
        note=f"sympy simplification of the difference for gamma = 1..{max_gamma}; then Alg. 1 enumerated exactly "
        "(all accept/reject paths, Fractions) on a context-free toy pair, alpha = sum min(p, q).",
    )
    search = SlackSearch(tolerance=0.0)
    for gamma in range(1, max_gamma + 1):
        a, from_distribution = _symbolic_tokens(gamma)
        difference = sp.simplify(sp.cancel(from_distribution - formula(a, gamma)))
        search.record(0 if difference == 0 else -1, {"gamma": gamma, "difference": str(difference)})
    for p in exact_grid(3, 3):
        q = np.array([Fraction(1, 2), Fraction(1, 3), Fraction(1, 6)], dtype=object)
        alpha = sum(min(a, b) for a, b in zip(p, q))
        for gamma in (1, 2, 3):
            search.record(identity_slack(_enumerated_tokens(p, q, gamma), formula(alpha, gamma)), {"p": p, "q": q, "gamma": gamma})
    return search.finish(check)


def _enumerated_tokens(p, q, gamma: int):
    """Expected tokens of Alg. 1 by enumerating every draft sequence and acceptance pattern
    (p, q the same at every position)."""
    total = Fraction(0)
    for drafts in itertools.product(range(len(q)), repeat=gamma):
        mass = np.prod([q[x] for x in drafts])
        if mass == 0:
            continue
        survive = Fraction(1)
        for i, x in enumerate(drafts):  # N = i + 1 when draft i is the first rejected
            accept = min(Fraction(1), p[x] / q[x])
            total += mass * survive * (1 - accept) * (i + 1)
            survive *= accept
        total += mass * survive * (gamma + 1)
    return total


def check_walltime_operations(walltime=walltime_factor, operations=operations_factor) -> Check:
    """Thm 3.8 and Thm 3.11 from the cost model, symbolically."""
    check = Check(
        id="leviathan.thm3_8_3_11", paper=PAPER, source=f"{SEED}, Thm 3.8 and Thm 3.11",
        claim="Walltime improves by (1-alpha^(gamma+1)) / ((1-alpha)(gamma c + 1)); total operations grow by (1-alpha)(c_hat gamma + gamma + 1) / (1-alpha^(gamma+1)).",
        formula="speed = E[N] / (gamma c + 1);  operations = (gamma c_hat + gamma + 1) / E[N]",
        method=SYMBOLIC,
        note="Derived from the cost model (gamma draft runs + 1 target run per step for time; gamma c_hat + gamma + 1 "
        "target-equivalent operations per step) with E[N] from its distribution; sympy, gamma = 1..8.",
    )
    search = SlackSearch(tolerance=0.0)
    c, c_hat = sp.symbols("c c_hat", nonnegative=True)
    for gamma in range(1, 9):
        a, tokens = _symbolic_tokens(gamma)
        for name, derived, stated in (
            ("walltime", tokens / (gamma * c + 1), walltime(a, gamma, c)),
            ("operations", (gamma * c_hat + gamma + 1) / tokens, operations(a, gamma, c_hat)),
        ):
            difference = sp.simplify(sp.cancel(derived - stated))
            search.record(0 if difference == 0 else -1, {"gamma": gamma, "quantity": name, "difference": str(difference)})
    return search.finish(check)


def reproduce_table(c: float = 0.0, c_hat: float = 0.0) -> list[dict]:
    """The slides' (alpha, gamma) -> operations, speed table from Thms 3.8 / 3.11.

    The printed numbers are reproduced with ``c = c_hat = 0`` (a free draft model): e.g.
    alpha = 0.6, gamma = 2 gives speed 0.784 / 0.4 = 1.96 and operations 1.2 / 0.784 = 1.53.
    """
    return [
        {
            "alpha": alpha, "gamma": gamma,
            "operations": operations_factor(alpha, gamma, c_hat), "speed": walltime_factor(alpha, gamma, c),
            "paper_operations": ops, "paper_speed": speed,
        }
        for alpha, gamma, ops, speed in PAPER_TABLE
    ]


def check_table(rows_fn=reproduce_table) -> Check:
    """The table of (alpha, gamma) -> operations and speed, to the printed two decimals."""
    check = Check(
        id="leviathan.table", paper=PAPER, source=f"{SEED}, 'Results - Numerical Predictions' table",
        claim="The table's operations and speed values follow from Thms 3.8 and 3.11.",
        formula="|formula(alpha, gamma) - printed| <= 0.005 with c = c_hat = 0",
        method=EXHAUSTIVE,
        note="All six rows reproduce with c = c_hat = 0 (the slides do not state c; no other c fits the 1.96 at alpha=0.6, gamma=2).",
        tolerance=0.0,
    )
    search = SlackSearch(tolerance=0.0)
    for row in rows_fn():
        worst = max(abs(row["operations"] - row["paper_operations"]), abs(row["speed"] - row["paper_speed"]))
        search.record(TABLE_ROUNDING - worst, row)
    return search.finish(check)


def check_alpha_tv(law_fn=None) -> Check:
    """alpha = sum min(p, q) = 1 - TV(p, q), and Alg. 1's output law is p (exact)."""
    law_fn = law_fn or otm.rule_law
    check = Check(
        id="leviathan.alpha_tv", paper=PAPER, source=f"{SEED}, Alg. 1; SpecTr (Sun et al. 2023), eq. (1)",
        claim="Single-draft speculative sampling outputs p and accepts with probability sum min(p, q) = 1 - TV(p, q).",
        formula="P(Y = x) = p(x);  P(accept) = sum_x min(p(x), q(x)) = 1 - (1/2) sum_x |p(x) - q(x)|",
        method=EXHAUSTIVE,
        note="Every pair on the 1/6 grid over 3 tokens, exact rationals (rule 'single').",
    )
    search = SlackSearch(tolerance=0.0)
    grid = exact_grid(3, 6)
    for p in grid:
        for q in grid:
            law = law_fn("single", p, q, 1)
            tv = sum(abs(a - b) for a, b in zip(p, q)) / 2
            case = {"p": p, "q": q}
            search.record(identity_slack(law.acceptance, 1 - tv), {**case, "part": "acceptance"})
            search.record(identity_slack(sum(min(a, b) for a, b in zip(p, q)), 1 - tv), {**case, "part": "sum min"})
            search.record(identity_slack(law.output_distribution, p), {**case, "part": "output law"})
    return search.finish(check)


CHECKS = {
    "leviathan.expected_tokens": lambda n, rng: check_expected_tokens(),
    "leviathan.thm3_8_3_11": lambda n, rng: check_walltime_operations(),
    "leviathan.table": lambda n, rng: check_table(),
    "leviathan.alpha_tv": lambda n, rng: check_alpha_tv(),
}
