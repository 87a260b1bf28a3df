"""The full OTM linear program over transport plans ``pi(x, y)``.

SpecTr (Sun et al. 2023) eq. (4), SpecHub (Sun et al. 2024) eq. (1), in our letters (p = target):

    maximise    sum_{x, y} pi(x, y) [y in S(x)]
    subject to  sum_y pi(x, y) = Q(x)   for every draft tuple x in the support of Q
                sum_x pi(x, y) = p(y)   for every token y
                pi >= 0.

This is the slow, obvious reference every other formulation is tested against.
"""
from __future__ import annotations

import numpy as np

from ..draft_laws import DraftLaw
from ..solution import OTMSolution
from ._lp import LPBuilder, law_probs, lp_solution, solve_lp, target_for, zero


def solve_full_lp(p, law: DraftLaw, backend: str = "highs") -> OTMSolution:
    """Optimal acceptance of ``(p, Q)`` by the full transport LP (SpecTr, Sun et al. 2023, eq. 4).

    Variables ``pi(x, y)`` for every tuple ``x`` of ``law`` and every token ``y`` with
    ``p(y) > 0`` (the column constraint forces ``pi(x, y) = 0`` when ``p(y) = 0``, so
    those variables are dropped).

    Float robustness: in floating point ``sum p`` and ``sum Q`` differ by a few ulps, and
    with both marginals as equalities the LP is then infeasible (HiGHS reports it so for
    ``sum p = 1 + 2e-16``). The side with the smaller total is therefore kept as
    equalities and the other side relaxed to ``<=``. With equal totals (always the case in
    exact arithmetic) this is the same LP; otherwise it is always feasible (the
    product plan ``Q(x) p(y) / sum p`` satisfies it) and its optimum differs from the exact
    one by at most the total mismatch.

    Args:
        p: ``[V]`` target distribution (float, or Fractions together with an exact law).
        law: the joint draft law ``Q``.
        backend: a :func:`solvers.solve` backend (``"highs"``, ``"exact"``, ...).

    Returns:
        :class:`OTMSolution` with ``accepted = {(tuple_index, token): mass}``, the LP
        duals and gap in ``certificate``, and the full plan (``[n_tuples, V]``) in
        ``details["coupling"]``.

    >>> from otm.draft_laws import iid_law
    >>> round(float(solve_full_lp([0.5, 0.5], iid_law([1.0, 0.0], 1)).acceptance), 9)
    0.5
    """
    p, exact = target_for(p, law, backend)
    Q = law_probs(law, exact)
    n, V = len(Q), law.vocab_size
    targets = np.flatnonzero([v > 0 for v in p])  # columns kept
    membership = np.zeros((n, V), dtype=bool)
    membership[np.arange(n)[:, None], law.tuples] = True
    index = np.arange(n * len(targets)).reshape(n, len(targets))  # variable of (t, targets[j])
    rows_side = "eq" if sum(p) >= sum(Q) else "ub"
    cols_side = "ub" if rows_side == "eq" else "eq"
    builder = LPBuilder(index.size, exact)
    for t in range(n):
        builder.add(rows_side, index[t], [1] * len(targets), Q[t])
    for j, y in enumerate(targets):
        builder.add(cols_side, index[:, j], [1] * n, p[y])
    lp = builder.build(membership[:, targets].ravel().astype(int))
    result = solve_lp(lp, backend)
    plan = np.empty((n, V), dtype=object if exact else np.float64)
    plan[...] = zero(exact)
    values = result.x.reshape(n, len(targets))
    if not exact:
        values = np.maximum(values, 0.0)  # solver noise below zero
    plan[:, targets] = values
    accepted = {
        (int(t), int(y)): plan[t, y] for t, y in zip(*np.nonzero(membership)) if plan[t, y] > 0
    }
    return lp_solution(p, law, "full_lp", lp, result, accepted, exact,
                       {"coupling": plan, "backend": result.backend, "relaxed_side": "tokens" if cols_side == "ub" else "tuples"})
