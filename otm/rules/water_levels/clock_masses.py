"""Set masses of ``k`` drafts without replacement by the clock integral (float64), for the
water levels (:mod:`otm.rules.water_levels.construction`) where the draft tuples are too many
to enumerate.

Derived here (docs/optimal-verifier-proofs.md#set-masses-by-the-clock-integral). The ``k``
distinct drafts are the first ``k`` arrivals of independent clocks ``Exp(q_i)``
(docs/theory.md 2.2). At time ``s`` a group ``A`` of tokens has the count generating
function ``E_A(x) = prod_{i in A} (e^{-q_i s} + x (1 - e^{-q_i s}))`` (coefficient ``r``: the
probability that exactly ``r`` of its clocks rang by ``s``), and
``D_A(x) = sum_{i in A} q_i e^{-q_i s} prod_{l in A, l != i} (e^{-q_l s} + x (1 - e^{-q_l s}))``
(coefficient ``r``: the density that a clock of ``A`` rings at ``s`` with exactly ``r``
others of ``A`` rung before). For disjoint groups ``E_{A u B} = E_A E_B`` and
``D_{A u B} = D_A E_B + E_A D_B``. The ``k``-th arrival happens at ``s`` inside a set with
no arrival outside it, so, truncating the polynomials at degree ``k - 1``:

    P(S ⊆ B) = int_0^inf e^{-q(outside B) s} [x^(k-1)] D_B(x, s) ds,

a positive integrand; and with the ranks cut into ``A0 = [0, f)``, ``A1 = [f, j)``,
``A2 = [j, t]`` and ``N_A = E_A - E_A(0)`` (at least one arrival), the mass the water levels
need (:meth:`ClockSetMasses.across`: every draft in ranks ``<= t``, one in ``A1``, one in
``A2``) is the same integral of ``[x^(k-1)] (D0 N1 N2 + D1 E0 N2 + D2 E0 N1)``, positive
term by term: no cancellation. Likewise ``sigma_a`` (the highest draft is rank ``a``) and
the law of the lowest member of a run, which certifies the levels
(:func:`realised_selection`).

Quadrature: the trapezoid rule in ``log s`` with step :func:`quadrature_step` from
:func:`lower_end` to ``90 / min q`` (every term decays at least like the density of one clock,
``e^{-q_min s}``). For ``s <= 1`` every integrand is ``O(s^(k-1))`` relative to its size at
``s = 1`` (a set's ``k`` members each rang by ``s``, each with probability ``1 - e^{-q s}``, at
most ``s / (1 - 1/e)`` times its value at ``s = 1``, and the total rate is 1): the part of a
mass below the lower end is about ``s^k`` of it (up to factors of ``k``, which the measurement
bounds), and ``lower_end(k) = (1e-4 / 3)^(3 / k)`` makes that part the same at every ``k`` as at
``k = 3``, where the lower end is ``1e-4 / k``. In ``y = log s`` every integrand is
analytic in a strip around the real axis (each factor ``e^{-q e^y}``, ``1 - e^{-q e^y}``,
``q e^y e^{-q e^y}`` is entire and bounded in every strip ``|Im y| <= d < pi / 2``), so the
rule's error falls like ``exp(-a / h)`` with the step ``h``; as for :mod:`otm.formulations.wor_all_in`, ``a`` falls
with ``k`` (the count of arrivals passes ``k`` over a width of about ``1 / sqrt(k)`` in ``y``).
Hence ``h = 0.16 min(1, sqrt(8 / k))``, about 0.6 of the step at which the error leaves the
rounding floor at every ``k``. The step and the lower end are measured by ``python -m
research.optimal_wor.wor_water_levels --quadrature`` (research/optimal_wor/JOURNAL.md, "k drafts
at the real vocabulary"); tests/otm/test_wor_clock_masses.py holds the masses to the enumerated
law.

Cost: one pass over the ranks for ``sigma`` that keeps the prefix polynomials of ``[0, f)``
at every :data:`CHECKPOINT`-th rank (a prefix elsewhere is rebuilt from the checkpoint below it,
with the same float operations as one pass, so the same values), then per run of the nesting a
forward and a backward pass over its ranks. Memory: the tables of ``e^{-q s}`` and
``1 - e^{-q s}`` (``n`` by the number of nodes each) and the checkpoints, limited by
:data:`MAX_TABLE_FLOATS` (:meth:`ClockSetMasses.table_floats`).
"""
from __future__ import annotations

