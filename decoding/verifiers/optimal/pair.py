"""The optimal verifier for two drafts without replacement (the water-level rule), batched.

The rule of :mod:`otm.rules.optimal_wor` (derivation, proof of losslessness and
optimality, and the step that is checked rather than proved:
docs/optimal-verifier.md#water-levels-for-drafts-without-replacement): the drafts ``a`` then ``b`` are
distinct, drawn successively from ``q``. Give
the tokens with ``q > 0`` ranks by ``p/q`` (ties by id), with the optimal cut ``m``. The
member of higher rank is selected, except that within a side of the cut the higher member
yields to the lower one with probability ``Y = min_{low < j <= high} L(j)``, the least water
level between them. The selected draft ``Z`` is accepted with probability
``min(1, p(Z) / x(Z))`` (``x`` the selection law), otherwise ``Y`` is drawn from
``norm(max(p - x, 0))``. Output law ``p``; a draft is accepted with probability
``alpha*(p, Q_wor)``, the optimum for two drafts without replacement.

Per row, on the CPU in float64 (a CUDA batch is brought to the CPU and its outputs sent
back; the rows of a call are shared among ``torch.get_num_threads()`` threads by
:func:`decoding.verifiers.base.share_rows`, a row's draw independent of the sharing). A row
first goes through a *merged row*
(:mod:`decoding.verifiers.optimal.pair_merged_rows`): the ratio keys cut into buckets, the
buckets whose ranks all have ``e = p - sigma`` of one sign kept as blocks, the others and the
drafts' refined into sorted tokens; every value the draw reads is exact there, and the bounds
of docs/optimal-verifier-proofs.md#bounds-on-a-water-level-from-the-flux, with bounds
on the cuts inside blocks (merged rows for two drafts,
docs/optimal-verifier-proofs.md#merged-rows-for-two-drafts), decide ``u < Y``. When they
cannot (rarely, on real rows), the row goes to the *sorted row*: one stable sort of the
ratios of the support, then :func:`decoding.verifiers.optimal.pair_levels.pair_yield`,
which computes the cut, the minimal flux and ``x`` in ``O(V)`` and the yield of the drafted
pair (those bounds first, else only the nested runs that hold both drafts, each run's first
cut to empty found in a lazy range-minimum tree). In exact arithmetic both paths draw the same.
The levels are rounded into ``[current level, 1]``; what that and the rounding floors leave
of the flux uncarried moves the realised selection law away from ``x``; by how much on real
rows, measured in 200-bit arithmetic: docs/optimal-verifier.md#the-water-level-verifier-for-two-drafts.
Drafts that two draws without
replacement cannot give (equal, or one with ``q = 0`` while ``q`` has two tokens of positive
probability) raise :class:`otm.errors.NotApplicableError`; rows with a NaN, an inf, a negative
entry or no mass raise :class:`otm.errors.InvalidDistributionError`.

Exhausted support (one token ``a`` with ``q > 0``): the drafts are ``a`` and the lowest-index
``q = 0`` token ``z`` (:func:`decoding.verifiers.base.sample_without_replacement`), ``x = (1
- p_z, p_z)`` on ``(a, z)``, and ``z`` is selected with probability ``p_z``.

Randomness (``uniforms_per_row(2) = 3``): column 0 selects the member of lower rank when
below ``Y`` (``z`` when below ``p_z``), column 1 accepts ``Z`` when ``u x(Z) < p(Z)``, column 2
draws the residual by inverse CDF over the ranks (:func:`full_ratio_order`: by ``p / q``, the
``q = 0`` tokens last, ties by id), the order a merged row keeps. Only ``u < Y`` is needed (``pair_yield``'s
``decide``): bounds on ``Y`` from the flux alone settle most pairs without the nesting
(:func:`decoding.verifiers.optimal.pair_levels.yield_decision`), and otherwise the search
for ``Y`` stops as soon as the levels it meets pass ``u``. Reference:
:func:`decoding.verifiers.reference.optimal_pair_wor`, which computes ``x`` and the levels
with the exact law's construction (:func:`otm.rules.water_levels.pair.pair_parameters`).
"""
from __future__ import annotations

import numpy as np
import torch

from otm.errors import InvalidDistributionError, InvalidDraftCountError, NotApplicableError
from otm.formulations import prefix_scan
from otm.rules.water_levels.pair import with_representable_weights

from ..base import (
    VerifierOutput,
    check_k,
    first_draft_probs,
    sample_weighted,
    sample_without_replacement,
    share_rows,
    verify_uniforms,
)
from .iid import WORK_DTYPE, ratio_keys, stable_sort_rows
from .row_passes import INF_KEY
from .latent import token_order_sums

draft_scheme = "without_replacement"

#: The float64 unit roundoff (the rounding floors of the levels).
UNIT = float(np.finfo(np.float64).eps)


def compile_seconds(device: torch.device) -> float:
    """About how long the first ``verify`` compiles its per-row code on this machine (on any
    device: the rows run on the CPU): an estimate of 15 s until numba's cache holds the merged
    and the sorted rows' code, else 0.
    Read by ``otm decode``."""
    from .row_passes import is_cached
    from .pair_merged_rows import merged_row
    from .pair_levels import pair_yield

    return 0.0 if is_cached(pair_yield) and is_cached(merged_row) else 15.0


