"""The instance every formulation of :mod:`otm.formulations` takes: a target ``p`` checked
against a joint draft law ``Q`` (:class:`otm.draft_laws.DraftLaw`), the number type both are
used in, and the distinct tokens ``S(x)`` of every draft tuple. Shared by the max flow and the
LPs (which certify their values with the max flow, :mod:`otm.formulations._lp`).
"""
from __future__ import annotations

import numpy as np

from solvers.registry import backend_capabilities

from ..distributions import as_distribution, as_exact_distribution
from ..draft_laws import DraftLaw
from ..errors import InvalidDistributionError, ShapeMismatchError


def target_for(p, law: DraftLaw, backend: str | None = None) -> tuple[np.ndarray, bool]:
    """Validate the target ``p`` against ``law`` and decide the number type.

    Returns ``(p, exact)``: exact (Fraction object arrays) only when both ``p`` and the
    law's probabilities are exact and ``backend`` (if given) is a rational backend;
    otherwise everything is used in float64.
    """
    if not isinstance(law, DraftLaw):
        raise InvalidDistributionError(f"law must be an otm.draft_laws.DraftLaw (e.g. otm.draft_law('iid', q, k)), got {type(law).__name__}")
    arr = np.asarray(p)
    exact = arr.dtype == object and law.is_exact
    if exact and backend is not None:
        exact = backend_capabilities(backend).exact
    p = as_exact_distribution(arr, "p (target)") if exact else as_distribution(
        arr.astype(np.float64) if arr.dtype == object else arr, "p (target)"
    )
    if p.size != law.vocab_size:
        raise ShapeMismatchError(
            f"p (target) has {p.size} tokens but the draft law is over {law.vocab_size}"
        )
    return p, exact


def law_probs(law: DraftLaw, exact: bool) -> np.ndarray:
    """``[n]`` the law's probabilities as Fractions (exact) or float64."""
    return law.probs if exact else law.probs.astype(np.float64)


def distinct_positions(law: DraftLaw) -> tuple[np.ndarray, np.ndarray]:
    """``(tuple_index, token)`` of every distinct token of every tuple (``S(x)`` listed),
    in row-major order of ``law.tuples``."""
    rows, cols = np.nonzero(law.first_occurrence())
    return rows, law.tuples[rows, cols]