import functools

import numpy as np

from ...draft_laws import MAX_ENUMERATED_TUPLES
from .construction import level_components

#: Trapezoid step in ``log s`` up to ``k = 8`` drafts, narrowed beyond (:func:`quadrature_step`).
BASE_STEP = 0.16

#: The largest :meth:`ClockSetMasses.table_floats` (float64) this class builds: about 3,300
#: tokens of support at 150 nodes (the numpy reference; its runs cost a Python call per rank, so
#: the limit stands for time as much as memory).
MAX_TABLE_FLOATS = 1_000_000

#: The prefix polynomials of ``[0, f)`` are kept at every this many ranks.
CHECKPOINT = 64


def quadrature_step(k: int) -> float:
    """The trapezoid step in ``log s`` for ``k`` drafts: ``BASE_STEP min(1, sqrt(8 / k))``
    (module docstring: about 0.6 of the step at which the rule breaks down, at every ``k``)."""
    return BASE_STEP * min(1.0, float(np.sqrt(8.0 / k)))


#: The quadrature's lower end at ``k = 3`` drafts, ``1e-4 / 3`` (:func:`lower_end`).
LOWER_END_AT_3 = 1e-4 / 3


def lower_end(k: int) -> float:
    """The quadrature's lower end in ``s`` for ``k`` drafts: ``LOWER_END_AT_3^(3 / k)``, where
    ``s^k``, about the part of a mass below it (module docstring), is what it is at ``k = 3``."""
    return LOWER_END_AT_3 ** (3.0 / k)


#: The least ``q`` whose clock the quadrature's range waits for: its upper end is ``90 / max(min
#: q, RINGING_FLOOR)``, at most ``9e301``, where float64 still holds ``s`` and its weight. A
#: smaller ``q`` (denormal draft probabilities) is a clock the range does not wait for: what it
#: leaves out is below that ``q`` in absolute terms, and the certificate of the levels (the law
#: they realise, within ``1e-12`` of ``x`` in total) measures it.
RINGING_FLOOR = 1e-300


