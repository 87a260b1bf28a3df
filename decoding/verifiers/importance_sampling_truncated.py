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
alphabet of ``alphabet_size`` tokens; about 0.8 ms of CPU each at ``A = 40``, ``s = 5``, of
which HiGHS itself (creating the solver and solving) is about 0.35 ms and the rest building
the LP, passing it and checking its certificate; this dominates), plus
``O(A log A)`` per stage for the truncation order (:func:`free_count`; sorting the
vocabulary twice per stage, as the exact law's
:func:`otm.rules.importance_sampling_truncated.truncation_order` does, cost more than
the LPs). Rows are deduplicated (:func:`distinct_rows`); the alphabets
(:func:`batched_top_tokens`) and the row sums are computed on the input device, and only
the values of ``p`` and ``q`` on the alphabets go to the CPU (:func:`plan_on_alphabet`).
The tables (``[alphabet_size, alphabet_size]`` per stage) then go back to the input
device and the sampling itself is batched torch: draft positions in the alphabet by
``searchsorted``, and V-sized work only for the rows whose output leaves the alphabet
(the complement draw). V-sized passes per distinct row: 5 (two fingerprints, two sums,
``topk``), 2 more for a row tied across the alphabet's boundary (the candidate mask and its
``nonzero``), plus 4 per row that leaves the alphabet (gather ``p``, zero the alphabet, sum,
inverse-CDF scan).

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
from otm.errors import InvalidDistributionError, InvalidDraftCountError
from otm.rules.importance_sampling_truncated import (
    DEFAULT_ALPHABET_SIZE,
    DEFAULT_TRUNCATION,
    pair_stage,
)

from .base import (
    VerifierOutput,
    check_k,
    check_verify_inputs,
    draw_uniforms,
    first_draft_probs,
    sample_iid,
    sample_residual,
    sample_weighted,
    take_rows,
    with_fallback,
)

draft_scheme = "iid"

