"""The fast paths of the LP assembly against the slow obvious code they replace:
:func:`otm.formulations._lp.csr_from_entries` against scipy's COO route,
:meth:`LPBuilder.add_rows` against :meth:`LPBuilder.add` once per row (float and exact),
:func:`otm.formulations.canonical_lp.first_of_each` against a per-tuple search, the float
:func:`otm.formulations.canonical_lp.selection_weight_lp` written directly against the same LP
assembled by :class:`LPBuilder`, and
:func:`otm.rules.importance_sampling_truncated.selected_mass` against two ``np.add.at``.
Inputs include repeated entries, unsorted entries, explicit (and negative) zeros, empty
shapes and out-of-range indices (which must raise what the reference raises). Each property
is also run on a deliberately broken helper and shown to fail."""
from __future__ import annotations

from fractions import Fraction as F

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from otm.errors import ShapeMismatchError
from otm.formulations._lp import LPBuilder, csr_from_entries
from otm.formulations import canonical_lp
from otm.formulations.canonical_lp import first_of_each
from otm.rules.importance_sampling_truncated import selected_mass
from tests.fast_path_support import fails_on, same_floats

# order matters for these in float sums (0.1 + 0.2 + 0.7 != 0.7 + 0.2 + 0.1)
VALUES = [0.0, -0.0, 1.0, -1.0, 0.1, 0.2, 0.7, 1 / 3, 1e16, 3e-17, np.inf]
EXACT_VALUES = [F(0), F(1, 3), F(-2, 7), F(5, 2), 0, 1, -1]


def _outcome(f):
    """``(value, None)`` or ``(None, type of the exception f raised)``."""
    try:
        return f(), None
    except Exception as error:  # noqa: BLE001 - the type is compared with the reference's
        return None, type(error)


def _csr_differences(got, ref) -> list[str]:
    """What differs between two CSR matrices, array by array (empty when they are the same)."""
    if not isinstance(got, sp.csr_matrix):
        return [f"not a csr_matrix: {type(got).__name__}"]
    diffs = [f"{name} differ: {g} != {r}" for name, g, r in (
        ("shapes", got.shape, ref.shape),
        ("indptr dtypes", got.indptr.dtype, ref.indptr.dtype),
        ("indices dtypes", got.indices.dtype, ref.indices.dtype),
        ("data dtypes", got.data.dtype, ref.data.dtype),
        ("sorted-indices flags", got.has_sorted_indices, ref.has_sorted_indices),
        ("canonical-format flags", got.has_canonical_format, ref.has_canonical_format),
    ) if g != r]
    if not np.array_equal(got.indptr, ref.indptr):
        diffs.append(f"indptr differ: {got.indptr} != {ref.indptr}")
    if not np.array_equal(got.indices, ref.indices):
        diffs.append(f"indices differ: {got.indices} != {ref.indices}")
    if not same_floats(got.data, ref.data):
        diffs.append(f"data differ: {got.data} != {ref.data}")
    return diffs


# ---------------------------------------------------------------- csr_from_entries

@st.composite
def entry_cases(draw):
    """``(rows, cols, vals, shape)``: distinct positions in random (unsorted) order, or
    positions drawn with repeats, or either with one index just outside the shape."""
    m, n = draw(st.integers(0, 5)), draw(st.integers(0, 5))
    positions = [(r, c) for r in range(m) for c in range(n)]
    repeats = draw(st.booleans())
    picks = draw(st.lists(st.sampled_from(positions), max_size=12, unique=not repeats)) if positions else []
    if draw(st.integers(0, 4)) == 0:  # one entry outside the shape
        bad = draw(st.sampled_from([(-1, 0), (m, 0), (0, -1), (0, n)]))
        picks.insert(draw(st.integers(0, len(picks))), bad)
    dtype = draw(st.sampled_from([np.int64, np.int32]))
    rows = np.array([r for r, _ in picks], dtype=dtype)
    cols = np.array([c for _, c in picks], dtype=dtype)
    vals = np.array(draw(st.lists(st.sampled_from(VALUES), min_size=len(picks), max_size=len(picks))), dtype=np.float64)
    return rows, cols, vals, (m, n)


