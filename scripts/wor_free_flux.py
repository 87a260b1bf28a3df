"""How much freedom an optimal rule for drafts without replacement has, and whether it buys a
cheap level structure: the evidence of docs/optimal-verifier.md, section 8, "How free is an
optimal rule's selection law?".

An optimal rule's selection law ``x`` may differ from the minimal flux's only by a slack that sums
to ``1 - alpha*`` on each side of the cut, so its flux lies between the minimal flux ``F_min`` and
``F_min + 1 - alpha*``. Per corpus row (whole rows, the real vocabulary, at ``--temperature``) and
``k`` in ``--ks``, this prints that room, and how far up the ranks of ``H`` a *bottom-peeling
chain* carries the flux: levels that only grow up the ranks (the intervals ``[f, m - 1]``, ``f =
0, 1, ...``, each raised by ``c_f >= 0``), with the flux at each cut chosen as small as the chain
and ``x >= p`` allow. Such levels would cost one pass (:func:`chain_pass`), against the nesting's
``O(len^2)``; the chain fails at the first cut where the flux it must carry would give the ranks
below more slack than the room. Continued past that cut with no more raises it is still a lossless
rule (checked against its own law): the table gives what it loses against ``alpha*``, beside what
``optimal_latent`` loses (``alpha*`` less the i.i.d. optimum). One thread; about 25 s per whole
row at ``k = 3`` and 40 s at ``k = 8`` (a Python loop over the ranks), and the polynomials of ``[j,
m - 1]`` kept at every cut: 2.1-2.4 GB at ``k = 3``, 4.9-5.5 GB at ``k = 8`` on whole Qwen rows:

    python scripts/wor_free_flux.py --corpus DIR [--positions 6] [--ks 3] [--temperature 1]
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from otm.rules.wor_clock_masses import quadrature_nodes, with_token


def _times_rank(P: np.ndarray, none: np.ndarray, some: np.ndarray) -> np.ndarray:
    """``P (none + x some)`` truncated at the degree of ``P`` (``[nodes, k]``)."""
    out = P * none[:, None]
    out[:, 1:] += P[:, :-1] * some[:, None]
    return out


def _times_x(P: np.ndarray, some: np.ndarray) -> np.ndarray:
    """``x some P`` truncated."""
    out = np.zeros_like(P)
    out[:, 1:] = P[:, :-1] * some[:, None]
    return out


def _top(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``[x^(k-1)] A B`` at every node."""
    k = A.shape[1]
    return sum(A[:, i] * B[:, k - 1 - i] for i in range(k))


