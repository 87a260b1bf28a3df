"""Rule ``"importance_sampling_truncated"``: Khisti et al.'s fast importance-weighted speculative sampling (§4):
the truncated LP, the truncated alphabet, and the successive scheme for k > 2 (Remark 3).

The paper's formulas (10)-(12), (195)-(202) were lost in extraction; this is our
reconstruction from the prose, in our letters (p = target, q = draft).

**Pair stage** (two independent inputs ``A ~ a``, ``B ~ b``; ``a = b = q`` for two i.i.d.
drafts, App. I for ``a != b``). ``F[i, j]`` is the probability of selecting the first
input when ``(A, B) = (i, j)``, ``i != j``. The law of the selected token is

    P(y) = a_y b_y + sum_{j != y} a_y b_j F[y, j] + sum_{i != y} a_i b_y (1 - F[i, y]).

Truncated LP (eq. 10, App. I): rank the tokens by ``p(y) - (a_y + b_y) / 2`` descending
(for ``a = b = q``: ``p - q``, the most under-drafted tokens first; ties to the lower
index) and let ``Omega_1`` be the first ``s``. ``F[i, j]`` is free when ``i, j`` are both in
``Omega_1``; otherwise the better-ranked token is selected (``Omega_1`` beats ``Omega_2``,
and inside ``Omega_2`` the lower rank wins). The free weights maximise
``sum_y min(p(y), P(y))`` (:func:`otm.formulations.canonical_lp.selection_weight_lp` with
the fixed pairs as offset). The seed states the order only as "sorted in decreasing
order"; we chose ``p - q`` because the fixed rule then favours the tokens that lack draft
mass, which is what the paper's intuition for (10) describes.

Guarantee (our derivation of the kind of bound the paper's eq. 12 states): with the
optimal unrestricted weights ``F*`` restricted to ``Omega_1``, every ``y in Omega_1`` gets
``P(y) >= P*(y)``, and ``P*(y) <= M(y) = 1 - (1 - a_y)(1 - b_y)`` (the membership
probability), so

    alpha*_pair - alpha_truncated <= sum_{y in Omega_2} [min(p(y), M(y)) - min(p(y), P(y))],

reported per stage as ``penalty_bound``.

**Successive scheme** (Remark 3), ``k > 2``: ``Y_1`` = pair stage on ``(X_1, X_2)``, then
``Y_m`` = pair stage on ``(Y_{m-1}, X_{m+1})`` with ``a`` = law of ``Y_{m-1}`` and ``b = q``;
each stage's weights solve its own truncated LP against ``p``. The last ``Y`` is
speculative-sampled against ``p``. For ``k = 1`` the only draft is selected.

**Truncated alphabet** (§4): ``Omega_0`` = the ``alphabet_size`` most probable tokens of
``p``; every stage runs on ``p`` and ``q`` restricted to ``Omega_0`` and renormalised, and a
draft outside ``Omega_0`` is dropped (a stage with one input passes it on; with none,
nothing is selected). Speculative sampling of the selected token uses its true law
(computed by enumeration, with the "nothing selected" event as a rejection), so the
inner output is exactly ``p~ = p|Omega_0 / p(Omega_0)``. The post-processing then keeps it
with probability ``p(Omega_0)`` and otherwise outputs a token of the complement with
probability proportional to ``p``, so the output is exactly ``p``.
"""
from __future__ import annotations

import numpy as np

from ..distributions import as_distribution_pair, check_draft_count
from ..draft_laws import DraftLaw, iid_law
from ..errors import InvalidDraftCountError
from ..formulations._instance import distinct_positions
from ..formulations._lp import solve_lp
from ..formulations.canonical_lp import selection_weight_lp, two_step_law_from_selection, weights_from_masses
from .base import RuleLaw


#: Defaults from Khisti et al. 2025, Table 1 (best token rate: LP truncation s = 5, alphabet 40).
DEFAULT_TRUNCATION = 5
DEFAULT_ALPHABET_SIZE = 40


def truncation_order(p, a, b) -> np.ndarray:
    """``[V]`` rank of each token: by ``p - (a + b) / 2`` descending, ties to lower index."""
    return np.argsort(np.argsort(-(p - (a + b) / 2), kind="stable"), kind="stable")


