"""Checks of Speculative Ensemble (Fu et al. 2025) (Speculative Ensemble: Fast LLM Ensemble via Speculation).

Letters: ``q`` the proposal (draft) model, ``p`` the other (target) model, ``r = E(q, p)``
the ensemble law verified against: weighted ``r = lam q + (1 - lam) p`` (eq. 4) or
contrastive ``r = Softmax(l_p - mu l_q)`` (eq. 5). ``c`` is the cost of one proposal-model
call relative to one target-model call.

Discrepancy noted in the docs: eq. (7) reads ``alpha = 1 - (1/2) D_TV(q, r)`` with
``D_TV = sum |q - r|`` (the unnormalised sum), which is the correct ``1 - TV(q, r)``; with
the usual normalised ``D_TV`` the formula would be wrong by a factor 2.
"""
from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np

import otm
import sympy as sp

from .check import EXHAUSTIVE, RANDOM_SEARCH, SYMBOLIC, Check, SlackSearch, identity_slack, merge_checks, run_search
from .instances import exact_grid, random_pair

PAPER = "ensemble"
SEED = "Speculative Ensemble (Fu et al. 2025)"


def weighted(p, q, lam):
    """Eq. (4): ``r = lam q + (1 - lam) p``."""
    return lam * np.asarray(q) + (1 - lam) * np.asarray(p)


def contrastive(p, q, mu):
    """Eq. (5) with logits = log-probabilities: ``r`` proportional to ``exp(log p - mu log q)``."""
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    with np.errstate(divide="ignore"):
        logits = np.where(p > 0, np.log(p) - mu * np.log(np.where(q > 0, q, 1.0)), -np.inf)
    weights = np.exp(logits - logits.max())
    return weights / weights.sum()


def speed_factor(alpha, gamma, c):
    """Thm 3.1: ``(1 - alpha^gamma)(1 + c) / ((1 - alpha)(1 + c gamma))``."""
    if alpha == 1:
        return gamma * (1 + c) / (1 + c * gamma)
    return (1 - alpha**gamma) * (1 + c) / ((1 - alpha) * (1 + c * gamma))


def alternate_speed_factor(alpha, gamma_q, gamma_p, c):
    """Thm 3.6: ``(1 - alpha^gq)(1 + c) / ((1 - alpha)(1 + c gq - alpha^gp c))``."""
    return (1 - alpha**gamma_q) * (1 + c) / ((1 - alpha) * (1 + c * gamma_q - alpha**gamma_p * c))


def _weighted_cases(rng, count):
    for _ in range(count):
        p, q = random_pair(rng, int(rng.integers(2, 9)))
        yield {"p": p, "q": q, "lam": float(rng.choice([0.0, 1.0, rng.random()], p=[0.1, 0.1, 0.8]))}


def check_a1(instances: int, rng: np.random.Generator, law_fn=None) -> Check:
    """§3.2 / App. A.1: verifying against ``r`` outputs exactly ``r`` (weighted and contrastive)."""
    law_fn = law_fn or otm.rule_law
    check = Check(
        id="ensemble.a1", paper=PAPER, source=f"{SEED}, §3.2 eq. (6), App. A.1",
        claim="Accepting the proposal x with min(1, r(x)/q(x)) and resampling from norm(max(0, r - q)) outputs tokens distributed as the ensemble r.",
        formula="P(Y = x) = r(x),  r = lam q + (1-lam) p  or  Softmax(l_p - mu l_q)",
        method=f"{EXHAUSTIVE}+{RANDOM_SEARCH}",
        note="Weighted: every pair on the 1/4 grid of 3 tokens, lam in {0, 1/3, 1/2, 1}, exact rationals; contrastive: random float pairs with q > 0, mu in [-0.5, 1].",
    )
    grid = exact_grid(3, 4)
    exact = SlackSearch(tolerance=0.0)
    for p in grid:
        for q in grid:
            for lam in (Fraction(0), Fraction(1, 3), Fraction(1, 2), Fraction(1)):
                law = law_fn("ensemble_weighted", p, q, 1, lam=lam)
                exact.record(identity_slack(law.output_distribution, weighted(p, q, lam)), {"p": p, "q": q, "lam": lam})
    exact_check = exact.finish(replace(check))
    search = SlackSearch()
    for _ in range(instances):
        p, q = random_pair(rng, int(rng.integers(2, 9)))
        q = 0.95 * q + 0.05 / q.size  # contrastive decoding needs q > 0 where p > 0
        mu = float(rng.uniform(-0.5, 1.0))
        law = law_fn("ensemble_contrastive", p, q, 1, mu=mu)
        search.record(identity_slack(law.output_distribution, contrastive(p, q, mu)), {"p": p, "q": q, "mu": mu})
    return merge_checks(search.finish(check), exact_check)


