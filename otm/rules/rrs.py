"""Recursive rejection sampling (RRS) with k i.i.d. drafts (SpecInfer / SpecTr-style).

SpecHub (Sun et al. 2024), Alg. 1 without the red lines: ``x_1..x_k`` i.i.d. from ``q``; with ``p_1 = p``,
draft ``x_i`` is accepted with ``min(1, p_i(x_i) / q(x_i))``, on rejection
``p_{i+1} = norm(max(p_i - q, 0))``, after ``k`` rejections ``Y ~ p_{k+1}``. It is
:mod:`otm.rules.specinfer` with ``q_1 = ... = q_k = q``, so its acceptance is
``1 - prod_i (1 - alpha_i)``, ``alpha_i = sum min(p_i, q)`` (docs/theory.md), and the
membership acceptance equals the "a draft was accepted" probability (see that module).
"""
from __future__ import annotations

from ..distributions import check_draft_count
from ..draft_laws import iid_law
from .base import RuleLaw
from .enumeration import count_iid, validate_one_q
from .specinfer import recursive_law


def exact_law(p, q, k: int, *, method: str = "auto") -> RuleLaw:
    """Exact law of RRS with ``k`` i.i.d. drafts from one ``q`` (``[V]``).

    ``method``: ``"auto"``, ``"enumeration"`` or ``"closed_form"``
    (:func:`otm.rules.specinfer.recursive_law`). A list of per-draft laws raises
    :class:`NotApplicableError`: that is the ``"specinfer"`` rule.

    >>> float(exact_law([0.5, 0.5], [1.0, 0.0], 3).acceptance)
    0.5
    """
    k = check_draft_count(k)
    p, q = validate_one_q(
        p,
        q,
        "rule 'rrs' draws all k drafts i.i.d. from one q ([V] vector); "
        "for a different draft distribution per draft use rule 'specinfer'",
    )
    return recursive_law(p, [q] * k, lambda: iid_law(q, k), count_iid(q, k), method, "rrs")
