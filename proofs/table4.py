"""Reproduction of SpecHub (Sun et al. 2024), Table 4 (toy acceptance rates, App. E).

Recipe as App. E states it: ``|V| = 50``; logits ``u_p, u_q ~ Unif(0, 1)^50``;
``p = softmax(u_p / T)`` (target), ``q = softmax(lam u_p / T + (1 - lam) u_q / T)`` (draft);
two drafts; 100 pairs per cell; mean acceptance rate of

- RRS: recursive rejection sampling with i.i.d. drafts (exact, closed form);
- RRSw: RRS without replacement (the paper: Monte Carlo with 1000 repetitions; here the
  exact law by enumerating the 2450 ordered pairs, or Monte Carlo on request);
- OTM / OTMw: the OTM optimum for i.i.d. / without-replacement pairs (prefix scan);
- SpecHub (exact, closed form).

We report the mean over pairs with its standard error (std / sqrt(pairs)). The same
``(u_p, u_q)`` draws are used in every cell (common random numbers; the paper does not
say whether it redrew them per cell).
"""
from __future__ import annotations

import math

import numpy as np

from scipy.special import softmax

import otm
from otm.errors import InvalidDistributionError, UnknownNameError


VOCAB_SIZE = 50
TEMPERATURES = (0.1, 0.25, 0.5)
LAMBDAS = (0.7, 0.5)
METHODS = ("RRS", "RRSw", "OTM", "OTMw", "SpecHub")

#: SpecHub (Sun et al. 2024), Table 4, {(T, lam): {method: value}}.
PAPER_TABLE4 = {
    (0.1, 0.7): {"RRS": 0.6273, "RRSw": 0.7120, "OTM": 0.6380, "OTMw": 0.7345, "SpecHub": 0.7402},
    (0.1, 0.5): {"RRS": 0.3323, "RRSw": 0.4057, "OTM": 0.3346, "OTMw": 0.4125, "SpecHub": 0.4123},
    (0.25, 0.7): {"RRS": 0.7354, "RRSw": 0.7653, "OTM": 0.7846, "OTMw": 0.8321, "SpecHub": 0.8113},
    (0.25, 0.5): {"RRS": 0.4564, "RRSw": 0.4978, "OTM": 0.4743, "OTMw": 0.5245, "SpecHub": 0.4968},
    (0.5, 0.7): {"RRS": 0.8090, "RRSw": 0.8122, "OTM": 0.9037, "OTMw": 0.9150, "SpecHub": 0.8500},
    (0.5, 0.5): {"RRS": 0.6456, "RRSw": 0.6593, "OTM": 0.7052, "OTMw": 0.7206, "SpecHub": 0.6403},
}

#: The most pairs per cell :func:`reproduce_table4` takes (checked before the logits are drawn).
MAX_PAIRS = 100_000

#: A standard error below this means every pair gave the same value (float noise only).
ZERO_SPREAD = 1e-12

#: An entry agrees with the paper when it is within this many standard errors of it (a
#: correct reproduction exceeds 3 s.e. in about 1 entry of 370 by chance).
Z_AGREEMENT = 3.0

#: Half a unit of the paper's last printed digit (it prints 4 decimals): an entry whose every
#: pair gave the same value agrees when it is this close to the paper's number.
PAPER_ROUNDING = 5e-5

#: The reading under which the table reproduces (docs/theorems.md, "Discrepancies and findings").
REPRODUCING_READING = "gaussian_logits"

#: How App. E's recipe can be read (:func:`toy_pair`; docs/theorems.md compares them).
READINGS = ("stated", "gaussian_logits", "probability_mix", "temperature_times")

#: Monte Carlo repetitions per pair for RRSw when ``rrsw_method="monte_carlo"`` (the paper's count).
MONTE_CARLO_REPETITIONS = 1000


