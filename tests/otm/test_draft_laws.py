"""Joint draft laws Q: each is a probability law, has the right marginals, and samples
from itself."""
import itertools
from fractions import Fraction as F

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from otm.draft_laws import (
    MAX_ENUMERATED_TUPLES,
    draft_law,
    greedy_law,
    hub_law,
    independent_law,
    iid_law,
    table_law,
    without_replacement_law,
)
from otm.errors import InvalidDraftCountError, NotApplicableError, ShapeMismatchError, UnknownNameError
from otm.distributions import as_exact_distribution
from otm.tolerances import AGREEMENT_TOLERANCE

Q3 = [0.5, 0.3, 0.2]


def distributions(min_size=1, max_size=5):
    return st.lists(st.floats(0, 1), min_size=min_size, max_size=max_size).filter(lambda v: sum(v) > 0.1).map(
        lambda v: np.asarray(v) / np.sum(v)
    )


def brute_membership(law):
    out = np.zeros(law.vocab_size)
    for row, pr in zip(law.tuples, law.probs):
        for y in set(row.tolist()):
            out[y] += float(pr)
    return out


@given(distributions(), st.integers(1, 3))
def test_iid_law_is_the_product(q, k):
    law = iid_law(q, k)
    assert abs(law.probs.sum() - 1) <= AGREEMENT_TOLERANCE
    for i in range(k):
        assert np.allclose(law.marginal(i), q, atol=AGREEMENT_TOLERANCE)
    assert np.allclose(law.membership_probs(), 1 - (1 - q) ** k, atol=AGREEMENT_TOLERANCE)
    assert np.allclose(law.membership_probs(), brute_membership(law), atol=AGREEMENT_TOLERANCE)


def test_without_replacement_exact_values():
    q = as_exact_distribution(["1/2", "3/10", "1/5"])
    law = without_replacement_law(q, 2)
    table = {tuple(t): pr for t, pr in zip(law.tuples.tolist(), law.probs)}
    assert table[(0, 1)] == F(1, 2) * F(3, 10) / F(1, 2)
    assert table[(1, 0)] == F(3, 10) * F(1, 2) / F(7, 10)
    assert sum(law.probs) == 1
    assert law.marginal(0).tolist() == q.tolist()  # the first draw is q itself
    assert all(len(set(t)) == 2 for t in law.tuples.tolist())


def sequential_wor_probability(q, row) -> float:
    """``Q(row)`` from the sequential definition: each draft from ``q`` off the drawn
    tokens, or, once that has no mass, surely the lowest-index token with ``q = 0`` not
    yet drawn (written here independently of otm.draft_laws)."""
    expected, drawn = 1.0, []
    for x in row:
        not_drawn = [y for y in range(len(q)) if y not in drawn]
        mass = sum(q[y] for y in not_drawn)  # summed directly: no cancellation
        if mass > 0:
            expected *= q[x] / mass
        else:
            expected *= 1.0 if x == min(not_drawn) else 0.0
        drawn.append(x)
    return expected


@given(distributions(2, 5), st.integers(1, 5))
def test_without_replacement_matches_sequential_definition(q, k):
    if k > q.size:
        with pytest.raises(InvalidDraftCountError, match="vocabulary"):
            without_replacement_law(q, k)
        return
    law = without_replacement_law(q, k)
    for row, pr in zip(law.tuples, law.probs):
        assert pr == pytest.approx(sequential_wor_probability(q, row.tolist()), rel=1e-9)
    assert abs(law.probs.sum() - 1) <= AGREEMENT_TOLERANCE
    assert all(len(set(t)) == k for t in law.tuples.tolist())
    assert np.allclose(law.marginal(0), q, atol=AGREEMENT_TOLERANCE)  # the first draw is q itself


def test_without_replacement_k_larger_than_vocab():
    with pytest.raises(InvalidDraftCountError, match="vocabulary of 3"):
        without_replacement_law(Q3, 4)


