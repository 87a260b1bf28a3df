"""``otm report``: the toolkit's main job in one command (issue 5).

1. summarise the theorem suite's rows (run by the caller: ``decoding`` may not import
   ``proofs``; the lead's ``otm/cli.py`` passes ``proofs.cli.run_theorems(...)`` in);
2. teacher-force the built-in texts through the model pair (full 151,936-token
   distributions, float32 logits) and compute per position the OTM optimum for i.i.d. and
   without-replacement drafts at ``k = 1..k_max`` and every rule's acceptance at each
   temperature (:mod:`decoding.report_positions`: what is exact, on which positions, and
   what is a labelled Monte Carlo estimate); figures of acceptance vs ``k`` per rule
   against the optimum, of the per-position gaps, and of the optimum against temperature;
3. a short speculative decoding per rule on the pair: block efficiency
   (:mod:`decoding.report_decode`);
4. a self-contained folder (``report.md``, PNG figures, ``summary.json``) and a printed
   summary table.

``--no-models`` replaces the pair by toy Gaussian distributions (no model, no decoding;
the report says so); ``--pair tiny`` uses tiny random Qwen2-architecture models (tests).

Entry points for the CLI: :func:`add_report_arguments` (the options) and
:func:`run_report` ``(args, theorem_rows) -> summary dict``; :func:`summary_table`
formats the summary (``run_report`` prints it unless ``args.json``).
"""
from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

import numpy as np

from otm.analysis import LOSSLESS_RULES, OPTIMAL_IID, OPTIMAL_WOR, optimum_violations
from otm.errors import OTMError, UnknownNameError
from otm.tolerances import AGREEMENT_TOLERANCE

#: Rules of a default report (every lossless rule with an exact law at full vocabulary or
#: a labelled estimate; ``is_optimal`` / ``is_truncated`` need ``V^k``-tuple LPs).
DEFAULT_RULES = ("single", "rrs", "rrs_wor", "specinfer", "kseq", "spechub", "greedy")
DEFAULT_TEMPERATURES = (0.6, 1.0)
DEFAULT_SWEEP_TEMPERATURES = (0.3, 0.45, 0.6, 0.8, 1.0, 1.25, 1.5)
DEFAULT_OUT = "otm-report"


def _floats(text: str) -> tuple:
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if not values or any(not (v > 0 and np.isfinite(v)) for v in values):
        raise argparse.ArgumentTypeError(f"temperatures must be positive and finite, got {text!r}")
    return values


def _names(text: str) -> tuple:
    return tuple(v.strip() for v in text.split(",") if v.strip())


