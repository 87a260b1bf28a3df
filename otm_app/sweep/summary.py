"""From a sweep's Parquet table to means, standard errors and figures.

:func:`read_table` reads every part of a sweep folder (one ``pyarrow.Table``), each
verified against its recorded checksum first; :func:`summarise` groups it by
``(temperature, top_p, k, computation)``: the number of positions with a value, the mean
acceptance, its standard error over positions (``std / sqrt(n)``), the methods used, where
some value is a Monte Carlo estimate the mean of their standard errors
(``monte_carlo_error``) and the Monte Carlo standard error of the mean itself
(``monte_carlo_error_of_mean``, ``sqrt(sum of squared errors) / n``), and the seconds spent on
the group's rows. :func:`write_figures` draws acceptance against ``k`` per computation
(error bars: the standard error over positions) for each temperature and top-p.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from otm.errors import InputFileError

from .engine import CHECKSUMS, PARTS, part_problem, recorded_checksums

GROUP = ("temperature", "top_p", "k", "computation")


def read_table(folder: str | Path) -> pa.Table:
    """Every row of the sweep in ``folder`` (all its parts), each part verified against the
    checksum recorded in ``parts.sha256``; :class:`InputFileError` naming a part that is
    unrecorded, damaged or missing (rerunning the sweep recomputes it)."""
    parts = Path(folder) / PARTS
    files = sorted(parts.glob("*.parquet")) if parts.is_dir() else []
    if not files:
        raise InputFileError(f"{folder}: no sweep results (no {PARTS}/*.parquet); run `otm sweep` first")
    checksums = recorded_checksums(Path(folder))
    for path in files + [parts / name for name in sorted(checksums.keys() - {f.name for f in files})]:
        problem = part_problem(path, checksums) if path.exists() else f"missing, though {CHECKSUMS} records it"
        if problem is not None:
            raise InputFileError(f"{path}: {problem}; rerun `otm sweep` with the same settings to recompute it")
    return ds.dataset([str(f) for f in files], format="parquet").to_table()


def summarise(table: pa.Table) -> list[dict]:
    """One dict per ``(temperature, top_p, k, computation)``, sorted (module docstring)."""
    table = table.append_column("variance", pc.multiply(table["std_error"], table["std_error"]))
    grouped = table.group_by(list(GROUP)).aggregate([
        ("value", "mean"), ("value", "stddev", pc.VarianceOptions(ddof=1)), ("value", "count"),
        ("std_error", "mean"), ("variance", "sum"), ("method", "distinct"), ("position", "count"), ("seconds", "sum"),
    ])
    rows = []
    for row in grouped.to_pylist():
        n = row["value_count"]
        std = row["value_stddev"]
        monte_carlo = "monte_carlo" in row["method_distinct"]
        rows.append({
            "temperature": row["temperature"], "top_p": row["top_p"], "k": row["k"], "computation": row["computation"],
            "positions": n, "rows": row["position_count"], "mean": row["value_mean"],
            "standard_error": (std / math.sqrt(n)) if n and n > 1 and std is not None else None,
            "monte_carlo_error": row["std_error_mean"] if monte_carlo else None,
            "monte_carlo_error_of_mean": math.sqrt(row["variance_sum"]) / n if monte_carlo else None,
            "methods": sorted(row["method_distinct"]), "seconds": row["seconds_sum"],
        })
    return sorted(rows, key=lambda r: (r["temperature"], r["top_p"], r["computation"], r["k"]))


def per_position(table: pa.Table, computation: str, temperature: float, k: int, top_p: float = 1.0) -> np.ndarray:
    """``[n]`` the values of one computation at one configuration, ordered by (text, position)."""
    mask = pc.and_(pc.and_(pc.equal(table["computation"], computation), pc.equal(table["temperature"], temperature)),
                   pc.and_(pc.equal(table["k"], k), pc.equal(table["top_p"], top_p)))
    chosen = table.filter(mask).sort_by([("text", "ascending"), ("position", "ascending")])
    return np.array([np.nan if v is None else v for v in chosen["value"].to_pylist()], dtype=np.float64)


def write_figures(summary: list[dict], folder: str | Path) -> list[Path]:
    """``acceptance_vs_k_T{T}_top_p{P}.png`` per temperature and top-p; returns the paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = Path(folder)
    files = []
    for temperature, top_p in sorted({(r["temperature"], r["top_p"]) for r in summary}):
        rows = [r for r in summary if r["temperature"] == temperature and r["top_p"] == top_p and r["mean"] is not None]
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for computation in sorted({r["computation"] for r in rows}):
            line = sorted((r for r in rows if r["computation"] == computation), key=lambda r: r["k"])
            ks = [r["k"] for r in line]
            means = [r["mean"] for r in line]
            errors = [r["standard_error"] or 0.0 for r in line]
            style = "-" if computation.startswith("optimum") else "--"
            ax.errorbar(ks, means, yerr=errors, fmt=style + "o", markersize=3, capsize=2, label=computation)
        ax.set_xlabel("number of drafts k")
        ax.set_ylabel("mean acceptance P(Y in S(X)) over positions")
        ax.set_title(f"Optima (solid) and rules (dashed) vs k, T = {temperature:g}, top-p = {top_p:g}")
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        path = folder / f"acceptance_vs_k_T{temperature:g}_top_p{top_p:g}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        files.append(path)
    return files


__all__ = ["GROUP", "per_position", "read_table", "summarise", "write_figures"]
