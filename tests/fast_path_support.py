"""Helpers of the tests that hold a fast path to the operation it replaces
(tests/solvers/test_fast_paths.py, tests/otm/test_lp_fast_paths.py)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import Phase, given, settings


def same_floats(got, ref) -> bool:
    """Equal shapes and bit-for-bit equal values (NaN where the other has NaN, signs of zeros kept)."""
    got, ref = np.asarray(got, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape:
        return False
    both_nan = np.isnan(got) & np.isnan(ref)
    return bool(np.all((got == ref) | both_nan) and np.array_equal(np.signbit(got), np.signbit(ref)))


def fails_on(broken, check, strategy, match: str) -> None:
    """``check(broken, case)`` fails on some ``case`` drawn from ``strategy``: the property is not vacuous."""
    @settings(max_examples=300, phases=[Phase.generate], database=None)
    @given(case=strategy)
    def run(case):
        check(broken, case)

    with pytest.raises(AssertionError, match=match):
        run()
