"""What ``otm theorems`` and ``otm reproduce spechub-table4`` call (the lead wires them into
:mod:`otm.cli`): functions that return plain dicts, and printers for them.

    otm theorems [--paper P] [--json] [--instances N] [--seed S]
        -> print_theorems(run_theorems(paper, instances, seed), as_json)
    otm reproduce spechub-table4 [--pairs N] [--seed S] [--json]
        -> print_table4(run_table4(pairs, seed), as_json)
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


def print_theorems(rows: list[dict], as_json: bool = False) -> None:
    """Print ``run_theorems``'s rows as JSON (a list) or as a table."""
    print(json.dumps(rows, indent=2) if as_json else theorems_table(rows))


def run_table4(pairs: int = 100, seed: int = 0, rrsw_method: str = "exact", reading: str = "stated") -> dict:
    """Reproduce seed 000 Table 4 (see :mod:`proofs.table4`); ``reading`` picks how App. E
    is read (``"stated"`` or ``"gaussian_logits"``, see docs/theorems.md)."""
    from .table4 import reproduce_table4

    return reproduce_table4(pairs=pairs, seed=seed, rrsw_method=rrsw_method, reading=reading)


def print_table4(result: dict, as_json: bool = False) -> None:
    """Print ``run_table4``'s result as JSON or as a table next to the paper's numbers."""
    from .table4 import table4_text

    print(json.dumps(result, indent=2) if as_json else table4_text(result))
