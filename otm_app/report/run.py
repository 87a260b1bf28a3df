"""``otm report``: the toolkit's main job in one command.

1. summarise the theorem suite's rows (:func:`proofs.suite.run_theorems`, run by
   :mod:`otm_app.commands.report` and passed in);
2. teacher-force the built-in texts through the model pair (full 151,936-token
   distributions, float32 logits) and compute per position the OTM optimum for i.i.d. and
   without-replacement drafts at ``k = 1..k_max`` and every rule's acceptance at each
   temperature (:mod:`otm_app.report.position_sweep`: what is exact, on which positions, and
   what is a labelled Monte Carlo estimate); figures of acceptance vs ``k`` per rule
   against the optimum, of the per-position gaps, and of the optimum against temperature;
3. a short speculative decoding per rule on the pair: its realised block efficiency
   (:mod:`otm_app.report.decode`); every rule's expected tokens per target call on trees
   drafted at the same contexts, coins integrated out, paired against a baseline rule
   (:mod:`otm_app.report.paired`); then the sequence verifiers (block verification on a
   chain, traversal verification on the tree) with the same budget, each against its
   node-wise counterpart on the same drafts;
4. a self-contained folder (``report.md``, PNG figures, ``summary.json``) and a printed
   summary table.

``--no-models`` replaces the pair by toy Gaussian distributions (no model, no decoding;
the report says so); ``--pair tiny`` uses tiny random Qwen2-architecture models (tests).

Before each slow step the estimate of :mod:`otm_app.report.budget` is printed, after it the
time it took. Entry point: :func:`run_report` ``(ReportConfig, theorem_rows, clock) -> summary
dict``; :func:`summary_table` formats the summary (``run_report`` prints it unless ``json``).
"""
from __future__ import annotations

import contextlib
import math
import shlex
import shutil
import sys
import time
from dataclasses import dataclass, replace

import numpy as np

from otm.tables import OPTIMAL_IID, OPTIMAL_WOR, PositionTable, optimum_violations
from otm.errors import OTMError, UnknownNameError
from otm.rules import rule_specs
from otm.rules.rrs_wor import unseen_paths_bound
from otm.tolerances import AGREEMENT_TOLERANCE

from ..configs import ReportConfig
from ..outputs import output_folder
from ..sweep.engine import local_workers
from .budget import PAIR_PARAMETERS, StepClock, decoding_parts, load_and_score_parts, model_parameters, scored_tokens, sweep_parts

#: Temperatures of the optimum-vs-temperature sweep.
DEFAULT_SWEEP_TEMPERATURES = (0.3, 0.45, 0.6, 0.8, 1.0, 1.25, 1.5)

#: The largest ``--k-max`` the report takes: each k is a column at every position.
MAX_REPORT_K = 32

def check_config(args: ReportConfig) -> None:
    """:class:`OTMError` for a setting out of its range, before anything runs (``otm report``
    calls it before the theorem suite, so a bad flag does not wait a minute for its error)."""
    for name, value in (("positions", args.positions), ("sweep_positions", args.sweep_positions),
                        ("workers", args.workers), ("seed", args.seed)):
        if value < 0:
            raise OTMError(f"--{name.replace('_', '-')} must be >= 0, got {value}")
    if not (args.decode_temperature >= 0 and math.isfinite(args.decode_temperature)):
        raise OTMError(f"--decode-temperature must be a finite number >= 0 (0 = argmax), got {args.decode_temperature}")
    if not args.no_decode and not args.no_models:
        from decoding.runtime.trees import parse_tree

        parse_tree(args.tree)
    if not args.no_models:
        from otm_app.report.sources import resolve_texts

        resolve_texts(args.texts)  # an unknown name or an unreadable file, before any work
    if not 1 <= args.k_max <= MAX_REPORT_K:
        raise OTMError(f"--k-max must be in 1..{MAX_REPORT_K} (each k is a column at every position), got {args.k_max}")
    lossless = [spec.name for spec in rule_specs(lossless=True)]
    for rule in args.rules:
        if rule not in lossless:
            raise UnknownNameError(f"unknown rule {rule!r} for the report; choose from {', '.join(lossless)}")
    if args.max_new_tokens < 1:
        raise OTMError(f"--max-new-tokens must be >= 1, got {args.max_new_tokens}")
    if args.decode_prompts < 1:
        raise OTMError(f"--decode-prompts must be >= 1, got {args.decode_prompts}")
    if args.mc_paths < 2:
        raise OTMError(f"--mc-paths must be >= 2 (a standard error needs two paths), got {args.mc_paths}")


