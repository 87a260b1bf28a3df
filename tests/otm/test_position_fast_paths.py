"""What one position's analysis shares between its columns and its k (otm.positions): each shared
or fused computation against the plain one it replaces, bit for bit, on rows with ties and zeros,
and against the exact rational scan."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from otm.distributions import as_fractions, logits_to_probs
from otm.draft_laws import greedy_order
from otm.errors import InvalidDraftCountError, NotApplicableError
from otm.formulations.closed_form import solve_closed_form
from otm.formulations.prefix_scan import WithoutReplacementScan, iid_optimum_for_ks, prefix_scan
from otm.formulations.wor_all_in import NEIGHBOUR_MARGIN, DraftOrder, DraftPrefixes, _small_by_bin, neighbour_bounds
from otm.positions import kseq_acceptance_for_ks, position_cells
from otm.rules.enumeration import positive_part
from otm.rules.kseq import closed_form_membership, optimal_division_factor, residual_distribution, sorted_ratios_of
from otm.tolerances import AGREEMENT_TOLERANCE


def _tied_row(seed: int, size: int, values: int = 4, zeros: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """``(p, q)`` taking a handful of values (most ratios tie), zeros in both when ``zeros``."""
    rng = np.random.default_rng(seed)
    p = rng.integers(0 if zeros else 1, values + 1, size).astype(np.float64)
    q = rng.integers(0 if zeros else 1, values + 1, size).astype(np.float64)
    p[0] = q[1] = q[2] = 1.0  # neither vector is all zeros; q keeps at least two tokens
    return p / p.sum(), q / q.sum()


def _logit_row(seed: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """A softmax pair from float32 logits rounded to 1/8 (ties as from low-precision logits)."""
    rng = np.random.default_rng(seed)
    target = np.round(8 * 2.0 * rng.standard_normal(size)) / 8
    draft = np.round(8 * (target + rng.standard_normal(size))) / 8
    return (logits_to_probs(target.astype(np.float32).astype(np.float64)),
            logits_to_probs(draft.astype(np.float32).astype(np.float64)))


def _same_solution(shared, fresh) -> None:
    assert shared.value == fresh.value
    assert shared.all_in == fresh.all_in and shared.cut_value == fresh.cut_value
    assert np.array_equal(shared.cut, fresh.cut)
    assert {key: value for key, value in shared.details.items() if key != "order"} == \
           {key: value for key, value in fresh.details.items() if key != "order"}


@pytest.mark.parametrize("row", [_tied_row(0, 9), _tied_row(1, 40, values=2), _tied_row(2, 300), _logit_row(3, 3000)])
def test_one_scan_for_every_k_is_a_fresh_scan_per_k(row):
    """The k-independent part shared across k (in an order that revisits a k) changes nothing:
    each solution equals ``prefix_scan`` at that k alone, bit for bit; a k above the support is
    refused the same way."""
    p, q = row
    support = int(np.count_nonzero(q))
    scan = WithoutReplacementScan(p, q)
    for k in (5, 2, 8, 1, 3, 2, support, support + 1):
        if k > support:
            with pytest.raises(InvalidDraftCountError):
                scan.solve(k)
            with pytest.raises(InvalidDraftCountError):
                prefix_scan(p, q, k, "without_replacement")
            continue
        _same_solution(scan.solve(k), prefix_scan(p, q, k, "without_replacement"))


@pytest.mark.parametrize("seed", range(4))
def test_one_scan_for_every_k_against_the_exact_rational_scan(seed):
    p, q = _tied_row(seed, 7)
    scan = WithoutReplacementScan(p, q)
    exact_p, exact_q = as_fractions(p), as_fractions(q)
    for k in range(1, int(np.count_nonzero(q)) + 1):
        exact = prefix_scan(exact_p, exact_q, k, "without_replacement")
        assert abs(scan.solve(k).value - float(exact.value)) <= AGREEMENT_TOLERANCE


def test_a_shared_draft_order_gives_every_k_the_bounds_of_its_own():
    """:class:`DraftOrder` shared by several k (in mixed order): each k's bounds and k-th largest
    ``q`` equal those built from ``q`` alone; the shared arrays cannot be written."""
    _, q = _logit_row(5, 2000)
    q_sorted = np.sort(q[q > 0])[::-1].copy()
    q_sorted /= q_sorted.sum()
    order = DraftOrder(q_sorted)
    for k in (4, 1, 7, 2, 4):
        shared, alone = DraftPrefixes(order, k), DraftPrefixes(q_sorted, k)
        for name in ("lower", "upper", "kth_largest", "outside", "descending"):
            assert np.array_equal(getattr(shared, name), getattr(alone, name)), (k, name)
    with pytest.raises(ValueError):
        order.largest(3)[1] = 0.0


def test_the_optima_kept_for_a_row_follow_its_values_not_the_array():
    """The sweep's calls share the optima of the last row; a row changed in place, or another
    row, is computed afresh (a cache keyed on the array object would return the old optima)."""
    ks = [1, 2, 3]
    columns = ("optimum_iid", "optimum_without_replacement", "optimal", "optimal_wor")

    def cells(p, q):
        return {(c.computation, c.k): c.value for name in columns
                for c in position_cells(p, q, ks, (name,), np.random.default_rng(0))}

    def direct(p, q):
        iid = iid_optimum_for_ks(p, q, ks)
        wor = [solve_closed_form(p, q, k, "without_replacement").value for k in ks]
        return {**{("optimum_iid", k): v for k, v in zip(ks, iid)}, **{("optimal", k): v for k, v in zip(ks, iid)},
                **{("optimum_without_replacement", k): v for k, v in zip(ks, wor)},
                **{("optimal_wor", k): v for k, v in zip(ks[1:], wor[1:])}}

    p, q = _tied_row(7, 30)
    first = cells(p, q)
    assert {key: value for key, value in first.items() if key != ("optimal_wor", 1)} == direct(p, q)
    p[[0, 5]] = p[[5, 0]]  # the same arrays, other values
    q[[1, 9]] = q[[9, 1]]
    changed = cells(p, q)
    assert {key: value for key, value in changed.items() if key != ("optimal_wor", 1)} == direct(p, q)
    assert changed != first


@pytest.mark.parametrize("row", [
    _tied_row(0, 50), _logit_row(1, 3000), _logit_row(2, 40),
    (np.array([0.5, 0.5, 0.0, 0.0]), np.array([0.0, 0.0, 0.5, 0.5])),  # disjoint: beta = 0
    (np.full(6, 1 / 6), np.full(6, 1 / 6)),  # p = q: every draft accepted, the residual never reached
])
def test_kseq_at_every_k_is_the_residual_then_the_membership_bit_for_bit(row):
    """The fused membership (``p / g``, ``min(q, p / g)``, ``beta`` formed once) against the two
    functions it replaces, at the same ``g*``."""
    p, q = row
    ks = [1, 2, 3, 5, 8]
    ratios = sorted_ratios_of(p, q)
    reference = []
    for k in ks:
        g = optimal_division_factor(p, q, k, sorted_ratios=ratios)
        reference.append(float(closed_form_membership(p, q, k, g, positive_part(residual_distribution(p, q, k, g)))))
    assert kseq_acceptance_for_ks(p, q, ks) == reference


def _neighbour_bounds_reference(outside, known, lower, upper, margin):
    """The bounds of :func:`neighbour_bounds` written out plainly: each prefix gathers its
    nearest known prefixes on either side."""
    m = np.arange(outside.size)
    left = np.maximum.accumulate(np.where(known, m, 0))
    right = np.minimum.accumulate(np.where(known, m, m[-1])[::-1])[::-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        rate_left = upper[left] / outside[left]
        rate_right = np.where(outside[right] > 0, upper[right] / outside[right], np.inf)
        low = np.maximum(upper[right], outside * rate_left) * (1.0 - margin)
        high = np.minimum(upper[left], outside * rate_right) * (1.0 + margin)
    new_lower = np.where(known, lower, np.maximum(lower, low))
    new_upper = np.where(known, upper, np.minimum(upper, high))
    return np.minimum(new_lower, new_upper), new_upper


@pytest.mark.parametrize("seed", range(6))
def test_neighbour_bounds_are_the_plain_gathered_formula_bit_for_bit(seed):
    """Random prefix masses (zeros at the end, as past the support), known sets from a single
    pair of ends to most prefixes, bounds that cross: the same arrays as the plain formula."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 400))
    q = rng.dirichlet(np.full(n, 0.3))
    outside = np.concatenate([np.cumsum(q[::-1])[::-1], [0.0]])
    known = rng.random(n + 1) < rng.choice([0.0, 0.05, 0.9])
    known[[0, -1]] = True
    value = np.sort(rng.random(n + 1))[::-1] * outside
    lower = np.where(known, value, value * rng.uniform(0.5, 1.0, n + 1))
    upper = np.where(known, value, np.minimum(value * rng.uniform(1.0, 2.0, n + 1), 1.0))
    upper[rng.random(n + 1) < 0.1] = 0.0  # some bounds cross
    upper[known] = lower[known]
    got = neighbour_bounds(outside, known, lower, upper)
    want = _neighbour_bounds_reference(outside, known, lower, upper, NEIGHBOUR_MARGIN)
    assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(got, want))


