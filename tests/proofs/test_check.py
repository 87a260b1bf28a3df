"""The check record, the slack bookkeeping, the registry and the runner."""
from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest

from otm.errors import UnknownNameError
from proofs.check import FAILS, HOLDS, NOT_CHECKABLE, Check, SlackSearch, identity_slack, merge_checks, run_search
from proofs.suite import run_theorems, theorems_table
from proofs.registry import PAPERS, registry, run_check

REQUIRED_KEYS = {"id", "paper", "claim", "method", "instances", "worst_slack", "status"}


def blank(**kw):
    return Check(id="x.y", paper="x", source="", claim="", formula="", method="random-search", **kw)


def test_identity_slack_is_exact_on_fractions_and_float_otherwise():
    assert identity_slack(Fraction(1, 3), Fraction(1, 3)) == 0
    assert identity_slack(np.array([Fraction(1, 3)], dtype=object), [Fraction(1, 2)]) == -1 / 6
    assert identity_slack([0.1, 0.2], [0.1, 0.25]) == pytest.approx(-0.05)
    assert identity_slack([1.0, 2.0], [1.0]) == -math.inf  # shape mismatch is a failure


def test_search_holds_fails_and_keeps_the_counterexample():
    search = SlackSearch(tolerance=1e-9)
    search.record(0.5, {"n": 1})
    search.record(-1e-12, {"n": 2})
    assert search.finish(blank()).status == HOLDS
    search.record(-0.1, {"n": 3})
    check = search.finish(blank())
    assert check.status == FAILS
    assert check.counterexample == {"n": 3}
    assert check.worst_slack == -0.1


def test_nan_slack_is_a_failure_and_no_instance_is_not_checkable():
    search = SlackSearch()
    search.record(float("nan"), {"n": 1})
    assert search.finish(blank()).status == FAILS
    assert run_search(blank(), [], lambda c: 0.0).status == NOT_CHECKABLE


def test_merge_keeps_the_failure():
    good = run_search(blank(), [{"a": 1}], lambda c: 0.0)
    bad = run_search(blank(), [{"a": 2}], lambda c: -1.0)
    merged = merge_checks(good, bad)
    assert merged.status == FAILS
    assert merged.instances == 2
    assert merged.counterexample == {"a": 2}


def test_as_dict_is_json_ready():
    check = run_search(blank(), [{"p": np.array([Fraction(1, 2), Fraction(1, 2)], dtype=object)}], lambda c: -1.0)
    row = check.as_dict()
    assert REQUIRED_KEYS <= set(row)
    assert json.loads(json.dumps(row))["counterexample"] == {"p": ["1/2", "1/2"]}


def test_registry_lists_every_paper_and_rejects_unknown_names():
    assert set(PAPERS) == {"spechub", "khisti", "spectr", "leviathan", "ensemble", "theory", "sequences"}
    ids = list(registry())
    assert len(ids) == len(set(ids)) >= 35
    assert all(cid.split(".")[0] in PAPERS for cid in ids)
    with pytest.raises(UnknownNameError):
        registry("nope")


def test_a_crash_is_reported_not_checkable():
    def crash(n, rng):
        raise ZeroDivisionError("boom")

    result = run_check("a.b", crash, 1, 0)
    assert result.status == NOT_CHECKABLE
    assert "ZeroDivisionError" in result.note


def test_run_theorems_json_rows_and_table():
    rows = run_theorems("leviathan", instances=2, seed=0, progress=False)
    assert [r["id"] for r in rows] == list(registry("leviathan"))
    assert all(REQUIRED_KEYS <= set(r) and r["status"] == HOLDS for r in rows)
    json.dumps(rows)
    assert "4 holds" in theorems_table(rows)
