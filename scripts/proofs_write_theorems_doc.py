"""Run every theorem check and the Table 4 reproduction (both readings of App. E) and write
docs/theorems.md.

    .venv/bin/python scripts/proofs_write_theorems_doc.py [--instances N] [--seed S] [--pairs P]

Takes a few minutes (the exact RRSw law at V = 50 dominates Table 4).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from proofs.suite import run_table4, run_theorems
from proofs.report import theorems_markdown

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pairs", type=int, default=100)
    args = parser.parse_args()
    rows = run_theorems(instances=args.instances, seed=args.seed)
    tables = [run_table4(pairs=args.pairs, seed=args.seed, reading=reading) for reading in ("stated", "gaussian_logits")]
    command = "python scripts/proofs_write_theorems_doc.py" + (f" --instances {args.instances}" if args.instances else "") + (
        f" --seed {args.seed}" if args.seed else "") + (f" --pairs {args.pairs}" if args.pairs != 100 else "")
    (ROOT / "docs" / "theorems.md").write_text(theorems_markdown(rows, tables, command))
    (ROOT / "docs" / "figures").mkdir(parents=True, exist_ok=True)
    print(json.dumps({r["id"]: r["status"] for r in rows}, indent=1))


if __name__ == "__main__":
    main()