def toy_pair(u_p: np.ndarray, u_q: np.ndarray, temperature: float, lam: float, reading: str = "stated"):
    """``(p, q)`` from the uniform logits (``[V]`` each) for one reading of App. E.

    Readings (see docs/theorems.md): ``"stated"`` as written (``u`` uniform on (0, 1));
    ``"gaussian_logits"``: the same formulas with ``u`` standard normal (what
    ``torch.randn`` would give; passed in as ``u_p, u_q``, see :func:`draw_logits`);
    ``"probability_mix"``: q mixes probabilities, ``lam p + (1 - lam) softmax(u_q / T)``;
    ``"temperature_times"``: logits multiplied by T instead of divided.
    """
    if reading == "gaussian_logits":
        reading = "stated"
    if reading == "stated":
        return softmax(u_p / temperature), softmax((lam * u_p + (1 - lam) * u_q) / temperature)
    if reading == "probability_mix":
        p = softmax(u_p / temperature)
        return p, lam * p + (1 - lam) * softmax(u_q / temperature)
    if reading == "temperature_times":
        return softmax(u_p * temperature), softmax((lam * u_p + (1 - lam) * u_q) * temperature)
    raise UnknownNameError(f"unknown reading {reading!r} of the recipe; choose one of {', '.join(READINGS)}")


def draw_logits(rng: np.random.Generator, reading: str = "stated"):
    """``(u_p, u_q)``: ``[V]`` each, uniform on (0, 1), or standard normal for ``"gaussian_logits"``."""
    if reading == "gaussian_logits":
        return rng.standard_normal(VOCAB_SIZE), rng.standard_normal(VOCAB_SIZE)
    return rng.random(VOCAB_SIZE), rng.random(VOCAB_SIZE)


def rrsw_monte_carlo(p, q, rng: np.random.Generator, repetitions: int = MONTE_CARLO_REPETITIONS) -> float:
    """Monte Carlo acceptance of RRS without replacement with two drafts, sampled with the
    joint draft law and the rule's exact per-tuple acceptance from ``otm`` (so only the
    draws are random): the paper's estimator, 1000 repetitions per pair."""
    law = otm.rule_law("rrs_wor", p, q, 2)
    per_tuple = np.asarray(law.details["coupling"], dtype=np.float64)
    member = np.zeros(per_tuple.shape, dtype=bool)
    member[np.arange(len(law.draft_law.probs))[:, None], law.draft_law.tuples] = True
    accept_given_tuple = (per_tuple * member).sum(axis=1) / law.draft_law.probs.astype(np.float64)
    index = rng.choice(len(accept_given_tuple), size=repetitions, p=law.draft_law.probs.astype(np.float64))
    return float((rng.random(repetitions) < accept_given_tuple[index]).mean())


def acceptances(p, q, rrsw_method: str = "exact", rng: np.random.Generator | None = None) -> dict:
    """The five acceptance rates of Table 4 for one pair."""
    rule_acceptance, optimal_acceptance = otm.rule_acceptance, otm.optimal_acceptance
    if rrsw_method == "exact":
        rrsw = float(rule_acceptance("rrs_wor", p, q, 2))
    else:
        rrsw = rrsw_monte_carlo(p, q, rng)
    return {
        "RRS": float(rule_acceptance("rrs", p, q, 2, method="closed_form")),
        "RRSw": rrsw,
        "OTM": float(optimal_acceptance(p, q, 2, draft_scheme="iid")),
        "OTMw": float(optimal_acceptance(p, q, 2, draft_scheme="without_replacement")),
        "SpecHub": float(rule_acceptance("spechub", p, q, 2, method="closed_form")),
    }


