"""Khisti et al.'s k = 2 results (Khisti et al. 2025, §3: Thm 2 and Thm 3) and their k > 2 form.

The extracted text of Khisti et al. (2025) lost the formulas; they are reconstructed here from the
max-flow / min-cut form of the OTM LP (docs/theory.md), in our letters (p target, q draft):

- Thm 3 (eq. 6): ``alpha* = min_S [ p(S) + q(S^c)^2 + 2 q(S) q(S^c) ]``; since
  ``q(S^c)^2 + 2 q(S) q(S^c) = 1 - q(S)^2`` this is the min cut ``p(S) + 1 - q(S)^2``.
- Thm 2 (eq. 5): ``alpha* = 1`` iff ``p(S) >= q(S)^2`` for every ``S``; the "natural
  counterpart" for k > 2 they verified numerically (§3, App. D) is ``p(S) >= q(S)^k``,
  which is exactly ``min cut >= 1`` and hence true by max-flow / min-cut.
"""
from __future__ import annotations

from ..tolerances import AGREEMENT_TOLERANCE
from .prefix_scan import _pair, _prefix_sums, prefix_scan, ratio_order


def khisti_k2_closed_form(p, q):
    """Optimal acceptance for k = 2 i.i.d. drafts, Khisti et al. 2025, Thm 3, eq. (6) as written
    (reconstructed): ``min_S p(S) + q(S^c)^2 + 2 q(S) q(S^c)``.

    The minimum is taken over the prefixes of the ``p/q`` order (see
    :mod:`otm.formulations.prefix_scan` for why prefixes suffice). This evaluates the
    paper's expression term by term, independently of :func:`prefix_scan`, so the two
    cross-check each other. Exact Fractions in, exact Fraction out.

    >>> khisti_k2_closed_form([1.0, 0.0], [0.5, 0.5])
    0.75
    """
    p, q = _pair(p, q)
    exact = p.dtype == object
    order = ratio_order(p, q)
    p_in = _prefix_sums(p[order], exact)  # [V+1] p(S) over every prefix S
    q_in = _prefix_sums(q[order], exact)
    q_out = 1 - q_in  # q(S^c)
    value = (p_in + q_out**2 + 2 * q_in * q_out).min()
    return value if exact else float(value)


def acceptance_is_one(p, q, k: int, draft_scheme: str = "iid", tolerance: float = AGREEMENT_TOLERANCE) -> bool:
    """Whether the optimal acceptance equals 1 (Khisti et al. 2025, Thm 2 for k = 2; any k here).

    ``alpha* = 1`` iff ``p(H) >= Q(all drafts in H)`` for every ``H`` (i.i.d.:
    ``p(H) >= q(H)^k``), i.e. iff the min cut is ``>= 1``. By the prefix theorem the
    min cut is attained on a prefix of the ``p/q`` order, so checking the ``n + 1``
    prefixes decides it. Float inputs: true when ``alpha* >= 1 - tolerance``; exact
    Fraction inputs are decided exactly.

    >>> acceptance_is_one([0.5, 0.5], [0.6, 0.4], 2)   # p(S) >= q(S)^2 for every S
    True
    >>> acceptance_is_one([0.5, 0.5], [0.9, 0.1], 2)   # S = {0}: 0.5 < 0.81
    False
    """
    value = prefix_scan(p, q, k, draft_scheme).acceptance
    if isinstance(value, float):
        return bool(value >= 1.0 - tolerance)
    return bool(value >= 1)

