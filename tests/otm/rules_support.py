"""Shared instances and checks for the rule tests (tests/otm/test_rules_*.py)."""
from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
from hypothesis import strategies as st

from otm.tolerances import AGREEMENT_TOLERANCE


def exact(*weights) -> np.ndarray:
    """Fraction object array proportional to the given non-negative integers."""
    total = sum(weights)
    return np.array([Fraction(w, total) for w in weights], dtype=object)


#: Degenerate but valid (p, q) pairs every rule must handle (helper_common.md).
EDGE_CASES = {
    "p_equals_q": (exact(1, 2, 3), exact(1, 2, 3)),
    "one_hot_p": (exact(0, 1, 0), exact(1, 1, 2)),
    "one_hot_q": (exact(1, 2, 1), exact(0, 0, 1)),
    "one_hot_both_differ": (exact(1, 0, 0), exact(0, 1, 0)),
    "disjoint_supports": (exact(1, 1, 0, 0), exact(0, 0, 1, 3)),
    "q_zero_where_p_positive": (exact(2, 1, 1), exact(1, 1, 0)),
    "vocabulary_of_one": (exact(1), exact(1)),
    "uniform_vs_skewed": (exact(1, 1, 1, 1, 1), exact(5, 1, 1, 1, 0)),
    # q supported on 2 of 4 tokens: k = 3, 4 exhaust it (rrs_wor's deterministic drafts)
    "q_support_two": (exact(1, 2, 3, 1), exact(0, 1, 0, 3)),
    "p_equals_q_support_two": (exact(0, 1, 0, 3), exact(0, 1, 0, 3)),
}


@st.composite
def exact_distributions(draw, size: int):
    """A Fraction distribution over ``size`` tokens, zeros included."""
    weights = draw(st.lists(st.integers(0, 6), min_size=size, max_size=size).filter(lambda w: sum(w) > 0))
    return exact(*weights)


def draw_exact_pair(data, max_size: int = 6) -> tuple[np.ndarray, np.ndarray]:
    """``(p, q)``: :func:`exact_distributions` over the same ``V`` in ``[1, max_size]``
    tokens, drawn from hypothesis' ``st.data()`` in the order ``V``, ``p``, ``q``."""
    V = data.draw(st.integers(1, max_size), label="V")
    p = data.draw(exact_distributions(V), label="p")
    q = data.draw(exact_distributions(V), label="q")
    return p, q


def draft_counts(rule: str, q: np.ndarray) -> list[int]:
    """The ``k`` values a rule accepts for this ``q`` in the tests (kept small: exact
    Fraction enumeration of up to ``6**4`` tuples)."""
    from otm.rules.registry import rule_spec

    spec = rule_spec(rule)
    V = q.size
    largest = 3 if spec.seconds_per_lp_tuple or V > 5 else 4
    if spec.draft_scheme in ("without_replacement", "greedy"):  # k distinct tokens (above q's support included)
        largest = min(largest, V)
    low, high = spec.ks
    return list(range(low, min(largest, high or largest) + 1))


def same_distribution(actual, expected) -> bool:
    """Exact equality for Fraction arrays; :data:`AGREEMENT_TOLERANCE` for floats."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape:
        return False
    if actual.dtype == object and expected.dtype == object:
        return all(a == b for a, b in zip(actual, expected))
    return bool(np.allclose(actual.astype(float), expected.astype(float), rtol=0, atol=AGREEMENT_TOLERANCE))


def min_cut_optimum(target, law):
    """``min_H p(H) + 1 - Q(all drafts in H)`` over every token subset ``H`` (brute force;
    docs/theory.md max-flow / min-cut): the optimal acceptance for the draft law ``law``."""
    V = len(target)
    best = None
    for size in range(V + 1):
        for subset in itertools.combinations(range(V), size):
            mask = np.zeros(V, dtype=bool)
            mask[list(subset)] = True
            value = sum(target[list(subset)]) + 1 - law.all_in_probability(mask)
            best = value if best is None else min(best, value)
    return best


def within_optimum(acceptance, optimum) -> bool:
    """``acceptance <= optimum`` (exactly for Fractions, else up to AGREEMENT_TOLERANCE)."""
    if isinstance(acceptance, Fraction) and isinstance(optimum, (Fraction, int)):
        return acceptance <= optimum
    return float(acceptance) <= float(optimum) + AGREEMENT_TOLERANCE
