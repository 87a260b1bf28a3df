"""Bounds on the water levels from the flux alone, for any draft law of the water levels.

Bounds on a water level from the flux, for any ``k`` (our derivation:
docs/optimal-verifier-proofs.md#bounds-on-a-water-level-from-the-flux): the water levels
``L`` of :func:`otm.rules.water_levels.construction.water_level_parameters` satisfy, at every cut
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
pair rule's :func:`otm.rules.water_levels.pair.yield_decision` is :func:`span_decision` on its
pair masses; the batched verifier of ``k >= 3`` drafts walks
with :func:`walk_decision` and build the levels only where it leaves the walk undecided.

Where the flux is a float array and the masses give a run's cuts at once and an upper bound by
the highest member (``highest_in``: ``M_R(j) <= sum_{a in [j, t_R]} sigma_a``, the clock
integral's), every test first reads cheap bounds from that upper bound, two suffix sums per
cut, and computes interval masses only at the cuts the cheap bounds cannot settle: for (i) the
cuts that may hold the least bound, for the widening the cut where a window may end, for (ii)
the cuts that may pass. With :data:`LOWER_SLACK` far above the masses' rounding, the decisions
are those of the exact bounds (tested draw for draw), except where an interval mass rounds to
0: its bound (i) is then taken as 0, and a cheap bound may pass the cut, itself a valid bound
(``F(j) / sum sigma <= F(j) / M_R0(j) <= L(j)``).
"""
from __future__ import annotations

import numpy as np


def first_run(flux, low: int, high: int) -> tuple[int, int] | None:
    """``(f, t)``: the longest run of ranks around ``[low, high]`` whose inner cuts all carry
    flux (``flux`` ``[n + 1]``); ``None`` when a cut between ``low`` and ``high`` carries none
    (then every level between them is 0)."""
    if not _carries(flux, low + 1, high):
        return None
    n = len(flux) - 1
    if isinstance(flux, np.ndarray):  # the loops below, at once
        left, right = np.flatnonzero(flux[1:low + 1] <= 0), np.flatnonzero(flux[high + 1:n] <= 0)
        return (int(left[-1]) + 1 if left.size else 0), (high + int(right[0]) if right.size else n - 1)
    f, t = low, high
    while f > 0 and flux[f] > 0:
        f -= 1
    while t < n - 1 and flux[t + 1] > 0:
        t += 1
    return f, t


def _carries(flux, lo: int, hi: int) -> bool:
    """Whether every cut ``lo..hi`` carries flux."""
    if isinstance(flux, np.ndarray):
        return bool(np.all(flux[lo:hi + 1] > 0))
    return all(flux[j] > 0 for j in range(lo, hi + 1))


def cut_bound(flux, masses, run: tuple[int, int], j: int, margin=0):
    """The lower bound (i) of the module docstring at one cut ``j`` of ``run``:
    ``L(j) >= F(j) / M_run(j)``, less ``margin`` (relative); 0 (no information) where the mass
    rounds to 0, which exact arithmetic rules out
    (docs/optimal-verifier-proofs.md#water-levels-are-probabilities)."""
    f, t = run
    mass = masses.across(f, j, t)
    return flux[j] / mass * (1 - margin) if mass > 0 else mass * 0


def _reads_spans(flux, masses) -> bool:
    """Whether the masses give a run's cuts at once (``across_cuts``, the clock integral's) and
    the flux is an array: then the bounds are read a span at a time, in numpy."""
    return isinstance(flux, np.ndarray) and hasattr(masses, "across_cuts")


def _across_cuts(flux, masses, f: int, lo: int, hi: int, t: int):
    """``masses.across(f, j, t)`` at the cuts ``j = lo..hi``: an array where
    :func:`_reads_spans`, else a list; the same values either way."""
    if _reads_spans(flux, masses):
        return masses.across_cuts(f, lo, hi, t)
    return [masses.across(f, j, t) for j in range(lo, hi + 1)]


