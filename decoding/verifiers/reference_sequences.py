"""Slow plain-Python references of the batched sequence verifiers, one row at a time.

Written straight from docs/sequences.md (sections 2 and 5) with Python floats and loops,
consuming a row's uniforms in the order the batched verifiers document, so that on the
same uniforms both give the same output (up to float ties of probability ~1e-16):

- :func:`block`: block verification (Sun et al., "Block Verification Accelerates
  Speculative Decoding", ICLR 2025, arXiv:2403.10444), :mod:`decoding.verifiers.block`;
- :func:`traversal`: traversal verification (Weng et al., "Traversal Verification for
  Speculative Tree Decoding", NeurIPS 2025, arXiv:2505.12398),
  :mod:`decoding.verifiers.traversal`.

:func:`run_rows` applies either to every row of a batch.
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from otm.sequences import trampoline


def _inverse_cdf(weights: list[float], u: float) -> int:
    """The token ``t`` with ``cdf[t-1] <= u * total < cdf[t]`` (a rounding overshoot goes to
    the first token at which the CDF reaches its total)."""
    cdf, total = [], 0.0
    for w in weights:
        total += w
        cdf.append(total)
    for t, c in enumerate(cdf):
        if c > u * total:
            return t
    return next(t for t, c in enumerate(cdf) if c >= total)


def _positive_part(values: list[float]) -> list[float]:
    return [max(v, 0.0) for v in values]


def _sample(weights: list[float], fallback: list[float], u: float) -> int:
    """A token from ``norm(weights)``, or from ``norm(fallback)`` when ``weights`` has no mass."""
    return _inverse_cdf(weights if sum(weights) > 0 else fallback, u)


def block(p_rows, q_rows, drafts, uniforms) -> tuple[int, int]:
    """``(tau, y)`` of block verification on one chain.

    ``p_rows`` ``[g + 1][V]`` (``p`` after each prefix ``x_<i``, the last for the bonus),
    ``q_rows`` ``[g][V]``, ``drafts`` ``[g]``, ``uniforms`` ``[g + 2]``: ``eta_0..eta_g``,
    then the emitted token's."""
    g = len(drafts)
    w = [1.0]
    for i, x in enumerate(drafts):
        scaled = w[-1] * p_rows[i][x]
        w.append(1.0 if scaled >= q_rows[i][x] else scaled / q_rows[i][x])
    h = [1.0]  # h_0 = 1 (decoding.verifiers.block: exact)
    for i in range(1, g):
        diff = [w[i] * a - b for a, b in zip(p_rows[i], q_rows[i])]
        excess = sum(max(d, 0.0) for d in diff)
        deficit = sum(max(-d, 0.0) for d in diff)
        h.append(min(1.0, excess / deficit) if excess > 0 and deficit > 0 else 0.0)
    h.append(w[g])
    tau = next(i for i in range(g, -1, -1) if uniforms[i] < h[i])
    if tau == g:
        return tau, _inverse_cdf(p_rows[g], uniforms[g + 1])
    residual = _positive_part([w[tau] * a - b for a, b in zip(p_rows[tau], q_rows[tau])])
    return tau, _sample(residual, p_rows[tau], uniforms[g + 1])


def _norm(values: list[float]) -> list[float]:
    total = sum(values)
    return [v / total for v in values] if total > 0 else list(values)


def traversal(parent, tokens, p_rows, q_rows, uniforms, scheme: str = "without_replacement") -> tuple[int, int]:
    """``(accepted node, y)`` of traversal verification on one tree.

    ``parent`` ``[n]`` (breadth-first, ``parent[0] = -1``), ``tokens`` ``[n]`` (node 0 not
    read), ``p_rows`` / ``q_rows`` ``[n][V]`` (``p`` and ``q`` at every node), ``uniforms``
    ``[n + 1]``: the coin of each node, then the emitted token's; ``scheme``: how siblings
    were drawn, ``"iid"`` or ``"without_replacement"``."""
    n = len(parent)
    children: list[list[int]] = [[] for _ in range(n)]
    for node in range(1, n):
        children[parent[node]].append(node)

    def visit(node: int, alpha: float):
        """The accepted ``(node, emission law)`` in this subtree, or ``None`` (a
        :mod:`otm.sequences.trampoline` step: deep chains need no Python recursion)."""
        target = list(p_rows[node])
        remaining = list(q_rows[node])
        for child in children[node]:
            x = tokens[child]
            if scheme == "iid":
                proposal = list(q_rows[node])
            elif sum(remaining) > 0:
                proposal = _norm(remaining)
            else:  # without replacement past the support of q: x is the fixed next token
                proposal = [1.0 if t == x else 0.0 for t in range(len(remaining))]
            scaled = alpha * target[x]
            found = yield visit(child, 1.0 if scaled >= proposal[x] else scaled / proposal[x])
            if found is not None:
                return found
            excess_part = _positive_part([alpha * a - b for a, b in zip(target, proposal)])
            excess = sum(excess_part)
            rejected = excess + 1 - alpha
            if rejected > 0:
                alpha, target = min(1.0, max(0.0, excess / rejected)), _norm(excess_part)
            remaining[x] = 0.0
        if uniforms[node] < alpha:
            return node, target
        return None

    found = trampoline.run(visit(0, 1.0))
    assert found is not None, "the root accepts surely (its weight stays 1)"
    node, law = found
    return node, _sample(law, p_rows[node], uniforms[n])


def run_rows(reference: Callable[..., tuple[int, int]], *tensors: torch.Tensor) -> tuple[list[int], list[int]]:
    """``(first outputs, tokens)`` of a one-row reference on every row of ``tensors`` (each
    ``[batch, ...]``; floating ones as float64 lists), in the order the reference takes them:
    ``run_rows(block, target_probs, draft_probs, draft_tokens, uniforms)`` gives block
    verification's ``(n_accepted, tokens)``, ``run_rows(functools.partial(traversal, parent,
    scheme=scheme), draft_tokens, target_probs, draft_probs, uniforms)`` traversal
    verification's ``(accepted_node, tokens)`` (``parent``: the tree's ``[n_nodes]`` parents)."""
    rows = zip(*(t.double().tolist() if t.is_floating_point() else t.tolist() for t in tensors))
    out = [reference(*row) for row in rows]
    return [first for first, _ in out], [y for _, y in out]
