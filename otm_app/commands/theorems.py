"""``otm theorems`` and ``otm reproduce``: run the theorem suite or a paper table
(:mod:`proofs.suite`) and print it."""
from __future__ import annotations

import json

from proofs.suite import run_table4, run_theorems, theorems_table
from proofs.table4 import table4_text

from ..configs import ReproduceConfig, TheoremsConfig


def run_theorems_command(config: TheoremsConfig) -> int:
    """Print every claim's verdict; exit status 1 when a claim fails (0 with ``allow_failures``)."""
    rows = run_theorems(paper=config.paper, instances=config.instances, seed=config.seed, progress=not config.json)
    print(json.dumps(rows, indent=2) if config.json else theorems_table(rows))
    failed = any(row["status"] == "fails" for row in rows)
    return 1 if failed and not config.allow_failures else 0


def run_reproduce_command(config: ReproduceConfig) -> int:
    """Print the reproduced table next to the paper's numbers."""
    result = run_table4(pairs=config.pairs, seed=config.seed, reading=config.reading)
    print(json.dumps(result, indent=2) if config.json else table4_text(result))
    return 0


__all__ = ["run_reproduce_command", "run_theorems_command"]
