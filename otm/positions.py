"""Everything a sweep computes at one position: the optima and every rule's acceptance for
one ``(p, q)`` and several ``k``, exact where an exact method exists at this size.

Computations (names used in sweep tables):

- ``optimum_iid``, ``optimum_without_replacement``: the prefix scan (docs/theory.md 2.1);
  ``optimum_hub`` (``k = 2``), ``optimum_greedy``: the per-token bound (2.3). The i.i.d.
  optimum of every ``k`` comes from one sort; without replacement the ``k`` of a call share
  one order, its prefix data and one branch and bound whose rounds evaluate every ``k`` at
  once (:meth:`otm.formulations.prefix_scan.WithoutReplacementScan.solve_together`; each value
  within the scan's guarantee, so a column may differ in the last bits with the set of ``k``
  asked together).
  The rules the registry marks ``computed_as_optimum`` are their law's optimum
  (:class:`otm.rules.registry.RuleSpec`): ``optimal`` the i.i.d. one, ``optimal_wor``
  the one without replacement (docs/optimal-verifier-proofs.md), ``greedy`` the greedy one. A sweep asks for one column per call; the
  optima of the last ``(p, q)`` (compared by value) are kept, so a column equal to an optimum
  is not computed twice.
- a rule name: its exact acceptance from the closed form of the rule registry where one
  covers ``k`` (for ``rrs``, ``kseq`` and ``greedy`` all ``k`` at once, sharing one residual
  chain or one sort: :func:`rrs_acceptance_for_ks`, :func:`kseq_acceptance_for_ks`,
  :func:`greedy_acceptance_for_ks`, tested against the per-``k`` laws); ``rrs_wor`` above ``k = 2`` by the Monte Carlo estimate of
  :func:`otm.rules.rrs_wor.monte_carlo_acceptance` (method
  ``"monte_carlo"``, with its standard error); any other rule by its exact law when that
  is estimated to take less than ``time_budget`` seconds, else ``"skipped"``.

Every cell says how it was obtained (``method``: ``exact``, ``monte_carlo``,
``not_applicable`` or ``skipped``, with a ``note``); no number is approximated silently.
"""
from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .errors import InvalidDraftCountError, NotApplicableError
from .formulations.closed_form import solve_closed_form
from .formulations.prefix_scan import WithoutReplacementScan, iid_optimum_for_ks
from .rules import draft_support, estimated_seconds, rule_acceptance, rule_spec
from .draft_laws import greedy_order
from .rules.kseq import clipped_membership, optimal_division_factor, sorted_ratios_of
from .rules.rrs_wor import monte_carlo_acceptance
from .rules.specinfer import step_acceptances

#: The optimum computations and the draft law of each.
OPTIMA = {"optimum_iid": "iid", "optimum_without_replacement": "without_replacement", "optimum_hub": "hub",
          "optimum_greedy": "greedy"}

#: The optimum computation of each draft law.
OPTIMUM_OF = {scheme: name for name, scheme in OPTIMA.items()}

#: Methods a cell can report.
METHODS = ("exact", "monte_carlo", "not_applicable", "skipped")


@dataclass(frozen=True)
class Cell:
    """One computed value: ``computation`` at ``k`` drafts."""

    computation: str
    k: int
    value: float
    std_error: float = 0.0
    method: str = "exact"
    note: str = ""


def check_computations(computations: Sequence[str]) -> tuple:
    """The computations with rule aliases resolved; :class:`UnknownNameError` for an unknown name."""
    out = []
    for name in computations:
        out.append(name if name in OPTIMA else rule_spec(name).name)
    return tuple(out)


def position_cells(p: np.ndarray, q: np.ndarray, ks: Sequence[int], computations: Sequence[str],
                   rng: np.random.Generator, mc_paths: int = 64, time_budget: float = 2.0) -> list[Cell]:
    """Every ``computation`` at every ``k`` for one validated ``(p, q)`` (``[V]`` float64).

    Args:
        rng: randomness of the Monte Carlo estimates (seed it per position for
            reproducible, resumable sweeps).
        mc_paths: draft paths of a Monte Carlo estimate.
        time_budget: seconds an exact law may take (estimated) before it is skipped.
    """
    cells: list[Cell] = []
    ks = [int(k) for k in ks]
    for name in computations:
        if name in OPTIMA:
            cells += _optimum_cells(p, q, ks, name)
        elif rule_spec(name).computed_as_optimum:
            cells += _attained_optimum_cells(p, q, ks, name, time_budget)
        elif name == "rrs_wor":
            cells += _rrs_wor_cells(p, q, ks, rng, mc_paths, time_budget)
        elif name == "rrs":
            cells += [Cell(name, k, v) for k, v in zip(ks, rrs_acceptance_for_ks(p, q, ks))]
        elif name == "single":  # one draft: sum min(p, q) (Leviathan et al. 2023)
            cells += [Cell(name, k, float(np.minimum(p, q).sum())) if k == 1 else _rule_cell(p, q, k, name, time_budget) for k in ks]
        elif name == "kseq":
            cells += [Cell(name, k, v) for k, v in zip(ks, kseq_acceptance_for_ks(p, q, ks))]
        else:
            cells += [_rule_cell(p, q, k, name, time_budget) for k in ks]
    return cells


