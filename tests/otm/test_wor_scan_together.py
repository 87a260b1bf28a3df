"""The scan without replacement of several k together (``WithoutReplacementScan.solve_together``:
one branch and bound whose rounds evaluate every k at once, the bounds of every k from one
product) against the scan of each k alone and against the exact rational scan; the shared
bounds against exact all-in probabilities."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from otm.distributions import as_fractions, logits_to_probs
from otm.draft_laws import valid_draft_law
from otm.errors import InvalidDraftCountError
from otm.formulations.prefix_scan import WithoutReplacementScan, prefix_scan
from otm.formulations.wor_all_in import DraftOrder, DraftPrefixes
from otm.positions import position_cells

#: How far the scan of several k together may be from each k's scan alone or from the exact
#: optimum: both are within ``_TIE`` (2^-50) plus the evaluations' error of the exact optimum,
#: and the evaluations are held to 1e-12 of exact laws (tests/otm/test_wor_families.py).
TOGETHER_TOLERANCE = 1e-12

KS = list(range(2, 9))


def _softmax_row(seed: int, size: int, temperature: float) -> tuple[np.ndarray, np.ndarray]:
    """A next-token pair like the report's: heavy-tailed target logits, the draft's perturbed."""
    rng = np.random.default_rng(seed)
    target = -np.log(rng.permutation(size) + 1.0) + rng.gumbel(size=size)
    draft = target + rng.standard_normal(size)
    return logits_to_probs(target, temperature), logits_to_probs(draft, temperature)


def _tied_row(seed: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    p = rng.integers(0, 4, size).astype(np.float64)
    q = rng.integers(0, 4, size).astype(np.float64)
    p[0] = q[1] = q[2] = 1.0
    return p / p.sum(), q / q.sum()


@pytest.mark.parametrize("row", [_softmax_row(0, 20_000, 1.0), _softmax_row(1, 20_000, 0.6), _softmax_row(2, 3000, 0.3),
                                 _tied_row(3, 300), _tied_row(4, 12)])
def test_every_k_together_is_each_k_alone(row):
    p, q = row
    scan = WithoutReplacementScan(p, q)
    ks = [k for k in KS if k <= scan.n]
    together = scan.solve_together(ks[::-1])[::-1]  # any order of the ks
    for k, solution in zip(ks, together):
        alone = WithoutReplacementScan(p, q).solve(k)
        assert abs(solution.value - alone.value) <= TOGETHER_TOLERANCE, k
        # the returned cut is a cut: its value is f(H) of the prefix it names
        assert solution.details["prefix_length"] == solution.cut.size
        assert abs(solution.cut_value - (p[solution.cut].sum() + 1 - solution.all_in)) <= TOGETHER_TOLERANCE


@pytest.mark.parametrize("seed", range(4))
def test_every_k_together_against_the_exact_rational_scan(seed):
    p, q = _tied_row(seed, 8)
    scan = WithoutReplacementScan(p, q)
    ks = list(range(2, scan.n + 1))
    exact_p, exact_q = as_fractions(p), as_fractions(q)
    for k, solution in zip(ks, scan.solve_together(ks)):
        exact = prefix_scan(exact_p, exact_q, k, "without_replacement")
        assert abs(solution.value - float(exact.value)) <= TOGETHER_TOLERANCE, k


@pytest.mark.parametrize("seed", range(3))
def test_the_bounds_of_every_k_from_one_product_hold_the_exact_all_in_probability(seed):
    """``lower <= R(H_m) <= upper`` at every prefix and k, ``R`` computed in rationals."""
    rng = np.random.default_rng(seed)
    q = rng.dirichlet(np.full(7, 0.4))
    q = np.sort(q)[::-1] if seed == 0 else q  # the largest first, or in any order
    q /= q.sum()
    exact_q = as_fractions(q)
    ks = [2, 3, 5]
    for k, draft in zip(ks, DraftPrefixes.together(DraftOrder(q), ks)):
        law = valid_draft_law("without_replacement", exact_q / sum(exact_q, Fraction(0)), k)
        for m in range(q.size + 1):
            outside = float(1 - law.all_in_probability(np.arange(m)))
            assert draft.lower[m] <= outside <= draft.upper[m], (k, m)


def test_a_k_outside_two_to_the_support_is_refused():
    p, q = _tied_row(5, 6)
    scan = WithoutReplacementScan(p, q)
    for ks in ([1, 2], [2, scan.n + 1]):
        with pytest.raises(InvalidDraftCountError):
            scan.solve_together(ks)


def test_the_table_column_is_the_scan_together_at_one_row():
    """``optimum_without_replacement`` of a row at every k: the scan together for k = 2..n, the
    i.i.d. optimum at k = 1."""
    p, q = _softmax_row(6, 3000, 1.0)
    scan = WithoutReplacementScan(p, q)
    cells = position_cells(p, q, [1, *KS], ("optimum_without_replacement",), np.random.default_rng(0))
    assert [c.value for c in cells] == [prefix_scan(p, q, 1).value, *(s.value for s in scan.solve_together(KS))]
    assert {c.method for c in cells} == {"exact"}