def _check_csr_from_entries(build, case) -> None:
    rows, cols, vals, shape = case
    ref, ref_error = _outcome(lambda: sp.csr_matrix((vals, (rows, cols)), shape=shape))
    got, got_error = _outcome(lambda: build(rows, cols, vals, shape))
    assert got_error is ref_error, f"raised {got_error} where scipy raised {ref_error}"
    if ref_error is None:
        diffs = _csr_differences(got, ref)
        assert not diffs, "; ".join(diffs)


@settings(max_examples=400)
@given(case=entry_cases())
def test_csr_from_entries_equals_scipy_coo_route(case):
    _check_csr_from_entries(csr_from_entries, case)


@pytest.mark.parametrize("n", [2**31 - 2, 2**31 - 1, 2**31])
def test_csr_from_entries_picks_scipys_index_dtype_at_the_int32_limit(n):
    case = (np.array([1, 0, 1]), np.array([n - 1, 0, 0]), np.array([1.0, 2.0, 3.0]), (2, n))
    _check_csr_from_entries(csr_from_entries, case)


def _csr_without_sort(rows, cols, vals, shape):
    """Deliberately broken: the entries are taken in the given order, not sorted."""
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=shape[0]))]).astype(np.int32)
    return sp.csr_matrix((vals, cols.astype(np.int32), indptr), shape=shape)


def _csr_without_fallback(rows, cols, vals, shape):
    """Deliberately broken: repeated positions are kept as separate entries (never summed)."""
    order = np.lexsort((cols, rows))
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows[order], minlength=shape[0]))]).astype(np.int32)
    return sp.csr_matrix((vals[order], cols[order].astype(np.int32), indptr), shape=shape)


def _in_range(strategy):
    return strategy.filter(lambda case: all(0 <= r < case[3][0] for r in case[0]) and all(0 <= c < case[3][1] for c in case[1]))


def test_csr_check_fails_on_a_helper_that_skips_the_sort():
    fails_on(_csr_without_sort, _check_csr_from_entries, _in_range(entry_cases()), "differ")


def test_csr_check_fails_on_a_helper_that_keeps_repeated_entries():
    fails_on(_csr_without_fallback, _check_csr_from_entries, _in_range(entry_cases()), "indptr differ")


def test_csr_check_fails_on_a_helper_that_accepts_indices_outside_the_shape():
    def clipped(rows, cols, vals, shape):  # deliberately broken: clips instead of raising
        return csr_from_entries(np.clip(rows, 0, shape[0] - 1), np.clip(cols, 0, shape[1] - 1), vals, shape)
    fails_on(clipped, _check_csr_from_entries, entry_cases(), "where scipy raised")


# ---------------------------------------------------------------- LPBuilder.add_rows

@st.composite
def builder_cases(draw):
    """``(n, exact, blocks)``; a block is ``(kind, by_rows, rows, cols, vals, rhs)``: rows
    numbered from 0 in the block, entries in random row order, repeated columns in a row,
    rows without entries, now and then a column just outside ``[0, n)``."""
    n, exact = draw(st.integers(0, 4)), draw(st.booleans())
    values = EXACT_VALUES if exact else VALUES
    blocks = []
    for _ in range(draw(st.integers(0, 4))):
        count = draw(st.integers(0, 4))
        columns = st.integers(-1, n) if draw(st.integers(0, 4)) == 0 else st.integers(0, n - 1)
        terms = draw(st.lists(st.tuples(st.integers(0, count - 1), columns, st.sampled_from(values)), max_size=8)
                     ) if count and n else []
        rows = np.array([r for r, _, _ in terms], dtype=np.int64)
        cols = np.array([c for _, c, _ in terms], dtype=np.int64)
        vals = [v for _, _, v in terms]
        if exact and draw(st.booleans()):
            vals = np.array(vals, dtype=object)
        elif not exact and draw(st.booleans()):
            vals = np.array(vals, dtype=np.float64)
        rhs = draw(st.lists(st.sampled_from(values), min_size=count, max_size=count))
        rhs = np.array(rhs, dtype=object if exact else np.float64)
        blocks.append((draw(st.sampled_from(["eq", "ub"])), draw(st.booleans()), rows, cols, vals, rhs))
    return n, exact, blocks


