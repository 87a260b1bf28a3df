"""The canonical importance-sampling decomposition of the OTM optimum (Khisti et al. 2025).

Khisti et al. (2025, "Multi-Draft Speculative Sampling: Canonical Decomposition and
Theoretical Limits") lost most formulas in extraction; what follows is reconstructed
from its surviving prose and re-derived (Appendix B's argument), in our letters
(p = target, Q = joint draft law, S(x) = distinct tokens of the tuple x).

Definition 1 (importance weighted sampling). Given the drafts ``x = x_{1:k}``, select an
intermediate token ``Z`` with

    P(Z = y | x) = w(y | x)  for y in S(x),   w(y | x) >= 0,   sum_{y in S(x)} w(y | x) = 1

(Khisti et al. 2025 write one weight per index ``i``; summing the weights of the indices holding
the same token gives this per-token form, eq. (1)). The law of ``Z`` is then

    P_I(y) = sum_x Q(x) w(y | x)                                   (eq. 3 / 40)

Step 2: single-draft speculative sampling (Leviathan et al., Leviathan et al. 2023, Alg. 1) of ``Z``
against ``p``: accept ``Z`` with probability ``min(1, p(Z) / P_I(Z))``, otherwise output a
token from the residual ``(p - P_I)^+ / sum (p - P_I)^+``. The output is exactly ``p``
and ``P(Y = Z) = sum_y min(p(y), P_I(y))``.

Theorem 1 (i.i.d. drafts) and Theorem 4 (any joint ``Q``, Appendix B.1):

    alpha*(p, Q) = max_w sum_y min(p(y), P_I(y))                   (eq. 2 / 39)

and the two-step scheme with the maximising ``w`` attains it. As a linear program, with
auxiliary ``t_y`` for the minimum:

    maximise    sum_y t_y
    subject to  t_y <= p(y),   t_y <= sum_x Q(x) w(y | x)          for every token y
                sum_{y in S(x)} w(y | x) = 1,  w >= 0               for every tuple x.

Why it is exact (App. B): ``pi(x, y) = Q(x) w(y | x) min(1, p(y) / P_I(y))`` is a feasible
point of SpecHub's simplified LP with value ``sum_y min(p, P_I)``; conversely from an
optimal simplified-LP ``pi``, ``w(y | x) = pi(x, y) / Q(x)`` plus the leftover
``1 - sum_y pi(x, y) / Q(x)`` given to any token of ``S(x)`` has ``P_I >= sum_x pi(x, y)``,
so ``sum min(p, P_I) >= sum pi``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from solvers.problem import LinearProgram

from ..draft_laws import DraftLaw
from ..errors import InvalidDistributionError, ShapeMismatchError
from ..solution import OTMSolution
from ..tolerances import SUM_TOLERANCE
from ._instance import distinct_positions, law_probs, target_for
from ._lp import LPBuilder, lp_solution, solve_lp, zero
from .max_flow import check_flow_size


def solve_canonical_lp(p, law: DraftLaw, backend: str = "highs") -> OTMSolution:
    """Optimal acceptance by the canonical LP in the importance weights (Khisti et al. 2025, Thm 1, 4).

    The LP has a ``t_y`` for the drafted tokens only (those in some tuple): a token in no
    tuple has ``P_I(y) = 0``, so its ``t_y`` is 0 in every feasible point, and left in, the
    solver's tolerance on each of its rows added up (a draft on 3 of 151,936 tokens gave a
    value 4.8e-6 above the min cut).

    Returns:
        :class:`OTMSolution` with ``details["weights"]`` (``[n_tuples, k]``: the weight of
        position ``j`` of tuple ``t``, non-zero only at the first occurrence of each token,
        rows summing to 1), ``details["selection_law"]`` (``[V]``, ``P_I``), and the LP duals
        and gap in ``certificate``. ``accepted`` holds ``Q(x) w(y | x) min(1, p(y) / P_I(y))``.

    >>> from otm.draft_laws import iid_law
    >>> round(float(solve_canonical_lp([0.5, 0.5], iid_law([0.5, 0.5], 2)).acceptance), 9)
    1.0
    """
    check_flow_size(law)  # the max flow certifies the value
    p, exact = target_for(p, law, backend)
    Q = law_probs(law, exact)
    rows, tokens = distinct_positions(law)
    drafted = np.unique(tokens)
    lp = selection_weight_lp(p[drafted], Q[rows], rows, np.searchsorted(drafted, tokens), len(Q))
    result = solve_lp(lp, backend)
    w_values = weights_from_masses(result.x, Q[rows], rows)
    weights = np.empty(law.tuples.shape, dtype=object if exact else np.float64)
    weights[...] = zero(exact)
    weights[rows, np.nonzero(law.first_occurrence())[1]] = w_values
    two_step = canonical_two_step_law(p, law, weights)
    accepted = {
        (int(t), int(y)): Q[t] * w * two_step.accept_probs[y]
        for t, y, w in zip(rows, tokens, w_values)
        if w > 0 and two_step.accept_probs[y] > 0
    }
    return lp_solution(p, law, "canonical_lp", lp, result, accepted, exact,
                       {"weights": weights, "selection_law": two_step.selection_law, "backend": result.backend})


def selection_weight_lp(p, mass, rows, tokens, num_tuples: int, offset=None):
    """The canonical LP in the selection weights, as a :class:`LinearProgram`.

    Variables: one *selection mass* ``u_i = mass[i] w_i`` per ``(rows[i], tokens[i])`` (a
    distinct token of tuple ``rows[i]``), then ``t_y`` for each token ``y``. ``mass[i]`` is
    ``Q`` of tuple ``rows[i]``; ``offset`` (``[V]``, default 0) is selection mass that
    reaches ``y`` from tuples whose weights are fixed (the truncated LP of Khisti et al. 2025, §4)::

        max sum_y t_y  s.t.  t_y <= p(y),  t_y - sum_{i: tokens[i] = y} u_i <= offset(y),
                             sum_{i: rows[i] = t} u_i = Q(t) for each tuple t,  u, t >= 0.

    This is the weight LP with each tuple's row scaled by ``Q(t)``: written in the weights
    themselves the coefficients are the tiny ``Q(t)`` and HiGHS stopped up to 6e-8 short of
    the optimum at V = 64, k = 2; in masses every coefficient is +-1 and it agrees with the
    other formulations to 1e-15. :func:`weights_from_masses` converts back.
    """
    exact = np.asarray(p).dtype == object
    V = len(p)
    rows, tokens = np.asarray(rows, dtype=np.int64), np.asarray(tokens, dtype=np.int64)
    num_w = len(rows)
    if not exact and _tuples_in_order(rows, num_tuples) and (not num_w or (0 <= tokens.min() and tokens.max() < V)):
        return _float_selection_weight_lp(np.asarray(p, dtype=np.float64), np.asarray(mass, dtype=np.float64),
                                          rows, tokens, offset)
    builder = LPBuilder(num_w + V, exact)
    builder.add_rows("eq", rows, np.arange(num_w), np.ones(num_w, dtype=np.int64),
                     np.asarray(mass)[first_of_each(rows, num_tuples)])
    t_cols = num_w + np.arange(V)
    rhs = np.zeros(2 * V, dtype=object if exact else np.float64)  # row 2y: t_y <= p(y); 2y + 1: the offset row
    rhs[0::2] = p
    rhs[1::2] = 0 if offset is None else offset
    builder.add_rows("ub", np.concatenate([2 * np.arange(V), 2 * np.arange(V) + 1, 2 * tokens + 1]),
                     np.concatenate([t_cols, t_cols, np.arange(num_w)]),
                     np.concatenate([np.ones(2 * V, dtype=np.int64), -np.ones(num_w, dtype=np.int64)]), rhs)
    return builder.build(np.repeat([0, 1], [num_w, V]))


def _tuples_in_order(rows: np.ndarray, num_tuples: int) -> bool:
    """``rows`` lists the tuples ``0 .. num_tuples - 1`` in order, each at least once."""
    return bool(rows.size and num_tuples and rows[0] == 0 and rows[-1] == num_tuples - 1
                and np.isin(np.diff(rows), (0, 1)).all())


def _float_selection_weight_lp(p, mass, rows, tokens, offset) -> LinearProgram:
    """:func:`selection_weight_lp` in floats for ``rows`` in tuple order, with its CSR
    matrices written directly rather than sorted from entries (the LP of every pair stage
    of truncated IS is built this way; ``tests/otm/test_lp_fast_paths.py`` checks it
    against the builder array by array). Row ``2y`` of ``A_ub`` holds ``t_y``; row
    ``2y + 1`` holds ``-u_i`` for the entries ``i`` of token ``y`` (ascending) and then ``t_y``
    (the last column of the row, ``t`` following every ``u``)."""
    V, num_w = len(p), len(rows)
    eq_start = np.flatnonzero(np.diff(rows, prepend=-1))  # first entry of each tuple
    A_eq = sp.csr_matrix((np.ones(num_w), np.arange(num_w, dtype=np.int32),
                          np.append(eq_start, num_w).astype(np.int32)), shape=(eq_start.size, num_w + V))
    counts = np.bincount(tokens, minlength=V)
    lengths = np.ones(2 * V, dtype=np.int64)
    lengths[1::2] += counts
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = np.empty(indptr[-1], dtype=np.int32)
    data = np.ones(indptr[-1])
    t_cols = num_w + np.arange(V)
    indices[indptr[0:-1:2]] = t_cols  # row 2y
    indices[indptr[2::2] - 1] = t_cols  # last of row 2y + 1
    order = np.argsort(tokens, kind="stable")
    grouped = tokens[order]
    slot = indptr[2 * grouped + 1] + np.arange(num_w) - (np.cumsum(counts) - counts)[grouped]
    indices[slot] = order
    data[slot] = -1.0
    A_ub = sp.csr_matrix((data, indices, indptr.astype(np.int32)), shape=(2 * V, num_w + V))
    b_ub = np.zeros(2 * V)
    b_ub[0::2] = p
    b_ub[1::2] = 0.0 if offset is None else offset
    return LinearProgram(c=np.repeat([0.0, 1.0], [num_w, V]), A_eq=A_eq, b_eq=mass[eq_start], A_ub=A_ub, b_ub=b_ub,
                         sense="max")


def first_of_each(rows, num_tuples: int) -> np.ndarray:
    """``[num_tuples]`` the first index ``i`` with ``rows[i] == t``, for each tuple ``t``;
    raises :class:`ShapeMismatchError` unless ``rows`` holds exactly the tuples ``0 .. num_tuples - 1``."""
    tuples, first = np.unique(rows, return_index=True)
    if not np.array_equal(tuples, np.arange(num_tuples)):
        raise ShapeMismatchError(
            f"rows must name each tuple 0 .. {num_tuples - 1} at least once and no other tuple")
    return first


def weights_from_masses(x, mass, rows) -> np.ndarray:
    """The weights ``w_i = u_i / Q(rows[i])`` from the first ``len(mass)`` entries of a
    solution of :func:`selection_weight_lp`.

    In floats each tuple's masses are renormalised by their own sum (the solver meets
    ``sum u = Q(t)`` only to an absolute tolerance, which matters for tiny ``Q(t)``); a
    tuple left with no mass at all gets equal weights, which moves the acceptance by at
    most its ``Q(t)``, below the solver's tolerance.
    """
    u = np.asarray(x)[: len(mass)]
    if np.asarray(mass).dtype == object:
        return np.array([ui / mi for ui, mi in zip(u, mass)], dtype=object)
    u = np.clip(u.astype(np.float64), 0.0, None)
    totals = np.bincount(rows, weights=u)[rows]
    counts = np.bincount(rows)[rows]
    return np.where(totals > 0, u / np.where(totals > 0, totals, 1.0), 1.0 / counts)


@dataclass(frozen=True, eq=False)
class TwoStepLaw:
    """Exact law of "select ``Z``, then speculative-sample ``Z`` against ``p``".

    Attributes:
        output_distribution: ``[V]`` law of the output ``Y`` (equals ``p``).
        acceptance: membership acceptance ``P(Y in S(X))`` (a residual token can also be a
            draft, so this can exceed ``selection_acceptance`` for non-optimal weights).
        selection_acceptance: ``P(Y = Z) = sum_y min(p(y), P_I(y))``, Khisti et al. 2025, eq. (2).
        selection_law: ``[V]`` ``P_I``, the law of ``Z`` (sums to less than 1 when the
            selection may pick no token).
        accept_probs: ``[V]`` ``min(1, p / P_I)`` (0 where ``P_I = 0``).
        residual: ``[V]`` ``(p - P_I)^+`` normalised (all zero when nothing is rejected).
    """

    output_distribution: np.ndarray  # [V]
    acceptance: object
    selection_acceptance: object
    selection_law: np.ndarray  # [V]
    accept_probs: np.ndarray  # [V]
    residual: np.ndarray  # [V]


def two_step_law_from_selection(p, law: DraftLaw, rows, tokens, probs) -> TwoStepLaw:
    """Exact law of the two-step scheme for any selection rule given as triplets.

    ``P(Z = tokens[i] | X = law.tuples[rows[i]]) = probs[i]``; each selected token must
    belong to its tuple, and a tuple's probabilities may sum to less than 1 (the
    remainder selects nothing, which step 2 treats as a rejection). Step 2 uses the true
    law ``P_I`` of ``Z``, so the output is exactly ``p`` for any selection rule.
    """
    p, exact = target_for(p, law)
    Q = law_probs(law, exact)
    rows, tokens, probs = np.asarray(rows, dtype=np.int64), np.asarray(tokens, dtype=np.int64), np.asarray(probs)
    if not (law.tuples[rows] == tokens[:, None]).any(axis=1).all():
        raise InvalidDistributionError("a selected token is not one of its tuple's drafts")
    V = law.vocab_size
    selection_law = np.empty(V, dtype=object if exact else np.float64)
    selection_law[...] = zero(exact)
    np.add.at(selection_law, tokens, Q[rows] * probs)
    accepted_mass = np.array([min(a, b) for a, b in zip(p, selection_law)], dtype=selection_law.dtype)
    accept_probs = np.array(
        [m / s if s > 0 else zero(exact) for m, s in zip(accepted_mass, selection_law)], dtype=selection_law.dtype
    )
    excess = p - accepted_mass
    excess_total = excess.sum()
    residual = excess / excess_total if excess_total > 0 else excess * 0
    # P(reject | x) = 1 - sum_z w(z|x) a(z); the residual then hits S(x) with r(S(x)).
    kept = np.empty(len(Q), dtype=selection_law.dtype)
    kept[...] = zero(exact)
    np.add.at(kept, rows, probs * accept_probs[tokens])
    d_rows, d_tokens = distinct_positions(law)
    residual_in_tuple = np.empty(len(Q), dtype=selection_law.dtype)
    residual_in_tuple[...] = zero(exact)
    np.add.at(residual_in_tuple, d_rows, residual[d_tokens])
    acceptance = (Q * (kept + (1 - kept) * residual_in_tuple)).sum()
    output = accepted_mass + (1 - accepted_mass.sum()) * residual
    return TwoStepLaw(output, acceptance, accepted_mass.sum(), selection_law, accept_probs, residual)


def _check_weights(weights, law: DraftLaw, exact: bool) -> np.ndarray:
    weights = np.asarray(weights)
    if weights.shape != law.tuples.shape:
        raise ShapeMismatchError(f"weights have shape {weights.shape}, expected {law.tuples.shape} (one per draft)")
    if not exact:
        weights = weights.astype(np.float64)
    if (weights < 0).any():
        raise InvalidDistributionError("importance weights must be >= 0")
    sums = weights.sum(axis=1)
    off = (sums != 1) if exact else (np.abs(sums - 1) > SUM_TOLERANCE)
    if off.any():
        raise InvalidDistributionError(
            f"importance weights of tuple {int(np.argmax(off))} sum to {sums[np.argmax(off)]}, not 1"
        )
    return weights


def canonical_two_step_law(p, law: DraftLaw, weights) -> TwoStepLaw:
    """Exact law of the two-step canonical scheme (Khisti et al. 2025, Thm 1 / Fig. 1).

    Args:
        p: ``[V]`` target.
        law: the joint draft law ``Q``.
        weights: ``[n_tuples, k]`` weight of each draft position (Definition 1's per-index
            weights), rows summing to 1; as in ``solve_canonical_lp(...).details["weights"]``.
    """
    p, exact = target_for(p, law)
    weights = _check_weights(weights, law, exact)
    rows, cols = np.nonzero(np.ones(law.tuples.shape, dtype=bool))
    return two_step_law_from_selection(p, law, rows, law.tuples[rows, cols], weights[rows, cols])


def sample_canonical_two_step(p, law: DraftLaw, weights, rng: np.random.Generator, size: int):
    """Seeded sampler of the two-step scheme: returns ``(drafts [size, k], outputs [size])``.

    Draws tuples from ``Q``, a draft position by ``weights``, accepts it with
    ``min(1, p / P_I)`` and otherwise samples the residual; the test suite holds it to
    :func:`canonical_two_step_law` with a chi-square test.
    """
    p, exact = target_for(p, law)
    law_two_step = canonical_two_step_law(p, law, weights)
    weights = _check_weights(weights, law, exact).astype(np.float64)
    probs = law.probs.astype(np.float64)
    index = rng.choice(len(probs), size=size, p=probs / probs.sum())
    cumulative = np.cumsum(weights[index], axis=1)
    position = (rng.random(size)[:, None] * cumulative[:, -1:] >= cumulative).sum(axis=1)
    position = np.minimum(position, law.k - 1)
    selected = law.tuples[index, position]
    accept = rng.random(size) < law_two_step.accept_probs.astype(np.float64)[selected]
    residual = law_two_step.residual.astype(np.float64)
    outputs = selected.copy()
    rejected = np.flatnonzero(~accept)
    if rejected.size and residual.sum() > 0:  # a zero residual means min(1, p / P_I) = 1 up to rounding
        outputs[rejected] = rng.choice(law.vocab_size, size=rejected.size, p=residual / residual.sum())
    return law.tuples[index], outputs
