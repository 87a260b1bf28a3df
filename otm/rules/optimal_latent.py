"""Rule ``"optimal_latent"``: the i.i.d.-optimal verifier on the latent draws behind drafts
without replacement.

The ``k`` distinct drafts are the first ``k`` distinct tokens of an i.i.d. sequence from
``q``; given them, the first ``k`` terms of that sequence are exactly i.i.d. from ``q``
(:func:`otm.rules.optimal.latent_iid_tuples`), and every one of them is a draft. The
i.i.d.-optimal rule (:mod:`otm.rules.optimal`) applied to those terms is lossless and accepts
a draft with probability ``alpha*(p, iid law)``; its membership acceptance lies between that
and ``alpha*(p, without-replacement law)``, the optimum of its own draft law, which
:mod:`otm.rules.optimal_wor` attains (docs/optimal-verifier.md#the-latent-rule-for-drafts-without-replacement).
"""
from __future__ import annotations

from .base import RuleLaw
from .optimal import exact_law as _optimal_law


def exact_law(p, q, k: int, *, method: str = "auto") -> RuleLaw:
    """Exact law of the rule for ``k`` drafts without replacement, by enumeration of the
    draft tuples and, for each, of its latent i.i.d. tuples (up to ``k^k``).
    ``details["draft_accepted"] = alpha*(p, iid law)``.

    >>> law = exact_law([0.5, 0.3, 0.2], [0.2, 0.3, 0.5], 2)
    >>> float(law.output_distribution.sum()).__round__(12)  # lossless: the output law is p
    1.0
    """
    return _optimal_law(p, q, k, "without_replacement", method=method)


__all__ = ["exact_law"]
