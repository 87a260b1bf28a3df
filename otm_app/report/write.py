"""Step 4 of ``otm report``: the figures (via :mod:`otm.plots`) and the self-contained
Markdown report with its PNG figures in one folder."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from otm.tables import AcceptanceTable
from otm.plots import plot_acceptance_table, plot_check_slacks, plot_position_gaps


def save_figure(fig, folder: Path, name: str) -> str:
    """Save ``fig`` as ``folder/name`` (PNG, 120 dpi); returns the file name."""
    fig.savefig(folder / name, dpi=120)
    return name


def write_figures(folder: Path, positions: dict, temperature_table: AcceptanceTable | None, theorem_rows: list, gap_ks: list) -> dict:
    """Every figure of the report; returns ``{key: file name}``."""
    figures = {}
    for t, result in positions.items():
        tag = f"T{t:g}".replace(".", "p")
        figures[f"acceptance_vs_k_{tag}"] = save_figure(
            plot_acceptance_table(result.table.mean_over_positions(), title=f"Mean acceptance vs k, T = {t:g}: rules against the OTM optima, {result.rows.size} positions"),
            folder, f"acceptance_vs_k_{tag}.png")
        for k in gap_ks:
            if k in result.ks:
                figures[f"gaps_{tag}_k{k}"] = save_figure(plot_position_gaps(result.table, int(k)), folder, f"gaps_{tag}_k{k}.png")
    if temperature_table is not None:
        figures["optimum_vs_temperature"] = save_figure(plot_acceptance_table(temperature_table), folder, "optimum_vs_temperature.png")
    if any(r.get("worst_slack") is not None for r in theorem_rows):
        figures["theorem_slacks"] = save_figure(plot_check_slacks(theorem_rows), folder, "theorem_slacks.png")
    return figures


#: The gain blocks of the summary and what each says.
GAIN_TEXTS = {
    "optimal_gains": "Gain of the optimal verifier (i.i.d. drafts, attains the i.i.d. optimum) over each rule on its own "
                     "draft law (a negative gain means the rule's draft law beats i.i.d. drafts there)",
    "optimal_wor_gains": "Gain of the water-level rule (k drafts without replacement, attains their optimum: its water levels are "
                         "probabilities, docs/optimal-verifier-proofs.md; at the full vocabulary its verifier draws, for k >= 3, the walks its "
                         "bounds decide and refuses the others) over RRSw on the same draft law",
}


def _cell(value, digits: int = 4) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def markdown_table(table: AcceptanceTable, errors: dict | None = None, digits: int = 4) -> str:
    """``table`` as a Markdown table; ``errors`` (column -> ``[n]``) adds ``± e`` to a column."""
    names = list(table.columns)
    lines = ["| " + " | ".join([table.parameter, *names]) + " |", "|" + "---|" * (len(names) + 1)]
    for i, value in enumerate(table.values):
        cells = []
        for name in names:
            cell = _cell(float(table.columns[name][i]), digits)
            if errors and name in errors and cell != "n/a" and errors[name][i] > 0:
                cell += f" ± {errors[name][i]:.{digits}f}"
            cells.append(cell)
        lines.append("| " + " | ".join([f"{value:g}", *cells]) + " |")
    return "\n".join(lines)


def write_markdown(folder: Path, summary: dict, positions: dict, temperature_table, figures: dict, theorem_rows: list) -> Path:
    """Write ``folder/report.md`` and ``folder/summary.json``; returns the report's path."""
    lines = ["# OTM report", "", f"Command: `{summary['command']}`", ""]
    lines += [f"- Source of the distributions: {summary['source']}", f"- Mode: **{summary['mode']}**"]
    if summary["mode"] == "toy":
        lines.append("- **No model was run (`--no-models`): every number below is on toy Gaussian distributions, not on a language model.**")
    lines += [f"- Wall time: {summary['wall_seconds']['total']:.0f} s ({_wall_times(summary)})", ""]
    lines += _theorem_section(summary["theorems"], figures)
    lines += _positions_section(summary, positions, figures)
    if temperature_table is not None:
        lines += ["## The optimum against temperature", "", markdown_table(temperature_table), "", f"![optimum vs temperature]({figures['optimum_vs_temperature']})", ""]
    lines += _decoding_section(summary)
    lines += _sequence_section(summary)
    lines += ["## How to read this report", "", "See docs/report.md in the toolkit: what each number is, which are exact and which are estimates.", ""]
    path = folder / "report.md"
    path.write_text("\n".join(lines))
    (folder / "summary.json").write_text(json.dumps(summary, indent=1, default=_json_default))
    return path


