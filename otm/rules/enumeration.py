"""Exact laws of selection rules by enumeration of their joint draft law.

Every rule in :mod:`otm.rules` is a Markov kernel ``K(y | x)`` from a draft tuple
``x = (x_1..x_k)`` to an output token ``y``. Given its joint draft law ``Q`` (a
:class:`otm.draft_laws.DraftLaw`), the coupling is ``pi(x, y) = Q(x) K(y | x)`` and

- the output law is ``sum_x pi(x, .)`` (``p`` for a lossless rule);
- the membership acceptance (docs/theory.md) is ``sum_x sum_{y in S(x)} pi(x, y)``;
- the "a draft was accepted" probability is ``sum_x Q(x) P(some x_i accepted | x)``.
  It can be smaller than the membership acceptance: a residual sample that happens to
  equal a rejected draft token counts for membership (k-SEQ, SpecTr (Sun et al. 2023), Alg. 2).

Sequential rules (RRS, SpecInfer, RRSw, k-SEQ; SpecHub (Sun et al. 2024), Alg. 1, SpecTr (Sun et al. 2023), Alg. 2) visit the
drafts in order: draft ``i`` is accepted with a probability that depends only on
``x_1..x_i`` and the rule's state, and after ``k`` rejections the output is drawn from a
final residual. :func:`sequential_kernel` turns such a description into ``K(. | x)``,
caching the state of every visited prefix.

Number types are kept: with exact :class:`fractions.Fraction` inputs (numpy object
arrays) every probability here is an exact rational.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Callable

import numpy as np

from ..distributions import as_distribution_pair, as_draft_distributions, check_draft_count, check_same_vocabulary, is_exact_input
from ..draft_laws import DraftLaw, check_coupling_size
from ..errors import NotApplicableError, ShapeMismatchError, UnknownNameError
from ..distributions import as_exact_distribution
from .base import RuleLaw

#: ``method=`` values accepted by every rule's ``exact_law``.
METHODS = ("auto", "enumeration", "closed_form")

#: ``method="auto"`` enumerates the draft law when it has at most this many tuples (a
#: Python loop over tuples: well under a second), and uses the closed form above it.
AUTO_ENUMERATION_LIMIT = 5_000

#: ... and when its coupling (``[tuples, V]``, one row of ``V`` entries per tuple) has at
#: most this many entries: a few thousand tuples of a 151,936-token vocabulary are
#: gigabytes and tens of seconds, where the closed form takes milliseconds.
AUTO_ENUMERATION_ENTRIES = 2**20

#: ``method="enumeration"`` refuses draft laws with more tuples than this (minutes of
#: Python loops beyond it); such instances need the closed form.
MAX_RULE_ENUMERATION = 200_000


#: A Markov kernel row: ``tuple of k tokens -> ([V] law of Y, P(a draft was accepted))``.
Kernel = Callable[[tuple], "tuple[np.ndarray, object]"]


def is_exact(values) -> bool:
    """True for a numpy object array (exact Fractions)."""
    return isinstance(values, np.ndarray) and values.dtype == object


def validate_pair(p, q) -> tuple[np.ndarray, np.ndarray]:
    """``(p, q)`` validated; exact (Fraction object arrays) if either input is an object
    array, float64 otherwise (:func:`otm.distributions.as_distribution_pair`)."""
    if _wants_exact(p) or _wants_exact(q):
        return check_same_vocabulary(as_exact_distribution(p, "p (target)"), as_exact_distribution(q, "q (draft)"))
    return as_distribution_pair(p, q)


def validate_one_q(p, q, refusal: str) -> tuple[np.ndarray, np.ndarray]:
    """:func:`validate_pair` for a rule that builds every draft from one ``q`` (``[V]``);
    a list of per-draft laws raises :class:`NotApplicableError` with the message ``refusal``."""
    if draft_ndim(q) != 1:
        raise NotApplicableError(refusal)
    return validate_pair(p, q)


def validate_draft_list(p, q, k: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """``p`` and the ``k`` per-draft laws ``q_1..q_k`` (``q`` is one vector shared by all
    drafts, or ``k`` vectors); exact when any input is exact."""
    k = check_draft_count(k)
    if draft_ndim(q) == 1:
        p, q = validate_pair(p, q)
        return p, [q] * k
    rows = list(q)
    if len(rows) != k:
        raise ShapeMismatchError(f"got {len(rows)} draft distributions for k={k} drafts")
    if _wants_exact(p) or any(_wants_exact(r) for r in rows):
        checked = [validate_pair(p, r) for r in rows]
        return checked[0][0], [c[1] for c in checked]
    p_checked, _ = as_distribution_pair(p, rows[0])
    return p_checked, as_draft_distributions(rows, k, p_checked.size)


def draft_ndim(q) -> int:
    """1 for one draft distribution, 2 for a list of them; a ragged list raises
    :class:`ShapeMismatchError`."""
    try:
        return int(np.ndim(q))
    except ValueError:
        raise ShapeMismatchError("the draft distributions must all have the same length") from None


def _wants_exact(values) -> bool:
    return is_exact_input(values)


def zeros_like(p: np.ndarray) -> np.ndarray:
    """``[V]`` zeros of ``p``'s number type (Fraction for exact inputs)."""
    if is_exact(p):
        out = np.empty(p.shape, dtype=object)
        out[...] = Fraction(0)
        return out
    return np.zeros(p.shape)


