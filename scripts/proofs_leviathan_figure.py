"""Leviathan et al. (2023) (Leviathan et al.) speed-up and operations vs alpha (their Fig. 4), with the
slides' table points, as a PNG in docs/figures/.

    .venv/bin/python scripts/proofs_leviathan_figure.py

Curves from Thm 3.8 / 3.11 with c = c_hat = 0 (the value that reproduces the table).
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from proofs.leviathan import PAPER_TABLE, operations_factor, walltime_factor  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "docs" / "figures" / "proofs_leviathan_speed_ops.png"


def main() -> None:
    alphas = np.linspace(0.01, 0.99, 199)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for gamma in (2, 3, 5, 10):
        left.plot(alphas, [walltime_factor(a, gamma, 0.0) for a in alphas], label=f"gamma = {gamma}")
        right.plot(alphas, [operations_factor(a, gamma, 0.0) for a in alphas], label=f"gamma = {gamma}")
    left.scatter([r[0] for r in PAPER_TABLE], [r[3] for r in PAPER_TABLE], color="k", zorder=3, label="slides' table")
    right.scatter([r[0] for r in PAPER_TABLE], [r[2] for r in PAPER_TABLE], color="k", zorder=3, label="slides' table")
    left.set(xlabel="acceptance rate alpha", ylabel="walltime improvement (Thm 3.8)", title="speed-up, c = 0")
    right.set(xlabel="acceptance rate alpha", ylabel="operations factor (Thm 3.11)", title="operations, c_hat = 0")
    for ax in (left, right):
        ax.grid(alpha=0.3), ax.legend()
    fig.suptitle("Leviathan et al.: speed-up and operations vs alpha")
    fig.tight_layout()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(OUT, dpi=120)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
