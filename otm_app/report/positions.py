"""Per-position optima and rule acceptances of ``otm report`` (step 2), exact at the full
vocabulary, on three documented tiers of positions (the cost differs by 100x):

1. **every position**: ``optimal_iid`` for every ``k`` (:func:`otm.formulations.prefix_scan.iid_optimum_for_ks`,
   one sort per position and temperature, ~20 ms at ``V = 151,936``);
2. **rule positions** (``rule_positions`` evenly spaced positions, all by default on
   small inputs): every rule's exact acceptance (:func:`otm.tables.acceptance_point`,
   closed forms, 0.03-0.2 s per rule and ``k`` at full ``V``), next to ``optimal_iid``;
3. **WOR positions** (``wor_positions`` evenly spaced positions): ``optimal_without_replacement``
   (exact prefix scan, about a second per ``k`` at full ``V``) and ``rrs_wor``, whose law
   has no closed form: exact enumeration when the draft paths are at most
   :data:`RRS_WOR_ENUMERATION_LIMIT`, else a Rao-Blackwellised Monte Carlo estimate with
   its standard error (:func:`otm.rules.rrs_without_replacement.monte_carlo_acceptance`).

No number is approximated silently: tiers 1-2 and the WOR optimum are exact (float64),
``rrs_wor`` at a large vocabulary is labelled Monte Carlo and carries its standard error,
and every table says over which positions it is taken.

Why not truncate to the top tokens instead: on the built-in prose at ``T = 1`` the
Qwen pair's distributions are so flat that the 8,192 most probable tokens miss up to
0.24 of the mass, which moved acceptances by up to 0.05 (measured, docs/report.md).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from otm.tables import OPTIMAL_IID, OPTIMAL_WOR, AcceptanceTable, PositionTable, acceptance_point
from otm.distributions import check_draft_count, logits_to_probs
from otm.errors import InvalidDraftCountError, NotApplicableError, ShapeMismatchError
from otm.formulations.prefix_scan import iid_optimum_for_ks, prefix_scan
from otm.rules.rrs_without_replacement import monte_carlo_acceptance
from otm.rules import rule_acceptance, rule_spec
from otm.rules.enumeration import count_without_replacement

#: ``rrs_wor`` is enumerated exactly up to this many ordered draft paths (Python loops,
#: about a second per thousand paths) and estimated by Monte Carlo above it.
RRS_WOR_ENUMERATION_LIMIT = 720

_NOT_APPLICABLE = (NotApplicableError, InvalidDraftCountError)



@dataclass(frozen=True)
class PositionSettings:
    """What :func:`analyse_positions` computes, and where.

    Attributes:
        ks: draft counts.  rules: rule names (``otm.rules.RULES``, lossless ones).
        rule_positions: number of evenly spaced positions for tier 2 (``0`` = all).
        wor_positions: number of evenly spaced positions for tier 3 (``0`` = all).
        mc_paths: Monte Carlo paths per position for ``rrs_wor``.
    """

    ks: tuple
    rules: tuple
    rule_positions: int = 0
    wor_positions: int = 0
    mc_paths: int = 32


@dataclass
class PositionResult:
    """Results at one temperature.

    Attributes:
        temperature: ``T``.
        ks: ``[m]`` draft counts.
        optimum_iid: ``[n, m]`` ``optimal_iid`` at every position (tier 1).
        rules: tier 2 :class:`otm.tables.PositionTable` over ``rule_rows`` (columns
            ``optimal_iid`` and every rule except ``rrs_wor``).
        rule_rows: ``[n2]`` position indices of tier 2.
        wor: tier 3 table over ``wor_rows`` (``optimal_iid``, ``optimal_without_replacement``,
            ``rrs_wor`` if asked for).
        wor_rows: ``[n3]`` position indices of tier 3.
        mc_error: ``[n3, m]`` standard error of ``rrs_wor`` (0 where enumerated exactly).
    """

    temperature: float
    ks: np.ndarray
    optimum_iid: np.ndarray
    rules: PositionTable
    rule_rows: np.ndarray
    wor: PositionTable
    wor_rows: np.ndarray
    mc_error: np.ndarray
    notes: dict = field(default_factory=dict)


def spaced_rows(n: int, count: int) -> np.ndarray:
    """``count`` evenly spaced indices in ``0..n-1`` (all of them when ``count`` is 0 or >= n)."""
    if count <= 0 or count >= n:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, count).round().astype(np.int64))


def analyse_positions(
    target_logits,
    draft_logits,
    temperatures: Sequence[float],
    settings: PositionSettings,
    rng: np.random.Generator,
    label: str = "",
    progress: Callable[[Iterable], Iterable] | None = None,
) -> dict:
    """Optima and rule acceptances (module docstring), for each temperature.

    Args:
        target_logits: ``[n, V]`` target logits per position (row ``t`` predicts token ``t + 1``).
        draft_logits: ``[n, V]`` draft logits per position.
        temperatures: the ``T`` values (> 0); ``p = softmax(z / T)``, ``q = softmax(z' / T)``.
        rng: randomness of the ``rrs_wor`` Monte Carlo.
        progress: wraps the position iterator (e.g. ``tqdm``).

    Returns:
        temperature -> :class:`PositionResult`.
    """
    z_rows, w_rows = np.asarray(target_logits), np.asarray(draft_logits)
    if z_rows.ndim != 2 or z_rows.shape != w_rows.shape or z_rows.shape[0] == 0:
        raise ShapeMismatchError(f"target and draft logits must be non-empty [n, V] of one shape, got {z_rows.shape} and {w_rows.shape}")
    ks = np.asarray([check_draft_count(k) for k in settings.ks], dtype=np.int64)
    n, m = z_rows.shape[0], ks.size
    rule_rows, wor_rows = spaced_rows(n, settings.rule_positions), spaced_rows(n, settings.wor_positions)
    rule_names = tuple(r for r in settings.rules if r != "rrs_wor")
    wor_names = (OPTIMAL_IID, OPTIMAL_WOR) + (("rrs_wor",) if "rrs_wor" in settings.rules else ())
    results = {}
    for t in temperatures:
        tag = f"{label}, T = {t:g}" if label else f"T = {t:g}"
        results[t] = PositionResult(
            float(t), ks, np.full((n, m), np.nan),
            PositionTable(ks, {name: np.full((rule_rows.size, m), np.nan) for name in (OPTIMAL_IID, *rule_names)}, {}, f"{tag}, {rule_rows.size} positions"),
            rule_rows,
            PositionTable(ks, {name: np.full((wor_rows.size, m), np.nan) for name in wor_names}, {}, f"{tag}, {wor_rows.size} positions"),
            wor_rows, np.full((wor_rows.size, m), np.nan),
        )
    rule_slot = {int(r): j for j, r in enumerate(rule_rows)}
    wor_slot = {int(r): j for j, r in enumerate(wor_rows)}
    rows = range(n)
    for i in progress(rows) if progress else rows:
        z, w = z_rows[i].astype(np.float64), w_rows[i].astype(np.float64)
        for t in temperatures:
            result = results[t]
            p, q = logits_to_probs(z, t), logits_to_probs(w, t)
            result.optimum_iid[i] = iid_optimum_for_ks(p, q, ks)
            if i in rule_slot:
                _rule_row(result, rule_slot[i], p, q, rule_names)
            if i in wor_slot:
                _wor_row(result, wor_slot[i], p, q, settings, rng)
    for result in results.values():
        result.notes = _notes(settings, result)
    return results


def _rule_row(result: PositionResult, j: int, p, q, rule_names) -> None:
    table = result.rules
    table.columns[OPTIMAL_IID][j] = result.optimum_iid[result.rule_rows[j]]
    for a, k in enumerate(result.ks):
        # rules outside their k (single, spechub) are skipped: that saves a validation pass each
        allowed = tuple(r for r in rule_names if rule_spec(r).allows(int(k)))
        values, why = acceptance_point(p, q, int(k), allowed, ())
        for name, value in values.items():
            table.columns[name][j, a] = value
        for name, reason in why.items():
            table.notes.setdefault(name, f"n/a at k = {k}: {reason}")


def _wor_row(result: PositionResult, j: int, p, q, settings: PositionSettings, rng) -> None:
    table, ks = result.wor, result.ks
    table.columns[OPTIMAL_IID][j] = result.optimum_iid[result.wor_rows[j]]
    support = int(np.count_nonzero(q))
    for a, k in enumerate(ks):
        try:
            # prefix_scan directly: otm.optimum validates element by element in Python (~0.2 s at full V)
            table.columns[OPTIMAL_WOR][j, a] = float(prefix_scan(p, q, int(k), "without_replacement").acceptance)
        except _NOT_APPLICABLE as exc:
            table.notes.setdefault(OPTIMAL_WOR, f"n/a at k = {k}: {exc}")
    if "rrs_wor" not in table.columns:
        return
    usable = ks[ks <= support]
    if usable.size == 0:
        return
    if count_without_replacement(q, int(usable.max())) <= RRS_WOR_ENUMERATION_LIMIT:
        for a, k in enumerate(ks):
            if k <= support:
                table.columns["rrs_wor"][j, a] = float(rule_acceptance("rrs_wor", p, q, int(k)))
                result.mc_error[j, a] = 0.0
        return
    mean, error = monte_carlo_acceptance(p, q, int(usable.max()), settings.mc_paths, rng)
    for a, k in enumerate(ks):
        if k <= support:
            table.columns["rrs_wor"][j, a], result.mc_error[j, a] = mean[k - 1], error[k - 1]


def _notes(settings: PositionSettings, result: PositionResult) -> dict:
    """Column -> how it was computed (and why some cells are ``NaN``)."""
    notes = {
        OPTIMAL_IID: f"exact prefix scan at full vocabulary, every position ({result.optimum_iid.shape[0]})",
        OPTIMAL_WOR: f"exact prefix scan at full vocabulary, {result.wor_rows.size} evenly spaced positions (about 1 s per k and position)",
    }
    for rule in settings.rules:
        if rule == "rrs_wor":
            exact = bool((result.mc_error == 0).all())
            notes[rule] = (
                "exact enumeration of the draft paths" if exact else
                f"Rao-Blackwellised Monte Carlo ({settings.mc_paths} draft paths per position, standard error reported; "
                f"exact enumeration where <= {RRS_WOR_ENUMERATION_LIMIT} paths), {result.wor_rows.size} positions"
            )
        else:
            notes[rule] = f"exact at full vocabulary, {result.rule_rows.size} evenly spaced positions"
            low, high = rule_spec(rule).ks
            if low == high:
                notes[rule] += f" (defined for k = {low} only)"
    for table in (result.rules, result.wor):
        for name, reason in table.notes.items():
            notes[name] = f"{notes.get(name, '')}; {reason}".lstrip("; ")
    return notes


def optimum_vs_temperature(target_logits, draft_logits, rows: Sequence[int], temperatures: Sequence[float], ks: Sequence[int], label: str = "", progress=None):
    """Mean ``optimal_iid`` over ``rows`` against ``T``, one column per ``k``
    (an :class:`otm.tables.AcceptanceTable`)."""
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


__all__ = [
    "RRS_WOR_ENUMERATION_LIMIT",
    "PositionResult",
    "PositionSettings",
    "analyse_positions",
    "optimum_vs_temperature",
    "spaced_rows",
]
