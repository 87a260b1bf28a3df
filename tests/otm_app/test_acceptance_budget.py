"""otm acceptance's --time-budget prices optimal_wor at k >= 3 by its cost model: a large
support is skipped with the estimate and the way to ask for it, a small one is computed."""
from __future__ import annotations

import numpy as np

from otm.rules import estimated_seconds, rule_spec
from otm_app.commands.acceptance import acceptance_summary
from otm_app.configs import AcceptanceConfig
from otm.tolerances import AGREEMENT_TOLERANCE


def _row(vocab: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.dirichlet(np.ones(vocab)), rng.dirichlet(np.ones(vocab))


def test_a_large_support_is_skipped_with_its_estimate():
    """k = 3 over 2,000 tokens: the water levels would take seconds to a minute; within the
    default 2 s budget optimal_wor is skipped, saying so and how to ask for it (its estimate was
    0 and the command ran it)."""
    p, q = _row(2_000, 0)
    config = AcceptanceConfig(k=3)
    assert estimated_seconds(rule_spec("optimal_wor"), 2_000, 3) > config.time_budget
    summary = acceptance_summary(p, q, config)
    assert summary["rules"]["optimal_wor"] is None
    note = summary["notes"]["rules.optimal_wor"]
    assert note.startswith("skipped: its exact law would take") and "--rules optimal_wor" in note
    assert summary["rules"]["optimal"] is not None  # a free closed form still runs


def test_a_small_support_is_computed_within_the_budget():
    p, q = _row(12, 1)
    summary = acceptance_summary(p, q, AcceptanceConfig(k=3))
    assert "rules.optimal_wor" not in summary["notes"]
    assert abs(summary["rules"]["optimal_wor"] - summary["optimal"]["without_replacement"]) <= AGREEMENT_TOLERANCE
