"""The report's rows of every text without stacking them: ``ScoredTexts.logits_at`` against the
stacked arrays, across text boundaries; nothing in the report copies every row of both models."""
from __future__ import annotations

import numpy as np

from otm_app.report.sources import ScoredTexts, toy_texts


def test_logits_at_is_the_stacked_rows_without_stacking():
    scored = toy_texts(0)
    stacked_target = np.concatenate([s.target_logits for s in scored.scores])
    stacked_draft = np.concatenate([s.draft_logits for s in scored.scores])
    assert scored.n_positions == stacked_target.shape[0] and scored.vocab_size == stacked_target.shape[1]
    rows = np.array([0, 5, scored.scores[0].n_positions - 1, scored.scores[0].n_positions, scored.n_positions - 1, 3])
    target, draft = scored.logits_at(rows)
    assert np.array_equal(target, stacked_target[rows]) and np.array_equal(draft, stacked_draft[rows])
    empty_target, empty_draft = scored.logits_at([])
    assert empty_target.shape == empty_draft.shape == (0, scored.vocab_size)


def test_no_property_stacks_every_row_of_both_models():
    """A stacked copy of every row held through step 2 doubled the report's own memory (the
    logits of every position of both models in float32)."""
    assert not hasattr(ScoredTexts, "target_logits") and not hasattr(ScoredTexts, "draft_logits")