def check_eq7(instances: int, rng: np.random.Generator, law_fn=None, formula=None) -> Check:
    """Eq. (7): acceptance ``1 - (1/2) sum |q - r|``."""
    law_fn = law_fn or otm.rule_law
    formula = formula or (lambda q, r: 1 - 0.5 * float(np.abs(np.asarray(q, dtype=np.float64) - r).sum()))
    check = Check(
        id="ensemble.eq7", paper=PAPER, source=f"{SEED}, eq. (7)",
        claim="The acceptance rate of verification against r is 1 - (1/2) D_TV(q, r) with D_TV(q, r) = sum |q - r| (the paper's unnormalised definition).",
        formula="alpha = 1 - (1/2) sum_x |q(x) - r(x)| = sum_x min(q(x), r(x))",
        method=RANDOM_SEARCH,
        note="Holds with the paper's own unnormalised D_TV; read with the standard TV = (1/2) sum |q - r| it would be off by a factor 2 (discrepancy of notation).",
    )

    def slack(c):
        r = weighted(c["p"], c["q"], c["lam"])
        return identity_slack(float(law_fn("ensemble_weighted", c["p"], c["q"], 1, lam=c["lam"]).acceptance), formula(c["q"], r))

    return run_search(check, _weighted_cases(rng, instances), slack)


