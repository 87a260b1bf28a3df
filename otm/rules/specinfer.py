"""SpecInfer: recursive rejection sampling with a different draft law per draft.

Draft ``i`` is drawn from its own ``q_i``, independently (Khisti et al. 2025, Remark 1; SpecHub (Sun et al. 2024)
Alg. 1 without the red lines, with ``q`` replaced by ``q_i``). With ``p_1 = p``:

- draft ``x_i`` is accepted with probability ``min(1, p_i(x_i) / q_i(x_i))``;
- on rejection ``p_{i+1} = norm(max(p_i - q_i, 0))``;
- after ``k`` rejections ``Y ~ p_{k+1}``.

Each step is Leviathan's single-draft rule (Leviathan et al. 2023, Alg. 1) verifying ``q_i`` against
``p_i``, whose output given it was reached is ``p_i``; so ``Y ~ p`` by induction. Step
``i`` is reached with probability ``prod_{j<i} (1 - alpha_j)``,
``alpha_j = sum min(p_j, q_j)``, which gives the closed form (docs/theory.md)

    P(a draft is accepted) = 1 - prod_i (1 - alpha_i).

Membership equals it: ``x`` is rejected at step ``i`` only if ``p_i(x) < q_i(x)``, so
``p_{i+1}(x) = 0`` and every later residual stays 0 at ``x``: the final residual never
outputs a rejected draft token.
"""
from __future__ import annotations

import numpy as np

from ..draft_laws import independent_law
from ..errors import NotApplicableError
from .base import RuleLaw
from .enumeration import (
    MAX_RULE_ENUMERATION,
    accept_probability,
    count_independent,
    enumerated_rule_law,
    resolve_method,
    residual,
    sequential_kernel,
    validate_draft_list,
)


#: The closed form of recursive rejection costs one pass over the vocabulary per draft;
#: above this many token-steps (``k V``, after the early exits below) it is refused.
MAX_CLOSED_FORM_WORK = 2_000_000_000


def step_acceptances(p: np.ndarray, qs: list[np.ndarray]) -> list:
    """``alpha_i = sum min(p_i, q_i)``, ``p_1 = p``, ``p_{i+1} = norm(max(p_i - q_i, 0))``:
    the probability that step ``i`` accepts, given it is reached.

    Computed one residual at a time (memory O(V) whatever ``k``), with two exact early
    exits: once a step accepts surely (``alpha_i = 1``) the later steps are never reached
    (their ``alpha`` is 0); and when every draft shares one ``q`` and ``p_{i+1} = p_i``
    (a fixed point) every later ``alpha`` equals ``alpha_i``. Otherwise a ``k`` with
    ``k V > MAX_CLOSED_FORM_WORK`` raises :class:`NotApplicableError` after the first step."""
    shared = all(qi is qs[0] for qi in qs)
    k, alphas, current = len(qs), [], p
    for i, qi in enumerate(qs):
        alpha = np.minimum(current, qi).sum()
        alphas.append(alpha)
        if alpha >= 1:
            return alphas + [alpha * 0] * (k - i - 1)
        following = residual(current, qi)
        if shared and np.array_equal(following, current):
            return alphas + [alpha] * (k - i - 1)
        if i == 0 and k * len(p) > MAX_CLOSED_FORM_WORK:
            raise NotApplicableError(
                f"recursive rejection with k={k} drafts needs k passes over the {len(p)} tokens "
                f"({k * len(p):.3g} > MAX_CLOSED_FORM_WORK={MAX_CLOSED_FORM_WORK:.0e}) and the first step is no fixed point; use a smaller k"
            )
        current = following
    return alphas


def closed_form_acceptance(p: np.ndarray, qs: list[np.ndarray]):
    """``1 - prod_i (1 - alpha_i)``; exact for Fraction inputs."""
    rejected = 1
    for alpha in step_acceptances(p, qs):
        rejected = rejected * (1 - alpha)
    return 1 - rejected


def kernel(p: np.ndarray, qs: list[np.ndarray]):
    """The rule's kernel ``K(y | x_1..x_k)`` (see :func:`otm.rules.enumeration.sequential_kernel`)."""

    def step(current, i, x):
        return accept_probability(current[x], qs[i][x]), residual(current, qs[i])

    return sequential_kernel(p, p, step, lambda current: current)


def recursive_law(p, qs, law_builder, n_tuples: int, method: str, rule: str) -> RuleLaw:
    """The law of recursive rejection sampling of ``qs`` against ``p`` (shared by
    ``single``, ``rrs``, ``specinfer`` and the ensemble rules, which differ only in the
    draft law and the validation of their inputs)."""
    method = resolve_method(method, n_tuples, True, rule, len(p))
    alphas = step_acceptances(p, qs)
    details = {"method": method, "step_acceptances": alphas}
    if method == "closed_form":
        rejected = 1
        for alpha in alphas:
            rejected = rejected * (1 - alpha)
        acceptance = 1 - rejected
        draft_law = law_builder() if n_tuples <= MAX_RULE_ENUMERATION else None
        details["draft_accepted"] = acceptance
        return RuleLaw(acceptance, p.copy(), draft_law, details)
    return enumerated_rule_law(p, law_builder(), kernel(p, qs), details)


def exact_law(p, q, k: int, *, method: str = "auto") -> RuleLaw:
    """Exact law of SpecInfer with ``k`` independent drafts, draft ``i`` from ``q_i``.

    Args:
        p: ``[V]`` target.
        q: ``[V]`` (all drafts share it: this is RRS) or ``[k, V]`` per-draft laws.
        k: number of drafts.
        method: ``"auto"``, ``"enumeration"`` (coupling over the independent law) or
            ``"closed_form"`` (``1 - prod (1 - alpha_i)``, output ``p`` by the theorem).

    >>> law = exact_law([0.5, 0.5], [[1.0, 0.0], [0.0, 1.0]], 2)
    >>> float(law.acceptance), law.output_distribution.tolist()
    (1.0, [0.5, 0.5])
    """
    p, qs = validate_draft_list(p, q, k)
    return recursive_law(p, qs, lambda: independent_law(qs), count_independent(qs), method, "specinfer")
