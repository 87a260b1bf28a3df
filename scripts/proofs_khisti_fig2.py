"""Khisti et al. 2025, Fig. 2 style: optimal acceptance (Thm 3) vs SpecTr (k-SEQ) and SpecInfer (RRS),
two i.i.d. drafts over 3 tokens, as a PNG in docs/figures/.

    .venv/bin/python scripts/proofs_khisti_fig2.py

The paper's text lost the figure's parameters; this reconstruction keeps its structure (a
fixed target, a one-parameter draft family through the target, x on the axis):
left, target U3 and draft (x, (1-x)/2, (1-x)/2); right, target (0.2, 0.3, 0.5) and draft
(x, 0.3, 0.7 - x). The paper's point shows: the optimum is 1 on a whole interval
(Thm 2), the baselines only at q = p.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from otm.formulations.khisti_k2 import khisti_k2_closed_form  # noqa: E402
from otm.rules import rule_acceptance  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "docs" / "figures" / "proofs_khisti_fig2.png"

PANELS = (
    ("target U3, draft (x, (1-x)/2, (1-x)/2)", np.full(3, 1 / 3), lambda x: np.array([x, (1 - x) / 2, (1 - x) / 2]), (0.0, 1.0)),
    ("target (0.2, 0.3, 0.5), draft (x, 0.3, 0.7-x)", np.array([0.2, 0.3, 0.5]), lambda x: np.array([x, 0.3, 0.7 - x]), (0.0, 0.7)),
)


def main() -> None:
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, (title, p, draft, (lo, hi)) in zip(axes, PANELS):
        xs = np.linspace(lo, hi, 141)
        ax.plot(xs, [khisti_k2_closed_form(p, draft(x)) for x in xs], label="optimal (Thm 3)")
        ax.plot(xs, [float(rule_acceptance("kseq", p, draft(x), 2)) for x in xs], "--", label="SpecTr (k-SEQ)")
        ax.plot(xs, [float(rule_acceptance("rrs", p, draft(x), 2)) for x in xs], ":", label="SpecInfer (RRS)")
        ax.set(xlabel="x (draft probability of token 0)", title=title)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("acceptance probability, k = 2")
    axes[0].legend()
    fig.suptitle("Khisti et al. Fig. 2 style (parameters reconstructed)")
    fig.tight_layout()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(OUT, dpi=120)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