def quadrature_nodes(q_ranked: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``(s, weights)``: the trapezoid rule in ``log s`` of the module docstring, up to ``90 /
    max(min q, RINGING_FLOOR)``."""
    step = quadrature_step(k)
    low, high = np.log(lower_end(k)), np.log(90.0 / max(float(q_ranked.min()), RINGING_FLOOR))
    s = np.exp(np.arange(low, high + step, step))
    return s, step * s


def node_count(q_ranked: np.ndarray, k: int) -> int:
    """How many nodes :func:`quadrature_nodes` uses."""
    return quadrature_nodes(q_ranked, k)[0].size


class ClockSetMasses:
    """The ``masses`` of :func:`otm.rules.water_levels.construction.water_level_parameters` for ``k``
    drafts without replacement, by the clock integral (module docstring); ``q_ranked`` the
    ``q > 0`` by rank (float64). The batched verifier has a compiled twin (the same values, and
    the whole nesting in one call), tested against this reference."""

    #: The largest :meth:`table_floats` this class builds.
    max_table_floats = MAX_TABLE_FLOATS

    #: The prefix polynomials are kept at every this many ranks.
    checkpoint = CHECKPOINT

    #: :func:`otm.rules.water_levels.parameters.wor_parameters` enumerates the draft tuples of float inputs
    #: up to this many (their own certificate), and takes this class's masses beyond.
    enumerate_up_to = MAX_ENUMERATED_TUPLES

    def __init__(self, q_ranked: np.ndarray, k: int):
        self.k, self.n = k, q_ranked.size
        self.q = np.ascontiguousarray(q_ranked, dtype=np.float64)
        self.s, self.w = quadrature_nodes(self.q, k)
        self._tabulate()
        self._above = np.concatenate([np.cumsum(self.q[::-1])[::-1][1:], [0.0]])  # q of the ranks above each
        # [n // checkpoint + 1, N, k]: the prefixes [0, c * checkpoint); and sigma
        self._E0, self._D0, self.sigma = self._prefix_pass()
        self._runs: dict = {}

    def _tabulate(self) -> None:
        """The tables ``e^{-q s}`` (no arrival by ``s``) and ``1 - e^{-q s}`` ``[n, N]``."""
        self._none = np.exp(-np.outer(self.q, self.s))
        self._some = -np.expm1(-np.outer(self.q, self.s))

    @classmethod
    def table_floats(cls, n: int, nodes: int, k: int) -> int:
        """The float64 entries of the tables for ``n`` ranks: ``e^{-q s}`` and ``1 - e^{-q s}``
        at every rank and node, and the checkpointed prefix polynomials (two, of ``k`` each)."""
        return 2 * n * nodes + 2 * (n // cls.checkpoint + 1) * nodes * k

    def _prefix_pass(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One pass up the ranks: the prefixes at the checkpoints, and ``sigma_a``: rank ``a``
        rings ``k``-th with ``k - 1`` of ``[0, a)`` before, or it rang before and a clock of
        ``[0, a)`` rings ``k``-th."""
        nodes, every = self.s.size, self.checkpoint
        E0, D0 = np.zeros((self.n // every + 1, nodes, self.k)), np.zeros((self.n // every + 1, nodes, self.k))
        sigma = np.empty(self.n)
        E, D = _empty_group(nodes, self.k)
        for r in range(self.n):
            if r % every == 0:
                E0[r // every], D0[r // every] = E, D
            sigma[r] = self._integral(r, self._with_member(r, E, D))
            E, D = self._add(E, D, r)
        if self.n % every == 0:
            E0[-1], D0[-1] = E, D
        return E0, D0, sigma

    def _prefix(self, f: int) -> tuple[np.ndarray, np.ndarray]:
        """``(E, D)`` ``[N, k]`` of the ranks ``[0, f)``: from the checkpoint below ``f``."""
        E, D = self._E0[f // self.checkpoint], self._D0[f // self.checkpoint]
        for r in range(f - f % self.checkpoint, f):
            E, D = self._add(E, D, r)
        return E, D

    def _add(self, E: np.ndarray, D: np.ndarray, r: int) -> tuple[np.ndarray, np.ndarray]:
        """``(E, D)`` of a group with rank ``r`` added (``[..., N, k]``)."""
        return with_token(E, D, self.q[r], self._none[r], self._some[r])

    def _integral(self, top: int, coefficient: np.ndarray) -> np.ndarray:
        """``int e^{-q(ranks above top) s} coefficient ds`` over the last axis (nodes)."""
        return (coefficient * np.exp(-self._above[top] * self.s)) @ self.w

    def _with_member(self, c: int, E: np.ndarray, D: np.ndarray) -> np.ndarray:
        """``[N]``: the density that the ``k``-th arrival happens at ``s`` with rank ``c`` among
        the ``k`` and the other ``k - 1`` in the group of ``(E, D)``: ``c`` rings ``k``-th, or it
        rang before and a clock of the group rings ``k``-th."""
        k = self.k
        return self.q[c] * self._none[c] * E[:, k - 1] + self._some[c] * D[:, k - 2]

    def across(self, f: int, j: int, t: int) -> float:
        """The mass of the draft sets with every draft in ranks ``<= t``, one in ``[f, j)`` and
        one in ``[j, t]`` (module docstring); computed for every cut of the run ``[f, t]`` at
        its first call."""
        if (f, t) not in self._runs:
            self._runs[(f, t)] = self._run_masses(f, t)
        return float(self._runs[(f, t)][j - f - 1])

    def highest_in(self, lo: int, hi: int, t: int) -> np.ndarray:
        """``[hi - lo + 1]``: at the cuts ``j = lo..hi``, an upper bound on ``sum(sigma[j..t])``,
        the mass of the draft sets whose highest member lies in ``[j, t]``, which bounds every
        interval mass ``across(f, j, t)`` of a run ending at ``t`` (the sets it counts are among
        those). From the suffix sums of ``sigma``, summed from the top (each within ``n eps`` of
        itself, relative: ``sigma >= 0``), with that rounding allowed for: the difference of two
        suffixes plus ``4 (n + 1) eps`` of the larger."""
        suffix = self._sigma_suffix
        above_j = suffix[lo:hi + 1]
        return (above_j - suffix[t + 1]) + 4 * (self.n + 1) * np.finfo(np.float64).eps * above_j

    @functools.cached_property
    def _sigma_suffix(self) -> np.ndarray:
        """``[n + 1]``: ``sum(sigma[a:])`` at every rank ``a``, summed from the top (made when
        :meth:`highest_in` is first asked)."""
        return np.concatenate([np.cumsum(np.asarray(self.sigma, dtype=np.float64)[::-1])[::-1], [0.0]])

    def _run_masses(self, f: int, t: int) -> np.ndarray:
        """``across(f, j, t)`` for ``j = f + 1..t``: ``(E, D)`` of ``[f, j)`` by a forward pass
        (kept), of ``[j, t]`` by a backward pass that combines them cut by cut."""
        nodes, k, size = self.s.size, self.k, t - f
        E0, D0 = self._prefix(f)
        lower_E, lower_D = np.zeros((size, nodes, k)), np.zeros((size, nodes, k))
        E, D = _empty_group(nodes, k)
        for i, r in enumerate(range(f, t)):
            E, D = self._add(E, D, r)
            lower_E[i], lower_D[i] = E, D
        out = np.empty(size)
        E2, D2 = _empty_group(nodes, k)
        for j in range(t, f, -1):  # [j, t] grows downward
            E2, D2 = self._add(E2, D2, j)
            E1, D1 = lower_E[j - f - 1], lower_D[j - f - 1]
            N1, N2 = E1.copy(), E2.copy()
            N1[:, 0] = 0.0
            N2[:, 0] = 0.0
            integrand = (_coefficient(_product(D0, N1, k), N2, k - 1) + _coefficient(_product(D1, E0, k), N2, k - 1)
                         + _coefficient(_product(D2, E0, k), N1, k - 1))
            out[j - f - 1] = self._integral(t, integrand)
        return out

    def lowest_law(self, f: int, t: int) -> np.ndarray:
        """``[t - f + 1]``: for the sets whose highest member lies in ``[f, t]``, the probability
        that rank ``c`` is their lowest member inside ``[f, t]``: no clock of ``[f, c)`` or above
        ``t`` has rung, and ``c`` rings ``k``-th with the others in ``[0, f)`` or ``(c, t]``, or
        it rang before and one of those rings ``k``-th."""
        nodes, k = self.s.size, self.k
        out = np.empty(t - f + 1)
        E0, D0 = self._prefix(f)
        E, D = _empty_group(nodes, k)  # the group (c, t]
        for c in range(t, f - 1, -1):
            E_rest = _product(E0, E, k)
            D_rest = _product(D0, E, k) + _product(E0, D, k)
            gap = np.exp(-self.q[f:c].sum() * self.s)  # no arrival in [f, c) either
            out[c - f] = self._integral(t, gap * self._with_member(c, E_rest, D_rest))
            E, D = self._add(E, D, c)
        return out


def with_token(E: np.ndarray, D: np.ndarray, q: float, none: np.ndarray, some: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(E, D)`` (``[..., N, k]``) of a group with one token of draft probability ``q`` added,
    ``none = e^{-q s}`` and ``some = 1 - e^{-q s}`` at the nodes (``[N]``): ``E (none + x some)``
    and ``D (none + x some) + q none E`` (module docstring), truncated at degree ``k - 1``."""
    none_, some_ = none[:, None], some[:, None]
    E_new, D_new = E * none_, D * none_ + (q * none)[:, None] * E
    E_new[..., 1:] += E[..., :-1] * some_
    D_new[..., 1:] += D[..., :-1] * some_
    return E_new, D_new


def _empty_group(nodes: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``(E, D)`` of no token: ``E = 1``, ``D = 0``."""
    E = np.zeros((nodes, k))
    E[:, 0] = 1.0
    return E, np.zeros((nodes, k))


def _product(A: np.ndarray, B: np.ndarray, k: int) -> np.ndarray:
    """``A B`` truncated at degree ``k - 1`` (polynomials on the last axis, broadcast)."""
    out = np.zeros(np.broadcast_shapes(A.shape, B.shape))
    for i in range(k):
        out[..., i:] += A[..., i:i + 1] * B[..., :k - i]
    return out


def _coefficient(A: np.ndarray, B: np.ndarray, degree: int) -> np.ndarray:
    """The coefficient of ``x^degree`` in ``A B`` (last axis)."""
    return sum(A[..., i] * B[..., degree - i] for i in range(degree + 1))


def clock_set_masses(k: int, masses_class=ClockSetMasses):
    """The ``masses_of`` of :func:`otm.rules.water_levels.construction.water_level_parameters` for
    ``k >= 3`` drafts without replacement by the clock integral: float64 masses under any
    float arithmetic (as :func:`otm.rules.water_levels.set_masses.set_masses` for float inputs), from
    ``masses_class`` (this module's, or its compiled twin)."""

    def masses_of(qs: list, zero):
        return built_set_masses(masses_class(np.asarray([float(v) for v in qs], dtype=np.float64), k))(qs, zero)

    return masses_of


def built_set_masses(masses: ClockSetMasses):
    """The ``masses_of`` of :func:`otm.rules.water_levels.construction.water_level_parameters` for
    clock masses already built from the construction's ``q`` by rank (so that one build serves
    the float64 construction, its wide redo and the certificates)."""

    def masses_of(qs: list | None, zero):
        if isinstance(zero, float):  # the floats themselves (sigma >= 0, so 0.0 + v is v)
            return masses, np.asarray(masses.sigma, dtype=np.float64)
        return masses, [zero + float(v) for v in masses.sigma]

    masses_of.reads_q = False  # built: flux_setup need not list q by rank for it
    return masses_of


def realised_selection(masses: ClockSetMasses, levels: list) -> np.ndarray:
    """``[n]`` the selection law that ``levels`` realise (by rank): the walk at level ``u``
    selects the lowest member inside the run of the highest one (the component of the cuts
    above ``u``), so the law is the sum over the runs of how long they last times their
    lowest-member law (:meth:`ClockSetMasses.lowest_law`; a single rank selects itself,
    ``sigma``). Independent of the construction's bookkeeping; one law per run."""
    n = masses.n
    lasting: dict = {}
    for base, top, components in level_components([float(v) for v in levels], n):
        for run in components:
            lasting[run] = lasting.get(run, 0.0) + (top - base)
    realised = np.zeros(n)
    for (f, t), duration in lasting.items():
        realised[f:t + 1] += duration * (masses.lowest_law(f, t) if t > f else masses.sigma[f:t + 1])
    return realised


__all__ = ["BASE_STEP", "CHECKPOINT", "ClockSetMasses", "LOWER_END_AT_3", "MAX_TABLE_FLOATS", "RINGING_FLOOR", "built_set_masses", "clock_set_masses", "lower_end", "node_count", "quadrature_nodes", "quadrature_step",
           "realised_selection", "with_token"]
