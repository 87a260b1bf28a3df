"""Which families of selection rules reach the optimum for two drafts without replacement?

Evidence behind docs/optimal-verifier.md#water-levels-for-drafts-without-replacement (the optimum without replacement, and
the water-level rule for two drafts). For ``k = 2`` a rule is a
probability ``beta[a, b]`` of selecting the first draft when the drafts are ``a`` then
``b``; the pair has probability ``w_a q_b`` with ``w = q / (1 - q)``. Its selection law is

    x_a = sum_b w_a q_b beta[a, b] + sum_b w_b q_a (1 - beta[b, a]),

and the two-step verification against ``x`` accepts with ``sum min(p, x)`` (Khisti et al.
2025, canonical decomposition). For each family below, on random instances, a linear
program finds the family's best ``sum min(p, x)``; the table gives how far it stays below
``alpha*`` (the prefix scan without replacement). Ranks are the ratio order ``p / q``
ascending; ``H`` = ranks below the optimal cut, ``U`` the others.

- ``all``: every ``beta`` (the LP oracle; its gap must be 0).
- ``monotone``: ``beta[a, b]`` nondecreasing in the rank of ``a``, nonincreasing in the
  rank of ``b``.
- ``depth``: the member of higher rank wins, except that it yields to the other when the
  other's rank (same side of the cut) is at least a random depth drawn for it; both draft
  positions alike.
- ``monotone_depth``: depth rules whose depths grow with the rank (the depth of each rank
  stochastically at least the depth of the rank below it, on each side).
- ``exchanges``: the i.i.d. construction's mechanism (Theorem 1) carried over: the first
  draft's column pieces (widths ``w``) and the second draft's row pieces (heights ``q``)
  are exchanged between ranks of a side with their margins kept, the first draft winning
  iff its column's block lies above the second's row block.
- ``floor``: the member of higher rank yields to any lower member of its side with a coin
  of its own (one per draft position).
- ``promotion``: the second draft is lifted above every rank of its side with a coin of
  its own.
- ``pair_fifo`` (a construction, not an LP): the surplus of every rank of ``U`` is moved to
  the slack of lower ranks first in first out, as in the i.i.d. construction, by flipping
  pairs; "gap" is the largest flipped share of a pair's mass above 1 (a flip it cannot make).
- ``shallow_depth`` (a construction): from the top of ``U`` down, a rank whose selection
  (with what the ranks above gave it) exceeds ``p`` yields whole pairs to the ranks just
  below it, nearest first, until it is down to ``p`` (a deterministic depth per rank);
  "gap" is the largest excess over ``p`` left in ``U``.
- ``water_levels`` (a construction: the rule ``optimal_pair_wor``, :mod:`otm.rules.optimal_wor`):
  the minimal flux across the cuts, realised by yields ``min`` of nested water levels;
  "gap" is ``alpha*`` minus its acceptance.

    python -m research.optimal_wor.wor_pair_rules [--instances 2000] [--seed 0]

Three more checks of the water-level rule (its largest water level must not exceed 1 for the
rule to be a rule):

    python -m research.optimal_wor.wor_pair_rules --exact 2000      # exact rationals, V = 2..9
    python -m research.optimal_wor.wor_pair_rules --stress 9000     # hard float rows, V = 3..30
    python -m research.optimal_wor.wor_pair_rules --corpus DIR --positions 64 --top 1000
        # real rows from an ``otm corpus`` directory, cut to their ``--top`` likeliest tokens

And one about what ``L <= 1`` needs: water levels on arbitrary fluxes, not the minimal flux
of a ``p``, against whether any yields in ``[0, 1]`` carry them (an LP):

    python -m research.optimal_wor.wor_pair_rules --any-flux 1500   # exact levels, V = 3..7

Results are in research/optimal_wor/JOURNAL.md, section 8 (about 50 s for the families,
47 s for ``--exact 20000``, 32 s for ``--stress 9000``, a few seconds a row for ``--corpus``
at ``--top 1000``, more where float64 is not accurate enough and 256-bit floats take over).
"""
from __future__ import annotations

import argparse
import sys
import time
from fractions import Fraction