def summarise_theorems(rows: list) -> dict:
    """Counts per status and the claims that do not hold."""
    counts = {status: sum(r.get("status") == status for r in rows) for status in ("holds", "fails", "not checkable")}
    failing = [{"id": r.get("id"), "status": r.get("status"), "note": r.get("note", "")} for r in rows if r.get("status") != "holds"]
    return {"total": len(rows), **counts, "failing": failing}


def _progress_factory(quiet: bool):
    if quiet:
        return lambda desc: None
    from tqdm.auto import tqdm

    return lambda desc: (lambda items: tqdm(items, desc=desc, file=sys.stderr, leave=False))


def run_report(args: ReportConfig, theorem_rows: list | None = None, clock: StepClock | None = None) -> dict:
    """Run the four steps (module docstring) and write the report to ``args.out``.

    Args:
        args: the :class:`otm_app.configs.ReportConfig`.
        theorem_rows: ``proofs.suite.run_theorems(...)``'s rows (``None``: not run).
        clock: the :class:`otm_app.report.budget.StepClock` that timed step 1 (the report's
            total wall time counts from its start); a new one when ``None``.

    Returns:
        the summary dict (also written to ``OUT/summary.json``).

    Raises:
        decoding.models.ModelPackageMissingError: the Qwen pair's wheels are missing (the
            message is extended with the ``--no-models`` hint).
    """
    check_config(args)
    from otm_app.report.sources import resolve_texts, toy_texts

    clock = clock or StepClock(args.quiet)
    progress = _progress_factory(args.quiet)
    folder = output_folder(args.out)
    theorem_rows = list(theorem_rows or [])
    texts = resolve_texts(args.texts)

    pair = None
    if args.no_models:
        scored, mode = toy_texts(args.seed), "toy"
    else:
        pair, scored = _score_with_models(args, texts, progress, clock)
        mode = args.pair
    acceptance = _acceptance_step(args, scored, folder, clock, progress)
    scored = without_logits(scored)  # step 3 would hold them beside both models
    decoding, paired, sequence_verifiers = _decoding_step(args, pair, scored, texts, clock, progress)
    if pair is not None:
        pair.release()

    tick = time.perf_counter()
    summary = {
        "command": command_line(args),
        "mode": mode,
        "source": scored.source,
        "out": str(folder),
        "texts": [{"name": s.name, "kind": kind, "positions": s.n_positions} for s, kind in zip(scored.scores, scored.kinds)],
        "ks": list(acceptance.ks),
        "temperatures": list(args.temperatures),
        "rules": list(args.rules),
        "theorems": summarise_theorems(theorem_rows),
        **acceptance.summary(args, scored),
        "decoding": decoding,
        "paired": paired,
        "sequence_verifiers": sequence_verifiers,
    }
    _write_report(args, folder, summary, acceptance, theorem_rows, clock, tick)
    if not args.json:
        print(summary_table(summary))
    return summary


@dataclass(frozen=True)
class _AcceptanceStep:
    """What step 2 computed: the per-position tables by temperature, over ``k = 1..k_max``,
    and the optimum against temperature on ``sweep_rows``."""

    ks: tuple
    positions: dict
    sweep_rows: np.ndarray
    temperature_table: object

    def summary(self, args: ReportConfig, scored) -> dict:
        """Its entries of the summary: ``acceptance`` and ``optimum_vs_temperature``."""
        return {
            "acceptance": {f"{t:g}": _acceptance_summary(result, scored, args.mc_paths) for t, result in self.positions.items()},
            "optimum_vs_temperature": {"positions": int(self.sweep_rows.size), "temperatures": list(DEFAULT_SWEEP_TEMPERATURES),
                                       "columns": {n: v.tolist() for n, v in self.temperature_table.columns.items()}},
        }


