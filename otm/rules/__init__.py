"""Every selection rule's exact law.

A rule maps ``k`` drafts ``X ~ Q`` to one output token ``Y``. Each rule module exposes
``exact_law(p, q, k, ...) -> RuleLaw`` (:class:`otm.rules.base.RuleLaw`): the membership
acceptance ``P(Y in S(X))``, the exact law of ``Y``, the joint draft law ``Q`` and
``details``. Every rule reports ``details["method"]`` and ``details["draft_accepted"]``
(the probability that a draft was accepted; it can be below the membership acceptance,
e.g. for k-SEQ); enumerated laws also carry ``coupling`` (``[n, V]``, rows in
``draft_law.tuples`` order) and ``accepted_per_token`` (``[V]``, ``P(Y = y, y in S(X))``).

Laws are exact: by enumerating the draft law and the rule's accept/residual path
(:mod:`otm.rules.enumeration`) on small instances, or from a closed form where one exists
(``method="closed_form"``; ``"auto"`` enumerates up to
:data:`otm.rules.enumeration.AUTO_ENUMERATION_LIMIT` draft tuples whose ``[n, V]`` coupling
has at most :data:`otm.rules.enumeration.AUTO_ENUMERATION_ENTRIES` entries; a coupling above
:data:`otm.draft_laws.MAX_COUPLING_ENTRIES` is refused). Exact Fraction inputs
give exact rational laws; float inputs give floats.

The rules, their papers, draft laws and closed forms are listed once, in
:data:`otm.rules.registry.RULE_SPECS` (docs/theory.md has the table).
"""
from __future__ import annotations

import functools
import importlib
import inspect
from fractions import Fraction

import numpy as np

from ..distributions import as_float64, normalisation_note
from ..errors import NotApplicableError, UnknownNameError
from .base import RuleLaw
from .enumeration import support_size
from .registry import ALIASES, RULE_SPECS, RULES, RuleSpec, estimated_seconds, rule_spec, rule_specs

#: Rules whose output law is not ``p`` (they verify against an ensemble ``r``).
ENSEMBLE_RULES = tuple(spec.name for spec in rule_specs(lossless=False))


def rule_function(rule: str):
    """The exact-law function of ``rule`` (:class:`otm.errors.UnknownNameError` for an
    unknown name)."""
    spec = rule_spec(rule)
    return getattr(importlib.import_module(f"{__name__}.{spec.module}"), spec.law_function)


def rule_law(rule: str, p, q, k: int, **params) -> RuleLaw:
    """The exact law of ``rule`` on target ``p`` (``[V]``), draft ``q`` (``[V]``, or
    ``[k, V]`` for ``"specinfer"``) and ``k`` drafts; ``params`` go to the rule
    (``method=``, ``g=`` for ``"kseq"``, ``lam=`` / ``mu=`` for the ensembles, ...; an
    unknown one raises :class:`UnknownNameError` listing the accepted ones). For float
    inputs ``details["inputs"]`` says how each input was renormalised
    (:func:`otm.distributions.normalisation_note`).

    >>> law = rule_law("rrs", [0.5, 0.5], [1.0, 0.0], 2)
    >>> float(law.acceptance), law.output_distribution.tolist()
    (0.5, [0.5, 0.5])
    """
    function = rule_function(rule)
    accepted = _parameters(function)
    unknown = sorted(set(params) - accepted)
    if unknown:
        raise UnknownNameError(f"rule {rule!r} has no parameter {', '.join(map(repr, unknown))}; it accepts "
                               f"{', '.join(sorted(accepted)) or 'no parameters'}")
    _refuse_if_too_slow(rule_spec(rule), q, k, params.get("method", "auto"))
    law = function(p, q, k, **params)
    if not isinstance(law.acceptance, Fraction):
        law.details["inputs"] = {"p": normalisation_note(p, "p (target)")}
        if np.ndim(q) == 1:
            law.details["inputs"]["q"] = normalisation_note(q, "q (draft)")
    return law


#: A rule's exact law is refused, before any work, when its estimated cost is larger.
MAX_RULE_SECONDS = 600.0


def _refuse_if_too_slow(spec: RuleSpec, q, k, method: str) -> None:
    """:class:`NotApplicableError` in milliseconds when the law would enumerate more tuples
    than :data:`MAX_RULE_SECONDS` allow (:func:`estimated_seconds` on the support of ``q``)."""
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1 or not spec.allows(int(k)):
        return  # the rule's own validation says what is wrong with k
    if method != "enumeration" and spec.has_closed_form(int(k)):
        return
    try:
        support = draft_support(q)
    except (TypeError, ValueError):
        return  # malformed q: the rule's validation raises the right error
    cost = estimated_seconds(spec, support, int(k))
    if cost > MAX_RULE_SECONDS:
        raise NotApplicableError(
            f"rule {spec.name!r} would need its draft law enumerated at k={k} over {support} draft tokens "
            f"(about {cost:.3g} s, above MAX_RULE_SECONDS={MAX_RULE_SECONDS:g}); it has no closed form there: "
            "use a smaller vocabulary (e.g. top-k/top-p), a smaller k, or a rule with a closed form"
        )


def draft_support(q) -> int:
    """The number of tokens a rule's draft tuples range over: those of ``q > 0`` (``[V]``),
    or the vocabulary for per-draft laws (``[k, V]``); at least 1. What
    :func:`estimated_seconds` takes as the vocabulary size, since an exact law enumerates
    the tuples of the draft's support."""
    values = as_float64(q, "q (draft)")  # torch tensors too: numpy has no bfloat16
    return max(support_size(values) if values.ndim == 1 else max(values.shape), 1)


@functools.lru_cache(maxsize=None)
def _parameters(function) -> frozenset:
    """The keyword parameters of an exact-law function (after ``p, q, k``)."""
    names = list(inspect.signature(function).parameters)
    return frozenset(names[3:])


def rule_acceptance(rule: str, p, q, k: int, **params):
    """Exact membership acceptance ``P(Y in S(X))`` of ``rule``: a Fraction for exact
    inputs, a float otherwise."""
    return rule_law(rule, p, q, k, **params).acceptance


def rule_output_distribution(rule: str, p, q, k: int, **params) -> np.ndarray:
    """``[V]`` exact law of the output token ``Y`` (``p`` for a lossless rule, ``r`` for
    the ensemble rules)."""
    return rule_law(rule, p, q, k, **params).output_distribution


__all__ = [
    "ALIASES",
    "ENSEMBLE_RULES",
    "RULES",
    "RULE_SPECS",
    "RuleLaw",
    "RuleSpec",
    "draft_support",
    "estimated_seconds",
    "rule_acceptance",
    "rule_function",
    "rule_law",
    "rule_output_distribution",
    "rule_spec",
    "rule_specs",
]