import numpy as np
from scipy.optimize import linprog

from otm.formulations.prefix_scan import prefix_scan, ratio_order
from otm.rules import optimal_wor, water_levels

#: A family "reaches" the optimum on an instance when its LP value is within this of alpha*.
REACH_TOLERANCE = 1e-8


def instance(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A random pair ``(p, q)`` of 3 to 8 tokens (Dirichlet, concentration 0.2, 1 or 3; every
    ``q >= 1e-3`` so that two distinct drafts always exist)."""
    V = int(rng.integers(3, 9))
    p = rng.dirichlet(np.ones(V) * rng.choice([0.2, 1.0, 3.0]))
    q = rng.dirichlet(np.ones(V) * rng.choice([0.2, 1.0, 3.0]))
    q = np.maximum(q, 1e-3)
    return p, q / q.sum()


class Pair:
    """One instance in rank order: ``p, q, w``, pair masses ``P[a, b] = w_a q_b`` (zero
    diagonal), the optimum and its cut ``m`` (ranks ``< m`` form ``H``)."""

    def __init__(self, p: np.ndarray, q: np.ndarray):
        order = ratio_order(p, q)
        self.p, self.q = p[order], q[order]
        self.V = len(p)
        self.w = self.q / (1 - self.q)
        self.P = np.outer(self.w, self.q)
        np.fill_diagonal(self.P, 0.0)
        scan = prefix_scan(p, q, 2, "without_replacement")
        self.optimum, self.m = float(scan.value), int(scan.details["prefix_length"])
        self.side = np.arange(self.V) >= self.m

    def max_ratio_law(self) -> np.ndarray:
        """Selection law of the member of higher rank (``sigma``)."""
        higher = np.arange(self.V)[:, None] > np.arange(self.V)[None, :]
        return (self.P * higher).sum(1) + (self.P.T * higher).sum(1)


def best_acceptance(pair: Pair, base: np.ndarray, effect: np.ndarray, A_ub=None, b_ub=None, A_eq=None, b_eq=None,
                    bounds=None) -> float:
    """``max sum_y min(p_y, x_y)`` over ``x = base + effect @ z`` and the constraints on ``z``."""
    n_z, V = effect.shape[1], pair.V
    cost = np.concatenate([np.zeros(n_z), -np.ones(V)])  # maximise sum t, t <= p, t <= x
    rows = [np.hstack([-effect, np.eye(V)])]
    rhs = [base]
    if A_ub is not None:
        rows.append(np.hstack([A_ub, np.zeros((A_ub.shape[0], V))]))
        rhs.append(b_ub)
    eq = None if A_eq is None else np.hstack([A_eq, np.zeros((A_eq.shape[0], V))])
    z_bounds = bounds if bounds is not None else [(0, 1)] * n_z
    result = linprog(cost, A_ub=np.vstack(rows), b_ub=np.concatenate(rhs), A_eq=eq, b_eq=b_eq,
                     bounds=z_bounds + [(None, float(v)) for v in pair.p], method="highs")
    if result.status != 0:
        raise RuntimeError(f"LP failed: {result.message}")
    return -result.fun


def ordered_effect(pair: Pair, cells) -> np.ndarray:
    """Columns of ``x`` per ``beta[a, b]`` variable, for the listed ordered pairs ``(a, b)``."""
    effect = np.zeros((pair.V, len(cells)))
    for j, (a, b) in enumerate(cells):
        effect[a, j] += pair.P[a, b]
        effect[b, j] -= pair.P[a, b]
    return effect


def family_all(pair: Pair, monotone: bool = False) -> float:
    V = pair.V
    cells = [(a, b) for a in range(V) for b in range(V) if a != b]
    base = pair.P.sum(0)  # beta = 0: the second draft always wins
    index = {cell: j for j, cell in enumerate(cells)}
    rows = []
    if monotone:
        for b in range(V):
            firsts = [a for a in range(V) if a != b]
            for lo, hi in zip(firsts, firsts[1:]):  # beta[lo, b] <= beta[hi, b]
                row = np.zeros(len(cells)); row[index[lo, b]], row[index[hi, b]] = 1, -1; rows.append(row)
        for a in range(V):
            seconds = [b for b in range(V) if b != a]
            for lo, hi in zip(seconds, seconds[1:]):  # beta[a, hi] <= beta[a, lo]
                row = np.zeros(len(cells)); row[index[a, hi]], row[index[a, lo]] = 1, -1; rows.append(row)
    A = np.array(rows) if rows else None
    return best_acceptance(pair, base, ordered_effect(pair, cells), A, np.zeros(len(rows)) if rows else None)


def family_monotone(pair: Pair) -> float:
    return family_all(pair, monotone=True)


def family_depth(pair: Pair, monotone: bool = False) -> float:
    """Variable ``z[c, d]``: probability that ``c``'s depth is ``d`` (``d`` from the bottom of
    its side to ``c - 1``); ``c`` then yields to every ``b`` of rank ``d..c-1``. ``monotone``:
    ``P(D_{c+1} <= b) <= P(D_c <= b)`` for ranks ``c, c + 1`` of one side and every ``b < c``."""
    V, Q = pair.V, pair.P + pair.P.T
    columns, keys = [], []
    for c in range(V):
        for d in range(pair.m if pair.side[c] else 0, c):
            effect = np.zeros(V)
            effect[c] -= Q[c, d:c].sum()
            effect[d:c] += Q[c, d:c]
            columns.append(effect); keys.append((c, d))
    if not columns:
        return float(np.minimum(pair.p, pair.max_ratio_law()).sum())
    index = {key: j for j, key in enumerate(keys)}
    rows = [[1.0 if key[0] == c else 0.0 for key in keys] for c in range(V)]  # sum_d z[c, d] <= 1
    rhs = [1.0] * V
    for c in range(V - 1) if monotone else ():
        if pair.side[c] != pair.side[c + 1]:
            continue
        for b in range(pair.m if pair.side[c] else 0, c):
            row = np.zeros(len(keys))
            for d in range(pair.m if pair.side[c] else 0, b + 1):
                row[index[c + 1, d]] += 1.0
                row[index[c, d]] -= 1.0
            rows.append(row); rhs.append(0.0)
    return best_acceptance(pair, pair.max_ratio_law(), np.array(columns).T, np.array(rows), np.array(rhs),
                           bounds=[(0, None)] * len(keys))


def family_exchanges(pair: Pair) -> float:
    """``M1[y, j]``: width of ``y``'s column pieces in block ``j`` (margins ``w``); ``M2``: height
    of ``y``'s row pieces in block ``j`` (margins ``q``); blocks on the same side as ``y``.
    A column piece in block ``j`` beats the rows of blocks ``< j`` (mass ``C_j`` per width),
    a row piece in block ``j`` the columns of blocks ``<= j`` (``W_{j+1}`` per height)."""
    V, w, q = pair.V, pair.w, pair.q
    C, W = np.concatenate([[0], np.cumsum(q)]), np.concatenate([[0], np.cumsum(w)])
    cells = [(y, j) for y in range(V) for j in range(V) if pair.side[y] == pair.side[j]]
    n = len(cells)
    effect = np.zeros((V, 2 * n))
    A_eq, b_eq = [], []
    for half, (margin, rate) in enumerate(((w, C[:-1]), (q, W[1:]))):
        for i, (y, j) in enumerate(cells):
            effect[y, half * n + i] = rate[j]
        for y in range(V):
            A_eq.append([1.0 if (half2 == half and cell[0] == y) else 0.0 for half2 in (0, 1) for cell in cells]); b_eq.append(margin[y])
            A_eq.append([1.0 if (half2 == half and cell[1] == y) else 0.0 for half2 in (0, 1) for cell in cells]); b_eq.append(margin[y])
    base = -w * q  # the pieces give every x; the pair of a token with itself is not a draw
    return best_acceptance(pair, base, effect, A_eq=np.array(A_eq), b_eq=np.array(b_eq), bounds=[(0, None)] * (2 * n))


def family_floor(pair: Pair) -> float:
    V = pair.V
    effect = np.zeros((V, 2 * V))  # coins: c as first draft (column c), c as second draft (column V + c)
    for c in range(V):
        for b in range(pair.m if pair.side[c] else 0, c):
            effect[c, c] -= pair.P[c, b]; effect[b, c] += pair.P[c, b]
            effect[c, V + c] -= pair.P[b, c]; effect[b, V + c] += pair.P[b, c]
    return best_acceptance(pair, pair.max_ratio_law(), effect)


def family_promotion(pair: Pair) -> float:
    V = pair.V
    effect = np.zeros((V, V))  # coin of b as second draft: beats the first drafts above it on its side
    for b in range(V):
        top = V if pair.side[b] else pair.m
        for a in range(b + 1, top):
            effect[b, b] += pair.P[a, b]; effect[a, b] -= pair.P[a, b]
    return best_acceptance(pair, pair.max_ratio_law(), effect)


def pair_fifo_overflow(pair: Pair) -> float:
    """Largest share ``D / Q`` of a pair ``{i, v}`` (``i < v`` in ``U``) that first-in-first-out
    matching of surplus to slack asks to flip; above 1 the flip does not exist."""
    Q = pair.P + pair.P.T
    e = pair.p - pair.max_ratio_law()
    U = np.arange(pair.m, pair.V)
    slack, surplus = np.maximum(e[U], 0), np.maximum(-e[U], 0)
    G, L = np.concatenate([[0], np.cumsum(slack)]), np.concatenate([[0], np.cumsum(surplus)])
    overlap = np.clip(np.minimum(G[1:, None], L[None, 1:]) - np.maximum(G[:-1, None], L[None, :-1]), 0, None)
    mass = Q[np.ix_(U, U)]
    share = np.where(mass > 0, overlap / np.where(mass > 0, mass, 1.0), 0.0)
    return float(max(share.max(initial=0.0) - 1.0, 0.0))


def family_monotone_depth(pair: Pair) -> float:
    return family_depth(pair, monotone=True)


def shallow_depth_excess(pair: Pair) -> float:
    """Largest ``x - p`` left in ``U`` by the shallowest depths (module docstring)."""
    Q = pair.P + pair.P.T
    x = pair.max_ratio_law()
    for c in range(pair.V - 1, pair.m - 1, -1):
        for b in range(c - 1, pair.m - 1, -1):
            take = min(Q[c, b], max(x[c] - pair.p[c], 0.0))
            x[c] -= take
            x[b] += take
    return float(max((x - pair.p)[pair.m:].max(initial=0.0), 0.0))


FAMILIES = {
    "all": family_all, "monotone": family_monotone, "depth": family_depth, "monotone_depth": family_monotone_depth,
    "exchanges": family_exchanges,
    "floor": family_floor, "promotion": family_promotion,
}


def run(instances: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    gaps = {name: [] for name in [*FAMILIES, "pair_fifo", "shallow_depth", "water_levels"]}
    start = time.perf_counter()
    for i in range(instances):
        raw = instance(rng)
        pair = Pair(*raw)
        for name, family in FAMILIES.items():
            gaps[name].append(pair.optimum - family(pair))
        gaps["pair_fifo"].append(pair_fifo_overflow(pair))
        gaps["shallow_depth"].append(shallow_depth_excess(pair))
        gaps["water_levels"].append(pair.optimum - float(optimal_wor.exact_law(*raw, 2, method="closed_form").acceptance))
        if (i + 1) % 50 == 0:
            print(f"  {i + 1}/{instances} instances ({time.perf_counter() - start:.0f} s)", file=sys.stderr, flush=True)
    return {name: np.array(values) for name, values in gaps.items()}


def exact_instance(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Random exact ``(p, q)``, ``V = 2..9``, integer weights up to a random denominator raised
    to a power 1..3 (so masses span orders of magnitude), zeros in ``p``, ``q > 0``."""
    V = int(rng.integers(2, 10))
    top = int(rng.choice([6, 10, 30, 97]))
    power = rng.integers(1, 4, size=2)
    p = rng.integers(0, top + 1, size=V) ** power[0]
    q = rng.integers(1, top + 1, size=V) ** power[1]
    if p.sum() == 0 or q.max() == q.sum():
        return exact_instance(rng)
    return (np.array([Fraction(int(v), int(p.sum())) for v in p], dtype=object),
            np.array([Fraction(int(v), int(q.sum())) for v in q], dtype=object))