def selected_mass(first, second, mass, select_first, V: int) -> np.ndarray:
    """``[V]`` the mass each token receives from the input pairs ``(first[i], second[i])`` of
    probability ``mass[i]`` under the rule ``select_first`` (``[V, V]``): ``mass * F`` to the first
    token, ``mass * (1 - F)`` to the second. One ``bincount`` over the first tokens, then the
    second ones, adds in the order of two successive ``np.add.at``."""
    F = select_first[first, second]
    return np.bincount(np.concatenate([first, second]), weights=np.concatenate([mass * F, mass * (1 - F)]),
                       minlength=V).astype(np.float64, copy=False)


def pair_stage(p, a, b, s: int, backend: str = "highs") -> dict:
    """One truncated-LP pair stage (see the module docstring).

    Args:
        p: ``[V]`` target; a, b: ``[V]`` laws of the first and second input.
        s: number of tokens with free weights (``s >= V`` is the full pair LP).

    Returns:
        dict with ``select_first`` (``[V, V]`` the rule ``F``), ``law`` (``[V]`` law of the
        selected token), ``selection_acceptance`` (``sum min(p, law)``) and ``penalty_bound``.
    """
    V = len(p)
    rank = truncation_order(p, a, b)
    free = rank < s
    first, second = np.nonzero(np.outer(a, b) > 0)
    mass = a[first] * b[second]
    select_first = (rank[:, None] <= rank[None, :]).astype(np.float64)  # fixed rule, [V, V]
    is_free = free[first] & free[second] & (first != second)
    fixed = np.flatnonzero(~is_free)
    offset = selected_mass(first[fixed], second[fixed], mass[fixed], select_first, V)
    pairs = np.flatnonzero(is_free)
    if pairs.size:
        rows = np.repeat(np.arange(pairs.size), 2)
        tokens = np.stack([first[pairs], second[pairs]], axis=1).ravel()
        pair_mass = np.repeat(mass[pairs], 2)
        lp = selection_weight_lp(p, pair_mass, rows, tokens, pairs.size, offset)
        weights = weights_from_masses(solve_lp(lp, backend).x, pair_mass, rows).reshape(-1, 2)
        select_first[first[pairs], second[pairs]] = weights[:, 0] / weights.sum(axis=1)
    law = selected_mass(first, second, mass, select_first, V)
    membership = 1 - (1 - a) * (1 - b)
    outside = ~free
    penalty = np.minimum(p, membership)[outside] - np.minimum(p, law)[outside]
    return {
        "select_first": select_first,
        "law": law,
        "selection_acceptance": float(np.minimum(p, law).sum()),
        "penalty_bound": float(np.maximum(penalty, 0.0).sum()),
    }


def successive_stages(p_inner, q_inner, k: int, s: int, backend: str = "highs") -> list[dict]:
    """The ``k - 1`` pair stages of Remark 3 on the inner target and draft (``[V]``, zero
    outside ``Omega_0``), each run on the *stage tokens* ``T`` (the support of ``q_inner``):
    every input of every stage lives there (a selected token was drafted), so a pair stage
    over the whole vocabulary differs only in the rule on pairs of probability 0, and its
    ``[V, V]`` rule would not fit in memory at ``V = 151,936``. The free tokens are the
    first ``s`` of :func:`truncation_order` over the whole vocabulary; those in ``T`` are
    the first of ``T`` in the same order (the order restricted to ``T``), so the stage
    runs :func:`pair_stage` on ``T`` with that many free tokens.

    Returns the stages of :func:`pair_stage` (``select_first`` ``[|T|, |T|]``, ``law``
    ``[|T|]``), each with ``tokens``: the ids ``T``, ascending.
    """
    active = np.flatnonzero(q_inner > 0)
    stages, previous = [], q_inner.copy()  # the law of the running selection, over the vocabulary
    for _ in range(k - 1):
        free = int((truncation_order(p_inner, previous, q_inner)[active] < s).sum())
        stage = pair_stage(p_inner[active], previous[active], q_inner[active], free, backend)
        stages.append({**stage, "tokens": active})
        previous[active] = stage["law"]
    return stages


