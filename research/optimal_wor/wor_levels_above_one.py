"""Where float64 water levels above 1 come from on real rows (research/optimal_wor/JOURNAL.md,
"Levels above 1 by rounding"; docs/optimal-verifier.md#floats-and-certificates).

In exact arithmetic every water level lies in ``[0, 1]`` (Theorem 5). In float64 a few come
out above 1 on rows with tiny draft probabilities (``T = 0.6``); the rule sets them to 1 and
certifies the law the levels realise. This script shows, per corpus row cut to its ``--top``
likeliest tokens, the float64 construction's levels twice: with the minimal flux as the rule
computes it (a flux of at most 8 unit roundoffs dropped, ``otm.rules.optimal_wor``'s
``_minimal_flux``) and with the raw walks (nothing dropped), and for the largest level its cut,
that cut's flux, the largest flux dropped at a cut within 3 ranks below it, the last run of the
nesting around the cut (its ends are the nearest cuts of lower level), that run's mass across
the cut, and the remainder of the cut's flux that its last raise carried (the raise times the
mass):

    python -m research.optimal_wor.wor_levels_above_one --corpus DIR --positions 8 --top 400 --k 3 --temperature 0.6
    python -m research.optimal_wor.wor_levels_above_one --corpus DIR --positions 8 --top 2000 --k 2 --temperature 0.6

``DIR`` from ``otm corpus --pair qwen2.5-coder``. ``--k 2`` takes the pair masses (``O(1)`` each),
``--k 3`` and more the compiled clock integral's (seconds per row at 400 tokens).
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from otm.corpus import Corpus
from otm.formulations.prefix_scan import ratio_order
from otm.rules import water_levels
from research.optimal_wor.wor_pair_rules import likeliest

UNIT = float(np.finfo(np.float64).eps)
#: A level counts as above 1 past the rule's own tolerance (``water_levels.construction._construct``).
ABOVE_ONE = 1 + 4096 * UNIT


def row_masses(qs: list, k: int):
    """``(masses, sigma)`` of the water levels for ``k`` drafts without replacement."""
    if k == 2:
        return water_levels.pair.pair_masses(qs, 0.0)
    from decoding.verifiers.optimal.clock_masses import CompiledClockSetMasses

    masses = CompiledClockSetMasses(np.asarray(qs, dtype=np.float64), k)
    return masses, [float(v) for v in masses.sigma]


def raw_flux(ps: list, sigma: list, m: int) -> list:
    """The minimal flux's two walks with nothing dropped (zero at the cut ``m``)."""
    n = len(ps)
    flux = [0.0] * (n + 1)
    for a in range(n - 1, m - 1, -1):
        flux[a] = max(0.0, flux[a + 1] - (ps[a] - sigma[a]))
    for a in range(m):
        flux[a + 1] = max(0.0, flux[a] + (ps[a] - sigma[a]))
    flux[m] = 0.0
    return flux


def float_levels(masses, flux: list, m: int) -> np.ndarray:
    levels = [0.0] * len(flux)
    for lo, hi in ((m, len(flux) - 2), (0, m - 1)):
        water_levels.construction._nest(masses, flux, lo, hi, levels, UNIT)
    return np.asarray(levels)


def last_run(masses, levels: np.ndarray, cut: int) -> tuple[int, int, float, float]:
    """``(f, t, mass, carried)``: the last run raised over ``cut`` (ranks between the nearest
    cuts of lower level on either side), its mass across ``cut``, and what its last raise
    carried there (from the higher of those two levels up to the cut's)."""
    lower = np.flatnonzero(levels < levels[cut])
    left, right = lower[lower < cut], lower[lower > cut]
    f = int(left.max()) if left.size else 0
    t = int(right.min()) - 1 if right.size else len(levels) - 2
    base = max(levels[f] if left.size else 0.0, levels[t + 1] if right.size else 0.0)
    mass = float(masses.across(f, cut, t))
    return f, t, mass, (levels[cut] - base) * mass


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--positions", type=int, default=8)
    parser.add_argument("--top", type=int, default=400)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--temperature", type=float, default=0.6)
    args = parser.parse_args(argv)
    print(f"{args.positions} corpus rows at temperature {args.temperature}, cut to {args.top} tokens, k = {args.k}; "
          f"{'seconds per row' if args.k > 2 else 'well under a second per row'}", file=sys.stderr)
    print("| text | position | cuts with flux dropped | levels above 1 (flux as the rule has it) | largest level | its cut "
          "| its flux | largest flux dropped within 3 ranks below | its last run | that run's mass across it "
          "| remainder its last raise carried | levels above 1 (nothing dropped) | largest level |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for text, position, p, q in Corpus(args.corpus).spaced_rows(args.positions, args.temperature):
        p, q = likeliest(p, q, args.top)
        order = ratio_order(p, q)[:int((q > 0).sum())]
        ps, qs = [float(p[t]) for t in order], [float(q[t]) for t in order]
        masses, sigma = row_masses(qs, args.k)
        f = np.concatenate([[0.0], np.cumsum(ps)]) + 1 - np.concatenate([[0.0], np.cumsum(sigma)])
        m = int(np.argmin(f))  # the first minimiser, as the rule's
        dropped = water_levels.construction._minimal_flux(ps, sigma, m, 0.0, UNIT)
        raw = raw_flux(ps, sigma, m)
        with_drop, without = float_levels(masses, dropped, m), float_levels(masses, raw, m)
        cut = int(np.argmax(with_drop))
        near = max((raw[j] for j in range(max(0, cut - 3), cut) if dropped[j] != raw[j]), default=0.0)
        f, t, mass, carried = last_run(masses, with_drop, cut)
        print(f"| {text} | {position} | {sum(a != b for a, b in zip(raw, dropped))} | {int((with_drop > ABOVE_ONE).sum())} "
              f"| {with_drop.max():.3g} | {cut} | {dropped[cut]:.2e} | {near:.2e} | [{f}, {t}] | {mass:.2e} "
              f"| {carried:.2e} | {int((without > ABOVE_ONE).sum())} "
              f"| {without.max():.3g} |", flush=True)


if __name__ == "__main__":
    main()