def one_hot(index: int, like: np.ndarray) -> np.ndarray:
    """``[V]`` indicator of ``index`` in ``like``'s number type."""
    out = zeros_like(like)
    out[index] = Fraction(1) if is_exact(like) else 1.0
    return out


def normalise(values: np.ndarray) -> np.ndarray:
    """``norm(v) = v / sum(v)``; a zero vector stays zero.

    A residual has zero mass exactly when the step that would reach it accepts with
    probability one (its rejection probability equals its mass), so the zero vector
    is never sampled from: it only ever carries weight zero.
    """
    total = values.sum()
    return values / total if total > 0 else values * 0


def positive_part(values: np.ndarray) -> np.ndarray:
    """``max(v, 0)`` elementwise, keeping the number type."""
    return np.maximum(values, 0)


def residual(target: np.ndarray, draft: np.ndarray) -> np.ndarray:
    """``norm(max(target - draft, 0))``: the law to sample from after rejecting a draft
    from ``draft`` verified against ``target`` (Leviathan Alg. 1, Leviathan et al. (2023))."""
    return normalise(positive_part(target - draft))


def accept_probability(target_mass, draft_mass):
    """``min(1, target / draft)`` for a token drawn with ``draft_mass > 0`` (the division only
    where it is below 1, so a denormal draft mass cannot overflow it)."""
    if draft_mass <= 0:
        raise AssertionError("a drafted token has positive draft probability")
    return 1 if target_mass >= draft_mass else target_mass / draft_mass


def canonical_output_law(p: np.ndarray, x: np.ndarray, draft_tuple, chances):
    """``(K(. | x) [V], P(a draft is accepted | x))`` of the canonical decomposition (Khisti
    et al. 2025): the draft at position ``j`` is selected with probability ``chances[j]`` and
    accepted with ``min(1, p(Z) / x(Z))`` (``x`` the law of the selected draft), else the
    output is drawn from ``norm(max(p - x, 0))`` (``p`` itself where that is empty, reached
    with probability 0)."""
    residual_law = normalise(positive_part(p - x))
    if not residual_law.sum() > 0:
        residual_law = p
    out = zeros_like(p)
    accepted = p[:1].sum() * 0
    for token, chance in zip(draft_tuple, chances):
        z = int(token)
        a = accept_probability(p[z], x[z]) if x[z] > 0 else p[z] * 0
        out[z] = out[z] + chance * a
        accepted = accepted + chance * a
    return out + (1 - accepted) * residual_law, accepted


