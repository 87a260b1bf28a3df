"""Set-up backend ``"reference"``: the pass up the ranks of the numpy reference
:class:`otm.rules.water_levels.clock_masses.ClockSetMasses` (its tables of ``e^{-q s}``, one rank
at a time in Python), and the groups of ranks by its product of one token at a time
(:func:`otm.rules.water_levels.clock_masses.with_token`). What every other backend is tested
against (tests/decoding/test_optimal_wor_setup.py); never picked on its own.
"""
from __future__ import annotations

import numpy as np

from otm.rules.water_levels.clock_masses import CHECKPOINT, ClockSetMasses, with_token

from .capabilities import SetupCapabilities

CAPABILITIES = SetupCapabilities(
    name="reference",
    devices=("cpu",),
    max_k=None,
    max_threads=None,
    checkpoint=CHECKPOINT,
    all_groups=False,
    automatic=False,
    description="the numpy reference ClockSetMasses, rank by rank (tests)",
)


def available() -> bool:
    """Always (numpy)."""
    return True


def prefix_tables(masses) -> tuple:
    """``(E0, D0, sigma, None)``: the reference's pass on the row of ``masses`` (its ``q`` by rank
    and ``k``, so its quadrature nodes), at the checkpoints of ``masses``."""
    reference = type("Reference", (ClockSetMasses,), {"checkpoint": masses.checkpoint})(masses.q, masses.k)
    return reference._E0, reference._D0, reference.sigma, None


def group_tables(masses, GE: np.ndarray, GD: np.ndarray, first: int, last: int, start: int, nodes: int) -> int:
    """``GE[g], GD[g]`` at the nodes ``[start, nodes)`` for the groups ``first <= g < last``: the
    ranks of each group added one token at a time; returns ``nodes``."""
    s = masses.s[start:nodes]
    for g in range(first, last):
        E, D = np.zeros((s.size, masses.k)), np.zeros((s.size, masses.k))
        E[:, 0] = 1.0
        for q in masses.q[g * masses.group:(g + 1) * masses.group]:
            E, D = with_token(E, D, q, np.exp(-q * s), -np.expm1(-q * s))
        GE[g, start:nodes], GD[g, start:nodes] = E, D
    return nodes


__all__ = ["CAPABILITIES", "available", "group_tables", "prefix_tables"]