def test_without_replacement_exhausted_support_is_the_greedy_tail():
    """m < k tokens with q > 0: the support in random order, then the lowest-index
    q = 0 tokens (the greedy order's tail), exactly."""
    one_hot = as_exact_distribution(["0", "1", "0", "0"])
    law = without_replacement_law(one_hot, 3)
    assert law.tuples.tolist() == [[1, 0, 2]]
    assert law.probs.tolist() == [1]
    assert without_replacement_law(one_hot, 4).tuples.tolist() == [[1, 0, 2, 3]]
    assert greedy_law(one_hot, 3).tuples.tolist() == [[1, 0, 2]]  # the same convention
    two = as_exact_distribution(["0", "1/4", "0", "3/4", "0"])
    law = without_replacement_law(two, 4)
    table = {tuple(t): pr for t, pr in zip(law.tuples.tolist(), law.probs)}
    assert table == {(1, 3, 0, 2): F(1, 4), (3, 1, 0, 2): F(3, 4)}
    assert law.membership_probs().tolist() == [1, 1, 1, 1, 0]
    assert without_replacement_law([0.0, 1.0, 0.0], 3).probs.tolist() == [1.0]  # float too
    # the check sees a different tail convention (highest-index zeros first)
    assert sequential_wor_probability([0.0, 0.25, 0.0, 0.75, 0.0], [1, 3, 4, 2]) == 0.0


def test_hub_law_matches_seed000_fig5():
    law = hub_law(Q3)  # a = 0
    table = {tuple(t): float(pr) for t, pr in zip(law.tuples.tolist(), law.probs)}
    assert table == pytest.approx({(1, 0): 0.3, (2, 0): 0.2, (0, 1): 0.5 * 0.3 / 0.5, (0, 2): 0.5 * 0.2 / 0.5})
    assert np.allclose(law.marginal(0), Q3)  # first draft is marginally q
    assert (law.tuples == 0).any(axis=1).all()  # every pair contains the hub


def test_hub_law_one_hot_does_not_divide_by_zero():
    law = hub_law([0.0, 1.0, 0.0])
    assert law.tuples.tolist() == [[1, 1]]
    assert float(law.probs[0]) == 1.0


@given(distributions(1, 5), st.integers(1, 4))
def test_greedy_law(q, k):
    if k > q.size:
        with pytest.raises(InvalidDraftCountError):
            greedy_law(q, k)
        return
    law = greedy_law(q, k)
    order = np.argsort(-q, kind="stable")
    assert (law.tuples[:, : k - 1] == order[: k - 1]).all()
    assert abs(float(law.probs.sum()) - 1) <= AGREEMENT_TOLERANCE
    assert all(len(set(t)) == k for t in law.tuples.tolist())


def test_independent_law_and_dispatch():
    law = independent_law([[0.5, 0.5], [0.1, 0.9]])
    assert np.allclose(law.marginal(1), [0.1, 0.9])
    assert draft_law("iid", [[0.5, 0.5], [0.1, 0.9]], 2).name == "independent"
    with pytest.raises(ShapeMismatchError):
        draft_law("iid", [[0.5, 0.5], [0.1, 0.9]], 3)
    with pytest.raises(UnknownNameError, match="iid"):
        draft_law("bogus", Q3, 2)
    with pytest.raises(InvalidDraftCountError):
        draft_law("hub", Q3, 3)


def test_table_law_merges_duplicates_and_checks_tokens():
    law = table_law([[0, 1], [0, 1], [1, 1]], [0.25, 0.25, 0.5], 2)
    assert sorted(map(tuple, law.tuples.tolist())) == [(0, 1), (1, 1)]
    assert law.membership_probs().tolist() == [0.5, 1.0]
    with pytest.raises(Exception, match="range"):
        table_law([[0, 5]], [1.0], 2)


def test_all_in_probability_matches_brute_force():
    law = iid_law(Q3, 2)
    for r in range(4):
        for H in itertools.combinations(range(3), r):
            expected = sum(float(pr) for t, pr in zip(law.tuples, law.probs) if set(t) <= set(H))
            assert law.all_in_probability(list(H)) == pytest.approx(expected, abs=AGREEMENT_TOLERANCE)
            assert law.all_in_probability(list(H)) == pytest.approx(sum(Q3[i] for i in H) ** 2)


def test_enumeration_limit_is_a_typed_error():
    q = np.full(2000, 1 / 2000)
    assert 2000**2 > MAX_ENUMERATED_TUPLES
    with pytest.raises(NotApplicableError, match="closed_form"):
        iid_law(q, 2)


def test_sampler_matches_law():
    law = without_replacement_law(Q3, 2)
    rng = np.random.default_rng(0)
    draws = law.sample(rng, 60_000)
    counts = {tuple(t): 0 for t in law.tuples.tolist()}
    for t in map(tuple, draws.tolist()):
        counts[t] += 1
    expected = dict(zip(map(tuple, law.tuples.tolist()), law.probs))
    chi2 = sum((counts[t] - 60_000 * expected[t]) ** 2 / (60_000 * expected[t]) for t in counts)
    # 5 degrees of freedom; P(chi2 > 25.7) = 1e-4 under the law: the false-alarm rate.
    assert chi2 < 25.7
