"""Matplotlib figures of :mod:`otm.tables` tables; every function returns a
:class:`matplotlib.figure.Figure` (built without pyplot, so nothing leaks into a global
figure list: show it in Jupyter by leaving it last in a cell, save it with
``fig.savefig(path)``).

Conventions: acceptance is ``P(Y in S(X))``, a probability (axis unit
"probability"); the optima are drawn black (solid i.i.d., dashed without replacement),
the rules in colour with markers; ``NaN`` cells (not applicable) are simply not drawn.
"""
from __future__ import annotations

import textwrap
from collections.abc import Sequence

import numpy as np

try:
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator
except ImportError as exc:  # the plots extra is optional
    raise ImportError(f"otm.plots needs matplotlib ({exc}): pip install 'otm-toolkit[plots]'") from None

from .tables import OPTIMAL_IID, OPTIMAL_WOR, OPTIMUM_COLUMNS, RULE_REFERENCE, AcceptanceTable, PositionTable
from .errors import UnknownNameError

#: Axis label of acceptance.
ACCEPTANCE_LABEL = "acceptance P(Y in S(X)) [probability]"

_OPTIMUM_STYLE = {
    OPTIMAL_IID: {"color": "black", "linestyle": "-", "linewidth": 2.2, "alpha": 0.8, "zorder": 5, "label": "OTM optimum, i.i.d. drafts"},
    OPTIMAL_WOR: {"color": "black", "linestyle": "--", "linewidth": 2.2, "alpha": 0.8, "zorder": 5, "label": "OTM optimum, drafts w/o replacement"},
}
_MARKERS = "osD^v<>px*h"


def _set_parameter_axis(ax, table: AcceptanceTable) -> None:
    ax.set_xlabel(f"{table.parameter} [{table.unit}]")
    if table.parameter == "k":
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _new_figure(width: float = 7.5, height: float = 4.5) -> tuple[Figure, object]:
    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, fig.add_subplot()


