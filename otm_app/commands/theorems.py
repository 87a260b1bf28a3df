"""``otm theorems`` and ``otm reproduce``: run the theorem suite or a paper table
(:mod:`proofs.suite`) and print it."""
from __future__ import annotations

import json
import sys

from proofs.suite import TABLES, run_table4, run_theorems, theorems_table
from proofs.table4 import READINGS, table4_text

from ..configs import ReproduceConfig, TheoremsConfig


def run_theorems_command(config: TheoremsConfig) -> int:
    """Print every claim's verdict; exit status 1 when a claim fails (0 with ``allow_failures``)."""
    rows = run_theorems(paper=config.paper, instances=config.instances, seed=config.seed, progress=not config.json)
    print(json.dumps(rows, indent=2) if config.json else theorems_table(rows))
    failed = any(row["status"] == "fails" for row in rows)
    if not any(row["status"] == "holds" for row in rows) and not failed:
        print("otm theorems: nothing was checked (every claim is not checkable); see the notes", file=sys.stderr)
        return 1
    return 1 if failed and not config.allow_failures else 0


def run_reproduce_command(config: ReproduceConfig) -> int:
    """Print the reproduced table next to the paper's numbers, and whether it reproduces
    (``list``: the tables and the readings of their recipes)."""
    if config.table == "list":
        listing = {"tables": TABLES, "readings": {"spechub-table4": list(READINGS)}}
        print(json.dumps(listing, indent=2) if config.json else "\n".join(
            f"{name}: {what}\n  --reading {' | '.join(READINGS)}" for name, what in TABLES.items()))
        return 0
    result = run_table4(pairs=config.pairs, seed=config.seed, reading=config.reading)
    print(json.dumps(result, indent=2) if config.json else table4_text(result))
    return 0


__all__ = ["run_reproduce_command", "run_theorems_command"]
