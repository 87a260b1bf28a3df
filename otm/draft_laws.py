"""Joint draft laws ``Q(x_1, ..., x_k)`` in sparse form.

A :class:`DraftLaw` is the list of draft tuples with positive probability and those
probabilities. It is the ``Q`` of the OTM problem (SpecTr, Sun et al. 2023, eq. 4; SpecHub (Sun et al. 2024), §3.1):
every formulation in :mod:`otm.formulations` and every rule in :mod:`otm.rules` takes one.

The joint law the drafts are drawn from is their *draft scheme* (docs/notation.md), one of
:data:`DRAFT_SCHEMES`; :func:`draft_law` builds any of them by name. Constructors (one per
draft scheme used in the papers):

- :func:`iid_law` - k i.i.d. drafts from ``q`` (SpecTr, RRS, Khisti et al. (2025));
- :func:`without_replacement_law` - k distinct drafts drawn successively from ``q``
  renormalised over the tokens not yet drawn (RRSw, SpecHub (Sun et al. 2024), Alg. 1);
- :func:`independent_law` - draft ``i`` from its own ``q_i`` (SpecInfer, Khisti et al. 2025, Remark 1);
- :func:`hub_law` - SpecHub's sparse law (SpecHub, Sun et al. 2024, §4): pairs ``(x, a)`` with probability
  ``q(x)`` and ``(a, x)`` with ``q(a) q(x) / (1 - q(a))``, ``a = argmax q``;
- :func:`greedy_law` - the top ``k-1`` tokens of ``q`` fixed, the last draft sampled from
  ``q`` without them;
- :func:`table_law` - an explicit user table.

Probabilities may be float64 or exact :class:`fractions.Fraction` (numpy object arrays,
from :func:`otm.distributions.as_exact_distribution`); every constructor keeps the number type
it is given, so exact instances stay exact.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .distributions import as_distribution, check_draft_count
from .errors import InvalidDistributionError, InvalidDraftCountError, NotApplicableError, ShapeMismatchError, UnknownNameError

#: Every draft scheme (the joint law of the k drafts, docs/notation.md): what :func:`draft_law`
#: builds, what ``draft_scheme=`` names in the public functions (``--draft-scheme`` on the command
#: line) and a rule's ``draft_scheme`` (:mod:`otm.rules.registry`). ``"independent"`` draws
#: draft ``i`` from its own ``q_i`` (``q`` is ``[k, V]``); the others draw from one ``q``.
DRAFT_SCHEMES = ("iid", "without_replacement", "hub", "greedy", "independent")

#: The draft schemes that draw every draft from one ``q`` (all but ``"independent"``).
ONE_Q_SCHEMES = tuple(scheme for scheme in DRAFT_SCHEMES if scheme != "independent")

#: Enumerating more draft tuples than this raises :class:`NotApplicableError`: use the
#: closed forms in :mod:`otm.formulations.closed_form`, which never enumerate.
MAX_ENUMERATED_TUPLES = 2_000_000

#: An enumeration's coupling (``[tuples, V]``, one row of ``V`` entries per draft tuple: the
#: enumerated rule laws and the full LP's plan) is refused above this many entries (2 GiB of
#: float64) rather than allocated.
MAX_COUPLING_ENTRIES = 2**28


@dataclass(frozen=True, eq=False)
class DraftLaw:
    """A joint draft law ``Q`` over ordered k-tuples of tokens in ``range(vocab_size)``.

    Attributes:
        tuples: ``[n, k]`` int64, distinct rows, the support of ``Q``.
        probs: ``[n]`` positive probabilities summing to 1 (float64 or Fraction objects).
        vocab_size: ``V``.
        name: the scheme that built it (``"iid"``, ``"without_replacement"``, ...).
    """

    tuples: np.ndarray  # [n, k]
    probs: np.ndarray  # [n]
    vocab_size: int
    name: str = "table"

    @property
    def k(self) -> int:
        """Number of drafts per tuple."""
        return int(self.tuples.shape[1])

    @property
    def is_exact(self) -> bool:
        """True when the probabilities are exact rationals."""
        return self.probs.dtype == object

    def _zeros(self, shape) -> np.ndarray:
        if self.is_exact:
            out = np.empty(shape, dtype=object)
            out[...] = Fraction(0)
            return out
        return np.zeros(shape)

    def first_occurrence(self) -> np.ndarray:
        """``[n, k]`` bool: entry ``(t, j)`` is the first position of its token in tuple ``t``,
        so that ``tuples[first_occurrence()]`` lists each tuple's distinct tokens ``S(x)``."""
        first = np.ones(self.tuples.shape, dtype=bool)
        for j in range(1, self.k):
            first[:, j] = ~(self.tuples[:, :j] == self.tuples[:, j : j + 1]).any(axis=1)
        return first

    def membership_probs(self) -> np.ndarray:
        """``[V]``: ``P(y in S(X))`` for each token ``y``, the per-token acceptance bound
        (docs/theory.md: token y is accepted with probability at most min(p(y), this))."""
        first = self.first_occurrence()
        rows, cols = np.nonzero(first)
        out = self._zeros(self.vocab_size)
        np.add.at(out, self.tuples[rows, cols], self.probs[rows])
        return out

    def all_in_probability(self, token_set) -> float | Fraction:
        """``Q(every draft in H)`` for a token set ``H`` given as a ``[V]`` bool mask or
        an iterable of token ids (the second term of the min-cut formula)."""
        mask = np.zeros(self.vocab_size, dtype=bool)
        token_set = np.asarray(token_set)
        if token_set.dtype == bool:
            if token_set.shape != (self.vocab_size,):
                raise ShapeMismatchError(f"mask has shape {token_set.shape}, expected ({self.vocab_size},)")
            mask = token_set
        else:
            mask[token_set.astype(np.int64)] = True
        inside = mask[self.tuples].all(axis=1)
        return self.probs[inside].sum() if inside.any() else self._zeros(()).item()

    def marginal(self, i: int) -> np.ndarray:
        """``[V]``: the law of draft ``i`` (0-based)."""
        out = self._zeros(self.vocab_size)
        np.add.at(out, self.tuples[:, i], self.probs)
        return out

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``[size, k]`` draft tuples drawn from ``Q`` with the given generator."""
        probs = self.probs.astype(np.float64)
        index = rng.choice(len(probs), size=size, p=probs / probs.sum())
        return self.tuples[index]


def _validated(q, name="q (draft)") -> np.ndarray:
    """Exact Fraction arrays pass through (checked); anything else goes through
    :func:`otm.distributions.as_distribution`."""
    arr = np.asarray(q)
    if arr.dtype == object:
        if arr.ndim != 1 or not all(isinstance(v, (Fraction, int)) for v in arr):
            raise InvalidDistributionError(f"{name}: an object array must hold Fractions")
        if any(v < 0 for v in arr) or sum(arr) != 1:
            raise InvalidDistributionError(f"{name}: exact probabilities must be >= 0 and sum to exactly 1")
        return np.array([Fraction(v) for v in arr], dtype=object)
    return as_distribution(arr, name)


def _check_size(n: int, scheme: str) -> None:
    if n > MAX_ENUMERATED_TUPLES:
        raise NotApplicableError(
            f"{scheme} law has {n:,} draft tuples, above MAX_ENUMERATED_TUPLES="
            f"{MAX_ENUMERATED_TUPLES:,}; use method='closed_form' (otm.optimal_acceptance) "
            "or a smaller vocabulary"
        )


def _from_rows(tuples, probs, vocab_size: int, name: str) -> DraftLaw:
    tuples = np.asarray(tuples, dtype=np.int64).reshape(len(probs), -1)
    keep = np.asarray([pr > 0 for pr in probs], dtype=bool)
    return DraftLaw(tuples[keep], np.asarray(probs)[keep], vocab_size, name)


def iid_law(q, k: int) -> DraftLaw:
    """k i.i.d. drafts: ``Q(x_1..x_k) = prod_i q(x_i)`` (SpecHub, Sun et al. 2024, §3.1)."""
    return _iid_law(_validated(q), check_draft_count(k))


def _iid_law(q: np.ndarray, k: int) -> DraftLaw:
    """:func:`iid_law` of a validated ``q`` and ``k``."""
    support = np.flatnonzero([v > 0 for v in q])
    _check_size(len(support) ** k, "i.i.d.")
    tuples = np.array(list(itertools.product(support, repeat=k)), dtype=np.int64).reshape(-1, k)
    probs = np.prod(q[tuples], axis=1)
    return DraftLaw(tuples, probs, q.size, "iid")


def without_replacement_law(q, k: int) -> DraftLaw:
    """k distinct drafts, each from ``q`` renormalised over the tokens not yet drawn:
    ``Q(x_1..x_k) = prod_i q(x_i) / (1 - sum_{j<i} q(x_j))`` (SpecHub, Sun et al. 2024, Alg. 1, RRSw).

    Exhausted support (``m`` tokens with ``q > 0``, ``m < k <= V``): the first ``m`` draws
    are a random ordering of the support (the law above with ``k = m``; the ``m``-th draw
    is the last support token, with conditional probability 1), and the other ``k - m``
    drafts are deterministic: the tokens not yet drawn in :func:`greedy_order` (``q``
    descending, ties to the lower index), i.e. the ``k - m`` lowest-index tokens with
    ``q = 0`` - the convention of :func:`greedy_law`'s fallback. So
    ``Q(x_1..x_k) = prod_{i<=m} q(x_i) / (1 - sum_{j<i} q(x_j))`` when ``x_{m+1..k}`` is
    that tail, and 0 otherwise. Draft ``i`` then has a well-defined conditional law given
    ``x_1..x_{i-1}``: ``q`` renormalised off the drawn tokens while it has mass, else the
    point mass at the next token of the order (what :mod:`otm.rules.rrs_wor`
    verifies against). At temperature 0 (one-hot ``q``) RRSw then drafts the argmax of
    ``q`` and fixed tokens, in line with SpecHub (Sun et al. 2024), §5.2 ("RRS without replacement at zero
    temperature ... become[s] top-2 greedy decoding"); one-hot ``q`` carries no ranking
    of the other tokens, so they come in index order. The convention is ours: Alg. 1 of
    SpecHub (Sun et al. 2024) leaves ``k > m`` undefined.

    ``k > V`` raises :class:`InvalidDraftCountError` (there are no ``k`` distinct tokens).

    >>> law = without_replacement_law([0.0, 1.0, 0.0], 2)
    >>> law.tuples.tolist(), law.probs.tolist()
    ([[1, 0]], [1.0])
    """
    q = _validated(q)
    return _without_replacement_law(q, check_scheme_draft_count("without_replacement", k, q.size))


def _without_replacement_law(q: np.ndarray, k: int) -> DraftLaw:
    """:func:`without_replacement_law` of a validated ``q`` and ``k``."""
    support = np.flatnonzero([v > 0 for v in q])
    drawn = min(k, len(support))  # random draws; the other k - drawn drafts are fixed
    n = int(np.prod(np.arange(len(support) - drawn + 1, len(support) + 1, dtype=np.float64)))
    _check_size(n, "without-replacement")
    tuples = np.array(list(itertools.permutations(support, drawn)), dtype=np.int64).reshape(-1, drawn)
    qv = q[tuples]
    if q.dtype == object:
        remaining = q.sum() - (np.cumsum(qv, axis=1) - qv)
    else:
        remaining = np.stack([_mass_outside(q, tuples[:, :i]) for i in range(drawn)], axis=1)
    probs = np.prod(qv / remaining, axis=1)
    tail = greedy_order(q)[drawn:k]  # the support comes first in the order: the q = 0 tokens
    tuples = np.concatenate([tuples, np.tile(tail, (len(tuples), 1))], axis=1)
    return _from_rows(tuples, probs, q.size, "without_replacement")  # drops underflowed rows


def _mass_outside(q: np.ndarray, drawn: np.ndarray) -> np.ndarray:
    """``[n]``: ``sum(q) - sum(q[drawn[t]])`` for each row ``t`` of ``drawn`` (``[n, m]``,
    distinct tokens per row), computed without cancellation.

    ``1 - q(x_1)`` loses every digit when ``q(x_1)`` is close to 1 (with q = [1, 1e-203,
    5e-324] it gives 0 instead of 1e-203). Instead sum the tokens *outside* the drawn set:
    with ``c`` the prefix sums of ``q`` sorted ascending, the tokens outside are runs of
    consecutive ranks between the drawn ranks, and each run's sum ``c[b] - c[a]`` is exact
    up to rounding relative to the run's own largest term.
    """
    order = np.argsort(q, kind="stable")
    rank = np.empty(q.size, dtype=np.int64)
    rank[order] = np.arange(q.size)
    prefix = np.concatenate([[0.0], np.cumsum(q[order])])
    cuts = np.sort(rank[drawn], axis=1)  # [n, m]
    starts = np.concatenate([np.zeros((len(drawn), 1), dtype=np.int64), cuts + 1], axis=1)
    ends = np.concatenate([cuts, np.full((len(drawn), 1), q.size, dtype=np.int64)], axis=1)
    return (prefix[ends] - prefix[starts]).sum(axis=1)


def independent_law(qs) -> DraftLaw:
    """Draft ``i`` from its own ``q_i``, independently: ``Q = prod_i q_i(x_i)``
    (SpecInfer with different draft models; Khisti et al. 2025, Remark 1)."""
    qs = [_validated(qi, f"q_{i + 1} (draft {i + 1})") for i, qi in enumerate(qs)]
    if not qs:
        raise InvalidDraftCountError("independent_law needs at least one draft distribution")
    if len({qi.size for qi in qs}) != 1:
        raise ShapeMismatchError("the draft distributions must share one vocabulary size")
    return _independent_law(qs)


def _independent_law(qs: list) -> DraftLaw:
    """:func:`independent_law` of validated ``q_i`` of one size."""
    supports = [np.flatnonzero([v > 0 for v in qi]) for qi in qs]
    _check_size(int(np.prod([len(s) for s in supports], dtype=np.float64)), "independent")
    tuples = np.array(list(itertools.product(*supports)), dtype=np.int64).reshape(-1, len(qs))
    probs = qs[0][tuples[:, 0]]
    for i in range(1, len(qs)):
        probs = probs * qs[i][tuples[:, i]]
    return DraftLaw(tuples, probs, qs[0].size, "independent")


def _as_float(q) -> np.ndarray:
    """float64 view of a float or exact (Fraction) vector, for ordering only."""
    return np.asarray(q, dtype=np.float64)


def hub_token(q) -> int:
    """SpecHub's hub ``a = argmax q`` (ties to the lowest token index)."""
    return int(np.argmax(_as_float(q)))


def hub_law(q) -> DraftLaw:
    """SpecHub's sparse joint law for k = 2 (SpecHub, Sun et al. 2024, §4, proof of Thm 2):
    ``Q(x, a) = q(x)`` and ``Q(a, x) = q(a) q(x) / (1 - q(a))`` for ``x != a``,
    ``a = argmax q``. The first draft is marginally ``q``; every pair contains ``a``.

    When ``q`` is one-hot (``q(a) = 1``) the law is the single pair ``(a, a)``.
    """
    return _hub_law(_validated(q))


def _hub_law(q: np.ndarray) -> DraftLaw:
    """:func:`hub_law` of a validated ``q``."""
    a = hub_token(q)
    others = np.array([x for x in range(q.size) if x != a and q[x] > 0], dtype=np.int64)
    if len(others) == 0:
        one = Fraction(1) if q.dtype == object else 1.0
        return DraftLaw(np.array([[a, a]]), np.array([one], dtype=q.dtype), q.size, "hub")
    first = np.stack([others, np.full_like(others, a)], axis=1)
    second = np.stack([np.full_like(others, a), others], axis=1)
    # 1 - q(a) as the sum of the other masses: 1 - q(a) cancels to 0 when q(a) rounds to 1
    probs = np.concatenate([q[others], q[a] * q[others] / q[others].sum()])
    return _from_rows(np.concatenate([first, second]), probs, q.size, "hub")


def sample_without_replacement(q, k: int, size: int, rng: np.random.Generator, first=None) -> np.ndarray:  # [size, k]
    """``size`` ordered draws of ``k`` distinct tokens from ``q`` (``[V]`` float), the law of
    :func:`without_replacement_law`, at any vocabulary size (no enumeration), in O(V) once
    plus O(k^2 log V) per draw: draw ``i`` inverts the CDF of ``q`` with the earlier draws
    cut out (a uniform on ``[0, 1 - q(drawn))`` is mapped past each drawn token's interval,
    in index order). Needs ``k`` tokens with ``q > 0``.

    ``first`` (``[size]`` token ids with ``q > 0``, optional) fixes the first draw of each
    row; the other ``k - 1`` then follow the law given the first draw (successive sampling
    from ``q`` with the first token removed)."""
    q = np.asarray(q, dtype=np.float64)
    k = check_draft_count(k)
    support = int(np.count_nonzero(q))
    if k > support:
        raise InvalidDraftCountError(f"q (draft) has only {support} tokens with positive probability; k={k} distinct drafts need k")
    if first is not None:
        first = np.asarray(first, dtype=np.int64)
        if first.shape != (size,) or (first < 0).any() or (first >= q.size).any() or (q[first] <= 0).any():
            raise InvalidDraftCountError(f"first must be {size} token ids with q > 0, got shape {first.shape}")
    cdf = np.cumsum(q)
    total = cdf[-1]
    before = cdf - q  # [V] mass strictly before each token
    last_positive = int(np.flatnonzero(q > 0)[-1])
    out = np.empty((size, k), dtype=np.int64)
    for row in range(size):
        drawn: list[int] = []  # kept sorted by token id
        removed = 0.0
        for i in range(k):
            if i == 0 and first is not None:
                out[row, 0] = x = int(first[row])
                removed, drawn = q[x], [x]
                continue
            u = rng.random() * (total - removed)
            for x in drawn:  # skip the intervals of the drawn tokens, in index order
                if u >= before[x]:
                    u += q[x]
            x = min(int(np.searchsorted(cdf, u, side="right")), last_positive)
            while q[x] == 0 or x in drawn:  # rounding at an interval edge: the next live token
                x = x + 1 if x < last_positive else int(np.flatnonzero((q > 0) & ~np.isin(np.arange(q.size), drawn))[0])
            out[row, i] = x
            removed += q[x]
            drawn = sorted([*drawn, x])
    return out


def greedy_order(q) -> np.ndarray:
    """Tokens sorted by ``q`` descending, ties to the lower index (stable; :func:`ids_within_ties`)."""
    keys = -_as_float(q)
    return ids_within_ties(keys, np.argsort(keys))


def ids_within_ties(keys: np.ndarray, order: np.ndarray) -> np.ndarray:
    """``order`` (an unstable argsort of ``keys``, floats without NaN) with each run of equal
    keys in increasing id: the stable argsort, as one more argsort of unique int64 keys,
    ``run * n + id``. Real rows have many ties (bfloat16 logits); numpy's stable sort of floats
    is a timsort, its default sort of floats and of int64 is vectorised (measured in the set-up
    of research/optimal_wor/JOURNAL.md, "And the Python around it")."""
    if order.size < 2:
        return order
    ranked = keys[order]
    differ = ranked[1:] != ranked[:-1]
    if differ.all():  # no ties: every sort gives this order
        return order
    run = np.concatenate(([0], np.cumsum(differ)))
    return order[np.argsort(run * len(order) + order)]


def greedy_membership(q, k: int) -> np.ndarray:
    """``[V]`` ``P(y in S(X))`` of :func:`greedy_law` without building the law (any ``k <= V``,
    O(V log V)): 1 on the top ``k - 1`` tokens ``F``, ``q(y) / q(R)`` on the rest ``R`` (``R``
    = the other tokens), or, when ``q(R) = 0``, 1 on the next token in greedy order."""
    q = _validated(q)
    return _greedy_membership(q, check_scheme_draft_count("greedy", k, q.size))


def _greedy_membership(q: np.ndarray, k: int) -> np.ndarray:
    """:func:`greedy_membership` of a validated ``q`` and ``k``."""
    order = greedy_order(q)
    fixed, rest = order[: k - 1], order[k - 1 :]
    one = Fraction(1) if q.dtype == object else 1.0
    out = q * 0
    out[fixed] = one
    rest_mass = q[rest].sum()
    if rest_mass > 0:
        out[rest] = q[rest] / rest_mass
    else:
        out[rest[0]] = one
    return out


def hub_membership(q) -> np.ndarray:
    """``[V]`` ``P(y in S(X))`` of :func:`hub_law` without building the law: 1 at the hub
    ``a``, ``q(x) / (1 - q(a))`` elsewhere (``1 - q(a)`` summed from the other masses); 0
    off ``a`` for a one-hot ``q``."""
    return _hub_membership(_validated(q))


def _hub_membership(q: np.ndarray) -> np.ndarray:
    """:func:`hub_membership` of a validated ``q``."""
    a = hub_token(q)
    others = q.copy()
    others[a] = 0
    rest = others.sum()
    out = others / rest if rest > 0 else others
    out[a] = Fraction(1) if q.dtype == object else 1.0
    return out


def greedy_law(q, k: int) -> DraftLaw:
    """Greedy drafts: the top ``k-1`` tokens of ``q`` (see :func:`greedy_order`) are always
    proposed, the last draft is sampled from ``q`` restricted to the other tokens and
    renormalised. If ``q`` has no mass outside the fixed tokens, the last draft is the
    next token in the order (deterministic). Needs ``k <= V``.
    """
    q = _validated(q)
    return _greedy_law(q, check_scheme_draft_count("greedy", k, q.size))


def _greedy_law(q: np.ndarray, k: int) -> DraftLaw:
    """:func:`greedy_law` of a validated ``q`` and ``k``."""
    order = greedy_order(q)
    fixed, rest = order[: k - 1], order[k - 1 :]
    rest_mass = q[rest].sum()
    if rest_mass > 0:
        last = np.array([x for x in rest if q[x] > 0], dtype=np.int64)
        probs = q[last] / rest_mass
    else:
        last = rest[:1]
        probs = np.array([Fraction(1) if q.dtype == object else 1.0], dtype=q.dtype)
    tuples = np.concatenate([np.tile(fixed, (len(last), 1)), last[:, None]], axis=1)
    return DraftLaw(tuples.astype(np.int64), probs, q.size, "greedy")


def table_law(tuples, probs, vocab_size: int) -> DraftLaw:
    """An explicit joint law: rows of ``tuples`` (``[n, k]`` token ids) with ``probs``.
    Repeated rows are merged; zero-probability rows dropped."""
    tuples = np.asarray(tuples, dtype=np.int64)
    if tuples.ndim != 2:
        raise ShapeMismatchError(f"tuples must be a [n, k] array, got shape {tuples.shape}")
    if tuples.size and (tuples.min() < 0 or tuples.max() >= vocab_size):
        raise InvalidDistributionError(f"draft tokens must lie in range(vocab_size={vocab_size})")
    probs = _validated(probs, "draft table probabilities")
    if probs.size != tuples.shape[0]:
        raise ShapeMismatchError(f"{tuples.shape[0]} tuples but {probs.size} probabilities")
    unique, inverse = np.unique(tuples, axis=0, return_inverse=True)
    merged = np.zeros(len(unique), dtype=probs.dtype)
    if probs.dtype == object:
        merged[:] = Fraction(0)
    np.add.at(merged, inverse.ravel(), probs)
    return _from_rows(unique, merged, int(vocab_size), "table")


def check_scheme_draft_count(scheme: str, k, vocab_size: int) -> int:
    """``k`` as an int, checked for drafts of ``scheme`` over ``vocab_size`` tokens: an integer
    ``>= 1`` (:func:`otm.distributions.check_draft_count`), ``k = 2`` for the hub law, at most
    ``V`` distinct drafts without replacement or greedy; else :class:`InvalidDraftCountError`.
    The public entries check ``k`` with it once and pass the checked value inward."""
    k = check_draft_count(k)
    if scheme == "hub" and k != 2:
        raise InvalidDraftCountError(f"SpecHub's hub law is defined for k=2 drafts (SpecHub, Sun et al. 2024, §4), got k={k}")
    if scheme in ("without_replacement", "greedy") and k > vocab_size:
        drafts = "drafts without replacement" if scheme == "without_replacement" else "greedy drafts"
        raise InvalidDraftCountError(f"k={k} distinct {drafts} from a vocabulary of {vocab_size} tokens")
    return k


def draft_law(draft_scheme: str, q, k: int) -> DraftLaw:
    """The joint draft law of ``k`` drafts of the draft scheme ``draft_scheme`` (one of
    :data:`DRAFT_SCHEMES`) from ``q``: ``[V]``, or ``[k, V]`` for ``"independent"`` (also
    accepted with ``"iid"``: draft ``i`` from ``q_i``).

    >>> draft_law("without_replacement", [0.5, 0.5], 2).tuples.tolist()
    [[0, 1], [1, 0]]
    """
    if draft_scheme not in DRAFT_SCHEMES:
        raise UnknownNameError(f"unknown draft scheme {draft_scheme!r}; choose one of {DRAFT_SCHEMES}")
    if draft_scheme == "independent" or (draft_scheme == "iid" and np.ndim(q) == 2):
        if np.ndim(q) != 2:
            raise ShapeMismatchError(f"independent drafts need k draft distributions q ([k, V]), got shape {np.shape(q)}")
        if len(q) != check_draft_count(k):
            raise ShapeMismatchError(f"got {len(q)} draft distributions for k={k}")
        return independent_law(q)
    q = _validated(q)
    return valid_draft_law(draft_scheme, q, check_scheme_draft_count(draft_scheme, k, q.size))


def valid_draft_law(scheme: str, q, k: int) -> DraftLaw:
    """:func:`draft_law` of inputs checked already: ``q`` validated (:func:`_validated`:
    float64, or exact Fractions; ``[k, V]`` rows for ``"independent"``) and ``k`` by
    :func:`check_scheme_draft_count`; nothing is checked again."""
    assert isinstance(k, int) and scheme in DRAFT_SCHEMES, (scheme, k)
    if scheme == "independent":
        return _independent_law(list(q))
    if scheme == "iid":
        return _iid_law(q, k)
    if scheme == "without_replacement":
        return _without_replacement_law(q, k)
    if scheme == "hub":
        return _hub_law(q)
    return _greedy_law(q, k)


def valid_membership(scheme: str, q, k: int) -> np.ndarray:
    """``[V]`` ``P(y in S(X))`` of the hub or greedy law (:func:`hub_membership`,
    :func:`greedy_membership`) of a validated ``q`` and checked ``k``, without building the law."""
    assert scheme in ("hub", "greedy") and isinstance(k, int), (scheme, k)
    return _hub_membership(q) if scheme == "hub" else _greedy_membership(q, k)


def check_coupling_size(n_tuples: int, vocab_size: int, advice: str = "") -> None:
    """:class:`NotApplicableError` when the coupling ``[n_tuples, vocab_size]`` of an
    enumeration has more than :data:`MAX_COUPLING_ENTRIES` entries (before allocating it)."""
    if n_tuples * vocab_size > MAX_COUPLING_ENTRIES:
        raise NotApplicableError(
            f"enumerating {n_tuples:,} draft tuples over {vocab_size:,} tokens needs a coupling of "
            f"{n_tuples * vocab_size:.3g} entries, above MAX_COUPLING_ENTRIES={MAX_COUPLING_ENTRIES:,}"
            + (advice or "; use a smaller vocabulary (top-k / top-p) or a rule with a closed form")
        )