def chain_pass(q_ranked: np.ndarray, k: int, e: np.ndarray, top: int, stop: bool = True) -> tuple[np.ndarray, np.ndarray, int | None]:
    """The bottom-peeling chain on the ranks ``0..top`` (``H``; ``e = p - sigma`` by rank), in one
    pass: ``(c, F, failed)`` with ``c[f]`` the raise of the interval ``[f, top]``, ``F[j]`` the flux
    at cut ``j`` and ``failed`` the first cut it cannot carry (``None``: every cut). With ``stop``
    false it goes on past that cut with no more raises (``F(j) = G(j)``, the least flux it can
    carry there): a complete rule, whose ``x`` falls short of ``p`` somewhere (:func:`chain_deficit`).

    At cut ``j`` the intervals ``[f, top]``, ``f < j - 1``, carry ``G(j) = sum_f c_f across(f, j,
    top)`` already; the flux is ``F(j) = max(F(j - 1) + e_{j-1}, G(j))`` (the least with ``x_{j-1} >=
    p_{j-1}``) and ``c_{j-1} = (F(j) - G(j)) / across(j - 1, j, top)``; it fails where the slack ``x -
    p`` it has given the ranks below ``j`` would exceed the room ``1 - alpha*`` (:func:`room_left`).
    The sums over ``f`` are kept as polynomials (the groups of :mod:`otm.rules.wor_clock_masses`:
    ``[0, f)``, ``[f, j)`` and ``[j, top]``, with ``N = E - E(0)``): ``A = sum_f c_f (D0 N1 + D1 E0)``,
    ``B = sum_f c_f E0 N1``, and ``e1 D0``, ``e1 E0`` with ``e1 = E1(0)``; adding rank ``r`` to every
    ``[f, j)`` (``phi = none + x some``, ``D_r = q_r none``) maps them by ``A <- phi A + x some (e1
    D0) + D_r (B + e1 E0)``, ``B <- phi B + x some (e1 E0)``, ``e1 <- none e1``, every term
    nonnegative, and ``G(j) = int [x^(k-1)] (A N2 + B D2)``. Tested against :func:`chain_by_runs`."""
    s, w = quadrature_nodes(q_ranked, k)
    nodes = s.size
    weight = w * np.exp(-q_ranked[top + 1:].sum() * s)  # no draft above top

    def factors(r: int):
        return np.exp(-q_ranked[r] * s), -np.expm1(-q_ranked[r] * s)

    upper_E, upper_D = np.zeros((top + 2, nodes, k)), np.zeros((top + 2, nodes, k))  # [j, top] at every cut j
    E2, D2 = np.zeros((nodes, k)), np.zeros((nodes, k))
    E2[:, 0] = 1.0
    upper_E[top + 1], upper_D[top + 1] = E2, D2
    for r in range(top, 0, -1):
        E2, D2 = with_token(E2, D2, q_ranked[r], *factors(r))
        upper_E[r], upper_D[r] = E2, D2
    E0, D0 = np.zeros((nodes, k)), np.zeros((nodes, k))  # [0, f)
    E0[:, 0] = 1.0
    A, B, eD, eE = (np.zeros((nodes, k)) for _ in range(4))
    c, F = np.zeros(top + 1), np.zeros(top + 2)
    left, failed = room_left(e, top), None
    for j in range(1, top + 1):
        r = j - 1
        none, some = factors(r)
        Dr = (q_ranked[r] * none)[:, None]
        A = _times_rank(A, none, some) + _times_x(eD, some) + Dr * (B + eE)
        B = _times_rank(B, none, some) + _times_x(eE, some)
        eD, eE = eD * none[:, None], eE * none[:, None]
        N2 = upper_E[j].copy()
        N2[:, 0] = 0.0
        carried = float(weight @ (_top(A, N2) + _top(B, upper_D[j])))
        new_A, new_B = _times_x(D0, some) + Dr * E0, _times_x(E0, some)  # the interval [r, top] at cut j
        mass = float(weight @ (_top(new_A, N2) + _top(new_B, upper_D[j])))
        flux = max(F[j - 1] + e[r], carried)
        if failed is None and flux > left[j]:
            if stop:
                return c, F, j
            failed = j
        if failed is not None:
            flux = carried
        c[r], F[j] = (flux - carried) / mass, flux
        A, B = A + c[r] * new_A, B + c[r] * new_B
        eD, eE = eD + c[r] * none[:, None] * D0, eE + c[r] * none[:, None] * E0
        E0, D0 = with_token(E0, D0, q_ranked[r], none, some)
    return c, F, failed


def chain_deficit(p_ranked: np.ndarray, sigma: np.ndarray, F: np.ndarray, top: int) -> float:
    """``sum_H (p - x)^+`` with ``x_a = sigma_a + F(a + 1) - F(a)`` on the ranks ``0..top`` and no flux
    above ``top``: what a chain's levels lose against ``alpha*`` under the canonical check (Lemma
    10, the other two terms being 0 for levels on ``H`` alone)."""
    flux = np.concatenate([F[:top + 1], [0.0]])
    x = sigma[:top + 1] + flux[1:] - flux[:-1]
    return float(np.sum(np.maximum(p_ranked[:top + 1] - x, 0.0)))


def room_left(e: np.ndarray, top: int) -> np.ndarray:
    """``[top + 2]``: the largest flux at each cut ``j`` from which ``x >= p`` can still hold on the
    ranks ``j..top`` with no flux above ``top``: ``-sum(e[j..top])`` (at ``j = 0`` the room ``1 -
    alpha*`` when ``top`` is the last rank of ``H``)."""
    left = np.zeros(top + 2)
    left[:top + 1] = -np.cumsum(e[:top + 1][::-1])[::-1]
    return left


