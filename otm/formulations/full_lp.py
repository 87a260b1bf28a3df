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

from ..draft_laws import DraftLaw, check_coupling_size
from ..errors import NotApplicableError
from ..solution import OTMSolution
from ._instance import law_probs, target_for
from ._lp import LPBuilder, lp_solution, solve_lp, zero
from .max_flow import check_flow_size

#: The full LP is refused, before it is built, above this many variables ``pi(x, y)``
#: (docs/benchmarks.md: a million took 4 s, and the time grows faster than the size).
MAX_FULL_LP_VARIABLES = 2**22


def solve_full_lp(p, law: DraftLaw, backend: str = "highs") -> OTMSolution:
    """Optimal acceptance of ``(p, Q)`` by the full transport LP (SpecTr, Sun et al. 2023, eq. 4).

    Variables ``pi(x, y)`` for every tuple ``x`` of ``law`` and every token ``y`` with
    ``p(y) > 0`` (the column constraint forces ``pi(x, y) = 0`` when ``p(y) = 0``, so
    those variables are dropped). The tokens of ``p(y) > 0`` that lie in no tuple share one
    column, of mass their total ``p``: their columns are interchangeable (objective 0 in
    every row, one constraint each), so a plan on the shared column, split in proportion to
    ``p``, is a plan of the same value on theirs, and summing theirs gives one on the shared
    column. With a draft on a few tokens of a large vocabulary this is what keeps the LP
    small: 151,933 columns of no objective left HiGHS degenerate for minutes. Above
    :data:`MAX_FULL_LP_VARIABLES` variables, or a plan ``[n_tuples, V]`` above
    :data:`otm.draft_laws.MAX_COUPLING_ENTRIES` entries, it raises :class:`NotApplicableError`.

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
    check_flow_size(law)  # the max flow certifies the value
    p, exact = target_for(p, law, backend)
    Q = law_probs(law, exact)
    n, V = len(Q), law.vocab_size
    positive = np.array([v > 0 for v in p], dtype=bool)
    in_tuples = np.zeros(V, dtype=bool)
    in_tuples[law.tuples] = True
    targets = np.flatnonzero(positive & in_tuples)  # one column each
    rest = np.flatnonzero(positive & ~in_tuples)  # one shared column
    masses = [p[y] for y in targets] + ([sum(p[rest])] if rest.size else [])
    columns = len(masses)
    if n * columns > MAX_FULL_LP_VARIABLES:
        raise NotApplicableError(
            f"the full LP would have {n:,} tuples x {columns:,} tokens = {n * columns:,} variables, above "
            f"MAX_FULL_LP_VARIABLES={MAX_FULL_LP_VARIABLES:,}; use method='max_flow' or the closed form"
        )
    check_coupling_size(n, V, "; the full LP returns its whole plan: use method='max_flow' or the closed form")
    membership = np.zeros((n, columns), dtype=bool)
    membership[:, : targets.size] = (law.tuples[:, :, None] == targets[None, None, :]).any(axis=1)
    index = np.arange(n * columns).reshape(n, columns)  # variable of (t, column j)
    rows_side = "eq" if sum(masses) >= sum(Q) else "ub"
    cols_side = "ub" if rows_side == "eq" else "eq"
    builder = LPBuilder(index.size, exact)
    for t in range(n):
        builder.add(rows_side, index[t], [1] * columns, Q[t])
    for j, mass in enumerate(masses):
        builder.add(cols_side, index[:, j], [1] * n, mass)
    lp = builder.build(membership.ravel().astype(int))
    result = solve_lp(lp, backend)
    plan = np.empty((n, V), dtype=object if exact else np.float64)
    plan[...] = zero(exact)
    values = result.x.reshape(n, columns)
    if not exact:
        values = np.maximum(values, 0.0)  # solver noise below zero
    plan[:, targets] = values[:, : targets.size]
    if rest.size:
        plan[:, rest] = values[:, -1:] * (p[rest] / masses[-1])[None, :]
    accepted = {
        (int(t), int(targets[j])): plan[t, targets[j]] for t, j in zip(*np.nonzero(membership)) if plan[t, targets[j]] > 0
    }
    return lp_solution(p, law, "full_lp", lp, result, accepted, exact,
                       {"coupling": plan, "backend": result.backend, "relaxed_side": "tokens" if cols_side == "ub" else "tuples"})
