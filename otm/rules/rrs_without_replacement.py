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

**Exhausted support** (``m`` tokens with ``q > 0``, ``m < k <= V``; our extension, seed
000 leaves it undefined). The draft law draws the support in random order and then the
``k - m`` lowest-index tokens with ``q = 0`` (:func:`otm.draft_laws.without_replacement_law`),
so for ``i > m`` the draft ``x_i`` is deterministic given the past and ``q_i`` (``q`` off
the drawn tokens) has no mass: the ratio ``p_i(x_i) / q_i(x_i)`` is undefined. Such a
draft is verified against its true conditional law, the point mass ``d = delta_{x_i}``:

- accept ``x_i`` with ``min(1, p_i(x_i) / 1) = p_i(x_i)``;
- on rejection ``p_{i+1} = norm(max(p_i - d, 0)) = norm(p_i with x_i set to 0)``;
- after ``k`` rejections ``Y ~ p_{k+1}`` as before.

(At ``i = m`` the ordinary rule already has ``q_m = delta_{x_m}``, so the two agree.)
Proof that ``Y ~ p``. Leviathan's lemma for a draft ``x ~ d`` from any law ``d``: accept
with ``min(1, r(x) / d(x))``, else draw from ``norm(max(r - d, 0))``; the output is ``r``.
For ``d = delta_x`` it reads: ``P(Y = x) = r(x) + (1 - r(x)) * 0 = r(x)`` and, for
``y != x``, ``P(Y = y) = (1 - r(x)) * r(y) / (1 - r(x)) = r(y)`` (when ``r(x) = 1``
the rejection has probability 0). Now induct backwards over the steps, conditioning
on the history ``H_i = (x_1..x_{i-1}`` all rejected``)``: ``p_i`` and ``q_i`` (the
conditional law of ``x_i`` given ``H_i``, a point mass for ``i > m``) are functions of
``H_i``, and ``p_{i+1}`` does not depend on ``x_i`` (it is ``norm(max(p_i - q_i, 0))``).
If the output of steps ``i+1..k+1`` given ``H_{i+1}`` is ``p_{i+1}`` - true for
``i = k``, where it is the final residual draw - then given ``H_i`` step ``i`` is
exactly the lemma with ``r = p_i``, ``d = q_i``, so the output is ``p_i``; at ``i = 1``
it is ``p_1 = p``. This is the argument of the greedy verifier (:mod:`otm.rules.greedy`)
for its deterministic last draft when ``q(R) = 0`` (``q_R`` a point mass). The membership remark above still holds (a rejected point-mass
draft is zeroed); with the support exhausted every tuple holds the same token set
``S = supp(q) + tail``, so the acceptance is ``p(S)``, which is the optimum for this law
(``P(y in S(X))`` is 1 on ``S`` and 0 elsewhere).
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
    one_hot,
    residual,
    resolve_method,
    sequential_kernel,
    validate_one_q,
)


def draft_conditional(not_drawn: np.ndarray, x: int) -> np.ndarray:
    """``[V]``: the law of the current draft ``x`` given the earlier ones: ``not_drawn``
    (``q`` renormalised off the drawn tokens) while it has mass, else the point mass at
    ``x`` (exhausted support: ``x`` is a deterministic draft; module docstring)."""
    return not_drawn if not_drawn.sum() > 0 else one_hot(x, not_drawn)


def kernel(p: np.ndarray, q: np.ndarray):
    """The rule's kernel; the state is ``(p_i, norm(q off x_1..x_{i-1}))``."""

    def step(state, i, x):
        target, not_drawn = state
        draft = draft_conditional(not_drawn, x)
        without_x = not_drawn.copy()
        without_x[x] = 0
        return accept_probability(target[x], draft[x]), (residual(target, draft), normalise(without_x))

    return sequential_kernel(p, (p, q), step, lambda state: state[0])


def exact_law(p, q, k: int, *, method: str = "auto") -> RuleLaw:
    """Exact law of RRSw with ``k`` drafts without replacement from ``q`` (``[V]``).

    Only ``method="enumeration"`` (or ``"auto"``) exists. ``k`` above the number of tokens
    with ``q > 0`` uses the deterministic drafts of the module docstring; ``k > V`` raises
    :class:`otm.errors.InvalidDraftCountError`.

    >>> law = exact_law([0.1, 0.6, 0.3], [0.5, 0.3, 0.2], 2)
    >>> round(float(law.acceptance), 6)
    0.94
    >>> law = exact_law([0.1, 0.6, 0.3], [0.0, 0.0, 1.0], 2)  # drafts (2, 0): acceptance p(0) + p(2)
    >>> round(float(law.acceptance), 6), law.output_distribution.round(6).tolist()
    (0.4, [0.1, 0.6, 0.3])
    """
    k = check_draft_count(k)
    p, q = validate_one_q(p, q, "rule 'rrs_wor' draws k distinct drafts from one q ([V] vector)")
    n_tuples = count_without_replacement(q, k)
    method = resolve_method(method, n_tuples, False, "rrs_wor")
    return enumerated_rule_law(p, without_replacement_law(q, k), kernel(p, q), {"method": method})
