"""Plain-Python references of :mod:`decoding.verifiers.optimal` and
:mod:`decoding.verifiers.optimal_wor`: one row, Python floats and loops, the same
arithmetic in the same order, the same uniforms (the randomness contract of
:mod:`decoding.verifiers.base`), so on float64 inputs both give the same token and
accepted index row by row.

Each ``<name>(p, draft_probs, drafts, uniforms) -> (token, accepted_index)`` takes ``p``
``[V]``, ``draft_probs`` ``[k][V]`` (row 0 is ``q``), ``drafts`` ``[k]`` token ids and the
row's ``uniforms_per_row(k)`` numbers. :func:`run_reference` applies one to a batch.
The algorithm, its law and its proofs: :mod:`otm.rules.optimal`, docs/optimal-verifier.md.
"""
from __future__ import annotations

import math
from bisect import bisect_right

import torch

from otm.errors import UnknownNameError


def _running(values: list[float]) -> list[float]:
    out, total = [], 0.0
    for v in values:
        total += v
        out.append(total)
    return out


def _normalised(values) -> list[float]:
    values = [float(v) for v in values]
    total = _running(values)[-1]
    return [v / total for v in values]


def _inverse_cdf(weights: list[float], u: float) -> int:
    """The first index whose running sum exceeds ``u`` times the total (a rounding
    overshoot goes to the last positive weight)."""
    cdf = _running(weights)
    index = bisect_right(cdf, u * cdf[-1])
    return min(index, max(t for t, w in enumerate(weights) if w > 0))


def _intervals(amounts: list[float], flow: float) -> tuple[list[float], list[float], list[float]]:
    """``(ends, starts, matched)`` of consecutive intervals from 0, cut at ``flow``."""
    ends = _running(amounts)
    starts = [0.0] + ends[:-1]
    return ends, starts, [max(min(e, flow) - s, 0.0) for e, s in zip(ends, starts)]


def _iid(p, q, drafts, uniforms):
    """The optimal i.i.d. verifier on one row (:mod:`decoding.verifiers.optimal`)."""
    vocab, k = len(p), len(drafts)
    ratio = [p[t] / q[t] if q[t] > 0 else math.inf for t in range(vocab)]
    order = sorted(range(vocab), key=ratio.__getitem__)  # stable: ties by token id
    rank = {t: j for j, t in enumerate(order)}
    p_r, q_r = [p[t] for t in order], [q[t] for t in order]
    total = _running(q_r)
    below = [0.0] + total[:-1]
    density = []
    for c_hi, c_lo in zip(total, below):
        d, power = 1.0, 1.0
        for _ in range(k - 1):
            power = power * c_lo
            d = d * c_hi + power
        density.append(d)
    own = [a * b for a, b in zip(q_r, density)]
    powers = []
    for c in total:
        power = 1.0
        for _ in range(k):
            power = power * c
        powers.append(power)
    cut_values = [0.0] + [a - b for a, b in zip(_running(p_r), powers)]
    cut = cut_values.index(min(cut_values))
    upper = [j >= cut for j in range(vocab)]
    excess = [((p_r[j] - own[j]) if upper[j] else (own[j] - p_r[j])) if q_r[j] > 0 else 0.0 for j in range(vocab)]
    gains = [max(e if up else -e, 0.0) for e, up in zip(excess, upper)]
    loses = [max(-e if up else e, 0.0) for e, up in zip(excess, upper)]
    u_gain = [g if up else 0.0 for g, up in zip(gains, upper)]
    u_lose = [g if up else 0.0 for g, up in zip(loses, upper)]
    h_gain = [0.0 if up else g for g, up in zip(gains, upper)][::-1]
    h_lose = [0.0 if up else g for g, up in zip(loses, upper)][::-1]
    u_flow = min(_running(u_gain)[-1], _running(u_lose)[-1])
    h_flow = min(_running(h_gain)[-1], _running(h_lose)[-1])
    u_lo_ends, u_lo_start, u_lo_matched = _intervals(u_gain, u_flow)
    u_hi_ends, u_hi_start, u_hi_matched = _intervals(u_lose, u_flow)
    h_lo_ends, h_lo_start, h_lo_matched = _intervals(h_gain, h_flow)
    h_hi_ends, h_hi_start, h_hi_matched = _intervals(h_lose, h_flow)
    moves_up = [g > 0 for g in gains]
    start, matched = [], []
    for j in range(vocab):
        r = vocab - 1 - j
        if upper[j]:
            start.append(u_lo_start[j] if moves_up[j] else u_hi_start[j])
            matched.append(u_lo_matched[j] if moves_up[j] else u_hi_matched[j])
        else:
            start.append(h_lo_start[r] if moves_up[j] else h_hi_start[r])
            matched.append(h_lo_matched[r] if moves_up[j] else h_hi_matched[r])
    selection = [max(o + (m if up else -m), 0.0) for o, m, up in zip(own, matched, moves_up)]

    blocks = []
    for i, token in enumerate(drafts):
        r = rank[token]
        point = start[r] + uniforms[i] * matched[r]
        if upper[r]:
            partner = bisect_right(u_hi_ends if moves_up[r] else u_lo_ends, point)
        else:
            partner = vocab - 1 - bisect_right(h_hi_ends if moves_up[r] else h_lo_ends, point)
        partner = min(max(partner, 0), vocab - 1)
        gap = abs(density[partner] - density[r])
        move = matched[r] > 0 and uniforms[k + i] * q_r[r] * gap < matched[r]
        blocks.append(partner if move else r)
    top = [i for i, b in enumerate(blocks) if b == max(blocks)]
    selected = top[min(math.floor(uniforms[2 * k] * len(top)), len(top) - 1)]
    z = rank[drafts[selected]]
    if uniforms[2 * k + 1] * selection[z] < p_r[z]:
        return drafts[selected], selected
    residual = [max(a - b, 0.0) for a, b in zip(p_r, selection)]
    if _running(residual)[-1] <= 0:
        residual = p_r
    return order[_inverse_cdf(residual, uniforms[2 * k + 2])], -1


