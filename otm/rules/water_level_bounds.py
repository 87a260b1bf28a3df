"""Bounds on the water levels from the flux alone, for any draft law of the water levels.

Lemma 9 of docs/optimal-verifier.md, section 8 (our derivation), stated there for two drafts
and proved there for ``k`` (section 8, "k drafts: the walk from bounds"): the water levels
``L`` of :func:`otm.rules.optimal_pair_wor.water_level_parameters` satisfy, at every cut
``j`` with flux ``F(j) > 0``,

    F(j) = integral_0^L(j) M_{R_s(j)}(j) ds,

``R_s(j)`` the component of ``j`` at level ``s`` (the ranks joined to it by cuts of level
above ``s``) and ``M_I(j)`` the mass of the draft sets whose highest member lies in ``[j,
t_I]`` and whose highest member below ``j`` lies in ``[f_I, j)`` (``masses.across(f_I, j,
t_I)``), which grows with ``I``. A set crosses ``j`` at level ``s`` exactly when both of
those members lie in ``R_s(j)``. So, with ``low < high`` two members of a draft set of positive
probability (the walk's members), ``R_0`` the longest run of ranks around the span ``[low,
high]`` whose inner cuts all carry flux, and ``M = min_{low < j <= high} L(j)`` (the
level the walk of :mod:`otm.rules.optimal_wor` needs to pass from member ``high`` down to
member ``low``):

(i)   ``M >= min_{low < j <= high} F(j) / M_{R_0}(j)`` (:func:`span_lower_bound`);
(ii)  if ``F(j) <= u M_W(j)`` at some cut ``low < j <= high``, ``W`` the span widened within
      ``R_0`` through the cuts whose bound (i) is at least ``u``, then ``M <= u``;
(iii) more generally, with ``W_s`` the span widened through the cuts whose bound exceeds
      ``s``: if ``F(j) <= integral_0^u M_{W_s}(j) ds`` at some such cut, ``M <= u``
      (:func:`span_at_most`).

Any number type (exact in rationals); ``margin`` makes every float comparison take a
decision only where it clears its threshold by that relative amount. For two drafts the
pair rule's :func:`otm.rules.optimal_pair_wor.yield_decision` is :func:`span_decision` on its
pair masses; the verifiers of ``k >= 3`` drafts (:mod:`decoding.verifiers.optimal_wor`) walk
with :func:`walk_decision` and build the levels only where it leaves the walk undecided.
"""
from __future__ import annotations


def first_run(flux: list, low: int, high: int) -> tuple[int, int] | None:
    """``(f, t)``: the longest run of ranks around ``[low, high]`` whose inner cuts all carry
    flux (``flux`` ``[n + 1]``); ``None`` when a cut between ``low`` and ``high`` carries none
    (then every level between them is 0)."""
    if any(flux[j] <= 0 for j in range(low + 1, high + 1)):
        return None
    f, t, n = low, high, len(flux) - 1
    while f > 0 and flux[f] > 0:
        f -= 1
    while t < n - 1 and flux[t + 1] > 0:
        t += 1
    return f, t


def cut_bound(flux: list, masses, run: tuple[int, int], j: int, margin=0):
    """Lemma 9 (i) at one cut ``j`` of ``run``: ``L(j) >= F(j) / M_run(j)``, less ``margin``
    (relative)."""
    f, t = run
    return flux[j] / masses.across(f, j, t) * (1 - margin)


def span_lower_bound(flux: list, masses, run: tuple[int, int], low: int, high: int, margin=0):
    """(i): ``min_{low < j <= high} L(j) >= min_j F(j) / M_run(j)`` (module docstring)."""
    return min(cut_bound(flux, masses, run, j, margin) for j in range(low + 1, high + 1))


def span_at_most(flux: list, masses, run: tuple[int, int], low: int, high: int, u, margin=0,
                 windows: int | None = None) -> bool:
    """(ii) and (iii): ``True`` proves ``min_{low < j <= high} L(j) <= u``. (ii) at every cut
    between ``low`` and ``high`` with the narrowest window ``W_u``; then (iii) at the cut of
    least bound, over every window ``W_s`` (``windows=None``) or, where each window's masses
    cost a pass over its ranks (the clock integral), a lower bound of the integral from at
    most ``windows`` of them: on ``[u (i - 1) / windows, u i / windows)`` the window of its
    upper end, which the windows of that interval contain (``windows=1`` is (ii) alone).
    ``False`` proves nothing."""

    def bound(i):
        return cut_bound(flux, masses, run, i, margin)

    b, c = _widened(bound, run, low, high, u)
    if any(flux[j] * (1 + margin) <= u * masses.across(b, j, c) for j in range(low + 1, high + 1)):
        return True
    if windows == 1:
        return False
    j = min(range(low + 1, high + 1), key=bound)
    if windows is None:
        return flux[j] * (1 + margin) <= _window_integral(masses, bound, run, low, high, j, u)
    total = u * 0
    for i in range(1, windows + 1):
        b, c = _widened(bound, run, low, high, u * i / windows)
        total += u / windows * _one_cut(masses, b, j, c)
    return flux[j] * (1 + margin) <= total