def reproduce_table4(pairs: int = 100, seed: int = 0, rrsw_method: str = "exact", reading: str = "stated") -> dict:
    """Means and standard errors over ``pairs`` toy pairs per (T, lam) cell, with the
    paper's numbers and the difference in standard errors.

    Returns ``{"recipe", "pairs", "seed", "rrsw_method", "reading", "cells": [{"T", "lam",
    "methods": {name: {"mean", "se", "paper", "z"}}}]}``.
    """
    if reading not in READINGS:
        raise UnknownNameError(f"unknown reading {reading!r} of the recipe; choose one of {', '.join(READINGS)}")
    if isinstance(pairs, bool) or not isinstance(pairs, int) or not 2 <= pairs <= MAX_PAIRS:
        raise InvalidDistributionError(f"pairs must be an integer in 2..{MAX_PAIRS:,} (a standard error needs two "
                                       f"pairs; the default 100 takes about a minute), got {pairs!r}")
    rng = np.random.default_rng(seed)
    logits = [draw_logits(rng, reading) for _ in range(pairs)]
    cells = []
    for temperature in TEMPERATURES:
        for lam in LAMBDAS:
            values = {m: [] for m in METHODS}
            for u_p, u_q in logits:
                p, q = toy_pair(u_p, u_q, temperature, lam, reading)
                for name, value in acceptances(p, q, rrsw_method, rng).items():
                    values[name].append(value)
            methods = {}
            for name in METHODS:
                data = np.array(values[name])
                mean, se = float(data.mean()), float(data.std(ddof=1) / math.sqrt(len(data))) if len(data) > 1 else 0.0
                paper = PAPER_TABLE4[(temperature, lam)][name]
                z = (mean - paper) / se if se > ZERO_SPREAD else None  # every pair equal (e.g. all 1): no z
                methods[name] = {"mean": mean, "se": se, "paper": paper, "z": z}
            cells.append({"T": temperature, "lam": lam, "methods": methods})
    result = {
        "recipe": "SpecHub (Sun et al. 2024), App. E: V=50, u ~ U(0,1)^V, p = softmax(u_p/T), q = softmax((lam u_p + (1-lam) u_q)/T), k = 2",
        "pairs": pairs, "seed": seed, "rrsw_method": rrsw_method, "reading": reading, "cells": cells,
    }
    result["verdict"] = reproduction_verdict(result)
    return result


def _agrees(entry: dict) -> bool:
    if entry["z"] is None:  # every pair gave the same value: compare to the printed digits
        return abs(entry["mean"] - entry["paper"]) <= PAPER_ROUNDING
    return abs(entry["z"]) <= Z_AGREEMENT


def reproduction_verdict(result: dict) -> dict:
    """Whether the table reproduces: ``{"entries", "agree", "reproduces", "largest_z",
    "note"}``. An entry agrees when it is within :data:`Z_AGREEMENT` standard errors of the
    paper's number (or, when every pair gave the same value, within the paper's rounding);
    the note says which reading reproduces when this one does not."""
    entries = [cell["methods"][m] for cell in result["cells"] for m in METHODS]
    agree = sum(_agrees(e) for e in entries)
    zs = [abs(e["z"]) for e in entries if e["z"] is not None]
    largest = max(zs) if zs else None
    reproduces = agree == len(entries)
    if reproduces:
        note = f"reproduces: all {len(entries)} entries within {Z_AGREEMENT:g} s.e. of the paper"
    else:
        note = (f"does not reproduce: {len(entries) - agree} of {len(entries)} entries are more than "
                f"{Z_AGREEMENT:g} s.e. from the paper (largest |z| = {largest:.1f})")
        if result["reading"] != REPRODUCING_READING:
            note += (f". The reading that reproduces is --reading {REPRODUCING_READING}: the same formulas with "
                     "standard-normal logits, which App. E's 'uniform' logits most likely are "
                     "(docs/theorems.md, 'Discrepancies and findings', item 1)")
    return {"entries": len(entries), "agree": agree, "reproduces": reproduces, "largest_z": largest, "note": note}


def table4_text(result: dict) -> str:
    """Ours (mean +- se) next to the paper's number, one row per (T, lam)."""
    header = f"{'T':>5} {'lam':>4} | " + " | ".join(f"{m:^24}" for m in METHODS)
    lines = [
        f"SpecHub (Sun et al. 2024), Table 4 reproduction: {result['pairs']} pairs, seed {result['seed']}, RRSw {result['rrsw_method']}, reading {result['reading']!r}",
        "each entry: ours mean +- s.e. [paper] (z = (ours - paper) / s.e.)",
        header,
        "-" * len(header),
    ]
    for cell in result["cells"]:
        entries = []
        for m in METHODS:
            e = cell["methods"][m]
            z = "" if e["z"] is None else f"{e['z']:+.1f}"
            entries.append(f"{e['mean']:.4f}+-{e['se']:.4f} [{e['paper']:.4f}] {z:>5}")
        lines.append(f"{cell['T']:>5} {cell['lam']:>4} | " + " | ".join(f"{x:24}" for x in entries))
    lines.append(result["verdict"]["note"])
    return "\n".join(lines)