def _build_one_row_at_a_time(n, exact, blocks):
    """The reference: every row through :meth:`LPBuilder.add`, its terms in their given order."""
    builder = LPBuilder(n, exact)
    for kind, _, rows, cols, vals, rhs in blocks:
        for r in range(len(rhs)):
            mine = np.flatnonzero(rows == r)
            builder.add(kind, cols[mine], [vals[i] for i in mine], rhs[r])
    return builder.build(np.zeros(n, dtype=np.int64))


def _build_with_add_rows(add_rows, n, exact, blocks):
    """``add_rows`` for the blocks marked ``by_rows``, :meth:`LPBuilder.add` for the others."""
    builder = LPBuilder(n, exact)
    for kind, by_rows, rows, cols, vals, rhs in blocks:
        if by_rows:
            add_rows(builder, kind, rows, cols, vals, rhs)
        else:
            for r in range(len(rhs)):
                mine = np.flatnonzero(rows == r)
                builder.add(kind, cols[mine], [vals[i] for i in mine], rhs[r])
    return builder.build(np.zeros(n, dtype=np.int64))


def _exact_differences(name, got, ref) -> list[str]:
    if got.dtype != object or got.shape != ref.shape:
        return [f"{name} dtype or shape differ: {got.dtype} {got.shape} != {ref.dtype} {ref.shape}"]
    diffs = []
    if not all(isinstance(v, F) for v in got.flat):
        diffs.append(f"{name} holds a non-Fraction: {sorted({type(v).__name__ for v in got.flat})}")
    if not np.array_equal(got, ref):
        diffs.append(f"{name} values differ: {got.tolist()} != {ref.tolist()}")
    return diffs


def _check_add_rows(add_rows, case) -> None:
    n, exact, blocks = case
    ref, ref_error = _outcome(lambda: _build_one_row_at_a_time(n, exact, blocks))
    got, got_error = _outcome(lambda: _build_with_add_rows(add_rows, n, exact, blocks))
    assert got_error is ref_error, f"raised {got_error} where add raised {ref_error}"
    if ref_error is not None:
        return
    for name in ("A_eq", "b_eq", "A_ub", "b_ub"):
        g, r = getattr(got, name), getattr(ref, name)
        assert (g is None) == (r is None), f"{name}: {g} where add built {r}"
        if r is None:
            continue
        if exact:
            diffs = _exact_differences(name, g, r)
        elif name.startswith("A"):
            diffs = _csr_differences(g, r)
        else:
            diffs = [] if g.dtype == r.dtype and same_floats(g, r) else [f"{name} differ: {g} != {r}"]
        assert not diffs, f"{name}: " + "; ".join(diffs)


@settings(max_examples=300)
@given(case=builder_cases())
def test_add_rows_builds_the_rows_of_repeated_add(case):
    _check_add_rows(LPBuilder.add_rows, case)


def test_add_rows_check_fails_on_add_rows_that_forgets_the_rows_before_it(monkeypatch):
    def restarting(self, kind, rows, cols, vals, rhs):  # deliberately broken: rows counted from 0 of the kind
        self._blocks[kind].append((np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64),
                                   np.asarray(vals), np.asarray(rhs)))
        self._count[kind] += len(rhs)
    monkeypatch.setattr(LPBuilder, "add_rows", restarting)
    fails_on(lambda builder, *args: builder.add_rows(*args), _check_add_rows, builder_cases(), "differ")


