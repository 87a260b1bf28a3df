"""SequenceModel: constructors, exactness, path probabilities and typed errors.

Run: .venv/bin/python -m pytest tests/otm/sequences/test_model.py -q
"""
from __future__ import annotations

from fractions import Fraction as F

import numpy as np
import pytest

from otm.errors import (
    InvalidDistributionError,
    InvalidDraftCountError,
    NotApplicableError,
    ShapeMismatchError,
)
from otm.sequences import (
    context_independent_model,
    from_level_arrays,
    random_model,
    sequence_model,
)

from .support import context_switch_model


def test_path_probabilities_are_products_of_conditionals():
    m = context_switch_model()
    assert m.exact and m.vocab_size == 2 and m.length == 3
    assert m.target_prob((1, 0, 1)) == F(3, 4) * F(5, 6) * F(3, 5)
    assert m.draft_prob((0, 1)) == F(2, 3) * F(4, 5)
    assert m.target_prob(()) == 1
    assert sum(m.target_prob(z) for z in m.sequences(3)) == 1
    assert sum(m.draft_prob(z) for z in m.sequences(3)) == 1


def test_from_level_arrays_matches_the_table_constructor():
    m = context_switch_model()
    levels_t = [np.array(m.target(()), dtype=object)]
    levels_q = [np.array(m.draft(()), dtype=object)]
    for n in (1, 2):
        shape = (2,) * (n + 1)
        lt, lq = np.empty(shape, dtype=object), np.empty(shape, dtype=object)
        for s in m.sequences(n):
            lt[s], lq[s] = m.target(s), m.draft(s)
        levels_t.append(lt)
        levels_q.append(lq)
    rebuilt = from_level_arrays(levels_t, levels_q)
    assert rebuilt.exact and rebuilt.length == 3
    assert all((rebuilt.target(s) == m.target(s)).all() and (rebuilt.draft(s) == m.draft(s)).all()
               for n in range(3) for s in m.sequences(n))


def test_random_exact_rows_are_on_the_grid_and_sum_to_one():
    m = random_model(3, 3, np.random.default_rng(7), concentration=0.5, denominator=5)
    assert m.exact
    for n in range(3):
        for s in m.sequences(n):
            for row in (m.target(s), m.draft(s)):
                assert sum(row) == 1 and all((v * 5).denominator == 1 for v in row)


def test_random_float_model_and_float_conversion():
    m = random_model(2, 2, np.random.default_rng(0))
    assert not m.exact and abs(sum(m.target((1,))) - 1) < 1e-12
    exact = context_switch_model()
    as_float = exact.as_float()
    assert not as_float.exact and as_float.target_prob((1, 1)) == pytest.approx(float(exact.target_prob((1, 1))))


def test_float_rows_make_a_float_model():
    m = sequence_model({(): [0.25, 0.75]}, {(): [0.5, 0.5]})
    assert not m.exact and m.length == 1


@pytest.mark.parametrize("target, draft, error, match", [
    ({(): [F(1, 2), F(1, 2)], (0,): [F(1)]}, {(): [F(1, 2), F(1, 2)], (0,): [F(1), F(0)]}, ShapeMismatchError, "tokens"),
    ({(): [F(1, 2), F(1, 2)], (0,): [F(1), F(0)]}, {(): [F(1, 2), F(1, 2)], (0,): [F(1), F(0)]},
     InvalidDistributionError, "lacks the prefix"),
    ({(): [F(1, 2), F(1, 3)]}, {(): [F(1, 2), F(1, 2)]}, InvalidDistributionError, "not exactly 1"),
    ({(): [0.5, -0.5, 1.0]}, {(): [0.5, 0.25, 0.25]}, InvalidDistributionError, "negative"),
    ({("a",): [0.5, 0.5], (): [0.5, 0.5]}, {(): [0.5, 0.5], (0,): [0.5, 0.5]}, InvalidDistributionError, "token ids"),
    ({(): [0.5, 0.5], (2,): [0.5, 0.5]}, {(): [0.5, 0.5], (0,): [0.5, 0.5]}, ShapeMismatchError, "outside"),
    ([0.5, 0.5], {(): [0.5, 0.5]}, InvalidDistributionError, "dicts"),
])
def test_bad_tables_raise_typed_errors(target, draft, error, match):
    with pytest.raises(error, match=match):
        sequence_model(target, draft)


def test_bad_arguments_raise_typed_errors():
    with pytest.raises(InvalidDraftCountError, match="length"):
        context_independent_model([0.5, 0.5], [0.5, 0.5], 0)
    with pytest.raises(ShapeMismatchError, match="vocab_size"):
        random_model(0, 2, np.random.default_rng(0))
    with pytest.raises(InvalidDistributionError, match="denominator"):
        random_model(2, 2, np.random.default_rng(0), denominator=0)
    with pytest.raises(InvalidDistributionError, match="concentration"):
        random_model(2, 2, np.random.default_rng(0), concentration=0.0)
    with pytest.raises(ShapeMismatchError, match="shape"):
        from_level_arrays([np.array([0.5, 0.5]), np.array([0.5, 0.5])], [np.array([0.5, 0.5]), np.array([0.5, 0.5])])
    with pytest.raises(NotApplicableError, match="length >= 4"):
        context_switch_model().require_length(4, "a block of g=3 drafts")