def rrs_acceptance_for_ks(p: np.ndarray, q: np.ndarray, ks: list[int]) -> list[float]:
    """RRS's acceptance ``1 - prod_{i <= k} (1 - alpha_i)`` for every ``k`` from one residual
    chain (the chain of the largest ``k`` contains the others)."""
    alphas = np.asarray(step_acceptances(p, [q] * max(ks)), dtype=np.float64)
    accepted = 1.0 - np.cumprod(1.0 - alphas)
    return [float(accepted[k - 1]) for k in ks]


def greedy_acceptance_for_ks(p: np.ndarray, q: np.ndarray, ks: list[int]) -> list[float]:
    """The greedy rule's acceptance, which is its law's optimum, for every ``k`` from one
    sort: ``p(F) + sum_{rest} min(p, q / q(rest))``, ``F`` the top ``k - 1`` tokens of ``q``
    (docs/theory.md, section 3); ``k > V`` is not applicable (NaN)."""
    order = greedy_order(q)
    p_sorted, q_sorted = p[order], q[order]
    p_fixed = np.concatenate([[0.0], np.cumsum(p_sorted)])  # p of the first j tokens
    q_rest = np.concatenate([np.cumsum(q_sorted[::-1])[::-1], [0.0]])  # q from token j on
    out = []
    for k in ks:
        if k > q.size:
            out.append(math.nan)
            continue
        fixed, rest = p_fixed[k - 1], q_rest[k - 1]
        if rest > 0:
            value = fixed + np.minimum(p_sorted[k - 1:], q_sorted[k - 1:] / rest).sum()
        else:  # the last draft is the next token in greedy order, surely
            value = fixed + p_sorted[k - 1]
        out.append(float(min(value, 1.0)))
    return out


def kseq_acceptance_for_ks(p: np.ndarray, q: np.ndarray, ks: list[int]) -> list[float]:
    """k-SEQ's membership acceptance at its ``g*`` for every ``k``, the ``p/q`` sort shared."""
    ratios = sorted_ratios_of(p, q)
    return [clipped_membership(p, q, k, optimal_division_factor(p, q, k, sorted_ratios=ratios)) for k in ks]


class _LastRow(threading.local):
    """The optima of the last ``(p, q)`` this thread analysed (module docstring): copies of
    ``p`` and ``q``, compared by value, and ``results`` computed from them."""

    def results(self, p, q) -> dict:
        row = getattr(self, "row", None)
        if row is None or not (np.array_equal(row[0], p) and np.array_equal(row[1], q)):
            row = self.row = (np.array(p, copy=True), np.array(q, copy=True), {})
        return row[2]


_LAST_ROW = _LastRow()


def _iid_optima(p, q, ks: list[int]) -> list[float]:
    """:func:`iid_optimum_for_ks`, once per row and ``k`` (the value at ``k`` does not depend on
    the other ``k`` computed with it)."""
    results = _LAST_ROW.results(p, q)
    missing = sorted({k for k in ks if ("optimum_iid", k) not in results})
    if missing:
        results.update({("optimum_iid", k): float(v) for k, v in zip(missing, iid_optimum_for_ks(p, q, missing))})
    return [results["optimum_iid", k] for k in ks]


def _wor_optimum_cells(p, q, ks: list[int]) -> list[Cell]:
    """``optimum_without_replacement`` at every ``k``, once per row and ``k``: the ``k`` of a call
    not computed yet share one scan (:meth:`WithoutReplacementScan.solve_together`: one order,
    its prefix data and every round's evaluations); at ``k = 1`` (one draw from ``q``) the
    i.i.d. optimum, which the scan computes the same way; a ``k`` above the support of ``q``,
    or a row whose shared scan is refused, one ``k`` at a time."""
    name = "optimum_without_replacement"
    results = _LAST_ROW.results(p, q)
    if 1 in ks and (name, 1) not in results:
        results[name, 1] = Cell(name, 1, _iid_optima(p, q, [1])[0])
    if all((name, k) in results for k in ks):
        return [results[name, k] for k in ks]
    if "scan" not in results:
        results["scan"] = WithoutReplacementScan(p, q)
    scan = results["scan"]
    together = sorted({k for k in ks if 2 <= k <= scan.n and (name, k) not in results})
    if together:
        try:
            results.update({(name, k): Cell(name, k, float(solution.value))
                            for k, solution in zip(together, scan.solve_together(together))})
        except (NotApplicableError, InvalidDraftCountError):
            pass  # each k alone below, with its own answer or reason
    for k in ks:
        if (name, k) not in results:
            results[name, k] = _optimum_cell(p, q, k, name, scan.solve if 1 <= k <= scan.n else None)
    return [results[name, k] for k in ks]


