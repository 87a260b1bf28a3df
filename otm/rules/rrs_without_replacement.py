"""Recursive rejection sampling without replacement (RRSw; seed 000 Alg. 1 with the
red lines).

The drafts ``x_1..x_k`` are distinct, drawn successively from ``q`` renormalised over the
tokens not yet drawn (:func:`otm.draft_laws.without_replacement_law`). With ``p_1 = p``
and ``q_1 = q``, at step ``i``:

- accept ``x_i`` with ``min(1, p_i(x_i) / q_i(x_i))``;
- on rejection ``p_{i+1} = norm(max(p_i - q_i, 0))`` (Alg. 1 line 9, with the current
  draft law ``q_i``), then ``q_{i+1} = norm(q_i with x_i set to 0)`` (lines 10-12): the
  law of the next draft given the earlier ones;
- after ``k`` rejections ``Y ~ p_{k+1}``.

Given the drafts so far, ``x_i ~ q_i``, so each step is Leviathan's rule (seed 003
Alg. 1) verifying ``q_i`` against ``p_i`` and the output is ``p`` by induction. The
residuals depend on the ordered path (``q_i`` on the set of earlier drafts, ``p_i`` on
their order), so there is no product formula; the acceptance is computed exactly by
enumerating the ordered draft tuples (``m!/(m-k)!`` of them, ``m`` = support of ``q``),
and :class:`otm.errors.NotApplicableError` is raised above
:data:`otm.rules.enumeration.MAX_RULE_ENUMERATION`.

Membership equals the "a draft was accepted" probability: ``x`` is rejected at step ``i``
only if ``p_i(x) < q_i(x)``, which zeroes ``p_{i+1}(x)`` and every later residual.
"""
from __future__ import annotations

import numpy as np

from ..distributions import check_draft_count
from ..draft_laws import without_replacement_law
from .base import RuleLaw
from .enumeration import (
    accept_probability,
    count_without_replacement,
    enumerated_rule_law,
    normalise,
    residual,
    resolve_method,
    sequential_kernel,
    validate_one_q,
)


def kernel(p: np.ndarray, q: np.ndarray):
    """The rule's kernel; the state is ``(p_i, q_i)``."""

    def step(state, i, x):
        target, draft = state
        without_x = draft.copy()
        without_x[x] = 0
        return accept_probability(target[x], draft[x]), (residual(target, draft), normalise(without_x))

    return sequential_kernel(p, (p, q), step, lambda state: state[0])


def exact_law(p, q, k: int, *, method: str = "auto") -> RuleLaw:
    """Exact law of RRSw with ``k`` drafts without replacement from ``q`` (``[V]``).

    Only ``method="enumeration"`` (or ``"auto"``) exists. ``k`` larger than the number of
    tokens with ``q > 0`` raises :class:`otm.errors.InvalidDraftCountError`.

    >>> law = exact_law([0.1, 0.6, 0.3], [0.5, 0.3, 0.2], 2)
    >>> round(float(law.acceptance), 6)
    0.94
    """
    k = check_draft_count(k)
    p, q = validate_one_q(p, q, "rule 'rrs_wor' draws k distinct drafts from one q ([V] vector)")
    method = resolve_method(method, count_without_replacement(q, k), False, "rrs_wor")
    return enumerated_rule_law(p, without_replacement_law(q, k), kernel(p, q), {"method": method})
