"""The best expected accepted length for one draft block, in closed form, in the two output
models of docs/sequences.md (section 3).

**Draft-prefix outputs** (what a verifier can emit when the target is evaluated only along
the draft): ``O = (x_<=tau, y)``. With ``A(u) = P(tau >= |u|, X_<=|u| = u)``, a law of
``(X, tau, y)`` is lossless iff (derived in docs/sequences.md)

    0 <= A(s y) <= min(Q(s y), A(s) p(y | s))    for all s, y     (A(()) = 1),

and ``E[tau] = sum_u A(u)``. Every bound grows with the parent's ``A``, so the greedy
``A*(s y) = min(Q(s y), A*(s) p(y | s))`` is optimal for every ``u`` at once:
:func:`draft_prefix_optimum`. It equals block verification's ``Q(u) w(u)`` (Sun et al. 2025,
"Block Verification Accelerates Speculative Decoding", ICLR 2025, arXiv:2403.10444), which
proves the paper's optimality claim even against verifiers that know all of ``P`` and ``Q``.

**Any output** (an idealised verifier that emits a whole target block ``Z`` and counts the
longest common prefix with ``X`` as accepted): ``max E[LCP(X, Z)]`` over couplings of ``Q``
and ``P`` on ``V^g``. ``g - LCP`` is an ultrametric (half the path length in the prefix tree), so the
optimal transport cost is the tree formula ``1/2 sum_u |P(u) - Q(u)|`` and

    max E[LCP] = sum_{i=1..g} sum_{|u| = i} min(P(u), Q(u)):   :func:`any_output_optimum`,

which reproduces the 12/9 of Sun et al. 2025's motivating example for an idealised
verifier with full knowledge of the block laws. It needs the target off the draft path, so
it bounds the accepted length of every verifier but is not a speculative verifier.
"""
from __future__ import annotations

from .model import SequenceModel, check_block_length


def optimal_through_masses(model: SequenceModel, g: int) -> dict:
    """``{u: A*(u)}`` for ``1 <= |u| <= g`` with ``A*(u) > 0``: the greedy optimum of the
    draft-prefix model, ``A*(s y) = min(Q(s y), A*(s) p(y | s))``."""
    g = check_block_length(g)
    model.require_length(g + 1, f"a block of g={g} drafts")
    masses = {}
    frontier = {(): (model.one(), model.one())}  # s -> (A*(s), Q(s)), Q carried along the prefix
    for _ in range(g):
        nxt = {}
        for s, (a_s, q_s) in frontier.items():
            p, q = model.target(s), model.draft(s)
            for y in range(model.vocab_size):
                a = min(q_s * q[y], a_s * p[y])
                if a:
                    nxt[s + (y,)] = (a, q_s * q[y])
                    masses[s + (y,)] = a
        frontier = nxt
    return masses


def draft_prefix_optimum(model: SequenceModel, g: int):
    """``max E[tau]`` over lossless verifiers of a ``g``-token block that emit an accepted
    draft prefix and one token: ``sum_u A*(u)`` (module docstring).

    >>> from fractions import Fraction as F
    >>> from otm.sequences.model import context_independent_model
    >>> m = context_independent_model([F(1, 3), F(2, 3)], [F(2, 3), F(1, 3)], 3)
    >>> draft_prefix_optimum(m, 2)
    Fraction(11, 9)
    """
    return sum(optimal_through_masses(model, g).values(), model.zero())


def any_output_optimum(model: SequenceModel, g: int):
    """``max E[LCP(X, Z)] = sum_{1 <= |u| <= g} min(P(u), Q(u))`` over couplings of the draft
    block ``X ~ Q`` and a target block ``Z ~ P`` (module docstring).

    >>> from fractions import Fraction as F
    >>> from otm.sequences.model import context_independent_model
    >>> m = context_independent_model([F(1, 3), F(2, 3)], [F(2, 3), F(1, 3)], 3)
    >>> any_output_optimum(m, 2)
    Fraction(4, 3)
    """
    g = check_block_length(g)
    model.require_length(g, f"a block of g={g} drafts")
    value = model.zero()
    frontier = {(): (model.one(), model.one())}  # u -> (P(u), Q(u)); u with both 0 adds nothing below
    for _ in range(g):
        nxt = {}
        for s, (p_s, q_s) in frontier.items():
            p, q = model.target(s), model.draft(s)
            for y in range(model.vocab_size):
                p_u, q_u = p_s * p[y], q_s * q[y]
                value += min(p_u, q_u)
                if p_u or q_u:
                    nxt[s + (y,)] = (p_u, q_u)
        frontier = nxt
    return value