def _optimum_cells(p, q, ks: list[int], name: str) -> list[Cell]:
    """The optimum computation ``name`` (of :data:`OPTIMA`) at every ``k``."""
    if name == "optimum_iid":
        return [Cell(name, k, v) for k, v in zip(ks, _iid_optima(p, q, ks))]
    if name == "optimum_without_replacement":
        return _wor_optimum_cells(p, q, ks)
    if name == "optimum_greedy":
        return [Cell(name, k, v) for k, v in zip(ks, greedy_acceptance_for_ks(p, q, ks))]
    return [_optimum_cell(p, q, k, name) for k in ks]


def _optimum_cell(p, q, k: int, name: str, solve=None) -> Cell:
    """``name`` at ``k`` by :func:`solve_closed_form`, or by ``solve(k)`` when given (the same value)."""
    try:
        value = solve(k) if solve is not None else solve_closed_form(p, q, k, OPTIMA[name])
        return Cell(name, k, float(value.value))
    except (NotApplicableError, InvalidDraftCountError) as exc:
        return Cell(name, k, math.nan, method="not_applicable", note=str(exc))


def _attained_optimum_cells(p, q, ks: list[int], rule: str, time_budget: float) -> list[Cell]:
    """``rule`` (``computed_as_optimum`` in the registry) at every ``k`` it is defined for: the
    optimum of its draft law, which it attains (its law is built on that optimum's cut; for the
    water levels, because they are probabilities:
    docs/optimal-verifier-proofs.md#water-levels-are-probabilities), computed once per row for
    the rule's column and the optimum's; not applicable at the other ``k``. What the verifiers answer at the real
    vocabulary is another matter: ``optimal_wor``'s at ``k >= 3`` draws the walks its bounds
    decide and refuses the others (docs/optimal-verifier.md#the-scope-of-the-k-draft-verifier)."""
    spec = rule_spec(rule)
    optimum = OPTIMUM_OF[spec.reference_optimum]
    allowed = [k for k in ks if spec.allows(k)]
    optima = dict(zip(allowed, _optimum_cells(p, q, allowed, optimum)))
    note = f"equal to {optimum}: the rule attains it"
    return [dataclasses.replace(optima[k], computation=rule, note=optima[k].note or note) if k in optima
            else _rule_cell(p, q, k, rule, time_budget) for k in ks]


def _rule_cell(p, q, k: int, rule: str, time_budget: float) -> Cell:
    spec = rule_spec(rule)
    if not spec.allows(k):
        return Cell(rule, k, math.nan, method="not_applicable", note=f"defined for k in {spec.ks}")
    closed = spec.has_closed_form(k)
    if not closed:
        cost = estimated_seconds(spec, draft_support(q), k)
        if cost > time_budget:
            return Cell(rule, k, math.nan, method="skipped", note=f"exact law estimated at {cost:.3g} s (budget {time_budget:g} s)")
    try:
        value = rule_acceptance(rule, p, q, k, **({"method": "closed_form"} if closed else {}))
    except (NotApplicableError, InvalidDraftCountError) as exc:
        return Cell(rule, k, math.nan, method="not_applicable", note=str(exc))
    return Cell(rule, k, float(value))


def _rrs_wor_cells(p, q, ks: list[int], rng: np.random.Generator, mc_paths: int, time_budget: float) -> list[Cell]:
    """Exact at ``k <= 2`` and wherever the enumeration fits the time budget; one set of
    Monte Carlo paths for every larger ``k``."""
    support = draft_support(q)
    spec = rule_spec("rrs_wor")
    exact = [k for k in ks if k <= 2 or estimated_seconds(spec, support, k) <= time_budget]
    cells = {k: _rule_cell(p, q, k, "rrs_wor", time_budget) for k in exact}
    larger = [k for k in ks if k not in cells]
    usable = [k for k in larger if k <= support]
    if usable:
        mean, error = monte_carlo_acceptance(p, q, max(usable), mc_paths, rng)
        for k in usable:
            cells[k] = Cell("rrs_wor", k, float(mean[k - 1]), float(error[k - 1]), "monte_carlo",
                            f"Monte Carlo (coins and first draft integrated out), {mc_paths} draft paths")
    for k in larger:
        if k not in cells:
            cells[k] = Cell("rrs_wor", k, math.nan, method="not_applicable",
                            note=f"q has {support} positive tokens, fewer than k = {k} drafts without replacement")
    return [cells[k] for k in ks]


__all__ = ["METHODS", "OPTIMA", "OPTIMUM_OF", "Cell", "check_computations", "greedy_acceptance_for_ks", "kseq_acceptance_for_ks",
           "position_cells", "rrs_acceptance_for_ks"]
