"""Tables of acceptance against the OTM optimum, for notebooks and ``otm report``.

Two kinds of table, both plain numpy:

- :class:`AcceptanceTable`: one swept parameter (``k``, temperature, draft/target
  similarity, a Bernoulli parameter, ...) against columns ``"optimal_iid"``,
  ``"optimal_without_replacement"`` and one column per rule, each ``[n]``.
- :class:`PositionTable`: a batch of ``(p, q)`` rows (one per text position) against
  ``k``: each column ``[n_positions, n_k]``. Built from closed forms only
  (:data:`CLOSED_FORM_RULES`), so it runs at a 150k-token vocabulary.

A cell is ``NaN`` exactly when the column does not apply there (``spechub`` needs
``k = 2``, ``single`` ``k = 1``, without-replacement drafts need ``k`` tokens with
``q > 0``, ...); the reason is kept in the table's ``notes``. Every other error
propagates.

Acceptance is membership acceptance ``P(Y in S(X))`` (docs/theory.md). A rule's fair
reference is the optimum of its own draft law (:data:`RULE_REFERENCE`): ``rrs_wor``
draws without replacement, ``spechub`` and ``greedy`` use their own sparse laws (for
which each is optimal, SpecHub (Sun et al. 2024), Thm 1 / docs/theory.md per-token bound), so they can exceed
the i.i.d. optimum.

Toy families (SpecTr (Sun et al. 2023), App. B.2, Khisti et al. (2025), Example 1, our letters p = target,
q = draft):

- similarity: ``p = softmax(z / T)``, ``q = softmax((lam z + (1 - lam) z') / T)``;
  ``lam = 1`` gives ``q = p``.
- SpecTr Fig. 1: ``p = U(d / r)`` (target), ``q = U(d)`` (draft), nested supports.
- SpecTr Figs. 2-3: ``p = Ber(a)`` (target), ``q = Ber(0.25)`` (draft; SpecTr's letters
  are swapped, its "p = Ber(0.25)" is the draft).
- Khisti Example 1 / Fig. 2: ``q = U(3)`` (draft), ``p = (p_1, t, 1 - p_1 - t)``
  (target), ``k = 2`` (the paper's text lost the numbers; reconstructed, see
  :func:`three_token_pair`).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from .distributions import as_distribution, check_draft_count, logits_to_probs
from .errors import InvalidDistributionError, InvalidDraftCountError, NotApplicableError, ShapeMismatchError, UnknownNameError
from .formulations.spectr_bounds import bernoulli_optimum, uniform_optimum
from .optimum import optimal_acceptance
from .rules import ENSEMBLE_RULES, RULES, rule_acceptance
from .tolerances import AGREEMENT_TOLERANCE

#: Column names of the two optima.
OPTIMAL_IID, OPTIMAL_WOR = "optimal_iid", "optimal_without_replacement"

#: Sampling scheme of each optimum column.
OPTIMUM_COLUMNS = {OPTIMAL_IID: "iid", OPTIMAL_WOR: "without_replacement"}

#: Every lossless rule (the ensembles output ``r``, not ``p``, and are left out).
LOSSLESS_RULES = tuple(rule for rule in RULES if rule not in ENSEMBLE_RULES)

#: Rules with an O(V) closed form (``method="closed_form"``): usable at 150k tokens.
#: ``rrs_wor`` (path-dependent law) and the importance-sampling rules (LPs over
#: ``V^k`` tuples) have none.
CLOSED_FORM_RULES = ("single", "rrs", "specinfer", "kseq", "spechub", "greedy")

#: The optimum column each rule should be compared with (its own draft law); ``None``
#: where the rule's law is neither i.i.d. nor without replacement (it is optimal for it).
RULE_REFERENCE = {
    "single": OPTIMAL_IID,
    "rrs": OPTIMAL_IID,
    "specinfer": OPTIMAL_IID,
    "kseq": OPTIMAL_IID,
    "importance_sampling": OPTIMAL_IID,
    "importance_sampling_truncated": OPTIMAL_IID,
    "rrs_wor": OPTIMAL_WOR,
    "spechub": None,
    "greedy": None,
}

#: Errors that mean "this column does not apply to this instance" (a NaN cell); any
#: other error (bad input, a solver failure) propagates.
_NOT_APPLICABLE = (NotApplicableError, InvalidDraftCountError)

#: Column of :func:`three_token_table` holding the single-draft rule at its own k = 1.
SINGLE_AT_K1 = "single (k = 1)"


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
    by more than ``tolerance``: each is a bug (docs/theory.md "No rule beats the optimum for
    its own Q"). Returns one readable line per offending column; empty when all is well.

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


def acceptance_point(p, q, k: int, rules: Sequence[str] = LOSSLESS_RULES, optima: Sequence[str] = tuple(OPTIMUM_COLUMNS), rule_method: str = "auto") -> tuple[dict, dict]:
    """Optima and rule acceptances for one ``(p, q, k)``.

    Args:
        p: ``[V]`` target.  q: ``[V]`` draft.  k: number of drafts.
        rules: rule names (:data:`otm.rules.RULES`).
        optima: optimum columns (keys of :data:`OPTIMUM_COLUMNS`).
        rule_method: ``method=`` for the rules (``"closed_form"`` at large V; ``"auto"``
            enumerates small instances, the only choice for the importance-sampling rules).

    Returns:
        ``(values, notes)``: column -> float (``NaN`` when it does not apply) and
        column -> reason for each ``NaN``.
    """
    k = check_draft_count(k)
    _check_names(rules, optima)
    values, notes = {}, {}
    for name in optima:
        values[name], why = _attempt(lambda: optimal_acceptance(p, q, k, sampling=OPTIMUM_COLUMNS[name]))
        if why:
            notes[name] = why
    params = {} if rule_method == "auto" else {"method": rule_method}
    for rule in rules:
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
        if rule not in RULES:
            raise UnknownNameError(f"unknown rule {rule!r}; choose from {', '.join(RULES)}")
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
) -> AcceptanceTable:
    """The generic sweep: at each ``value``, ``(p, q) = pair_at(value)`` and ``k`` drafts
    (``k`` an int, or a callable ``value -> k`` for a sweep over ``k``)."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1 or values.size == 0:
        raise ShapeMismatchError(f"sweep values must be a non-empty 1-D sequence, got shape {values.shape}")
    k_at = k if callable(k) else (lambda value: k)
    columns = {name: np.full(values.size, np.nan) for name in (*optima, *rules)}
    notes: dict = {}
    for i, value in enumerate(values):
        p, q = pair_at(value)
        point, why = acceptance_point(p, q, k_at(value), rules, optima)
        for name, v in point.items():
            columns[name][i] = v
        for name, reason in why.items():
            notes.setdefault(name, f"n/a at {parameter} = {value:g}: {reason}")
    return AcceptanceTable(parameter, unit, values, columns, notes, title)