def check_exact(instances: int, seed: int) -> None:
    """The water-level rule in exact rationals: acceptance == the prefix scan, levels <= 1."""
    rng = np.random.default_rng(seed)
    short, largest = 0, Fraction(0)
    for i in range(instances):
        p, q = exact_instance(rng)
        law = optimal_wor.exact_law(p, q, 2, method="closed_form")
        short += law.acceptance != prefix_scan(p, q, 2, "without_replacement").value
        largest = max(largest, max(law.details["levels"]))
        if (i + 1) % 500 == 0:
            print(f"  {i + 1}/{instances} instances", file=sys.stderr, flush=True)
    print(f"exact rationals: {instances} instances, {short} short of alpha*, largest level {float(largest):.6g}")


def check_any_flux(instances: int, seed: int) -> None:
    """Water levels (exact rationals) on random fluxes over one side of random ``q``: how
    often the largest level exceeds 1, split by whether some yields in ``[0, 1]`` carry the
    flux at all (HiGHS: pair flows ``y_bc`` in ``[0, Q_bc]`` summing to ``F(j)`` over every
    cut ``j``)."""
    rng = np.random.default_rng(seed)
    counts = {(carried, above): 0 for carried in (True, False) for above in (True, False)}
    for _ in range(instances):
        n = int(rng.integers(3, 8))
        weights = rng.integers(1, 12, size=n)
        total = int(weights.sum()) + int(rng.integers(0, 20))  # a side: q sums to at most 1
        pair_mass, _ = water_levels.pair._PairMass.of_ranked([Fraction(int(v), total) for v in weights], Fraction(0))
        flux = ([Fraction(0)] + [pair_mass.across(0, j, n - 1) * Fraction(int(rng.integers(1, 30)), 20) for j in range(1, n)]
                + [Fraction(0)])
        levels = [Fraction(0)] * (n + 1)
        water_levels.construction._water_levels(pair_mass, flux, 0, n - 1, levels, 0)
        pairs = [(b, c) for b in range(n) for c in range(b + 1, n)]
        cover = np.array([[1.0 if b < j <= c else 0.0 for b, c in pairs] for j in range(1, n)])
        mass = [float(pair_mass.across(b, c, c) - pair_mass.across(b + 1, c, c)) for b, c in pairs]  # Q_bc
        result = linprog(np.zeros(len(pairs)), A_eq=cover, b_eq=[float(v) for v in flux[1:n]],
                         bounds=[(0.0, m) for m in mass], method="highs")
        counts[(result.status == 0, max(levels) > 1)] += 1
    for carried in (True, False):
        some = "some yields in [0, 1] carry it" if carried else "no yields in [0, 1] carry it"
        print(f"{some}: {counts[(carried, True)]} of {counts[(carried, True)] + counts[(carried, False)]} "
              "fluxes get a water level above 1")


