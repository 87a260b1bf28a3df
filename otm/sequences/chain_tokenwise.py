"""Token-wise verification of one draft block (Leviathan, Kalman, Matias, "Fast Inference
from Transformers via Speculative Decoding", ICML 2023, arXiv:2211.17192, Alg. 1), exactly.

The draft block ``X = (X_1..X_g)`` is drawn from ``Q`` autoregressively. For ``i = 1..g``
the verifier accepts ``X_i`` with probability ``min(1, p_i(X_i) / q_i(X_i))``
(``p_i = p(. | X_<i)``, ``q_i = q(. | X_<i)``); at the first rejection it emits
``y ~ norm((p_i - q_i)^+)`` and stops; after ``g`` acceptances it emits the bonus token
``y ~ p(. | X)``. The output is ``O = (X_<=tau, y)`` (:mod:`otm.sequences.output_law`).

Exact law (derived here): a prefix ``u`` is drafted and accepted with probability
``R(u) = prod_i min(p(u_i | u_<i), q(u_i | u_<i))`` (each step contributes
``q min(1, p/q) = min(p, q)``), and the step stops after ``s`` emitting ``y`` with mass
``R(s) (p(y|s) - q(y|s))^+`` for ``|s| < g`` (rejection mass ``R(s) sum (q - p)^+`` times the
residual, whose normaliser ``sum (p - q)^+`` is the same number), or ``R(s) p(y|s)`` for
``|s| = g``. Hence ``E[tau] = sum_{1 <= |u| <= g} R(u)``, which for context-independent
``p, q`` is ``sum_{i=1..g} a^i``, ``a = sum min(p, q)``: Leviathan et al.'s expected
``(1 - a^(g+1)) / (1 - a)`` tokens per step.
"""
from __future__ import annotations

from ._arith import normalised, positive_part
from .model import SequenceModel, check_block_length
from .output_law import OutputLaw, add_mass


def accepted_prefix_masses(model: SequenceModel, g: int) -> dict:
    """``{u: R(u)}`` for ``1 <= |u| <= g``: the probability that the draft starts with ``u``
    and token-wise verification accepts all of ``u`` (module docstring)."""
    g = check_block_length(g)
    model.require_length(g + 1, f"a block of g={g} drafts")
    reach = {(): model.one()}
    for n in range(g):
        for s in model.sequences(n):
            if reach.get(s):
                p, q = model.target(s), model.draft(s)
                for y in range(model.vocab_size):
                    both = min(p[y], q[y])
                    if both:
                        reach[s + (y,)] = reach[s] * both
    del reach[()]
    return reach


def tokenwise_expected_accepted(model: SequenceModel, g: int):
    """``E[tau] = sum_u R(u)`` for token-wise verification of a ``g``-token block.

    >>> from fractions import Fraction as F
    >>> from otm.sequences.model import context_independent_model
    >>> m = context_independent_model([F(1, 3), F(2, 3)], [F(2, 3), F(1, 3)], 3)
    >>> tokenwise_expected_accepted(m, 2)     # Sun et al. 2025's example: 2/3 + 4/9
    Fraction(10, 9)
    """
    return sum(accepted_prefix_masses(model, g).values(), model.zero())


def tokenwise_law(model: SequenceModel, g: int) -> OutputLaw:
    """The exact law of the output of token-wise verification (module docstring), from the
    accepted-prefix masses ``R``."""
    reach = {(): model.one(), **accepted_prefix_masses(model, g)}
    masses: dict = {}
    for s, r in reach.items():
        p = model.target(s)
        stop = p if len(s) == g else positive_part(p - model.draft(s))
        for y in range(model.vocab_size):
            add_mass(masses, s + (y,), r * stop[y])
    return OutputLaw(masses, "tokenwise")


def tokenwise_law_by_enumeration(model: SequenceModel, g: int) -> OutputLaw:
    """The same law by running Alg. 1 literally on every draft block ``x`` with ``Q(x) > 0``
    and every accept/reject outcome: the slow reference :func:`tokenwise_law` is tested against."""
    g = check_block_length(g)
    model.require_length(g + 1, f"a block of g={g} drafts")
    masses: dict = {}
    for x in model.sequences(g):
        weight = model.draft_prob(x)
        if not weight:
            continue
        for i in range(g + 1):  # accept x_1..x_i, then reject x_{i+1} (or the bonus at i = g)
            p = model.target(x[:i])
            if i == g:
                for y in range(model.vocab_size):
                    add_mass(masses, x + (y,), weight * p[y])
                break
            q = model.draft(x[:i])
            accept = min(model.one(), p[x[i]] / q[x[i]])
            residual = normalised(positive_part(p - q))
            for y in range(model.vocab_size):
                add_mass(masses, x[:i] + (y,), weight * (1 - accept) * residual[y])
            weight = weight * accept
            if not weight:
                break
    return OutputLaw(masses, "tokenwise")
