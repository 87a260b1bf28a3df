"""otm: optimal transport with membership cost for multi-draft speculative decoding.

``p`` is the target distribution, ``q`` the draft distribution (docs/notation.md). The
optimum ``alpha*(p, Q)`` is the largest ``P(Y in S(X))`` a lossless rule can reach with
drafts ``X ~ Q``; :func:`solve_optimum` computes it in every formulation
(:mod:`otm.formulations`) with a certificate, :func:`rule_law` gives every published
rule's exact law (:mod:`otm.rules`, listed once in :data:`otm.rules.RULE_SPECS`).
Exact (Fraction) inputs give exact answers, float inputs floats.

>>> import otm
>>> p, q = [0.1, 0.6, 0.3], [0.5, 0.3, 0.2]          # SpecHub (Sun et al. 2024), Fig. 5
>>> round(otm.optimal_acceptance(p, q, k=2), 6)
0.85
>>> round(float(otm.rule_acceptance("spechub", p, q, k=2)), 6)
1.0
>>> round(float(otm.rule_acceptance("rrs_wor", p, q, k=2)), 6)
0.94
"""
import importlib
import warnings

from .distributions import as_distribution, as_exact_distribution, logits_to_probs, total_variation
from .draft_laws import DraftLaw, draft_law, greedy_law, hub_law, iid_law, independent_law, table_law, without_replacement_law
from .errors import (
    InputFileError,
    InvalidDistributionError,
    InvalidDraftCountError,
    NotApplicableError,
    OTMError,
    ShapeMismatchError,
    SolverError,
    UnknownNameError,
)
from .formulations import min_cut_value, solve_canonical_lp, solve_full_lp, solve_max_flow, solve_simplified_lp
from .optimum import METHODS as OPTIMUM_METHODS
from .optimum import optimal_acceptance, optimal_acceptance_for_law, solve_optimum
from .rules import RULE_SPECS, RULES, RuleLaw, RuleSpec, rule_acceptance, rule_law, rule_output_distribution, rule_spec
from .solution import OTMSolution

__version__ = "0.2.0"

__all__ = [
    # distributions and draft laws
    "as_distribution", "as_exact_distribution", "logits_to_probs", "total_variation",
    "DraftLaw", "draft_law", "iid_law", "without_replacement_law", "independent_law", "hub_law", "greedy_law", "table_law",
    # the optimum
    "OTMSolution", "OPTIMUM_METHODS", "solve_optimum", "optimal_acceptance", "optimal_acceptance_for_law",
    "solve_full_lp", "solve_simplified_lp", "solve_max_flow", "solve_canonical_lp", "min_cut_value",
    # rules
    "RULES", "RULE_SPECS", "RuleSpec", "RuleLaw", "rule_spec", "rule_law", "rule_acceptance", "rule_output_distribution",
    # errors
    "OTMError", "InvalidDistributionError", "ShapeMismatchError", "InvalidDraftCountError", "UnknownNameError",
    "NotApplicableError", "InputFileError", "SolverError",
]

#: Names that ``otm`` exported before the API was curated -> where they live now. They
#: still work (with a DeprecationWarning); import them from their module.
_MOVED = {
    "as_distribution_pair": "otm.distributions",
    "as_draft_distributions": "otm.distributions",
    "check_draft_count": "otm.distributions",
    "SAMPLING_SCHEMES": "otm.draft_laws",
    "reconstruct_coupling": "otm.formulations",
    "prefix_scan": "otm.formulations.prefix_scan",
    "acceptance_is_one": "otm.formulations.khisti_k2",
    "khisti_k2_closed_form": "otm.formulations.khisti_k2",
    "bernoulli_optimum": "otm.formulations.spectr_bounds",
    "spectr_upper_bound": "otm.formulations.spectr_bounds",
    "uniform_optimum": "otm.formulations.spectr_bounds",
    "ENSEMBLE_RULES": "otm.rules",
    "AGREEMENT_TOLERANCE": "otm.tolerances",
    "FEASIBILITY_TOLERANCE": "otm.tolerances",
    "SUM_TOLERANCE": "otm.tolerances",
}


def __getattr__(name: str):
    module = _MOVED.get(name)
    if module is None:
        raise AttributeError(f"module 'otm' has no attribute {name!r}")
    warnings.warn(f"otm.{name} moved: import it from {module}", DeprecationWarning, stacklevel=2)
    return getattr(importlib.import_module(module), name)
