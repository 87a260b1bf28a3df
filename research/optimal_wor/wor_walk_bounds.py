"""How often do bounds from the flux alone decide the walk of ``optimal_wor``, and at what cost?

Evidence behind docs/optimal-verifier.md#water-levels-for-drafts-without-replacement ("k drafts: the walk from bounds"). The
batched verifier for ``k >= 3`` drafts without replacement (:mod:`decoding.verifiers.optimal.wor`)
first sets a row up on the clock integral (cut, flux, ``x``, set masses:
:func:`decoding.verifiers.optimal.wor.row_setup`; rows off that path, with few draft tuples or at
most ``k`` tokens with ``q > 0``, and rows past its tables are listed as such), then decides the walk of each drafted set
from Lemma 9's bounds (:func:`otm.rules.water_levels.bounds.walk_decision`, with the verifier's
margin and windows), and builds the water levels only for the sets they leave undecided. On
real rows (``--positions`` rows of an ``otm corpus`` directory at ``--temperature``, each cut
to its top-p nucleus over the whole vocabulary with ``--top-p``, else to its ``--top``
likeliest tokens), per row and ``k`` in ``--ks``: the support, the longest run of flux, the
nesting's own time estimate, the set-up's time, how many of ``--draws`` drafted sets (drawn
without replacement from ``q``, a uniform each) the bounds decide and their mean time, and,
where the nesting's estimate is at most ``--levels-limit`` seconds, the time of the full
levels (:func:`otm.rules.water_levels.parameters.wor_parameters`, the verifier's clock path) and how many
decisions differ from the walk on those levels (none may):

    python -m research.optimal_wor.wor_walk_bounds --corpus DIR --positions 8 --top-p 0.99 --ks 3,8

``--real-inputs`` sends whole rows at the real vocabulary instead (``V = 151,936``, no top-p)
through the batched verifier (``decoding.verifiers.optimal.wor.verify``, ``k`` in ``--ks``):
``--positions`` corpus rows as float32 and bfloat16 softmax at temperatures 1 and 0.1, and the
same rows with ``p`` or ``q`` made near one-hot (0.999 on its likeliest token); per case, the
time and what came back (the drawn token, or the typed refusal's class and first words):

    python -m research.optimal_wor.wor_walk_bounds --corpus DIR --positions 2 --ks 3,8 --real-inputs

``--precision`` measures what the bounds read at the real vocabulary (whole rows, ``V =
151,936``, float64 softmax at ``--temperature``): the flux the verifier's float64 set-up
computes against the flux in exact rationals from the same ``p`` and ``sigma`` (summation
rounding), the flux and the interval masses of the longest run at the quadrature's step
against those at half the step (quadrature error), and the flux against the flux from a
quadrature that starts at ``1e-10 / k`` (:func:`otm.rules.water_levels.clock_masses.lower_end`'s
truncation, with the rounding of the other nodes' sums), largest absolute and relative differences
(relative over the cuts whose flux or mass is above ``1e-12``), beside the verifier's relative
margin (:data:`decoding.verifiers.optimal.wor.BOUND_MARGIN`):

    python -m research.optimal_wor.wor_walk_bounds --corpus DIR --positions 4 --ks 3,8 --precision

``--gaps`` lists instead, on the same rows and drafted sets as the table, the walks the bounds
leave open: the step where they do (the span from the highest member down to the member not
settled, and its first run), the bound (i) there, the uniform ``u``, an upper level ``v`` at which
(ii)/(iii) prove the span's least level at most ``v`` (by bisection on ``[u, 1]``: the tests are
not monotone in ``v``, so this is one such level, not the least; "none" where they prove nothing
even at 1), and, where the nesting's estimate is at most ``--levels-limit`` seconds, the span's
least level ``M`` itself, which must lie between the two:

    python -m research.optimal_wor.wor_walk_bounds --corpus DIR --positions 4 --top 151936 --ks 3,8 --draws 30 --gaps
"""
from __future__ import annotations

import argparse
import sys
import time
from unittest import mock

import numpy as np

