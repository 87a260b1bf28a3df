"""``otm report``: the theorem suite, then the report of :mod:`otm_app.report.run`."""
from __future__ import annotations

import json

from proofs.suite import run_theorems

from ..configs import ReportConfig
from ..outputs import output_folder
from ..report.budget import THEOREM_SUITE_SECONDS, StepClock
from ..report.run import check_config, run_report


def run_report_command(config: ReportConfig) -> int:
    """Run the theorem suite and the report; print the summary (table, or JSON)."""
    check_config(config)
    output_folder(config.out)  # before the theorem suite: a bad --out fails at once
    clock = StepClock(config.quiet)
    clock.start("theorems", "step 1/4", "the theorem suite", [(THEOREM_SUITE_SECONDS, 1)])
    rows = run_theorems(seed=config.seed, progress=not config.quiet)
    clock.end("theorems")
    summary = run_report(config, rows, clock)
    if config.json:
        print(json.dumps(summary, indent=2, default=str))
    return 0


__all__ = ["run_report_command"]