def _acceptance_step(args: ReportConfig, scored, folder, clock: StepClock, progress) -> _AcceptanceStep:
    """Step 2: every column at the analysed positions and temperatures (on the sweep engine),
    then the optimum against temperature."""
    from otm_app.report.position_sweep import PositionSettings, analyse_positions, optimum_vs_temperature, spaced_rows

    ks = tuple(range(1, args.k_max + 1))
    settings = PositionSettings(ks, tuple(args.rules), args.positions, args.mc_paths, args.workers)
    sweep_rows = spaced_rows(scored.n_positions, args.sweep_positions)
    n_analysed, workers = spaced_rows(scored.n_positions, args.positions).size, local_workers(args.workers)
    clock.start("acceptance", "step 2/4",
                f"every column at {n_analysed} positions x {len(args.temperatures)} temperatures, k = 1..{args.k_max}, on "
                f"{workers} Dask worker(s), then the temperature sweep on {sweep_rows.size} positions",
                sweep_parts(n_analysed, len(args.temperatures), args.k_max, scored.vocab_size, workers, sweep_rows.size,
                            len(DEFAULT_SWEEP_TEMPERATURES)), " (--positions 64 for a quick look)")
    positions = analyse_positions(scored, args.temperatures, settings, folder, args.seed, quiet=args.quiet)
    if not args.keep_corpus:
        shutil.rmtree(folder / "corpus", ignore_errors=True)
    sweep_ks = sorted({k for k in (1, 2, 4, args.k_max) if k <= args.k_max})
    temperature_table = optimum_vs_temperature(*scored.logits_at(sweep_rows), range(sweep_rows.size), DEFAULT_SWEEP_TEMPERATURES,
                                               sweep_ks, scored.source, progress("temperature sweep"))
    clock.end("acceptance")
    return _AcceptanceStep(ks, positions, sweep_rows, temperature_table)


def without_logits(scored):
    """``scored`` without its teacher-forced logits (``2 x rows x V`` float32, the report's
    largest arrays): each text keeps its name, token ids and row count (zero-width logits),
    which is all that step 3 and the summary read of it."""
    def light(score):
        empty = np.empty((score.n_positions, 0), dtype=np.float32)
        return replace(score, target_logits=empty, draft_logits=empty)

    return replace(scored, scores=[light(score) for score in scored.scores])


def _decoding_step(args: ReportConfig, pair, scored, texts, clock: StepClock, progress) -> tuple[dict, dict, dict]:
    """Step 3 (:func:`_decode`), or its three summary entries saying why it was skipped."""
    from otm_app.report.sources import decoding_prompts

    reason = "--no-models: there is no model pair to decode with" if args.no_models else "--no-decode" if args.no_decode else ""
    if reason:
        return {"rows": [], "reason": reason}, {"rows": [], "skipped": [], "reason": reason}, {"rows": [], "reason": reason, "checks": []}
    return _decode(args, pair, scored, decoding_prompts(pair, texts, args.seed, args.decode_prompts), clock, progress)


def _write_report(args: ReportConfig, folder, summary: dict, acceptance: _AcceptanceStep, theorem_rows: list,
                  clock: StepClock, tick: float) -> None:
    """Step 4: the figures and ``report.md``; ``summary`` gets their paths and the step times
    (writing timed from ``tick``)."""
    from otm_app.report.write import write_figures, write_markdown

    gap_ks = sorted({2, args.k_max} & set(acceptance.ks))
    summary["figures"] = write_figures(folder, acceptance.positions, acceptance.temperature_table, theorem_rows, gap_ks)
    summary["wall_seconds"] = {**clock.actual, "writing": time.perf_counter() - tick, "total": clock.elapsed()}
    summary["estimated_seconds"] = dict(clock.estimated)
    summary["report"] = str(write_markdown(folder, summary, acceptance.positions, acceptance.temperature_table,
                                           summary["figures"], theorem_rows))


