"""What every rule's exact law returns."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..draft_laws import DraftLaw


@dataclass(frozen=True, eq=False)
class RuleLaw:
    """The exact law of one selection rule on one instance.

    Attributes:
        acceptance: ``P(Y in S(X))``, membership acceptance (docs/theory.md).
        output_distribution: ``[V]`` law of the output token ``Y`` (equals ``p`` for a
            lossless rule, the ensemble law for Fu et al.'s rules).
        draft_law: the joint draft law ``Q`` the rule uses (``None`` when it is not
            enumerable, e.g. closed-form paths at large V).
        details: rule-specific extras (``g*`` for k-SEQ, per-draft acceptances, ...).
    """

    acceptance: float
    output_distribution: np.ndarray  # [V]
    draft_law: DraftLaw | None
    details: dict = field(default_factory=dict)