__all__ = [
    "DEFAULT_ALPHABET_SIZE",
    "DEFAULT_TRUNCATION",
    "SelectionPlan",
    "distinct_rows",
    "draft_scheme",
    "batched_top_tokens",
    "free_count",
    "plan_on_alphabet",
    "selection_plan",
    "sample_drafts",
    "top_tokens",
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


def top_tokens(p: np.ndarray, size: int) -> np.ndarray:
    """``[size]`` ascending ids of the ``size`` largest entries of ``p`` ``[V]``, ties to the
    lower index (the first ``size`` of a stable sort by ``-p``), in ``O(V)``: every entry
    above the ``size``-th largest value, then the lowest-index entries equal to it."""
    threshold = np.partition(p, p.size - size)[p.size - size]
    above = np.flatnonzero(p > threshold)
    tied = np.flatnonzero(p == threshold)[: size - above.size]
    return np.sort(np.concatenate([above, tied]))


def free_count(key: np.ndarray, alphabet: np.ndarray, vocab: int, s: int) -> int:
    """How many alphabet tokens are among the first ``s`` of
    :func:`otm.rules.importance_sampling_truncated.truncation_order` over the whole
    vocabulary, in ``O(A log A)``: ``key`` ``[A]`` is ``p - (a + b) / 2`` on the alphabet
    (ascending ids ``alphabet``); every other token has key 0. The order is by key
    descending, ties to the lower index, so an alphabet token is preceded by the alphabet
    tokens before it in that order, plus no outside token if its key is positive, the
    ``id - (its position in the alphabet)`` outside tokens of lower id if its key is 0,
    and all ``V - A`` of them if it is negative."""
    rank = np.empty(key.size, dtype=np.int64)
    rank[np.argsort(-key, kind="stable")] = np.arange(key.size)
    outside_before = np.where(key < 0, vocab - key.size, np.where(key == 0, alphabet - np.arange(key.size), 0))
    return int((rank + outside_before < s).sum())


def selection_plan(
    p, q, k: int, s: int = DEFAULT_TRUNCATION, alphabet_size: int | None = DEFAULT_ALPHABET_SIZE, backend: str = "highs"
) -> SelectionPlan:
    """The tables of one instance (``p``, ``q``: ``[V]``), computed on the CPU.

    The pair stages run on the compact alphabet (:func:`top_tokens`, no sort of the
    vocabulary); the number of free tokens of each stage is the number of alphabet tokens
    among the first ``s`` of the truncation order over the whole vocabulary
    (:func:`free_count`, equal to :func:`otm.rules.importance_sampling_truncated.truncation_order`
    on the embedded vectors without sorting them), so the free set and the fixed rule are
    those of the exact law.
    """
    k = check_k(k)
    _check_params(s, alphabet_size)
    p, q = as_distribution_pair(p, q)
    alphabet = top_tokens(p, alphabet_size) if alphabet_size is not None and alphabet_size < p.size else np.arange(p.size)
    return plan_on_alphabet(alphabet, p[alphabet], q[alphabet], p.size, k, s, backend)


def plan_on_alphabet(
    alphabet: np.ndarray,  # [A] ascending token ids
    p_kept: np.ndarray,  # [A] p on the alphabet (p normalised over the vocabulary)
    q_kept: np.ndarray,  # [A] q on the alphabet, likewise
    vocab: int,
    k: int,
    s: int,
    backend: str = "highs",
) -> SelectionPlan:
    """:func:`selection_plan` from the alphabet and the values of ``p`` and ``q`` on it:
    nothing else of the vocabulary enters the plan but its size (inputs not validated)."""
    kept_target = float(p_kept.sum())
    p_inner = p_kept / kept_target
    kappa = float(q_kept.sum())
    q_inner = q_kept / kappa if kappa > 0 else q_kept

    stages, previous = [], q_inner
    for _ in range(k - 1):
        free = free_count(p_inner - (previous + q_inner) / 2, alphabet, vocab, s)
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


def batched_top_tokens(probs: torch.Tensor, size: int) -> list[np.ndarray]:
    """:func:`top_tokens` of every row of ``probs`` ``[n, V]`` (``size < V``). ``torch.topk``
    of ``size + 1`` entries: where the ``size``-th largest value is above the next one, the
    first ``size`` indices are the set (sorted); only the rows tied across that boundary take
    the entries above the ``size``-th value and the lowest-index entries equal to it, among
    the candidates ``>=`` it."""
    top = torch.topk(probs, size + 1, dim=1)
    clear = (top.values[:, size - 1] > top.values[:, size]).cpu().numpy()
    indices = top.indices[:, :size].cpu().numpy()
    alphabets = [np.sort(indices[r]) if clear[r] else None for r in range(probs.shape[0])]
    tied = np.flatnonzero(~clear)
    if tied.size:
        rows = torch.as_tensor(tied, device=probs.device)
        candidates = take_rows(probs, rows)
        threshold = top.values[rows, size - 1 : size]  # [m, 1]
        row, col = (candidates >= threshold).nonzero(as_tuple=True)  # row-major: ascending ids per row
        above = (candidates[row, col] > threshold[row, 0]).cpu().numpy()
        counts = torch.bincount(row, minlength=len(tied)).cpu().tolist()
        splits = np.cumsum(counts)[:-1]
        for r, cols, strict in zip(tied, np.split(col.cpu().numpy(), splits), np.split(above, splits)):
            alphabets[r] = cols[strict | (np.cumsum(~strict) <= size - strict.sum())]
    return alphabets


def distinct_rows(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, vocab]
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(first [n], which [batch])``: the first row of each distinct ``(p, q)`` pair, ascending,
    and the pair of every row (``first[which[b]]`` equals row ``b``). Rows are grouped by a
    fingerprint (two dot products, one read of each row), then every row is compared with
    its group's first row; only if some fingerprint is shared by different rows are the
    rows sorted (``torch.unique``). A fingerprint never merges different rows, it can at
    worst split equal ones (one more plan)."""
    weights = torch.linspace(1.0, 2.0, target_probs.shape[1], dtype=target_probs.dtype, device=target_probs.device)
    fingerprint = torch.stack([target_probs @ weights, draft_probs @ weights], dim=1)  # [batch, 2]
    _, which, counts = torch.unique(fingerprint, dim=0, return_inverse=True, return_counts=True)
    first = torch.full_like(counts, which.numel()).scatter_reduce_(
        0, which, torch.arange(which.numel(), device=which.device), "amin")
    if bool((counts > 1).any()):
        same = (target_probs == target_probs[first[which]]).all(dim=1) & (draft_probs == draft_probs[first[which]]).all(dim=1)
        if not bool(same.all()):
            _, which = torch.unique(torch.cat([target_probs, draft_probs], dim=1), dim=0, return_inverse=True)
            first = torch.full_like(which, which.numel())[: int(which.max()) + 1].scatter_reduce_(
                0, which, torch.arange(which.numel(), device=which.device), "amin")
    first, pair = first.sort()  # ascending rows: take_rows then copies nothing when every row is distinct
    return first, torch.empty_like(pair).scatter_(0, pair, torch.arange(pair.numel(), device=pair.device))[which]


def _plans(
    target_probs: torch.Tensor,  # [n, vocab]
    q: torch.Tensor,  # [n, vocab]
    k: int,
    s: int,
    alphabet_size: int | None,
    backend: str,
) -> list[SelectionPlan]:
    """The plan of every row (:func:`plan_on_alphabet`): the alphabets and the row sums on
    the input device, then only the ``[n, A]`` values on the alphabets go to the CPU, in
    float64. A float32 softmax over a large vocabulary sums to 1 only within ~1e-5, so the
    rows are renormalised by their sums; a sum that is not finite and positive (NaN, inf,
    an all-zero row) raises :class:`otm.errors.InvalidDistributionError`."""
    vocab = target_probs.shape[1]
    totals = torch.stack([target_probs.sum(dim=1), q.sum(dim=1)], dim=1).double().cpu().numpy()  # [n, 2]
    if not (np.isfinite(totals).all() and (totals > 0).all()):
        raise InvalidDistributionError(
            "importance_sampling_truncated: every row of target_probs and draft_probs needs a finite positive sum"
        )
    if alphabet_size is not None and alphabet_size < vocab:
        alphabets = batched_top_tokens(target_probs, alphabet_size)
    else:
        alphabets = [np.arange(vocab)] * target_probs.shape[0]
    index = torch.as_tensor(np.stack(alphabets), device=target_probs.device)
    values = torch.stack([target_probs.gather(1, index), q.gather(1, index)], dim=1).double().cpu().numpy()  # [n, 2, A]
    return [plan_on_alphabet(a, v[0] / t[0], v[1] / t[1], vocab, k, s, backend) for a, v, t in zip(alphabets, values, totals)]


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
    if batch == 0:
        return VerifierOutput(tokens=draft_tokens[:, 0].clone(), accepted_index=draft_tokens[:, 0].clone())

    first, which = distinct_rows(target_probs, q)
    plans = _plans(take_rows(target_probs, first), take_rows(q, first), k, s, alphabet_size, backend)

    def table(name: str) -> torch.Tensor:
        return torch.as_tensor(np.stack([getattr(pl, name) for pl in plans]), dtype=dtype, device=device)[which]

    alphabet = torch.as_tensor(np.stack([pl.alphabet for pl in plans]), device=device)[which]  # [batch, A], ascending
    select_first = table("select_first")  # [batch, k-1, A, A]
    accept_table, residual_table = table("accept"), table("residual")  # [batch, A]
    kept_target = torch.as_tensor([pl.kept_target for pl in plans], dtype=dtype, device=device)[which]
    A = alphabet.shape[1]
    position = torch.searchsorted(alphabet, draft_tokens).clamp_(max=A - 1)  # [batch, k]
    compact = torch.where(alphabet.gather(1, position) == draft_tokens, position, -1)  # compact index of each draft, -1 outside

    held = torch.full((batch,), -1, dtype=torch.int64, device=device)  # compact index of Y
    held_position = torch.full_like(held, -1)
    for m in range(k):
        c = compact[:, m]
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
    tokens = torch.where(accepted, chosen, from_residual)
    accepted_index = torch.where(accepted, held_position, torch.full_like(held_position, -1))

    # Post-processing, only for the rows that leave the alphabet: a token of its
    # complement with probability proportional to p (none when p has no mass there).
    rows = (u[:, k + 1] >= kept_target).nonzero().squeeze(1)
    if rows.numel():
        outside = take_rows(target_probs, rows).scatter(1, alphabet[rows], 0.0)  # p off the alphabet, [n, vocab]
        leave = (outside.sum(dim=-1) > 0).nonzero().squeeze(1)
        rows, outside = rows[leave], take_rows(outside, leave)
        tokens[rows] = sample_residual(outside, target_probs, u[rows, k + 2], fallback_rows=rows)
        accepted_index[rows] = -1
    return VerifierOutput(tokens=tokens, accepted_index=accepted_index)