def optimal(p, draft_probs, drafts, uniforms):
    """The optimal verifier for i.i.d. drafts (:mod:`decoding.verifiers.optimal`)."""
    return _iid(_normalised(p), _normalised(draft_probs[0]), [int(t) for t in drafts], [float(u) for u in uniforms])


def optimal_wor(p, draft_probs, drafts, uniforms):
    """The latent-i.i.d. verifier for drafts without replacement
    (:mod:`decoding.verifiers.optimal_wor`)."""
    drafts = [int(t) for t in drafts]
    uniforms = [float(u) for u in uniforms]
    k = len(drafts)
    q = _normalised(draft_probs[0])
    q_drafts = [q[t] for t in drafts]
    cumulative = _running(q_drafts)
    positions, seen = [0], 1
    for s in range(1, k):
        u = uniforms[2 * k + 2 + s]
        fresh = q_drafts[min(seen, k - 1)]
        if u < cumulative[seen - 1] or fresh <= 0:
            positions.append(min(bisect_right(cumulative, u), seen - 1))
        else:
            positions.append(seen)
            seen += 1
    token, index = _iid(_normalised(p), q, [drafts[a] for a in positions], uniforms[: 2 * k + 3])
    return token, (positions[index] if index >= 0 else -1)


#: Verifier module name -> its reference.
REFERENCES = {"optimal": optimal, "optimal_wor": optimal_wor}


def run_reference(
    name: str,
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, k, vocab]
    draft_tokens: torch.Tensor,  # [batch, k]
    uniforms: torch.Tensor,  # [batch, uniforms_per_row(k)]
) -> tuple[list[int], list[int]]:
    """``(tokens, accepted indices)`` of the reference ``name`` row by row."""
    if name not in REFERENCES:
        raise UnknownNameError(f"no reference named {name!r}; choose one of {', '.join(REFERENCES)}")
    reference = REFERENCES[name]
    tokens, indices = [], []
    for b in range(target_probs.shape[0]):
        token, index = reference(
            target_probs[b].tolist(), draft_probs[b].tolist(), draft_tokens[b].tolist(), uniforms[b].tolist()
        )
        tokens.append(int(token))
        indices.append(int(index))
    return tokens, indices
