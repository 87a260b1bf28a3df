"""Do water levels reach the optimum for ``k >= 3`` drafts? Exact rationals on random instances.

Evidence behind docs/optimal-verifier.md#water-levels-for-drafts-without-replacement ("k drafts: the same water levels"): the
rule ``optimal_wor`` (:mod:`otm.rules.optimal_wor`) on random exact ``(p, q)`` (the instances
of ``python -m research.optimal_wor.wor_pair_rules --exact``, ``V = 4..9``) with ``k = 3..min(V - 1, 5)`` drafts.
Per ``k`` it counts the instances whose acceptance ``sum min(p, x)`` differs from the prefix
scan's ``alpha*`` (exact equality) and those whose selection law, summed over every draft
tuple with the rule's chances, differs from the ``x`` the construction aims at (with it, the
canonical check against ``x`` outputs ``p`` and accepts ``sum min(p, x)``; the output law
itself is enumerated in tests/otm/test_rule_optimal_wor.py), and reports the largest water
level (the rule is a rule only when it is at most 1; a level above 1 would be refused
and is counted).

    python -m research.optimal_wor.wor_water_levels [--instances 600] [--seed 0] [--law without_replacement|iid]

``--law iid`` runs the same construction on the sets of ``k`` i.i.d. drafts, against the
i.i.d. optimum (the toolkit's i.i.d. rule ``optimal`` is a different construction).
``--corpus DIR`` takes real rows instead: ``--positions`` rows of an ``otm corpus`` directory
(temperature 1), each cut to its ``--top`` likeliest tokens (by ``p + q``) and renormalised,
converted to rationals exactly, every ``k`` from 3 to ``min(top - 1, 5)``:

    python -m research.optimal_wor.wor_water_levels --corpus DIR --positions 32 --top 8

``--adversarial N`` searches for a level above 1 instead: ``N`` hill climbs (random
``V = 4..7``, ``k = 2..min(V - 1, 4)``, 150 steps each) on the logits of ``p`` and ``q``,
keeping a step when it raises the largest level, every construction in exact rationals (the
float point converted exactly); it reports the largest level reached per ``k`` and prints any
instance above 1 (refused by the rule):

    python -m research.optimal_wor.wor_water_levels --adversarial 40

``--corpus DIR --float`` runs the rule itself on such rows as floats instead: its float64
construction, certified by the selection law its levels realise (else redone in rationals),
per ``k`` in ``--ks``; where the draft tuples are too many to enumerate, its set masses and
its certificate come from the clock integral (:mod:`otm.rules.water_levels.clock_masses`). The same
rows are timed again on the verifier's path, which takes the compiled clock integral
(:mod:`decoding.verifiers.optimal.clock_masses`) from 1,000 tuples on (``--verifier-only``: that
path alone, for rows of a thousand tokens, where the numpy path takes minutes per row;
``--top-p MASS``: each law cut to its own nucleus over the whole vocabulary, as ``otm decode
--top-p`` does, instead of the ``--top`` likeliest tokens; ``--temperature T``, 1 by default;
a row past a path's limits is counted as refused):

    python -m research.optimal_wor.wor_water_levels --corpus DIR --positions 16 --top 30 --float --ks 3,4

``--corpus DIR --nesting-rate`` times the compiled nesting alone (the verifier's path) on
``--positions`` rows cut to ``--top`` tokens, per ``k`` in ``--ks``, against the work its time
estimate counts (``sum len^2 N k`` over the runs of flux,
:meth:`decoding.verifiers.optimal.clock_masses.CompiledClockSetMasses.nesting_seconds`), over the
nestings that take at least 0.05 s; and each nesting again right after without its table of
``e^{-q s}`` (``NESTING_TABLE_FLOATS = 0``: computed in every pass), as a ratio of the times:

    python -m research.optimal_wor.wor_water_levels --corpus DIR --positions 4 --top 300 --nesting-rate --ks 3,4,6,8

``--cost`` times the rule's batched verifier (:mod:`decoding.verifiers.optimal.wor`) at small
vocabularies, beside ``rrs_wor`` on the same rows and drafts: 20 distinct random softmax rows
per ``(V, k)``, the first call (per row the certified float64 construction, or on the clock
path a set-up from which the walk is decided by bounds, the construction only where they leave
it open) and a second call on the same rows (set-ups and constructions kept), in ms per row;
every size but the first has more than 1,000 draft tuples, the verifier's clock path.

    python -m research.optimal_wor.wor_water_levels --cost

``--quadrature`` measures the clock integral's trapezoid step
(:func:`otm.rules.water_levels.clock_masses.quadrature_step`): at steps 0.04 to 0.4 in ``log s``, the
largest relative error of every ``sigma`` and interval mass against the enumerated law on 40
random rows (5-8 tokens, ``k = 3..5``, ``q`` over 9 decades), and for ``k = 3..32`` against the
step 0.04 on 6 rows of 40 tokens each (``q`` over 3 and 12 decades; ``sigma`` and the masses of
two runs), beside the step the module takes; and the quadrature's lower end
(:func:`otm.rules.water_levels.clock_masses.lower_end`) against one at ``1e-10 / k``, at the module's
step, on the same kind of rows for ``k = 3..32`` (the nodes each takes):

    python -m research.optimal_wor.wor_water_levels --quadrature
"""
from __future__ import annotations