def test_add_rows_check_fails_on_add_rows_that_keeps_one_term_per_position():
    def deduplicated(builder, kind, rows, cols, vals, rhs):  # deliberately broken: a repeated column is dropped
        _, keep = np.unique(np.stack([rows, cols]), axis=1, return_index=True) if len(rows) else (None, [])
        keep = np.sort(np.asarray(keep, dtype=np.int64))
        LPBuilder.add_rows(builder, kind, rows[keep], cols[keep], [vals[i] for i in keep], rhs)
    fails_on(deduplicated, _check_add_rows, builder_cases(), "differ")


# ---------------------------------------------------------------- first_of_each

def _first_of_each_by_search(rows, num_tuples):
    """The reference: each tuple's first index by a search of its own (the loop add_rows replaced)."""
    rows = np.asarray(rows, dtype=np.int64)
    if sorted(set(rows.tolist())) != list(range(num_tuples)):
        raise ShapeMismatchError(f"rows must name each tuple 0 .. {num_tuples - 1} at least once and no other tuple")
    return np.array([np.flatnonzero(rows == t)[0] for t in range(num_tuples)], dtype=np.int64)


@st.composite
def first_cases(draw):
    """``(rows, num_tuples)``: each tuple at least once in random order, now and then one
    missing or one extra (negative or too large)."""
    num_tuples = draw(st.integers(0, 5))
    rows = list(range(num_tuples)) + draw(st.lists(st.integers(0, num_tuples - 1), max_size=8)) if num_tuples else []
    rows = draw(st.permutations(rows))
    trouble = draw(st.sampled_from(["none", "none", "missing", "extra"]))
    if trouble == "missing" and num_tuples:
        gone = draw(st.integers(0, num_tuples - 1))
        rows = [r for r in rows if r != gone]
    elif trouble == "extra":
        rows.insert(draw(st.integers(0, len(rows))), draw(st.sampled_from([-1, num_tuples, num_tuples + 3])))
    return np.array(rows, dtype=np.int64), num_tuples


def _check_first_of_each(first, case) -> None:
    rows, num_tuples = case
    ref, ref_error = _outcome(lambda: _first_of_each_by_search(rows, num_tuples))
    got, got_error = _outcome(lambda: first(rows, num_tuples))
    assert got_error is ref_error, f"raised {got_error} where the search raised {ref_error}"
    if ref_error is None:
        assert np.array_equal(got, ref), f"first indices differ: {got} != {ref}"
        assert np.asarray(got).shape == (num_tuples,), f"shape differ: {np.shape(got)} != {(num_tuples,)}"


@settings(max_examples=300)
@given(case=first_cases())
def test_first_of_each_equals_a_search_per_tuple(case):
    _check_first_of_each(first_of_each, case)


def test_first_of_each_check_fails_on_the_last_index():
    def last_of_each(rows, num_tuples):  # deliberately broken: the last index of each tuple
        _, last_reversed = np.unique(rows[::-1], return_index=True)
        first_of_each(rows, num_tuples)
        return len(rows) - 1 - last_reversed
    fails_on(last_of_each, _check_first_of_each, first_cases(), "first indices differ")


def test_first_of_each_check_fails_without_the_tuple_check():
    def unchecked(rows, num_tuples):  # deliberately broken: no check of the tuples named
        return np.unique(rows, return_index=True)[1]
    fails_on(unchecked, _check_first_of_each, first_cases(), "where the search raised")


# ---------------------------------------------------------------- selection_weight_lp written directly

