"""Slow plain-Python references of the batched verifiers, one function per rule.

Each ``<rule>(p, draft_probs, drafts, uniforms) -> (token, accepted_index)`` handles ONE
row with Python floats and loops, written straight from the paper, and consumes the
row's uniforms in the order the batched ``verify`` documents (see
:mod:`decoding.verifiers.base`), so on the same uniforms both give the same output
(up to float ties of probability ~1e-16). Arguments: ``p`` ``[V]`` target, ``draft_probs``
``[k][V]`` (row ``i`` is ``q_i``), ``drafts`` ``[k]`` token ids, ``uniforms`` the row's
``uniforms_per_row(k)`` numbers in ``[0, 1)``.

:func:`run_reference` applies one of them to every row of a batch.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from otm.errors import UnknownNameError
from otm.formulations.prefix_scan import ratio_order
from otm.rules import rule_law
from otm.rules.registry import rule_specs
from otm.rules.importance_sampling_truncated import DEFAULT_ALPHABET_SIZE, DEFAULT_TRUNCATION
from otm.rules.kseq import optimal_division_factor
from otm.rules import optimal_wor as wor_rule, water_levels
from otm.rules.optimal_wor import selection_law
from otm.rules.water_levels.pair import pair_parameters

from .optimal.reference import optimal, optimal_latent


def _inverse_cdf(weights: list[float], u: float) -> int:
    """The token ``t`` with ``cdf[t-1] <= u * total < cdf[t]`` (a rounding overshoot goes
    to the first token at which the CDF reaches its total, a token of positive weight)."""
    cdf, total = [], 0.0
    for w in weights:
        total += w
        cdf.append(total)
    target = u * total
    for t, c in enumerate(cdf):
        if c > target:
            return t
    return next(t for t, c in enumerate(cdf) if c >= total)


def _norm(values: list[float]) -> list[float]:
    total = sum(values)
    return [v / total for v in values] if total > 0 else list(values)


def _positive_part(values: list[float]) -> list[float]:
    return [max(v, 0.0) for v in values]


def _recursive(p, draft_probs, drafts, uniforms, without_replacement: bool):
    """SpecHub (Sun et al. 2024), Alg. 1 (with its red lines when ``without_replacement``)."""
    k = len(drafts)
    target = _norm(list(p))
    draft = list(draft_probs[0])
    for i, x in enumerate(drafts):
        if not without_replacement:
            draft = list(draft_probs[i])
        elif sum(draft) <= 0:  # support of q exhausted: x is a fixed draft, its law the point mass
            draft = [1.0 if t == x else 0.0 for t in range(len(draft))]
        if uniforms[i] * draft[x] < target[x]:
            return x, i
        nxt = _norm(_positive_part([a - b for a, b in zip(target, draft)]))
        if sum(nxt) > 0:
            target = nxt
        if without_replacement:
            draft[x] = 0.0
            draft = _norm(draft)
    return _inverse_cdf(target, uniforms[k]), -1


def single(p, draft_probs, drafts, uniforms):
    """Leviathan et al. (Leviathan et al. 2023, Alg. 1), k = 1."""
    return _recursive(p, draft_probs, drafts, uniforms, without_replacement=False)


def rrs(p, draft_probs, drafts, uniforms):
    """RRS (SpecHub, Sun et al. 2024, Alg. 1), draft ``i`` checked against ``draft_probs[i]``."""
    return _recursive(p, draft_probs, drafts, uniforms, without_replacement=False)


def specinfer(p, draft_probs, drafts, uniforms):
    """SpecInfer: RRS with draft ``i`` from its own ``q_i``."""
    return _recursive(p, draft_probs, drafts, uniforms, without_replacement=False)


def rrs_wor(p, draft_probs, drafts, uniforms):
    """RRSw (SpecHub, Sun et al. 2024, Alg. 1 with the red lines). A draft made after the support of ``q``
    is exhausted is checked against the point mass at itself: accepted with probability
    ``p_i(x)``, else ``x`` is removed from the residual (:mod:`otm.rules.rrs_wor`)."""
    return _recursive(p, draft_probs, drafts, uniforms, without_replacement=True)


def kseq(p, draft_probs, drafts, uniforms):
    """k-SEQ (SpecTr, Sun et al. 2023, Alg. 2) with ``g*`` from :func:`otm.rules.kseq.optimal_division_factor`."""
    k = len(drafts)
    q = list(draft_probs[0])
    g = float(optimal_division_factor(np.asarray(p, dtype=float), np.asarray(q, dtype=float), k))
    for i, x in enumerate(drafts):
        if uniforms[i] * g * q[x] < p[x]:
            return x, i
    scaled = [min(a, b / g) for a, b in zip(q, p)]
    beta = sum(scaled)
    p_acc = 1 - (1 - beta) ** k
    factor = p_acc / beta if beta > 0 else float(k)
    residual = _norm(_positive_part([b - factor * s for b, s in zip(p, scaled)]))
    if sum(residual) <= 0:
        residual = list(p)
    return _inverse_cdf(residual, uniforms[k]), -1


def spechub(p, draft_probs, drafts, uniforms):
    """SpecHub (Sun et al. 2024, Alg. 3 and Alg. 2 GetResidual), k = 2."""
    q = list(draft_probs[0])
    V = len(q)
    a = max(range(V), key=lambda t: (q[t], -t))
    x1, x2 = drafts
    others = [t for t in range(V) if t != a]
    rest = sum(q[t] for t in others)
    second = [q[a] * q[t] / rest if (t != a and rest > 0) else 0.0 for t in range(V)]  # Q(a, x)
    p1 = [p[t] if t == a else max(p[t] - q[t], 0.0) for t in range(V)]  # GetResidual after (x, a)
    left_first = sum(max(q[t] - p[t], 0.0) for t in others)  # sum Q'(x, a)
    left_second = sum(max(second[t] - p1[t], 0.0) for t in others) + (1.0 if rest <= 0 else 0.0)  # sum Q'(a, x)
    if x1 != a:  # pair (x, a)
        if uniforms[0] * q[x1] < p[x1]:
            return x1, 0
    elif rest > 0:  # pair (a, x)
        if uniforms[0] * second[x2] < p1[x2]:
            return x2, 1
    hub_after = max(p[a] - left_second, 0.0)
    if x1 == a:
        if uniforms[1] * left_second < p[a]:
            return a, 0
    elif uniforms[1] * left_first < hub_after:
        return a, 1
    residual = [max(hub_after - left_first, 0.0) if t == a else max(p1[t] - second[t], 0.0) for t in range(V)]
    residual = _norm(residual)
    if sum(residual) <= 0:
        residual = list(p)
    return _inverse_cdf(residual, uniforms[2]), -1


def greedy(p, draft_probs, drafts, uniforms):
    """The greedy-draft verifier of :mod:`otm.rules.greedy`."""
    q = list(draft_probs[0])
    fixed, z = list(drafts[:-1]), drafts[-1]
    rest = [0.0 if t in fixed else q[t] for t in range(len(q))]
    q_rest = _norm(rest) if sum(rest) > 0 else [1.0 if t == z else 0.0 for t in range(len(q))]
    if uniforms[0] * q_rest[z] < p[z]:
        return z, len(drafts) - 1
    residual = _norm([p[t] if t in fixed else max(p[t] - q_rest[t], 0.0) for t in range(len(q))])
    if sum(residual) <= 0:
        residual = list(p)
    y = _inverse_cdf(residual, uniforms[1])
    return y, (fixed.index(y) if y in fixed else -1)


def optimal_pair_wor(p, draft_probs, drafts, uniforms):
    """The water-level rule for two drafts without replacement
    (:mod:`decoding.verifiers.optimal.pair`), with ``x`` and the levels from the exact
    law's construction (:func:`otm.rules.water_levels.pair.pair_parameters`, ``O(V * depth)``)."""
    target, draft = _norm([float(v) for v in p]), _norm([float(v) for v in draft_probs[0]])
    params = pair_parameters(np.array(target), np.array(draft))
    drafts = [int(t) for t in drafts]
    ranks = [int(params.rank[t]) for t in drafts]
    if min(ranks) < 0:  # exhausted support: the q = 0 draft, selected with probability p of it
        fixed = ranks.index(-1)
        index = fixed if uniforms[0] < target[drafts[fixed]] else 1 - fixed
    else:  # the member of lower rank, selected with probability Y
        lower = ranks.index(min(ranks))
        index = lower if uniforms[0] < float(selection_law(params, drafts)[lower]) else 1 - lower
    return _checked_draw(target, draft, [float(v) for v in params.selection], drafts, index, uniforms)


