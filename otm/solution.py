"""The result of solving an OTM instance, shared by every formulation."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, eq=False)
class OTMSolution:
    """Optimal acceptance of one OTM instance and what certifies it.

    Attributes:
        acceptance: the optimum ``max_pi P(Y in S(X))`` (float, or Fraction when exact).
        method: the formulation that produced it (``"full_lp"``, ``"max_flow"``, ...).
        accepted: ``{(tuple_index, token): mass}`` - the accepted part of an optimal plan
            ``pi(x, y)`` with ``y in S(x)``, where the formulation produces one
            (``tuple_index`` indexes ``law.tuples``); ``None`` for closed forms.
        certificate: formulation-specific proof of optimality: LP duals, a min cut
            (the token set ``H`` with ``p(H) + 1 - Q(all in H) == acceptance``), ...
        details: anything else worth keeping (solver result, weights, timings).
    """

    acceptance: Any
    method: str
    accepted: dict | None = None
    certificate: dict = field(default_factory=dict)
    details: dict = field(default_factory=dict)

    def __float__(self) -> float:
        return float(self.acceptance)
