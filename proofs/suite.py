"""The theorem suite and the paper-table reproductions as plain-data functions: what
``otm theorems`` and ``otm reproduce spechub-table4`` run (the application formats them).
"""
from __future__ import annotations

import json

from .registry import run_checks, stderr_progress


def run_theorems(paper: str | None = None, instances: int | None = None, seed: int = 0, progress: bool = True) -> list[dict]:
    """Run the theorem checks; one JSON-ready dict per claim (id, paper, source, claim,
    formula, method, instances, worst_slack, status, counterexample, note, tolerance)."""
    results = run_checks(paper, instances, seed, progress=stderr_progress if progress else None)
    return [check.as_dict() for check in results]


def theorems_table(rows: list[dict]) -> str:
    """A fixed-width table of the results (id, status, instances, worst slack, method)."""
    lines = [f"{'id':34} {'status':14} {'instances':>9} {'worst slack':>12}  method", "-" * 92]
    for row in rows:
        slack = "" if row["worst_slack"] is None else f"{row['worst_slack']:.3g}"
        lines.append(f"{row['id']:34} {row['status']:14} {row['instances']:>9} {slack:>12}  {row['method']}")
    counts = {s: sum(r["status"] == s for r in rows) for s in ("holds", "fails", "not checkable")}
    lines.append("-" * 92)
    lines.append(", ".join(f"{n} {s}" for s, n in counts.items()))
    failing = [r for r in rows if r["status"] != "holds"]
    for row in failing:
        lines.append(f"  {row['id']} ({row['status']}): {row['note']}")
        if row["counterexample"] is not None:
            lines.append(f"    counterexample: {json.dumps(row['counterexample'])[:400]}")
    return "\n".join(lines)


#: The paper tables ``otm reproduce`` knows: ``{name: what it is}``.
TABLES = {
    "spechub-table4": "SpecHub (Sun et al. 2024), Table 4: acceptance of RRS, RRS without replacement, the OTM "
                      "optima and SpecHub on App. E's toy pairs (V = 50, k = 2), 30 entries with standard errors",
}


def run_table4(pairs: int = 100, seed: int = 0, rrsw_method: str = "exact", reading: str = "stated") -> dict:
    """Reproduce SpecHub (Sun et al. 2024), Table 4 (see :mod:`proofs.table4`); ``reading`` picks how App. E
    is read (``"stated"`` or ``"gaussian_logits"``, see docs/theorems.md)."""
    from .table4 import reproduce_table4

    return reproduce_table4(pairs=pairs, seed=seed, rrsw_method=rrsw_method, reading=reading)
