"""Rule ``"optimal_wor"``: ``k >= 2`` drafts without replacement, the optimum by water levels.

The ``k`` drafts are distinct, drawn successively from ``q`` (SpecHub: Sun et al. 2024,
Alg. 1); notation ``p`` target, ``q`` draft. ``optimal_pair_wor``, the name of its two-draft
case, resolves to it. The rule: docs/optimal-verifier.md#water-levels-for-drafts-without-replacement;
the engine that builds a row's levels: :mod:`otm.rules.water_levels`.

**The rule.** Support tokens get ranks by ``p/q`` ascending; ``m`` is the optimal cut of the
prefix scan, with a level ``L(m) = 0`` on it and levels ``L(j)`` in ``[0, 1]`` on the other
cuts. With one uniform ``u``, go down from the highest member ``s_1`` through the members
``s_1 > s_2 > ...`` while ``u < min_{s_i < j <= s_1} L(j)``, and select the last member
reached: ``s_i`` is selected with probability ``M_i - M_{i+1}``, ``M_1 = 1``,
``M_i = min_{s_i < j <= s_1} L(j)``, ``M_{r+1} = 0`` (:func:`member_chances`). For two drafts
the pair ``{b, c}`` of ranks ``b < c`` on one side of the cut selects ``b`` with probability
``min_{b < j <= c} L(j)``. The selected draft ``Z`` is then checked against the selection law
``x`` (accept with ``min(1, p(Z) / x(Z))``, else draw from ``norm(max(p - x, 0))``: the
canonical decomposition, Khisti et al. 2025).

**What is proved** (docs/optimal-verifier-proofs.md#the-minimal-flux-attains-the-optimum,
#water-levels-carry-the-minimal-flux, #water-levels-are-probabilities). The levels carry the
minimal flux, so ``sum min(p, x) = alpha*(p, Q_wor)``, and lie in ``[0, 1]``: the rule is
lossless and attains the optimum of its draft law. Exact inputs give an exact law; float inputs
are certified (:func:`otm.rules.water_levels.parameters.wor_parameters`).

**Cost.** :func:`otm.rules.water_levels.parameters.estimated_seconds`: the set masses come from
every ordered draft tuple, or for float rows with too many tuples from the clock integral,
whose tables bound the support it builds; a row it cannot build is refused with a one-line
:class:`otm.errors.NotApplicableError` naming top-p and ``optimal_latent``.
"""
from __future__ import annotations

from ..distributions import check_draft_count
from ..draft_laws import without_replacement_law
from ..errors import InvalidDraftCountError
from .base import RuleLaw
from .enumeration import canonical_output_law, count_without_replacement, enumerated_rule_law, is_exact, resolve_method, validate_one_q
from .water_levels import PairParameters, wor_parameters


def member_chances(levels: list, ranks: list) -> list:
    """``P(select s_i)`` for members of ranks ``ranks`` (distinct, any order) under
    ``levels`` ``[n + 1]``: ``M_i - M_{i+1}`` with ``M_i`` the least level between ``s_i`` and
    the highest member (module docstring), in the order of ``ranks``."""
    descending = sorted(range(len(ranks)), key=lambda i: -ranks[i])
    one = levels[0] * 0 + 1
    reach = [one]  # M_1, M_2, ...
    for upper, lower in zip(descending, descending[1:]):
        reach.append(min([reach[-1]] + levels[ranks[lower] + 1:ranks[upper] + 1]))
    reach.append(one * 0)
    chances = [None] * len(ranks)
    for position, i in enumerate(descending):
        chances[i] = reach[position] - reach[position + 1]
    return chances


def selection_law(params: PairParameters, draft_tuple) -> list:  # [k]
    """``P(Z = x_j | x)`` for the positions of the drafted tuple (distinct tokens)."""
    ranks = [int(params.rank[int(t)]) for t in draft_tuple]
    if len(params.order) <= len(draft_tuple) or min(ranks) < 0:  # every draw drafts the same set: select by x
        return [params.selection[int(t)] for t in draft_tuple]
    return member_chances(params.levels, ranks)


def conditional_output_law(params: PairParameters, draft_tuple):
    """``(K(. | x) [V], P(a draft is accepted | x))``: select by :func:`selection_law`, accept
    ``Z`` with ``min(1, p(Z) / x(Z))``, else draw from ``norm(max(p - x, 0))``."""
    return canonical_output_law(params.target, params.selection, draft_tuple, selection_law(params, draft_tuple))


def exact_law(p, q, k: int, *, method: str = "auto") -> RuleLaw:
    """Exact law of the rule for ``k >= 2`` drafts without replacement.

    ``method="closed_form"``: the acceptance ``sum min(p, x)`` (``alpha*``) and the output
    law ``p`` from :func:`otm.rules.water_levels.parameters.wor_parameters`; ``"enumeration"``:
    the coupling over every ordered tuple (also ``accepted_per_token``, ``coupling``). ``details``: ``method``, ``cut``, ``selection``
    (``x``), ``levels``, ``draft_accepted``, ``arithmetic``.

    >>> from otm.formulations.prefix_scan import prefix_scan
    >>> p, q = [0.4, 0.3, 0.2, 0.1, 0.0], [0.1, 0.1, 0.2, 0.3, 0.3]
    >>> law = exact_law(p, q, 3, method="enumeration")
    >>> round(float(law.acceptance), 12), round(float(prefix_scan(p, q, 3, "without_replacement").value), 12)
    (0.978571428571, 0.978571428571)
    """
    if check_draft_count(k) < 2:
        raise InvalidDraftCountError(f"rule 'optimal_wor' is defined for k >= 2, got k={k}")
    p, q = validate_one_q(p, q, "rule 'optimal_wor' draws every draft from one q ([V] vector)")
    params = wor_parameters(p, q, k)
    method = resolve_method(method, count_without_replacement(q, k), True, "optimal_wor", len(p))
    details = {"method": method, "cut": params.cut, "selection": params.selection, "levels": params.levels,
               "draft_accepted": params.acceptance, "arithmetic": params.arithmetic}
    if method == "closed_form":
        return RuleLaw(params.acceptance, p.copy(), None, details)
    result = enumerated_rule_law(p, without_replacement_law(q, k), lambda draft: conditional_output_law(params, draft), details)
    if is_exact(p) and result.details["draft_accepted"] != params.acceptance:
        raise AssertionError("the enumerated acceptance differs from sum min(p, x)")
    return result


__all__ = ["conditional_output_law", "exact_law", "member_chances", "selection_law"]
