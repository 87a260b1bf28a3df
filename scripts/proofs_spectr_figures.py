"""SpecTr (Sun et al. 2023) (SpecTr) Figs. 1-3 and an App. D.2-style comparison, as PNGs in docs/figures/.

    .venv/bin/python scripts/proofs_spectr_figures.py

Letters: p = target, q = draft (SpecTr's p is our q). Every optimum is otm's exact
closed form (prefix scan), cross-checked here against App. B.2's formulas.

- Fig. 1: draft U(d), d = 120, target U(d/r) for several r; alpha_k vs k.
- Fig. 2: draft Ber(0.25) (our q), target Ber(x) for several x; alpha_k vs k.
- Fig. 3: draft Ber(0.25), target Ber(x), x on the axis, several k.
- App. D.2 style: OTM-k vs k-SEQ as k grows, on toy LM-like pairs (softmax of Gaussian
  logits over 20 tokens; SpecTr used its own LM's top-10 union, which we do not have).
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from scipy.special import softmax  # noqa: E402

from otm.optimum import optimal_acceptance  # noqa: E402
from otm.rules import rule_law  # noqa: E402
from proofs.spectr import bernoulli_closed_form, uniform_closed_form  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "docs" / "figures"
KS = np.arange(1, 41)


def bernoulli(x: float) -> np.ndarray:
    return np.array([1 - x, x])


def figure1(path: Path) -> None:
    d = 120
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for r in (1.5, 2, 4, 8, 20):
        m = int(d / r)
        p = np.r_[np.full(m, 1 / m), np.zeros(d - m)]
        q = np.full(d, 1 / d)
        values = [optimal_acceptance(p, q, int(k)) for k in KS]
        assert np.allclose(values, [uniform_closed_form(d / m, int(k)) for k in KS], atol=1e-9)
        ax.plot(KS, values, marker=".", label=f"target U({m}), r = {d / m:g}")
    ax.set(xlabel="number of drafts k", ylabel="optimal acceptance alpha_k", title="SpecTr Fig. 1: draft U(120), target U(120/r)")
    ax.legend(), ax.grid(alpha=0.3), fig.tight_layout(), fig.savefig(path, dpi=120), plt.close(fig)


def figure2(path: Path) -> None:
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for x in (0.05, 0.1, 0.25, 0.5, 0.75, 0.95):
        values = [optimal_acceptance(bernoulli(x), bernoulli(0.25), int(k)) for k in KS]
        assert np.allclose(values, [bernoulli_closed_form(x, 0.25, int(k)) for k in KS], atol=1e-9)
        ax.plot(KS, values, marker=".", label=f"target Ber({x})")
    ax.set(xlabel="number of drafts k", ylabel="optimal acceptance alpha_k", title="SpecTr Fig. 2: draft Ber(0.25)")
    ax.legend(), ax.grid(alpha=0.3), fig.tight_layout(), fig.savefig(path, dpi=120), plt.close(fig)


def figure3(path: Path) -> None:
    xs = np.linspace(0, 1, 201)
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for k in (1, 2, 4, 8, 16):
        values = [optimal_acceptance(bernoulli(x), bernoulli(0.25), k) for x in xs]
        assert np.allclose(values, [bernoulli_closed_form(x, 0.25, k) for x in xs], atol=1e-9)
        ax.plot(xs, values, label=f"k = {k}")
    ax.set(xlabel="target probability of token 1, x (target Ber(x))", ylabel="optimal acceptance alpha_k", title="SpecTr Fig. 3: draft Ber(0.25)")
    ax.legend(), ax.grid(alpha=0.3), fig.tight_layout(), fig.savefig(path, dpi=120), plt.close(fig)


def figure_d2(path: Path, pairs: int = 3, vocab: int = 20, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    ks = np.arange(1, 21)
    fig, axes = plt.subplots(1, pairs, figsize=(4.2 * pairs, 3.8), sharey=True)
    for i, ax in enumerate(np.atleast_1d(axes)):
        logits = rng.standard_normal(vocab) * 2
        p = softmax(logits)
        q = softmax(logits + rng.standard_normal(vocab) * 1.5)
        otm = [optimal_acceptance(p, q, int(k)) for k in ks]
        kseq = [rule_law("kseq", p, q, int(k), method="closed_form") for k in ks]
        ax.plot(ks, otm, "o-", label="OTM-k (optimal)")
        ax.plot(ks, [float(law.details["lower_bound"]) for law in kseq], "s--", label="k-SEQ, 1-(1-beta)^k")
        ax.plot(ks, [float(law.acceptance) for law in kseq], "x:", label="k-SEQ, membership")
        ax.set(xlabel="number of drafts k", title=f"toy pair {i + 1} (V = {vocab}), TV = {0.5 * np.abs(p - q).sum():.2f}")
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].set_ylabel("acceptance probability")
    np.atleast_1d(axes)[0].legend()
    fig.suptitle("SpecTr App. D.2 style: OTM-k vs k-SEQ as k grows")
    fig.tight_layout(), fig.savefig(path, dpi=120), plt.close(fig)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    figure1(OUT / "proofs_spectr_fig1.png")
    figure2(OUT / "proofs_spectr_fig2.png")
    figure3(OUT / "proofs_spectr_fig3.png")
    figure_d2(OUT / "proofs_spectr_d2.png")
    print(f"wrote 4 figures to {OUT}")


if __name__ == "__main__":
    main()