def _selection(law: DraftLaw, stages: list[dict], alphabet: np.ndarray):
    """Triplets ``(rows, tokens, probs)`` of the successive selection for every tuple."""
    position = {int(token): i for i, token in enumerate(stages[0]["tokens"])} if stages else {}
    rows, tokens, probs = [], [], []
    for t, drafts in enumerate(law.tuples):
        current = {}  # token -> probability that the running selection Y holds it
        for m, x in enumerate(int(v) for v in drafts):
            if not alphabet[x]:
                continue  # a dropped draft leaves Y unchanged
            if not current:
                current = {x: 1.0}  # the first kept draft
                continue
            select_first = stages[m - 1]["select_first"]
            updated = {x: 0.0}
            for y, pr in current.items():
                keep = 1.0 if y == x else select_first[position[y], position[x]]
                updated[y] = updated.get(y, 0.0) + pr * keep
                updated[x] += pr * (1 - keep)
            current = updated
        for y, pr in current.items():
            if pr > 0:
                rows.append(t), tokens.append(y), probs.append(pr)
    return np.array(rows, dtype=np.int64), np.array(tokens, dtype=np.int64), np.array(probs)


def exact_law(
    p, q, k: int, s: int = DEFAULT_TRUNCATION, alphabet_size: int | None = DEFAULT_ALPHABET_SIZE,
    backend: str = "highs",
) -> RuleLaw:
    """Exact law of the truncated importance-sampling rule, ``k`` i.i.d. drafts from ``q``.

    Args:
        p, q: ``[V]`` target and draft.
        k: number of drafts (``k > 2`` uses the successive scheme of Remark 3).
        s: LP truncation, the number of tokens with free pair weights (``s >= V``: full LP).
        alphabet_size: size of the truncated alphabet ``Omega_0`` (top tokens of ``p``);
            ``None`` or ``>= V`` keeps every token.
        backend: LP backend of the stages.

    Returns:
        :class:`RuleLaw`: membership acceptance, output law (exactly ``p``), the i.i.d.
        draft law, and ``details`` with the per-stage ``stages`` (rule, law,
        ``penalty_bound``, on the stage tokens: :func:`successive_stages`), ``alphabet`` (``[V]`` bool), ``selection_law`` (true law of
        the selected token, mass < 1 when nothing may be selected) and
        ``selection_acceptance`` (``P(Y = Z)`` after the post-processing).
    """
    p, q = as_distribution_pair(p, q)
    k = check_draft_count(k)
    if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 0:
        raise InvalidDraftCountError(f"the LP truncation s must be an integer >= 0, got {s!r}")
    V = p.size
    alphabet = np.ones(V, dtype=bool)
    if alphabet_size is not None and alphabet_size < V:
        if alphabet_size < 1:
            raise InvalidDraftCountError(f"alphabet_size must be >= 1, got {alphabet_size!r}")
        alphabet[:] = False
        alphabet[np.argsort(-p, kind="stable")[:alphabet_size]] = True
    kept_target = p[alphabet].sum()
    p_inner = np.where(alphabet, p, 0.0) / kept_target
    q_kept = np.where(alphabet, q, 0.0)
    q_inner = q_kept / q_kept.sum() if q_kept.sum() > 0 else q_kept
    stages = successive_stages(p_inner, q_inner, k, s, backend)
    law = iid_law(q, k)
    rows, tokens, probs = _selection(law, stages, alphabet)
    inner = two_step_law_from_selection(p_inner, law, rows, tokens, probs)
    complement = np.where(alphabet, 0.0, p)
    if complement.sum() > 0:
        complement = complement / complement.sum()
    d_rows, d_tokens = distinct_positions(law)
    complement_in_tuple = np.zeros(len(law.probs))
    np.add.at(complement_in_tuple, d_rows, complement[d_tokens])
    outside = 1 - kept_target
    return RuleLaw(
        acceptance=float(kept_target * inner.acceptance + outside * (law.probs @ complement_in_tuple)),
        output_distribution=kept_target * inner.output_distribution + outside * complement,
        draft_law=law,
        details={
            "stages": stages,
            "alphabet": alphabet,
            "selection_law": inner.selection_law,
            "selection_acceptance": float(kept_target * inner.selection_acceptance),
            "s": s,
        },
    )