@st.composite
def weight_lp_cases(draw):
    """``(p, mass, rows, tokens, num_tuples, offset)``: tuples in order, each with 1-4
    distinct tokens of ``V <= 7`` (as pair stages and canonical LPs list them), values that
    round differently when summed out of order, with or without an offset."""
    V = draw(st.integers(1, 7))
    sizes = draw(st.lists(st.integers(1, min(4, V)), min_size=1, max_size=6))
    tokens = [t for size in sizes for t in draw(st.permutations(range(V)))[:size]]
    rows = np.repeat(np.arange(len(sizes)), sizes)
    values = st.sampled_from([0.0, 0.1, 0.2, 0.7, 1 / 3, 3e-17, 1.0])
    mass = np.repeat(np.array(draw(st.lists(values, min_size=len(sizes), max_size=len(sizes)))), sizes)
    p = np.array(draw(st.lists(values, min_size=V, max_size=V)))
    offset = np.array(draw(st.lists(values, min_size=V, max_size=V))) if draw(st.booleans()) else None
    return p, mass, rows, np.array(tokens, dtype=np.int64), len(sizes), offset


def _weight_lp_by_builder(p, mass, rows, tokens, num_tuples, offset):
    """The reference: the same LP assembled by :class:`LPBuilder` (the path exact data takes)."""
    V, num_w = len(p), len(rows)
    builder = LPBuilder(num_w + V, False)
    builder.add_rows("eq", rows, np.arange(num_w), np.ones(num_w), mass[first_of_each(rows, num_tuples)])
    rhs = np.zeros(2 * V)
    rhs[0::2], rhs[1::2] = p, (0.0 if offset is None else offset)
    t_cols = num_w + np.arange(V)
    builder.add_rows("ub", np.concatenate([2 * np.arange(V), 2 * np.arange(V) + 1, 2 * tokens + 1]),
                     np.concatenate([t_cols, t_cols, np.arange(num_w)]),
                     np.concatenate([np.ones(2 * V), -np.ones(num_w)]), rhs)
    return builder.build(np.repeat([0, 1], [num_w, V]))


def _check_weight_lp(build, case) -> None:
    got, ref = build(*case), _weight_lp_by_builder(*case)
    diffs = _csr_differences(got.A_eq, ref.A_eq) + _csr_differences(got.A_ub, ref.A_ub)
    assert not diffs, f"matrices differ: {diffs}"
    for name in ("b_eq", "b_ub", "c"):
        assert same_floats(getattr(got, name), getattr(ref, name)), f"{name} differ"
    assert (got.sense, got.lower, got.upper) == (ref.sense, ref.lower, ref.upper)


@settings(max_examples=300)
@given(case=weight_lp_cases())
def test_selection_weight_lp_written_directly_equals_the_builders(case):
    assert canonical_lp._tuples_in_order(case[2], case[4])  # the direct writer is the path taken
    _check_weight_lp(canonical_lp.selection_weight_lp, case)


def test_selection_weight_lp_check_fails_on_a_writer_that_puts_t_first(monkeypatch):
    """Deliberately broken: ``t_y`` written first in row ``2y + 1`` (unsorted column indices)."""
    def t_first(p, mass, rows, tokens, offset):
        lp = writer(p, mass, rows, tokens, offset)
        A = lp.A_ub.copy()
        for row in range(1, A.shape[0], 2):
            start, end = A.indptr[row], A.indptr[row + 1]
            A.indices[start:end] = np.roll(A.indices[start:end], 1)
            A.data[start:end] = np.roll(A.data[start:end], 1)
        return type(lp)(c=lp.c, A_eq=lp.A_eq, b_eq=lp.b_eq, A_ub=sp.csr_matrix(A), b_ub=lp.b_ub, sense=lp.sense)

    writer = canonical_lp._float_selection_weight_lp
    monkeypatch.setattr(canonical_lp, "_float_selection_weight_lp", t_first)
    fails_on(canonical_lp.selection_weight_lp, lambda build, case: _check_weight_lp(build, case), weight_lp_cases(),
             "matrices differ")


# ---------------------------------------------------------------- selected_mass

