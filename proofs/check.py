"""The record of one checked claim, and the search loop every randomized check uses.

A claim is checked by computing, on each instance, a **slack**: a number that is ``>= 0``
exactly when the claim holds on that instance (for an inequality ``lhs <= rhs`` the slack
is ``rhs - lhs``; for an identity ``lhs == rhs`` it is ``-|lhs - rhs|``). The check keeps
the worst (smallest) slack and the instance that produced it; the claim **holds** when the
worst slack is at least ``-tolerance`` (``0`` for exact rational arithmetic), and otherwise
**fails** with that instance stored as the counterexample.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Iterable

import numpy as np

from otm.tolerances import AGREEMENT_TOLERANCE

#: Statuses a check can end in.
HOLDS, FAILS, NOT_CHECKABLE = "holds", "fails", "not checkable"

#: Methods a check can use.
SYMBOLIC, EXHAUSTIVE, RANDOM_SEARCH = "symbolic", "exhaustive-exact", "random-search"


@dataclass
class Check:
    """One claim of a paper (docs/references.md) and the outcome of checking it.

    Attributes:
        id: ``"<paper>.<claim>"``, e.g. ``"spechub.thm3"``.
        paper: ``"spechub" | "khisti" | "spectr" | "leviathan" | "ensemble" | "theory" | "sequences"``.
        source: the paper and theorem / equation / table, e.g. ``"SpecHub (Sun et al. 2024), Thm 3 (App. C.3)"``.
        claim: the statement in words (in this project's letters: p = target, q = draft).
        formula: the statement as a formula.
        method: ``"symbolic" | "exhaustive-exact" | "random-search"`` (``+``-joined when mixed).
        instances: number of instances (or symbolic identities) examined.
        worst_slack: smallest slack seen (``>= 0`` means the claim held there); ``None``
            when nothing was evaluated.
        status: ``"holds" | "fails" | "not checkable"``.
        counterexample: the instance with the worst slack when the claim fails.
        note: how it was checked, reconstructions, discrepancies, strictness remarks.
        tolerance: the slack below ``-tolerance`` that counts as a failure.
    """

    id: str
    paper: str
    source: str
    claim: str
    formula: str
    method: str
    instances: int = 0
    worst_slack: float | None = None
    status: str = NOT_CHECKABLE
    counterexample: dict | None = None
    note: str = ""
    tolerance: float = AGREEMENT_TOLERANCE

    def as_dict(self) -> dict:
        """JSON-ready dict (floats, lists, strings only)."""
        return {
            "id": self.id,
            "paper": self.paper,
            "source": self.source,
            "claim": self.claim,
            "formula": self.formula,
            "method": self.method,
            "instances": int(self.instances),
            "worst_slack": None if self.worst_slack is None else float(self.worst_slack),
            "status": self.status,
            "counterexample": jsonable(self.counterexample),
            "note": self.note,
            "tolerance": self.tolerance,
        }


def jsonable(value: Any):
    """Turn numpy arrays, Fractions and nested containers into JSON-ready values."""
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, Fraction):
        return str(value) if value.denominator != 1 else int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, np.generic):
        return jsonable(value.item())
    if isinstance(value, np.ndarray):
        return [jsonable(v) for v in value.tolist()] if value.dtype != object else [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return str(value)


@dataclass
class SlackSearch:
    """Accumulates slacks over instances; see the module docstring.

    ``record(slack, instance)`` returns the slack so a check can chain on it.
    """

    tolerance: float = AGREEMENT_TOLERANCE
    count: int = 0
    worst: float | None = None
    worst_instance: dict | None = None
    extras: dict = field(default_factory=dict)

    def record(self, slack, instance: dict):
        self.count += 1
        value = float(slack)
        if math.isnan(value):
            value = -math.inf  # a NaN anywhere is a failure, never a silent pass
        if self.worst is None or value < self.worst:
            self.worst, self.worst_instance = value, instance
        return value

    def finish(self, check: Check) -> Check:
        """Fill ``instances``, ``worst_slack``, ``status`` and ``counterexample`` of ``check``."""
        check.instances += self.count
        check.tolerance = self.tolerance
        if self.worst is None:
            check.status = NOT_CHECKABLE
            check.note = (check.note + " No instance was evaluated.").strip()
            return check
        check.worst_slack = self.worst if check.worst_slack is None else min(check.worst_slack, self.worst)
        if check.worst_slack >= -self.tolerance:
            check.status = HOLDS
        else:
            check.status = FAILS
            check.counterexample = self.worst_instance
        return check


def identity_slack(lhs, rhs) -> float:
    """Slack of ``lhs == rhs`` (scalars or arrays): ``-max |lhs - rhs|``; exact for Fractions."""
    a = np.atleast_1d(np.asarray(lhs, dtype=object if _is_exact(lhs) or _is_exact(rhs) else np.float64))
    b = np.atleast_1d(np.asarray(rhs, dtype=a.dtype))
    if a.shape != b.shape:
        return -math.inf
    diff = np.abs(a - b)
    worst = max(diff.ravel().tolist()) if diff.size else 0
    return -float(worst)


def _is_exact(value) -> bool:
    if isinstance(value, Fraction):
        return True
    arr = np.asarray(value)
    return arr.dtype == object and arr.size > 0 and all(isinstance(v, (Fraction, int)) for v in arr.ravel())


def not_checkable(check: Check, why: str) -> Check:
    """Mark ``check`` as not checkable, with the reason."""
    check.status = NOT_CHECKABLE
    check.note = (check.note + " Not checkable: " + why).strip()
    return check


def run_search(check: Check, cases: Iterable[dict], slack_fn: Callable[[dict], Any], tolerance: float = AGREEMENT_TOLERANCE) -> Check:
    """Evaluate ``slack_fn`` on every case dict and finish ``check`` from the worst slack.

    ``slack_fn`` may return a number, or ``None`` to skip an instance that does not meet the
    hypothesis (skipped instances are not counted).
    """
    search = SlackSearch(tolerance=tolerance)
    for case in cases:
        slack = slack_fn(case)
        if slack is not None:
            search.record(slack, case)
    return search.finish(check)


def merge_checks(check: Check, other: Check) -> Check:
    """Fold a second run of the same claim (e.g. its exhaustive exact part) into ``check``:
    instance counts add, the worse slack is kept, a failure in either is a failure."""
    check.instances += other.instances
    slacks = [s for s in (check.worst_slack, other.worst_slack) if s is not None]
    check.worst_slack = min(slacks) if slacks else None
    if other.status == FAILS and check.status != FAILS:
        check.status, check.counterexample = FAILS, other.counterexample
    elif check.status == NOT_CHECKABLE and other.status != NOT_CHECKABLE:
        check.status = other.status
    return check