def _checked_draw(target, draft, x, drafts, index, uniforms):
    """The water-level rules' step after the selection: draft ``index`` accepted when
    ``uniforms[1] x(Z) < p(Z)``, else the residual drawn by rank (``q = 0`` last) with ``uniforms[2]``."""
    token = drafts[index]
    if uniforms[1] * x[token] < target[token]:
        return token, index
    order = ratio_order(np.array(target), np.array(draft))
    residual = _positive_part([target[t] - x[t] for t in order])
    return int(order[_inverse_cdf(residual if sum(residual) > 0 else [target[t] for t in order], uniforms[2])]), -1


def optimal_wor(p, draft_probs, drafts, uniforms):
    """The water-level rule for ``k`` drafts without replacement
    (:mod:`decoding.verifiers.optimal.wor`): :func:`optimal_pair_wor` for two drafts; for more,
    ``x``, the levels and each member's chance from the exact rule
    (:func:`otm.rules.water_levels.parameters.wor_parameters`, :func:`otm.rules.optimal_wor.selection_law`),
    the member drawn by inverse CDF over the members by rank ascending (the lowest member owns
    ``[0, M_r)``, the next ``[M_r, M_{r-1})``, ...: the walk down from the highest)."""
    if len(drafts) == 2:
        return optimal_pair_wor(p, draft_probs, drafts, uniforms)
    target, draft = _norm([float(v) for v in p]), _norm([float(v) for v in draft_probs[0]])
    params = water_levels.wor_parameters(np.array(target), np.array(draft), len(drafts))
    drafts = [int(t) for t in drafts]
    chances = [float(c) for c in wor_rule.selection_law(params, drafts)]
    if len(params.order) <= len(drafts):  # the same set every time: a position by x
        index = _inverse_cdf(chances, uniforms[0])
    else:
        ascending = sorted(range(len(drafts)), key=lambda i: params.rank[drafts[i]])
        index = ascending[_inverse_cdf([chances[i] for i in ascending], uniforms[0])]
    return _checked_draw(target, draft, [float(v) for v in params.selection], drafts, index, uniforms)


