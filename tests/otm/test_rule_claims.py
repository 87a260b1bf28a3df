"""What a RuleSpec claims about its rule's law, checked on the law, for every rule of the registry.

The lossless, optimum and closed-form claims are checked in tests/otm/test_rules_registry.py and
tests/otm/test_rules_lossless.py; here the two that recording validation relies on
(:mod:`decoding.validation.recordings`): ``at_least_single_draft`` (the acceptance is at least
``sum min(p, q)``) and ``exact_on_merged_tail`` (merging the tokens with ``q = 0``, or with
``p = 0``, into one token leaves the acceptance unchanged). Exact rational inputs, so equal
means equal.
"""
from __future__ import annotations

import numpy as np
import pytest

from otm.errors import NotApplicableError
from otm.rules import rule_acceptance, rule_specs
from tests.otm.rules_support import exact

#: ``(p, q)`` over six tokens: tokens 4 and 5 have ``q = 0`` (one with ``p > 0``), tokens 2 and 3
#: have ``p = 0``; four tokens of positive ``q``, so three drafts without replacement fit.
INSTANCES = (
    (exact(3, 1, 0, 0, 2, 4), exact(2, 5, 1, 2, 0, 0)),
    (exact(1, 6, 0, 0, 1, 2), exact(4, 1, 3, 2, 0, 0)),
)
#: Draft counts checked, within each rule's own.
KS = (1, 2, 3)


def merged(p: np.ndarray, q: np.ndarray, which: str) -> tuple[np.ndarray, np.ndarray]:
    """``(p, q)`` with the tokens where ``which`` (``"q"`` or ``"p"``) is zero merged into one."""
    zero = (q if which == "q" else p) == 0
    keep = ~zero
    return (np.append(p[keep], p[zero].sum()), np.append(q[keep], q[zero].sum()))


def cases(claim):
    return [(spec.name, k) for spec in rule_specs(lossless=True) if claim(spec) for k in KS if spec.allows(k)]


def acceptance(rule: str, p, q, k: int):
    try:
        return rule_acceptance(rule, p, q, k)
    except NotApplicableError as exc:
        pytest.skip(f"{rule} at k = {k}: {exc}")


@pytest.mark.parametrize("rule, k", cases(lambda spec: spec.at_least_single_draft))
def test_at_least_the_single_draft_acceptance(rule, k):
    for p, q in INSTANCES:
        assert acceptance(rule, p, q, k) >= np.minimum(p, q).sum(), (rule, k, p, q)


@pytest.mark.parametrize("rule, k", cases(lambda spec: spec.exact_on_merged_tail))
def test_merging_the_claimed_zero_tokens_keeps_the_acceptance(rule, k):
    spec = rule_specs(names=[rule])[0]
    for p, q in INSTANCES:
        for which in spec.exact_on_merged_tail:
            assert acceptance(rule, *merged(p, q, which), k) == acceptance(rule, p, q, k), (rule, k, which, p, q)


def test_the_merge_can_change_an_acceptance():
    """The check can fail: merging the ``p = 0`` tokens changes RRS without replacement's
    acceptance, which claims only ``"q"`` (a rejected draft leaves the pool, so the draft laws
    after it differ)."""
    p, q = INSTANCES[1]
    assert "p" not in rule_specs(names=["rrs_wor"])[0].exact_on_merged_tail
    assert rule_acceptance("rrs_wor", *merged(p, q, "p"), 2) != rule_acceptance("rrs_wor", p, q, 2)
