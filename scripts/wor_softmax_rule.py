"""Softmax selection rules attain the optimum without replacement, to the precision of a convex fit
(docs/optimal-verifier.md, section 8, "A second optimal rule: softmax weights", Lemma 16).

Lemma 16: a rule that selects the member ``a`` of a drafted set ``S`` with probability ``exp(theta_a) /
sum_{b in S} exp(theta_b)`` has the selection law ``x(theta) = grad A(theta)``, ``A(theta) = sum_S Q_S
log sum_{b in S} exp(theta_b)``, and these laws are exactly the relative interior of the set ``P =
sum_S Q_S Delta(S)`` of every rule's law. So where an optimal law lies inside ``P`` on each side of
the optimal cut, a softmax rule per side (a member of ``U`` selected whenever the set has one) attains
``alpha*(p, Q_wor)``, at ``O(k)`` per drafted set once ``theta`` is known.

Per random instance (``wor_pair_rules.instance``: 4 to 8 tokens, every ``q >= 1e-3``; ``k = 3`` to
``min(V - 1, 5)`` drafts without replacement, float64, every draft set enumerated): on each side the
optimal law deepest inside ``P`` (:func:`deepest_optimal_law`, a linear program: the largest ``t``
with every set's choice probabilities at least ``t``, ``x <= p`` on ``U``, ``x >= p`` on ``H``), the
weights fitted to it by Newton's method on ``A(theta) - <x*, theta>`` (:func:`fit`), and the fitted
rule's acceptance ``sum min(p, x(theta))`` against ``alpha*`` (the prefix scan). With
``--no-priority`` the fitted weights are used over each whole set, ``U`` and ``H`` members together:
a broken ingredient, which the table shows short of ``alpha*``. About 10 s for 300 instances:

    python scripts/wor_softmax_rule.py [--instances 300] [--seed 0] [--no-priority]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy.optimize import linprog

sys.path.insert(0, str(Path(__file__).resolve().parent))

from wor_pair_rules import instance  # noqa: E402

from otm.draft_laws import without_replacement_law  # noqa: E402
from otm.formulations.prefix_scan import prefix_scan  # noqa: E402

#: Newton's method stops when the fitted law is this close to its target (L1).
FIT_TOLERANCE = 1e-14

#: A Newton step is taken when the objective rises by at most this much, relative: the rounding of
#: its sums, which near the minimum hides the step's true decrease.
ROUNDING = 1e-15

#: At most this many Newton steps per side.
MAX_STEPS = 100


def draft_sets(q: np.ndarray, k: int) -> dict:
    """``{frozenset of token ids: P(S = set)}`` for ``k`` drafts without replacement, in float64."""
    law = without_replacement_law(q, k)
    sets: dict = {}
    for tuple_, mass in zip(law.tuples, law.probs):
        key = frozenset(int(a) for a in tuple_)
        sets[key] = sets.get(key, 0.0) + float(mass)
    return sets


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


def deepest_optimal_law(choices, p: np.ndarray, below: bool) -> tuple[np.ndarray, float]:
    """``(x*, t)``: a law of the choices with ``x* <= p`` (``below``, the side ``U``) or ``x* >= p``
    (``H``) in which every member of every set is chosen with probability at least ``t`` (at most 1),
    ``t`` as large as possible; ``t > 0`` puts ``x*`` inside ``P``. The variables are the choice
    probabilities within each set (so the program is scaled alike whatever the sets' masses), each
    set's rescaled to sum to 1 after the solve. Raises ``ValueError`` where no such law exists (not
    an optimal cut)."""
    columns = [(i, a) for i, (members, _) in enumerate(choices) for a in members]
    owner = np.array([i for i, _ in columns])
    token = np.array([a for _, a in columns])
    mass = np.array([m for _, m in choices])
    size = len(columns) + 1  # the last variable is t
    equal = np.zeros((len(choices), size))
    equal[owner, np.arange(len(columns))] = 1.0
    sign = 1.0 if below else -1.0
    tokens = np.unique(token)
    limits = np.zeros((len(tokens), size))
    limits[np.searchsorted(tokens, token), np.arange(len(columns))] = sign * mass[owner]
    floors = np.zeros((len(columns), size))  # t <= c_(S, a)
    floors[np.arange(len(columns)), np.arange(len(columns))] = -1.0
    floors[:, -1] = 1.0
    objective = np.zeros(size)
    objective[-1] = -1.0
    result = linprog(objective, A_ub=np.vstack([limits, floors]), b_ub=np.concatenate([sign * p[tokens], np.zeros(len(columns))]),
                     A_eq=equal, b_eq=np.ones(len(choices)), bounds=[(0, None)] * (size - 1) + [(None, 1.0)],
                     method="highs")
    if result.status != 0:
        raise ValueError(f"no law of these choices meets p from {'below' if below else 'above'}: {result.message}")
    chances = np.maximum(result.x[:-1], 0.0)
    chances /= np.bincount(owner, weights=chances)[owner]
    x = np.zeros(len(p))
    np.add.at(x, token, mass[owner] * chances)
    return x, float(result.x[-1])


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


def fit(choices, target: np.ndarray, tokens: np.ndarray) -> tuple[np.ndarray, int, float]:
    """``(theta, steps, ||x(theta) - target||_1)``: damped Newton steps on the convex ``A(theta) -
    <target, theta>`` over ``tokens`` (the first one's weight held at 0: ``A`` moves with a constant
    only by ``sum Q_S``), halving a step until the objective does not rise beyond its rounding."""
    theta = np.zeros(len(target))
    free = tokens[1:]

    def objective(values: np.ndarray) -> float:
        return log_partition(values, choices) - target @ values

    steps = 0
    law, hessian = softmax_law(theta, choices)
    while np.abs(law - target)[tokens].sum() > FIT_TOLERANCE and steps < MAX_STEPS:
        gradient = (law - target)[free]
        direction = np.linalg.lstsq(hessian[np.ix_(free, free)], gradient, rcond=None)[0]
        here, size = objective(theta), 1.0
        while True:
            trial = theta.copy()
            trial[free] -= size * direction
            if objective(trial) <= here + ROUNDING * (1.0 + abs(here)) or size < 1e-12:
                break
            size /= 2
        theta = trial
        law, hessian = softmax_law(theta, choices)
        steps += 1
    return theta, steps, float(np.abs(law - target)[tokens].sum())


def fitted_rule(p: np.ndarray, q: np.ndarray, k: int) -> dict:
    """The softmax rule of one instance (module docstring): the optimum ``alpha``, the cut ``H``, the
    weights ``theta`` of both sides, the laws ``target`` they were fitted to, the least margin ``t`` of the two sides' laws, the most Newton
    steps, the largest fit residual, and the draft sets."""
    solution = prefix_scan(p, q, k, "without_replacement")
    H = {int(a) for a in solution.cut}
    U = set(range(len(p))) - H
    sets = draft_sets(q, k)
    theta, aim = np.zeros(len(p)), np.zeros(len(p))
    margin, steps, residual = 1.0, 0, 0.0
    for side, whole in ((U, False), (H, True)):
        choices = side_choices(sets, side, whole)
        if not choices:
            continue
        target, t = deepest_optimal_law(choices, p, below=not whole)
        tokens = np.array(sorted(set().union(*(set(members.tolist()) for members, _ in choices))))
        side_theta, side_steps, side_residual = fit(choices, target, tokens)
        theta[tokens], aim[tokens] = side_theta[tokens], target[tokens]
        margin, steps, residual = min(margin, t), max(steps, side_steps), max(residual, side_residual)
    return {"alpha": float(solution.value), "H": H, "theta": theta, "target": aim, "margin": margin, "steps": steps,
            "residual": residual, "sets": sets}


def selection_law(rule: dict, priority: bool = True) -> np.ndarray:
    """The law of the fitted rule over the draft sets: a member of ``U`` whenever the set has one,
    softmax within (``priority``); or softmax over the whole set (the broken ingredient)."""
    theta, H = rule["theta"], rule["H"]
    x = np.zeros(len(theta))
    for members, mass in rule["sets"].items():
        pool = members if not priority or members <= H else members - H
        pool = np.array(sorted(pool))
        weights = np.exp(theta[pool] - theta[pool].max())
        x[pool] += mass * weights / weights.sum()
    return x


def instance_row(p: np.ndarray, q: np.ndarray, k: int, priority: bool = True) -> dict:
    """One instance: the fitted rule's acceptance (canonical check against its own law) against
    ``alpha*``, that of the law it was fitted to (``target gap``: the linear program's tolerance), and
    the fit's margin, steps and residual."""
    rule = fitted_rule(p, q, k)
    acceptance = float(np.minimum(p, selection_law(rule, priority)).sum())
    aimed = float(np.minimum(p, rule["target"]).sum())
    return {"V": len(p), "k": k, "alpha": rule["alpha"], "acceptance": acceptance, "gap": rule["alpha"] - acceptance,
            "target gap": rule["alpha"] - aimed,
            "margin": rule["margin"], "steps": rule["steps"], "residual": rule["residual"],
            "spread": float(np.ptp(rule["theta"]))}


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
    inside = [r for r in rows if r["margin"] > 0]
    aimed = max(abs(r["target gap"]) for r in rows)
    cells = [len(rows), f"{len(inside)} of {len(rows)}", f"{gaps.max():.1e}", f"{np.median(gaps):.1e}",
             int(np.sum(gaps > 1e-9)), f"{aimed:.1e}", f"{max(r['residual'] for r in rows):.1e}", max(r["steps"] for r in rows),
             f"{max(r['spread'] for r in rows):.1f}"]
    header = ["instances", "optimal law inside P on both sides", "largest gap to alpha*", "median gap",
              "short of alpha* by > 1e-9", "largest gap of the laws fitted to", "largest fit residual (L1)", "most Newton steps", "largest spread of theta"]
    return "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
                      "| " + " | ".join(str(c) for c in cells) + " |"])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-priority", action="store_true", help="use the fitted weights over whole sets (broken)")
    args = parser.parse_args(argv)
    start, rows = time.time(), []
    for i, (p, q, k) in enumerate(instances(args.instances, args.seed)):
        rows.append(instance_row(p, q, k, priority=not args.no_priority))
        if (i + 1) % 50 == 0:
            print(f"{i + 1} of {args.instances} instances, {time.time() - start:.0f} s", file=sys.stderr, flush=True)
    print(summary(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
