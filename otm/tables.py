"""Tables of acceptance against the OTM optimum, for notebooks and ``otm report``.

Two kinds of table, both plain numpy:

- :class:`AcceptanceTable`: one swept parameter (``k``, temperature, draft/target
  similarity, a Bernoulli parameter, ...) against columns ``"optimum_iid"``,
  ``"optimum_without_replacement"`` and one column per rule, each ``[n]``.
- :class:`PositionTable`: a batch of ``(p, q)`` rows (one per text position) against
  ``k``: each column ``[n_positions, n_k]``, from closed forms only (any vocabulary size).

A cell is ``NaN`` exactly when the column does not apply there (``spechub`` needs
``k = 2``, ``single`` ``k = 1``, without-replacement drafts need ``k`` tokens with
``q > 0``, ...) or when its exact law would take longer than the cell's time budget
(estimated from measured costs, :func:`otm.rules.estimated_seconds`); the reason is kept
in the table's ``notes``. Every other error propagates.

Acceptance is membership acceptance ``P(Y in S(X))``. A rule's fair reference is the
optimum of its own draft law (:data:`RULE_REFERENCE`, from the rule registry):
``rrs_wor`` draws without replacement, ``spechub`` and ``greedy`` use their own sparse
laws (for which each is optimal), so they can exceed the i.i.d. optimum.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .distributions import as_distribution, check_draft_count, logits_to_probs
from .errors import InvalidDraftCountError, NotApplicableError, ShapeMismatchError, UnknownNameError
from .optimum import optimal_acceptance
from .rules import draft_support, estimated_seconds, rule_acceptance, rule_spec, rule_specs
from .tolerances import AGREEMENT_TOLERANCE

#: Column names of the two optima.
OPTIMAL_IID, OPTIMAL_WOR = "optimum_iid", "optimum_without_replacement"

#: Sampling scheme of each optimum column.
OPTIMUM_COLUMNS = {OPTIMAL_IID: "iid", OPTIMAL_WOR: "without_replacement"}

#: Every lossless rule (the ensembles output ``r``, not ``p``, and are left out).
LOSSLESS_RULES = tuple(spec.name for spec in rule_specs(lossless=True))

#: Lossless rules with a closed-form acceptance (for some ``k``): usable at 150k tokens.
CLOSED_FORM_RULES = tuple(spec.name for spec in rule_specs(lossless=True) if spec.closed_form)

#: The optimum column each rule should be compared with (its own draft law, from the
#: registry); ``None`` where the law is neither i.i.d. nor without replacement (SpecHub's
#: hub law, greedy drafts: each rule attains its own law's optimum).
RULE_REFERENCE = {
    spec.name: {"iid": OPTIMAL_IID, "without_replacement": OPTIMAL_WOR}.get(spec.reference_optimum)
    for spec in rule_specs(lossless=True)
}

#: Seconds a table cell may take by default (rules above it are ``NaN``, with the estimate).
CELL_TIME_BUDGET = 2.0

#: Errors that mean "this column does not apply to this instance" (a NaN cell); any
#: other error (bad input, a solver failure) propagates.
_NOT_APPLICABLE = (NotApplicableError, InvalidDraftCountError)



@dataclass(frozen=True)
class AcceptanceTable:
    """Acceptance against one swept parameter.

    Attributes:
        parameter: name of the swept quantity (``"k"``, ``"temperature"``, ...).
        unit: its unit for axis labels (``"drafts"``, ``"dimensionless"``, ...).
        values: ``[n]`` the parameter values.
        columns: name -> ``[n]`` acceptance; ``NaN`` where the column does not apply.
        notes: column -> why some of its cells are ``NaN``.
        title: what is compared (used by :mod:`otm.plots`).
    """

    parameter: str
    unit: str
    values: np.ndarray  # [n]
    columns: dict
    notes: dict = field(default_factory=dict)
    title: str = ""

    def gap(self, column: str, reference: str = OPTIMAL_IID) -> np.ndarray:  # [n]
        """``columns[reference] - columns[column]`` (the acceptance the column leaves on
        the table); :class:`UnknownNameError` for a missing column."""
        return self._column(reference) - self._column(column)

    def _column(self, name: str) -> np.ndarray:
        if name not in self.columns:
            raise UnknownNameError(f"no column {name!r}; the table has {', '.join(self.columns)}")
        return self.columns[name]

    def to_text(self, digits: int = 4) -> str:
        """A fixed-width text table (``n/a`` for ``NaN``), then the notes."""
        names = list(self.columns)
        widths = [max(digits + 4, len(n) + 2) for n in names]
        first = max(12, len(self.parameter) + 1)
        lines = [f"{self.parameter:>{first}}" + "".join(f"{n:>{w}}" for n, w in zip(names, widths))]
        for i, value in enumerate(self.values):
            cells = ("n/a" if np.isnan(self.columns[n][i]) else f"{self.columns[n][i]:.{digits}f}" for n in names)
            lines.append(f"{value:>{first}.6g}" + "".join(f"{c:>{w}}" for c, w in zip(cells, widths)))
        lines += [f"note: {name}: {why}" for name, why in self.notes.items()]
        return "\n".join(lines)


@dataclass(frozen=True)
class PositionTable:
    """Per-position acceptance for a batch of ``(p, q)`` rows.

    Attributes:
        ks: ``[m]`` draft counts.
        columns: name -> ``[n_positions, m]`` acceptance (``NaN``: not applicable).
        notes: column -> why some cells are ``NaN``.
        label: what the rows are (e.g. ``"Qwen2.5-Coder 1.5B / 0.5B, T = 1.0"``).
    """

    ks: np.ndarray  # [m]
    columns: dict
    notes: dict = field(default_factory=dict)
    label: str = ""

    @property
    def n_positions(self) -> int:
        return int(next(iter(self.columns.values())).shape[0])

    def gap(self, column: str, reference: str = OPTIMAL_IID) -> np.ndarray:  # [n_positions, m]
        """Per-position ``reference - column``."""
        for name in (column, reference):
            if name not in self.columns:
                raise UnknownNameError(f"no column {name!r}; the table has {', '.join(self.columns)}")
        return self.columns[reference] - self.columns[column]

    def k_index(self, k: int) -> int:
        """Column index of ``k`` in :attr:`ks`."""
        hits = np.flatnonzero(self.ks == k)
        if hits.size == 0:
            raise UnknownNameError(f"k={k} was not computed; the table has k in {self.ks.tolist()}")
        return int(hits[0])

    def mean_over_positions(self) -> AcceptanceTable:
        """Mean acceptance per ``k`` (positions where a column applies), as a table vs ``k``."""
        columns = {}
        for name, values in self.columns.items():
            counts = (~np.isnan(values)).sum(axis=0)
            sums = np.where(np.isnan(values), 0.0, values).sum(axis=0)
            columns[name] = np.divide(sums, counts, out=np.full(sums.shape, np.nan), where=counts > 0)
        return AcceptanceTable(
            "k", "drafts", self.ks.astype(np.float64), columns, dict(self.notes),
            f"Mean acceptance over {self.n_positions} positions vs k{': ' + self.label if self.label else ''}",
        )


def optimum_violations(table: AcceptanceTable | PositionTable, tolerance: float = AGREEMENT_TOLERANCE) -> list[str]:
    """Cells where a rule beats the optimum of its own draft law (:data:`RULE_REFERENCE`)
    by more than ``tolerance``: each is a bug (docs/theory.md, section 1.1: a lossless
    rule is a feasible plan of its own law's LP). Returns one readable line per offending column; empty when all is well.

    Rules without an i.i.d. / without-replacement reference (``spechub``, ``greedy``) are
    checked against the per-token bound only by :mod:`proofs`, not here.
    """
    found = []
    for rule, values in table.columns.items():
        reference = RULE_REFERENCE.get(rule)
        if reference is None or reference not in table.columns:
            continue
        excess = values - table.columns[reference]
        bad = np.flatnonzero(np.nan_to_num(excess, nan=-np.inf).ravel() > tolerance)
        if bad.size:
            found.append(f"{rule} exceeds {reference} by up to {np.nanmax(excess):.3g} at {bad.size} cell(s)")
    return found


# --------------------------------------------------------------------------- one point


def acceptance_point(p, q, k: int, rules: Sequence[str] = LOSSLESS_RULES, optima: Sequence[str] = tuple(OPTIMUM_COLUMNS),
                     time_budget: float = CELL_TIME_BUDGET, closed_forms: bool = True) -> tuple[dict, dict]:
    """Optima and rule acceptances for one ``(p, q, k)``.

    Args:
        p: ``[V]`` target.  q: ``[V]`` draft.  k: number of drafts.
        rules: rule names (:data:`otm.rules.RULES`).
        optima: optimum columns (keys of :data:`OPTIMUM_COLUMNS`).
        time_budget: a rule whose exact law is estimated to take longer (seconds,
            :func:`otm.rules.estimated_seconds`) is skipped (``NaN``, with the estimate
            in the notes); ``math.inf`` computes everything.
        closed_forms: use a rule's closed form wherever the registry has one (``False``:
            the rule's own ``method="auto"``, which enumerates small instances - the slow
            reference the closed forms are tested against).

    Returns:
        ``(values, notes)``: column -> float (``NaN`` when it does not apply or was
        skipped) and column -> reason for each ``NaN``.
    """
    k = check_draft_count(k)
    _check_names(rules, optima)
    values, notes = {}, {}
    for name in optima:
        values[name], why = _attempt(lambda: optimal_acceptance(p, q, k, draft_scheme=OPTIMUM_COLUMNS[name]))
        if why:
            notes[name] = why
    support = draft_support(q)
    for rule in rules:
        spec = rule_spec(rule)
        cost = estimated_seconds(spec, support, k) if spec.allows(k) else 0.0
        if cost > time_budget:
            values[rule], notes[rule] = float("nan"), f"skipped: its exact law would take about {cost:.3g} s (budget {time_budget:g} s)"
            continue
        params = {"method": "closed_form"} if closed_forms and spec.has_closed_form(k) else {}
        values[rule], why = _attempt(lambda: rule_acceptance(rule, p, q, k, **params))
        if why:
            notes[rule] = why
    return values, notes


def _attempt(compute: Callable[[], object]) -> tuple[float, str | None]:
    """``(float(compute()), None)``, or ``(NaN, reason)`` when it does not apply."""
    try:
        return float(compute()), None
    except _NOT_APPLICABLE as exc:
        return float("nan"), str(exc)


def _check_names(rules: Sequence[str], optima: Sequence[str]) -> None:
    for rule in rules:
        rule_spec(rule)  # UnknownNameError listing the rules
    for name in optima:
        if name not in OPTIMUM_COLUMNS:
            raise UnknownNameError(f"unknown optimum column {name!r}; choose from {', '.join(OPTIMUM_COLUMNS)}")


# --------------------------------------------------------------------------- sweeps


def acceptance_sweep(
    pair_at: Callable[[float], tuple],
    values: Sequence[float],
    k,
    *,
    parameter: str,
    unit: str,
    title: str,
    rules: Sequence[str] = LOSSLESS_RULES,
    optima: Sequence[str] = tuple(OPTIMUM_COLUMNS),
    time_budget: float = CELL_TIME_BUDGET,
    closed_forms: bool = True,
) -> AcceptanceTable:
    """The generic sweep: at each ``value``, ``(p, q) = pair_at(value)`` and ``k`` drafts
    (``k`` an int, or a callable ``value -> k`` for a sweep over ``k``); ``time_budget`` and
    ``closed_forms`` as in :func:`acceptance_point`."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1 or values.size == 0:
        raise ShapeMismatchError(f"sweep values must be a non-empty 1-D sequence, got shape {values.shape}")
    k_at = k if callable(k) else (lambda value: k)
    columns = {name: np.full(values.size, np.nan) for name in (*optima, *rules)}
    notes: dict = {}
    for i, value in enumerate(values):
        p, q = pair_at(value)
        point, why = acceptance_point(p, q, k_at(value), rules, optima, time_budget, closed_forms)
        for name, v in point.items():
            columns[name][i] = v
        for name, reason in why.items():
            notes.setdefault(name, f"n/a at {parameter} = {value:g}: {reason}")
    return AcceptanceTable(parameter, unit, values, columns, notes, title)


