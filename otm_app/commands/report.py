"""``otm report``: the theorem suite, then the report of :mod:`otm_app.report.run`."""
from __future__ import annotations

import json
import sys

from proofs.suite import run_theorems

from ..configs import ReportConfig
from ..outputs import output_folder
from ..report.run import check_config, run_report


def run_report_command(config: ReportConfig) -> int:
    """Run the theorem suite and the report; print the summary (table, or JSON)."""
    check_config(config)
    output_folder(config.out)  # before the theorem suite: a bad --out fails at once
    if not config.quiet:
        print("otm report: step 1/4, the theorem suite (about 40 s)", file=sys.stderr)
    rows = run_theorems(seed=config.seed, progress=not config.quiet)
    summary = run_report(config, rows)
    if config.json:
        print(json.dumps(summary, indent=2, default=str))
    return 0


__all__ = ["run_report_command"]
