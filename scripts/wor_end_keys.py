"""A run's two end keys from one rank's residual each, with what every step before it left in three
accumulated polynomials (docs/optimal-verifier.md, section 8, "End keys from one rank's residual").

Lemma 15: while the nesting raises a run ``[f, t]`` at level ``s``, the remaining flux at its end cuts
is ``rem(f + 1) = y_f - (1 - s) sigma_f`` and ``rem(t) = (1 - s) sigma_t - y_t``, where ``y = x -
sum_A theta_A l^A`` is the residual: ``x`` less what every step ``A`` so far of the runs holding the
rank selected there (``theta_A`` times the lowest-member law ``l^A`` of its run ``[f_A, t_A]``). So an
end key reads two ranks, not the flux over the run's cuts. On the clock nodes the ancestors' part of
``y`` at ``c = f`` or ``c = t`` is a contraction of three polynomials per node, summed over the steps,

    P1 = sum theta_A g_A E(L_A) E(R_A),  P2 = sum theta_A g_A D(L_A) E(R_A),  P3 = sum theta_A g_A E(L_A) D(R_A),

with ``L_A = [0, f_A)``, ``R_A = (t, t_A]`` and ``g_A = e^{-s q([f_A, f) and above t_A)}``, against the
polynomials of ``(c, t]``: a new step adds to ``P1`` and ``P2`` (``O(N k)``), a peel at the left
multiplies all three by the rank's ``e^{-q s}``, one at the right multiplies them by its factor
(``P3`` takes ``q e^{-q s} P1`` besides), and ``(f, t]`` and ``[f, t)``, which the end masses need
too, come from a queue of products with removals at both ends (two stacks). That is the state a
compiled nesting at the real vocabulary would keep; here it is numpy, beside the flux bookkeeping of
``scripts/wor_end_peel.py``, which still searches the splits.

Per corpus row cut to its ``--top`` likeliest tokens and ``k`` in ``--ks``, on the longest run of flux
below the cut: the end-peeling nesting with its ends read this way, the largest gap between these
ends' remaining flux and the flux bookkeeping's (relative to the cut's flux), the levels equal to the
construction's within ``SAME_LEVEL``, both certificates, and the products per step (ranks multiplied
in and polynomial products, the queue's rebuilds included). Seconds a row at 1,000 tokens:

    python scripts/wor_end_keys.py --corpus DIR [--positions 8] [--top 1000] [--ks 3]
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from wor_end_peel import SHORTEST_RUN, FluxEnds, beside_construction, end_peel, realised_gap  # noqa: E402
from wor_nesting_spine import RunMasses, corpus_parser, cut_rows, longest_run, print_rows, selection_by_rank  # noqa: E402


class Clocks:
    """A row's clock nodes and each rank's factors: ``E`` and ``D`` of one rank (``e^{-q s} + x (1 -
    e^{-q s})`` and ``q e^{-q s}``), and groups grown by a rank or joined, counted in :attr:`work`."""

    def __init__(self, masses):
        from otm.rules.wor_clock_masses import _coefficient, _product

        self.masses, self.k, self.s, self.w, self.q = masses, masses.k, masses.s, masses.w, masses.q
        self.product, self.coefficient = _product, _coefficient
        self.work = 0

    def none(self, r: int) -> np.ndarray:
        return np.exp(-self.q[r] * self.s)

    def grown(self, E: np.ndarray, D: np.ndarray, r: int) -> tuple[np.ndarray, np.ndarray]:
        """``(E, D)`` of a group with rank ``r`` added."""
        from otm.rules.wor_clock_masses import with_token

        self.work += 1
        return with_token(E, D, self.q[r], self.none(r), -np.expm1(-self.q[r] * self.s))

    def joined(self, low: tuple, high: tuple) -> tuple[np.ndarray, np.ndarray]:
        """``(E, D)`` of two disjoint groups together: ``E1 E2`` and ``D1 E2 + E1 D2``."""
        self.work += 1
        (E1, D1), (E2, D2) = low, high
        return self.product(E1, E2, self.k), self.product(D1, E2, self.k) + self.product(E1, D2, self.k)

    def empty(self) -> tuple[np.ndarray, np.ndarray]:
        E = np.zeros((self.s.size, self.k))
        E[:, 0] = 1.0
        return E, np.zeros_like(E)

    def rank(self, r: int) -> tuple[np.ndarray, np.ndarray]:
        return self.grown(*self.empty(), r)

    def prefix(self, f: int) -> tuple[np.ndarray, np.ndarray]:
        """``(E, D)`` of ``[0, f)`` (the masses' checkpointed prefixes, copied)."""
        E, D = self.masses._prefix(f)
        return E.copy(), D.copy()


class ProductQueue:
    """``(E, D)`` of a range ``[lo, hi]`` with ranks removed at either end and put back: the products
    ``[i, mid]`` (a left stack) and ``[mid + 1, i]`` (a right one), built once around a middle rank
    ``mid``; a range the products cover, with ranks on both sides of ``mid``, is read off them, any
    other is rebuilt around its own middle (each rank is multiplied in ``O(1)`` times amortised while
    ranks are removed, and nothing is ever divided out: ``e^{-q s}`` underflows at the late nodes)."""

    def __init__(self, clocks: Clocks):
        self.clocks, self.lo, self.hi, self.mid = clocks, 0, -1, -1
        self.left: list = []  # left[i]: [mid - i, mid]
        self.right: list = []  # right[i]: [mid + 1, mid + 1 + i]

    def at(self, f: int, t: int) -> None:
        """Holds ``[f, t]`` (at least two ranks)."""
        if not (self.mid - len(self.left) < f <= self.mid < t <= self.mid + len(self.right)):
            self.build(f, t)
        self.lo, self.hi = f, t

    def build(self, f: int, t: int) -> None:
        """The products of ``[f, t]`` around its middle rank."""
        self.lo, self.hi, self.mid = f, t, (f + t) // 2
        self.left, self.right = [], []
        group = self.clocks.empty()
        for r in range(self.mid, f - 1, -1):
            group = self.clocks.grown(*group, r)
            self.left.append(group)
        group = self.clocks.empty()
        for r in range(self.mid + 1, t + 1):
            group = self.clocks.grown(*group, r)
            self.right.append(group)

    def range_of(self, a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        """``(E, D)`` of ``[a, b]`` for ``lo <= a <= mid + 1`` and ``mid <= b <= hi``."""
        low = self.left[self.mid - a] if a <= self.mid else None
        high = self.right[b - self.mid - 1] if b > self.mid else None
        if low is None or high is None:
            return high if low is None else low
        return self.clocks.joined(low, high)

    def left_parts(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """``(E, D)`` stacked (``[hi - lo + 1, N, k]``) of ``(c, mid]`` for ``c = lo..hi`` (``hi <=
        mid``; empty at ``mid``): with :meth:`right_part`, the products of ``(c, hi]``."""
        empty = self.clocks.empty()
        parts = [self.left[self.mid - c - 1] if c < self.mid else empty for c in range(lo, hi + 1)]
        return np.stack([E for E, _ in parts]), np.stack([D for _, D in parts])

    def right_part(self) -> tuple[np.ndarray, np.ndarray]:
        """``(E, D)`` of ``[mid + 1, hi]``."""
        return self.right[self.hi - self.mid - 1]

    def without_first(self) -> tuple[np.ndarray, np.ndarray]:
        """``(E, D)`` of ``(lo, hi]``."""
        return self.range_of(self.lo + 1, self.hi)

    def without_last(self) -> tuple[np.ndarray, np.ndarray]:
        """``(E, D)`` of ``[lo, hi)``."""
        return self.range_of(self.lo, self.hi - 1)


class Residuals:
    """``P1, P2, P3`` (``[N, k]`` each, module docstring) of the steps of a chain, positioned at a run
    ``(f, t)``: :meth:`step` adds a step's term, :meth:`moved` peels to a run inside."""

    def __init__(self, clocks: Clocks, f: int, t: int):
        self.clocks, self.f, self.t = clocks, f, t
        shape = (clocks.s.size, clocks.k)
        self.P = [np.zeros(shape), np.zeros(shape), np.zeros(shape)]

    def copy(self) -> "Residuals":
        other = Residuals(self.clocks, self.f, self.t)
        other.P = [P.copy() for P in self.P]
        return other

    def moved(self, f: int, t: int, right: tuple | None = None) -> "Residuals":
        """Peeled from ``(self.f, self.t)`` to ``(f, t)`` inside it: the ranks peeled at the left join
        every ``g_A`` (none of their clocks rings: one factor ``e^{-s q([self.f, f))}``), those at the
        right every ``R_A``, rank by rank or, where ``right`` gives the ``(E, D)`` of ``(t,
        self.t]``, at once."""
        clocks, (P1, P2, P3) = self.clocks, self.P
        if f > self.f:
            gap = np.exp(-clocks.q[self.f:f].sum() * clocks.s)[:, None]
            P1, P2, P3 = P1 * gap, P2 * gap, P3 * gap
            clocks.work += 1
        if right is not None and t < self.t:
            P1, P3 = clocks.joined((P1, P3), right)
            P2 = clocks.product(P2, right[0], clocks.k)
        else:
            for r in range(self.t, t, -1):
                P1, P3 = clocks.grown(P1, P3, r)
                P2 = clocks.grown(P2, np.zeros_like(P2), r)[0]
        self.P, self.f, self.t = [P1, P2, P3], f, t
        return self

    def step(self, f: int, t: int, theta: float) -> "Residuals":
        """Moved to ``(f, t)`` and raised by ``theta`` there: ``L = [0, f)``, ``R`` empty, ``g =
        e^{-s q(above t)}``."""
        self.moved(f, t)
        E0, D0 = self.clocks.prefix(f)
        weight = (theta * np.exp(-self.clocks.masses._above[t] * self.clocks.s))[:, None]
        self.P[0] = self.P[0] + weight * E0
        self.P[1] = self.P[1] + weight * D0
        self.clocks.work += 1
        return self

    def selected(self, c: int, rest: tuple | None) -> float:
        """``sum_A theta_A l^A_c`` at a rank ``c`` of the run, ``rest`` the ``(E, D)`` of ``(c, t]``
        (``None`` at ``c = t``)."""
        E, D = rest if rest is not None else self.clocks.empty()
        return float(self.selected_at(np.array([c]), E[None], D[None])[0])

    def selected_at(self, ranks: np.ndarray, E: np.ndarray, D: np.ndarray, right: tuple | None = None) -> np.ndarray:
        """``sum_A theta_A l^A_c`` at the ``ranks`` ``c`` of the run: nothing of ``[f, c)`` rings, and
        ``c`` rings ``k``-th with the others in ``L_A``, ``(c, t]`` or ``R_A``, or it rang before and one
        of those rings ``k``-th. ``(E, D)`` (``[len(ranks), N, k]``) are the products of ``(c, t]``, or
        of ``(c, b)`` where ``right`` is the ``(E, D)`` of ``[b, t]``, the same for every rank (taken
        into the accumulators once)."""
        clocks, k = self.clocks, self.clocks.k
        P1, P23 = self.P[0], self.P[1] + self.P[2]
        if right is not None:
            B1 = clocks.product(right[0], P1, k)
            B2 = clocks.product(right[0], P23, k) + clocks.product(right[1], P1, k)
        else:
            B1, B2 = P1, P23
        below = np.concatenate([[0.0], np.cumsum(clocks.q[self.f:int(ranks.max())])])[ranks - self.f]
        gap = np.exp(-np.outer(below, clocks.s))
        q = clocks.q[ranks][:, None]
        none, some = np.exp(-q * clocks.s), -np.expm1(-q * clocks.s)
        rings_last = clocks.coefficient(E, B1, k - 1)
        rang_before = clocks.coefficient(E, B2, k - 2) + clocks.coefficient(D, B1, k - 2)
        return (gap * (q * none * rings_last + some * rang_before)) @ clocks.w


def end_mass(clocks: Clocks, f: int, low: tuple, high: tuple, t: int) -> float:
    """The mass across the cut between ``low = [f, j)`` and ``high = [j, t]`` of the run ``[f, t]``
    (every draft at or below ``t``, one in each): ``[x^(k-1)] (D0 N1 N2 + D1 E0 N2 + D2 E0 N1)``,
    ``[0, f)`` the group ``0`` (as :meth:`otm.rules.wor_clock_masses.ClockSetMasses.across`)."""
    k = clocks.k
    E0, D0 = clocks.prefix(f)
    (E1, D1), (E2, D2) = low, high
    N1, N2 = E1.copy(), E2.copy()
    N1[:, 0] = N2[:, 0] = 0.0
    integrand = (clocks.coefficient(clocks.product(D0, N1, k), N2, k - 1)
                 + clocks.coefficient(clocks.product(D1, E0, k), N2, k - 1)
                 + clocks.coefficient(clocks.product(D2, E0, k), N1, k - 1))
    return float((integrand * np.exp(-clocks.masses._above[t] * clocks.s)) @ clocks.w)


def end_remainders(residuals: Residuals, queue: ProductQueue, x: np.ndarray, sigma: np.ndarray, level: float) -> tuple:
    """``((rem, mass) at cut f + 1, (rem, mass) at cut t)`` of the run ``[f, t]`` that ``residuals``
    and ``queue`` hold, at ``level`` (Lemma 15)."""
    clocks, f, t = residuals.clocks, residuals.f, residuals.t
    above, below = queue.without_first(), queue.without_last()
    y_f = x[f] - residuals.selected(f, above)
    y_t = x[t] - residuals.selected(t, None)
    return ((y_f - (1 - level) * sigma[f], end_mass(clocks, f, clocks.rank(f), above, t)),
            ((1 - level) * sigma[t] - y_t, end_mass(clocks, f, below, clocks.rank(t), t)))


class ResidualEnds:
    """The ends of :func:`wor_end_peel.end_peel` by Lemma 15 (module docstring): the residual of the
    two end ranks from :class:`Residuals`, the end masses from the queue's ``(f, t]`` and ``[f, t)``.
    The accumulators after each step of the last chain are kept, so a chain that shares a prefix
    with it (the next step, a child after a split, an undo) starts from there. ``gap`` keeps, per
    step, the largest gap between these ends' remaining flux and :class:`FluxEnds`'s, relative to
    the cut's flux (the flux bookkeeping runs beside, for the splits)."""

    def __init__(self, masses, flux: np.ndarray, run_masses: RunMasses):
        self.clocks = Clocks(masses)
        self.sigma, self.x = selection_by_rank(masses, flux)
        self.flux, self.queue = flux, ProductQueue(self.clocks)
        self.beside = FluxEnds(flux, run_masses)
        self.kept: list = []  # (step, Residuals after it) along the last chain
        self.gap = 0.0

    def _residuals(self, chain: list, f: int, t: int) -> Residuals:
        """The accumulators of ``chain``'s steps, positioned at ``[f, t]``."""
        shared = len(self.kept) if len(self.kept) <= len(chain) and (not self.kept or self.kept[-1][0] is chain[len(self.kept) - 1]) else 0
        if not shared:
            while shared < min(len(self.kept), len(chain)) and self.kept[shared][0] is chain[shared]:
                shared += 1
        del self.kept[shared:]
        state = self.kept[-1][1] if self.kept else Residuals(self.clocks, *(chain[0][:2] if chain else (f, t)))
        for step in chain[shared:]:
            state = state.copy().step(step[0], step[1], step[2])
            self.kept.append((step, state))
        return state.copy().moved(f, t)

    def ends(self, f: int, t: int, level: float, chain: list, log: list, carried: np.ndarray) -> tuple:
        """``((rem, mass) at cut f + 1, (rem, mass) at cut t)`` (Lemma 15)."""
        self.queue.at(f, t)
        ends = end_remainders(self._residuals(chain + log, f, t), self.queue, self.x, self.sigma, level)
        for (mine, _), (theirs, _), cut in zip(ends, self.beside.ends(f, t, level, chain, log, carried), (f + 1, t)):
            self.gap = max(self.gap, abs(mine - theirs) / self.flux[cut])
        return ends


def row_table(p: np.ndarray, q: np.ndarray, k: int) -> dict | None:
    """The end-peeling nesting with Lemma 15's ends on the longest run of flux below the cut, against
    the construction's levels (``None`` where no run is :data:`SHORTEST_RUN` ranks long)."""
    found = longest_run(p, q, k, SHORTEST_RUN)
    if found is None:
        return None
    exact, flux, run, masses = found
    run_masses = RunMasses(masses)
    ends = ResidualEnds(masses, flux, run_masses)
    peeled, stats = end_peel(flux, run, run_masses, ends=ends)
    mine, same = beside_construction(exact, peeled, run)
    return {"run": run, "stats": stats, "gap": ends.gap, "work": ends.clocks.work, "same": same,
            "certificates": [realised_gap(masses, levels, ends.x) for levels in (exact, mine)]}


def main(argv=None) -> int:
    args = corpus_parser(__doc__.split("\n\n")[0], positions=8, top=1000).parse_args(argv)
    ks = [int(k) for k in args.ks.split(",")]
    rows = cut_rows(args)
    print(f"{len(rows)} rows cut to {args.top} tokens, k = {args.ks}: the exact levels, then the end-peeling "
          "nesting with Lemma 15's ends; seconds a row at 1,000 tokens", file=sys.stderr, flush=True)

    def cells(p, q, k):
        row = row_table(p, q, k)
        if row is None:
            return None
        length = row["run"][1] - row["run"][0]
        built, keyed = row["certificates"]
        return [str(length), str(row["stats"]["splits"]), f"{row['gap']:.1e}", f"{row['same']} of {length}",
                f"{built:.1e} / {keyed:.1e}", f"{row['work'] / row['stats']['steps']:.1f}"]

    print_rows(rows, ks, ["run (ranks)", "splits", "largest gap to the flux's ends", "levels the same",
                          "certificate: construction / Lemma 15's ends", "products per step"], cells, SHORTEST_RUN)
    return 0


if __name__ == "__main__":
    sys.exit(main())