from otm.errors import NotApplicableError
from otm.rules.water_levels.construction import FluxSetup
from otm.rules.water_levels.parameters import clock_flux_setup, wor_parameters
from otm.rules.water_levels.bounds import first_run, span_at_most, span_lower_bound, walk_decision
from research.optimal_wor.wor_pair_rules import likeliest
from research.optimal_wor.wor_water_levels import warm_compiled_code


def _nesting_estimate(setup: FluxSetup, flux: np.ndarray) -> tuple[float, int]:
    """``(seconds, longest run)``: the nesting's own estimate over both sides of the cut."""
    n = len(setup.order)
    sides = [setup.masses.nesting_seconds(flux, lo, hi) for lo, hi in ((setup.cut, n - 1), (0, setup.cut - 1))]
    return sum(seconds for seconds, _ in sides), max(run for _, run in sides)


def _drafted(rng: np.random.Generator, q: np.ndarray, k: int, draws: int) -> tuple[list, np.ndarray]:
    """``draws`` drafted sets without replacement from ``q`` and a uniform each, in the order both
    tables draw them (so ``--gaps`` meets the table's walks)."""
    sets = [rng.choice(len(q), k, replace=False, p=q) for _ in range(draws)]
    return sets, rng.random(draws)


def _set_up_rows(rows: list, ks: list[int], top: int, top_p: float | None):
    """Per corpus row (cut to its ``top`` likeliest tokens unless ``top_p`` cut it) and ``k`` in
    ``ks``: ``(text, position, p, q, k, setup, seconds)``, ``setup`` the verifier's set-up
    (:func:`clock_flux_setup` on the compiled masses, as ``row_setup`` makes it) or, for a row off
    the clock path, why not, and the seconds it took; each row's progress on stderr."""
    from decoding.verifiers.optimal.clock_masses import CompiledClockSetMasses

    for done, (text, position, p, q) in enumerate(rows, 1):
        if top_p is None:
            p, q = likeliest(p, q, top)
        for k in ks:
            began = time.perf_counter()
            try:
                setup = clock_flux_setup(p, q, k, clock_masses=CompiledClockSetMasses) or "off the clock path"
            except NotApplicableError:
                setup = "past the clock integral's tables"
            yield text, position, p, q, k, setup, time.perf_counter() - began
        print(f"  {done}/{len(rows)} rows", file=sys.stderr, flush=True)