@lru_cache(maxsize=64)
def _truncated_law(p: tuple, q: tuple, k: int, s: int, alphabet_size):
    return rule_law("importance_sampling_truncated", np.array(p), np.array(q), k, s=s, alphabet_size=alphabet_size)


def importance_sampling_truncated(p, draft_probs, drafts, uniforms, s: int = DEFAULT_TRUNCATION, alphabet_size=DEFAULT_ALPHABET_SIZE):
    """Truncated IS (Khisti et al. 2025, §4, Remark 3), with the stage rules and the enumerated
    selection law ``P_I`` taken from the exact law
    (:func:`otm.rules.importance_sampling_truncated.exact_law`)."""
    k = len(drafts)
    law = _truncated_law(tuple(map(float, p)), tuple(map(float, draft_probs[0])), k, s, alphabet_size)
    inside = law.details["alphabet"]
    stages = [stage["select_first"] for stage in law.details["stages"]]
    stage_index = {int(token): i for i, token in enumerate(law.details["stages"][0]["tokens"])} if stages else {}
    selection = law.details["selection_law"]
    kept = sum(p[t] for t in range(len(p)) if inside[t])
    p_inner = [p[t] / kept if inside[t] else 0.0 for t in range(len(p))]
    held, position = None, -1
    for m, x in enumerate(drafts):
        if not inside[x]:
            continue
        if held is None or not (held == x or uniforms[m - 1] < stages[m - 1][stage_index[held]][stage_index[x]]):
            held, position = x, m
    accepted = False
    if held is not None:
        mass = selection[held]
        accepted = mass > 0 and uniforms[k - 1] < min(p_inner[held], mass) / mass
    if accepted:
        inner = held
    else:
        excess = [b - min(b, float(s_)) for b, s_ in zip(p_inner, selection)]
        residual = _norm(excess) if sum(excess) > 0 else p_inner
        inner = _inverse_cdf(residual, uniforms[k])
    outside = [0.0 if inside[t] else p[t] for t in range(len(p))]
    if uniforms[k + 1] < kept or sum(outside) <= 0:
        return inner, (position if accepted else -1)
    return _inverse_cdf(outside, uniforms[k + 2]), -1


#: Rule name -> reference function: one for every rule with a verifier (the registry's
#: ``verifier``), named after its rule.
REFERENCES = {spec.name: globals()[spec.name] for spec in rule_specs(verifier=True)}


def run_reference(
    name: str,
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, k, vocab]
    draft_tokens: torch.Tensor,  # [batch, k]
    uniforms: torch.Tensor,  # [batch, uniforms_per_row(k)]
) -> tuple[list[int], list[int]]:
    """``(tokens, accepted_index)`` of the reference of rule ``name`` on every row."""
    if name not in REFERENCES:
        raise UnknownNameError(f"no reference for rule {name!r}; choose one of {', '.join(REFERENCES)}")
    function = REFERENCES[name]
    tokens, indices = [], []
    for p, qs, x, u in zip(
        target_probs.double().tolist(), draft_probs.double().tolist(), draft_tokens.tolist(), uniforms.double().tolist()
    ):
        y, i = function(p, qs, x, u)
        tokens.append(y)
        indices.append(i)
    return tokens, indices
