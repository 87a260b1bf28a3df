"""RRS without replacement at a large vocabulary: a Rao-Blackwellised Monte Carlo estimate
of its membership acceptance, with a standard error, for ``otm report``.

``rrs_wor`` (seed 000 Alg. 1, :mod:`otm.rules.rrs_without_replacement`) has no product
formula: its residuals depend on the ordered draft path, so the exact law enumerates
``m!/(m-k)!`` paths and is refused at ``V = 151,936``. But the drafts are drawn before any
verification, so with ``x = (x_1..x_k)`` the ordered path,

    acceptance(k) = 1 - E_x[ prod_{i <= k} (1 - a_i(x)) ],
    a_i(x) = min(1, p_i(x_i) / q_i(x_i)),
    p_{i+1} = norm(max(p_i - q_i, 0)),  q_{i+1} = norm(q_i with x_i set to 0),

(``p_1 = p``, ``q_1 = q``). Membership acceptance equals this draft acceptance for RRSw
(the rule module's docstring: a rejected draft gets residual mass 0 for good). Given the
path the inner product is computed exactly (:func:`path_rejection_products`), so only the
path is sampled (Rao-Blackwellisation: the accept/reject coins are integrated out), and
the first factor's mean is known, ``E[a_1] = sum_x min(p(x), q(x))`` (Leviathan), so the
estimator is

    sum min(p, q) + mean over paths of [ (1 - a_1) - prod_{i <= k} (1 - a_i) ],

unbiased, exact at ``k = 1``, and with the first draw's variance removed (it dominates
where ``p`` and ``q`` disagree: ``a_1`` is tiny on most paths and 1 on a few). The
first ``j`` draws of a path without replacement are a path of length ``j``, so one set of
``k_max``-paths estimates every ``k <= k_max`` at once.

Paths are drawn with the Gumbel-top-k trick: the ``k`` largest ``log q(x) + G_x``
(``G_x`` i.i.d. standard Gumbel), in decreasing order, are distributed as ``k`` successive
draws without replacement from ``q`` (the Plackett-Luce law of
:func:`otm.draft_laws.without_replacement_law`).
"""
from __future__ import annotations

import numpy as np

from otm.distributions import as_distribution_pair, check_draft_count
from otm.errors import InvalidDraftCountError, ShapeMismatchError


def path_rejection_products(p, q, paths) -> np.ndarray:  # [n_paths, k]
    """``prod_{i <= j} (1 - a_i(x))`` for every path ``x`` and every prefix length ``j``.

    Args:
        p: ``[V]`` target.  q: ``[V]`` draft.
        paths: ``[n_paths, k]`` distinct token ids per row, each with ``q > 0``.

    Returns:
        ``[n_paths, k]``: column ``j - 1`` is the probability that RRSw rejects the first
        ``j`` drafts of the path, so ``1 - mean(column j - 1)`` estimates the acceptance
        with ``j`` drafts.
    """
    p, q = as_distribution_pair(p, q)
    paths = np.asarray(paths, dtype=np.int64)
    if paths.ndim != 2 or paths.shape[1] < 1:
        raise ShapeMismatchError(f"paths must be [n_paths, k] token ids, got shape {paths.shape}")
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
        accept = np.minimum(1.0, px / qx)
        rejected = rejected * (1.0 - accept)
        out[:, i] = rejected
        if i == k - 1:
            break
        residual = np.maximum(target - draft, 0.0)
        mass = residual.sum(axis=1, keepdims=True)
        # mass 0 means p_i = q_i: every draft is accepted, the rejection product is 0
        target = np.divide(residual, mass, out=np.zeros_like(residual), where=mass > 0)
        draft[rows, x] = 0.0
        draft /= draft.sum(axis=1, keepdims=True)
    return out


def sample_paths_without_replacement(q, k: int, n_paths: int, rng: np.random.Generator) -> np.ndarray:  # [n_paths, k]
    """``n_paths`` ordered draws of ``k`` distinct tokens from ``q`` (Gumbel-top-k)."""
    q = np.asarray(q, dtype=np.float64)
    k = check_draft_count(k)
    support = int(np.count_nonzero(q))
    if k > support:
        raise InvalidDraftCountError(f"q (draft) has only {support} tokens with positive probability; k={k} distinct drafts need k")
    with np.errstate(divide="ignore"):
        keys = np.log(q)[None, :] + rng.gumbel(size=(n_paths, q.size))  # [n_paths, V]
    top = np.argpartition(-keys, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(keys, top, axis=1), axis=1)
    return np.take_along_axis(top, order, axis=1)


def rrs_wor_monte_carlo(p, q, k_max: int, n_paths: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Estimated RRSw acceptance for ``k = 1..k_max`` and its standard error (module docstring).

    Returns:
        ``(mean [k_max], standard_error [k_max])``; ``k = 1`` is exact (error 0).
    """
    if n_paths < 2:
        raise InvalidDraftCountError(f"the Monte Carlo needs at least 2 paths for a standard error, got {n_paths}")
    p, q = as_distribution_pair(p, q)
    paths = sample_paths_without_replacement(q, k_max, n_paths, rng)
    products = path_rejection_products(p, q, paths)
    terms = products[:, :1] - products  # [n_paths, k_max] (1 - a_1) - prod_{i <= k} (1 - a_i)
    mean = float(np.minimum(p, q).sum()) + terms.mean(axis=0)
    error = terms.std(axis=0, ddof=1) / np.sqrt(n_paths)
    return mean, error


__all__ = ["path_rejection_products", "rrs_wor_monte_carlo", "sample_paths_without_replacement"]