#: torch threads of the models in step 3. Fixed, whatever the machine and its load: on the
#: CPU a bfloat16 matrix product's rounding depends on how many threads share its sum, so
#: step 3's draws, hence its numbers, would change with the thread count; and one thread is
#: the fastest on a busy machine, where threads wait for each other at every parallel region
#: of a forward (docs/report.md, "Budget and measured wall time").
DECODE_THREADS = 1


def paired_positions(args: ReportConfig) -> int:
    """Positions of the paired comparison: as many as the tokens each rule decodes
    (``--decode-prompts`` x ``--max-new-tokens``)."""
    return args.decode_prompts * args.max_new_tokens


def _decode(args: ReportConfig, pair, scored, prompts: list, clock: StepClock, progress) -> tuple[dict, dict, dict]:
    """Step 3: the realised decodes, the paired comparison, the sequence verifiers, the models
    on :data:`DECODE_THREADS` torch threads."""
    from decoding.runtime.trees import parse_tree
    from otm_app.report.decode import rule_tree
    from otm_app.report.paired import draft_groups

    groups, _ = draft_groups(args.rules, args.tree)
    inner = {spec: int((parse_tree(spec).n_children > 0).sum()) for spec, _ in groups}
    kernel_nodes = {rule: inner[rule_tree(rule, args.tree)] for members in groups.values() for rule in members}
    decodes, n_paired = len(args.rules) + 2, paired_positions(args)
    with torch_threads(DECODE_THREADS) as threads:
        clock.start("decoding", "step 3/4",
                    f"{decodes} decodes ({len(args.rules)} rules, block and traversal verification) x {len(prompts)} prompts x "
                    f"{args.max_new_tokens} tokens, and every rule's expected tokens per call at {n_paired} positions",
                    decoding_parts(model_parameters(pair), pair.vocab_size, decodes * len(prompts), args.max_new_tokens,
                                   n_paired, 1 + sum(inner.values()), kernel_nodes, threads),
                    " (--no-decode skips it)")
        return _decode_step(args, pair, scored, prompts, clock, progress)


def _decode_step(args: ReportConfig, pair, scored, prompts: list, clock: StepClock, progress) -> tuple[dict, dict, dict]:
    """Step 3 after its estimate (:func:`_decode`)."""
    from otm_app.report.decode import decode_rules, decode_sequence_verifiers, sequence_checks
    from otm_app.report.paired import compare_rules

    n_paired = paired_positions(args)
    settings = {"temperature": args.decode_temperature, "max_new_tokens": args.max_new_tokens, "seed": args.seed,
                "prompts": [label for label, _ in prompts]}
    tick = time.perf_counter()
    decoding = {"rows": decode_rules(pair, prompts, args.rules, args.tree, args.decode_temperature, args.max_new_tokens, args.seed,
                                     progress=not args.quiet), **settings}
    clock.note("realised_decodes", time.perf_counter() - tick)
    paired = compare_rules(pair, scored, args.rules, args.tree, args.decode_temperature, n_paired, args.seed, progress("paired"))
    clock.note("paired", paired["wall_seconds"])
    tick = time.perf_counter()
    rows = decode_sequence_verifiers(pair, prompts, args.tree, args.decode_temperature, args.max_new_tokens, args.seed,
                                     progress=not args.quiet)
    clock.note("sequence_verifiers", time.perf_counter() - tick)
    clock.end("decoding")
    return decoding, paired, {"rows": rows, "checks": sequence_checks(rows), **settings}


def command_line(args: ReportConfig) -> str:
    """``otm report`` with the options of ``args`` that differ from their defaults."""
    parts = ["otm", "report"]
    for name, value in args.non_defaults().items():
        if name in ("json", "quiet"):
            continue
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            parts.append(flag)
        else:
            parts += [flag, ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value) if isinstance(value, tuple) else str(value)]
    return " ".join(shlex.quote(p) for p in parts)


