"""Backend ``"exact"``: a dense two-phase simplex in rational arithmetic (Bland's rule).

Returns exact :class:`fractions.Fraction` primal, duals and objective (``x``, ``dual_eq``,
``dual_ub`` are numpy object arrays). Meant for small LPs (at most
``CAPABILITIES.max_variables`` variables): every pivot costs ``O(rows * columns)`` Fraction
operations. Float data is converted exactly, so the answer is exact for the numbers as given
(transport marginals summing to 1 and 1 + 2**-52 are *infeasible* here).

Algorithm (Dantzig's two-phase method; Bland's smallest-index rule prevents cycling):

1. Standard form ``min c' @ z, M z = r, z >= 0``: ``x_j = lower_j + z_j`` (a finite upper
   bound becomes the row ``z_j + s = upper_j - lower_j``), ``x_j = upper_j - z_j`` when only
   the upper bound is finite, ``x_j = z_j+ - z_j-`` when free; inequality rows get a slack;
   rows with ``r_i < 0`` are negated; ``c' = -c`` for ``max``.
2. Phase 1 minimises the sum of one artificial per row from the basis of artificials;
   a positive optimum means infeasible. Artificials left basic at zero are pivoted out, or
   stay (their row is redundant) and can never become positive.
3. Phase 2 minimises ``c' @ z`` over the non-artificial columns. The artificial columns of
   the tableau hold ``B^-1``, so the duals are ``y = c_B B^-1`` = minus the artificials'
   reduced costs; they are mapped back to the original rows and sense.

The optimum is then checked exactly (:func:`solvers.rational.exact_check`); a failure would
be a bug and raises :class:`~solvers.errors.SolverError`.
"""
from __future__ import annotations

from fractions import Fraction

from solvers.capabilities import BackendCapabilities
from solvers.errors import SolverError
from solvers.problem import LinearProgram, LPResult, LPStatus
from solvers.rational import ExactData, Row, exact_check, exact_data, object_array

CAPABILITIES = BackendCapabilities(
    name="exact",
    has_duals=True,
    exact=True,
    supports_sparse=False,
    max_variables=300,
    description="dense two-phase simplex in fractions.Fraction (Bland's rule); exact optimum and duals",
)

_ZERO = Fraction(0)


class _Tableau:
    """Rows ``[M | I_artificial | r]`` in the current basis, and the reduced-cost row ``z``
    (``z[-1]`` is minus the objective)."""

    def __init__(self, rows: list[Row], num_structural: int):
        m = len(rows)
        self.num_structural = num_structural  # standard-form variables and slacks
        self.rows = [row[:-1] + [Fraction(int(i == k)) for k in range(m)] + [row[-1]] for i, row in enumerate(rows)]
        self.basis = [num_structural + i for i in range(m)]
        self.z: Row = []

    @property
    def rhs_col(self) -> int:
        return len(self.rows[0]) - 1 if self.rows else self.num_structural

    def set_costs(self, costs: Row) -> None:
        """Reduced costs of ``costs`` (one per column, rhs excluded) in the current basis."""
        z = list(costs) + [_ZERO]
        for i, b in enumerate(self.basis):
            if costs[b]:
                z = [zj - costs[b] * tj for zj, tj in zip(z, self.rows[i])]
        self.z = z

    def pivot(self, r: int, col: int) -> None:
        inv = 1 / self.rows[r][col]
        self.rows[r] = [v * inv for v in self.rows[r]]
        pivot_row = self.rows[r]
        for i, row in enumerate(self.rows):
            if i != r and row[col]:
                f = row[col]
                self.rows[i] = [a - f * b for a, b in zip(row, pivot_row)]
        if self.z[col]:
            f = self.z[col]
            self.z = [a - f * b for a, b in zip(self.z, pivot_row)]
        self.basis[r] = col

    def run(self, max_iterations: int) -> LPStatus:
        """Simplex on the structural columns with Bland's rule."""
        rhs = self.rhs_col
        for _ in range(max_iterations):
            entering = next((j for j in range(self.num_structural) if self.z[j] < 0), None)
            if entering is None:
                return LPStatus.OPTIMAL
            ratios = [(row[rhs] / row[entering], self.basis[i], i) for i, row in enumerate(self.rows) if row[entering] > 0]
            if not ratios:
                return LPStatus.UNBOUNDED
            self.pivot(min(ratios)[2], entering)
        return LPStatus.ITERATION_LIMIT


