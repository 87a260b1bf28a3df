"""Truncated importance-weighted speculative sampling (Khisti et al. 2025, §4, Remark 3), batched.

The rule is :mod:`otm.rules.importance_sampling_truncated` (read its docstring for the
reconstruction of the paper's lost formulas); this module samples it:

1. ``k`` i.i.d. drafts from ``q``.
2. Truncated alphabet ``Omega_0``: the ``alphabet_size`` most probable tokens of ``p``;
   drafts outside it are dropped; ``p`` and ``q`` are restricted to it and renormalised
   (``p~``, ``q~``) for the selection stages.
3. Successive selection (Remark 3): the first kept draft becomes ``Y``; a kept draft
   ``x`` at position ``m >= 1`` meets the running ``Y = y`` in pair stage ``m``, which
   keeps ``y`` with probability ``F_m[y, x]`` (1 when ``y = x``), else takes ``x``. The
   ``F_m`` are the truncated-LP pair rules of
   :func:`otm.rules.importance_sampling_truncated.pair_stage` (stage 1 on ``(q~, q~)``,
   stage ``m`` on ``(law of stage m-1, q~)``).
4. Speculative sampling of the selected ``Z`` against ``p~`` with ``Z``'s true law ``P_I``
   (a sub-probability: nothing is selected when every draft is dropped): accept with
   ``min(1, p~(Z) / P_I(Z))``, else (or when nothing was selected) ``Y ~ norm((p~ - P_I)^+)``.
5. Post-processing: keep that token with probability ``p(Omega_0)``, else output a token
   of the complement of ``Omega_0`` with probability proportional to ``p``.

``P_I`` without enumerating the ``V^k`` draft tuples (our derivation): with
``q_0 = q`` restricted to ``Omega_0`` (not renormalised, mass ``kappa``), let ``L_m`` be
the sub-probability law of ``Y`` after position ``m`` and ``N_m = (1 - kappa)^(m+1)`` the
probability that nothing was kept yet. ``L_0 = q_0`` and

    L_m = (1 - kappa) L_{m-1} + N_{m-1} q_0 + L_{m-1} * (F_m q_0) + q_0 * ((1 - F_m)^T L_{m-1}),

the last two terms being the pair-stage law with inputs ``L_{m-1}`` and ``q_0``
(bilinear, so it holds for sub-probabilities); ``P_I = L_{k-1}``. The tests check it
against the enumerated ``selection_law`` of the exact law.

Cost (documented exception to "no numpy in the fast path"): the pair rules come from
an LP, solved on the CPU with otm's HiGHS backend, once per distinct ``(p, q)`` row of
the batch and per stage (``k - 1`` LPs with at most ``s (s - 1)`` free weights over an
alphabet of ``alphabet_size`` tokens; milliseconds each), plus one ``O(V log V)`` sort
per stage for the truncation order. Rows are deduplicated with ``torch.unique``; the
tables (``[alphabet_size, alphabet_size]`` per stage) then go back to the input device
and the sampling itself is batched torch. The inputs are copied to the CPU once per call.

Randomness: ``uniforms_per_row(k) = k + 3`` - columns ``0..k-2`` the pair stages,
``k-1`` the acceptance of ``Z``, ``k`` the inner residual, ``k+1`` the post-processing
keep, ``k+2`` the complement draw. ``accepted_index`` is the position of ``Z`` when it is
accepted and kept, else ``-1``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from otm.distributions import as_distribution_pair
from otm.errors import InvalidDraftCountError
from otm.rules.importance_sampling_truncated import (
    DEFAULT_ALPHABET_SIZE,
    DEFAULT_TRUNCATION,
    pair_stage,
    truncation_order,
)

from .base import (
    VerifierOutput,
    check_k,
    check_verify_inputs,
    draw_uniforms,
    first_draft_probs,
    sample_iid,
    sample_weighted,
    with_fallback,
)

draft_scheme = "iid"

__all__ = [
    "DEFAULT_ALPHABET_SIZE",
    "DEFAULT_TRUNCATION",
    "SelectionPlan",
    "draft_scheme",
    "selection_plan",
    "sample_drafts",
    "uniforms_per_row",
    "verify",
]


def uniforms_per_row(k: int) -> int:
    """``k - 1`` stage selections, acceptance, inner residual, keep, complement."""
    return check_k(k) + 3


def sample_drafts(draft_probs: torch.Tensor, k: int, generator: torch.Generator | None) -> torch.Tensor:
    """``[batch, k]`` i.i.d. drafts from ``draft_probs`` ``[batch, vocab]``."""
    return sample_iid(draft_probs, k, generator)


@dataclass(frozen=True)
class SelectionPlan:
    """The per-instance tables of the rule (numpy, float64), on the alphabet ``Omega_0``.

    Attributes:
        alphabet: ``[A]`` token ids of ``Omega_0``, ascending.
        select_first: ``[k-1, A, A]`` the pair rules ``F_m`` (compact indices).
        selection_law: ``[A]`` ``P_I``, the law of the selected token ``Z``.
        accept: ``[A]`` ``min(1, p~ / P_I)`` (0 where ``P_I = 0``).
        residual: ``[A]`` ``norm((p~ - P_I)^+)`` (zeros when nothing is ever rejected).
        kept_target: ``p(Omega_0)``.
    """

    alphabet: np.ndarray  # [A]
    select_first: np.ndarray  # [k-1, A, A]
    selection_law: np.ndarray  # [A]
    accept: np.ndarray  # [A]
    residual: np.ndarray  # [A]
    kept_target: float


def _check_params(s: int, alphabet_size: int | None) -> None:
    if isinstance(s, bool) or not isinstance(s, int) or s < 0:
        raise InvalidDraftCountError(f"the LP truncation s must be an integer >= 0, got {s!r}")
    if alphabet_size is not None and (isinstance(alphabet_size, bool) or not isinstance(alphabet_size, int) or alphabet_size < 1):
        raise InvalidDraftCountError(f"alphabet_size must be an integer >= 1 or None, got {alphabet_size!r}")


def selection_plan(
    p, q, k: int, s: int = DEFAULT_TRUNCATION, alphabet_size: int | None = DEFAULT_ALPHABET_SIZE, backend: str = "highs"
) -> SelectionPlan:
    """The tables of one instance (``p``, ``q``: ``[V]``), computed on the CPU.

    The pair stages run on the compact alphabet; the number of free tokens of each stage
    is the number of alphabet tokens among the first ``s`` of the truncation order over
    the whole vocabulary (:func:`otm.rules.importance_sampling_truncated.truncation_order`
    on the embedded vectors), so the free set and the fixed rule are those of the exact law.
    """
    k = check_k(k)
    _check_params(s, alphabet_size)
    p, q = as_distribution_pair(p, q)
    V = p.size
    inside = np.ones(V, dtype=bool)
    if alphabet_size is not None and alphabet_size < V:
        inside[:] = False
        inside[np.argsort(-p, kind="stable")[:alphabet_size]] = True
    alphabet = np.flatnonzero(inside)
    kept_target = float(p[alphabet].sum())
    p_inner = p[alphabet] / kept_target
    q_kept = q[alphabet]  # q_0
    kappa = float(q_kept.sum())
    q_inner = q_kept / kappa if kappa > 0 else q_kept

    def embedded(values: np.ndarray) -> np.ndarray:
        full = np.zeros(V)
        full[alphabet] = values
        return full

    stages, previous = [], q_inner
    p_full, q_full = embedded(p_inner), embedded(q_inner)
    for _ in range(k - 1):
        rank = truncation_order(p_full, embedded(previous), q_full)
        free = int((rank[alphabet] < s).sum())
        stage = pair_stage(p_inner, previous, q_inner, free, backend)
        stages.append(stage["select_first"])
        previous = stage["law"]
    A = alphabet.size
    select_first = np.stack(stages) if stages else np.zeros((0, A, A))

    law, nothing = q_kept.copy(), 1.0 - kappa
    for F in select_first:
        paired = law * (F @ q_kept) + q_kept * ((1.0 - F).T @ law)
        law, nothing = max(1.0 - kappa, 0.0) * law + nothing * q_kept + paired, nothing * max(1.0 - kappa, 0.0)
    accepted_mass = np.minimum(p_inner, law)
    accept = np.divide(accepted_mass, law, out=np.zeros(A), where=law > 0)
    excess = p_inner - accepted_mass
    residual = excess / excess.sum() if excess.sum() > 0 else np.zeros(A)
    return SelectionPlan(alphabet, select_first, law, accept, residual, kept_target)


def _renormalised(row: np.ndarray) -> np.ndarray:
    """A float32 softmax over a large vocabulary sums to 1 only within ~1e-5: rows are
    renormalised in float64 before :func:`selection_plan` validates them (NaN, inf or
    negative entries still raise :class:`otm.errors.InvalidDistributionError`)."""
    total = row.sum()
    return row / total if np.isfinite(total) and total > 0 else row


def verify(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, k, vocab]
    draft_tokens: torch.Tensor,  # [batch, k]
    generator: torch.Generator | None,
    *,
    s: int = DEFAULT_TRUNCATION,
    alphabet_size: int | None = DEFAULT_ALPHABET_SIZE,
    backend: str = "highs",
) -> VerifierOutput:
    """Sample the truncated IS rule (module docstring); ``draft_probs[:, 0]`` is ``q``."""
    batch, k, vocab = check_verify_inputs(target_probs, draft_probs, draft_tokens)
    _check_params(s, alphabet_size)
    u = draw_uniforms(generator, batch, uniforms_per_row(k), target_probs)
    q = first_draft_probs(draft_probs)
    device, dtype = target_probs.device, target_probs.dtype

    instances, which = torch.unique(torch.cat([target_probs, q], dim=1), dim=0, return_inverse=True)
    rows = instances.detach().to("cpu", torch.float64).numpy()
    plans = [selection_plan(*(_renormalised(half) for half in (r[:vocab], r[vocab:])), k, s, alphabet_size, backend)
             for r in rows]

    def table(name: str) -> torch.Tensor:
        return torch.as_tensor(np.stack([getattr(pl, name) for pl in plans]), dtype=dtype, device=device)[which]

    alphabet = torch.as_tensor(np.stack([pl.alphabet for pl in plans]), device=device)[which]  # [batch, A]
    select_first = table("select_first")  # [batch, k-1, A, A]
    accept_table, residual_table = table("accept"), table("residual")  # [batch, A]
    kept_target = torch.as_tensor([pl.kept_target for pl in plans], dtype=dtype, device=device)[which]
    A = alphabet.shape[1]
    compact = torch.full((batch, vocab), -1, dtype=torch.int64, device=device)
    compact = compact.scatter(1, alphabet, torch.arange(A, device=device).expand(batch, A))

    held = torch.full((batch,), -1, dtype=torch.int64, device=device)  # compact index of Y
    held_position = torch.full_like(held, -1)
    for m in range(k):
        c = compact.gather(1, draft_tokens[:, m : m + 1]).squeeze(1)
        inside = c >= 0
        if m == 0:
            take = inside
        else:
            F = select_first[:, m - 1].reshape(batch, A * A)
            keep_prob = F.gather(1, (held.clamp(min=0) * A + c.clamp(min=0)).unsqueeze(1)).squeeze(1)
            take = inside & ((held < 0) | ~(u[:, m - 1] < keep_prob))
        held = torch.where(take, c, held)
        held_position = torch.where(take, torch.full_like(held, m), held_position)

    selected = held >= 0
    accept_prob = accept_table.gather(1, held.clamp(min=0).unsqueeze(1)).squeeze(1)
    accepted = selected & (u[:, k - 1] < accept_prob)
    chosen = alphabet.gather(1, held.clamp(min=0).unsqueeze(1)).squeeze(1)
    p_inner = target_probs.gather(1, alphabet)
    inner_residual = with_fallback(residual_table, p_inner)
    from_residual = alphabet.gather(1, sample_weighted(inner_residual, u[:, k]).unsqueeze(1)).squeeze(1)
    inner = torch.where(accepted, chosen, from_residual)

    keep = u[:, k + 1] < kept_target
    outside = target_probs.masked_fill(compact >= 0, 0.0)
    from_outside = sample_weighted(with_fallback(outside, target_probs), u[:, k + 2])
    kept_inner = keep | (outside.sum(dim=-1) <= 0)
    tokens = torch.where(kept_inner, inner, from_outside)
    accepted_index = torch.where(accepted & kept_inner, held_position, torch.full_like(held_position, -1))
    return VerifierOutput(tokens=tokens, accepted_index=accepted_index)