def _score_with_models(args, texts, progress, clock: StepClock):
    import torch

    from decoding.models import ModelPackageMissingError
    from otm_app.report.sources import load_report_pair, score_report_texts

    tokens = scored_tokens(args.pair, texts)
    clock.start("scoring", "step 2/4", f"loading the {args.pair} pair and scoring about {tokens} tokens",
                load_and_score_parts(PAIR_PARAMETERS[args.pair], tokens, torch.get_num_threads()))
    try:
        pair = load_report_pair(args.pair, args.device, args.dtype)
    except ModelPackageMissingError as exc:
        raise ModelPackageMissingError(f"{exc}. Or run `otm report --no-models` for a report on toy distributions without any model.") from exc
    scored = score_report_texts(pair, texts, args.seed, progress("scoring"))
    clock.end("scoring")
    return pair, scored


@contextlib.contextmanager
def torch_threads(threads: int):
    """torch's intra-op threads set to ``threads`` inside the block, restored after it."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield threads
    finally:
        torch.set_num_threads(before)


def _acceptance_summary(result, scored, mc_paths: int) -> dict:
    """Means per ``k`` of every column over the analysed positions (the same for all), and
    the i.i.d. optimum per text."""
    texts = scored.text_of_row[result.rows]
    optimum = result.table.columns[OPTIMAL_IID]
    by_text = {s.name: np.nanmean(optimum[texts == i], axis=0).tolist() for i, s in enumerate(scored.scores) if (texts == i).any()}
    means = result.table.mean_over_positions()
    return {
        "positions": int(result.rows.size),
        "columns": {name: values.tolist() for name, values in means.columns.items()},
        "optimum_iid_by_text": by_text,
        "rrs_wor_standard_error": _mean_error(result).tolist(),
        "rrs_wor_monte_carlo": result.monte_carlo.any(axis=0).tolist(),
        "optimal_gains": optimal_gains(result),
        **{_gains_key(name): optimal_gains(result, name) for name in GAIN_RULES if name != "optimal"},
        "notes": dict(result.notes),
        "checks": _sanity_checks(result, mc_paths),
    }


#: The rules each optimal verifier is compared with, position by position (the registry's
#: ``gain_baselines``): the i.i.d. one with every rule on its own draft law, the ones without
#: replacement (``k`` drafts, and two) with RRSw.
GAIN_RULES = {spec.name: spec.gain_baselines for spec in rule_specs() if spec.gain_baselines}


def optimal_gains(result, optimal: str = "optimal") -> dict:
    """Per ``k``: mean and standard error over positions of ``optimal - rule`` for each rule
    of ``GAIN_RULES[optimal]`` that was computed (each rule on its own draft law; NaN cells
    left out: spechub exists at ``k = 2`` only, the water-level rule from ``k = 2``);
    for ``rrs_wor``, also ``monte_carlo_error``: the Monte Carlo standard error of that mean
    over the same positions (0 where every cell is exact)."""
    columns = result.table.columns
    if optimal not in columns:
        return {}
    out = {}
    for rule in GAIN_RULES[optimal]:
        if rule not in columns:
            continue
        gain = columns[optimal] - columns[rule]
        n = (~np.isnan(gain)).sum(axis=0)
        mean = np.where(n > 0, np.nansum(gain, axis=0) / np.maximum(n, 1), np.nan)
        std = np.array([np.nanstd(gain[:, a], ddof=1) if n[a] > 1 else np.nan for a in range(gain.shape[1])])
        out[rule] = {"mean": mean.tolist(), "standard_error": (std / np.sqrt(np.maximum(n, 1))).tolist(), "positions": n.tolist()}
        if rule == "rrs_wor":
            out[rule]["monte_carlo_error"] = _mean_error(result, ~np.isnan(gain)).tolist()
    return out


def _gains_key(optimal: str) -> str:
    """The summary key of :func:`optimal_gains` for ``optimal``."""
    return "optimal_gains" if optimal == "optimal" else f"{optimal}_gains"


def _mean_error(result, cells: np.ndarray | None = None) -> np.ndarray:
    """``[m]`` Monte Carlo standard error of the mean ``rrs_wor`` over positions
    (independent per position; 0 where every cell is exact), over the ``cells`` ``[n, m]``
    where given (a difference's defined cells), else over every cell it has."""
    errors = result.mc_error if cells is None else np.where(cells, result.mc_error, np.nan)
    counts = (~np.isnan(errors)).sum(axis=0)
    return np.sqrt(np.nansum(errors**2, axis=0)) / np.maximum(counts, 1)


#: Standard errors by which a Monte Carlo estimate of rrs_wor may exceed its optimum
#: before it is flagged (a lossless rule never beats the optimum of its own draft law).
MC_FLAG_SIGMAS = 4.0


def _sanity_checks(result, mc_paths: int) -> list:
    """Cells where a rule beats the optimum of its own draft law: exact columns by more
    than AGREEMENT_TOLERANCE (:func:`otm.tables.optimum_violations`), the ``rrs_wor``
    estimate by more than ``MC_FLAG_SIGMAS`` standard errors plus what unsampled paths can
    hide (:func:`otm.rules.rrs_wor.unseen_paths_bound`: with 256 paths,
    0.036). Empty when all is well."""
    exact = {name: values for name, values in result.table.columns.items() if name != "rrs_wor"}
    found = optimum_violations(PositionTable(result.table.ks, exact))
    if "rrs_wor" in result.table.columns:
        excess = result.table.columns["rrs_wor"] - result.table.columns[OPTIMAL_WOR]
        unseen = np.where(result.monte_carlo, unseen_paths_bound(mc_paths), 0.0)
        limit = MC_FLAG_SIGMAS * result.mc_error + unseen + AGREEMENT_TOLERANCE
        bad = np.nan_to_num(excess, nan=-np.inf) > np.nan_to_num(limit, nan=np.inf)
        if bad.any():
            found.append(f"rrs_wor exceeds {OPTIMAL_WOR} by more than {MC_FLAG_SIGMAS:g} standard errors (plus "
                         f"{unseen_paths_bound(mc_paths):.3g} for unsampled paths where it is a Monte Carlo estimate) at {int(bad.sum())} cell(s)")
    return found


def _fmt(value, monte_carlo: bool = False) -> str:
    """A 6-character cell; a Monte Carlo value is marked ``*``."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "   n/a"
    return f"{value:5.3f}*" if monte_carlo else f"{value:6.3f}"


def _error_row(label: str, errors, monte_carlo) -> str:
    """The ``±`` line under a row with Monte Carlo cells: their standard errors (``-`` at
    the exact cells)."""
    cells = [f" {e:6.4f}" if mc and e is not None and np.isfinite(e) else "      -" for e, mc in zip(errors, monte_carlo)]
    return f"  {label:<30}" + "".join(cells)


def summary_table(summary: dict) -> str:
    """The printed summary: theorems, mean acceptance per rule and ``k`` against the
    optimum at each temperature (Monte Carlo values marked, with their standard errors),
    expected and realised block efficiency per rule, and where the report is."""
    from otm_app.report.write import error_cell

    lines = [f"otm report ({summary['mode']}): {summary['source']}"]
    if summary["mode"] == "toy":
        lines.append("NOTE: --no-models: toy distributions only, no language model was run")
    th = summary["theorems"]
    lines.append(f"theorems: {th['total']} claims, {th['holds']} hold, {th['fails']} fail, {th['not checkable']} not checkable")
    for row in th["failing"]:
        lines.append(f"  {row['id']}: {row['status']}")
    ks = summary["ks"]
    for t, block in summary["acceptance"].items():
        monte_carlo = block.get("rrs_wor_monte_carlo", [False] * len(ks))
        lines.append(f"mean acceptance at T = {t} over the same {block['positions']} positions for every column"
                     + (" (* a Monte Carlo estimate; the line below it, its standard error)" if any(monte_carlo) else ""))
        lines.append(f"  {'column':<30}" + "".join(f"{'k=' + str(k):>7}" for k in ks))
        for name, values in block["columns"].items():
            marks = monte_carlo if name == "rrs_wor" else [False] * len(values)
            lines.append(f"  {name:<30}" + "".join(f" {_fmt(v, mc)}" for v, mc in zip(values, marks)))
            if name == "rrs_wor" and any(monte_carlo):
                lines.append(_error_row("  ± s.e. (Monte Carlo)", block["rrs_wor_standard_error"], monte_carlo))
        for optimal in GAIN_RULES:
            for rule, gain in block.get(_gains_key(optimal), {}).items():
                marks = monte_carlo if "monte_carlo_error" in gain else [False] * len(gain["mean"])
                lines.append(f"  {optimal + ' - ' + rule:<30}" + "".join(f" {_fmt(v, mc)}" for v, mc in zip(gain["mean"], marks)))
                if any(marks):
                    lines.append(_error_row("  ± s.e. (Monte Carlo)", gain["monte_carlo_error"], marks))
        for problem in block["checks"]:
            lines.append(f"  CHECK FAILED: {problem}")
    lines += _decoding_lines(summary, error_cell)
    sequence = summary.get("sequence_verifiers", {"rows": []})
    if sequence["rows"]:
        lines.append("sequence verifiers: expected tokens per target call on the same drafts, mean ± s.e. over steps:")
        for row in sequence["rows"]:
            (rule, rule_se), (base, base_se) = row["expected_tokens"]["rule"], row["expected_tokens"]["baseline"]
            gain, gain_se = row["relative_gain"]
            lines.append(f"  {row['rule']:<10} {rule:.3f} ± {rule_se:.3f}  vs {row['baseline']:<8} {base:.3f} ± {base_se:.3f}  "
                         f"({100 * gain:+.1f} % ± {100 * gain_se:.1f} %, {row['tree']}, {row['steps']} steps)")
        for problem in sequence.get("checks", []):
            lines.append(f"  CHECK FAILED: {problem}")
    lines.append(f"report: {summary['report']}  ({summary['wall_seconds']['total']:.0f} s in all)")
    return "\n".join(lines)


def _decoding_lines(summary: dict, error_cell) -> list[str]:
    """Step 3 in the printed summary: the paired expected block efficiencies, then the
    realised ones (docs/report.md, "Reading the decoding section")."""
    decoding, paired = summary["decoding"], summary.get("paired", {"rows": [], "skipped": []})
    if not decoding["rows"]:
        return [f"decoding: not run ({decoding['reason']})"]
    lines = [f"block efficiency (tokens per target call), T = {decoding['temperature']:g}:"]
    width = max(len(row["rule"]) for row in decoding["rows"]) + 2
    if paired["rows"]:
        baseline = paired["baseline"]
        lines.append(f"  expected (coins integrated out) at the same {paired['positions']} positions, rules of one draft law on "
                     f"the same trees; mean ± s.e. over positions, and minus {baseline} position by position:")
        for row in paired["rows"]:
            if row["difference"] is None:
                versus = "(baseline)"
            else:
                versus = error_cell(row["difference"], signed=True) + ("" if row["resolved"] else "  unresolved at this sample size")
            lines.append(f"    {row['rule']:<{width}}{row['tree']:<10}{error_cell(row['expected_tokens'])}   {versus}")
        for row in paired["skipped"]:
            lines.append(f"    {row['rule']:<{width}}not compared: {row['reason']}")
    lines.append("  realised: one short decode per rule (context, draft and coin noise); mean ± s.e. over its steps:")
    for row in decoding["rows"]:
        value = row.get("skipped") or (f"{row['tree']:<10}{error_cell([row['block_efficiency'], row['block_efficiency_error']])}"
                                       f"   ({row['steps']} steps)")
        lines.append(f"    {row['rule']:<{width}}{value}")
    return lines


__all__ = ["command_line", "paired_positions", "run_report", "summarise_theorems", "summary_table", "without_logits"]
