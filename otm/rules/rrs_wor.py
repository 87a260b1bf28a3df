"""Recursive rejection sampling without replacement (RRSw; SpecHub, Sun et al. 2024, Alg. 1
with the red lines).

The drafts ``x_1..x_k`` are distinct, drawn successively from ``q`` renormalised over the
tokens not yet drawn (:func:`otm.draft_laws.without_replacement_law`). With ``p_1 = p``
and ``q_1 = q``, at step ``i``: accept ``x_i`` with ``min(1, p_i(x_i) / q_i(x_i))``; on
rejection ``p_{i+1} = norm(max(p_i - q_i, 0))`` and ``q_{i+1} = norm(q_i with x_i set to
0)``; after ``k`` rejections ``Y ~ p_{k+1}``. Lossless by induction (each step is the
single-draft rule on the draft's conditional law); membership acceptance equals the
"a draft was accepted" probability (a rejected draft's residual mass is 0 for good).

Exact laws: by enumeration of the ordered draft tuples (any ``k``, small vocabularies);
in closed form for ``k <= 2`` (:func:`closed_form_acceptance_k2`, O(V log V)); at any size
for ``k > 2`` by the unbiased Monte Carlo estimate :func:`monte_carlo_acceptance`, whose
per-path products cost O(k log V) (:func:`path_rejection_products`). Fewer positive draft
tokens than ``k`` (an exhausted support): the remaining drafts are deterministic and are
verified against their point-mass law. Derivations and proofs: docs/theory.md, section 3
("RRS without replacement").
"""
from __future__ import annotations

import numpy as np

from ..distributions import as_distribution_pair, check_draft_count
from ..draft_laws import sample_without_replacement, without_replacement_law
from ..errors import InvalidDraftCountError, ShapeMismatchError
from .base import RuleLaw
from .enumeration import (
    accept_probability,
    count_without_replacement,
    enumerated_rule_law,
    is_exact,
    normalise,
    one_hot,
    residual,
    resolve_method,
    sequential_kernel,
    validate_one_q,
)


def draft_conditional(not_drawn: np.ndarray, x: int) -> np.ndarray:
    """``[V]``: the law of the current draft ``x`` given the earlier ones: ``not_drawn``
    (``q`` renormalised off the drawn tokens) while it has mass, else the point mass at
    ``x`` (exhausted support: ``x`` is a deterministic draft; module docstring)."""
    return not_drawn if not_drawn.sum() > 0 else one_hot(x, not_drawn)


def kernel(p: np.ndarray, q: np.ndarray):
    """The rule's kernel; the state is ``(p_i, norm(q off x_1..x_{i-1}))``."""

    def step(state, i, x):
        target, not_drawn = state
        draft = draft_conditional(not_drawn, x)
        without_x = not_drawn.copy()
        without_x[x] = 0
        return accept_probability(target[x], draft[x]), (residual(target, draft), normalise(without_x))

    return sequential_kernel(p, (p, q), step, lambda state: state[0])


def closed_form_acceptance_k2(p: np.ndarray, q: np.ndarray):
    """Exact acceptance of RRSw with ``k = 2`` (module docstring), for validated ``[V]``
    ``p`` and ``q`` with at least two positive draft tokens (float or exact).

    >>> round(float(closed_form_acceptance_k2(np.array([0.1, 0.6, 0.3]), np.array([0.5, 0.3, 0.2]))), 12)
    0.94
    """
    alpha1 = np.minimum(p, q).sum()
    excess = np.maximum(q - p, 0)
    residual_mass = np.maximum(p - q, 0)
    if residual_mass.sum() <= 0:  # p = q: the first draft is always accepted
        return alpha1
    p2 = residual_mass / residual_mass.sum()
    rejected = np.flatnonzero(excess > 0)
    if is_exact(p):
        total = sum((excess[x] * np.minimum(p2, q / (1 - q[x])).sum() for x in rejected), start=alpha1)
        return min(total, 1)
    drafted = q > 0
    ratio = p2[drafted] / q[drafted]
    order = np.argsort(ratio)
    ratio, p2_sorted, q_sorted = ratio[order], p2[drafted][order], q[drafted][order]
    p2_below = np.concatenate([[0.0], np.cumsum(p2_sorted)])  # p_2 mass of the first j tokens
    q_above = np.concatenate([np.cumsum(q_sorted[::-1])[::-1], [0.0]])  # q mass from token j on
    c = 1.0 / (1.0 - q[rejected])
    j = np.searchsorted(ratio, c, side="right")
    return float(min(1.0, alpha1 + (excess[rejected] * (p2_below[j] + c * q_above[j])).sum()))