def stress_instance(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Float ``(p, q)``, ``V = 3..30``, hard for floats: Dirichlet with concentrations down to
    0.05, Zipf-like rows, one dominant draft token, ``p`` near ``q``, or two temperatures of
    related logits; ``q`` clipped below at ``1e-12``."""
    V = int(rng.integers(3, 31))
    kind = int(rng.integers(0, 5))
    if kind == 0:
        p = rng.dirichlet(np.ones(V) * rng.choice([0.05, 0.2, 1, 5]))
        q = rng.dirichlet(np.ones(V) * rng.choice([0.05, 0.2, 1, 5]))
    elif kind == 1:
        z = 1.0 / np.arange(1, V + 1) ** rng.uniform(0.5, 3)
        q, p = rng.permutation(z), rng.permutation(z) * rng.uniform(0.5, 1.5, V)
    elif kind == 2:
        q = rng.dirichlet(np.ones(V)) * 0.05
        q[rng.integers(V)] += 0.95
        p = rng.dirichlet(np.ones(V) * 0.5)
    elif kind == 3:
        q = rng.dirichlet(np.ones(V))
        p = q * np.exp(rng.normal(0, 0.5, V))
    else:
        target = rng.normal(0, 3, V)
        temperature = rng.choice([0.3, 1.0, 2.0])
        p, q = np.exp(target / temperature), np.exp((target + rng.normal(0, 1, V)) / temperature)
    q = np.maximum(q / q.sum(), 1e-12)
    return p / p.sum(), q / q.sum()


def check_stress(instances: int, seed: int) -> None:
    """The water-level rule in floats on hard rows: its acceptance against the prefix scan,
    and how often float64 was not accurate enough (redone in wide floats)."""
    rng = np.random.default_rng(seed)
    gap, redone = 0.0, 0
    for i in range(instances):
        p, q = stress_instance(rng)
        law = optimal_wor.exact_law(p, q, 2, method="closed_form")
        redone += law.details["arithmetic"] != "float64"
        gap = max(gap, abs(law.acceptance - prefix_scan(p, q, 2, "without_replacement").value))
        if (i + 1) % 1000 == 0:
            print(f"  {i + 1}/{instances} instances", file=sys.stderr, flush=True)
    print(f"float stress: {instances} instances, largest |acceptance - alpha*| {gap:.2g}, "
          f"redone in {water_levels.construction.FALLBACK_BITS}-bit floats {redone}")


def likeliest(p: np.ndarray, q: np.ndarray, top: int) -> tuple[np.ndarray, np.ndarray]:
    """A real row cut to its ``top`` likeliest tokens by ``p + q``, both laws renormalised."""
    keep = np.argsort(-(p + q))[:top]
    return p[keep] / p[keep].sum(), q[keep] / q[keep].sum()


def check_corpus(directory: str, positions: int, top: int) -> None:
    """The water-level rule on real rows (temperature 1) cut to their ``top`` likeliest tokens."""
    from otm.corpus import Corpus

    rows = Corpus(directory).spaced_rows(positions, 1.0)
    gap, largest, began = 0.0, 0.0, time.perf_counter()
    for done, (_, _, p, q) in enumerate(rows, 1):
        p, q = likeliest(p, q, top)
        law = optimal_wor.exact_law(p, q, 2, method="closed_form")
        gap = max(gap, abs(law.acceptance - prefix_scan(p, q, 2, "without_replacement").value))
        largest = max(largest, float(max(law.details["levels"])))
        print(f"  {done}/{len(rows)} rows ({time.perf_counter() - began:.0f} s)", file=sys.stderr, flush=True)
    print(f"corpus rows: {len(rows)} rows cut to {top} tokens, largest |acceptance - alpha*| {gap:.2g}, largest level {largest:.6g}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--exact", type=int, default=0, metavar="N", help="check the water-level rule on N exact instances")
    parser.add_argument("--stress", type=int, default=0, metavar="N", help="check the water-level rule on N hard float rows")
    parser.add_argument("--corpus", default=None, help="check the water-level rule on rows of this otm corpus")
    parser.add_argument("--any-flux", type=int, default=0, metavar="N", help="water levels on N arbitrary fluxes")
    parser.add_argument("--positions", type=int, default=64)
    parser.add_argument("--top", type=int, default=1000)
    args = parser.parse_args(argv)
    if args.exact:
        check_exact(args.exact, args.seed)
        return
    if args.stress:
        check_stress(args.stress, args.seed)
        return
    if args.corpus:
        check_corpus(args.corpus, args.positions, args.top)
        return
    if args.any_flux:
        check_any_flux(args.any_flux, args.seed)
        return
    print(f"k = 2 drafts without replacement, {args.instances} random instances (V = 3..8), seed {args.seed}; "
          f"about {args.instances * 0.02:.0f} s", file=sys.stderr)
    gaps = run(args.instances, args.seed)
    print("| family | instances short of alpha* (gap > 1e-8) | largest gap |")
    print("|---|---|---|")
    for name, values in gaps.items():
        print(f"| `{name}` | {int((values > REACH_TOLERANCE).sum())} of {len(values)} | {values.max():.2g} |")


if __name__ == "__main__":
    main()
