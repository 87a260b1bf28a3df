"""Speculative Ensemble (Speculative Ensemble, Fu et al. 2025, §3.2, eqs. (3)-(7), Thm 3.2).

The proposal (draft) model ``q`` proposes one token; it is verified not against the
target ``p`` but against an ensemble ``r = E(q, p)`` of the two models: accept ``x`` with
``min(1, r(x) / q(x))`` (eq. (6)); on rejection ``Y ~ norm(max(r - q, 0))``. This is the
single-draft rule (Leviathan et al. 2023, Alg. 1) with target ``r``, so the **output law is ``r``, not
``p``** and the acceptance is

    sum_x min(q(x), r(x)) = 1 - TV(q, r),   TV = 1/2 sum |q - r|

(eq. (7) writes ``1 - 1/2 D_TV`` with ``D_TV = sum |q - r|`` unnormalised; same value).

Ensemble functions:

- weighted (eq. (4)): ``r = lam q + (1 - lam) p``; Thm 3.2: acceptance ``>= lam``.
- contrastive (eq. (5)): ``r = Softmax(l_p - mu l_q)`` over logits; as logits are log
  probabilities up to a per-model constant, ``r`` is proportional to ``p q^(-mu)``. It is
  undefined where ``q = 0 < p`` for ``mu > 0`` (the logit difference is ``+inf``): that
  raises :class:`otm.errors.NotApplicableError`. ``q^(-mu)`` is irrational in general,
  so this rule is computed in float64 even for exact inputs. (The paper's form, not the
  probability-space ``max(0, (1 + mu) p - mu q)`` variant of contrastive decoding.)

The paper's defaults (§4: ``lam = 0.5``, ``mu = 0.1``) are the defaults here. The
alternate proposal framework (§3.3, Alg. 1) swaps which model proposes from cycle to
cycle; to study the swapped cycle, call the rule with the two distributions exchanged.
Only ``k = 1`` exists (the paper verifies one draft per position).
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..distributions import as_distribution, check_draft_count
from ..draft_laws import iid_law
from ..errors import InvalidDistributionError, InvalidDraftCountError, NotApplicableError
from .base import RuleLaw
from .enumeration import count_iid, is_exact, validate_one_q
from .specinfer import recursive_law

#: Speculative Ensemble (Fu et al. 2025), §4: the weighted-ensemble weight of the proposal model.
DEFAULT_WEIGHT = 0.5
#: Speculative Ensemble (Fu et al. 2025), §4: the contrastive-decoding coefficient.
DEFAULT_CONTRAST = 0.1


def weighted_ensemble(p: np.ndarray, q: np.ndarray, lam) -> np.ndarray:
    """``[V]`` ``r = lam q + (1 - lam) p`` (eq. (4)); ``lam`` in ``[0, 1]``."""
    if not 0 <= lam <= 1:
        raise InvalidDistributionError(f"the ensemble weight lam must lie in [0, 1], got {lam!r}")
    return lam * q + (1 - lam) * p


def contrastive_ensemble(p: np.ndarray, q: np.ndarray, mu: float) -> np.ndarray:
    """``[V]`` ``r`` proportional to ``p q^(-mu)`` = ``Softmax(l_p - mu l_q)`` (eq. (5)), float64."""
    mu = float(mu)
    if not np.isfinite(mu):
        raise InvalidDistributionError(f"the contrast coefficient mu must be finite, got {mu!r}")
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    if mu > 0 and np.any((q == 0) & (p > 0)):
        bad = int(np.flatnonzero((q == 0) & (p > 0))[0])
        raise NotApplicableError(
            f"contrastive ensemble Softmax(l_p - mu l_q) is undefined where q = 0 < p "
            f"(token {bad}): the logit difference is +inf"
        )
    weights = np.zeros_like(p)
    live = (p > 0) & (q > 0) if mu < 0 else p > 0
    with np.errstate(divide="ignore"):
        logits = np.log(p[live]) - mu * np.log(q[live])
    weights[live] = np.exp(logits - logits.max())
    return as_distribution(weights / weights.sum(), "ensemble r")


def _ensemble_law(p, q, k, ensemble, method: str, rule: str, extra: dict) -> RuleLaw:
    if check_draft_count(k) != 1:
        raise InvalidDraftCountError(f"rule {rule!r} verifies one proposal per position (k=1), got k={k}")
    p, q = validate_one_q(p, q, f"rule {rule!r} takes one proposal distribution q ([V] vector)")
    r = ensemble(p, q)
    if is_exact(p) and not is_exact(r):
        q = q.astype(np.float64)
    law = recursive_law(r, [q], lambda: iid_law(q, 1), count_iid(q, 1), method, rule)
    law.details.update(extra, ensemble=r)
    return law


def exact_law_weighted(p, q, k: int = 1, *, lam=DEFAULT_WEIGHT, method: str = "auto") -> RuleLaw:
    """Exact law of Speculative Ensemble with the weighted ensemble (output law ``r``).

    >>> law = exact_law_weighted([1.0, 0.0], [0.0, 1.0], lam=0.5)
    >>> float(law.acceptance), law.output_distribution.tolist()
    (0.5, [0.5, 0.5])
    """

    def ensemble(p, q):
        weight = lam
        if is_exact(p):  # keep exact inputs exact (floats as in otm.distributions.as_exact_distribution)
            weight = Fraction(lam).limit_denominator(10**6) if isinstance(lam, float) else Fraction(lam)
        return weighted_ensemble(p, q, weight)

    return _ensemble_law(p, q, k, ensemble, method, "ensemble_weighted", {"lam": lam})


def exact_law_contrastive(p, q, k: int = 1, *, mu: float = DEFAULT_CONTRAST, method: str = "auto") -> RuleLaw:
    """Exact law of Speculative Ensemble with contrastive decoding (output law ``r``, float64).

    >>> law = exact_law_contrastive([0.5, 0.5], [0.5, 0.5], mu=0.1)
    >>> law.output_distribution.tolist(), float(law.acceptance)
    ([0.5, 0.5], 1.0)
    """
    return _ensemble_law(p, q, k, lambda p, q: contrastive_ensemble(p, q, mu), method, "ensemble_contrastive", {"mu": mu})

