"""Step 2 of ``otm report``: the optima and every rule at **every** position, on the sweep
engine (:mod:`otm_app.sweep`).

The scored texts are written as a corpus (:mod:`otm.corpus`, float32 logits as the models
gave them) and swept with the report's ``k``, temperatures and rules: the i.i.d. and
without-replacement optima (prefix scan), and every rule's exact acceptance from its
closed form, all at the full vocabulary. ``rrs_wor`` above ``k = 2`` has no closed form:
there it is a Rao-Blackwellised Monte Carlo estimate with its standard error (labelled as
such; exact by enumeration on a small vocabulary). Every table and figure of the report
is over the same positions.

Why not truncate to the top tokens instead: on the built-in prose at ``T = 1`` the Qwen
pair's distributions are so flat that the 8,192 most probable tokens miss up to 0.24 of
the mass, which moved acceptances by up to 0.05 (measured, docs/report.md).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from otm.distributions import check_draft_count, logits_to_probs
from otm.errors import ShapeMismatchError
from otm.formulations.prefix_scan import iid_optimum_for_ks
from otm.tables import OPTIMAL_IID, OPTIMAL_WOR, AcceptanceTable, PositionTable

from ..configs import SweepConfig
from ..sweep.engine import run_sweep
from ..sweep.summary import read_table


@dataclass(frozen=True)
class PositionSettings:
    """What :func:`analyse_positions` computes.

    Attributes:
        ks: draft counts.  rules: rule names (lossless ones).
        positions: evenly spaced positions analysed (``0`` = every position).
        mc_paths: Monte Carlo paths per position for ``rrs_wor`` above ``k = 2``.
        workers: Dask worker processes (0: one per core).
    """

    ks: tuple
    rules: tuple
    positions: int = 0
    mc_paths: int = 256
    workers: int = 0


@dataclass
class PositionResult:
    """Results at one temperature, every column over the same positions.

    Attributes:
        temperature: ``T``.
        table: :class:`otm.tables.PositionTable` with ``optimum_iid``,
            ``optimum_without_replacement`` and one column per rule, ``[n, m]``.
        rows: ``[n]`` the corpus rows analysed (indices into the stacked texts).
        mc_error: ``[n, m]`` standard error of ``rrs_wor`` (0 where exact, NaN where absent).
        monte_carlo: ``[n, m]`` True where ``rrs_wor`` is a Monte Carlo estimate.
        notes: column -> how it was computed.
    """

    temperature: float
    table: PositionTable
    rows: np.ndarray
    mc_error: np.ndarray
    monte_carlo: np.ndarray
    notes: dict = field(default_factory=dict)

    @property
    def ks(self) -> np.ndarray:
        return self.table.ks


def spaced_rows(n: int, count: int) -> np.ndarray:
    """``count`` evenly spaced indices in ``0..n-1`` (all of them when ``count`` is 0 or >= n)."""
    if count <= 0 or count >= n:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, count).round().astype(np.int64))


def analyse_positions(scored, temperatures: Sequence[float], settings: PositionSettings, folder: Path, seed: int = 0,
                      quiet: bool = True) -> dict:
    """Sweep the scored texts (module docstring); returns temperature -> :class:`PositionResult`.

    Args:
        scored: :class:`otm_app.report.sources.ScoredTexts`.
        folder: where the corpus (``corpus/``) and the sweep table (``sweep/``) are written.
    """
    from decoding.models.teacher_forcing import TextScores, write_corpus

    ks = tuple(check_draft_count(k) for k in settings.ks)
    n = sum(s.n_positions for s in scored.scores)
    rows = spaced_rows(n, settings.positions)
    keep = np.zeros(n, dtype=bool)
    keep[rows] = True
    chosen, offset = [], 0
    for s in scored.scores:  # the analysed rows of each text, keeping their positions
        mask = keep[offset:offset + s.n_positions]
        token_ids = np.concatenate([s.token_ids[:1], s.next_token_ids[mask]])  # each kept row's next token stays its own
        whole = mask.all()  # every row: the arrays themselves, not a copy
        chosen.append((TextScores(s.name, token_ids, s.target_logits if whole else s.target_logits[mask],
                                  s.draft_logits if whole else s.draft_logits[mask]), np.flatnonzero(mask)))
        offset += s.n_positions
    corpus = folder / "corpus"
    write_corpus([c[0] for c in chosen], corpus, scored.vocab_size, shard_size=32, dtype="float32", source=scored.source)
    order = _row_order(chosen)
    del chosen  # the analysed rows' logits are in the corpus now; not held through the sweep
    computations = (OPTIMAL_IID, OPTIMAL_WOR, *settings.rules)
    config = SweepConfig(corpus=str(corpus), out=str(folder / "sweep"), ks=ks, temperatures=tuple(temperatures),
                         computations=computations, workers=settings.workers, mc_paths=settings.mc_paths, seed=seed,
                         figures=False, quiet=quiet)
    run_sweep(config)
    table = read_table(config.out)
    return {float(t): _result(table, float(t), ks, computations, order, rows) for t in temperatures}


def _row_order(chosen) -> dict:
    """``(text, position in the corpus text) -> report row``, in the order of the texts."""
    order, j = {}, 0
    for scores, _ in chosen:
        for position in range(scores.n_positions):
            order[(scores.name, position)] = j
            j += 1
    return order


def _result(table, temperature: float, ks: tuple, computations: tuple, order: dict, rows: np.ndarray) -> PositionResult:
    n, m = len(order), len(ks)
    columns = {name: np.full((n, m), np.nan) for name in computations}
    mc_error = np.full((n, m), np.nan)
    monte_carlo = np.zeros((n, m), dtype=bool)
    methods: dict = {name: set() for name in computations}
    notes_seen: dict = {}
    k_index = {k: a for a, k in enumerate(ks)}
    data = table.filter(np.array([t == temperature for t in table["temperature"].to_pylist()]))
    for text, position, k, name, value, error, method, note in zip(*(data[c].to_pylist() for c in (
            "text", "position", "k", "computation", "value", "std_error", "method", "note"))):
        i, a = order[(text, position)], k_index[k]
        columns[name][i, a] = np.nan if value is None else value
        methods[name].add(method)
        if name == "rrs_wor" and value is not None:
            mc_error[i, a] = error
            monte_carlo[i, a] = method == "monte_carlo"
        if note and method != "exact":
            notes_seen.setdefault(name, note)
    notes = {name: _describe(name, methods[name], notes_seen.get(name), n) for name in computations}
    return PositionResult(temperature, PositionTable(np.asarray(ks), columns, {}, f"T = {temperature:g}, {n} positions"),
                          rows, mc_error, monte_carlo, notes)


def _describe(name: str, methods: set, note: str | None, n: int) -> str:
    how = {"exact": "exact at the full vocabulary", "monte_carlo": "Monte Carlo with its standard error",
           "not_applicable": "not applicable at some k", "skipped": "skipped (too slow)"}
    text = ", ".join(how[m] for m in sorted(methods)) + f"; every one of the {n} positions"
    return text + (f" ({note})" if note else "")


def optimum_vs_temperature(target_logits, draft_logits, rows: Sequence[int], temperatures: Sequence[float], ks: Sequence[int],
                           label: str = "", progress=None) -> AcceptanceTable:
    """Mean ``optimum_iid`` over ``rows`` against ``T``, one column per ``k`` (one sort per
    position and temperature serves every ``k``)."""
    if len(target_logits) != len(draft_logits):
        raise ShapeMismatchError("target and draft logits must have one row per position each")
    temperatures = np.asarray(temperatures, dtype=np.float64)
    ks = [check_draft_count(k) for k in ks]
    sums = np.zeros((temperatures.size, len(ks)))
    for i in progress(rows) if progress else rows:
        z, w = np.asarray(target_logits[i], dtype=np.float64), np.asarray(draft_logits[i], dtype=np.float64)
        for a, t in enumerate(temperatures):
            sums[a] += iid_optimum_for_ks(logits_to_probs(z, t), logits_to_probs(w, t), ks)
    columns = {f"k = {k}": sums[:, b] / max(len(rows), 1) for b, k in enumerate(ks)}
    title = f"OTM optimum (i.i.d. drafts) vs temperature, mean over {len(rows)} positions{': ' + label if label else ''}"
    return AcceptanceTable("temperature", "dimensionless", temperatures, columns, {}, title)


__all__ = ["PositionResult", "PositionSettings", "analyse_positions", "optimum_vs_temperature", "spaced_rows"]