def monte_carlo_acceptance(p, q, k_max: int, n_paths: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Rao-Blackwellised, stratified Monte Carlo estimate of RRSw's acceptance for ``k =
    1..k_max`` at any vocabulary size, with its standard error: ``(mean [k_max],
    standard_error [k_max])``.

    The drafts are drawn before any verification, so with ``x`` the ordered path the
    acceptance is ``1 - E_x[prod_{i <= k} (1 - a_i(x))]``, ``a_i(x) = min(1, p_i(x_i) /
    q_i(x_i))``; given the path the product is exact (:func:`path_rejection_products`), so
    only paths are sampled. The first draw is integrated out exactly: ``q(x) (1 - a_1(x)) =
    (q - p)^+(x)``, so with ``TV = sum (q - p)^+`` and ``g(x) = E[1 - prod_{2 <= i <= k} (1 -
    a_i) | x_1 = x]``,

        acceptance = sum min(p, q) + TV E_{x ~ (q - p)^+ / TV}[g(x)],

    and the estimate draws ``x_1`` from ``(q - p)^+ / TV`` and the rest of the path given
    ``x_1`` (:func:`otm.draft_laws.sample_without_replacement` with ``first``). Unbiased,
    exact at ``k = 1`` (error 0), and, as every path's term lies in ``[0, TV]``, never above
    1 (docs/theory.md, "RRS without replacement", also for why ``x_1`` is not drawn from
    ``q``; :func:`unseen_paths_bound` for what no standard error shows). One set of
    ``k_max``-paths serves every ``k`` (a path's first ``j`` draws are a path of length ``j``).
    """
    if n_paths < 2:
        raise InvalidDraftCountError(f"the Monte Carlo needs at least 2 paths for a standard error, got {n_paths}")
    p, q = as_distribution_pair(p, q)
    k_max = check_draft_count(k_max)
    support = int(np.count_nonzero(q))
    if k_max > support:
        raise InvalidDraftCountError(f"q (draft) has only {support} tokens with positive probability; k={k_max} distinct drafts need k")
    overlap = float(np.minimum(p, q).sum())
    excess = np.maximum(q - p, 0.0)
    tv = float(excess.sum())
    if tv <= 0.0:  # p >= q everywhere, so p = q: the first draft is always accepted
        return np.full(k_max, overlap), np.zeros(k_max)
    first = rng.choice(q.size, size=n_paths, p=excess / tv)
    products = path_rejection_products(p, q, sample_without_replacement(q, k_max, n_paths, rng, first=first))
    terms = tv * (1.0 - products / products[:, :1])  # [n_paths, k_max]; 1 - a_1 > 0 as q(x_1) > p(x_1)
    return overlap + terms.mean(axis=0), terms.std(axis=0, ddof=1) / np.sqrt(n_paths)


def unseen_paths_bound(n_paths: int, miss_probability: float = 1e-4) -> float:
    """How far :func:`monte_carlo_acceptance` can sit above the true acceptance through draft
    paths it did not sample, beyond what its standard error shows: ``1 - miss_probability **
    (1 / n_paths)``.

    A set of paths of probability ``rho`` is missed by all ``n_paths`` independent paths with
    probability ``(1 - rho)^n_paths``, which is at most ``miss_probability`` once ``rho`` is at
    least this bound; every path's term lies in ``[0, TV]`` with ``TV <= 1``, so a missed set
    moves the estimate by at most ``rho``. The plug-in standard error cannot show it: it is 0
    when every sampled path gives the same value (a position whose rare paths reject). About
    0.036 for 256 paths at ``miss_probability = 1e-4``."""
    if n_paths < 1 or not 0 < miss_probability < 1:
        raise InvalidDraftCountError(f"need n_paths >= 1 and 0 < miss_probability < 1, got {n_paths} and {miss_probability}")
    return float(1.0 - miss_probability ** (1.0 / n_paths))


def _checked_paths(paths) -> np.ndarray:
    paths = np.asarray(paths, dtype=np.int64)
    if paths.ndim != 2 or paths.shape[1] < 1:
        raise ShapeMismatchError(f"paths must be [n_paths, k] token ids, got shape {paths.shape}")
    return paths


def path_rejection_products(p: np.ndarray, q: np.ndarray, paths) -> np.ndarray:  # [n_paths, k]
    """``prod_{i <= j} (1 - a_i(x))`` for every ordered path ``x`` (rows of ``paths``,
    ``[n_paths, k]`` distinct tokens with ``q > 0``) and every prefix length ``j``: the
    probability that RRSw rejects the first ``j`` drafts of the path. O(V log V) once, then
    O(k log V) per path (derived here):

    every residual is ``p_i = (p - t_i q)^+ / W_i`` with scalars ``t_1 = 0``, ``W_1 = 1``,
    ``t_{i+1} = t_i + c_i W_i``, ``W_{i+1} = S(t_{i+1})``, ``S(t) = sum_x (p(x) - t q(x))^+``,
    ``c_i = 1 / (1 - q(x_1) - ... - q(x_{i-1}))``. (Induction: ``p_{i+1} = norm(max(p_i -
    c_i q, 0))``; the drafted tokens are zeroed in ``q_i`` but a rejected draft already has
    ``p_i = 0`` there, so the zeroing changes nothing.) Then ``a_i = min(1, (p(x_i) - t_i
    q(x_i))^+ / (W_i c_i q(x_i)))``, and ``S`` at any ``t`` is two prefix sums over the tokens
    sorted by ``p/q``. :func:`path_rejection_products_reference` computes the residuals
    directly (the tests hold the two to each other)."""
    paths = _checked_paths(paths)
    n_paths, k = paths.shape
    drafted = q > 0
    ratio = p[drafted] / q[drafted]
    order = np.argsort(ratio)
    ratio = ratio[order]
    p_above = np.concatenate([np.cumsum(p[drafted][order][::-1])[::-1], [0.0]])  # p of tokens j.. in ratio order
    q_above = np.concatenate([np.cumsum(q[drafted][order][::-1])[::-1], [0.0]])
    undrafted = float(p[~drafted].sum())  # never drafted: always in the residual

    def residual_mass(t: np.ndarray) -> np.ndarray:  # S(t), [n_paths]
        j = np.searchsorted(ratio, t, side="right")
        return np.maximum(undrafted + p_above[j] - t * q_above[j], 0.0)

    t, mass, drawn = np.zeros(n_paths), np.ones(n_paths), np.zeros(n_paths)
    rejected, out = np.ones(n_paths), np.empty((n_paths, k))
    undrawn_mass = _UndrawnMass(q, drafted)
    for i in range(k):
        x = paths[:, i]
        qx = q[x]
        repeated = (paths[:, :i] == x[:, None]).any(axis=1)
        if (qx <= 0).any() or repeated.any():
            raise InvalidDraftCountError("a path repeats a token or uses a token with q = 0: it is not a draw without replacement")
        c = 1.0 / undrawn_mass(paths[:, :i], drawn)
        numerator = np.maximum(p[x] - t * qx, 0.0)
        denominator = mass * c * qx
        accept = np.where(denominator > 0, np.minimum(1.0, numerator / np.where(denominator > 0, denominator, 1.0)), 1.0)
        rejected = rejected * (1.0 - accept)
        out[:, i] = rejected
        t = t + c * mass
        mass = residual_mass(t)
        drawn = drawn + qx
    return out


#: Below this ``1 - q(drawn)`` has lost more than about ``1e-10`` of its relative accuracy to
#: cancellation (``eps / 1e-6``), so :class:`_UndrawnMass` sums the tokens not drawn instead.
_CANCELLATION = 1e-6


class _UndrawnMass:
    """``[n_paths]`` the draft mass not yet drawn, ``1 - q(x_1) - ... - q(x_{i-1})``: as that
    difference, or, for the paths that drew all but ``_CANCELLATION`` of ``q`` (a dominant
    draft token; found by a stress run of the fast path against the reference, 5e-8 off on
    a last draft of ``q = 1.5e-10``), the sum of the rest: from the tail sums of ``q`` sorted
    down (one sort, on first use) when the path drew the ``i`` largest ``q``, as such paths
    mostly do, else over the vocabulary, ``O(V)`` for that path."""

    def __init__(self, q: np.ndarray, drafted: np.ndarray):
        self.q, self.drafted, self._descending, self._tails = q, drafted, None, None

    def __call__(self, drawn_tokens: np.ndarray, drawn: np.ndarray) -> np.ndarray:
        left = 1.0 - drawn
        for r in np.flatnonzero(left < _CANCELLATION):
            left[r] = self._rest(drawn_tokens[r])
        return left

    def _rest(self, tokens: np.ndarray) -> float:
        if self._descending is None:
            self._descending = np.sort(self.q[self.drafted])[::-1]
            self._tails = np.concatenate([np.cumsum(self._descending[::-1])[::-1], [0.0]])  # summed from the small end
        i = len(tokens)
        if np.array_equal(np.sort(self.q[tokens])[::-1], self._descending[:i]):
            return float(self._tails[i])
        rest = self.drafted.copy()
        rest[tokens] = False
        return float(self.q[rest].sum())


def path_rejection_products_reference(p: np.ndarray, q: np.ndarray, paths) -> np.ndarray:  # [n_paths, k]
    """The slow obvious version of :func:`path_rejection_products`: every path keeps its
    own ``[V]`` residual ``p_i`` and draft law ``q_i`` (O(n_paths k V))."""
    paths = _checked_paths(paths)
    n_paths, k = paths.shape
    rows = np.arange(n_paths)
    target = np.repeat(p[None, :], n_paths, axis=0)  # [n_paths, V] p_i per path
    draft = np.repeat(q[None, :], n_paths, axis=0)  # [n_paths, V] q_i per path
    rejected = np.ones(n_paths)
    out = np.empty((n_paths, k))
    for i in range(k):
        x = paths[:, i]
        qx, px = draft[rows, x], target[rows, x]
        if (qx <= 0).any():
            raise InvalidDraftCountError("a path repeats a token or uses a token with q = 0: it is not a draw without replacement")
        rejected = rejected * (1.0 - np.minimum(1.0, px / qx))
        out[:, i] = rejected
        if i == k - 1:
            break
        residual_rows = np.maximum(target - draft, 0.0)
        mass = residual_rows.sum(axis=1, keepdims=True)
        # mass 0 means p_i = q_i: every draft is accepted, the rejection product is 0
        target = np.divide(residual_rows, mass, out=np.zeros_like(residual_rows), where=mass > 0)
        draft[rows, x] = 0.0
        draft /= draft.sum(axis=1, keepdims=True)
    return out


def exact_law(p, q, k: int, *, method: str = "auto") -> RuleLaw:
    """Exact law of RRSw with ``k`` drafts without replacement from ``q`` (``[V]``).

    ``method="closed_form"`` exists for ``k <= 2`` (the acceptance; the output law is
    ``p`` by the theorem); ``"auto"`` uses it above the enumeration limit. ``k`` above the
    number of tokens with ``q > 0`` uses the deterministic drafts of the module
    docstring; ``k > V`` raises :class:`otm.errors.InvalidDraftCountError`.

    >>> law = exact_law([0.1, 0.6, 0.3], [0.5, 0.3, 0.2], 2)
    >>> round(float(law.acceptance), 6)
    0.94
    >>> law = exact_law([0.1, 0.6, 0.3], [0.0, 0.0, 1.0], 2)  # drafts (2, 0): acceptance p(0) + p(2)
    >>> round(float(law.acceptance), 6), law.output_distribution.round(6).tolist()
    (0.4, [0.1, 0.6, 0.3])
    """
    k = check_draft_count(k)
    p, q = validate_one_q(p, q, "rule 'rrs_wor' draws k distinct drafts from one q ([V] vector)")
    if k > p.size:
        raise InvalidDraftCountError(f"k={k} distinct drafts without replacement from a vocabulary of {p.size} tokens")
    if k <= 2 and int(np.count_nonzero(q)) < 2:
        method = "enumeration"  # one positive draft token: the exhausted-support law has one tuple
    method = resolve_method(method, count_without_replacement(q, k), k <= 2, "rrs_wor", len(p))
    if method == "closed_form":
        acceptance = np.minimum(p, q).sum() if k == 1 else closed_form_acceptance_k2(p, q)
        return RuleLaw(acceptance, p.copy(), None, {"method": method, "draft_accepted": acceptance})
    return enumerated_rule_law(p, without_replacement_law(q, k), kernel(p, q), {"method": method})
