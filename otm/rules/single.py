"""Single-draft speculative sampling (Leviathan et al.; Leviathan et al. 2023, Alg. 1).

One draft ``x ~ q`` is accepted with ``min(1, p(x) / q(x))``; on rejection
``Y ~ norm(max(p - q, 0))``. Output law ``p``; acceptance
``sum min(p, q) = 1 - TV(p, q)``. A rejected ``x`` has ``p(x) < q(x)``, so the
residual never outputs it: membership acceptance = "draft accepted" probability.
"""
from __future__ import annotations

from ..distributions import check_draft_count
from ..draft_laws import iid_law
from ..errors import InvalidDraftCountError
from .base import RuleLaw
from .enumeration import count_iid, validate_one_q
from .specinfer import recursive_law


def exact_law(p, q, k: int = 1, *, method: str = "auto") -> RuleLaw:
    """Exact law of the single-draft rule; ``k`` must be 1.

    >>> float(exact_law([0.5, 0.5], [0.25, 0.75]).acceptance)
    0.75
    """
    if check_draft_count(k) != 1:
        raise InvalidDraftCountError(f"rule 'single' verifies exactly one draft (k=1), got k={k}")
    p, q = validate_one_q(p, q, "rule 'single' takes one draft distribution q ([V] vector)")
    return recursive_law(p, [q], lambda: iid_law(q, 1), count_iid(q, 1), method, "single")