def sequential_kernel(like: np.ndarray, start, step, final) -> Kernel:
    """The kernel of a sequential rule.

    Args:
        like: a ``[V]`` vector fixing the vocabulary size and number type (the target).
        start: the rule's state before the first draft.
        step: ``step(state, i, x) -> (a, next_state)``: draft ``i`` (0-based) with token
            ``x`` is accepted with probability ``a``; ``next_state`` is the state after
            rejecting it.
        final: ``final(state) -> [V]`` law of the output after all ``k`` drafts are
            rejected.

    ``P(Y = y | x) = sum_i [prod_{j<i} (1 - a_j)] a_i [y = x_i] + prod_j (1 - a_j) final(y)``.
    States are cached per prefix: a prefix determines the state.
    """
    cache: dict[tuple, tuple] = {(): (None, start)}

    def kernel(draft_tuple: tuple):
        out, reach = zeros_like(like), 1
        for i, x in enumerate(draft_tuple):
            prefix = draft_tuple[: i + 1]
            if prefix not in cache:
                cache[prefix] = step(cache[draft_tuple[:i]][1], i, x)
            a = cache[prefix][0]
            out[x] += reach * a
            reach = reach * (1 - a)
        return out + reach * final(cache[draft_tuple][1]), 1 - reach

    return kernel


def enumerate_law(target: np.ndarray, law: DraftLaw, kernel: Kernel) -> dict:
    """Exact coupling of ``law`` with a rule's kernel.

    Returns a dict with ``coupling`` (``[n, V]``, ``pi(x, y) = Q(x) K(y | x)``, rows in
    ``law.tuples`` order), ``output`` (``[V]`` law of ``Y``), ``acceptance``
    (membership, ``P(Y in S(X))``), ``accepted_per_token`` (``[V]``,
    ``P(Y = y, y in S(X))``) and ``draft_accepted`` (``P(a draft was accepted)``).
    ``target`` only fixes the vocabulary size and number type.
    """
    n = len(law.probs)
    if n > MAX_RULE_ENUMERATION:
        raise NotApplicableError(
            f"the draft law has {n:,} tuples, above MAX_RULE_ENUMERATION={MAX_RULE_ENUMERATION:,}; "
            "use method='closed_form' where the rule has one, or a smaller vocabulary"
        )
    check_coupling_size(n, target.size)
    exact = is_exact(target)
    coupling = np.empty((n, target.size), dtype=object) if exact else np.zeros((n, target.size))
    draft_accepted = Fraction(0) if exact else 0.0
    accepted_per_token = zeros_like(target)
    first = law.first_occurrence()
    for t in range(n):
        draft_tuple = tuple(int(x) for x in law.tuples[t])
        row, accepted = kernel(draft_tuple)
        coupling[t] = law.probs[t] * row
        draft_accepted = draft_accepted + law.probs[t] * accepted
        for j in np.flatnonzero(first[t]):
            y = draft_tuple[j]
            accepted_per_token[y] = accepted_per_token[y] + coupling[t, y]
    output = coupling.sum(axis=0) if n else zeros_like(target)
    return {
        "coupling": coupling,
        "output": output,
        "acceptance": accepted_per_token.sum(),
        "accepted_per_token": accepted_per_token,
        "draft_accepted": draft_accepted,
    }


def enumerated_rule_law(p: np.ndarray, draft_law: DraftLaw, kernel: Kernel, details: dict) -> RuleLaw:
    """The :class:`RuleLaw` of a rule with kernel ``kernel`` under ``draft_law``, by
    :func:`enumerate_law`; ``details`` is extended with its ``draft_accepted``,
    ``accepted_per_token`` and ``coupling``."""
    result = enumerate_law(p, draft_law, kernel)
    details.update(
        draft_accepted=result["draft_accepted"],
        accepted_per_token=result["accepted_per_token"],
        coupling=result["coupling"],
    )
    return RuleLaw(result["acceptance"], result["output"], draft_law, details)


