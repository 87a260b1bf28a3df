"""The chain (one draft block) optimum as a linear program, in two formulations that must
agree with each other and with the closed forms of :mod:`otm.sequences.chain_optimum`.

**Coupling LP** (the definition). The coupling ``pi(x, tau, y)`` of the draft block ``x``
(``Q(x) > 0``) and the output ``(x_<=tau, y)`` (``P > 0``), written through the verifier's
kernel ``K = pi / Q(x)`` (variables of order 1 keep the LP well scaled when blocks have tiny
probabilities). Constraints: ``sum_{tau, y} K(x, tau, y) = 1`` (the draft marginal) and
losslessness (L) of :mod:`otm.sequences.output_law` at horizon ``g + 1``:

    sum_{x, tau: x_<=tau = z_<=tau} pi(x, tau, z_{tau+1}) P(z_{tau+2..g+1} | z_<=tau+1) = P(z)

for every ``z in V^(g+1)``, ``pi = Q(x) K``, written as ``<=`` rows (both sides total 1, so
equality is forced, and float rounding of the totals cannot make the LP infeasible).
Objective ``max sum tau pi``. The verifier sees the whole draft
block and may use all of ``P`` and ``Q`` (full information); it may only emit an accepted
draft prefix plus one token, because the target is evaluated along the draft only. With
``outputs="any"`` the output is instead a whole target block: variables ``pi(x, z)``,
``z in V^g``, marginals ``Q`` and ``P`` (the ``P`` side as ``<=``, robust to float sums),
objective ``LCP(x, z)``.

**Through-mass LP** (derived, docs/sequences.md section 3): variables ``A(u)`` for drafted
prefixes ``1 <= |u| <= g``; ``A(u) <= Q(u)``, ``A(s y) <= p(y | s) A(s)`` (``A(()) = 1``);
objective ``max sum_u A(u)``. Sizes: ``O(V^g)`` variables against the coupling LP's
``O(V^g g V)`` variables and ``V^(g+1)`` rows.
"""
from __future__ import annotations

from ..errors import UnknownNameError
from .lp_tools import LPRows, SequenceLPResult, solve_rows
from .model import SequenceModel, check_block_length

#: Output models of the coupling LP.
OUTPUT_MODELS = ("draft_prefix", "any")

#: LP formulations of the chain optimum.
FORMULATIONS = ("coupling", "through_masses")


def _conditional(model: SequenceModel, sequence: tuple, start: int):
    """``P(sequence_{start..} | sequence_<start)`` (0-based ``start``)."""
    prob = model.one()
    for i in range(start, len(sequence)):
        prob = prob * model.target(sequence[:i])[sequence[i]]
    return prob


def chain_coupling_lp(model: SequenceModel, g: int, outputs: str = "draft_prefix") -> LPRows:
    """The coupling LP of a ``g``-token block (module docstring) as labelled rows;
    labels are ``(x, tau, y)`` (``outputs="draft_prefix"``, the variable is the kernel
    ``K``) or ``(x, z)`` (``"any"``, the variable is the coupling mass)."""
    g = check_block_length(g)
    if outputs not in OUTPUT_MODELS:
        raise UnknownNameError(f"unknown output model {outputs!r}; known: {', '.join(OUTPUT_MODELS)}")
    model.require_length(g + 1, f"a block of g={g} drafts")
    drafts = [(x, model.draft_prob(x)) for x in model.sequences(g)]
    drafts = [(x, q_x) for x, q_x in drafts if q_x]
    rows = LPRows(model.exact)
    if outputs == "any":
        blocks = [(z, model.target_prob(z)) for z in model.sequences(g)]
        blocks = [(z, p_z) for z, p_z in blocks if p_z]
        for x, _ in drafts:
            for z, _ in blocks:
                rows.variable((x, z), next((i for i in range(g) if x[i] != z[i]), g))
        for x, q_x in drafts:
            rows.add("eq", {rows.index[(x, z)]: 1 for z, _ in blocks}, q_x)
        for z, p_z in blocks:
            rows.add("ub", {rows.index[(x, z)]: 1 for x, _ in drafts}, p_z)
        return rows
    validity: dict = {}  # z -> {column: coefficient}
    for x, q_x in drafts:
        columns = {}
        for tau in range(g + 1):
            for y in range(model.vocab_size):
                emitted = x[:tau] + (y,)
                if not model.target_prob(emitted):
                    continue
                col = rows.variable((x, tau, y), q_x * tau)
                columns[col] = 1
                for tail in model.sequences(g - tau):
                    coefficient = _conditional(model, emitted + tail, tau + 1)
                    if coefficient:
                        row = validity.setdefault(emitted + tail, {})
                        row[col] = row.get(col, 0) + q_x * coefficient
        rows.add("eq", columns, model.one())
    for z in model.sequences(g + 1):  # as <=: both sides total 1, so equality is forced
        rows.add("ub", validity.get(z, {}), model.target_prob(z))
    return rows


def chain_through_mass_lp(model: SequenceModel, g: int) -> LPRows:
    """The through-mass LP (module docstring); labels are the prefixes ``u``."""
    g = check_block_length(g)
    model.require_length(g + 1, f"a block of g={g} drafts")
    rows = LPRows(model.exact)
    for n in range(1, g + 1):
        for u in model.sequences(n):
            q_u = model.draft_prob(u)
            if q_u:
                rows.add("ub", {rows.variable(u, 1): 1}, q_u)
    for u, col in list(rows.index.items()):
        parent, y = u[:-1], u[-1]
        coefficients = {col: 1}
        if parent:
            coefficients[rows.index[parent]] = -model.target(parent)[y]
        rows.add("ub", coefficients, model.target(())[y] if not parent else model.zero())
    return rows


def solve_chain_optimum(model: SequenceModel, g: int, formulation: str = "coupling", outputs: str = "draft_prefix",
                        backend: str = "highs", certified: bool | None = None) -> SequenceLPResult:
    """The best expected accepted length of a ``g``-token block by LP.

    ``formulation``: ``"coupling"`` (``outputs`` = ``"draft_prefix"`` or ``"any"``) or
    ``"through_masses"`` (draft-prefix outputs). ``backend``: any :func:`solvers.solve`
    backend (``"exact"`` for the rational simplex, at most 300 variables). An exact model
    solved by a float backend is certified exactly by default (:func:`solvers.certify`), so
    ``value`` is then an exact rational.

    >>> from fractions import Fraction as F
    >>> from otm.sequences.model import context_independent_model
    >>> m = context_independent_model([F(1, 3), F(2, 3)], [F(2, 3), F(1, 3)], 3)
    >>> solve_chain_optimum(m, 2, backend="exact").value
    Fraction(11, 9)
    >>> solve_chain_optimum(m, 2, outputs="any").value
    Fraction(4, 3)
    """
    if formulation == "coupling":
        rows = chain_coupling_lp(model, g, outputs)
    elif formulation == "through_masses":
        if outputs != "draft_prefix":
            raise UnknownNameError("the through-mass LP is the draft-prefix model; use formulation='coupling' for outputs='any'")
        rows = chain_through_mass_lp(model, g)
    else:
        raise UnknownNameError(f"unknown formulation {formulation!r}; known: {', '.join(FORMULATIONS)}")
    return solve_rows(rows, backend, certified)