def _standard_form(data: ExactData):
    """Columns ``(original j, +-1)``, offsets with ``x = offset + T z``, and the rows
    ``[coefficients..., slacks..., rhs]`` (eq rows, ub rows, then upper-bound rows)."""
    columns: list[tuple[int, int]] = []
    offset: Row = []
    bound_rows: list[tuple[int, Fraction]] = []
    for j, (lo, hi) in enumerate(zip(data.lower, data.upper)):
        if lo is not None:
            offset.append(lo)
            if hi is not None:
                bound_rows.append((len(columns), hi - lo))
            columns.append((j, 1))
        elif hi is not None:
            offset.append(hi)
            columns.append((j, -1))
        else:
            offset.append(_ZERO)
            columns += [(j, 1), (j, -1)]
    num_slack = len(data.A_ub) + len(bound_rows)
    rows: list[Row] = []

    def structural(row: Row) -> Row:
        return [row[j] * sign for j, sign in columns]

    for row, b in zip(data.A_eq, data.b_eq):
        rows.append(structural(row) + [_ZERO] * num_slack + [b - sum((a * o for a, o in zip(row, offset)), _ZERO)])
    slack = 0
    for row, b in zip(data.A_ub, data.b_ub):
        slacks = [Fraction(int(k == slack)) for k in range(num_slack)]
        rows.append(structural(row) + slacks + [b - sum((a * o for a, o in zip(row, offset)), _ZERO)])
        slack += 1
    for k, width in bound_rows:
        slacks = [Fraction(int(s == slack)) for s in range(num_slack)]
        rows.append([Fraction(int(col == k)) for col in range(len(columns))] + slacks + [width])
        slack += 1
    return columns, offset, num_slack, rows


def solve(lp: LinearProgram, *, max_iterations: int = 100_000) -> LPResult:
    """Solve ``lp`` exactly. ``objective``, ``x``, ``dual_eq``, ``dual_ub`` are Fractions."""
    data = exact_data(lp)
    columns, offset, num_slack, rows = _standard_form(data)
    flips = [-1 if row[-1] < 0 else 1 for row in rows]
    rows = [[-v for v in row] if f < 0 else row for row, f in zip(rows, flips)]
    num_structural = len(columns) + num_slack
    tab = _Tableau(rows, num_structural)
    m = len(rows)
    tab.set_costs([_ZERO] * num_structural + [Fraction(1)] * m)
    status = tab.run(max_iterations)
    if status == LPStatus.ITERATION_LIMIT:
        return LPResult(status, None, None, None, None, "exact", "phase 1 hit max_iterations")
    if tab.z[-1] != 0:
        return LPResult(LPStatus.INFEASIBLE, None, None, None, None, "exact",
                        f"phase 1 optimum {-tab.z[-1]} > 0: no feasible point in exact arithmetic")
    for i in range(m):  # drive zero-level artificials out of the basis where possible
        if tab.basis[i] >= num_structural:
            col = next((j for j in range(num_structural) if tab.rows[i][j] != 0), None)
            if col is not None:
                tab.pivot(i, col)
    sense = -1 if data.maximize else 1
    costs = [sense * data.c[j] * s for j, s in columns] + [_ZERO] * (num_slack + m)
    tab.set_costs(costs)
    status = tab.run(max_iterations)
    if status != LPStatus.OPTIMAL:
        return LPResult(status, None, None, None, None, "exact", f"phase 2: {status.name.lower()}")
    z = [_ZERO] * num_structural
    for i, b in enumerate(tab.basis):
        if b < num_structural:
            z[b] = tab.rows[i][tab.rhs_col]
    x = list(offset)
    for k, (j, s) in enumerate(columns):
        x[j] += s * z[k]
    y = [sense * f * -tab.z[num_structural + i] for i, f in enumerate(flips)]
    y_eq, y_ub = y[: len(data.A_eq)], y[len(data.A_eq): len(data.A_eq) + len(data.A_ub)]
    check = exact_check(data, x, y_eq, y_ub)
    if not check.certified:
        raise SolverError(f"exact simplex produced an uncertified optimum (a bug): {check.reason}")
    return LPResult(LPStatus.OPTIMAL, check.objective, object_array(x), object_array(y_eq), object_array(y_ub), "exact",
                    "exact optimum, certified by exact primal-dual check")
