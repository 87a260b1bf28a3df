"""Plain-Python references of :mod:`decoding.verifiers.optimal.iid` and
:mod:`decoding.verifiers.optimal_latent`: one row, Python floats and loops, the same
arithmetic in the same order, the same uniforms (the randomness contract of
:mod:`decoding.verifiers.base`), so on float64 inputs both give the same token and
accepted index row by row.

Each ``<name>(p, draft_probs, drafts, uniforms) -> (token, accepted_index)`` takes ``p``
``[V]``, ``draft_probs`` ``[k][V]`` (row 0 is ``q``), ``drafts`` ``[k]`` token ids and the
row's ``uniforms_per_row(k)`` numbers; :func:`decoding.verifiers.reference.run_reference`
applies one to a batch.
The algorithm, its law and its proofs: :mod:`otm.rules.optimal`, docs/optimal-verifier.md.
"""
from __future__ import annotations

import math
from bisect import bisect_left, bisect_right


def _running(values: list[float]) -> list[float]:
    out, total = [], 0.0
    for v in values:
        total += v
        out.append(total)
    return out


def _power(value: float, k: int) -> float:
    """``value**k`` by binary exponentiation, multiplying in the batched verifier's order."""
    result, base = None, value
    while k:
        if k & 1:
            result = base if result is None else result * base
        k >>= 1
        if k:
            base = base * base
    return result


def _at(values: list[float], index: int) -> float:
    return values[index] if index >= 0 else 0.0


def _iid(p, q, drafts, uniforms):
    """The optimal i.i.d. verifier on one row (:mod:`decoding.verifiers.optimal.iid`), always
    the full way (the batched verifier's lazy rows give the same draws, section 5.1 of
    docs/optimal-verifier.md)."""
    vocab, k = len(p), len(drafts)
    ratio = [p[t] / q[t] if q[t] > 0 else math.inf for t in range(vocab)]
    order = sorted(range(vocab), key=ratio.__getitem__)  # stable: ties by token id
    rank = {t: j for j, t in enumerate(order)}
    draft_total = _running([q[t] for t in order])
    draft_mass = draft_total[-1]
    q_r = [q[t] / draft_mass for t in order]
    c_power = [_power(c / draft_mass, k) for c in draft_total]
    own = [c - b for c, b in zip(c_power, [0.0] + c_power[:-1])]
    target_cumulative = _running([p[t] for t in order])
    target_mass = target_cumulative[-1]
    target_cumulative = [c / target_mass for c in target_cumulative]
    p_r = [p[t] / target_mass for t in order]
    p = [v / target_mass for v in p]
    q = [v / draft_mass for v in q]
    scores = [a - b for a, b in zip(target_cumulative, c_power)]
    best = scores.index(min(scores))
    cut = best + 1 if scores[best] < 0 else 0
    excess = [a - b for a, b in zip(p_r, own)]
    gains = _running([max(e, 0.0) for e in excess])
    losses = _running([max(-e, 0.0) for e in excess])
    support = sum(1 for v in q if v > 0)
    g_h, l_h = _at(gains, cut - 1), _at(losses, cut - 1)
    flow_u = min(gains[support - 1] - g_h, losses[-1] - l_h)
    flow_h = min(g_h, l_h)

    blocks, selection, shortfall = [], [], []
    for i, token in enumerate(drafts):
        r = rank[token]
        e = p[token] - own[r]
        in_u = r >= cut
        g_hi, g_lo, l_hi, l_lo = _at(gains, r), _at(gains, r - 1), _at(losses, r), _at(losses, r - 1)
        if in_u:
            start, end = (g_lo - g_h, g_hi - g_h) if e > 0 else (l_lo - l_h, l_hi - l_h)
            end = min(end, flow_u)
        else:
            start, end = (g_h - g_hi, g_h - g_lo) if e > 0 else (l_h - l_hi, l_h - l_lo)
            end = min(end, flow_h)
        matched = max(end - start, 0.0) if e != 0 else 0.0
        point = start + uniforms[i] * matched
        if in_u:
            partner = bisect_right(losses, point + l_h) if e > 0 else bisect_right(gains, point + g_h)
        else:
            partner = bisect_left(losses, l_h - point) if e > 0 else bisect_left(gains, g_h - point)
        partner = min(max(partner, 0), vocab - 1)
        valid = partner != r and (partner >= cut) == in_u and partner < support
        move = matched > 0 and valid
        if move:  # the partner's q > 0
            gap = abs(own[partner] / q_r[partner] - own[r] / q[token])
            move = uniforms[k + i] * q[token] * gap < matched
        blocks.append(partner if move else r)
        selection.append(max(own[r] + (matched if e > 0 else -matched), 0.0))
        shortfall.append(e > 0)
    top = [i for i, b in enumerate(blocks) if b == max(blocks)]
    selected = top[min(math.floor(uniforms[2 * k] * len(top)), len(top) - 1)]
    token = drafts[selected]
    u5 = uniforms[2 * k + 2]
    if shortfall[selected] or uniforms[2 * k + 1] * selection[selected] < p[token]:
        holders = [i for i, t in enumerate(drafts) if t == token]
        return token, holders[min(math.floor(u5 * len(holders)), len(holders) - 1)]
    low = g_h + flow_u
    total = gains[-1] - low
    if total > 0:
        found = bisect_right(gains, min(low + u5 * total, math.nextafter(gains[-1], -math.inf)))
    else:
        p_end = target_cumulative[-1]
        found = bisect_right(target_cumulative, min(u5 * p_end, math.nextafter(p_end, -math.inf)))
    return order[min(found, vocab - 1)], -1


def optimal(p, draft_probs, drafts, uniforms):
    """The optimal verifier for i.i.d. drafts (:mod:`decoding.verifiers.optimal.iid`)."""
    return _iid([float(v) for v in p], [float(v) for v in draft_probs[0]], [int(t) for t in drafts], [float(u) for u in uniforms])


def optimal_latent(p, draft_probs, drafts, uniforms):
    """The latent-i.i.d. verifier for drafts without replacement
    (:mod:`decoding.verifiers.optimal_latent`)."""
    p, q = [float(v) for v in p], [float(v) for v in draft_probs[0]]
    drafts, uniforms = [int(t) for t in drafts], [float(u) for u in uniforms]
    k = len(drafts)
    draft_mass = _running(q)[-1]  # in token order
    draft_q = [q[t] / draft_mass for t in drafts]
    cumulative = _running(draft_q)
    positions, seen = [0], 1
    for s in range(1, k):
        u = uniforms[2 * k + 2 + s]
        if u < cumulative[seen - 1] or draft_q[min(seen, k - 1)] <= 0:
            positions.append(min(bisect_right(cumulative, u), seen - 1))
        else:
            positions.append(seen)
            seen += 1
    token, index = _iid(p, q, [drafts[a] for a in positions], uniforms[: 2 * k + 3])
    return token, (positions[index] if index >= 0 else -1)
