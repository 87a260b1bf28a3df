"""Broken ingredients shared by the proofs tests: each wraps a real core function and
breaks it in one visible way, so every check can be shown to fail."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from otm.rules import rule_law


def shifted_solver(solver, delta: float):
    """A formulation whose optimum is off by ``delta``."""
    return lambda p, law, **kw: SimpleNamespace(value=float(solver(p, law, **kw).value) + delta)


def law_for_wrong_target(rule, p, q, k, **params):
    """The real rule run against ``(9 p + q) / 10`` instead of ``p`` (a perturbed rule)."""
    return rule_law(rule, (9 * np.asarray(p) + np.asarray(q)) / 10, q, k, **params)


def rule_swapped(mapping):
    """``rule_acceptance`` with some rules replaced by others (``{"spechub": ("single", 1)}``)."""

    def acceptance(rule, p, q, k, **params):
        if rule in mapping:
            rule, k = mapping[rule]
        return rule_law(rule, p, q, k).acceptance

    return acceptance