def acceptance_vs_k(p, q, ks: Sequence[int], rules: Sequence[str] = LOSSLESS_RULES, optima: Sequence[str] = tuple(OPTIMUM_COLUMNS), label: str = "") -> AcceptanceTable:
    """Acceptance of every rule and the optima against the number of drafts ``k``."""
    p, q = as_distribution(p, "p (target)"), as_distribution(q, "q (draft)")
    ks = [check_draft_count(k) for k in ks]
    return acceptance_sweep(
        lambda value: (p, q), ks, lambda value: int(value), parameter="k", unit="drafts",
        title=f"Acceptance vs number of drafts: rules against the OTM optimum{_suffix(label)}", rules=rules, optima=optima,
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


def acceptance_vs_similarity(target_logits, other_logits, similarities: Sequence[float], k: int, temperature: float = 1.0, rules: Sequence[str] = LOSSLESS_RULES, optima: Sequence[str] = tuple(OPTIMUM_COLUMNS), label: str = "") -> AcceptanceTable:
    """Acceptance against the draft/target similarity ``lam`` of :func:`similarity_pair`."""
    z, w = _logit_pair(target_logits, other_logits)
    return acceptance_sweep(
        lambda lam: similarity_pair(z, w, lam, temperature), similarities, k,
        parameter="similarity lambda", unit="dimensionless, 1 = identical", rules=rules, optima=optima,
        title=f"Acceptance vs draft/target similarity (k = {k}, T = {temperature:g}): rules against the OTM optimum{_suffix(label)}",
    )


def _suffix(label: str) -> str:
    return f" ({label})" if label else ""


def _logit_pair(a, b) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape:
        raise ShapeMismatchError(f"logit vectors must be 1-D of one length, got shapes {a.shape} and {b.shape}")
    return a, b


# --------------------------------------------------------------------------- toy families


def toy_logit_pair(rng: np.random.Generator, vocab_size: int, scale: float = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """Two independent ``[V]`` Gaussian logit vectors ``(z, z')`` with standard deviation
    ``scale``: the target's ``z`` and an unrelated ``z'`` to mix into the draft."""
    if vocab_size < 1:
        raise InvalidDistributionError(f"vocab_size must be >= 1, got {vocab_size}")
    return scale * rng.standard_normal(vocab_size), scale * rng.standard_normal(vocab_size)


def similarity_pair(target_logits, other_logits, similarity: float, temperature: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """``p = softmax(z / T)``, ``q = softmax((lam z + (1 - lam) z') / T)``, ``lam`` in [0, 1].

    >>> p, q = similarity_pair([0.0, 1.0], [5.0, -5.0], 1.0)
    >>> bool(np.allclose(p, q))
    True
    """
    if not 0 <= similarity <= 1:
        raise InvalidDistributionError(f"similarity must lie in [0, 1] (1 = identical models), got {similarity!r}")
    z, w = _logit_pair(target_logits, other_logits)
    return logits_to_probs(z, temperature), logits_to_probs(similarity * z + (1 - similarity) * w, temperature)


def three_token_pair(t, first=Fraction(1, 3)) -> tuple[np.ndarray, np.ndarray]:
    """Khisti et al.'s three-token family (Khisti et al. (2025), Example 1, Fig. 2; reconstructed: the
    extracted text lost the numbers): draft ``q = U(3)``, target ``p = (first, t, 1 - first - t)``.

    Example 1 (as checked in ``proofs.khisti``): ``alpha* = 1`` with ``k = 2`` iff
    ``p_(1) >= 1/9`` and ``p_(1) + p_(2) >= 4/9`` (``p`` sorted ascending), while one
    draft reaches 1 only at ``p = q``. Exact Fractions in, exact Fractions out.

    >>> p, q = three_token_pair(Fraction(1, 3))
    >>> p.tolist() == q.tolist()
    True
    """
    exact = isinstance(t, (Fraction, int)) and isinstance(first, (Fraction, int))
    last = 1 - first - t
    if min(first, t, last) < 0:
        raise InvalidDistributionError(f"three_token_pair needs 0 <= t <= 1 - first, got t={t}, first={first}")
    if exact:
        return np.array([Fraction(first), Fraction(t), Fraction(last)], dtype=object), np.array([Fraction(1, 3)] * 3, dtype=object)
    return np.array([float(first), float(t), float(last)]), np.full(3, 1 / 3)


def three_token_table(ts: Sequence[float], first: float = 1 / 3, k: int = 2, rules: Sequence[str] = ("single", "specinfer", "kseq", "spechub", "rrs_wor")) -> AcceptanceTable:
    """Khisti et al. (2025), Fig. 2 (reconstructed): acceptance against ``t = p_2`` for
    :func:`three_token_pair`, ``k = 2``; ``single`` is computed with its own ``k = 1``
    (column :data:`SINGLE_AT_K1`)."""
    def pair_at(t):
        return three_token_pair(float(t), float(first))

    title = f"Khisti's three-token example: q = U(3), p = ({float(first):.3g}, p_2, rest), k = {k}"
    table = acceptance_sweep(pair_at, ts, k, parameter="target p_2", unit="probability", rules=[r for r in rules if r != "single"], title=title)
    if "single" not in rules:
        return table
    single = acceptance_sweep(pair_at, ts, 1, parameter="target p_2", unit="probability", rules=["single"], optima=(), title=title)
    return AcceptanceTable(table.parameter, table.unit, table.values, {**table.columns, SINGLE_AT_K1: single.columns["single"]}, table.notes, title)


def uniform_table(draft_size: int, target_sizes: Sequence[int], ks: Sequence[int], sampling: str = "iid") -> AcceptanceTable:
    """SpecTr Fig. 1 (SpecTr (Sun et al. 2023), App. B.2): ``alpha*`` for target ``U(m)``, draft ``U(d)``
    (nested supports) against ``k``, one column per ``m``."""
    ks = [check_draft_count(k) for k in ks]
    columns = {f"p = U({m}), r = {draft_size / m:g}": np.array([float(uniform_optimum(m, draft_size, k, sampling)) for k in ks]) for m in target_sizes}
    return AcceptanceTable(
        "k", "drafts", np.asarray(ks, dtype=np.float64), columns, {},
        f"SpecTr Fig. 1: optimal acceptance vs k, draft q = U({draft_size}), target p = U(d/r) ({sampling.replace('_', ' ')})",
    )


def bernoulli_table_vs_k(draft_one: float, target_ones: Sequence[float], ks: Sequence[int]) -> AcceptanceTable:
    """SpecTr Fig. 2 (our letters): ``alpha*`` for target ``Ber(a)``, draft ``Ber(draft_one)``
    against ``k``, one column per ``a``."""
    ks = [check_draft_count(k) for k in ks]
    columns = {f"p = Ber({a:g})": np.array([bernoulli_optimum(a, draft_one, k) for k in ks]) for a in target_ones}
    return AcceptanceTable(
        "k", "drafts", np.asarray(ks, dtype=np.float64), columns, {},
        f"SpecTr Fig. 2: optimal acceptance vs k, draft q = Ber({draft_one:g}), target p = Ber(a)",
    )


def bernoulli_table_vs_target(draft_one: float, target_ones: Sequence[float], ks: Sequence[int]) -> AcceptanceTable:
    """SpecTr Fig. 3 (our letters): ``alpha*`` against the target's ``a = p(1)``, one
    column per ``k``; draft ``Ber(draft_one)``."""
    target_ones = np.asarray(target_ones, dtype=np.float64)
    columns = {f"k = {k}": np.array([bernoulli_optimum(a, draft_one, check_draft_count(k)) for a in target_ones]) for k in ks}
    return AcceptanceTable(
        "target p(1)", "probability", target_ones, columns, {},
        f"SpecTr Fig. 3: optimal acceptance vs the target's p(1), draft q = Ber({draft_one:g})",
    )


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
    """Per-position optima and rule acceptances for rows of real logits, closed forms only.

    Args:
        target_probs: ``[n_positions, V]`` p per position.
        draft_probs: ``[n_positions, V]`` q per position.
        ks: draft counts.
        rules: a subset of :data:`CLOSED_FORM_RULES` (anything else raises
            :class:`NotApplicableError`: it would enumerate ``V^k`` tuples).
        optima: optimum columns (the prefix scan; without replacement costs about 2 s
            per row and ``k`` at ``V = 150k``, i.i.d. about 0.2 s).
        progress: wraps the row iterator (e.g. ``tqdm.tqdm``).
    """
    p_rows, q_rows = np.asarray(target_probs, dtype=np.float64), np.asarray(draft_probs, dtype=np.float64)
    if p_rows.ndim != 2 or p_rows.shape != q_rows.shape:
        raise ShapeMismatchError(f"target_probs and draft_probs must be [n_positions, V] of one shape, got {p_rows.shape} and {q_rows.shape}")
    slow = [r for r in rules if r not in CLOSED_FORM_RULES]
    if slow:
        raise NotApplicableError(f"rules {slow} have no closed form; per-position tables take {', '.join(CLOSED_FORM_RULES)}")
    ks = np.asarray([check_draft_count(k) for k in ks], dtype=np.int64)
    _check_names(rules, optima)
    columns = {name: np.full((p_rows.shape[0], ks.size), np.nan) for name in (*optima, *rules)}
    notes: dict = {}
    rows = range(p_rows.shape[0])
    for i in progress(rows) if progress else rows:
        for j, k in enumerate(ks):
            point, why = acceptance_point(p_rows[i], q_rows[i], int(k), rules, optima, rule_method="closed_form")
            for name, v in point.items():
                columns[name][i, j] = v
            for name, reason in why.items():
                notes.setdefault(name, f"n/a at k = {k}: {reason}")
    return PositionTable(ks, columns, notes, label)


__all__ = [
    "CLOSED_FORM_RULES",
    "LOSSLESS_RULES",
    "OPTIMAL_IID",
    "OPTIMAL_WOR",
    "OPTIMUM_COLUMNS",
    "RULE_REFERENCE",
    "SINGLE_AT_K1",
    "AcceptanceTable",
    "PositionTable",
    "acceptance_point",
    "acceptance_sweep",
    "acceptance_vs_k",
    "acceptance_vs_similarity",
    "acceptance_vs_temperature",
    "optimum_violations",
    "bernoulli_table_vs_k",
    "bernoulli_table_vs_target",
    "position_acceptances",
    "similarity_pair",
    "three_token_pair",
    "three_token_table",
    "toy_logit_pair",
    "uniform_table",
]