def _cut_bounds(flux, masses, run: tuple[int, int], lo: int, hi: int, margin=0):
    """:func:`cut_bound` at the cuts ``lo..hi`` of ``run``, in order (an array where
    :func:`_across_cuts` gives one: the same float operations, cut by cut)."""
    if not _reads_spans(flux, masses):
        return [cut_bound(flux, masses, run, j, margin) for j in range(lo, hi + 1)]
    mass = masses.across_cuts(run[0], lo, hi, run[1])
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(mass > 0, flux[lo:hi + 1] / mass * (1 - margin), 0.0)


#: How far (relative) the cheap lower bounds of (i) (:func:`_cut_lower_bounds`) sit below
#: what they stand for: far above the relative errors of the clock integral's masses and of
#: ``sigma`` (a few ``1e-14``), so a cut whose cheap bound reaches a level has a bound (i) that
#: reaches it too.
LOWER_SLACK = 1e-6


def _cheap_bounds(flux, masses) -> bool:
    """Whether the bounds read cheap lower bounds of (i) first (:func:`_cut_lower_bounds`, and
    ``highest_in`` in (ii)): spans read in numpy (:func:`_reads_spans`) from masses that bound
    their sets by the highest member (``highest_in``, the clock integral's)."""
    return _reads_spans(flux, masses) and getattr(masses, "highest_in", None) is not None


def _cut_lower_bounds(flux, masses, run: tuple[int, int], lo: int, hi: int, margin):
    """At the cuts ``lo..hi`` of ``run``, lower bounds of :func:`cut_bound` without an interval
    mass: ``M_run(j)`` counts only draft sets whose highest member lies in ``[j, t]``, so
    ``F(j) / masses.highest_in(j, t)`` bounds ``F(j) / M_run(j)`` below; less ``margin`` and
    :data:`LOWER_SLACK` (relative). On a run that reaches from the lowest ranks, nearly every set
    with its highest member in ``[j, t]`` has another below ``j``, so these are nearly the bounds
    (i) themselves, at the cost of two suffix sums per cut."""
    upper = masses.highest_in(lo, hi, run[1])
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(upper > 0, flux[lo:hi + 1] / upper * ((1 - margin) * (1 - LOWER_SLACK)), 0.0)


def span_lower_bound(flux, masses, run: tuple[int, int], low: int, high: int, margin=0):
    """(i): ``min_{low < j <= high} L(j) >= min_j F(j) / M_run(j)`` (module docstring)."""
    return _least_bound(flux, masses, run, low + 1, high, margin)[0]


def _least_bound(flux, masses, run: tuple[int, int], lo: int, hi: int, margin):
    """``(bound, cut)``: the least :func:`cut_bound` at the cuts ``lo..hi`` of ``run`` and the
    first cut that has it. Where cheap lower bounds exist (:func:`_cheap_bounds`), only the cuts
    that can hold it are computed exactly: the block of :data:`WIDEN_FIRST` cuts from the cut of
    least cheap bound, then the stretch between the first and the last cut whose cheap bound is
    at most the least exact one found (every other cut's exact bound is at least its cheap one,
    above that least), so the same bound and cut as all the exact bounds give."""
    if not _cheap_bounds(flux, masses):
        bounds = _cut_bounds(flux, masses, run, lo, hi, margin)
        i = int(np.argmin(bounds)) if isinstance(bounds, np.ndarray) else min(range(len(bounds)), key=bounds.__getitem__)
        return (float(bounds[i]) if isinstance(bounds, np.ndarray) else bounds[i]), lo + i
    values = _cut_lower_bounds(flux, masses, run, lo, hi, margin)
    exact = np.zeros(values.size, dtype=bool)
    i = int(np.argmin(values))
    end = min(values.size, i + WIDEN_FIRST)
    values[i:end], exact[i:end] = _cut_bounds(flux, masses, run, lo + i, lo + end - 1, margin), True
    open_ = np.flatnonzero(~exact & (values <= values[exact].min()))  # ties with the least included
    if open_.size:  # the hull of the cuts that may hold the least, at once (cuts read before are kept)
        a, b = int(open_[0]), int(open_[-1])
        values[a:b + 1], exact[a:b + 1] = _cut_bounds(flux, masses, run, lo + a, lo + b, margin), True
    i = int(np.argmin(values))  # every cut left cheap has a cheap bound, and so an exact one, above the least
    return float(values[i]), lo + i