@pytest.mark.parametrize("row", [_tied_row(0, 9), _tied_row(1, 500, values=3), _logit_row(2, 20_000)])
def test_greedy_order_is_numpys_stable_sort_of_minus_q(row):
    """The unstable sort with its ties put in id order (rows full of ties and zeros, and a row
    of float32 logits rounded to 1/8): the stable sort the greedy law is defined by."""
    _, q = row
    assert np.array_equal(greedy_order(q), np.argsort(-q, kind="stable"))


def test_the_shared_scan_refuses_exact_input_with_a_typed_error():
    with pytest.raises(NotApplicableError, match="prefix_scan"):
        WithoutReplacementScan(np.array([Fraction(1, 2)] * 2, dtype=object), np.array([Fraction(1, 2)] * 2, dtype=object))


@pytest.mark.parametrize("seed", range(5))
def test_small_tokens_by_bin_is_the_stable_sort_of_their_bins(seed):
    """The tokens small at every node kept in place, the others sorted: numpy's stable argsort of
    the bins, on random grids with several segments (prefix ends), tokens big from node 0 and
    tokens small at every node."""
    rng = np.random.default_rng(seed)
    n, nodes = int(rng.integers(1, 3000)), int(rng.integers(1, 120))
    points = np.unique(np.append(rng.integers(1, n + 1, int(rng.integers(1, 17))), n))
    segment = np.repeat(np.arange(points.size), np.diff(np.concatenate([[0], points])))
    big_from = np.where(rng.random(n) < 0.8, nodes, rng.integers(0, nodes + 1, n))
    key = big_from * points.size + segment
    small = np.flatnonzero(big_from > 0)
    assert np.array_equal(_small_by_bin(big_from, key, nodes), small[np.argsort(key[small], kind="stable")])
