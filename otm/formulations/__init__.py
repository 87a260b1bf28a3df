"""Formulations of the OTM optimum ``alpha*(p, Q) = max_pi P(Y in S(X))``.

Each takes the target ``p`` and a joint draft law ``Q`` (:class:`otm.draft_laws.DraftLaw`)
and returns an :class:`otm.solution.OTMSolution` with a certificate:

- :func:`solve_full_lp` - the transport LP over ``pi(x, y)`` (SpecTr, Sun et al. 2023, eq. 4), LP duals;
- :func:`solve_simplified_lp` - SpecHub's LP over accepted entries (SpecHub, Sun et al. 2024, Thm 1), LP
  duals, and :func:`reconstruct_coupling` back to a full plan;
- :func:`solve_max_flow` - max flow / min cut (SpecHub, Sun et al. 2024, App. F), the cut's token set;
- :func:`solve_canonical_lp` - the importance-sampling weights (Khisti et al. 2025, Thm 1, 4), LP duals.
"""
from .canonical_lp import (
    TwoStepLaw,
    canonical_two_step_law,
    sample_canonical_two_step,
    selection_weight_lp,
    solve_canonical_lp,
    two_step_law_from_selection,
)
from .full_lp import solve_full_lp
from .max_flow import flow_network, min_cut_value, solve_max_flow
from .simplified_lp import coupling_acceptance, is_valid_coupling, reconstruct_coupling, solve_simplified_lp
from ._lp import verify_lp_certificate

__all__ = [
    "TwoStepLaw",
    "canonical_two_step_law",
    "coupling_acceptance",
    "flow_network",
    "is_valid_coupling",
    "min_cut_value",
    "reconstruct_coupling",
    "sample_canonical_two_step",
    "selection_weight_lp",
    "solve_canonical_lp",
    "solve_full_lp",
    "solve_max_flow",
    "solve_simplified_lp",
    "two_step_law_from_selection",
    "verify_lp_certificate",
]