def acceptance_vs_k(p, q, ks: Sequence[int], rules: Sequence[str] = LOSSLESS_RULES, optima: Sequence[str] = tuple(OPTIMUM_COLUMNS),
                    label: str = "", **point_options) -> AcceptanceTable:
    """Acceptance of every rule and the optima against the number of drafts ``k``
    (``point_options``: ``time_budget``, ``closed_forms`` of :func:`acceptance_point`)."""
    p, q = as_distribution(p, "p (target)"), as_distribution(q, "q (draft)")
    ks = [check_draft_count(k) for k in ks]
    return acceptance_sweep(
        lambda value: (p, q), ks, lambda value: int(value), parameter="k", unit="drafts",
        title=f"Acceptance vs number of drafts: rules against the OTM optimum{_suffix(label)}", rules=rules, optima=optima,
        **point_options,
    )


def acceptance_vs_temperature(target_logits, draft_logits, temperatures: Sequence[float], k: int, rules: Sequence[str] = LOSSLESS_RULES, optima: Sequence[str] = tuple(OPTIMUM_COLUMNS), label: str = "") -> AcceptanceTable:
    """Acceptance at ``p = softmax(z / T)``, ``q = softmax(z' / T)`` (the same ``T`` for
    both models, as in a decoding run) against ``T``."""
    z, w = _logit_pair(target_logits, draft_logits)
    return acceptance_sweep(
        lambda t: (logits_to_probs(z, t), logits_to_probs(w, t)), temperatures, k,
        parameter="temperature", unit="dimensionless", rules=rules, optima=optima,
        title=f"Acceptance vs sampling temperature (k = {k}): rules against the OTM optimum{_suffix(label)}",
    )


