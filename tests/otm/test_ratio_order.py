"""otm.formulations.prefix_scan.ratio_order: token ids by p/q ascending, q = 0 last, ties by
lower id (a stable sort), built from an unstable sort and a second sort inside runs of equal
ratios; checked against numpy's stable sort on rows full of ties."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from otm.formulations import prefix_scan
from otm.formulations.prefix_scan import ratio_order


def _stable_reference(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    ratio = np.divide(p, q, out=np.full(q.shape, np.inf), where=q > 0)
    return np.argsort(ratio, kind="stable")


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 400), values=st.integers(1, 6), zeros=st.booleans())
def test_ratio_order_is_the_stable_sort_on_rows_full_of_ties(seed, n, values, zeros):
    """Rows whose ``p`` and ``q`` take a handful of values (so most ratios tie), with zeros in
    ``q`` (ratio ``inf``, last) and in ``p``: the same order as numpy's stable sort."""
    rng = np.random.default_rng(seed)
    p = rng.integers(0 if zeros else 1, values + 1, n).astype(np.float64)
    q = rng.integers(0 if zeros else 1, values + 1, n).astype(np.float64)
    p, q = p / max(p.sum(), 1.0), q / max(q.sum(), 1.0)
    assert np.array_equal(ratio_order(p, q), _stable_reference(p, q))


def test_a_real_size_row_of_float32_ties_and_a_broken_tie_rule(monkeypatch):
    """At 151,936 tokens of float32 softmax over a few hundred distinct logits (ties as on real
    rows) the order is numpy's stable one; with the ties left in the unstable sort's order it is
    not."""
    rng = np.random.default_rng(0)
    logits = rng.integers(-300, 0, (2, 151_936)).astype(np.float32) / 16
    p, q = (np.exp(row) / np.exp(row).sum() for row in logits)
    reference = _stable_reference(p, q)
    assert np.array_equal(ratio_order(p, q), reference)
    monkeypatch.setattr(prefix_scan, "ids_within_ties", lambda keys, order: order)
    assert not np.array_equal(ratio_order(p, q), reference)


def test_a_row_without_ties_keeps_the_first_sort():
    """Distinct ratios (a softmax row of random float64 logits): no second sort is needed, and the
    order is numpy's stable one."""
    rng = np.random.default_rng(1)
    p, q = (np.exp(row) / np.exp(row).sum() for row in rng.normal(size=(2, 20_000)))
    assert np.unique(p / q).size == p.size
    assert np.array_equal(ratio_order(p, q), _stable_reference(p, q))


def test_ratios_past_the_float64_range_stay_among_the_drafted_tokens(monkeypatch):
    """Denormal draft probabilities (``p / q`` overflows to ``inf``): those tokens come after
    every finite ratio, in the order of their true ratios, and before every ``q = 0`` token
    even of lower id, whichever sort; with the overflow left to tie with the ``q = 0``
    sentinel (the order before this was handled), a ``q = 0`` token of lower id slips in."""
    p = np.array([0.3, 0.0, 0.1, 0.25, 0.2, 0.15])
    q = np.array([0.0, 0.4, 5e-324, 0.6, 1e-320, 0.0])
    for stable in (True, False):
        assert ratio_order(p, q, stable).tolist() == [1, 3, 4, 2, 0, 5]  # 0.2 / 1e-320 < 0.1 / 5e-324
    monkeypatch.setattr(prefix_scan, "_order_past_overflow", lambda p, q, ratio, order, overflowed, stable: order)
    assert ratio_order(p, q).tolist()[:4] != [1, 3, 4, 2]
