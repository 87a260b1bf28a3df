"""The tree-level optimum: the best expected accepted length of any lossless verifier of a
random draft tree that emits an accepted path of the tree plus one token (this toolkit's
formulation; docs/sequences.md, section 6).

A verifier sees the draft tree ``T`` (only its path set ``S(T)`` matters, and the LP is
written on the law of ``S``, :func:`otm.sequences.draft_trees.path_set_law`) and all of
``P``; it picks the accepted node ``v in S(T) + {()}`` and then a token. Variables: the
verifier's kernel ``sigma(S, v) = P(accept v | S) >= 0`` (the coupling is
``rho(S, v) = Pr(S) sigma(S, v)``; kernel variables are of order 1, which keeps the LP well
scaled when path sets have tiny probabilities):

    sum_v sigma(S, v) = 1                                           (a kernel)
    A(u) = sum_{S, v: v extends u} Pr(S) sigma(S, v)                 (accepted through u)
    A(s y) <= p(y | s) A(s)     for |s| < depth, y in V              (losslessness)
    maximise  sum_{S, v} |v| Pr(S) sigma(S, v) = E[tau].

The losslessness rows are (L) of :mod:`otm.sequences.output_law` in through-mass form: a
verifier's output law is lossless iff ``m(s y) = A(s) p(y | s) - A(s y) >= 0``, and any such
``A`` is realised by emitting ``y`` with probability ``m(v y) / (A(v) - sum_y A(v y))``
after stopping at ``v``. With ``k = 1`` this is the chain LP of
:mod:`otm.sequences.sequence_lp`, whose optimum is block verification's value.
"""
from __future__ import annotations

from .draft_trees import path_set_law
from .lp_tools import LPRows, SequenceLPResult, solve_rows
from .model import SequenceModel, check_block_length
from .output_law import OutputLaw, add_mass


def tree_optimum_lp(model: SequenceModel, depth: int, k: int, draft="without_replacement") -> LPRows:
    """The LP of the module docstring as labelled rows; labels are ``(S, v)`` (the variable
    is ``sigma(S, v)``)."""
    depth = check_block_length(depth, "depth")
    sets = path_set_law(model, depth, k, draft)
    rows = LPRows(model.exact)
    through: dict = {}  # u -> {column of sigma(S, v) with v extending u: Pr(S)} (u = () included)
    for path_set, prob in sets.items():
        columns = {}
        for v in [(), *sorted(path_set, key=lambda u: (len(u), u))]:
            col = rows.variable((path_set, v), len(v) * prob)
            columns[col] = 1
            for i in range(len(v) + 1):
                through.setdefault(v[:i], {})[col] = prob
        rows.add("eq", columns, model.one())
    for u, columns in through.items():
        if u:
            parent, y = u[:-1], u[-1]
            coefficients = dict(columns)
            p_y = model.target(parent)[y]
            for col, prob in through[parent].items():
                coefficients[col] = coefficients.get(col, 0) - p_y * prob
            rows.add("ub", coefficients, model.zero())
    return rows


def solve_tree_optimum(model: SequenceModel, depth: int, k: int, draft="without_replacement",
                       backend: str = "highs", certified: bool | None = None) -> SequenceLPResult:
    """The tree-level optimum by LP (:func:`tree_optimum_lp`), solved by ``backend``; an exact
    model solved by a float backend is certified exactly by default (value a Fraction).

    >>> from fractions import Fraction as F
    >>> from otm.sequences.model import context_independent_model
    >>> m = context_independent_model([F(1, 3), F(2, 3)], [F(2, 3), F(1, 3)], 3)
    >>> solve_tree_optimum(m, 2, 1, backend="exact").value      # a chain: block verification
    Fraction(11, 9)
    """
    return solve_rows(tree_optimum_lp(model, depth, k, draft), backend, certified)



def optimum_output_law(model: SequenceModel, depth: int, k: int, draft, result: SequenceLPResult) -> OutputLaw:
    """The output law of the optimal verifier in ``result`` (from :func:`solve_tree_optimum`
    with the same arguments): through masses ``A(u)`` from the kernel, then
    ``m(s y) = A(s) p(y | s) - A(s y)`` (module docstring). Lossless by construction, which
    the tests check with :func:`otm.sequences.output_law.lossless_gap`."""
    sets = path_set_law(model, depth, k, draft)
    through: dict = {}
    for (path_set, v), sigma in zip(result.labels, result.x):
        for i in range(len(v) + 1):
            through[v[:i]] = through.get(v[:i], 0) + sets[path_set] * sigma
    masses: dict = {}
    for s, a in through.items():
        if len(s) <= depth:
            p = model.target(s)
            for y in range(model.vocab_size):
                add_mass(masses, s + (y,), a * p[y] - through.get(s + (y,), 0))
    return OutputLaw(masses, "tree optimum")