def _one_cut(masses, f: int, j: int, t: int):
    """``masses.across(f, j, t)`` where only the cut ``j`` of the window ``[f, t]`` is needed:
    masses that compute a run's cuts together (the clock integral's) may offer ``across_one``,
    the one cut alone."""
    one = getattr(masses, "across_one", None)
    return masses.across(f, j, t) if one is None else one(f, j, t)


def _widened(bound, run: tuple[int, int], low: int, high: int, s) -> tuple[int, int]:
    """``[low, high]`` widened within ``run`` through the cuts whose bound is at least ``s``."""
    f, t = run
    b, c = low, high
    while b > f and bound(b) >= s:
        b -= 1
    while c < t and bound(c + 1) >= s:
        c += 1
    return b, c


def _window_integral(masses, bound, run: tuple[int, int], low: int, high: int, j: int, u):
    """``integral_0^u M_{W_s}(j) ds`` of (iii): the window shrinks from outside as ``s``
    passes the running minima of ``bound`` going outward from the span."""
    f, t = run
    left, right, least = [], [], None  # (threshold, the window's end while s is below it)
    for i in range(low, f, -1):
        least = bound(i) if least is None else min(least, bound(i))
        left.append((least, i - 1))
    least = None
    for i in range(high + 1, t + 1):
        least = bound(i) if least is None else min(least, bound(i))
        right.append((least, i))
    total, s = u * 0, u * 0
    while s < u:
        start = left[-1][1] if left else low
        end = right[-1][1] if right else high
        step = min([u] + [side[-1][0] for side in (left, right) if side])
        total += (step - s) * _one_cut(masses, start, j, end)
        s = step
        for side in (left, right):
            while side and side[-1][0] <= s:
                side.pop()
    return total


def span_decision(flux: list, masses, low: int, high: int, u, margin=0, windows: int | None = None) -> bool | None:
    """Whether ``u < min_{low < j <= high} L(j)``, from the flux and the masses alone:
    ``True`` when ``u`` is below the bound (i), ``False`` when (ii) or (iii) proves the least
    level at most ``u`` (or a cut between carries no flux: the level there is 0), ``None``
    when neither settles it; ``windows`` as in :func:`span_at_most`."""
    run = first_run(flux, low, high)
    if run is None:
        return False
    return _decided(flux, masses, run, low, high, u, span_lower_bound(flux, masses, run, low, high, margin), margin,
                    windows)


def _decided(flux: list, masses, run: tuple[int, int], low: int, high: int, u, bound, margin, windows) -> bool | None:
    """:func:`span_decision` given the span's first run and its bound (i)."""
    if u < bound:
        return True
    return False if span_at_most(flux, masses, run, low, high, u, margin, windows) else None


def walk_decision(flux: list, masses, ranks: list, u, margin=0, windows: int | None = None) -> int | None:
    """The index into ``ranks`` (distinct ranks of the drafted members) of the member the
    walk of :mod:`otm.rules.optimal_wor` selects with uniform ``u`` (down from the highest
    member while ``u`` is below the least level between the next member and the highest),
    decided by :func:`span_decision` member by member (``margin``, ``windows`` as there);
    ``None`` where a step is undecided. The spans share their top, so the first run and the
    bound (i) of each step are carried from the step before: each cut is read once."""
    descending = sorted(range(len(ranks)), key=lambda i: -ranks[i])
    top, chosen = ranks[descending[0]], descending[0]
    run, bound, reached = None, None, top  # the bound (i) over the cuts (reached, top]
    for lower in descending[1:]:
        low = ranks[lower]
        if any(flux[j] <= 0 for j in range(low + 1, reached + 1)):
            break  # a cut between carries no flux: the level there is 0, span_decision's False
        run = run or first_run(flux, low, top)
        below = span_lower_bound(flux, masses, run, low, reached, margin)
        bound, reached = below if bound is None else min(bound, below), low
        verdict = _decided(flux, masses, run, low, top, u, bound, margin, windows)
        if verdict is None:
            return None
        if not verdict:
            break
        chosen = lower
    return chosen


__all__ = ["cut_bound", "first_run", "span_at_most", "span_decision", "span_lower_bound", "walk_decision"]
