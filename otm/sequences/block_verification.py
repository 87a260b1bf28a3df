"""Block verification (Sun, Mendlovic, Leviathan, Aharoni, Ro, Beirami, Suresh, "Block
Verification Accelerates Speculative Decoding", ICLR 2025, arXiv:2403.10444), exactly, as we
reconstructed it (docs/sequences.md, section 2).

For a draft block ``x = (x_1..x_g)`` with ``p_i = p(. | x_<i)``, ``q_i = q(. | x_<i)``:

- weights ``w_0 = 1``, ``w_i = min(1, w_{i-1} p_i(x_i) / q_i(x_i))``;
- stop probabilities ``h_g = w_g`` and, for ``i < g``,
  ``h_i = sum_y (w_i p_{i+1}(y) - q_{i+1}(y))^+ / sum_y (q_{i+1}(y) - w_i p_{i+1}(y))^+``
  (``h_i = 0`` when the numerator is 0);
- independent coins ``eta_i ~ U(0, 1)``; ``tau = max{i : eta_i <= h_i}`` (a scan
  ``i = g, g-1, .., 0`` that stops at the first success; ``h_0 = 1`` unless ``p_1 = q_1``);
- output ``(x_<=tau, y)`` with ``y ~ norm((w_tau p_{tau+1} - q_{tau+1})^+)`` if ``tau < g``,
  the bonus ``y ~ p(. | x)`` if ``tau = g``.

Exact law: ``P(tau = i | x) = h_i prod_{j > i} (1 - h_j)``. Expected accepted length
(derived in docs/sequences.md, section 2): ``E[P(tau >= i | X) | X_<=i = u] = w(u)``, so

    E[tau] = sum_{1 <= |u| <= g} Q(u) w(u),   Q(u) w(u) = min_{j <= |u|} Q(u_<=j) P(u_>j | u_<=j),

which is the optimum of every lossless verifier that emits an accepted draft prefix plus one
token (:mod:`otm.sequences.chain_optimum`): the paper's optimality theorem, here with a
short proof (docs/sequences.md, section 3).
"""
from __future__ import annotations

from ._arith import clip_to_one, normalised, positive_part, total
from .model import SequenceModel, check_block_length
from .output_law import OutputLaw, add_mass


def block_weights(model: SequenceModel, x: tuple) -> list:
    """``[w_0, .., w_g]`` along the draft block ``x`` (``Q(x) > 0`` required)."""
    weights = [model.one()]
    for i, token in enumerate(x):
        p, q = model.target(x[:i]), model.draft(x[:i])
        weights.append(clip_to_one(weights[-1] * p[token] / q[token]))
    return weights


def stop_probability(model: SequenceModel, prefix: tuple, weight):
    """``h = sum (w p - q)^+ / sum (q - w p)^+`` at ``prefix`` with weight ``w``
    (``p = p(. | prefix)``, ``q = q(. | prefix)``); 0 when the numerator is 0, or when the
    denominator is (exactly, that forces ``w = 1`` and ``p = q``, where stopping has
    probability 0; in floats it catches rounding noise in the numerator)."""
    diff = weight * model.target(prefix) - model.draft(prefix)
    excess, deficit = total(positive_part(diff)), total(positive_part(-diff))
    return excess / deficit if excess and deficit else model.zero()


def block_residual(model: SequenceModel, prefix: tuple, weight):
    """``[V]`` ``norm((w p(. | prefix) - q(. | prefix))^+)``, the law of the token emitted
    after stopping at ``prefix``."""
    return normalised(positive_part(weight * model.target(prefix) - model.draft(prefix)))


def stop_probabilities(model: SequenceModel, x: tuple) -> list:
    """``[h_0, .., h_g]`` along the draft block ``x``."""
    weights = block_weights(model, x)
    return [stop_probability(model, x[:i], weights[i]) for i in range(len(x))] + [weights[-1]]


def block_verification_law(model: SequenceModel, g: int) -> OutputLaw:
    """The exact law of block verification's output, by enumerating every draft block
    ``x`` with ``Q(x) > 0`` (``V**g`` blocks) and ``P(tau = i | x) = h_i prod_{j>i} (1 - h_j)``.

    >>> from fractions import Fraction as F
    >>> from otm.sequences.model import context_independent_model
    >>> m = context_independent_model([F(1, 3), F(2, 3)], [F(2, 3), F(1, 3)], 3)
    >>> block_verification_law(m, 2).expected_accepted()   # Sun et al. 2025's example
    Fraction(11, 9)
    """
    g = check_block_length(g)
    model.require_length(g + 1, f"a block of g={g} drafts")
    masses: dict = {}
    for x in model.sequences(g):
        q_x = model.draft_prob(x)
        if not q_x:
            continue
        weights = block_weights(model, x)
        later_fail = model.one()  # prod_{j > i} (1 - h_j)
        for i in range(g, -1, -1):
            h = weights[g] if i == g else stop_probability(model, x[:i], weights[i])
            mass = q_x * later_fail * h
            emitted = model.target(x) if i == g else block_residual(model, x[:i], weights[i])
            for y in range(model.vocab_size):
                add_mass(masses, x[:i] + (y,), mass * emitted[y])
            later_fail = later_fail * (1 - h)
    return OutputLaw(masses, "block")


def block_expected_accepted(model: SequenceModel, g: int):
    """``E[tau] = sum_u Q(u) w(u)`` over drafted prefixes ``1 <= |u| <= g`` (module
    docstring), without enumerating coins."""
    g = check_block_length(g)
    model.require_length(g + 1, f"a block of g={g} drafts")
    value = model.zero()
    frontier = {(): (model.one(), model.one())}  # prefix -> (Q(u), w(u))
    for _ in range(g):
        nxt = {}
        for s, (q_s, w_s) in frontier.items():
            p, q = model.target(s), model.draft(s)
            for y in range(model.vocab_size):
                if q[y]:
                    nxt[s + (y,)] = (q_s * q[y], clip_to_one(w_s * p[y] / q[y]))
        value += sum((q_u * w_u for q_u, w_u in nxt.values()), model.zero())
        frontier = nxt
    return value