def _wall_times(summary: dict) -> str:
    """Each step's wall time, with the estimate printed before it where there was one."""
    estimated = summary.get("estimated_seconds", {})
    return ", ".join(f"{key} {value:.0f} s" + (f" (estimated {estimated[key]:.0f} s)" if key in estimated else "")
                     for key, value in summary["wall_seconds"].items() if key != "total")


def _json_default(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def _theorem_section(theorems: dict, figures: dict) -> list:
    lines = ["## 1. Theorem suite", ""]
    if theorems["total"] == 0:
        return lines + ["No theorem rows were passed in (the suite was not run).", ""]
    lines.append(f"{theorems['total']} claims: {theorems['holds']} hold, {theorems['fails']} fail, {theorems['not checkable']} not checkable.")
    lines.append("")
    for row in theorems["failing"]:
        lines.append(f"- `{row['id']}` ({row['status']}): {row['note']}")
    if "theorem_slacks" in figures:
        lines += ["", f"![theorem slacks]({figures['theorem_slacks']})"]
    return lines + [""]


def _positions_section(summary: dict, positions: dict, figures: dict) -> list:
    lines = ["## 2. Per-position acceptance: rules against the OTM optimum", ""]
    texts = ", ".join("{name} ({kind}, {positions} positions)".format(**t) for t in summary["texts"])
    lines.append(f"Texts: {texts}.")
    lines += ["", "Acceptance is membership acceptance P(Y in S(X)); each rule is compared with the optimum of its own draft law "
              "(i.i.d. for rrs, specinfer, kseq; without replacement for rrs_wor; spechub and greedy use their own sparse laws "
              "and can exceed the i.i.d. optimum). Every column is over the same positions.", ""]
    for t, result in positions.items():
        tag = f"T{t:g}".replace(".", "p")
        block = summary["acceptance"][f"{t:g}"]
        lines += [f"### T = {t:g}", ""]
        lines.append(f"Mean i.i.d. optimum per text ({result.rows.size} positions in all):")
        lines += ["", "| text | " + " | ".join(f"k = {k}" for k in result.ks) + " |", "|" + "---|" * (result.ks.size + 1)]
        for name, values in block["optimum_iid_by_text"].items():
            lines.append(f"| {name} | " + " | ".join(_cell(v) for v in values) + " |")
        errors = {"rrs_wor": np.asarray(block["rrs_wor_standard_error"])} if "rrs_wor" in result.table.columns else None
        lines += ["", f"Means over the {result.rows.size} positions (± Monte Carlo standard error where one applies):", "",
                  markdown_table(result.table.mean_over_positions(), errors), ""]
        lines += [f"![acceptance vs k]({figures[f'acceptance_vs_k_{tag}']})", ""]
        for key, name in figures.items():
            if key.startswith(f"gaps_{tag}_"):
                lines += [f"![gaps]({name})", ""]
        for key, what in GAIN_TEXTS.items():
            gains = block.get(key, {})
            if gains:
                lines += [f"{what}, position by position: mean ± standard error over positions:", "",
                          "| rule | " + " | ".join(f"k = {k}" for k in result.ks) + " |", "|" + "---|" * (result.ks.size + 1)]
                for rule, gain in gains.items():
                    cells = [_cell(m) if m is None or math.isnan(m) else f"{m:+.4f} ± {e:.4f}" for m, e in zip(gain["mean"], gain["standard_error"])]
                    lines.append(f"| {rule} | " + " | ".join(cells) + " |")
                lines.append("")
        checks = block["checks"]
        lines += ["No rule beats the optimum of its own draft law (exact columns to 1e-9; rrs_wor's Monte Carlo within 4 standard errors)." if not checks
                  else "**Check failed** (a rule above the optimum of its own draft law is a bug): " + "; ".join(checks), ""]
        lines += ["How each column was computed:", ""] + [f"- `{name}`: {why}" for name, why in result.notes.items()] + [""]
    return lines


def _decoding_section(summary: dict) -> list:
    lines = ["## 3. Speculative decoding: block efficiency", ""]
    decoding, paired = summary["decoding"], summary.get("paired", {"rows": [], "skipped": []})
    if not decoding["rows"]:
        return lines + [f"Not run: {decoding['reason']}", ""]
    lines.append(f"Pair {summary['source']}, temperature {decoding['temperature']:g}, seed {decoding['seed']}.")
    if paired["rows"]:
        baseline = paired["baseline"]
        lines += ["", f"**Expected tokens per target call, paired** (what compares the rules): at {paired['positions']} evenly "
                  "spaced positions of the texts, one tree drafted per draft law (the rules of one law share it), and for each "
                  "rule its expected tokens per call on that tree with its coins integrated out exactly (E[tau | tree] + 1). "
                  f"Mean ± standard error over positions; the difference from {baseline} is taken position by position. "
                  f"A difference within {paired['resolution_sigmas']:g} standard errors is unresolved at this sample size.", "",
                  f"| rule | tree | draft law | expected tokens / call | minus {baseline} | |", "|---|---|---|---|---|---|"]
        for row in paired["rows"]:
            difference = "baseline" if row["difference"] is None else error_cell(row["difference"], signed=True)
            verdict = "" if row["difference"] is None else ("resolved" if row["resolved"] else "unresolved at this sample size")
            lines.append(f"| {row['rule']} | `{row['tree']}` | {row['draft_law']} | {error_cell(row['expected_tokens'])} | "
                         f"{difference} | {verdict} |")
        lines += [f"| {row['rule']} | - | - | not compared: {row['reason']} | | |" for row in paired["skipped"]]
    lines += ["", f"**Realised block efficiency** (one short decode per rule: {decoding['max_new_tokens']} new tokens per prompt, "
              f"prompts {', '.join(decoding['prompts'])}; context, draft and coin noise included, so it cannot order the "
              "rules): mean ± standard error over the decode's steps.", "",
              "| rule | tree | realised block efficiency (tokens / target call) | steps | tokens | target calls | acceptance by depth | wall s |",
              "|---|---|---|---|---|---|---|---|"]
    for row in decoding["rows"]:
        if "skipped" in row:
            lines.append(f"| {row['rule']} | - | skipped: {row['skipped']} | | | | | |")
            continue
        depth = ", ".join(_cell(v, 3) for v in row["acceptance_by_depth"])
        lines.append(f"| {row['rule']} | `{row['tree']}` | {error_cell([row['block_efficiency'], row['block_efficiency_error']])} | "
                     f"{row['steps']} | {row['tokens_generated']} | {row['target_calls']} | {depth} | {row['wall_seconds']:.1f} |")
    return lines + [""]


def error_cell(pair: list, digits: int = 3, scale: float = 1.0, signed: bool = False) -> str:
    """``[mean, standard error]`` as ``mean ± error`` (``n/a`` for an undefined error)."""
    mean, error = pair
    shown = "n/a" if error is None or math.isnan(error) else f"{scale * error:.{digits}f}"
    return f"{scale * mean:{'+' if signed else ''}.{digits}f} ± {shown}"


def _sequence_section(summary: dict) -> list:
    lines = ["## 4. Sequence verifiers: block and traversal verification against node-wise verification", ""]
    sequence = summary["sequence_verifiers"]
    if not sequence["rows"]:
        return lines + [f"Not run: {sequence['reason']}", ""]
    lines += [
        f"Same pair, prompts ({', '.join(sequence['prompts'])}), temperature {sequence['temperature']:g}, "
        f"{sequence['max_new_tokens']} new tokens per prompt and seed {sequence['seed']} as section 3. Block verification "
        "decodes on a chain, traversal verification on the report's tree; at every step, on the drafted chain or tree "
        "itself, the expected tokens per target call (E[tau] + 1, the verifiers' coins integrated out exactly) of the "
        "sequence verifier and of its node-wise counterpart are computed: a paired comparison on the same drafts "
        "(docs/sequences.md, section 9). ± is one standard error over steps (steps of one decode share context, "
        "so read it as a lower bound on the uncertainty).", "",
        "| sequence verifier | tree | its expected tokens / call | node-wise rule | its expected tokens / call "
        "| gain | relative gain | realised block efficiency | steps | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in sequence["rows"]:
        expected = row["expected_tokens"]
        lines.append(f"| {row['rule']} | `{row['tree']}` | {error_cell(expected['rule'])} | {row['baseline']} | "
                     f"{error_cell(expected['baseline'])} | {error_cell(expected['gain'], signed=True)} | "
                     f"{error_cell(row['relative_gain'], 1, 100, True)} % | "
                     f"{error_cell([row['block_efficiency'], row['block_efficiency_error']])} | {row['steps']} | "
                     f"{row['wall_seconds']:.1f} |")
    checks = sequence.get("checks", [])
    return lines + ["", "Realised block efficiency is the decode's own (coin noise included); the paired columns are what "
                    "compares the verifiers.", "",
                    "Checks passed: every mean in [1, depth + 1], block verification never below token-wise on a drafted chain."
                    if not checks else "**Check failed**: " + "; ".join(checks), ""]


__all__ = ["error_cell", "markdown_table", "save_figure", "write_figures", "write_markdown"]
