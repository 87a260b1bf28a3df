"""Softmax selection rules attain the optimum without replacement, their weights the minimiser of a
bound-constrained convex program (docs/optimal-verifier.md, section 8, "A second optimal rule:
softmax weights", Lemma 16).

Lemma 16: a rule that selects the member ``a`` of a drafted set ``S`` with probability ``exp(theta_a) /
sum_{b in S} exp(theta_b)`` has the selection law ``x(theta) = grad A(theta)``, ``A(theta) = sum_S Q_S
log sum_{b in S} exp(theta_b)``; (a) these laws are exactly the relative interior of the set ``P`` of
every rule's law, and (b) on the side ``U`` of the optimal cut (the sets that meet ``U``, choosing
among their members in ``U``) a minimiser of ``A(theta) - <p, theta>`` over ``theta <= 0`` has ``x <=
p``, and on ``H`` (the sets inside ``H``) a minimiser over ``theta >= 0`` has ``x >= p``: with a member
of ``U`` selected whenever the set has one, the rule attains ``alpha*(p, Q_wor)``, at ``O(k)`` per
drafted set once ``theta`` is known.

Per random instance (``wor_pair_rules.instance``: 4 to 8 tokens, every ``q >= 1e-3``; ``k = 3`` to
``min(V - 1, 5)`` drafts without replacement, float64, every draft set enumerated): each side's
program solved by projected Newton steps (:func:`minimise`), and the rule's acceptance ``sum min(p,
x(theta))`` over every draft set against ``alpha*`` (the prefix scan). With ``--no-priority`` the
weights are used over each whole set, ``U`` and ``H`` members together: a broken ingredient, which the
table shows short of ``alpha*``. ``--sampling iid`` draws the drafts i.i.d. instead (the set of
distinct drafts chooses), against ``alpha*(p, q^k)``. About 15 s for 2,000 instances:

    python scripts/wor_softmax_rule.py [--instances 2000] [--seed 0] [--no-priority] [--sampling iid]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from wor_pair_rules import instance  # noqa: E402

from otm.draft_laws import iid_law, without_replacement_law  # noqa: E402
from otm.formulations.prefix_scan import prefix_scan  # noqa: E402
from otm.rules.optimal_wor import draft_sets  # noqa: E402

#: Newton's method stops when the optimality conditions hold within this much (L1 over the tokens):
#: the rounding of the law's sums, a few ``1e-16`` per token.
KKT_TOLERANCE = 1e-14

#: A step is taken when the objective rises by at most this much, relative: the rounding of its sums,
#: which near the minimum hides the step's true decrease.
ROUNDING = 1e-15

#: A Newton step that leaves more than this much of the gradient unexplained (L1; where the Hessian
#: is singular: a shift of a group of weights along which ``A`` is linear) is replaced by a step
#: along that part, to the constraint; below it, the part is the rounding of a shift the objective
#: does not feel (a side whose law must equal ``p`` exactly).
FLAT_FLOOR = 1e-13

#: At most this many Newton steps per side.
MAX_STEPS = 100

#: The draft law of each ``--sampling``: without replacement, or i.i.d. (the set of distinct drafts).
LAWS = {"without_replacement": without_replacement_law, "iid": iid_law}

#: The sign constraint ``sign * theta >= 0`` on each side's weights: ``U`` (``below``: ``x <= p``)
#: ``theta <= 0``, ``H`` ``theta >= 0``; ``None`` leaves them free.
SIGNS = {True: -1.0, False: 1.0, None: 0.0}


def side_choices(sets: dict, side: set, whole: bool) -> list[tuple[np.ndarray, float]]:
    """The choices a side makes: ``(members of the side in the set, mass)``, merged by members. ``U``
    (``whole`` false) chooses within every set that meets it; ``H`` (``whole``) only in the sets it
    holds entirely."""
    merged: dict = {}
    for members, mass in sets.items():
        inside = members & side
        if inside and (not whole or inside == members):
            merged[inside] = merged.get(inside, 0.0) + mass
    return [(np.array(sorted(members)), mass) for members, mass in merged.items()]


def softmax_law(theta: np.ndarray, choices) -> tuple[np.ndarray, np.ndarray]:
    """``(x(theta), its Jacobian)``: the selection law of the softmax rule on ``choices`` and ``sum_S
    Q_S (diag(pi_S) - pi_S pi_S^T)``, the Hessian of ``A``."""
    n = len(theta)
    x, hessian = np.zeros(n), np.zeros((n, n))
    for members, mass in choices:
        weights = np.exp(theta[members] - theta[members].max())
        chance = weights / weights.sum()
        x[members] += mass * chance
        hessian[np.ix_(members, members)] += mass * (np.diag(chance) - np.outer(chance, chance))
    return x, hessian


def log_partition(theta: np.ndarray, choices) -> float:
    """``A(theta) = sum_S Q_S log sum_{b in S} exp(theta_b)``."""
    total = 0.0
    for members, mass in choices:
        top = theta[members].max()
        total += mass * (top + np.log(np.exp(theta[members] - top).sum()))
    return total


def kkt_residual(theta: np.ndarray, law: np.ndarray, linear: np.ndarray, tokens: np.ndarray, below) -> float:
    """How far ``theta`` is from optimal for ``A(theta) - <linear, theta>`` under the sign constraint
    of ``below`` (:data:`SIGNS`), L1 over ``tokens``: the gradient ``x - linear`` where the weight is
    free, and only its part pointing out of the constraint where the weight is at its bound 0."""
    gradient = (law - linear)[tokens]
    sign = SIGNS[below]
    at_bound = (sign * theta[tokens] <= 0.0) if sign else np.zeros(len(tokens), dtype=bool)
    # at the bound a gradient of the constraint's sign is optimal (the weight would leave the set)
    return float(np.where(at_bound, np.maximum(-sign * gradient, 0.0), np.abs(gradient)).sum())


def minimise(choices, linear: np.ndarray, tokens: np.ndarray, below=None) -> tuple[np.ndarray, int, float]:
    """``(theta, steps, KKT residual)``: projected Newton steps (Bertsekas's, with the weights at their
    bound held there while the gradient keeps them there) on the convex ``A(theta) - <linear, theta>``
    over ``tokens``, under the sign constraint of ``below``. ``A`` is linear along a common shift of
    the weights, so one weight at the bound is held where none would be (the gauge), and with no
    weight at the bound the part of the gradient along the shift takes the weights to it; each step is
    halved until the objective does not rise beyond its rounding. Free of constraints
    (``below=None``), ``A`` moves with a constant only by ``sum Q_S``, so the first token's weight is
    held at 0."""
    theta = np.zeros(len(linear))
    sign = SIGNS[below]

    def objective(values: np.ndarray) -> float:
        return log_partition(values, choices) - linear @ values

    law, hessian = softmax_law(theta, choices)
    here, steps = objective(theta), 0
    while kkt_residual(theta, law, linear, tokens, below) > KKT_TOLERANCE and steps < MAX_STEPS:
        gradient = law - linear
        if sign:  # held at the bound: weights there whose gradient would push them further out
            at_bound = sign * theta[tokens] <= 0.0
            held = at_bound & (sign * gradient[tokens] > 0.0)
            if at_bound.any() and not held.any():  # the gauge: one weight at the bound stays there
                held[np.flatnonzero(at_bound)[np.argmax(sign * gradient[tokens][at_bound])]] = True
            free = tokens[~held]
        else:
            free = tokens[1:]
        block = hessian[np.ix_(free, free)]
        direction = np.linalg.lstsq(block, gradient[free], rcond=None)[0]
        flat = gradient[free] - block @ direction  # the gradient's part where A is flat (a shift)
        limits = sign * flat > 0
        if sign and limits.any() and np.abs(flat).sum() > FLAT_FLOOR:
            # no weight at the bound, and the objective falls linearly along -flat: go to the bound
            direction = flat * np.min(theta[free][limits] / flat[limits])
        size = 1.0
        while True:
            trial = theta.copy()
            trial[free] -= size * direction
            if sign:
                trial = np.maximum(sign * trial, 0.0) * sign  # projected onto the constraint
            value = objective(trial)
            if value <= here + ROUNDING * (1.0 + abs(here)) or size < 1e-12:
                break
            size /= 2
        theta, here = trial, value
        law, hessian = softmax_law(theta, choices)
        steps += 1
    return theta, steps, kkt_residual(theta, law, linear, tokens, below)


def softmax_rule(p: np.ndarray, q: np.ndarray, k: int, sampling: str = "without_replacement") -> dict:
    """The softmax rule of one instance (module docstring): the optimum ``alpha``, the cut ``H``, the
    weights ``theta`` of both sides, the most Newton steps, the largest KKT residual, the share of
    tokens at their bound, and the draft sets."""
    solution = prefix_scan(p, q, k, sampling)
    H = {int(a) for a in solution.cut}
    U = set(range(len(p))) - H
    sets = draft_sets(list(q), k, LAWS[sampling])
    theta = np.zeros(len(p))
    steps, residual, bound, counted = 0, 0.0, 0, 0
    for side, whole in ((U, False), (H, True)):
        choices = side_choices(sets, side, whole)
        if not choices:
            continue
        tokens = np.unique(np.concatenate([members for members, _ in choices]))
        side_theta, side_steps, side_residual = minimise(choices, p, tokens, below=not whole)
        theta[tokens] = side_theta[tokens]
        steps, residual = max(steps, side_steps), max(residual, side_residual)
        bound, counted = bound + int(np.sum(side_theta[tokens] == 0.0)), counted + len(tokens)
    return {"alpha": float(solution.value), "H": H, "theta": theta, "steps": steps, "residual": residual,
            "at bound": bound / max(counted, 1), "sets": sets}


def selection_law(rule: dict, priority: bool = True) -> np.ndarray:
    """The law of the rule over the draft sets: a member of ``U`` whenever the set has one, softmax
    within (``priority``); or softmax over the whole set (the broken ingredient)."""
    theta, H = rule["theta"], rule["H"]
    x = np.zeros(len(theta))
    for members, mass in rule["sets"].items():
        pool = members if not priority or members <= H else members - H
        pool = np.array(sorted(pool))
        weights = np.exp(theta[pool] - theta[pool].max())
        x[pool] += mass * weights / weights.sum()
    return x


def instance_row(p: np.ndarray, q: np.ndarray, k: int, priority: bool = True,
                 sampling: str = "without_replacement") -> dict:
    """One instance: the rule's acceptance (canonical check against its own law) against ``alpha*``,
    and the programs' steps, residual, weights' spread and share at the bound."""
    rule = softmax_rule(p, q, k, sampling)
    acceptance = float(np.minimum(p, selection_law(rule, priority)).sum())
    return {"V": len(p), "k": k, "alpha": rule["alpha"], "acceptance": acceptance, "gap": rule["alpha"] - acceptance,
            "steps": rule["steps"], "residual": rule["residual"], "spread": float(np.ptp(rule["theta"])),
            "at bound": rule["at bound"]}


def instances(count: int, seed: int):
    """``count`` instances ``(p, q, k)`` with ``V >= 4`` and ``k = 3..min(V - 1, 5)``."""
    rng = np.random.default_rng(seed)
    while count:
        p, q = instance(rng)
        if len(p) >= 4:
            count -= 1
            yield p, q, int(rng.integers(3, min(len(p) - 1, 5) + 1))


def summary(rows: list[dict]) -> str:
    """The markdown table of the module docstring."""
    gaps = np.array([abs(r["gap"]) for r in rows])
    cells = [len(rows), f"{gaps.max():.1e}", f"{np.median(gaps):.1e}", int(np.sum(gaps > 1e-12)),
             f"{max(r['residual'] for r in rows):.1e}", max(r["steps"] for r in rows),
             f"{max(r['spread'] for r in rows):.1f}", f"{np.mean([r['at bound'] for r in rows]):.2f}"]
    header = ["instances", "largest gap to alpha*", "median gap", "short of alpha* by > 1e-12",
              "largest KKT residual (L1)", "most Newton steps", "largest spread of theta", "share of weights at 0"]
    return "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
                      "| " + " | ".join(str(c) for c in cells) + " |"])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-priority", action="store_true", help="use the weights over whole sets (broken)")
    parser.add_argument("--sampling", choices=list(LAWS), default="without_replacement",
                        help="the draft law (Lemma 16 holds for any)")
    args = parser.parse_args(argv)
    start, rows = time.time(), []
    for i, (p, q, k) in enumerate(instances(args.instances, args.seed)):
        rows.append(instance_row(p, q, k, priority=not args.no_priority, sampling=args.sampling))
        if (i + 1) % 250 == 0:
            print(f"{i + 1} of {args.instances} instances, {time.time() - start:.0f} s", file=sys.stderr, flush=True)
    print(summary(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