import argparse
import sys
import time
from unittest import mock

import numpy as np

from otm.draft_laws import iid_law, without_replacement_law
from otm.errors import NotApplicableError
from otm.formulations.prefix_scan import prefix_scan, ratio_order
from otm.rules import optimal_wor, water_levels
from otm.distributions import as_fractions
from otm.rules.water_levels.construction import water_level_parameters
from research.optimal_wor.wor_pair_rules import exact_instance, likeliest

LAWS = {"without_replacement": without_replacement_law, "iid": iid_law}


def check(p, q, k: int, law: str) -> dict:
    """One instance: the construction on ``law``'s draft sets, its acceptance against the
    prefix scan, its enumerated output law against ``p``."""
    draft_law = LAWS[law]
    try:
        params = water_level_parameters(p, q, ratio_order(p, q), water_levels.set_masses.set_masses(k, draft_law))
    except NotApplicableError:
        return {"refused": True}
    tuples = draft_law(q, k)
    selected = [p[0] * 0] * len(p)  # the selection law, summed over every draft tuple
    for draft, mass in zip(tuples.tuples, tuples.probs):
        chances = optimal_wor.member_chances(params.levels, [int(params.rank[int(t)]) for t in draft])
        for token, chance in zip(draft, chances):
            selected[int(token)] += mass * chance
    return {"refused": False, "largest": max(params.levels),
            "short": params.acceptance != prefix_scan(p, q, k, law).value,
            "not_x": any(a != b for a, b in zip(selected, params.selection))}


def random_instances(seed: int):
    """Exact ``(p, q, k)``: the instances of ``wor_pair_rules.py --exact`` with ``V >= 4``,
    ``k = 3..min(V - 1, 5)``."""
    rng = np.random.default_rng(seed)
    while True:
        p, q = exact_instance(rng)
        if len(p) >= 4:
            yield p, q, int(rng.integers(3, min(len(p) - 1, 5) + 1))


def corpus_instances(directory: str, positions: int, top: int):
    """Real rows cut to their ``top`` likeliest tokens, as exact rationals, every ``k``."""
    from otm.corpus import Corpus

    for _, _, p, q in Corpus(directory).spaced_rows(positions, 1.0):
        keep = np.argsort(-(p + q))[:top]
        p, q = (as_fractions(v[keep]) for v in (p, q))
        for k in range(3, min(top - 1, 5) + 1):
            yield p, q, k


def warm_compiled_code() -> None:
    """Load the compiled clock path from numba's cache (or compile it) before anything is timed:
    one row of 12 tokens at ``k = 3`` (1,320 draft tuples, past the compiled path's threshold)."""
    from decoding.verifiers.optimal.clock_masses import CompiledClockSetMasses

    p, q = (np.exp(np.linspace(0, shift, 12)) for shift in (2.0, -1.0))
    water_levels.wor_parameters(p / p.sum(), q / q.sum(), 3, clock_masses=CompiledClockSetMasses)


