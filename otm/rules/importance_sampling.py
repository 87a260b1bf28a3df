"""Rules ``"importance_sampling"`` and ``"importance_sampling_wor"``: importance-weighted
selection with LP-optimal weights, then single-draft speculative sampling (Khisti et al.
2025, Thm 1 and Fig. 1 for i.i.d. drafts, Thm 4 for any joint draft law).

``k`` drafts from ``q``: i.i.d. (:func:`exact_law`) or without replacement
(:func:`exact_law_without_replacement`). The weights solve the canonical LP
(:func:`otm.formulations.canonical_lp.solve_canonical_lp`) over the tuples of that law, so
the selected token ``Z`` has law ``P_I`` with ``sum_y min(p(y), P_I(y)) = alpha*(p, Q)``;
speculative sampling of ``Z`` against ``p`` then outputs exactly ``p`` and accepts with that
probability. Without replacement it attains ``alpha*(p, Q_wor)`` for every ``k`` (for two
drafts :mod:`otm.rules.optimal_wor` does too, at far larger vocabularies); the LP has a
weight per (tuple, position), so it is for small vocabularies
(docs/optimal-verifier.md#water-levels-for-drafts-without-replacement).
"""
from __future__ import annotations

import numpy as np

from ..distributions import as_distribution_pair, as_exact_distribution, check_draft_count, is_exact_input
from ..draft_laws import DraftLaw, iid_law, without_replacement_law
from ..errors import ShapeMismatchError
from ..formulations.canonical_lp import canonical_two_step_law, solve_canonical_lp
from .base import RuleLaw



def target_and_draft(p, q) -> tuple[np.ndarray, np.ndarray]:
    """``(p, q)`` validated: exact Fraction arrays when both are object arrays, else float64."""
    if is_exact_input(p) and is_exact_input(q):
        p, q = as_exact_distribution(p, "p (target)"), as_exact_distribution(q, "q (draft)")
        if p.size != q.size:
            raise ShapeMismatchError(f"p (target) has {p.size} tokens but q (draft) has {q.size}")
        return p, q
    return as_distribution_pair(p, q)


def exact_law(p, q, k: int, backend: str = "highs") -> RuleLaw:
    """Exact law of the optimal importance-sampling rule for ``k`` i.i.d. drafts from ``q``.

    Args:
        p: ``[V]`` target distribution.
        q: ``[V]`` draft distribution.
        k: number of drafts.
        backend: LP backend for the weights (``"exact"`` with Fraction inputs gives an
            exact law).

    Returns:
        :class:`RuleLaw` with membership acceptance ``alpha*(p, q^k)``, output ``p``, the
        i.i.d. draft law, and ``details``: ``weights`` (``[n_tuples, k]``),
        ``selection_law`` (``P_I``), ``selection_acceptance``, ``optimum`` (the LP value).
    """
    p, q = target_and_draft(p, q)
    return _lp_weighted_law(p, iid_law(q, check_draft_count(k)), backend)


def exact_law_without_replacement(p, q, k: int, backend: str = "highs") -> RuleLaw:
    """Exact law of the optimal importance-sampling rule for ``k`` distinct drafts drawn
    successively from ``q`` (Khisti et al. 2025, Thm 4: the canonical LP is exact for any
    joint draft law).

    Args and returns as :func:`exact_law`, with the without-replacement draft law: the
    membership acceptance is ``alpha*(p, Q_wor)``. ``k`` above the number of tokens with
    ``q > 0`` follows the convention of :func:`otm.draft_laws.without_replacement_law`;
    ``k > V`` raises :class:`otm.errors.InvalidDraftCountError`.

    >>> law = exact_law_without_replacement([0.5, 0.5, 0.0], [0.9, 0.05, 0.05], 2)
    >>> round(float(law.acceptance), 12)        # i.i.d. drafts: 0.5 + 1 - 0.95^2 = 0.5975
    1.0
    """
    p, q = target_and_draft(p, q)
    return _lp_weighted_law(p, without_replacement_law(q, check_draft_count(k)), backend)


def _lp_weighted_law(p, law: DraftLaw, backend: str) -> RuleLaw:
    solution = solve_canonical_lp(p, law, backend=backend)
    weights = solution.details["weights"]
    two_step = canonical_two_step_law(p if weights.dtype == object else p.astype(np.float64), law, weights)
    return RuleLaw(
        acceptance=two_step.acceptance,
        output_distribution=two_step.output_distribution,
        draft_law=law,
        details={
            "weights": weights,
            "selection_law": two_step.selection_law,
            "selection_acceptance": two_step.selection_acceptance,
            "optimum": solution.acceptance,
        },
    )