def span_at_most(flux, masses, run: tuple[int, int], low: int, high: int, u, margin=0,
                 windows: int | None = None) -> bool:
    """(ii) and (iii): ``True`` proves ``min_{low < j <= high} L(j) <= u``. (ii) at every cut
    between ``low`` and ``high`` with the window ``W_u``, tried as the bounds outside the span
    are read, stretch by stretch (:class:`_Widening`; each try costs the span, so a span
    longer than the next stretch is tried once the reading is done): any window inside ``W_u``
    is a valid test (its masses are smaller), so the first that passes decides, and the widest
    decides what ``W_u`` itself decides. Then (iii) at the cut of least bound, over every window
    ``W_s`` (``windows=None``) or, where each window's masses cost a pass (the clock
    integral), a lower bound of the integral from at most ``windows`` of them: on ``[u (i -
    1) / windows, u i / windows)`` the window of its upper end, which the windows of that
    interval contain (``windows=1`` is (ii) alone). ``False`` proves nothing."""
    cheap = _cheap_bounds(flux, masses)
    widening = _Widening(lambda lo, hi: _cut_bounds(flux, masses, run, lo, hi, margin), run, low, high,
                         (lambda lo, hi: _cut_lower_bounds(flux, masses, run, lo, hi, margin)) if cheap else None)
    while True:
        last = not widening.read_on(u)
        tried = last or (not cheap and high - low <= widening.size)  # cheap bounds: W_u itself, read at once
        if tried and _passes(flux, masses, widening.window(u), low, high, u, margin):
            return True  # a span longer than the next stretch is tried once, when the reading is done
        if last:
            break
    if windows == 1:
        return False
    j = _least_bound(flux, masses, run, low + 1, high, margin)[1]
    if windows is None:
        while widening.read_on(0):
            pass
        widening.refine_all()
        return flux[j] * (1 + margin) <= _window_integral(masses, widening, low, high, j, u)
    total = u * 0
    for i in range(1, windows + 1):
        while widening.read_on(u * i / windows):
            pass
        b, c = widening.window(u * i / windows)
        total += u / windows * _one_cut(masses, b, j, c)
    return flux[j] * (1 + margin) <= total


def _passes(flux, masses, window: tuple[int, int], low: int, high: int, u, margin) -> bool:
    """Whether ``F(j) <= u M_window(j)`` at some cut ``low < j <= high`` (the test (ii)), read
    upward by stretches of :data:`WIDEN_FIRST` cuts, then 4 times more each time, up to the
    first cut that passes. Where cheap bounds exist (:func:`_cheap_bounds`), only the cuts
    where ``F(j) <= u`` times the window's ``highest_in`` (an upper bound of ``M_window(j)``, with
    :data:`LOWER_SLACK`) can pass, and only their blocks are read exactly."""
    b, c = window
    if _cheap_bounds(flux, masses):
        lo = low + 1
        fluxes = flux[lo:high + 1] * (1 + margin)
        candidates = np.flatnonzero(fluxes <= u * masses.highest_in(lo, high, c) * (1 + LOWER_SLACK))
        at = 0
        while at < candidates.size:  # a block of cuts from each candidate not yet read
            i = int(candidates[at])
            read_to = min(high - lo, i + WIDEN_FIRST - 1)
            if np.any(fluxes[i:read_to + 1] <= u * _across_cuts(flux, masses, b, lo + i, lo + read_to, c)):
                return True
            at = int(np.searchsorted(candidates, read_to, side="right"))
        return False
    lo, size = low + 1, WIDEN_FIRST
    while lo <= high:
        hi = min(high, lo + size - 1)
        mass = _across_cuts(flux, masses, b, lo, hi, c)
        if isinstance(mass, np.ndarray):
            if np.any(flux[lo:hi + 1] * (1 + margin) <= u * mass):
                return True
        elif any(flux[j] * (1 + margin) <= u * m for j, m in zip(range(lo, hi + 1), mass)):
            return True
        lo, size = hi + 1, 4 * size
    return False


def _one_cut(masses, f: int, j: int, t: int):
    """``masses.across(f, j, t)`` where only the cut ``j`` of the window ``[f, t]`` is needed:
    masses that compute a run's cuts together (the clock integral's) may offer ``across_one``,
    the one cut alone."""
    one = getattr(masses, "across_one", None)
    return masses.across(f, j, t) if one is None else one(f, j, t)