def check_thm3_2(instances: int, rng: np.random.Generator, law_fn=None) -> Check:
    """Thm 3.2: ``alpha >= lam`` for the weighted ensemble; equality iff p and q do not overlap.
    In fact ``alpha = lam + (1 - lam) sum min(p, q)`` (checked too)."""
    law_fn = law_fn or otm.rule_law
    check = Check(
        id="ensemble.thm3_2", paper=PAPER, source=f"{SEED}, Thm 3.2",
        claim="With r = lam q + (1-lam) p and q proposing, the acceptance rate is at least lam, with equality iff p(x) q(x) = 0 for all x.",
        formula="alpha = lam + (1 - lam) sum_x min(p(x), q(x)) >= lam",
        method=RANDOM_SEARCH,
        note="Random pairs (a third with disjoint supports, where equality must hold), lam in [0, 1]. The identity "
        "alpha = lam + (1-lam)(1 - TV(p, q)) makes the equality case exact (it also needs lam < 1).",
    )
    search = SlackSearch()
    for i, c in enumerate(_weighted_cases(rng, instances)):
        p, q, lam = c["p"], c["q"], c["lam"]
        if i % 3 == 0:  # disjoint supports
            half = max(1, p.size // 2)
            p = np.r_[p[:half] + 1e-3, np.zeros(p.size - half)]
            q = np.r_[np.zeros(half), q[half:] + 1e-3]
            p, q = p / p.sum(), q / q.sum()
        alpha = float(law_fn("ensemble_weighted", p, q, 1, lam=lam).acceptance)
        overlap = float(np.minimum(p, q).sum())
        case = {"p": p, "q": q, "lam": lam}
        search.record(alpha - lam, {**case, "part": "alpha >= lam"})
        search.record(identity_slack(alpha, lam + (1 - lam) * overlap), {**case, "part": "identity"})
    return search.finish(check)


def check_cor3_3(instances: int, rng: np.random.Generator, law_fn=None) -> Check:
    """Cor. 3.3: choosing the proposer, ``alpha >= max(lam, 1 - lam) >= 1/2``."""
    law_fn = law_fn or otm.rule_law
    check = Check(
        id="ensemble.cor3_3", paper=PAPER, source=f"{SEED}, Cor. 3.3",
        claim="For a weighted ensemble, letting the better model propose gives an acceptance rate of at least 1/2.",
        formula="max(alpha(q proposes, lam), alpha(p proposes, 1 - lam)) >= max(lam, 1 - lam) >= 1/2",
        method=RANDOM_SEARCH,
        note="Swapping proposer and verifier keeps r = lam q + (1-lam) p (weight 1 - lam on the new proposer p).",
    )

    def slack(c):
        p, q, lam = c["p"], c["q"], c["lam"]
        forward = float(law_fn("ensemble_weighted", p, q, 1, lam=lam).acceptance)
        swapped = float(law_fn("ensemble_weighted", q, p, 1, lam=1 - lam).acceptance)
        return min(max(forward, swapped) - max(lam, 1 - lam), max(forward, swapped) - 0.5)

    return run_search(check, _weighted_cases(rng, instances), slack)


def _symbolic_zero(expression) -> bool:
    return sp.simplify(sp.cancel(sp.together(expression))) == 0


def check_speed_theorems(speed=speed_factor, alternate=alternate_speed_factor) -> Check:
    """Thm 3.1, Cor. 3.4, Thm 3.6 and Cor. 3.7, symbolically from the cost model."""
    check = Check(
        id="ensemble.speed", paper=PAPER, source=f"{SEED}, Thm 3.1, Cor. 3.4, Thm 3.6, Cor. 3.7 (App. A.2)",
        claim="Speed-up over the vanilla ensemble: (1-a^g)(1+c)/((1-a)(1+cg)) (Thm 3.1); with g=2 it exceeds 1 iff a > c/(1+c) (Cor. 3.4); "
        "alternate proposals: (1-a^gq)(1+c)/((1-a)(1+c gq - a^gp c)) (Thm 3.6), >= 1 at gq = gp = 1 with equality iff a c = 0 (Cor. 3.7).",
        formula="E[N] = sum_{j<=g} j a^(j-1)(1-a) + g a^g;  factor = E[N](1+c)/(1+cg);  time_alt = a^gp(1+c(gq-1)) + (1-a^gp)(1+c gq)",
        method=SYMBOLIC,
        note="E[N] from the distribution of the tokens a cycle yields (the bonus token is discarded: it follows p, not r); "
        "g, gq, gp = 1..6; Cor. 3.7's sign from factor - 1 = a c / (1 + c - a c).",
    )
    a, c = sp.symbols("alpha c", nonnegative=True)
    search = SlackSearch(tolerance=0.0)

    def tokens(g):
        return sum(j * a ** (j - 1) * (1 - a) for j in range(1, g + 1)) + g * a**g

    for g in range(1, 7):
        ok = _symbolic_zero(tokens(g) * (1 + c) / (1 + c * g) - speed(a, g, c))
        search.record(0 if ok else -1, {"claim": "Thm 3.1", "gamma": g})
    ok = _symbolic_zero((speed(a, 2, c) - 1) * (1 + 2 * c) - (a * (1 + c) - c))
    search.record(0 if ok else -1, {"claim": "Cor. 3.4: (factor - 1)(1 + 2c) = a(1+c) - c"})
    for gq in range(1, 5):
        for gp in range(1, 5):
            time = a**gp * (1 + c * (gq - 1)) + (1 - a**gp) * (1 + c * gq)
            ok = _symbolic_zero(tokens(gq) * (1 + c) / time - alternate(a, gq, gp, c))
            search.record(0 if ok else -1, {"claim": "Thm 3.6", "gamma_q": gq, "gamma_p": gp})
    ok = _symbolic_zero(alternate(a, 1, 1, c) - 1 - a * c / (1 + c - a * c))
    search.record(0 if ok else -1, {"claim": "Cor. 3.7"})
    return search.finish(check)


def check_cor3_5(instances: int, rng: np.random.Generator, law_fn=None, speed=speed_factor, max_gamma: int = 8) -> Check:
    """Cor. 3.5: for a weighted ensemble some proposer and gamma is never slower than the
    vanilla ensemble (factor >= 1), and faster when lam != c/(1+c)."""
    law_fn = law_fn or otm.rule_law
    check = Check(
        id="ensemble.cor3_5", paper=PAPER, source=f"{SEED}, Cor. 3.4 and Cor. 3.5",
        claim="For any two models and a weighted ensemble there is a proposer and a gamma with speed-up >= 1, and > 1 when lam != c/(1+c); "
        "if lam > c/(1+c), gamma = 2 with q proposing already speeds up (Cor. 3.4).",
        formula="max_{proposer, gamma} factor >= 1;  lam > c/(1+c) => factor(alpha_q, 2, c) > 1",
        method=RANDOM_SEARCH,
        note=f"alpha from the exact rule law; c log-uniform in [0.01, 100] (swapping the proposer turns c into 1/c); gamma <= {max_gamma}. "
        "gamma = 1 always gives a factor of exactly 1, so the 'never slower' half is immediate.",
    )
    search = SlackSearch()
    for c_ in _weighted_cases(rng, instances):
        p, q, lam = c_["p"], c_["q"], c_["lam"]
        cost = float(10 ** rng.uniform(-2, 2))
        forward = float(law_fn("ensemble_weighted", p, q, 1, lam=lam).acceptance)
        swapped = float(law_fn("ensemble_weighted", q, p, 1, lam=1 - lam).acceptance)
        best = max(
            max(speed(forward, g, cost) for g in range(1, max_gamma + 1)),
            max(speed(swapped, g, 1 / cost) for g in range(1, max_gamma + 1)),
        )
        case = {**c_, "c": cost, "alpha_forward": forward, "alpha_swapped": swapped}
        search.record(best - 1, {**case, "part": "some choice is not slower"})
        if lam > cost / (1 + cost) + 1e-9:
            search.record(speed(forward, 2, cost) - 1, {**case, "part": "Cor. 3.4"})
    return search.finish(check)


CHECKS = {
    "ensemble.a1": lambda n, rng: check_a1(n, rng),
    "ensemble.eq7": lambda n, rng: check_eq7(n, rng),
    "ensemble.thm3_2": lambda n, rng: check_thm3_2(n, rng),
    "ensemble.cor3_3": lambda n, rng: check_cor3_3(n, rng),
    "ensemble.speed": lambda n, rng: check_speed_theorems(),
    "ensemble.cor3_5": lambda n, rng: check_cor3_5(n, rng),
}
