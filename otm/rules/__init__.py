"""Every selection rule's exact law, and the rule registry.

A rule maps ``k`` drafts ``X ~ Q`` to one output token ``Y``. Each rule module exposes
``exact_law(p, q, k, ...) -> RuleLaw`` (:class:`otm.rules.base.RuleLaw`): the membership
acceptance ``P(Y in S(X))`` (DESIGN.md), the exact law of ``Y``, the joint draft law ``Q``,
and ``details``. The rules of this package always report ``method`` and
``draft_accepted`` (the probability that a draft was accepted; it can be below the
membership acceptance, e.g. for k-SEQ above ``g*``), and enumerated laws also carry
``coupling`` (``[n, V]``, rows in ``draft_law.tuples`` order) and ``accepted_per_token``
(``[V]``, ``P(Y = y, y in S(X))``). The importance-sampling rules document their own
``details``.

Laws are exact: computed by enumerating the draft law and the rule's accept/residual path
(:mod:`otm.rules.enumeration`) on small instances, or from a closed form where one exists
(``method="closed_form"``; ``"auto"`` picks enumeration up to
:data:`otm.rules.enumeration.AUTO_ENUMERATION_LIMIT` draft tuples). Exact Fraction inputs
(numpy object arrays) give exact rational laws.

========================  ==========================================  =====================
name                      rule                                        drafts
========================  ==========================================  =====================
``single``                Leviathan, seed 003 Alg. 1                  k = 1
``rrs``                   recursive rejection sampling, seed 000 A1   k i.i.d. from q
``rrs_wor``               RRS without replacement, seed 000 Alg. 1    k distinct from q
``specinfer``             RRS with draft i from q_i (seed 001 R. 1)   q or [k, V] list
``kseq``                  SpecTr k-SEQ, seed 002 Alg. 2               k i.i.d. from q
``spechub``               SpecHub, seed 000 Alg. 3                    hub law, k = 2
``is_optimal``            importance sampling, LP weights, seed 001   k i.i.d. from q
``is_truncated``          truncated importance sampling, seed 001 §4  k i.i.d. from q
``greedy``                optimal verifier for greedy drafts          top k-1 + 1 sampled
``ensemble_weighted``     Speculative Ensemble, seed 004 eq. (4)      k = 1; output law r
``ensemble_contrastive``  Speculative Ensemble, seed 004 eq. (5)      k = 1; output law r
========================  ==========================================  =====================

Every rule but the two ensembles is lossless (output law ``p``). The ensembles verify
against ``r = E(q, p)`` and output ``r`` (seed 004 §3.2).
"""
from __future__ import annotations

import importlib

import numpy as np

from ..errors import NotApplicableError, UnknownNameError
from .base import RuleLaw

#: name -> (module under otm.rules, function); modules are imported on first use.
_REGISTRY = {
    "single": ("single", "exact_law"),
    "rrs": ("rrs", "exact_law"),
    "rrs_wor": ("rrs_without_replacement", "exact_law"),
    "specinfer": ("specinfer", "exact_law"),
    "kseq": ("kseq", "exact_law"),
    "spechub": ("spechub", "exact_law"),
    "is_optimal": ("importance_sampling", "exact_law"),
    "is_truncated": ("importance_sampling_truncated", "exact_law"),
    "greedy": ("greedy", "exact_law"),
    "ensemble_weighted": ("ensemble", "exact_law_weighted"),
    "ensemble_contrastive": ("ensemble", "exact_law_contrastive"),
}

#: Every rule name accepted by :func:`rule_law`.
RULES = tuple(_REGISTRY)

#: Rules whose output law is not ``p`` (they verify against an ensemble ``r``).
ENSEMBLE_RULES = ("ensemble_weighted", "ensemble_contrastive")


def rule_function(rule: str):
    """The ``exact_law`` function of ``rule``; :class:`UnknownNameError` for an unknown
    name, :class:`NotApplicableError` when the rule's module is not installed."""
    if rule not in _REGISTRY:
        raise UnknownNameError(f"unknown rule {rule!r}; choose one of {', '.join(RULES)}")
    module_name, function = _REGISTRY[rule]
    try:
        module = importlib.import_module(f"{__name__}.{module_name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{module_name}":
            raise
        raise NotApplicableError(f"rule {rule!r} is unavailable: module otm.rules.{module_name} is missing") from None
    return getattr(module, function)


def rule_law(rule: str, p, q, k: int, **params) -> RuleLaw:
    """The exact law of ``rule`` on target ``p`` (``[V]``), draft ``q`` (``[V]``, or
    ``[k, V]`` for ``"specinfer"``) and ``k`` drafts; ``params`` go to the rule
    (``method=``, ``g=`` for ``"kseq"``, ``lam=`` / ``mu=`` for the ensembles, ...).

    >>> law = rule_law("rrs", [0.5, 0.5], [1.0, 0.0], 2)
    >>> float(law.acceptance), law.output_distribution.tolist()
    (0.5, [0.5, 0.5])
    """
    return rule_function(rule)(p, q, k, **params)


def rule_acceptance(rule: str, p, q, k: int, **params):
    """Exact membership acceptance ``P(Y in S(X))`` of ``rule`` (a float; a Fraction for
    exact inputs)."""
    return rule_law(rule, p, q, k, **params).acceptance


def rule_output_distribution(rule: str, p, q, k: int, **params) -> np.ndarray:
    """``[V]`` exact law of the output token ``Y`` (``p`` for a lossless rule, ``r`` for
    the ensemble rules)."""
    return rule_law(rule, p, q, k, **params).output_distribution


__all__ = [
    "ENSEMBLE_RULES",
    "RULES",
    "RuleLaw",
    "rule_acceptance",
    "rule_function",
    "rule_law",
    "rule_output_distribution",
]