def _suffix(label: str) -> str:
    return f" ({label})" if label else ""


def _logit_pair(a, b) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape:
        raise ShapeMismatchError(f"logit vectors must be 1-D of one length, got shapes {a.shape} and {b.shape}")
    return a, b


# --------------------------------------------------------------------------- positions


def position_acceptances(
    target_probs,
    draft_probs,
    ks: Sequence[int],
    rules: Sequence[str] = CLOSED_FORM_RULES,
    optima: Sequence[str] = tuple(OPTIMUM_COLUMNS),
    label: str = "",
    progress: Callable[[Iterable], Iterable] | None = None,
) -> PositionTable:
    """Per-position optima and rule acceptances for rows of real distributions, from closed
    forms only (any vocabulary size).

    Args:
        target_probs: ``[n_positions, V]`` p per position.
        draft_probs: ``[n_positions, V]`` q per position.
        ks: draft counts.
        rules: rules with a closed form (:data:`CLOSED_FORM_RULES`); a cell whose ``k``
            the closed form does not cover (``rrs_wor`` above ``k = 2``) is ``NaN``, with
            the reason in the notes. A rule without any closed form raises
            :class:`NotApplicableError` (it would enumerate ``V^k`` tuples).
        optima: optimum columns (the prefix scan).
        progress: wraps the row iterator (e.g. ``tqdm.tqdm``).
    """
    p_rows, q_rows = np.asarray(target_probs, dtype=np.float64), np.asarray(draft_probs, dtype=np.float64)
    if p_rows.ndim != 2 or p_rows.shape != q_rows.shape:
        raise ShapeMismatchError(f"target_probs and draft_probs must be [n_positions, V] of one shape, got {p_rows.shape} and {q_rows.shape}")
    slow = [r for r in rules if not rule_spec(r).closed_form]
    if slow:
        raise NotApplicableError(f"rules {slow} have no closed form; per-position tables take {', '.join(CLOSED_FORM_RULES)}")
    ks = np.asarray([check_draft_count(k) for k in ks], dtype=np.int64)
    _check_names(rules, optima)
    columns = {name: np.full((p_rows.shape[0], ks.size), np.nan) for name in (*optima, *rules)}
    notes: dict = {}
    rows = range(p_rows.shape[0])
    for i in progress(rows) if progress else rows:
        for j, k in enumerate(ks):
            covered = [r for r in rules if rule_spec(r).has_closed_form(int(k))]
            for r in rules:
                if r not in covered and rule_spec(r).allows(int(k)):
                    notes.setdefault(r, f"n/a at k = {k}: no closed form there")
            point, why = acceptance_point(p_rows[i], q_rows[i], int(k), covered, optima)
            for name, v in point.items():
                columns[name][i, j] = v
            for name, reason in why.items():
                notes.setdefault(name, f"n/a at k = {k}: {reason}")
    return PositionTable(ks, columns, notes, label)


__all__ = [
    "CELL_TIME_BUDGET",
    "CLOSED_FORM_RULES",
    "LOSSLESS_RULES",
    "OPTIMAL_IID",
    "OPTIMAL_WOR",
    "OPTIMUM_COLUMNS",
    "RULE_REFERENCE",
    "AcceptanceTable",
    "PositionTable",
    "acceptance_point",
    "acceptance_sweep",
    "acceptance_vs_k",
    "acceptance_vs_temperature",
    "optimum_violations",
    "position_acceptances",
]