def float_rows(directory: str, positions: int, top: int, ks: list[int], verifier_only: bool = False,
               top_p: float | None = None, temperature: float = 1.0) -> None:
    """The rule's float64 construction on real rows cut to ``top`` tokens (module docstring):
    per ``k``, how often float64 was certified (the others were redone wider and certified
    again), on how many rows a level above 1 by rounding was set to 1, the largest realised error over all rows, the largest level, the largest
    ``|acceptance - alpha*|`` and the time; side by side, the rule's default path (the tuples
    enumerated up to 2 million, the numpy clock integral beyond) and the verifier's (the
    compiled clock integral from 1,000 tuples on), on the same rows."""
    from decoding.verifiers.optimal.clock_masses import CompiledClockSetMasses
    from otm.corpus import Corpus
    from otm.formulations.prefix_scan import prefix_scan

    warm_compiled_code()
    rows = Corpus(directory).spaced_rows(positions, temperature, top_p)
    paths = {"rule (numpy)": {}, "verifier (compiled)": {"clock_masses": CompiledClockSetMasses}}
    if verifier_only:  # the numpy path takes minutes per row past a few hundred tokens
        del paths["rule (numpy)"]
    stats = {(k, name): {"certified": 0, "clock": 0, "error": 0.0, "largest": 0.0, "gap": 0.0, "seconds": 0.0,
                         "refused": 0, "exhausted": 0, "capped": 0} for k in ks for name in paths}
    for done, (_, _, p, q) in enumerate(rows, 1):
        if top_p is None:
            p, q = likeliest(p, q, top)
        for k in ks:
            optimum = None  # the prefix scan's alpha*, once per row and k
            for name, options in paths.items():
                began = time.perf_counter()
                row = stats[(k, name)]
                try:
                    params = water_levels.wor_parameters(p, q, k, **options)
                except NotApplicableError as refusal:  # past the limits: counted, and its time
                    row["refused"] += 1
                    row["seconds"] += time.perf_counter() - began
                    print(f"  refused: {refusal}", file=sys.stderr, flush=True)
                    continue
                row["seconds"] += time.perf_counter() - began
                if len(params.order) <= k:  # at most k tokens with q > 0: always the same set, no levels
                    row["exhausted"] += 1
                    continue
                optimum = prefix_scan(p, q, k, "without_replacement").value if optimum is None else optimum
                row["gap"] = max(row["gap"], abs(params.acceptance - optimum))
                clock = "clock integral" in params.arithmetic  # too many tuples to enumerate
                row["clock"] += clock
                row["certified"] += params.arithmetic.startswith("float64")
                row["capped"] += "set to 1" in params.arithmetic
                realised = water_levels.parameters.clock_realised_error if clock else water_levels.parameters.realised_error
                row["error"] = max(row["error"], realised(params, q, k))
                row["largest"] = max(row["largest"], max(params.levels))
        print(f"  {done}/{len(rows)} rows", file=sys.stderr, flush=True)
    cut = f"to their top-p {top_p} nuclei" if top_p is not None else f"to {top} tokens"
    print(f"float64 construction on {len(rows)} corpus rows at temperature {temperature}, cut {cut}")
    print("| k | path | rows | refused | at most k tokens with q > 0 | set masses by the clock integral | certified in "
          "float64 (others redone wider) | a level above 1 by rounding set to 1 | largest realised error | largest level | largest |acceptance - alpha*| "
          "| seconds per row |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (k, name), row in stats.items():
        print(f"| {k} | {name} | {len(rows)} | {row['refused']} | {row['exhausted']} | {row['clock']} | {row['certified']} "
              f"| {row['capped']} | {row['error']:.1e} | {row['largest']:.6f} | {row['gap']:.1e} | {row['seconds'] / len(rows):.2f} |")


def nesting_rate(directory: str, positions: int, top: int, ks: list[int]) -> None:
    """Seconds of the compiled nesting per unit of its estimated work, on real rows (module
    docstring, ``--nesting-rate``)."""
    from decoding.verifiers.optimal.clock_masses import CompiledClockSetMasses
    from otm.corpus import Corpus
    timed: list = []

    class TimedMasses(CompiledClockSetMasses):
        def water_levels(self, flux, lo, hi, levels, unit):
            work = self.nesting_seconds(np.asarray(flux, dtype=np.float64), lo, hi)[0] * self.NESTING_RATE
            spare = list(levels)
            began = time.perf_counter()
            done = super().water_levels(flux, lo, hi, levels, unit)
            seconds = time.perf_counter() - began
            self.NESTING_TABLE_FLOATS = 0  # the same nesting again, computing e^{-q s} in every pass
            began = time.perf_counter()
            super().water_levels(flux, lo, hi, spare, unit)
            del self.NESTING_TABLE_FLOATS
            timed.append((self.k, work, seconds, time.perf_counter() - began))
            return done

    warm_compiled_code()
    rows = Corpus(directory).spaced_rows(positions, 1.0)
    water_levels.wor_parameters(*likeliest(rows[0][2], rows[0][3], 30), 3, clock_masses=TimedMasses)  # compiled
    timed.clear()
    for k in ks:
        for _, _, p, q in rows:
            water_levels.wor_parameters(*likeliest(p, q, top), k, clock_masses=TimedMasses)
        print(f"  k = {k} done", file=sys.stderr, flush=True)
    print(f"the compiled nesting on {len(rows)} corpus rows cut to {top} tokens, nestings of at least 0.05 s")
    print("| k | nestings | work units (len^2 N k) per second | seconds per len^2 N | without the table of e^{-q s} "
          "(time / time with it) |")
    print("|---|---|---|---|---|")
    for k in ks:
        kept = [(work, seconds, bare) for kk, work, seconds, bare in timed if kk == k and seconds >= 0.05]
        if kept:
            per = [seconds / work for work, seconds, _ in kept]
            slower = [bare / seconds for _, seconds, bare in kept]
            print(f"| {k} | {len(per)} | {1 / max(per):.3g}-{1 / min(per):.3g} | {k * min(per):.2e}-{k * max(per):.2e} "
                  f"| {min(slower):.2f}-{max(slower):.2f} |")


def largest_level(logits_p: np.ndarray, logits_q: np.ndarray, k: int):
    """The largest water level of the exact construction at ``softmax`` of the logits, or
    ``None`` where it refuses (a level above 1)."""
    p, q = (as_fractions(np.exp(v - v.max())) for v in (logits_p, logits_q))
    try:
        return max(water_level_parameters(p, q, ratio_order(p, q), water_levels.set_masses.set_masses(k)).levels)
    except NotApplicableError:
        return None


def adversarial(restarts: int, seed: int, steps: int = 150) -> None:
    """Hill climbs on the logits maximising the largest level (module docstring)."""
    rng = np.random.default_rng(seed)
    best: dict = {}
    began = time.perf_counter()
    for restart in range(restarts):
        V = int(rng.integers(4, 8))
        k = int(rng.integers(2, min(V - 1, 4) + 1))
        lp, lq = rng.normal(0, 2, V), rng.normal(0, 2, V)
        level, step = largest_level(lp, lq, k), 1.0
        for _ in range(steps):
            if level is None:
                print(f"ABOVE 1: k={k}, p={list(as_fractions(np.exp(lp - lp.max())))}, "
                      f"q={list(as_fractions(np.exp(lq - lq.max())))}", flush=True)
                break
            trial_p, trial_q = lp + rng.normal(0, step, V), lq + rng.normal(0, step, V)
            trial = largest_level(trial_p, trial_q, k)
            if trial is None or trial > level:
                lp, lq, level = trial_p, trial_q, trial
            else:
                step *= 0.98
        best[k] = max(best.get(k, 0), 2 if level is None else level)
        print(f"  climb {restart + 1}/{restarts}: V={V} k={k} largest level {float(level or 2):.12f} "
              f"({time.perf_counter() - began:.0f} s)", file=sys.stderr, flush=True)
    print(f"adversarial search, exact rationals, {restarts} climbs of {steps} steps, seed {seed}, "
          f"{time.perf_counter() - began:.0f} s")
    for k in sorted(best):
        shown = "above 1 (see above)" if best[k] == 2 else f"{float(1 - best[k]):.3g} below 1"
        print(f"k = {k}: largest level reached {shown}")


def cost(rows: int = 20, sizes=((8, 3), (8, 4), (12, 3), (12, 4), (30, 3), (20, 4), (150, 3), (60, 5))) -> None:
    """The verifier's cost per row at small vocabularies (module docstring)."""
    import torch

    from decoding.verifiers.optimal import wor as verifier
    from decoding.verifiers import rrs_wor

    warm_compiled_code()
    print("| V | k | optimal_wor, distinct rows (ms / row) | again, kept (ms / row) | rrs_wor (ms / row) |")
    print("|---|---|---|---|---|")
    for V, k in sizes:
        g = torch.Generator().manual_seed(0)
        p, q = (torch.softmax(2 * torch.randn(rows, V, generator=g, dtype=torch.float64), -1) for _ in range(2))
        drafts = verifier.sample_drafts(q, k, g)
        per_draft = q.unsqueeze(1).expand(rows, k, V)
        times = []
        for module in (verifier, verifier, rrs_wor):
            began = time.perf_counter()
            module.verify(p, per_draft, drafts, g)
            times.append((time.perf_counter() - began) / rows * 1e3)
        print(f"| {V} | {k} | {times[0]:.1f} | {times[1]:.2f} | {times[2]:.2f} |")


def quadrature(seed: int = 1) -> None:
    """The trapezoid step against the enumerated law and against a fine step (module docstring)."""
    from otm.draft_laws import without_replacement_law
    from otm.rules.water_levels import clock_masses as clock

    def masses_at(step: float, q: np.ndarray, k: int, lower_end=None):
        with mock.patch.object(clock, "quadrature_step", lambda _: step), \
                mock.patch.object(clock, "lower_end", lower_end or clock.lower_end):
            return clock.ClockSetMasses(q, k)

    def relative(a: float, b: float) -> float:
        return abs(a - b) / b if b > 0 else abs(a)

    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(40):
        n = int(rng.integers(5, 9))
        k = int(rng.integers(3, min(5, n - 1) + 1))
        q = 10.0 ** rng.uniform(-9, 0, n)
        rows.append((q / q.sum(), k))
    exact = []
    for q, k in rows:
        law = without_replacement_law(q, k)
        sets = [(set(int(r) for r in ranks), float(mass)) for ranks, mass in zip(law.tuples, law.probs)]
        sigma = np.zeros(len(q))
        for members, mass in sets:
            sigma[max(members)] += mass
        across = {(f, j, t): sum(mass for members, mass in sets if max(members) <= t
                                 and any(f <= r < j for r in members) and any(j <= r for r in members))
                  for f in range(len(q) - 1) for t in range(f + 1, len(q)) for j in range(f + 1, t + 1)}
        exact.append((sigma, across))
    steps = (0.04, 0.08, 0.12, 0.16, 0.2, 0.25, 0.3, 0.4)
    print("against the enumerated law (40 rows, 5-8 tokens, k = 3..5):")
    print("| step | largest relative error | most nodes |")
    print("|---|---|---|")
    for step in steps:
        worst, nodes = 0.0, 0
        for (q, k), (sigma, across) in zip(rows, exact):
            masses = masses_at(step, q, k)
            nodes = max(nodes, masses.s.size)
            worst = max([worst] + [relative(a, b) for a, b in zip(masses.sigma, sigma)]
                        + [relative(masses.across(*key), value) for key, value in across.items()])
        print(f"| {step} | {worst:.1e} | {nodes} |", flush=True)
    print("against step 0.04 (6 rows of 40 tokens per k, q over 3 and 12 decades):")
    print("| k | the module's step | " + " | ".join(f"step {step}" for step in steps[2:7]) + " |")
    print("|---|---|" + "---|" * 5)
    for k in (3, 5, 8, 12, 16, 24, 32):
        worst = dict.fromkeys(steps[2:7], 0.0)
        for trial in range(6):
            q = 10.0 ** rng.uniform(-12 if trial % 2 else -3, 0, 40)
            q /= q.sum()
            reference = masses_at(0.04, q, k)
            cuts = [(f, j, 39) for f in (0, 10) for j in range(f + 1, 40)]
            fine = [reference.across(*cut) for cut in cuts]
            for step in worst:
                masses = masses_at(step, q, k)
                errors = [relative(a, b) for a, b in zip(masses.sigma, reference.sigma) if b > 0]
                errors += [relative(masses.across(*cut), b) for cut, b in zip(cuts, fine) if b > 0]
                worst[step] = max(worst[step], max(errors))
        print(f"| {k} | {clock.quadrature_step(k):.3f} | " + " | ".join(f"{v:.1e}" for v in worst.values()) + " |",
              flush=True)
    print("the lower end against one at 1e-10 / k (the module's step; 6 rows of 40 tokens per k, q over 3 and 12 "
          "decades):")
    print("| k | lower end | nodes (at 1e-10 / k) | largest relative error |")
    print("|---|---|---|---|")
    for k in (3, 4, 5, 6, 8, 12, 16, 24, 32):
        worst, nodes = 0.0, ""
        for trial in range(6):
            q = 10.0 ** rng.uniform(-12 if trial % 2 else -3, 0, 40)
            q /= q.sum()
            step = clock.quadrature_step(k)
            reference, masses = masses_at(step, q, k, lambda k: 1e-10 / k), masses_at(step, q, k)
            nodes = nodes or f"{masses.s.size} ({reference.s.size})"
            cuts = [(f, j, 39) for f in (0, 10) for j in range(f + 1, 40)]
            errors = [relative(a, b) for a, b in zip(masses.sigma, reference.sigma) if b > 0]
            errors += [relative(masses.across(*cut), reference.across(*cut)) for cut in cuts if reference.across(*cut) > 0]
            worst = max(worst, max(errors))
        print(f"| {k} | {clock.lower_end(k):.2g} | {nodes} | {worst:.1e} |", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=600)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--law", choices=tuple(LAWS), default="without_replacement")
    parser.add_argument("--corpus", default=None, help="real rows of this otm corpus directory instead")
    parser.add_argument("--positions", type=int, default=32)
    parser.add_argument("--top", type=int, default=8)
    parser.add_argument("--adversarial", type=int, default=0, metavar="N", help="N hill climbs for a level above 1")
    parser.add_argument("--cost", action="store_true", help="time the batched verifier at small vocabularies")
    parser.add_argument("--float", action="store_true", help="with --corpus: the rule's certified float64 construction")
    parser.add_argument("--ks", default="3,4", help="with --corpus --float: the numbers of drafts")
    parser.add_argument("--verifier-only", action="store_true", help="with --float: the compiled path alone")
    parser.add_argument("--top-p", type=float, default=None,
                        help="with --float: cut each law to its own top-p nucleus (over the whole vocabulary) "
                             "instead of --top")
    parser.add_argument("--temperature", type=float, default=1.0, help="with --float: the rows' temperature")
    parser.add_argument("--nesting-rate", action="store_true",
                        help="with --corpus: time the compiled nesting against its estimated work")
    parser.add_argument("--quadrature", action="store_true", help="the clock integral's step against exact laws")
    args = parser.parse_args(argv)
    if args.quadrature:
        print("the clock integral at 8 steps on 40 small rows and 42 rows of 40 tokens: about a minute", file=sys.stderr)
        return quadrature()
    if args.cost:
        return cost()
    if args.nesting_rate:
        return nesting_rate(args.corpus, args.positions, args.top, [int(k) for k in args.ks.split(",")])
    if args.float:
        return float_rows(args.corpus, args.positions, args.top, [int(k) for k in args.ks.split(",")],
                          args.verifier_only, args.top_p, args.temperature)
    if args.adversarial:
        return adversarial(args.adversarial, args.seed)
    instances = corpus_instances(args.corpus, args.positions, args.top) if args.corpus else random_instances(args.seed)
    total = args.positions * len(range(3, min(args.top - 1, 5) + 1)) if args.corpus else args.instances
    rows: dict = {}
    print(f"{total} instances in exact rationals: about 0.4 s each for random ones, "
          f"{'seconds to minutes each for real rows (more at larger --top)' if args.corpus else 'more at V = 9, k = 5'}",
          file=sys.stderr, flush=True)
    began = time.perf_counter()
    done = 0
    for p, q, k in instances:
        if done == total:
            break
        result = check(p, q, k, args.law)
        row = rows.setdefault(k, {"instances": 0, "refused": 0, "short": 0, "not_x": 0, "largest": 0})
        row["instances"] += 1
        row["refused"] += result["refused"]
        if not result["refused"]:
            for key in ("short", "not_x"):
                row[key] += result[key]
            row["largest"] = max(row["largest"], result["largest"])
        done += 1
        if args.corpus or done % 20 == 0:
            print(f"  {done}/{total} instances ({time.perf_counter() - began:.0f} s)", file=sys.stderr, flush=True)
    source = f"{args.positions} corpus rows cut to {args.top} tokens" if args.corpus else f"random instances, seed {args.seed}"
    print(f"water levels on {args.law} draft sets, exact rationals, {done} instances ({source}), "
          f"{time.perf_counter() - began:.0f} s")
    print("| k | instances | level above 1 (refused) | sum min(p, x) != alpha* | enumerated selection law != x "
          "| largest level |")
    print("|---|---|---|---|---|---|")
    for k in sorted(rows):
        r = rows[k]
        print(f"| {k} | {r['instances']} | {r['refused']} | {r['short']} | {r['not_x']} "
              f"| {float(r['largest']):.6g} |")


if __name__ == "__main__":
    main()