def resolve_method(method: str, n_tuples: int, has_closed_form: bool, rule: str, vocab_size: int) -> str:
    """Pick ``"enumeration"`` or ``"closed_form"`` for ``method`` (one of :data:`METHODS`).

    ``"auto"`` enumerates up to :data:`AUTO_ENUMERATION_LIMIT` tuples whose coupling over
    ``vocab_size`` tokens has at most :data:`AUTO_ENUMERATION_ENTRIES` entries, and otherwise
    uses the closed form; a rule without a closed form raises :class:`NotApplicableError`
    above :data:`MAX_RULE_ENUMERATION` tuples or :data:`MAX_COUPLING_ENTRIES` entries.
    """
    if method not in METHODS:
        raise UnknownNameError(f"unknown method {method!r} for rule {rule!r}; choose one of {METHODS}")
    if method == "closed_form" and not has_closed_form:
        raise NotApplicableError(f"rule {rule!r} has no closed form; use method='enumeration'")
    if method == "auto":
        small = n_tuples <= AUTO_ENUMERATION_LIMIT and n_tuples * vocab_size <= AUTO_ENUMERATION_ENTRIES
        method = "enumeration" if small or not has_closed_form else "closed_form"
    if method == "enumeration" and n_tuples > MAX_RULE_ENUMERATION:
        raise NotApplicableError(
            f"rule {rule!r} needs its draft law enumerated ({n_tuples:,} tuples, above "
            f"MAX_RULE_ENUMERATION={MAX_RULE_ENUMERATION:,})"
            + ("; use method='closed_form'" if has_closed_form else "; it has no closed form: use a smaller vocabulary or k")
        )
    if method == "enumeration":
        check_coupling_size(n_tuples, vocab_size, "; use method='closed_form'" if has_closed_form else "")
    return method


def support_size(q: np.ndarray) -> int:
    """Number of tokens with positive probability."""
    return int(np.count_nonzero(np.asarray(q > 0, dtype=bool)))


#: Tuple counts are capped here: anything larger is refused anyway, and computing ``V^k``
#: exactly for a huge ``k`` would take longer than refusing.
TUPLE_COUNT_CAP = 10**18


def _capped(log10_count: float, exact) -> int:
    """``exact()`` when ``10**log10_count`` is below the cap, else the cap (no big integers)."""
    return TUPLE_COUNT_CAP if log10_count > 18 else min(exact(), TUPLE_COUNT_CAP)


def count_iid(q: np.ndarray, k: int) -> int:
    """Number of tuples of :func:`otm.draft_laws.iid_law` (``m**k``, ``m`` = support size),
    at most :data:`TUPLE_COUNT_CAP`."""
    m = support_size(q)
    return _capped(k * math.log10(max(m, 1)), lambda: m**k)


def count_independent(qs: list[np.ndarray]) -> int:
    """Number of tuples of :func:`otm.draft_laws.independent_law`, at most :data:`TUPLE_COUNT_CAP`."""
    sizes = [support_size(qi) for qi in qs]
    return _capped(sum(math.log10(max(m, 1)) for m in sizes), lambda: math.prod(sizes))


def count_without_replacement(q: np.ndarray, k: int) -> int:
    """Number of tuples of :func:`otm.draft_laws.without_replacement_law`: ``m!/(m-k)!``, or
    ``m!`` when the ``m`` positive tokens run out before ``k`` (the drafts past the support
    are deterministic); at most :data:`TUPLE_COUNT_CAP`."""
    m = support_size(q)
    j = min(k, m)
    return _capped(j * math.log10(max(m, 1)), lambda: math.perm(m, j))