def _selected_mass_by_add_at(first, second, mass, select_first, V):
    """The reference (the code selected_mass replaced in pair_stage): two successive np.add.at."""
    law = np.zeros(V)
    np.add.at(law, first, mass * select_first[first, second])
    np.add.at(law, second, mass * (1 - select_first[first, second]))
    return law


@st.composite
def mass_cases(draw):
    """``(first, second, mass, select_first, V)``: repeated pairs and tokens, pairs of equal
    tokens, rule entries in ``[0, 1]``, now and then a token ``>= V`` (never negative: see
    test_selected_mass_refuses_negative_tokens); at least one pair (no pairs: a test of its own)."""
    V = draw(st.integers(1, 5))
    token = st.integers(0, V + 1) if draw(st.integers(0, 9)) == 0 else st.integers(0, V - 1)
    pairs = draw(st.lists(st.tuples(token, token), min_size=1, max_size=12))
    first = np.array([a for a, _ in pairs], dtype=np.int64)
    second = np.array([b for _, b in pairs], dtype=np.int64)
    mass = np.array(draw(st.lists(st.sampled_from([0.0, 0.1, 0.2, 0.7, 1 / 3, 1e-17, 1.0]),
                                  min_size=len(pairs), max_size=len(pairs))))
    rule = np.array(draw(st.lists(st.sampled_from([0.0, 1.0, 0.5, 0.3, 1 / 3]), min_size=V * V, max_size=V * V))).reshape(V, V)
    return first, second, mass, rule, V


def _check_selected_mass(selected, case) -> None:
    ref, ref_error = _outcome(lambda: _selected_mass_by_add_at(*case))
    got, got_error = _outcome(lambda: selected(*case))
    assert got_error is ref_error, f"raised {got_error} where np.add.at raised {ref_error}"
    if ref_error is None:
        assert got.dtype == ref.dtype, f"dtypes differ: {got.dtype} != {ref.dtype}"
        assert same_floats(got, ref), f"masses differ (bit for bit): {got} != {ref}"


@settings(max_examples=300)
@given(case=mass_cases())
def test_selected_mass_equals_two_add_at_bit_for_bit(case):
    _check_selected_mass(selected_mass, case)


def test_selected_mass_check_fails_on_a_helper_adding_the_second_tokens_first():
    def second_first(first, second, mass, select_first, V):  # deliberately broken: the other summation order
        F_ = select_first[first, second]
        return np.bincount(np.concatenate([second, first]), weights=np.concatenate([mass * (1 - F_), mass * F_]),
                           minlength=V)
    fails_on(second_first, _check_selected_mass, mass_cases(), "masses differ")


def test_selected_mass_check_fails_on_a_helper_that_ignores_the_rule():
    def all_to_first(first, second, mass, select_first, V):  # deliberately broken: F = 1 everywhere
        return selected_mass(first, second, mass, np.ones_like(select_first), V)
    fails_on(all_to_first, _check_selected_mass, mass_cases(), "masses differ")


def test_selected_mass_refuses_negative_tokens():
    """A documented difference, stricter than the reference: np.add.at wraps token -1 to
    V - 1 without a word, the bincount raises ValueError."""
    first, second, mass, rule = np.array([-1]), np.array([0]), np.array([0.5]), np.full((3, 3), 0.5)
    assert _selected_mass_by_add_at(first, second, mass, rule, 3).tolist() == [0.25, 0.0, 0.25]
    with pytest.raises(ValueError):
        selected_mass(first, second, mass, rule, 3)


def test_selected_mass_of_no_pairs_is_float():
    empty = np.zeros(0, dtype=np.int64)
    got = selected_mass(empty, empty, np.zeros(0), np.ones((3, 3)), 3)
    assert np.array_equal(got, np.zeros(3)), f"masses differ: {got}"
    assert got.dtype == np.float64, f"dtype {got.dtype} != float64"
