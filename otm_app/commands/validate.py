"""``otm validate RECORDING [--json] [--out DIR]``: the per-node OTM gaps of a recording.

:func:`run_validate` takes a :class:`otm_app.configs.ValidateConfig` and returns the
summary dict
(:attr:`decoding.validation.recordings.ValidationResult.summary`, plus ``recording`` and, with
``--out``, ``out``, ``json_file`` and ``figures``). Without ``--json`` it prints a table
per rule and depth; with ``--json`` it prints the summary as JSON. ``--out DIR`` writes
``DIR/validation.json`` (summary and every node) and two figures: ``gap_histogram.png``
(per-node gap to the rule's own law's optimum and to the best law) and
``achieved_vs_optimal.png`` (the rule's exact acceptance against the optimum, per node,
with the bounds of truncated recordings as error bars). The first line printed is the
verdict (:func:`decoding.validation.recordings.verdict`): ``PASS``, ``FAIL`` with the reasons,
or ``NOT CHECKED`` when some rule has no node whose values are exact (a top-m recording with
positive tails); it says what was checked and what was not. Exit status
(:data:`EXIT_STATUS`): 0 pass, 1 fail, 3 not checked (2 is an error, as for every command).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from decoding.runtime.recording import SPARSE_LIMIT, load_recording
from decoding.validation.recordings import FAIL, NOT_CHECKED, PASS, ValidationResult, validate_recording
from otm.errors import InputFileError

from ..configs import ValidateConfig

#: ``otm validate``'s exit status per verdict (2 stays the one-line error of every command).
EXIT_STATUS = {PASS: 0, FAIL: 1, NOT_CHECKED: 3}

#: What the first line calls each verdict.
VERDICT_WORDS = {PASS: "PASS", FAIL: "FAIL", NOT_CHECKED: "NOT CHECKED"}

#: Printed under a NOT CHECKED verdict of a top-m recording: how to record exact laws.
EXACT_RECORDING_HINT = ("a top-m recording is exact only where a law's merged tail is 0: decode with --top-p below 1 "
                        f"(the recorder keeps a nucleus of up to {SPARSE_LIMIT} tokens whole) or with --record-top-m full")


def run_validate(args: ValidateConfig) -> dict:
    """Run ``otm validate`` (module docstring); returns the summary."""
    path = Path(args.recording)
    if not path.is_file():
        raise InputFileError(f"no such recording: {path}")
    result = validate_recording(load_recording(path), progress=args.progress and not args.json)
    summary = dict(result.summary, recording=str(path))
    if summary["verdict"]["status"] == NOT_CHECKED and not summary["full"] and result.nodes:
        summary["verdict"]["unchecked"].append(EXACT_RECORDING_HINT)
    if args.out:
        out = Path(args.out)
        json_file = out / "validation.json"
        try:
            out.mkdir(parents=True, exist_ok=True)
            json_file.write_text(json.dumps(dict(result.as_dict(), summary=summary), indent=1, default=_jsonable))
            figures = [str(f) for f in plot_validation(result, out)]
        except OSError as exc:
            raise InputFileError(f"--out {out}: cannot write there: {exc}") from None
        summary.update(out=str(out), json_file=str(json_file), figures=figures)
    if args.json:
        print(json.dumps(summary, indent=1, default=_jsonable))
    else:
        print(format_summary(summary))
    return summary


def validate_command(args: ValidateConfig) -> int:
    """``otm validate``: exit status 0 on PASS, 1 on FAIL, 3 on NOT CHECKED (:data:`EXIT_STATUS`)."""
    return EXIT_STATUS[run_validate(args)["verdict"]["status"]]


def _jsonable(value):
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _fmt(value, se=None) -> str:
    if value is None:
        return "     n/a"
    return f"{value:.4f}" + (f" ± {se:.4f}" if se is not None else "")


def _kept(summary: dict) -> str:
    """What the recording keeps of each law (docs/validate.md)."""
    if summary["full"]:
        return "whole distributions"
    sparse = f", laws of at most {summary['sparse_limit']} tokens whole" if summary.get("sparse_limit") else ""
    return f"top-{summary['top_m']} tokens of p and of q{sparse}"


def format_summary(summary: dict) -> str:
    """A plain-text table: one line per rule and per rule/depth."""
    verdict = summary["verdict"]
    found = "; ".join(verdict["reasons"]) if verdict["reasons"] else (
        "no rule beats its own law's optimum and the recorded acceptance matches the exact laws"
        if verdict["status"] == PASS else "nothing failed, but not every rule could be checked")
    lines = [
        f"{VERDICT_WORDS[verdict['status']]}: {found}",
        f"checked: {verdict['checked']}",
        *(f"not checked: {line}" for line in verdict["unchecked"]),
        f"recording {summary.get('recording', '')}: rule {summary['rule']}, tree {summary['tree']}, "
        f"{_kept(summary)}, "
        f"{summary['validated']} nodes validated, {summary['skipped']} skipped, {summary['bonus_events']} bonus draws",
        f"{'group':<16}{'nodes':>6}{'exact':>6}  {'rule acceptance':<18}{'optimum (own law)':<18}"
        f"{'gap':<18}{'gap to best law':<18}{'gap bounds':<18}{'empirical':<18}",
    ]
    groups = list(summary["by_rule"].items()) + list(summary["by_depth"].items())
    for name, s in groups:
        bounds = s["gap_bounds"]
        lines.append(
            f"{name:<16}{s['n_nodes']:>6}{s['n_exact']:>6}  {_fmt(s['rule_acceptance'], s['rule_acceptance_se']):<18}"
            f"{_fmt(s['optimum'], s['optimum_se']):<18}{_fmt(s['gap'], s['gap_se']):<18}"
            f"{_fmt(s['gap_to_best'], s['gap_to_best_se']):<18}"
            f"{'[' + format(bounds[0], '.4f') + ', ' + format(bounds[1], '.4f') + ']' if bounds else 'n/a':<18}"
            f"{_fmt(s['empirical_acceptance'], s['empirical_acceptance_se']):<18}"
        )
    return "\n".join(lines)


def plot_validation(result: ValidationResult, out: Path) -> list[Path]:
    """Write ``gap_histogram.png`` and ``achieved_vs_optimal.png`` under ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rules = sorted({n.rule_name for n in result.nodes})
    files = []
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, (key, title) in zip(axes, (("optimum", "gap to the optimum for the rule's own draft law"),
                                       ("best", "gap to the best of the i.i.d./w.o.r./hub/greedy laws"))):
        gaps = {rule: [getattr(n, key).value - n.rule.value for n in result.nodes
                       if n.rule_name == rule and n.rule.exact and getattr(n, key).exact] for rule in rules}
        everything = [g for values in gaps.values() for g in values]
        bins = np.linspace(min(0.0, *everything), max(1e-3, *everything), 31) if everything else 30
        plotted = 0
        for rule, values in gaps.items():
            if values:
                ax.hist(values, bins=bins, histtype="step", linewidth=1.5, label=f"{rule} ({len(values)} nodes)")
                plotted += 1
        if plotted:
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "no node with an exact gap\n(top-m recording: see the bounds)", ha="center", va="center", transform=ax.transAxes)
        ax.set_xlabel("optimal acceptance − rule's exact acceptance (probability)")
        ax.set_title(title, fontsize=10)
    axes[0].set_ylabel("number of tree nodes")
    fig.suptitle(f"Per-node acceptance gap, rule {result.meta.get('rule')}, tree {result.meta.get('tree')} (exact nodes only)")
    fig.tight_layout()
    files.append(out / "gap_histogram.png")
    fig.savefig(files[-1], dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(5.5, 5.5))
    for rule in rules:
        group = [n for n in result.nodes if n.rule_name == rule]
        x = np.array([0.5 * (n.optimum.lo + n.optimum.hi) for n in group])
        y = np.array([0.5 * (n.rule.lo + n.rule.hi) for n in group])
        xerr = np.array([0.5 * (n.optimum.hi - n.optimum.lo) for n in group])
        yerr = np.array([0.5 * (n.rule.hi - n.rule.lo) for n in group])
        ax.errorbar(x, y, xerr=xerr, yerr=yerr, fmt="o", markersize=3, alpha=0.6, elinewidth=0.6, label=rule)
    ax.plot([0, 1], [0, 1], "k--", linewidth=0.8, label="rule = optimum")
    ax.set_xlim(0, 1.02)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("optimal acceptance for the rule's draft law, α*(p, Q)")
    ax.set_ylabel("rule's exact acceptance P(Y ∈ S(X))")
    ax.set_title("Achieved vs optimal acceptance per tree node\n(error bars: bounds from a top-m recording)", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    files.append(out / "achieved_vs_optimal.png")
    fig.savefig(files[-1], dpi=110)
    plt.close(fig)
    return files


__all__ = ["EXIT_STATUS", "format_summary", "plot_validation", "run_validate", "validate_command"]
