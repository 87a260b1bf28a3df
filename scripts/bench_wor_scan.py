"""The set-up of ``optimal_wor`` on whole real rows with its pass up the ranks compiled on the CPU
and as a scan on a torch device, side by side in one run.

Evidence behind docs/optimal-verifier.md#water-levels-for-drafts-without-replacement ("The set-up's pass on a GPU"). Per row
(``--positions`` rows of an ``otm corpus`` directory, softmax at temperature 1 over the whole
vocabulary) and ``k`` in ``--ks``: the time of the verifier's set-up (cut, flux, ``x`` and set
masses: :func:`otm.rules.water_levels.parameters.clock_flux_setup`) with
:class:`~decoding.verifiers.optimal.clock_masses.CompiledClockSetMasses` and with
:func:`~decoding.verifiers.optimal.clock_masses.clock_masses` ``(--device)``; then the walks of
``--draws`` drafted sets from the bounds on a water level from the flux on each set-up (the first walk apart: on the
compiled set-up it computes the groups of ranks that the scan makes at once), how many of the
walks both decide the same way (all must), and the largest difference of the two fluxes; then
the pass alone, four ways on the same ranks: the compiled pass on the CPU node by node
(:func:`~decoding.verifiers.optimal.setup.numba_nodes.prefix_pass`, without the groups) and at Chebyshev
points (:mod:`decoding.verifiers.optimal.setup.chebyshev`, the CPU's default since 2026-11-27), the
torch scan on ``--device`` (:mod:`decoding.verifiers.optimal.setup.torch_scan`) and the kernels' scan
where ``--device`` is a CUDA device (:mod:`decoding.verifiers.optimal.setup.cuda_scan`), each with its
outputs brought to the CPU. One thread for torch and numba unless ``--threads``:

    python scripts/bench_wor_scan.py --corpus DIR --positions 4 --ks 3,8 --device cuda

On a machine without the device the scan runs on the CPU's torch (``--device cpu``: slow, a
check of the script, not a timing).

``--precision`` measures instead how close the pass's products come to a wider one: per row and
``k``, the last checkpoint (the prefix polynomials of every rank but the last block's) at four
nodes from the compiled pass (node by node and at Chebyshev points) and from the scan on
``--device``, against the same pass in 80-bit
floats (``np.longdouble``, the clocks from the same float64 ``q`` and ``s``), largest relative
difference over the coefficients above ``1e-250`` (a few seconds per row and ``k``):

    python scripts/bench_wor_scan.py --corpus DIR --positions 4 --ks 3,8 --device cpu --precision
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import torch

from otm.rules.water_levels.parameters import clock_flux_setup
from otm.rules.water_levels.bounds import walk_decision


def _timed_setup(p, q, k, masses):
    """The set-up and its seconds (a scan's outputs come back to the CPU inside it)."""
    began = time.perf_counter()
    setup = clock_flux_setup(p, q, k, clock_masses=masses)
    return setup, time.perf_counter() - began


def _walks(setup, sets, uniforms, margin, windows) -> tuple[list, float, float]:
    """The decisions, the first walk's seconds and the mean of the others' in ms."""
    flux = np.asarray(setup.flux, dtype=np.float64)
    verdicts, times = [], []
    for drafted, u in zip(sets, uniforms):
        began = time.perf_counter()
        verdicts.append(walk_decision(flux, setup.masses, [int(setup.rank[t]) for t in drafted], u, margin=margin,
                                      windows=windows))
        times.append(time.perf_counter() - began)
    return verdicts, times[0], 1000 * float(np.mean(times[1:])) if len(times) > 1 else float("nan")


def _pass_alone(masses, device: str) -> str:
    """The pass over ``masses``' ranks four ways (module docstring), in ms."""
    from decoding.verifiers.optimal.setup import cuda_scan as optimal_wor_cuda
    from decoding.verifiers.optimal.setup import chebyshev, numba_nodes
    from decoding.verifiers.optimal.setup import torch_scan as optimal_wor_torch
    from decoding.verifiers.optimal.setup.torch_scan import SCAN_CHECKPOINT

    times = []
    for backend in (numba_nodes, chebyshev):  # node by node, then at Chebyshev points (the CPU's default)
        began = time.perf_counter()
        backend.prefix_tables(masses)
        times.append(time.perf_counter() - began)
    scans = [optimal_wor_torch.scan] + ([optimal_wor_cuda.scan] if device.startswith("cuda") else [])
    for scan in scans:  # at the spacing a device's scan keeps (the CPU's pass keeps a wider one)
        began = time.perf_counter()
        scan(masses.q, masses.s, masses.w, masses._above, masses.k, SCAN_CHECKPOINT, masses.group, device)
        times.append(time.perf_counter() - began)
    return " / ".join(f"{1000 * seconds:.1f}" for seconds in times) + ("" if len(times) == 4 else " / -")


def wide_pass(masses, nodes: np.ndarray, ranks: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(E, D, sigma)`` in ``np.longdouble`` (the clocks from the same float64 ``q`` and ``s``):
    the count polynomials of the ranks ``[0, ranks)`` (all by default) at ``nodes``, and ``sigma`` of
    those ranks summed over the terms of ``nodes`` (the whole ``sigma`` where ``nodes`` are all),
    node by node, the recursion of the compiled passes. ``--precision`` compares the passes'
    checkpoints with it; tests/decoding/test_optimal_wor_chebyshev.py their ``sigma``."""
    k, wide = masses.k, np.longdouble
    s, w = masses.s[nodes].astype(wide), masses.w[nodes].astype(wide)
    q, above = masses.q.astype(wide), masses._above.astype(wide)
    E, D = np.zeros((nodes.size, k), dtype=wide), np.zeros((nodes.size, k), dtype=wide)
    E[:, 0] = 1
    sigma = np.zeros(masses.n if ranks is None else ranks, dtype=wide)
    for r in range(sigma.size):
        a, b = np.exp(-q[r] * s), -np.expm1(-q[r] * s)
        sigma[r] = np.sum(w * np.exp(-above[r] * s) * (q[r] * a * E[:, k - 1] + b * D[:, k - 2]))
        lower_E, lower_D = E[:, :-1].copy(), D[:, :-1].copy()
        D = D * a[:, None] + E * (q[r] * a)[:, None]
        D[:, 1:] += lower_D * b[:, None]
        E = E * a[:, None]
        E[:, 1:] += lower_E * b[:, None]
    return E, D, sigma


def precision(rows, ks: list[int], device: str) -> None:
    """The ``--precision`` table (module docstring)."""
    from decoding.verifiers.optimal.clock_masses import CompiledClockSetMasses, clock_masses
    from decoding.verifiers.optimal.setup import pick
    from decoding.verifiers.optimal.setup import torch_scan as optimal_wor_torch
    from decoding.verifiers.optimal.setup.torch_scan import SCAN_CHECKPOINT
    from otm.formulations.prefix_scan import ratio_order

    print(f"last checkpoint against an 80-bit pass, largest relative difference (scan on {device})")
    print("| text | position | k | ranks | nodes compared | compiled pass node by node, E / D | at points, E / D "
          "| scan, E / D |")
    print("|---|---|---|---|---|---|---|---|")
    for text, position, p, q in rows:
        q_ranked = q[ratio_order(p, q)]
        q_ranked = q_ranked[q_ranked > 0]
        for k in ks:
            masses = CompiledClockSetMasses(q_ranked, k)
            nodes = np.unique(np.linspace(0, masses.s.size // 2, 4).astype(int))
            scanner = pick(device, k, 1) if device.startswith("cuda") else optimal_wor_torch  # a scan on the device
            E0, D0 = scanner.scan(masses.q, masses.s, masses.w, masses._above, k, SCAN_CHECKPOINT,
                                  masses.group, device)[:2]  # at the spacing a device's scan keeps
            wide = {every: wide_pass(masses, nodes, (masses.n // every) * every)[:2]  # each pass's last checkpoint
                    for every in {masses.checkpoint, SCAN_CHECKPOINT}}
            by_node = clock_masses("cpu", "numba")(q_ranked, k)
            cells = []
            for ours, every in (((by_node._E0, by_node._D0), masses.checkpoint), ((masses._E0, masses._D0), masses.checkpoint),
                                ((E0, D0), SCAN_CHECKPOINT)):
                worst = []
                for got, want in zip(ours, wide[every]):
                    got, big = got[-1][nodes].astype(np.longdouble), np.abs(want) > 1e-250
                    worst.append(float(np.max(np.abs(got - want)[big] / np.abs(want)[big])))
                cells.append(" / ".join(f"{x:.1e}" for x in worst))
            print(f"| {text} | {position} | {k} | {masses.n:,} | {nodes.size} | {' | '.join(cells)} |", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True, help="an `otm corpus` directory")
    parser.add_argument("--positions", type=int, default=4)
    parser.add_argument("--ks", default="3,8")
    parser.add_argument("--draws", type=int, default=30, help="drafted sets per row and k")
    parser.add_argument("--device", default="cuda", help="the scan's torch device")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--precision", action="store_true", help="the products against an 80-bit pass instead")
    args = parser.parse_args(argv)
    from decoding.verifiers.optimal import wor as verifier
    from decoding.verifiers.optimal.clock_masses import CompiledClockSetMasses, clock_masses
    from otm.corpus import Corpus

    torch.set_num_threads(args.threads)  # also the compiled passes' threads (decoding.verifiers.base.row_parts)
    ks = [int(k) for k in args.ks.split(",")]
    if args.precision:
        print(f"{args.positions} whole rows x {len(ks)} k: an 80-bit pass over each row's ranks, a few seconds each",
              file=sys.stderr, flush=True)
        precision(Corpus(args.corpus).spaced_rows(args.positions, 1.0), ks, args.device)
        return 0
    print(f"{args.positions} whole rows x {len(ks)} k, two set-ups each (about a second each; the first call also "
          f"compiles or loads numba's code and starts {args.device})", file=sys.stderr, flush=True)
    scanned = clock_masses(args.device, None if args.device.startswith("cuda") else "torch")  # a scan on the device
    began = time.perf_counter()
    warm = np.exp(np.linspace(0.0, 3.0, 300))  # compile, load and start the device before timing
    for masses in (CompiledClockSetMasses, scanned):
        clock_flux_setup(warm[::-1] / warm.sum(), warm / warm.sum(), 3, clock_masses=masses)
    _pass_alone(CompiledClockSetMasses(warm / warm.sum(), 3), args.device)
    print(f"warm-up (compiling or loading the code, starting the device): {time.perf_counter() - began:.1f} s",
          file=sys.stderr, flush=True)
    device_name = torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu"
    print(f"torch {torch.__version__}, {args.threads} thread(s), scan on {args.device} ({device_name}), "
          f"{args.draws} drafted sets per row and k")
    print("| text | position | k | ranks | nodes | set-up, compiled pass (s) | set-up, scan (s) | first walk (s): "
          "compiled / scan | ms per later walk: compiled / scan | same decisions | largest flux difference "
          "| pass alone (ms): node by node / at points / torch scan / kernels |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(args.seed)
    rows = Corpus(args.corpus).spaced_rows(args.positions, 1.0)
    for done, (text, position, p, q) in enumerate(rows, 1):
        for k in ks:
            sets = [rng.choice(len(q), k, replace=False, p=q) for _ in range(args.draws)]
            uniforms = rng.random(args.draws)
            compiled, compiled_seconds = _timed_setup(p, q, k, CompiledClockSetMasses)
            on_device, device_seconds = _timed_setup(p, q, k, scanned)
            if compiled is None or on_device is None:
                print(f"| {text} | {position} | {k} | - | - | off the clock path | | | | | |", flush=True)
                continue
            walks = [_walks(setup, sets, uniforms, verifier.BOUND_MARGIN, verifier.BOUND_WINDOWS)
                     for setup in (compiled, on_device)]
            same = sum(a == b for a, b in zip(walks[0][0], walks[1][0]))
            differ = float(np.max(np.abs(np.asarray(compiled.flux) - np.asarray(on_device.flux))))
            print(f"| {text} | {position} | {k} | {len(compiled.order):,} | {compiled.masses.s.size} | "
                  f"{compiled_seconds:.3f} | {device_seconds:.3f} | {walks[0][1]:.3f} / {walks[1][1]:.3f} | "
                  f"{walks[0][2]:.1f} / {walks[1][2]:.1f} | {same} of {args.draws} | {differ:.1e} | "
                  f"{_pass_alone(compiled.masses, args.device)} |", flush=True)
        print(f"  {done}/{len(rows)} rows", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
