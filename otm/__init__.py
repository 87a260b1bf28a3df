"""otm: optimal transport with membership cost for multi-draft speculative decoding.

``p`` is the target distribution, ``q`` the draft distribution (DESIGN.md). The optimum
``alpha*(p, Q)`` is the largest ``P(Y in S(X))`` a lossless rule can reach with drafts
``X ~ Q``; every formulation of it lives in :mod:`otm.formulations`, every published
rule's exact law in :mod:`otm.rules`.

>>> import otm
>>> p, q = [0.1, 0.6, 0.3], [0.5, 0.3, 0.2]          # seed 000 Fig. 5
>>> round(otm.optimal_acceptance(p, q, k=2), 6)
0.85
>>> round(float(otm.rule_acceptance("spechub", p, q, k=2)), 6)
1.0
>>> round(float(otm.rule_acceptance("rrs_wor", p, q, k=2)), 6)
0.94
"""
from .distributions import (
    as_distribution,
    as_distribution_pair,
    as_draft_distributions,
    check_draft_count,
    logits_to_probs,
    total_variation,
)
from .draft_laws import (
    SAMPLING_SCHEMES,
    DraftLaw,
    draft_law,
    greedy_law,
    hub_law,
    iid_law,
    independent_law,
    table_law,
    without_replacement_law,
)
from .errors import (
    InvalidDistributionError,
    InvalidDraftCountError,
    NotApplicableError,
    OTMError,
    ShapeMismatchError,
    SolverError,
    UnknownNameError,
)
from .exact import as_exact_distribution
from .formulations import (
    min_cut_value,
    reconstruct_coupling,
    solve_canonical_lp,
    solve_full_lp,
    solve_max_flow,
    solve_simplified_lp,
)
from .formulations.khisti_k2 import acceptance_is_one, khisti_k2_closed_form
from .formulations.prefix_scan import prefix_scan
from .formulations.spectr_bounds import bernoulli_optimum, spectr_upper_bound, uniform_optimum
from .optimum import METHODS as OPTIMUM_METHODS
from .optimum import optimal_acceptance, optimal_acceptance_for_law, solve_optimum
from .rules import ENSEMBLE_RULES, RULES, RuleLaw, rule_acceptance, rule_law, rule_output_distribution
from .solution import OTMSolution
from .tolerances import AGREEMENT_TOLERANCE, FEASIBILITY_TOLERANCE, SUM_TOLERANCE

__version__ = "0.1.0"
