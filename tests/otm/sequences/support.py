"""Instances shared by the tests of :mod:`otm.sequences`."""
from __future__ import annotations

from fractions import Fraction as F

import numpy as np
from hypothesis import strategies as st

from otm.rules.base import RuleLaw
from otm.sequences import OutputLaw, context_independent_model, random_model, sequence_model
from otm.sequences._arith import normalised, positive_part
from otm.sequences.block_verification import block_weights, stop_probability
from otm.sequences.output_law import add_mass

#: Sun et al. 2025 (block verification), motivating example: i.i.d. tokens, target (1/3, 2/3),
#: draft (2/3, 1/3), blocks of 2: token-wise 10/9, block 11/9, block-level coupling 12/9.
PAPER_TARGET = [F(1, 3), F(2, 3)]
PAPER_DRAFT = [F(2, 3), F(1, 3)]


def paper_model(length: int = 3):
    return context_independent_model(PAPER_TARGET, PAPER_DRAFT, length)


def exact_model(vocab_size: int, length: int, seed: int, concentration: float = 1.0, denominator: int = 12):
    """A random exact model (rows on the grid 1/denominator, zeros included)."""
    return random_model(vocab_size, length, np.random.default_rng(seed), concentration, denominator)


@st.composite
def exact_models(draw, vocab_sizes=(2, 3), lengths=(2, 3), extra_length: int = 1):
    """Random exact models: ``(model, g)`` with ``model.length = g + extra_length``."""
    vocab_size = draw(st.sampled_from(vocab_sizes))
    g = draw(st.sampled_from(lengths))
    seed = draw(st.integers(0, 2**32 - 1))
    concentration = draw(st.sampled_from([0.3, 1.0, 3.0]))
    denominator = draw(st.integers(1, 12))
    return exact_model(vocab_size, g + extra_length, seed, concentration, denominator), g


def degenerate_models(length: int = 3):
    """Degenerate valid instances: p = q, disjoint supports, one-hot rows, q with zeros."""
    half = [F(1, 2), F(1, 2)]
    return {
        "p equals q": context_independent_model([F(1, 3), F(1, 6), F(1, 2)], [F(1, 3), F(1, 6), F(1, 2)], length),
        "disjoint supports": context_independent_model([F(1), F(0)], [F(0), F(1)], length),
        "one-hot target": context_independent_model([F(0), F(1)], half, length),
        "one-hot draft": context_independent_model(half, [F(1), F(0)], length),
        "q with zeros": context_independent_model([F(1, 4), F(1, 4), F(1, 2)], [F(1, 2), F(1, 2), F(0)], length),
    }


def context_switch_model():
    """A small context-dependent exact model with V = 2, length 3 (all rows distinct)."""
    target = {(): [F(1, 4), F(3, 4)], (0,): [F(1, 2), F(1, 2)], (1,): [F(5, 6), F(1, 6)],
              (0, 0): [F(1, 3), F(2, 3)], (0, 1): [F(1), F(0)], (1, 0): [F(2, 5), F(3, 5)], (1, 1): [F(1, 8), F(7, 8)]}
    draft = {(): [F(2, 3), F(1, 3)], (0,): [F(1, 5), F(4, 5)], (1,): [F(1, 2), F(1, 2)],
             (0, 0): [F(1, 2), F(1, 2)], (0, 1): [F(3, 4), F(1, 4)], (1, 0): [F(0), F(1)], (1, 1): [F(1, 3), F(2, 3)]}
    return sequence_model(target, draft)


# Broken ingredients: plausible slips that the checks must catch.


def block_law_with_tokenwise_residual(model, g):
    """Block verification whose token after a stop at ``i < g`` comes from ``norm((p - q)^+)``
    instead of ``norm((w_i p - q)^+)``: a plausible slip, lossy where two tokens have p > q."""
    masses: dict = {}
    for x in model.sequences(g):
        q_x = model.draft_prob(x)
        if not q_x:
            continue
        weights = block_weights(model, x)
        later_fail = model.one()
        for i in range(g, -1, -1):
            h = weights[g] if i == g else stop_probability(model, x[:i], weights[i])
            emitted = model.target(x) if i == g else normalised(positive_part(model.target(x[:i]) - model.draft(x[:i])))
            for y in range(model.vocab_size):
                add_mass(masses, x[:i] + (y,), q_x * later_fail * h * emitted[y])
            later_fail = later_fail * (1 - h)
    return OutputLaw(masses, "block with the token-wise residual")


def shared_coin_rrs(p, q, k):
    """Recursive rejection sampling of k = 2 i.i.d. drafts with ONE uniform for both accept
    tests (x_2 is accepted iff r_1 <= U < r_2): lossy where 0 < r_2 < 1."""
    assert k == 2
    zero = F(0) if p.dtype == object else 0.0
    out = np.array([zero] * p.size, dtype=p.dtype)
    accepted = out.copy()
    residual = normalised(positive_part(p - q))
    final = normalised(positive_part(residual - q))
    for x1 in range(p.size):
        for x2 in range(p.size):
            w = q[x1] * q[x2]
            if not w:
                continue
            r1, r2 = min(1, p[x1] / q[x1]), min(1, residual[x2] / q[x2])
            for y, mass in ((x1, w * r1), (x2, w * max(r2 - r1, zero))):
                out[y] += mass
                accepted[y] += mass
            out += w * (1 - max(r1, r2)) * final
    return RuleLaw(sum(accepted), out, None, {"accepted_per_token": accepted})
