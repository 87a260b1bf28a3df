"""The result of solving an OTM instance: one type, the same fields for every formulation.

Exactness policy (every public function of :mod:`otm`): exact inputs (Fraction object
arrays) give exact answers (Fractions); float inputs give floats. ``exact`` says which.

Certificates: every formulation returns the value together with what proves it.

- ``cut``: a token set ``H`` whose cut value ``p(H) + 1 - Q(all drafts in H)`` is an
  upper bound on ``alpha*`` (min-cut formula, docs/theory.md), evaluated on the instance
  as ``cut_value``; the prefix scan and the max flow return the minimising ``H``, the LPs
  the cut of the prefix scan / max flow on the same law.
- ``verified_gap = cut_value - value``: how far the reported value can be from the optimum.
  ``0`` exactly for exact inputs; for floats it is the measured distance between a
  feasible plan's value and a cut, never a solver's own claim.
- ``plan`` and ``duals`` where the formulation produces them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

#: ``status`` of a solution whose value is certified within ``verified_gap``.
OPTIMAL = "optimal"

Number = float | Fraction


@dataclass(frozen=True, eq=False)
class OTMSolution:
    """Optimal acceptance of one OTM instance and what certifies it.

    Attributes:
        value: the optimum ``alpha*(p, Q) = max P(Y in S(X))`` (float, or Fraction when exact).
        method: the formulation that produced it (``"prefix_scan"``, ``"max_flow"``,
            ``"full_lp"``, ``"simplified_lp"``, ``"canonical_lp"``, ``"per_token_bound"``).
        exact: ``True`` when ``value`` is an exact rational.
        status: ``"optimal"``: ``value`` is the optimum up to ``verified_gap``.
        cut: ``[|H|]`` int64 token ids of a cut attaining (or bounding) the value; ``None``
            when no cut is known (the per-token bound).
        cut_value: ``p(H) + 1 - Q(all drafts in H)`` for ``cut``, an upper bound on ``alpha*``.
        all_in: ``Q(all drafts in H)`` for ``cut``.
        verified_gap: ``cut_value - value`` (``>= 0``; 0 for exact inputs and exact methods).
        plan: ``{(tuple_index, token): mass}``, the accepted part of an optimal coupling
            ``pi(x, y)``, ``y in S(x)`` (``tuple_index`` indexes ``law.tuples``), where the
            formulation produces one; ``None`` otherwise.
        duals: LP duals and objectives (``dual_eq``, ``dual_ub``, ``primal_objective``,
            ``dual_objective``) for the LP formulations; ``None`` otherwise.
        details: method-specific extras (the scan order, solver output, weights, timings).
    """

    value: Number
    method: str
    exact: bool = False
    status: str = OPTIMAL
    cut: np.ndarray | None = None
    cut_value: Number | None = None
    all_in: Number | None = None
    verified_gap: Number | None = None
    plan: dict | None = None
    duals: dict | None = None
    details: dict = field(default_factory=dict)

    def __float__(self) -> float:
        return float(self.value)

    @property
    def acceptance(self) -> Number:
        """The optimum (the name before ``value``; kept as an alias)."""
        return self.value

    @property
    def accepted(self) -> dict | None:
        """The accepted part of the plan (the name before ``plan``; kept as an alias)."""
        return self.plan


def cut_solution(value, method: str, cut, cut_value, all_in, exact: bool, **extra) -> OTMSolution:
    """An :class:`OTMSolution` whose certificate is a cut: ``verified_gap = cut_value - value``
    (clipped at 0 for floats, where both sides carry rounding)."""
    gap = cut_value - value
    if not exact:
        value, cut_value, all_in, gap = float(value), float(cut_value), float(all_in), max(float(gap), 0.0)
    return OTMSolution(value=value, method=method, exact=exact, cut=None if cut is None else np.asarray(cut, dtype=np.int64),
                       cut_value=cut_value, all_in=all_in, verified_gap=gap, **extra)


__all__ = ["OPTIMAL", "OTMSolution", "cut_solution"]