#: The first stretch of cuts :class:`_Widening` reads on each side; each next one is 4 times longer.
WIDEN_FIRST = 256


class _Widening:
    """The bounds (i) of the cuts of ``run`` outside the span ``[low, high]``, read outward
    from it stretch by stretch (:data:`WIDEN_FIRST` cuts, then 4 times more each time;
    ``bounds_of(lo, hi)`` gives those of the cuts ``lo..hi``), and the span widened through the
    cuts read whose bound is at least a level ``s`` (:meth:`window`). With ``lower_of`` (cheap
    lower bounds of the same, :func:`_cut_lower_bounds`) the stretches are read cheaply and a
    cheap bound below ``s`` is replaced by the exact ones of its block of :data:`WIDEN_FIRST`
    cuts before it may end a window: the windows are the exact bounds' windows, since a cut
    whose cheap bound reaches ``s`` has an exact one that does."""

    def __init__(self, bounds_of, run: tuple[int, int], low: int, high: int, lower_of=None):
        self.bounds_of, (self.f, self.t), self.low, self.high = bounds_of, run, low, high
        self.lower_of = lower_of
        self.left, self.right = [], []  # bounds of the cuts low, low - 1, ... and high + 1, high + 2, ...
        self.exact = {"left": None, "right": None}  # with lower_of: which of them are exact (bool arrays)
        self.size = WIDEN_FIRST

    def window(self, s) -> tuple[int, int]:
        """The span widened through the cuts read so far whose bound is at least ``s``, on each
        side up to the first below it."""
        return self.low - self._first_below("left", s), self.high + self._first_below("right", s)

    def read_on(self, s) -> bool:
        """Read the next stretch on each side where no cut read has a bound below ``s`` and the
        run goes on; ``False`` when neither side needs it (the window of ``s`` is then
        :meth:`window`'s, the widening of bound (ii) of the module docstring)."""
        more = False
        read = self.lower_of or self.bounds_of
        if self._first_below("left", s) == len(self.left) and self.low - len(self.left) > self.f:
            top = self.low - len(self.left)
            self._extend("left", read(max(self.f + 1, top - self.size + 1), top)[::-1])
            more = True
        if self._first_below("right", s) == len(self.right) and self.high + len(self.right) < self.t:
            lo = self.high + len(self.right) + 1
            self._extend("right", read(lo, min(self.t, lo + self.size - 1)))
            more = True
        self.size *= 4
        return more

    def refine_all(self) -> None:
        """Every bound read made exact (what :func:`_window_integral` reads)."""
        for side in ("left", "right"):
            while self.exact[side] is not None and not self.exact[side].all():
                self._refine(side, int(np.argmin(self.exact[side])))

    def _extend(self, side: str, more) -> None:
        setattr(self, side, _joined(getattr(self, side), more))
        if self.lower_of is not None:
            self.exact[side] = np.concatenate([np.zeros(0, dtype=bool) if self.exact[side] is None else self.exact[side],
                                               np.zeros(len(more), dtype=bool)])

    def _first_below(self, side: str, s) -> int:
        """The index of the first bound read on ``side`` below ``s`` (their count if none), the
        cheap bounds below ``s`` made exact first, block by block."""
        while True:
            i = _first_below(getattr(self, side), s)
            exact = self.exact[side]
            if exact is None or i == len(exact) or exact[i]:
                return i
            self._refine(side, i)

    def _refine(self, side: str, i: int) -> None:
        """The exact bounds of the cuts ``i..i + WIDEN_FIRST - 1`` read on ``side``, in place of
        their cheap ones."""
        values, exact = getattr(self, side), self.exact[side]
        end = min(len(values), i + WIDEN_FIRST)
        if side == "left":  # index i is the cut low - i
            values[i:end] = self.bounds_of(self.low - end + 1, self.low - i)[::-1]
        else:  # index i is the cut high + 1 + i
            values[i:end] = self.bounds_of(self.high + 1 + i, self.high + end)
        exact[i:end] = True


def _first_below(values, s) -> int:
    """The index of the first of ``values`` below ``s`` (``len(values)`` if none)."""
    if isinstance(values, np.ndarray):
        below = np.flatnonzero(values < s)
        return int(below[0]) if below.size else values.size
    return next((i for i, v in enumerate(values) if v < s), len(values))