def chain_by_runs(masses, e: np.ndarray, top: int) -> tuple[np.ndarray, np.ndarray, int | None]:
    """:func:`chain_pass` the slow, obvious way: each interval's masses at every cut from
    ``masses.across`` (:class:`otm.rules.wor_clock_masses.ClockSetMasses`), summed cut by cut."""
    c, F, carried = np.zeros(top + 1), np.zeros(top + 2), np.zeros(top + 2)
    left = room_left(e, top)
    for j in range(1, top + 1):
        flux = max(F[j - 1] + e[j - 1], carried[j])
        if flux > left[j]:
            return c, F, j
        run = np.array([masses.across(j - 1, i, top) for i in range(j, top + 1)])
        c[j - 1], F[j] = (flux - carried[j]) / run[0], flux
        carried[j:top + 1] += c[j - 1] * run
    return c, F, None


def row_summary(p: np.ndarray, q: np.ndarray, k: int) -> dict:
    """The room ``1 - alpha*`` of one row and the bottom-peeling chain's reach on its ``H``."""
    from decoding.verifiers.optimal_wor_numba import CompiledClockSetMasses
    from otm.formulations.prefix_scan import iid_optimum_for_ks
    from otm.rules.optimal_wor import clock_flux_setup

    setup = clock_flux_setup(p, q, k, clock_masses=CompiledClockSetMasses)
    if setup is None:
        raise ValueError("a row off the clock path (too few tokens with q > 0)")
    masses, m = setup.masses, setup.cut
    p_ranked, sigma = p[setup.order], np.asarray(masses.sigma, dtype=np.float64)
    e = p_ranked - sigma
    room = float(-e[:m].sum())  # sum over H of (sigma - p) = T_m - P_m = 1 - alpha*
    out = {"n": len(setup.order), "m": m, "room": room, "alpha": float(setup.acceptance), "failed": None,
           "deficit": 0.0, "largest level": 0.0, "latent gap": float(setup.acceptance) - float(iid_optimum_for_ks(p, q, [k])[0])}
    if m > 1:
        c, F, out["failed"] = chain_pass(masses.q, k, e, m - 1, stop=False)
        out["deficit"] = chain_deficit(p_ranked, sigma, F, m - 1)
        out["largest level"] = float(np.cumsum(c).max())
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True, help="an `otm corpus` directory")
    parser.add_argument("--positions", type=int, default=6)
    parser.add_argument("--ks", default="3")
    parser.add_argument("--temperature", type=float, default=1.0)
    args = parser.parse_args(argv)
    from otm.corpus import Corpus

    ks = [int(k) for k in args.ks.split(",")]
    rows = Corpus(args.corpus).spaced_rows(args.positions, args.temperature)
    print(f"{len(rows)} whole rows at temperature {args.temperature}, k = {args.ks} "
          f"(about {25 * len(rows) * len(ks)} s)", file=sys.stderr, flush=True)
    print("| text | position | k | tokens | cut m | alpha* | room 1 - alpha* | chain carries the cuts of H "
          "| chain continued: alpha* - acceptance (largest level) | optimal_latent: alpha* - alpha*(iid) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for done, (text, position, p, q) in enumerate(rows, 1):
        for k in ks:
            began = time.perf_counter()
            row = row_summary(p, q, k)
            reach = "all" if row["failed"] is None else f"1..{row['failed'] - 1} of {row['m'] - 1}"
            level = row["largest level"]
            continued = (f"{row['deficit']:.1e} ({level:.3f})" if level <= 1
                         else f"not a rule: a level of {level:.3f}")
            print(f"| {text} | {position} | {k} | {row['n']:,} | {row['m']:,} | {row['alpha']:.6f} | {row['room']:.2e} "
                  f"| {reach} | {continued} | {row['latent gap']:.1e} |", flush=True)
            print(f"  {done}/{len(rows)} rows, k = {k}: {time.perf_counter() - began:.1f} s", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