def uniforms_per_row(k: int) -> int:
    """3 (module docstring); the rule is defined for ``k = 2`` only."""
    if check_k(k) != 2:
        raise InvalidDraftCountError(f"rule 'optimal_pair_wor' is defined for k = 2 only, got k={k}")
    return 3


def sample_drafts(draft_probs: torch.Tensor, k: int, generator: torch.Generator | None) -> torch.Tensor:
    """``[batch, 2]`` distinct drafts from ``draft_probs`` ``[batch, vocab]`` (``k = 2`` only)."""
    uniforms_per_row(k)
    return sample_without_replacement(draft_probs, k, generator)


def full_ratio_order(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``[V]`` every token by ``p / q`` ascending, ties by id, the ``q = 0`` tokens last (by
    id): the optimal verifier's ratio keys (:func:`decoding.verifiers.optimal.iid.ratio_keys`) in
    its stable row sort (:func:`decoding.verifiers.optimal.iid.stable_sort_rows`). The residual
    is drawn in this order. Where some ``p / q`` overflows float64 (a denormal ``q``), whose
    key would tie with the ``q = 0`` tokens' and let one of lower id into the support, it is
    :func:`otm.formulations.prefix_scan.ratio_order` (overflowed ratios after every finite one,
    among themselves by ``log p - log q``; the same order on every other row). A row with a
    single token of positive ``q`` (an exhausted support: what a one-hot draft row gives) is
    ordered without the sort: that token, then the others by id."""
    positive = q > 0
    if np.count_nonzero(positive) == 1:
        return np.concatenate((np.flatnonzero(positive), np.flatnonzero(~positive)))
    keys = ratio_keys(torch.from_numpy(p).unsqueeze(0), torch.from_numpy(q).unsqueeze(0))
    if bool(((keys == INF_KEY) & torch.from_numpy(q > 0).unsqueeze(0)).any()):
        return prefix_scan.ratio_order(p, q)
    _, order = stable_sort_rows(keys)
    return order[0].numpy()


def ratio_order(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``[n]`` the tokens with ``q > 0`` by ``p / q`` ascending, ties by id (the order of
    :func:`otm.formulations.prefix_scan.ratio_order` without its ``q = 0`` tail)."""
    return full_ratio_order(p, q)[: int((q > 0).sum())]


def _check_drafts(q: np.ndarray, drafts: tuple[int, int]) -> int:
    """The number of tokens with ``q > 0``, after checking that two draws without replacement
    can give ``drafts``."""
    support = int(np.count_nonzero(q > 0))
    drawn = int((q[list(drafts)] > 0).sum())
    if drafts[0] == drafts[1] or drawn < min(2, support):
        raise NotApplicableError(
            f"drafts {tuple(drafts)} cannot come from two draws without replacement from q ({support} tokens of "
            "positive probability): they must be distinct and, unless q has a single such token, both have q > 0")
    return support


def row_selection(p: np.ndarray, q: np.ndarray, drafts: tuple[int, int], u: float,
                  order: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """For one row (``p``, ``q`` ``[V]`` float64, normalised), its distinct drafts and the
    uniform ``u``: the selection law ``x`` ``[V]`` and the index of the selected draft (the
    member of lower rank when ``u < Y``; the ``q = 0`` draft of an exhausted support when
    ``u`` is below its ``p``). ``order``: :func:`full_ratio_order` of the row, if known. ``q``
    is taken as given: :func:`sorted_row` passes it through :func:`with_representable_weights`
    first, before the ratio order, which depends on it."""
    from .pair_levels import pair_yield  # numba only where a row is verified

    support = _check_drafts(q, drafts)
    order = (full_ratio_order(p, q) if order is None else order)[:support]
    x = np.zeros_like(p)
    if support == 1:  # exhausted support: the q = 0 draft is selected with probability p of it
        fixed = 1 if q[drafts[1]] <= 0 else 0
        x[order[0]], x[drafts[fixed]] = 1.0 - p[drafts[fixed]], p[drafts[fixed]]
        return x, fixed if u < p[drafts[fixed]] else 1 - fixed
    rank = [int(np.flatnonzero(order == token)[0]) for token in drafts]
    lower = 0 if rank[0] < rank[1] else 1
    selection = np.empty(len(order))
    # u < Y is all that is asked: pair_yield may return a bound on the same side of u as Y
    bound, _, _ = pair_yield(p[order], q[order], UNIT, rank[lower], rank[1 - lower], selection, u)
    x[order] = selection
    return x, lower if u < bound else 1 - lower


def verify_row(p: np.ndarray, q: np.ndarray, drafts: tuple[int, int], uniforms: np.ndarray,
               work: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[int, int]:
    """``(token, accepted index)`` of one row (module docstring; ``-1``: the residual): on a
    merged row (:func:`decoding.verifiers.optimal.pair_merged_rows.merged_row`, ``work`` its
    two int64 ``[V]`` work arrays), or on the sorted row when that row goes back or ``q`` has
    a single token of positive probability. The merged row goes first since it is the faster
    from small vocabularies on (``scripts/bench_optimal_verifier.py --vocabs``,
    docs/optimal-verifier.md#measured-cost)."""
    support = _check_drafts(q, drafts)
    q = with_representable_weights(q)  # the same row unless a dominant token's complement is below 1e-289
    if support >= 2:
        from .pair_merged_rows import BUCKETS, DRAWN, SIGN_MARGIN, merged_row

        keys, ids = work if work is not None else (np.empty(len(p), np.int64), np.empty(len(p), np.int64))
        token, index, outcome = merged_row(p, q, drafts[0], drafts[1], uniforms, BUCKETS, SIGN_MARGIN, keys, ids)
        if outcome == DRAWN:
            return int(token), int(index)
    return sorted_row(p, q, drafts, uniforms)


def sorted_row(p: np.ndarray, q: np.ndarray, drafts: tuple[int, int], uniforms: np.ndarray) -> tuple[int, int]:
    """:func:`verify_row` on the sorted row: one stable sort of the ratios, then the full
    construction of :func:`decoding.verifiers.optimal.pair_levels.pair_yield`."""
    q = with_representable_weights(q)  # the same row unless a dominant token's complement is below 1e-289
    order = full_ratio_order(p, q)
    x, index = row_selection(p, q, drafts, float(uniforms[0]), order)
    return checked_draw(p, q, x, drafts, index, uniforms, order)


def checked_draw(p: np.ndarray, q: np.ndarray, x: np.ndarray, drafts, index: int, uniforms: np.ndarray,
                 order=None) -> tuple[int, int]:
    """``(token, accepted index)`` once draft ``index`` is selected: accepted when ``uniforms[1]
    x(Z) < p(Z)``, else the residual ``max(p - x, 0)`` drawn with ``uniforms[2]`` by inverse CDF
    over the ranks (``order``: :func:`full_ratio_order`, or a function that returns it, called
    only for a residual, as the rows of a call that repeat a row share one sort; computed here if
    not given); index -1."""
    token = drafts[index]
    if uniforms[1] * x[token] < p[token]:
        return token, index
    order = full_ratio_order(p, q) if order is None else order() if callable(order) else order
    residual = np.maximum(p - x, 0.0)[order]
    weights = torch.from_numpy(residual if residual.sum() > 0 else p[order]).unsqueeze(0)
    return int(order[int(sample_weighted(weights, torch.from_numpy(uniforms[2:3])))]), -1


def refuse_rows(name: str):
    """The water-level verifiers' refusal of a row with a NaN, an inf, a negative entry or no mass."""
    raise InvalidDistributionError(f"{name} must be finite and non-negative with positive mass in every row: the "
                                   "water-level verifier ranks tokens by p / q")


def verify(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, 2, vocab]
    draft_tokens: torch.Tensor,  # [batch, 2]
    generator: torch.Generator | None,
) -> VerifierOutput:
    """The water-level verifier for two distinct drafts from ``draft_probs[:, 0]``."""
    uniforms = verify_uniforms(target_probs, draft_probs, draft_tokens, generator, uniforms_per_row)
    from .pair_levels import normalised_row  # numba only where a row is verified

    rows = {}
    for name, probs in (("target_probs", target_probs), ("draft_probs", first_draft_probs(draft_probs))):
        probs = probs.cpu()
        total = token_order_sums(probs)[:, 0]
        if not bool(((total > 0) & torch.isfinite(total)).all()):  # a NaN or an inf makes the sum one
            refuse_rows(name)
        rows[name] = (probs if probs.dtype in (torch.float32, torch.float64) else probs.float()).numpy(), total.numpy()
    (p_rows, p_totals), (q_rows, q_totals) = rows["target_probs"], rows["draft_probs"]
    drafts, u = draft_tokens.cpu().tolist(), uniforms.to(WORK_DTYPE).cpu().numpy()
    tokens, accepted = torch.empty(len(drafts), dtype=torch.int64), torch.empty(len(drafts), dtype=torch.int64)

    def run(part: int, parts: int) -> None:
        vocab = p_rows.shape[1]  # this thread's rows reuse one set of work arrays
        p, q, work = np.empty(vocab), np.empty(vocab), (np.empty(vocab, np.int64), np.empty(vocab, np.int64))
        for r in range(part, len(drafts), parts):
            for name, row, total, out in (("target_probs", p_rows[r], p_totals[r], p),
                                          ("draft_probs", q_rows[r], q_totals[r], q)):
                if not normalised_row(row, total, out):  # a negative entry
                    refuse_rows(name)
            tokens[r], accepted[r] = verify_row(p, q, tuple(drafts[r]), u[r], work)

    share_rows(run, len(drafts))
    device = target_probs.device
    return VerifierOutput(tokens=tokens.to(device), accepted_index=accepted.to(device))


__all__ = ["checked_draw", "compile_seconds", "draft_scheme", "full_ratio_order", "ratio_order", "refuse_rows", "row_selection",
           "sample_drafts", "sorted_row", "uniforms_per_row", "verify", "verify_row"]