def _joined(values, more):
    """``values`` then ``more`` (lists, or arrays where the bounds come as arrays)."""
    if isinstance(more, np.ndarray):
        return np.concatenate([np.asarray(values, dtype=more.dtype), more])
    return values + list(more)


def _window_integral(masses, widening: _Widening, low: int, high: int, j: int, u):
    """``integral_0^u M_{W_s}(j) ds`` of (iii), with every bound of the run read: the window
    shrinks from outside as ``s`` passes the running minima of the bounds going outward from
    the span."""
    left, right, least = [], [], None  # (threshold, the window's end while s is below it)
    for i, bound in zip(range(low, widening.f, -1), widening.left):
        least = bound if least is None else min(least, bound)
        left.append((least, i - 1))
    least = None
    for i, bound in zip(range(high + 1, widening.t + 1), widening.right):
        least = bound if least is None else min(least, bound)
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


def span_decision(flux, masses, low: int, high: int, u, margin=0, windows: int | None = None) -> bool | None:
    """Whether ``u < min_{low < j <= high} L(j)``, from the flux and the masses alone:
    ``True`` when ``u`` is below the bound (i), ``False`` when (ii) or (iii) proves the least
    level at most ``u`` (or a cut between carries no flux: the level there is 0), ``None``
    when neither settles it; ``windows`` as in :func:`span_at_most`."""
    run = first_run(flux, low, high)
    if run is None:
        return False
    return _decided(flux, masses, run, low, high, u, span_lower_bound(flux, masses, run, low, high, margin), margin,
                    windows)


def _decided(flux, masses, run: tuple[int, int], low: int, high: int, u, bound, margin, windows) -> bool | None:
    """:func:`span_decision` given the span's first run and its bound (i)."""
    if u < bound:
        return True
    return False if span_at_most(flux, masses, run, low, high, u, margin, windows) else None


def walk_decision(flux, masses, ranks: list, u, margin=0, windows: int | None = None) -> int | None:
    """The index into ``ranks`` (distinct ranks of the drafted members) of the member the
    walk of :mod:`otm.rules.optimal_wor` selects with uniform ``u`` (down from the highest
    member while ``u`` is below the least level between the next member and the highest),
    decided by :func:`span_decision` member by member (``margin``, ``windows`` as there);
    ``None`` where a step is undecided. The spans share their top, so the first run and the
    bound (i) of each step are carried from the step before: each cut is read once. A float
    ``flux`` given as an array, with masses that give a run's cuts at once (``across_cuts``),
    is read a span at a time in numpy: the same decisions (the same float operations); with
    cheap bounds too (:func:`_cheap_bounds`), a step whose ``u`` lies below the least cheap
    bound of its span goes down without reading an interval mass."""
    descending = sorted(range(len(ranks)), key=lambda i: -ranks[i])
    top, chosen = ranks[descending[0]], descending[0]
    run, bound, cheap = None, None, None  # the bounds (i) over (exact_to, top], the cheap ones over (reached, top]
    reached, exact_to = top, top  # the lowest member reached; the cuts above exact_to have exact bounds read
    for lower in descending[1:]:
        low = ranks[lower]
        if not _carries(flux, low + 1, reached):
            break  # a cut between carries no flux: the level there is 0, span_decision's False
        run = run or first_run(flux, low, top)
        if _cheap_bounds(flux, masses):  # u below the cheap least bound is below the exact one: down
            below = float(_cut_lower_bounds(flux, masses, run, low + 1, reached, margin).min())
            cheap, reached = below if cheap is None else min(cheap, below), low
            if u < cheap:
                chosen = lower
                continue
        below = span_lower_bound(flux, masses, run, low, exact_to, margin)
        bound, reached, exact_to = below if bound is None else min(bound, below), low, low
        verdict = _decided(flux, masses, run, low, top, u, bound, margin, windows)
        if verdict is None:
            return None
        if not verdict:
            break
        chosen = lower
    return chosen


__all__ = ["WIDEN_FIRST", "cut_bound", "first_run", "span_at_most", "span_decision", "span_lower_bound", "walk_decision"]
