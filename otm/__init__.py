"""otm: optimal transport with membership cost for multi-draft speculative decoding.

``p`` is the target distribution, ``q`` the draft distribution (docs/notation.md). The
optimum ``alpha*(p, Q)`` is the largest ``P(Y in S(X))`` a lossless rule can reach with
drafts ``X ~ Q``; :func:`solve_optimum` computes it in every formulation
(:mod:`otm.formulations`) with a certificate, :func:`rule_law` gives every published
rule's exact law (:mod:`otm.rules`, listed once in :data:`otm.rules.registry.RULE_SPECS`).
Exact (Fraction) inputs give exact answers, float inputs floats.

This namespace is the small public face; everything else is imported from its module:
the draft-law constructors from :mod:`otm.draft_laws`, the formulations from
:mod:`otm.formulations`, every error type from :mod:`otm.errors` (all subclasses of
:class:`OTMError`), the tables and toy families from :mod:`otm.tables` and
:mod:`otm.families` (CHANGELOG.md lists where each name that left this namespace lives).

>>> import otm
>>> p, q = [0.1, 0.6, 0.3], [0.5, 0.3, 0.2]          # SpecHub (Sun et al. 2024), Fig. 5
>>> round(otm.optimal_acceptance(p, q, k=2), 6)
0.85
>>> round(float(otm.rule_acceptance("spechub", p, q, k=2)), 6)
1.0
>>> round(float(otm.rule_acceptance("rrs_wor", p, q, k=2)), 6)
0.94
"""
from .distributions import logits_to_probs
from .draft_laws import draft_law
from .errors import OTMError
from .optimum import optimal_acceptance, solve_optimum
from .rules import RULES, RuleLaw, rule_acceptance, rule_law, rule_spec, rule_specs
from .solution import OTMSolution

__version__ = "0.3.0"

__all__ = [
    "logits_to_probs", "draft_law",
    "solve_optimum", "optimal_acceptance", "OTMSolution",
    "RULES", "rule_spec", "rule_specs", "rule_law", "rule_acceptance", "RuleLaw",
    "OTMError",
]
