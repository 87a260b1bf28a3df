"""Ensemble laws ``r = E(p_1, .., p_n)`` and verification against them, batched in torch.

Speculative Ensemble (Speculative Ensemble, Fu et al. 2025, §3.2, eqs. (3)-(6); §3.4 for ``n`` models): a token ``x``
proposed by a model with next-token law ``s`` (the *proposal* law) is verified against
the ensemble ``r`` instead of a single target: accept with ``min(1, r(x) / s(x))``
(eq. (6)), else draw ``Y ~ norm(max(r - s, 0))``. That is single-draft speculative
sampling (Leviathan et al. 2023, Alg. 1) with target ``r``, so ``Y ~ r`` exactly and the acceptance is
``sum min(s, r) = 1 - TV(s, r)`` with ``TV = 1/2 sum |s - r|`` (eq. (7); the paper's
``D_TV`` is the unnormalised sum, the same number). Its exact law is
:func:`otm.rules.speculative_ensemble.exact_law_weighted` / ``exact_law_contrastive``.

An *ensemble* here is a callable ``E(logits, temperature) -> r``: ``logits`` is
``[n_models, batch, vocab]`` (model ``i``'s next-token logits), ``r`` is ``[batch, vocab]``.

- ``weighted`` (eq. (4), and its ``n``-model form of §3.4): ``r = sum_i w_i p_i`` with
  ``p_i = softmax(l_i / T)`` and weights ``w_i >= 0`` summing to 1. Two models
  ``(q, p)`` with ``lam``: ``w = (lam, 1 - lam)``, i.e. ``r = lam q + (1 - lam) p`` (model 0
  is the proposal model ``q``, as in :mod:`otm.rules.speculative_ensemble`).
- ``contrastive`` (eq. (5), two models only): ``r = softmax((l_p - mu l_q) / T)`` with
  ``q`` = model 0 (the amateur, default proposer) and ``p`` = model 1. For ``T > 0`` this
  is ``r`` proportional to ``p_T q_T^(-mu)`` with ``p_T, q_T`` the tempered laws, the law
  of :func:`otm.rules.speculative_ensemble.contrastive_ensemble` applied to them.

Temperature (reconstructed; the paper uses ``T = 1`` for weighted and ``T in {0, 1}`` for
contrastive without defining ``T`` for an ensemble): each model's law is tempered, and
``r`` is the ensemble of the tempered laws. ``T = 0`` is the limit ``T -> 0``: the
weighted ``r`` is the mixture of the models' argmax one-hots, the contrastive ``r`` the
one-hot of ``argmax(l_p - mu l_q)`` (greedy contrastive decoding).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from decoding.runtime.loop import probs_from_logits
from decoding.verifiers import single
from decoding.verifiers.base import VerifierOutput
from otm.errors import InvalidDistributionError, NotApplicableError, ShapeMismatchError, UnknownNameError
from otm.rules.speculative_ensemble import DEFAULT_CONTRAST
from otm.tolerances import SUM_TOLERANCE

#: Names of the built-in ensembles (``otm`` rule names ``ensemble_<name>``).
ENSEMBLES = ("weighted", "contrastive")

#: ``E(logits [n_models, batch, vocab], temperature) -> r [batch, vocab]``.
Ensemble = Callable[[torch.Tensor, float], torch.Tensor]


def check_ensemble_weights(weights: Sequence[float], n_models: int) -> tuple[float, ...]:
    """``weights`` as a tuple of ``n_models`` non-negative floats summing to 1 (within
    :data:`otm.tolerances.SUM_TOLERANCE`), else :class:`InvalidDistributionError`."""
    weights = tuple(float(w) for w in weights)
    if len(weights) != n_models:
        raise ShapeMismatchError(f"need one ensemble weight per model ({n_models}), got {len(weights)}")
    if any(not (w >= 0) for w in weights) or abs(sum(weights) - 1) > SUM_TOLERANCE:
        raise InvalidDistributionError(f"ensemble weights must be >= 0 and sum to 1, got {weights}")
    return weights


def weighted_ensemble_probs(
    logits: torch.Tensor,  # [n_models, batch, vocab]
    temperature: float,
    weights: Sequence[float],
) -> torch.Tensor:  # [batch, vocab]
    """``r = sum_i w_i softmax(l_i / T)`` (Speculative Ensemble, Fu et al. 2025, eq. (4); §3.4 for ``n`` models)."""
    probs = probs_from_logits(logits, temperature)  # [n, batch, vocab]
    w = torch.as_tensor(check_ensemble_weights(weights, logits.shape[0]), dtype=probs.dtype, device=probs.device)
    return (w[:, None, None] * probs).sum(dim=0)


def contrastive_ensemble_probs(
    logits: torch.Tensor,  # [2, batch, vocab]: (amateur q, expert p)
    temperature: float,
    mu: float = DEFAULT_CONTRAST,
) -> torch.Tensor:  # [batch, vocab]
    """``r = softmax((l_p - mu l_q) / T)`` (Speculative Ensemble, Fu et al. 2025, eq. (5)), ``l_q = logits[0]``,
    ``l_p = logits[1]``. A token masked in ``p`` (``l_p = -inf``) stays masked; a token
    masked in ``q`` only is undefined for ``mu > 0`` (``+inf``): :class:`NotApplicableError`."""
    if logits.shape[0] != 2:
        raise NotApplicableError(f"the contrastive ensemble takes two models (amateur, expert), got {logits.shape[0]}")
    mu = float(mu)
    if not math.isfinite(mu):
        raise InvalidDistributionError(f"the contrast coefficient mu must be finite, got {mu!r}")
    amateur, expert = logits[0], logits[1]
    masked = torch.isneginf(expert)
    combined = torch.where(masked, expert, expert - mu * torch.where(masked, torch.zeros_like(amateur), amateur))
    if bool(torch.isposinf(combined).any()):
        raise NotApplicableError("contrastive ensemble softmax(l_p - mu l_q) is undefined where q = 0 < p (+inf logit)")
    return probs_from_logits(combined, temperature)


def make_ensemble(
    ensemble: str | Ensemble,
    n_models: int,
    *,
    weights: Sequence[float] | None = None,
    lam: float | None = None,
    mu: float | None = None,
) -> Ensemble:
    """The callable ``E(logits, temperature)`` for ``ensemble``:

    - ``"weighted"``: ``weights`` (one per model), or ``lam`` for two models
      (``w = (lam, 1 - lam)``), default uniform ``1 / n`` (the paper's ``lam = 0.5`` and
      ``1/3`` for three models, §4);
    - ``"contrastive"``: two models, ``mu`` (default ``0.1``, §4);
    - a callable is returned unchanged (any probability- or logit-level ensemble).
    """
    if callable(ensemble):
        return ensemble
    if ensemble == "weighted":
        if mu is not None:
            raise InvalidDistributionError("mu is the contrastive coefficient; the weighted ensemble takes weights or lam")
        if weights is not None and lam is not None:
            raise InvalidDistributionError("give the ensemble weights or lam, not both")
        if lam is not None:
            if n_models != 2:
                raise NotApplicableError(f"lam weighs two models (q, p); for {n_models} models give weights")
            weights = (float(lam), 1.0 - float(lam))
        weights = check_ensemble_weights(weights if weights is not None else [1.0 / n_models] * n_models, n_models)
        return lambda logits, temperature: weighted_ensemble_probs(logits, temperature, weights)
    if ensemble == "contrastive":
        if weights is not None or lam is not None:
            raise InvalidDistributionError("the contrastive ensemble takes mu, not weights or lam")
        if n_models != 2:
            raise NotApplicableError(f"the contrastive ensemble takes two models (amateur, expert), got {n_models}")
        mu = DEFAULT_CONTRAST if mu is None else float(mu)
        return lambda logits, temperature: contrastive_ensemble_probs(logits, temperature, mu)
    raise UnknownNameError(f"unknown ensemble {ensemble!r}; choose one of {', '.join(ENSEMBLES)} or pass a callable")


def verify_against_ensemble(
    ensemble_probs: torch.Tensor,  # [batch, vocab]  r
    proposal_probs: torch.Tensor,  # [batch, vocab]  law the token was drawn from
    proposal_tokens: torch.Tensor,  # [batch] int64
    generator: torch.Generator | None,
) -> VerifierOutput:
    """Speculative Ensemble (Fu et al. 2025), eq. (6): accept ``x`` if ``u < r(x) / s(x)``, else ``Y ~ norm(max(r - s, 0))``.

    The single-draft verifier :func:`decoding.verifiers.single.verify` with target ``r``
    (its randomness contract: two uniforms per row; no NaN when ``r = s``).
    ``accepted_index`` is 0 for an accepted token, -1 for a residual draw.

    >>> r = torch.tensor([[0.5, 0.5]], dtype=torch.float64); s = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    >>> out = verify_against_ensemble(r, s, torch.tensor([0]), torch.Generator().manual_seed(0))
    >>> out.tokens.shape, out.accepted_index.shape
    (torch.Size([1]), torch.Size([1]))
    """
    return single.verify(ensemble_probs, proposal_probs.unsqueeze(1), proposal_tokens.unsqueeze(1), generator)