def add_report_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``otm report`` options to ``parser`` (a sub-parser); returns it."""
    parser.add_argument("--texts", default=None, help="comma-separated built-in text names or text files (default: every built-in text)")
    parser.add_argument("-k", "--k-max", dest="k_max", type=int, default=8, help="largest number of drafts; k = 1..K (default 8)")
    parser.add_argument("--temperatures", type=_floats, default=DEFAULT_TEMPERATURES, help="comma-separated temperatures of the per-position tables (default 0.6,1.0)")
    parser.add_argument("--rules", type=_names, default=DEFAULT_RULES, help=f"comma-separated rules (default {','.join(DEFAULT_RULES)})")
    parser.add_argument("--out", default=DEFAULT_OUT, help=f"output folder (default ./{DEFAULT_OUT}/)")
    parser.add_argument("--no-models", action="store_true", help="toy distributions only, no model and no decoding (for a machine without the model packages)")
    parser.add_argument("--pair", default="qwen2.5-coder", choices=("qwen2.5-coder", "tiny"), help="model pair (tiny: random tiny models, for tests)")
    parser.add_argument("--max-new-tokens", type=int, default=24, help="tokens per prompt in the decoding step (default 24)")
    parser.add_argument("--decode-prompts", type=int, default=2, help="prompts per rule in the decoding step: the start of a code text, then of a prose text, ... (default 2)")
    parser.add_argument("--seed", type=int, default=0, help="seed of every random choice (default 0)")
    parser.add_argument("--tree", default="binary:3", help="draft tree of the decoding step (default binary:3; single uses a chain of the same depth)")
    parser.add_argument("--decode-temperature", type=float, default=1.0, help="temperature of the decoding step (default 1.0)")
    parser.add_argument("--no-decode", action="store_true", help="skip step 3 (speculative decoding)")
    parser.add_argument("--rule-positions", type=int, default=32, help="evenly spaced positions where every rule is computed exactly (0 = all; default 32)")
    parser.add_argument("--wor-positions", type=int, default=8, help="evenly spaced positions for the without-replacement optimum and rrs_wor (0 = all; default 8)")
    parser.add_argument("--sweep-positions", type=int, default=128, help="evenly spaced positions of the optimum-vs-temperature sweep (0 = all; default 128)")
    parser.add_argument("--mc-paths", type=int, default=64, help="Monte Carlo draft paths per position for rrs_wor (default 64)")
    parser.add_argument("--json", action="store_true", help="do not print the summary table (the caller prints JSON)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    return parser


def _check_args(args) -> None:
    if args.k_max < 1:
        raise OTMError(f"-k/--k-max must be >= 1, got {args.k_max}")
    for rule in args.rules:
        if rule not in LOSSLESS_RULES:
            raise UnknownNameError(f"unknown rule {rule!r} for the report; choose from {', '.join(LOSSLESS_RULES)}")
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


def run_report(args, theorem_rows: list | None = None) -> dict:
    """Run the four steps (module docstring) and write the report to ``args.out``.

    Args:
        args: an ``argparse.Namespace`` with the options of :func:`add_report_arguments`
            (missing attributes take their defaults).
        theorem_rows: ``proofs.cli.run_theorems(...)``'s rows (``None``: not run).

    Returns:
        the summary dict (also written to ``OUT/summary.json``).

    Raises:
        decoding.models.ModelPackageMissingError: the Qwen pair's wheels are missing (the
            message is extended with the ``--no-models`` hint).
    """
    args = _with_defaults(args)
    _check_args(args)
    from decoding.report_positions import PositionSettings, analyse_positions, optimum_vs_temperature, spaced_rows
    from decoding.report_sources import decoding_prompts, resolve_texts, toy_texts
    from decoding.report_write import write_figures, write_markdown

    start = time.perf_counter()
    clock = {}
    progress = _progress_factory(args.quiet)
    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    theorem_rows = list(theorem_rows or [])
    texts = resolve_texts(args.texts)

    tick = time.perf_counter()
    pair = None
    if args.no_models:
        scored, mode = toy_texts(args.seed), "toy"
    else:
        pair, scored = _score_with_models(args, texts, progress)
        mode = args.pair
    clock["scoring"] = time.perf_counter() - tick

    tick = time.perf_counter()
    ks = tuple(range(1, args.k_max + 1))
    settings = PositionSettings(ks, tuple(args.rules), args.rule_positions, args.wor_positions, args.mc_paths)
    target_logits, draft_logits = scored.target_logits, scored.draft_logits
    rng = np.random.default_rng(args.seed)
    positions = analyse_positions(target_logits, draft_logits, args.temperatures, settings, rng, scored.source, progress("positions"))
    sweep_rows = spaced_rows(target_logits.shape[0], args.sweep_positions)
    sweep_ks = sorted({k for k in (1, 2, 4, args.k_max) if k <= args.k_max})
    temperature_table = optimum_vs_temperature(target_logits, draft_logits, sweep_rows, DEFAULT_SWEEP_TEMPERATURES, sweep_ks, scored.source, progress("temperature sweep"))
    clock["acceptance"] = time.perf_counter() - tick

    tick = time.perf_counter()
    decoding = {"rows": [], "reason": ""}
    if args.no_models:
        decoding["reason"] = "--no-models: there is no model pair to decode with"
    elif args.no_decode:
        decoding["reason"] = "--no-decode"
    else:
        from decoding.report_decode import decode_rules

        prompts = decoding_prompts(pair, texts, args.seed, args.decode_prompts)
        decoding = {
            "rows": decode_rules(pair, prompts, args.rules, args.tree, args.decode_temperature, args.max_new_tokens, args.seed, progress=not args.quiet),
            "temperature": args.decode_temperature, "max_new_tokens": args.max_new_tokens, "seed": args.seed,
            "prompts": [label for label, _ in prompts],
        }
    clock["decoding"] = time.perf_counter() - tick
    if pair is not None:
        pair.release()

    tick = time.perf_counter()
    summary = {
        "command": command_line(args),
        "mode": mode,
        "source": scored.source,
        "out": str(folder),
        "texts": [{"name": s.name, "kind": kind, "positions": s.n_positions} for s, kind in zip(scored.scores, scored.kinds)],
        "ks": list(ks),
        "temperatures": list(args.temperatures),
        "rules": list(args.rules),
        "theorems": summarise_theorems(theorem_rows),
        "acceptance": {f"{t:g}": _acceptance_summary(result, scored) for t, result in positions.items()},
        "optimum_vs_temperature": {"positions": int(sweep_rows.size), "temperatures": list(DEFAULT_SWEEP_TEMPERATURES),
                                   "columns": {n: v.tolist() for n, v in temperature_table.columns.items()}},
        "decoding": decoding,
    }
    gap_ks = sorted({2, args.k_max} & set(ks))
    summary["figures"] = write_figures(folder, positions, temperature_table, theorem_rows, gap_ks)
    clock["writing"] = time.perf_counter() - tick
    clock["total"] = time.perf_counter() - start
    summary["wall_seconds"] = clock
    summary["report"] = str(write_markdown(folder, summary, positions, temperature_table, summary["figures"], theorem_rows))
    if not getattr(args, "json", False):
        print(summary_table(summary))
    return summary


def command_line(args) -> str:
    """``otm report`` with the options of ``args`` that differ from their defaults."""
    parser = add_report_arguments(argparse.ArgumentParser(add_help=False))
    parts = ["otm", "report"]
    for action in parser._actions:
        value = getattr(args, action.dest, action.default)
        if action.dest in ("json", "quiet") or value == action.default:
            continue
        flag = action.option_strings[-1]
        if isinstance(value, bool):
            parts.append(flag)
        else:
            parts += [flag, ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value) if isinstance(value, tuple) else str(value)]
    return " ".join(shlex.quote(p) for p in parts)


def _with_defaults(args) -> argparse.Namespace:
    """``args`` completed with the parser defaults of every missing option."""
    defaults = vars(add_report_arguments(argparse.ArgumentParser(add_help=False)).parse_args([]))
    return argparse.Namespace(**{**defaults, **vars(args)})


def _score_with_models(args, texts, progress):
    from decoding.models import ModelPackageMissingError
    from decoding.report_sources import load_report_pair, score_report_texts

    try:
        pair = load_report_pair(args.pair, getattr(args, "device", None) or "cpu")
    except ModelPackageMissingError as exc:
        raise ModelPackageMissingError(f"{exc}. Or run `otm report --no-models` for a report on toy distributions without any model.") from exc
    return pair, score_report_texts(pair, texts, args.seed, progress("scoring"))


def _acceptance_summary(result, scored) -> dict:
    """Means per ``k`` of every column, per tier, for the summary."""
    texts = scored.text_of_row
    by_text = {s.name: np.nanmean(result.optimum_iid[texts == i], axis=0).tolist() for i, s in enumerate(scored.scores)}
    rules = result.rules.mean_over_positions()
    wor = result.wor.mean_over_positions()
    return {
        "optimal_iid_all_positions": np.nanmean(result.optimum_iid, axis=0).tolist(),
        "optimal_iid_by_text": by_text,
        "rule_positions": int(result.rule_rows.size),
        "rules": {name: values.tolist() for name, values in rules.columns.items()},
        "wor_positions": int(result.wor_rows.size),
        "without_replacement": {name: values.tolist() for name, values in wor.columns.items()},
        "rrs_wor_standard_error": (np.sqrt(np.nansum(result.mc_error**2, axis=0)) / max(result.wor_rows.size, 1)).tolist(),
        "notes": dict(result.notes),
        "checks": _sanity_checks(result),
    }


#: Standard errors by which a Monte Carlo estimate of rrs_wor may exceed its optimum
#: before it is flagged (a lossless rule never beats the optimum of its own draft law).
MC_FLAG_SIGMAS = 4.0


def _sanity_checks(result) -> list:
    """Cells where a rule beats the optimum of its own draft law: exact columns by more
    than AGREEMENT_TOLERANCE (:func:`otm.analysis.optimum_violations`), the ``rrs_wor``
    estimate by more than ``MC_FLAG_SIGMAS`` standard errors. Empty when all is well."""
    found = optimum_violations(result.rules)
    if "rrs_wor" in result.wor.columns:
        excess = result.wor.columns["rrs_wor"] - result.wor.columns[OPTIMAL_WOR]
        limit = MC_FLAG_SIGMAS * result.mc_error + AGREEMENT_TOLERANCE
        bad = np.nan_to_num(excess, nan=-np.inf) > np.nan_to_num(limit, nan=np.inf)
        if bad.any():
            found.append(f"rrs_wor exceeds {OPTIMAL_WOR} by more than {MC_FLAG_SIGMAS:g} standard errors at {int(bad.sum())} cell(s)")
    return found


def _fmt(value) -> str:
    return "   n/a" if value is None or (isinstance(value, float) and np.isnan(value)) else f"{value:6.3f}"


def summary_table(summary: dict) -> str:
    """The printed summary: theorems, mean acceptance per rule and ``k`` against the
    optimum at each temperature, block efficiency per rule, and where the report is."""
    lines = [f"otm report ({summary['mode']}): {summary['source']}"]
    if summary["mode"] == "toy":
        lines.append("NOTE: --no-models: toy distributions only, no language model was run")
    th = summary["theorems"]
    lines.append(f"theorems: {th['total']} claims, {th['holds']} hold, {th['fails']} fail, {th['not checkable']} not checkable")
    for row in th["failing"]:
        lines.append(f"  {row['id']}: {row['status']}")
    ks = summary["ks"]
    for t, block in summary["acceptance"].items():
        lines.append(f"mean acceptance at T = {t} ({block['rule_positions']} positions; {OPTIMAL_WOR} and rrs_wor on {block['wor_positions']})")
        lines.append(f"  {'column':<30}" + "".join(f"{'k=' + str(k):>7}" for k in ks))
        columns = {**block["rules"], **{n: v for n, v in block["without_replacement"].items() if n != OPTIMAL_IID}}
        for name, values in columns.items():
            lines.append(f"  {name:<30}" + "".join(f" {_fmt(v)}" for v in values))
        for problem in block["checks"]:
            lines.append(f"  CHECK FAILED: {problem}")
    decoding = summary["decoding"]
    if decoding["rows"]:
        lines.append(f"block efficiency (tokens per target call), T = {decoding['temperature']:g}:")
        for row in decoding["rows"]:
            value = row.get("skipped") or f"{row['block_efficiency']:.3f}  ({row['tree']})"
            lines.append(f"  {row['rule']:<14}{value}")
    else:
        lines.append(f"decoding: not run ({decoding['reason']})")
    lines.append(f"report: {summary['report']}  ({summary['wall_seconds']['total']:.0f} s)")
    return "\n".join(lines)


__all__ = ["DEFAULT_RULES", "add_report_arguments", "run_report", "summarise_theorems", "summary_table"]