def row_table(directory: str, positions: int, ks: list[int], draws: int, top: int, top_p: float | None,
              temperature: float, levels_limit: float, seed: int) -> None:
    from decoding.verifiers.optimal import wor as verifier
    from decoding.verifiers.optimal.clock_masses import CompiledClockSetMasses
    from otm.corpus import Corpus

    warm_compiled_code()
    rng = np.random.default_rng(seed)
    rows = Corpus(directory).spaced_rows(positions, temperature, top_p)
    cut = f"cut to their top-p {top_p} nuclei" if top_p is not None else f"cut to {top} tokens"
    print(f"{len(rows)} corpus rows at temperature {temperature}, {cut}; {draws} drafted sets per row and k")
    print("| text | position | k | support | longest run of flux | nesting estimate (s) | set-up (s) | decided by bounds "
          "| ms per decision | levels (s) | decisions against the levels |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    totals = {k: [0, 0, 0] for k in ks}  # decided, drawn, wrong
    for text, position, p, q, k, setup, set_up in _set_up_rows(rows, ks, top, top_p):
        if not isinstance(setup, FluxSetup):  # few tuples, at most k tokens with q > 0, or too many tokens
            print(f"| {text} | {position} | {k} | {int(np.count_nonzero(q > 0)):,} | - | - | - | "
                  f"{setup} | - | - | - |", flush=True)
            continue
        n = len(setup.order)
        flux = np.asarray(setup.flux, dtype=np.float64)  # as row_setup hands it to the walk: read in spans
        estimate, longest = _nesting_estimate(setup, flux)
        sets, uniforms = _drafted(rng, q, k, draws)
        began = time.perf_counter()
        verdicts = [walk_decision(flux, setup.masses, [int(setup.rank[t]) for t in drafted], u,
                                  margin=verifier.BOUND_MARGIN, windows=verifier.BOUND_WINDOWS)
                    for drafted, u in zip(sets, uniforms)]
        deciding = time.perf_counter() - began
        decided = sum(v is not None for v in verdicts)
        levels_seconds, wrong = "-", "-"
        if estimate <= levels_limit:
            began = time.perf_counter()
            try:
                params = wor_parameters(p, q, k, clock_masses=CompiledClockSetMasses)
                levels_seconds = f"{time.perf_counter() - began:.2f}"
                levels = [float(v) for v in params.levels]
                wrong = sum(v is not None and v != verifier.walk(levels, [int(params.rank[t]) for t in drafted], u)
                            for v, drafted, u in zip(verdicts, sets, uniforms))
                totals[k][2] += wrong
            except NotApplicableError as refusal:
                levels_seconds = "refused"
                print(f"  refused: {refusal}", file=sys.stderr, flush=True)
        totals[k][0] += decided
        totals[k][1] += draws
        print(f"| {text} | {position} | {k} | {n:,} | {longest:,} | {estimate:.1f} | {set_up:.2f} | {decided} of {draws} "
              f"| {1000 * deciding / draws:.1f} | {levels_seconds} | {wrong} |", flush=True)
    for k, (decided, drawn, wrong) in totals.items():
        print(f"k = {k}: {decided} of {drawn} drafted sets decided by the bounds, {wrong} against the levels")


def _open_step(flux, masses, ranks: list[int], u: float, margin, windows) -> tuple[int, int]:
    """``(low, high)``: the span of the walk's first step that :func:`walk_decision` leaves open,
    the step whose member, added to the ones above it, first leaves their walk open (the walk must
    be one it leaves open)."""
    descending = sorted(ranks, reverse=True)
    for count in range(2, len(descending) + 1):
        if walk_decision(flux, masses, descending[:count], u, margin=margin, windows=windows) is None:
            return descending[count - 1], descending[0]
    raise ValueError(f"the walk of ranks {ranks} at u = {u} is decided")


def _proved_at_most(flux, masses, run, low: int, high: int, u: float, margin, windows, steps: int = 20) -> float | None:
    """A level ``v`` in ``(u, 1]`` at which (ii)/(iii) prove the span's least level at most ``v``
    (bisection between the last ``v`` they did not prove and the last they did), or ``None``."""
    if not span_at_most(flux, masses, run, low, high, 1.0, margin, windows):
        return None
    below, above = u, 1.0
    for _ in range(steps):
        middle = (below + above) / 2
        below, above = (below, middle) if span_at_most(flux, masses, run, low, high, middle, margin, windows) else (middle, above)
    return above


def gaps_table(directory: str, positions: int, ks: list[int], draws: int, top: int, top_p: float | None,
               temperature: float, levels_limit: float, seed: int) -> None:
    """The walks the bounds leave open (module docstring, ``--gaps``): the same rows and drafted
    sets as :func:`row_table` (the same seed draws them in the same order)."""
    from decoding.verifiers.optimal import wor as verifier
    from decoding.verifiers.optimal.clock_masses import CompiledClockSetMasses
    from otm.corpus import Corpus

    warm_compiled_code()
    rng = np.random.default_rng(seed)
    rows = Corpus(directory).spaced_rows(positions, temperature, top_p)
    margin, windows = verifier.BOUND_MARGIN, verifier.BOUND_WINDOWS
    print(f"{len(rows)} corpus rows at temperature {temperature}; {draws} drafted sets per row and k; the walks the "
          "bounds leave open")
    print("| text | position | k | span (ranks) | its first run | bound (i) | u | proved at most | least level M |")
    print("|---|---|---|---|---|---|---|---|---|")
    for text, position, p, q, k, setup, _ in _set_up_rows(rows, ks, top, top_p):
        if not isinstance(setup, FluxSetup):
            continue
        masses, flux = setup.masses, np.asarray(setup.flux, dtype=np.float64)
        sets, uniforms = _drafted(rng, q, k, draws)
        estimate = _nesting_estimate(setup, flux)[0]
        levels = None
        for drafted, u in zip(sets, uniforms):
            ranks = [int(setup.rank[t]) for t in drafted]
            if walk_decision(flux, masses, ranks, u, margin=margin, windows=windows) is not None:
                continue
            low, high = _open_step(flux, masses, ranks, u, margin, windows)
            run = first_run(flux, low, high)
            bound = span_lower_bound(flux, masses, run, low, high, margin)
            at_most = _proved_at_most(flux, masses, run, low, high, u, margin, windows)
            if levels is None and estimate <= levels_limit:
                levels = [float(v) for v in wor_parameters(p, q, k, clock_masses=CompiledClockSetMasses).levels]
            level = f"{min(levels[low + 1:high + 1]):.4f}" if levels is not None else "-"
            print(f"| {text} | {position} | {k} | [{low:,}, {high:,}] | [{run[0]:,}, {run[1]:,}] | {bound:.4f} | {u:.4f} "
                  f"| {'none' if at_most is None else f'{at_most:.4f}'} | {level} |", flush=True)


def real_inputs(directory: str, positions: int, ks: list[int]) -> None:
    """Whole rows at the real vocabulary through the verifier (module docstring, ``--real-inputs``)."""
    import torch

    from decoding.verifiers.optimal import wor as verifier
    from otm.corpus import Corpus
    from otm.errors import OTMError

    warm_compiled_code()
    corpus = Corpus(directory)

    def near_one_hot(row: np.ndarray) -> np.ndarray:
        out = row * (0.001 / (row.sum() - row.max()))
        out[np.argmax(row)] = 0.999
        return out

    print("| text | position | inputs | k | support of q | seconds | outcome |")
    print("|---|---|---|---|---|---|---|")
    for temperature in (1.0, 0.1):
        for text, position, p, q in corpus.spaced_rows(positions, temperature):
            cases = [(f"T = {temperature:g}", p, q), (f"T = {temperature:g}, near one-hot p", near_one_hot(p), q),
                     (f"T = {temperature:g}, near one-hot q", p, near_one_hot(q))]
            for label, p_row, q_row in cases:
                for dtype in (torch.float32, torch.bfloat16):
                    target, draft = (torch.tensor(v, dtype=torch.float64).to(dtype)[None] for v in (p_row, q_row))
                    for k in ks:
                        generator = torch.Generator().manual_seed(0)
                        drafts = verifier.sample_drafts(draft.float(), k, generator)
                        began = time.perf_counter()
                        try:
                            out = verifier.verify(target, draft[:, None].expand(1, k, -1), drafts, generator)
                            outcome = f"token {int(out.tokens[0])}"
                        except OTMError as refusal:
                            outcome = f"{type(refusal).__name__}: {str(refusal)[:90]}..."
                        print(f"| {text} | {position} | {label}, {str(dtype).split('.')[-1]} | {k} | "
                              f"{int((draft > 0).sum()):,} | {time.perf_counter() - began:.2f} | {outcome} |", flush=True)


def precision(directory: str, positions: int, ks: list[int], temperature: float) -> None:
    """What the bounds read, at float64 and at half the quadrature step (module docstring)."""
    from fractions import Fraction

    from decoding.verifiers.optimal import wor as verifier
    from decoding.verifiers.optimal.clock_masses import CompiledClockSetMasses
    from otm.corpus import Corpus
    from otm.rules.water_levels import clock_masses
    from otm.rules.water_levels.construction import flux_runs, flux_setup

    def differences(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
        relative = np.abs(a - b)[b > 1e-12] / b[b > 1e-12]
        return float(np.abs(a - b).max(initial=0.0)), float(relative.max(initial=0.0))

    warm_compiled_code()
    print(f"relative margin of the bounds' decisions: {verifier.BOUND_MARGIN:g}")
    print("| text | position | k | nodes | cuts with flux | flux: float64 vs rationals, abs / rel | flux: step vs "
          "half step, abs / rel | flux: lower end vs 1e-10 / k, abs / rel | longest run | its masses (50 cuts): step "
          "vs half step, abs / rel |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for text, position, p, q in Corpus(directory).spaced_rows(positions, temperature):
        for k in ks:
            setup = clock_flux_setup(p, q, k, clock_masses=CompiledClockSetMasses)
            with mock.patch.object(clock_masses, "BASE_STEP", clock_masses.BASE_STEP / 2):
                fine = clock_flux_setup(p, q, k, clock_masses=CompiledClockSetMasses)
            with mock.patch.object(clock_masses, "lower_end", lambda k: 1e-10 / k):
                wide = clock_flux_setup(p, q, k, clock_masses=CompiledClockSetMasses)
            exact_p = np.empty(len(p), dtype=object)
            exact_p[:] = [Fraction(float(v)) for v in p]
            exact = flux_setup(exact_p, q, setup.order, lambda qs, zero: (None, [Fraction(float(v)) for v in setup.masses.sigma]))
            flux, exact_flux = np.asarray(setup.flux, dtype=np.float64), np.asarray([float(v) for v in exact.flux])
            if exact.cut != setup.cut or fine.cut != setup.cut or wide.cut != setup.cut:
                print(f"  cuts differ: float64 {setup.cut}, rationals {exact.cut}, half step {fine.cut}, "
                      f"lower end 1e-10 / k {wide.cut}", file=sys.stderr)
            runs = flux_runs(flux, 0, len(flux) - 2)
            f, t = (int(v) for v in runs[np.argmax(runs[:, 1] - runs[:, 0])]) if len(runs) else (0, 0)
            cuts = np.unique(np.linspace(f + 1, t, 50).astype(int)) if t > f else np.array([], dtype=int)
            masses = [np.asarray([m.across_one(f, int(j), t) for j in cuts]) for m in (setup.masses, fine.masses)]
            rounding, quadrature = differences(flux, exact_flux), differences(flux, np.asarray(fine.flux, dtype=np.float64))
            mass, end = differences(*masses), differences(flux, np.asarray(wide.flux, dtype=np.float64))
            print(f"| {text} | {position} | {k} | {setup.masses.s.size} | {int((flux > 0).sum()):,} | "
                  f"{rounding[0]:.1e} / {rounding[1]:.1e} | {quadrature[0]:.1e} / {quadrature[1]:.1e} | "
                  f"{end[0]:.1e} / {end[1]:.1e} | {t - f:,} ranks | {mass[0]:.1e} / {mass[1]:.1e} |", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", required=True, help="an `otm corpus` directory")
    parser.add_argument("--positions", type=int, default=8)
    parser.add_argument("--ks", default="3,8")
    parser.add_argument("--draws", type=int, default=50, help="drafted sets per row and k")
    parser.add_argument("--top", type=int, default=1000, help="likeliest tokens kept, without --top-p")
    parser.add_argument("--top-p", type=float, default=None)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--levels-limit", type=float, default=20.0,
                        help="build the full levels where the nesting's estimate is at most this (s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--real-inputs", action="store_true",
                        help="whole rows at the real vocabulary through the verifier instead")
    parser.add_argument("--precision", action="store_true",
                        help="the flux and masses the bounds read at the real vocabulary, against rationals and half the step")
    parser.add_argument("--gaps", action="store_true", help="the walks the bounds leave open, and how far apart the bounds are")
    args = parser.parse_args(argv)
    if args.precision:
        print(f"whole rows at V = 151,936: about {4 * args.positions * len(args.ks.split(','))} s", file=sys.stderr, flush=True)
        precision(args.corpus, args.positions, [int(k) for k in args.ks.split(",")], args.temperature)
        return
    if args.real_inputs:
        print("whole rows at V = 151,936 through the verifier: up to a few seconds per case", file=sys.stderr, flush=True)
        real_inputs(args.corpus, args.positions, [int(k) for k in args.ks.split(",")])
        return
    if args.gaps:
        print(f"about {args.positions * len(args.ks.split(','))} set-ups, each up to a few seconds, and about a second "
              "for each walk the bounds leave open", file=sys.stderr, flush=True)
        gaps_table(args.corpus, args.positions, [int(k) for k in args.ks.split(",")], args.draws, args.top, args.top_p,
                   args.temperature, args.levels_limit, args.seed)
        return
    print(f"about {args.positions * len(args.ks.split(','))} set-ups, each up to a few seconds, and the full levels "
          f"where estimated under {args.levels_limit:g} s", file=sys.stderr, flush=True)
    row_table(args.corpus, args.positions, [int(k) for k in args.ks.split(",")], args.draws, args.top, args.top_p,
              args.temperature, args.levels_limit, args.seed)


if __name__ == "__main__":
    main()