def plot_acceptance_table(table: AcceptanceTable, columns: Sequence[str] | None = None, title: str | None = None) -> Figure:
    """Every column of ``table`` (or ``columns``) against the swept parameter."""
    names = list(table.columns) if columns is None else list(columns)
    missing = [n for n in names if n not in table.columns]
    if missing:
        raise UnknownNameError(f"no column(s) {missing}; the table has {', '.join(table.columns)}")
    fig, ax = _new_figure()
    for i, name in enumerate(names):
        values = table.columns[name]
        if np.isnan(values).all():
            continue
        style = _OPTIMUM_STYLE.get(name, {"marker": _MARKERS[i % len(_MARKERS)], "markersize": 4, "label": name})
        ax.plot(table.values, values, markevery=max(1, values.size // 20), **style)
    _set_parameter_axis(ax, table)
    ax.set_ylabel(ACCEPTANCE_LABEL)
    ax.set_title(textwrap.fill(title or table.title, 90), fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return fig


def plot_gap_table(table: AcceptanceTable, reference: str = OPTIMAL_IID, rules: Sequence[str] | None = None, title: str | None = None) -> Figure:
    """``reference - rule`` for each rule column against the parameter (0 = optimal)."""
    names = [n for n in table.columns if n not in OPTIMUM_COLUMNS] if rules is None else list(rules)
    fig, ax = _new_figure()
    for i, name in enumerate(names):
        gap = table.gap(name, reference)
        if np.isnan(gap).all():
            continue
        ax.plot(table.values, gap, marker=_MARKERS[i % len(_MARKERS)], markersize=4, markevery=max(1, gap.size // 20), label=name)
    ax.axhline(0.0, color="black", linewidth=1)
    _set_parameter_axis(ax, table)
    ax.set_ylabel(f"gap: {reference} - rule [probability]")
    ax.set_title(textwrap.fill(title or f"Gap to the optimum ({reference} - rule) | {table.title}", 90), fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return fig


def plot_position_acceptance(table: PositionTable, k: int, columns: Sequence[str] | None = None, title: str | None = None) -> Figure:
    """Acceptance at every position of the text for ``k`` drafts, optima and rules."""
    j = table.k_index(k)
    names = list(table.columns) if columns is None else list(columns)
    fig, ax = _new_figure(9.0, 4.5)
    positions = np.arange(table.n_positions)
    for i, name in enumerate(names):
        values = table.columns[name][:, j]
        if np.isnan(values).all():
            continue
        style = dict(_OPTIMUM_STYLE.get(name, {"marker": _MARKERS[i % len(_MARKERS)], "markersize": 3, "linewidth": 0.8, "label": name}))
        style["linewidth"] = min(style.get("linewidth", 1.0), 1.4)
        ax.plot(positions, values, **style)
    ax.set_xlabel("position in the text [token index]")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel(ACCEPTANCE_LABEL)
    ax.set_title(textwrap.fill(title or f"Per-position acceptance, k = {k}: rules against the OTM optimum{_label(table)}", 90), fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best", ncol=2)
    return fig


def plot_position_gaps(table: PositionTable, k: int, reference: str | None = None, rules: Sequence[str] | None = None, title: str | None = None) -> Figure:
    """Empirical CDF over positions of each rule's gap to its reference optimum at ``k``
    (``reference=None``: each rule's own draft law, :data:`otm.tables.RULE_REFERENCE`,
    i.i.d. for rules without one)."""
    j = table.k_index(k)
    names = [n for n in table.columns if n not in OPTIMUM_COLUMNS] if rules is None else list(rules)
    fig, ax = _new_figure()
    for i, name in enumerate(names):
        against = reference or RULE_REFERENCE.get(name) or OPTIMAL_IID
        if against not in table.columns:
            continue
        gap = table.gap(name, against)[:, j]
        gap = np.sort(gap[~np.isnan(gap)])
        if gap.size == 0:
            continue
        ax.step(gap, np.arange(1, gap.size + 1) / gap.size, where="post", label=f"{name} (vs {against})")
    ax.set_xlabel("gap: optimum - rule acceptance [probability]")
    ax.set_ylabel("fraction of positions with gap <= x [0-1]")
    ax.set_title(textwrap.fill(title or f"Distribution of per-position gaps to the optimum, k = {k}{_label(table)}", 90), fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return fig


#: How :func:`plot_check_slacks` draws each kind of worst slack: legend, colour, marker.
_SLACK_KINDS = {
    "margin": ("slack > 0: holds with a margin", "tab:green", "o"),
    "equality": ("slack = 0: holds with equality\n(drawn at the left edge)", "tab:blue", "s"),
    "rounding": ("-tolerance <= slack < 0:\nholds within the tolerance", "tab:orange", "v"),
    "fails": ("slack < -tolerance: fails\n(an infinite one at the right edge)", "tab:red", "X"),
}


def _slack_kind(row: dict) -> str:
    if row["status"] == "fails":
        return "fails"
    slack = float(row["worst_slack"])
    return "margin" if slack > 0 else "equality" if slack == 0 else "rounding"


def plot_check_slacks(rows: Sequence[dict], title: str = "Theorem suite: worst slack per check (a claim holds when slack >= -tolerance)") -> Figure:
    """Dot plot of the worst slack of each theorem check (``proofs`` rows as dicts with
    ``id``, ``status``, ``worst_slack`` and optionally ``tolerance``): ``|slack|`` on a log
    axis, so that rounding (1e-16) and a margin (0.4) are both visible, with the sign and
    the verdict by colour and marker (:data:`_SLACK_KINDS`); a dashed line marks each
    nonzero tolerance."""
    shown = [r for r in rows if r.get("worst_slack") is not None]
    magnitudes = np.abs([float(r["worst_slack"]) for r in shown])
    finite = magnitudes[np.isfinite(magnitudes) & (magnitudes > 0)]
    left, right = min(finite.min(initial=1.0), 1e-16) / 10, max(finite.max(initial=1.0), 1.0) * 10
    x = np.clip(magnitudes, left, right)
    kinds = np.array([_slack_kind(r) for r in shown])
    y = np.arange(len(shown))
    fig, ax = _new_figure(10.0, max(3.0, 0.22 * len(shown) + 1.0))
    for kind, (label, colour, marker) in _SLACK_KINDS.items():
        if (kinds == kind).any():
            ax.scatter(x[kinds == kind], y[kinds == kind], color=colour, marker=marker, s=30, label=label, zorder=3)
    for tolerance in sorted({float(r["tolerance"]) for r in shown if r.get("tolerance")}):
        ax.axvline(tolerance, color="gray", linestyle="--", linewidth=1, label=f"tolerance ({tolerance:g})")
    ax.set_yticks(y, [r["id"] for r in shown], fontsize=7)
    ax.set_ylim(len(shown) - 0.5, -0.5)
    ax.set_xscale("log")
    ax.set_xlim(left / 3, right * 3)
    ax.grid(axis="x", alpha=0.3)
    ax.set_xlabel("|worst slack| [same unit as the claim; log scale]")
    ax.set_ylabel("check id [name]")
    ax.set_title(textwrap.fill(title, 90), fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    return fig


def plot_output_laws(target_probs, output_laws: dict, title: str = "Output law of each verifier against the target p") -> Figure:
    """Grouped bars: the target ``p`` (``[V]``) next to each estimated output law
    (name -> ``[V]``); a lossless verifier's bars match ``p`` up to sampling noise."""
    target = np.asarray(target_probs, dtype=np.float64)
    fig, ax = _new_figure(max(6.0, 0.5 * target.size + 3.0), 4.5)
    groups = {"target p": target, **{name: np.asarray(law, dtype=np.float64) for name, law in output_laws.items()}}
    width = 0.8 / len(groups)
    tokens = np.arange(target.size)
    for i, (name, law) in enumerate(groups.items()):
        style = {"color": "black", "alpha": 0.35} if i == 0 else {}
        ax.bar(tokens + (i - (len(groups) - 1) / 2) * width, law, width, label=name, **style)
    ax.set_xticks(tokens)
    ax.set_xlabel("token id [index]")
    ax.set_ylabel("P(Y = token) [probability]")
    ax.set_title(textwrap.fill(title, 90), fontsize=10)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8, loc="best")
    return fig


def plot_acceptance_intervals(estimates: dict, optimum: float, expected: float | None = None, title: str = "Measured acceptance against the optimum of the draft law") -> Figure:
    """Each verifier's acceptance estimate with its interval (name -> ``(estimate, (lo, hi))``),
    a line at the optimum ``alpha*(p, Q)`` and, optionally, at the rule's exact acceptance.
    An interval above the optimum is impossible for a lossless verifier."""
    fig, ax = _new_figure(7.0, max(2.5, 0.6 * len(estimates) + 1.5))
    y = np.arange(len(estimates))
    values = np.array([v[0] for v in estimates.values()])
    bounds = np.array([v[1] for v in estimates.values()]).reshape(-1, 2)
    ax.errorbar(values, y, xerr=[values - bounds[:, 0], bounds[:, 1] - values], fmt="o", capsize=4, label="measured acceptance (interval)")
    ax.axvline(optimum, color="black", linewidth=2, label=f"OTM optimum for this draft law = {optimum:.4f}")
    if expected is not None:
        ax.axvline(expected, color="tab:green", linestyle="--", label=f"rule's exact acceptance = {expected:.4f}")
    ax.set_yticks(y, list(estimates))
    ax.invert_yaxis()
    ax.set_xlabel(ACCEPTANCE_LABEL)
    ax.set_ylabel("verifier [name]")
    ax.set_title(textwrap.fill(title, 90), fontsize=10)
    ax.grid(alpha=0.3, axis="x")
    ax.legend(fontsize=8, loc="best")
    return fig


def _label(table: PositionTable) -> str:
    return f" ({table.label})" if table.label else ""


__all__ = [
    "ACCEPTANCE_LABEL",
    "plot_acceptance_intervals",
    "plot_output_laws",
    "plot_acceptance_table",
    "plot_check_slacks",
    "plot_gap_table",
    "plot_position_acceptance",
    "plot_position_gaps",
]
