"""The fast paths of the solver plumbing against the scipy operations they replace:
:func:`solvers.highs._stacked_csc` against ``scipy.sparse.vstack([A_eq, A_ub], format="csc")``
and :func:`solvers.verify.transpose_matvec` against ``A.T @ y``, on random CSR matrices with
repeated entries, unsorted column indices, explicit (and negative) zeros and empty shapes.
Each property is also run on a deliberately broken helper and shown to fail; wrong widths and
wrong vector lengths raise ``ValueError`` as scipy does."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from solvers.highs import _stacked_csc
from solvers.verify import transpose_matvec
from tests.fast_path_support import fails_on, same_floats

# order matters for these in float sums (0.1 + 0.2 + 0.3 != 0.3 + 0.2 + 0.1, 1e16 + 1 - 1e16 == 0)
VALUES = [0.0, -0.0, 1.0, -1.0, 0.1, 0.2, 0.3, 0.7, 1e16, -1e16, 3e-17, np.inf]


@st.composite
def raw_csr(draw, m: int, n: int) -> sp.csr_matrix:
    """A CSR ``[m, n]`` as scipy stores it without canonicalising: per row, column indices
    in any order, possibly repeated, values possibly zero."""
    row_entries = [draw(st.lists(st.tuples(st.integers(0, n - 1), st.sampled_from(VALUES)), max_size=5)) if n else []
                   for _ in range(m)]
    indptr = np.concatenate([[0], np.cumsum([len(e) for e in row_entries])]).astype(np.int32)
    indices = np.array([c for e in row_entries for c, _ in e], dtype=np.int32)
    data = np.array([v for e in row_entries for _, v in e], dtype=np.float64)
    A = sp.csr_matrix((data, indices, indptr), shape=(m, n))
    if draw(st.booleans()):
        A.sum_duplicates()  # canonical (sorted, no repeats; explicit zeros kept)
    return A


@st.composite
def stacked_pairs(draw) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    n = draw(st.integers(0, 5))
    return draw(raw_csr(draw(st.integers(0, 4)), n)), draw(raw_csr(draw(st.integers(0, 4)), n))


@st.composite
def matvec_cases(draw) -> tuple[sp.csr_matrix, np.ndarray]:
    A = draw(raw_csr(draw(st.integers(0, 5)), draw(st.integers(0, 5))))
    y = np.array(draw(st.lists(st.sampled_from(VALUES), min_size=A.shape[0], max_size=A.shape[0])), dtype=np.float64)
    return A, y


# ---------------------------------------------------------------- _stacked_csc

def _check_stacked_csc(stack, pair) -> None:
    A_eq, A_ub = pair
    ref = sp.vstack([A_eq, A_ub], format="csc")
    start, index, value = stack(A_eq, A_ub)
    # highspy receives the three arrays as lists: the index dtypes do not matter, the values do
    assert np.array_equal(start, ref.indptr), f"column starts differ: {start} != {ref.indptr}"
    assert np.array_equal(index, ref.indices), f"row indices differ: {index} != {ref.indices}"
    assert np.asarray(value).dtype == ref.data.dtype, f"value dtypes differ: {np.asarray(value).dtype} != {ref.data.dtype}"
    assert same_floats(value, ref.data), f"values differ: {value} != {ref.data}"


@settings(max_examples=300)
@given(pair=stacked_pairs())
def test_stacked_csc_equals_scipy_vstack(pair):
    _check_stacked_csc(_stacked_csc, pair)


@pytest.mark.parametrize("m_eq, m_ub, n", [(0, 0, 0), (0, 0, 3), (2, 0, 3), (0, 2, 3), (2, 3, 0)])
def test_stacked_csc_of_empty_blocks_equals_scipy_vstack(m_eq, m_ub, n):
    _check_stacked_csc(_stacked_csc, (sp.csr_matrix((m_eq, n)), sp.csr_matrix((m_ub, n))))


def _stacked_csc_without_vstack_fallback(A_eq, A_ub):
    """Deliberately broken: repeated entries are kept apart instead of summed."""
    rows = np.concatenate([np.repeat(np.arange(A.shape[0]) + offset, np.diff(A.indptr))
                           for A, offset in ((A_eq, 0), (A_ub, A_eq.shape[0]))])
    cols = np.concatenate([A_eq.indices, A_ub.indices])
    order = np.argsort(cols, kind="stable")
    start = np.concatenate([[0], np.cumsum(np.bincount(cols, minlength=A_eq.shape[1]))])
    return start, rows[order], np.concatenate([A_eq.data, A_ub.data])[order]


def _stacked_csc_rows_descending(A_eq, A_ub):
    """Deliberately broken: the sort by column is not the stable one (rows descend in a
    column); repeated entries still go through vstack."""
    rows = np.concatenate([np.repeat(np.arange(A.shape[0]) + offset, np.diff(A.indptr))
                           for A, offset in ((A_eq, 0), (A_ub, A_eq.shape[0]))])
    cols = np.concatenate([A_eq.indices, A_ub.indices])
    order = np.lexsort((-rows, cols))
    if ((rows[order][1:] == rows[order][:-1]) & (cols[order][1:] == cols[order][:-1])).any():
        A = sp.vstack([A_eq, A_ub], format="csc")
        return A.indptr, A.indices, A.data
    start = np.concatenate([[0], np.cumsum(np.bincount(cols, minlength=A_eq.shape[1]))])
    return start, rows[order], np.concatenate([A_eq.data, A_ub.data])[order]


def test_stacked_csc_check_fails_on_a_helper_that_keeps_repeated_entries():
    fails_on(_stacked_csc_without_vstack_fallback, _check_stacked_csc, stacked_pairs(), "column starts differ")


def test_stacked_csc_check_fails_on_a_helper_with_an_unstable_column_sort():
    fails_on(_stacked_csc_rows_descending, _check_stacked_csc, stacked_pairs(), "row indices differ")


def test_stacked_csc_refuses_blocks_of_different_widths_like_vstack():
    A_eq, A_ub = sp.csr_matrix(np.ones((2, 3))), sp.csr_matrix(np.ones((2, 4)))
    with pytest.raises(ValueError):
        sp.vstack([A_eq, A_ub], format="csc")
    with pytest.raises(ValueError):
        _stacked_csc(A_eq, A_ub)


# ---------------------------------------------------------------- transpose_matvec

def _check_transpose_matvec(matvec, case) -> None:
    A, y = case
    with np.errstate(invalid="ignore"):  # 0 * inf
        ref = A.T @ y
        got = matvec(A, y)
    assert np.shape(got) == ref.shape, f"shapes differ: {np.shape(got)} != {ref.shape}"
    assert got.dtype == ref.dtype, f"dtypes differ: {got.dtype} != {ref.dtype}"
    assert same_floats(got, ref), f"sums differ (bit for bit): {got} != {ref}"


@settings(max_examples=300)
@given(case=matvec_cases())
def test_transpose_matvec_equals_scipy_bit_for_bit(case):
    """Repeated entries and unsorted columns are summed in the stored order, as scipy sums."""
    _check_transpose_matvec(transpose_matvec, case)


def _transpose_matvec_reversed(A, y):
    """Deliberately broken: the entries are summed in reverse stored order."""
    weights = A.data * np.repeat(y, np.diff(A.indptr))
    return np.bincount(A.indices[::-1], weights=weights[::-1], minlength=A.shape[1]).astype(np.float64)


def test_transpose_matvec_check_fails_on_a_helper_summing_in_another_order():
    fails_on(_transpose_matvec_reversed, _check_transpose_matvec, matvec_cases(), "sums differ")


@st.composite
def wrong_length_cases(draw) -> tuple[sp.csr_matrix, np.ndarray]:
    A, _ = draw(matvec_cases())
    length = draw(st.integers(0, 6).filter(lambda k: k != A.shape[0]))
    return A, np.ones(length)


@given(case=wrong_length_cases())
def test_transpose_matvec_raises_like_scipy_on_a_vector_of_the_wrong_length(case):
    A, y = case
    with pytest.raises(ValueError):
        A.T @ y
    with pytest.raises(ValueError):
        transpose_matvec(A, y)


def test_transpose_matvec_refuses_a_wrong_length_vector_for_one_empty_row():
    with pytest.raises(ValueError):
        transpose_matvec(sp.csr_matrix((1, 3)), np.ones(2))


def test_transpose_matvec_of_a_matrix_without_entries_is_float():
    A, y = sp.csr_matrix((2, 3)), np.ones(2)
    assert transpose_matvec(A, y).dtype == (A.T @ y).dtype
