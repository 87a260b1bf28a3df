"""The set-up's pass up the ranks of ``optimal_wor`` on the CPU, with the small clocks of a block
of ranks multiplied out at a few Chebyshev points and interpolated to the quadrature nodes:
``sigma`` and the checkpointed prefixes of
:class:`~decoding.verifiers.optimal.clock_masses.CompiledClockSetMasses`, the values of
:func:`~decoding.verifiers.optimal.setup.numba_nodes.prefix_pass` (its reference) within roundoff
(tests/decoding/test_optimal_wor_chebyshev.py), in a fraction of its rank-by-node work. The same
for the groups of ranks a walk's long runs read (:func:`group_pass_chebyshev`: each group alone,
as a block with no prefix below it; its reference
:func:`~decoding.verifiers.optimal.setup.numba_nodes.group_pass`).

**Why it pays.** On a whole row of the real vocabulary nearly every rank is a tail token whose
clock has barely moved at most nodes: ``q s < 2^-6`` at most (block, live node) pairs, in
blocks of 64 ranks and in the blocks of 256 ranks the verifier takes (its checkpoints' spacing,
:attr:`~decoding.verifiers.optimal.clock_masses.CompiledClockSetMasses.checkpoint`: fewer pairs, each
cheaper per rank). The compiled pass still updates ``k``
coefficients of two polynomials at every rank and each of about a hundred live nodes. As a
function of ``s`` below ``2^-6 / kappa`` (``kappa`` the block's largest ``q``), a block's products
are so smooth that a dozen points carry them: the work per rank no longer grows with the nodes.

**The identity (our derivation; docs/optimal-verifier-proofs.md#the-set-up-at-chebyshev-points).** Take a
block of ranks ``[b, e)``, its prefix ``(E_b, D_b)`` (the ranks ``[0,
b)``), ``T_b = q([b, n))`` and, for ``a`` in the block, ``c_r = e^{q_r s} - 1``, ``F_a = prod_{b <= r <
a} (1 + c_r z)`` and ``G_a = sum_{b <= r < a} q_r prod_{r' != r} (1 + c_r' z)`` (truncated at degree
``k - 1``; ``F_{a+1} = F_a (1 + c_a z)``, ``G_{a+1} = G_a (1 + c_a z) + q_a F_a``). Since ``a_r + b_r
z = e^{-q_r s} (1 + c_r z)``, the prefix ``[0, a)`` is ``E = e^{-S s} E_b F_a`` and ``D = e^{-S s}
(D_b F_a + E_b G_a)`` with ``S = q([b, a))``, and the term of ``sigma_a`` at a node,
``e^{-q(above a) s} (q_a e^{-q_a s} [z^{k-1}] E + (1 - e^{-q_a s}) [z^{k-2}] D)``, is

    e^{-T_b s} [z^{k-1}] (D_b dF_a + E_b dG_a),   dF_a = c_a z F_a,  dG_a = c_a z G_a + q_a F_a,

(the exponentials combine, ``q(above a) + q_a + S = T_b``), the increments ``F_{a+1} - F_a`` and
``G_{a+1} - G_a``. Every term is non-negative.

**The interpolation.** With ``u = kappa s``, ``[z^d]`` of ``F``, ``G`` and their increments is
``u^d h(u)``, ``h`` a power series with non-negative coefficients (a sum of products of ``d`` of the
``c_r``, each ``(q_r / kappa) u`` times ``1 + O(u)``). The pass computes ``F``, ``G`` and the
increments exactly, rank by rank, at ``P`` Chebyshev points ``u_p`` of ``[0, tau]`` (the first
kind), and takes them at the block's *interpolated nodes*, those with ``kappa s_i < tau``, from
the polynomial of degree ``P - 1`` through ``h(u_p)`` (barycentric weights ``L_p(u_i)``). So
``sigma_a`` gets ``sum_d sum_p dX_a[d](u_p) Lambda_X[d, p]`` from those nodes, with the block's
weights ``Lambda_D[d, p] = sum_i w_i e^{-T_b s_i} [z^{k-1-d}] D_b(s_i) (u_i / u_p)^d L_p(u_i)``
(likewise ``E``), ``O(k P)`` per rank instead of ``O(k N)``; after the block the prefix at those
nodes is ``e^{-S_B s} (E_b F_e, D_b F_e + E_b G_e)`` with ``F_e``, ``G_e`` interpolated. The weights
take ``u_p^{-d}`` out of the sum over nodes (``u_i^d`` stays in it), so a (block, node) pair costs
one barycentric basis and ``O(k P)`` multiply-adds, no division per ``(d, p)``, with ``sigma``
as close to an 80-bit pass as the node-by-node pass
(docs/optimal-verifier-proofs.md#the-set-up-at-chebyshev-points, with the measured cost).

**Error.** Interpolation is exact for polynomials of degree below ``P``, so its error is at most
``1 + Lambda_P`` (the Lebesgue constant, ``<= 1 + (2 / pi) log(P + 1)`` at Chebyshev points) times
the largest tail of ``h`` past ``u^{P-1}`` on ``[0, tau]``. For ``x = (q_r / kappa) u <= tau`` and
``lambda >= 1``, ``c_r(lambda u) <= lambda e^{(lambda - 1) tau} c_r(u)``, so that tail is at most
``lambda^{-P} e^{d (lambda - 1) tau}`` of ``h``, which at ``lambda = P / (d tau)`` is ``(e d tau /
P)^P``; and ``h(tau) <= e^{d tau} h(u)``. :func:`chebyshev_points` takes the least ``P`` that puts
``(1 + Lambda_P) e^{d tau} (e d tau / P)^P`` below ``2^-60`` at ``d = k - 1`` (``P = 10`` at ``k = 3``,
``12`` at ``k = 8``, for :data:`INTERPOLATE_BELOW` ``= 2^-6``): far below a rounding. The clocks
``c_r(u_p)`` come from the Taylor series of ``e^x - 1`` to enough terms (the first left
out below ``2^-60`` of the sum for ``x <= tau``, :func:`taylor_terms`).

**Threads.** Each node's polynomials are its own, so the nodes can be dealt out among threads,
each a pass over every rank at its nodes (:func:`prefix_pass_chebyshev` with ``parts``): the
ranks' work at the points is repeated in every part, the rest is divided
(research/optimal_wor/JOURNAL.md, "The pass at points on two or three threads").

**The other nodes.** Where ``kappa s >= tau``, the block's ranks are added one by one as in
:func:`~decoding.verifiers.optimal.setup.numba_nodes.prefix_pass` (its clocks, the decay by quotients from
an exponential at the block's first rank, its flushing of subnormal coefficients), and a block
with fewer than :data:`INTERPOLATE_FROM` interpolated nodes takes that route at every node.
"""
from __future__ import annotations

import math

import numba
import numpy as np

from ...base import share_rows
from ..clock_kernels import _add_rank_by_degree, _clock, _merge, _normal, live_prefix_nodes, rank_terms
from .capabilities import SetupCapabilities

#: Picked where the node-by-node pass (:mod:`decoding.verifiers.optimal.setup.numba_nodes`)
#: would be shared among fewer than 4 threads: the pass at points is the faster on few threads,
#: and from about 4 the node-by-node pass dealt among threads catches up (``python
#: scripts/bench_wor_scan.py --threads``; research/optimal_wor/JOURNAL.md, "Figures moved from
#: docstrings"). The two give the same values within roundoff, not to the bit.
CAPABILITIES = SetupCapabilities(
    name="chebyshev",
    devices=("cpu",),
    max_k=None,
    max_threads=3,
    checkpoint=256,
    all_groups=False,
    automatic=True,
    description="each block's small clocks at a few Chebyshev points, compiled with numba, on the CPU",
)

#: The interpolated nodes of a block are those where ``kappa s`` (``kappa`` the block's largest
#: ``q``) is below this (``tau`` of the module docstring): most (block, live node) pairs of a real
#: row; a lower ``tau`` interpolates fewer, a higher one needs more points, and neither was faster
#: on whole rows (``scripts/bench_wor_pass.py``; research/optimal_wor/JOURNAL.md, "Figures moved
#: from docstrings").
INTERPOLATE_BELOW = 2.0 ** -6

#: A block takes its ranks through the points where it has at least this many interpolated
#: nodes; below, the points' work per rank (``O(k P)``) exceeds adding the ranks node by node.
INTERPOLATE_FROM = 8

#: The error bounds of the module docstring are met below this: far below a float64 rounding
#: (``2^-53``).
TRUNCATION = 2.0 ** -60


_compiled = numba.njit(cache=True, nogil=True, error_model="numpy", fastmath={"reassoc", "contract", "nsz"})


def available() -> bool:
    """Always (numba's CPU target)."""
    return True


def prefix_tables(masses) -> tuple:
    """``(E0, D0, sigma, None)`` of the row of ``masses`` (the protocol of
    :mod:`decoding.verifiers.optimal.setup`): :func:`prefix_pass_chebyshev`, its nodes dealt
    out among the threads of the row's share (one part on a small row)."""
    E0, D0, sigma = prefix_pass_chebyshev(masses.q, masses.s, masses.w, masses._above, masses.k, masses.checkpoint,
                                          parts=masses.pass_threads())
    return E0, D0, sigma, None


def group_tables(masses, GE: np.ndarray, GD: np.ndarray, first: int, last: int, start: int, nodes: int) -> int:
    """``GE[g], GD[g]`` for the groups ``first <= g < last`` at the nodes ``[start, nodes)``
    (:func:`group_pass_chebyshev`, one thread); returns ``nodes``."""
    group_pass_chebyshev(masses.q, masses.s, masses.k, masses.group, GE, GD, first, last, nodes=(start, nodes))
    return nodes


def chebyshev_points(k: int, below: float = INTERPOLATE_BELOW) -> int:
    """The least ``P`` with ``(1 + Lambda_P) e^{d tau} (e d tau / P)^P <= 2^-60``, ``d = k - 1``,
    ``Lambda_P <= 1 + (2 / pi) log(P + 1)`` (module docstring)."""
    degree, points = max(k - 1, 1), 1
    while ((2.0 + 2.0 / math.pi * math.log(points + 1)) * math.exp(degree * below)
           * (math.e * degree * below / points) ** points > TRUNCATION):
        points += 1
    return points


def taylor_terms(below: float = INTERPOLATE_BELOW) -> int:
    """Terms of the Taylor series of ``e^x - 1`` that the points take (``x <= tau``): the first
    left out, ``x^{n+1} / (n+1)!``, is below ``2^-60`` of ``x``."""
    return next(n for n in range(1, 60) if below ** n / math.factorial(n + 1) < TRUNCATION)


def prefix_pass_chebyshev(q: np.ndarray, s: np.ndarray, w: np.ndarray, above: np.ndarray, k: int, every: int,
                          below: float = INTERPOLATE_BELOW, interpolate_from: int = INTERPOLATE_FROM,
                          parts: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(E0, D0, sigma)``: the checkpoints ``[n // every + 1, N, k]`` (the count polynomials of the
    ranks ``[0, c every)``) and ``sigma [n]``, the values of
    :func:`~decoding.verifiers.optimal.setup.numba_nodes.prefix_pass` within roundoff, through the points
    of the module docstring at each block's nodes where ``kappa s < below`` (every node the
    reference's way with ``interpolate_from`` above the nodes). ``parts > 1``: the nodes dealt
    out among that many threads (:func:`decoding.verifiers.base.share_rows`), the nodes ``i, i +
    parts, ...`` to part ``i``, each part a pass of its own over every rank (a node's polynomials
    are its own; each part repeats the ranks' work at the points) and ``sigma`` the sum of the
    parts' terms, added in the parts' order."""
    n, nodes = q.shape[0], s.shape[0]
    at, weights, taylor, reciprocal = _points(k, below)
    E0, D0 = np.empty((n // every + 1, nodes, k)), np.empty((n // every + 1, nodes, k))
    sigmas = np.zeros((parts, n))

    def run(part: int, count: int) -> None:
        if count != parts:  # share_rows dealt the nodes otherwise than asked: not a pass of these parts
            raise RuntimeError(f"the pass at points was asked for {parts} parts and given {count}")
        _pass(q, s[part::parts], w[part::parts], above, k, every, below, at, weights, reciprocal,
              reciprocal ** np.arange(k)[:, None], taylor, interpolate_from, E0[:, part::parts], D0[:, part::parts],
              sigmas[part])

    if parts == 1:
        run(0, 1)
    else:
        share_rows(run, parts)
    sigma = sigmas[0]
    for part in range(1, parts):
        sigma += sigmas[part]
    return E0, D0, sigma


def group_pass_chebyshev(q: np.ndarray, s: np.ndarray, k: int, group: int, GE: np.ndarray, GD: np.ndarray,
                         first: int, last: int, below: float = INTERPOLATE_BELOW,
                         interpolate_from: int = INTERPOLATE_FROM, nodes: tuple[int, int] | None = None) -> None:
    """``GE[g], GD[g]`` ``[N, k]`` for the groups ``first <= g < last``: the count polynomials of
    the ranks ``[g group, (g + 1) group)`` alone, the values of
    :func:`~decoding.verifiers.optimal.setup.numba_nodes.group_pass` (its reference) within roundoff,
    each group's product taken at the points and interpolated to the nodes where its largest
    ``q`` times ``s`` is below ``below`` (a block of :func:`prefix_pass_chebyshev` with no prefix
    below it and no ``sigma``: module docstring), node by node at the others. ``nodes``: only the
    nodes ``[start, stop)`` are written (all by default), with the values the whole pass gives
    them (which nodes are interpolated is decided over all of ``s``, and every node's value is its
    own), so a walk that reads only the first nodes pays for those."""
    at, weights, taylor, reciprocal = _points(k, below)
    start, stop = nodes if nodes is not None else (0, s.shape[0])
    _groups(q, s, k, group, GE, GD, first, last, below, at, weights, reciprocal, taylor, interpolate_from, start, stop)


def _points(k: int, below: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(at, weights, taylor, reciprocal)``: the Chebyshev points of the first kind on ``[0,
    below]`` (:func:`chebyshev_points` of them), their barycentric weights, the Taylor
    coefficients ``1 / m!`` of ``e^x - 1`` (:func:`taylor_terms`) and ``1 / at``."""
    points = chebyshev_points(k, below)
    angles = (2.0 * np.arange(points) + 1.0) * np.pi / (2.0 * points)
    at = below * (1.0 - np.cos(angles)) / 2.0
    weights = np.sin(angles) * (-1.0) ** np.arange(points)
    taylor = 1.0 / np.array([math.factorial(m) for m in range(1, taylor_terms(below) + 1)])
    return at, weights, taylor, 1.0 / at


@_compiled
def _lagrange(u, at, weights, out):
    """``out[p] = L_p(u)``, the Lagrange basis of the points ``at`` at ``u`` (barycentric)."""
    total = 0.0
    for p in range(at.shape[0]):
        if u == at[p]:
            out[:] = 0.0
            out[p] = 1.0
            return
        out[p] = weights[p] / (u - at[p])
        total += out[p]
    for p in range(at.shape[0]):
        out[p] /= total


@_compiled
def _pass(q, s, w, above, k, every, below, at, weights, reciprocal, reciprocal_powers, taylor, interpolate_from, E0, D0,
          sigma):
    """:func:`prefix_pass_chebyshev` into ``E0, D0, sigma`` (``reciprocal[p] = 1 / u_p``,
    ``reciprocal_powers[d, p] = u_p^-d``)."""
    n, nodes, points = q.shape[0], s.shape[0], at.shape[0]
    E, D = np.zeros((k, nodes)), np.zeros((k, nodes))  # the prefix [0, b), degree by degree
    E[0, :] = 1.0
    F, G = np.zeros((k, points)), np.zeros((k, points))  # [z^d] F_a, G_a at the points
    weight_E, weight_D = np.zeros((k, points)), np.zeros((k, points))  # Lambda_E, Lambda_D
    basis = np.zeros((nodes, points))  # L_p(u_i) at the block's interpolated nodes
    clock, powers = np.zeros(points), np.zeros((k, points))  # powers: the block's product at a node
    terms_at, terms = np.zeros(points), taylor.shape[0]  # a rank's terms of sigma by point, summed after its degrees
    none, some, decay = np.empty(nodes), np.empty(nodes), np.zeros(nodes)
    value_F, value_G = np.empty((nodes, k)), np.empty((nodes, k))  # F_e, G_e e^{-S_B s} at those nodes
    live = nodes
    for c in range(n // every + 1):
        b = c * every
        for i in range(nodes):
            for d in range(k):
                E0[c, i, d], D0[c, i, d] = E[d, i], D[d, i]
        if b >= n:
            break
        end = min(b + every, n)
        kappa, total = 0.0, 0.0
        for r in range(b, end):
            kappa = max(kappa, q[r])
            total += q[r]
        tail = above[b] + q[b]  # T_b: the rate of the ranks b and above
        split = 0  # the interpolated nodes [0, split), the others [split, live)
        while split < live and kappa * s[split] < below:
            split += 1
        if split < interpolate_from:
            split = 0
        if split > 0:
            weight_E[:, :], weight_D[:, :] = 0.0, 0.0
            for i in range(split):  # sum_i (w_i e^{-T_b s_i} u_i^d [z^{k-1-d}] E_b) L_p(u_i), then times u_p^-d
                u = kappa * s[i]
                _lagrange(u, at, weights, basis[i])
                factor = w[i] * np.exp(-tail * s[i])
                if factor == 0.0:  # (the basis is still needed for the block's product)
                    continue
                for d in range(k):
                    of_E, of_D = factor * E[k - 1 - d, i], factor * D[k - 1 - d, i]
                    for p in range(points):
                        weight_E[d, p] += basis[i, p] * of_E
                        weight_D[d, p] += basis[i, p] * of_D
                    factor *= u
            for d in range(1, k):
                for p in range(points):
                    weight_E[d, p] *= reciprocal_powers[d, p]
                    weight_D[d, p] *= reciprocal_powers[d, p]
            F[:, :], G[:, :] = 0.0, 0.0
            F[0, :] = 1.0
        E_rest, D_rest, s_rest, w_rest = E[:, split:live], D[:, split:live], s[split:live], w[split:live]
        decay[:] = 0.0  # (0: an exponential at the first rank that reaches the node)
        for a in range(b, end):
            part = 0.0
            if split > 0:
                rate, q_a = q[a] / kappa, q[a]
                for p in range(points):  # c_a = e^{x} - 1 at the points, x = q_a u_p / kappa
                    x = rate * at[p]
                    series = taylor[terms - 1]
                    for m in range(terms - 2, -1, -1):
                        series = series * x + taylor[m]
                    clock[p] = series * x
                    terms_at[p] = 0.0
                for d in range(k - 1, 0, -1):  # downward: degree d - 1 is read before it is written
                    for p in range(points):
                        step_F = clock[p] * F[d - 1, p]
                        step_G = clock[p] * G[d - 1, p] + q_a * F[d, p]
                        terms_at[p] += step_F * weight_D[d, p] + step_G * weight_E[d, p]
                        F[d, p] += step_F
                        G[d, p] += step_G
                for p in range(points):
                    step_G = q_a * F[0, p]
                    part += terms_at[p] + step_G * weight_E[0, p]
                    G[0, p] += step_G
            rest = live - split
            if rest > 0:
                _clock(q[a], s_rest, rest, none, some)
                part += rank_terms(q[a], above[a], s_rest, w_rest, E_rest, D_rest, none, some, decay, 0, rest, False, k)[0]
                _add_rank_by_degree(E_rest, D_rest, none, some, q[a], k, rest)
            sigma[a] = part
        # the block's (F_e, G_e) at its interpolated nodes, times e^{-S_B s}: (u_i / u_p)^d by products here
        # (taking u_p^-d out, as the weights do, put sigma 4x further from an 80-bit pass)
        for i in range(split):
            _basis_powers(np.exp(-total * s[i]), kappa * s[i], reciprocal, basis[i], powers)
            for d in range(k):
                f, g = 0.0, 0.0
                for p in range(points):
                    f += powers[d, p] * F[d, p]
                    g += powers[d, p] * G[d, p]
                value_F[i, d], value_G[i, d] = f, g
        if split > 0:  # the prefix there: its union with the block's product
            _merge(E[:, :split].T, D[:, :split].T, value_F[:split], value_G[:split], k)
            for t in range(k):
                for i in range(split):
                    E[t, i], D[t, i] = _normal(E[t, i]), _normal(D[t, i])
        live = live_prefix_nodes(E, D, live)


@_compiled
def _groups(q, s, k, group, GE, GD, first, last, below, at, weights, reciprocal, taylor, interpolate_from, start, stop):
    """:func:`group_pass_chebyshev` into ``GE``, ``GD`` at the nodes ``[start, stop)``."""
    nodes, points, terms = s.shape[0], at.shape[0], taylor.shape[0]
    F, G = np.zeros((k, points)), np.zeros((k, points))  # [z^d] F_a, G_a at the points
    basis, clock, powers = np.zeros(points), np.zeros(points), np.zeros((k, points))
    E, D = np.zeros((k, nodes)), np.zeros((k, nodes))  # the group at the other nodes, degree by degree
    none, some = np.empty(nodes), np.empty(nodes)
    # A group's scale and split, its F, G at the points (the rank loop of _pass without its terms of
    # sigma) and its product at the nodes are written out here as in _pass: as compiled helpers
    # called from both they made the pass slower (scripts/bench_wor_pass.py)
    for g in range(first, min(last, (q.shape[0] + group - 1) // group)):
        lo, hi = g * group, min(q.shape[0], (g + 1) * group)
        kappa, total = 0.0, 0.0
        for r in range(lo, hi):
            kappa = max(kappa, q[r])
            total += q[r]
        split = 0  # the interpolated nodes [0, split), the others [split, nodes): over all nodes
        while split < nodes and kappa * s[split] < below:
            split += 1
        if split < interpolate_from:
            split = 0
        inside = min(split, stop) > start  # some node asked for is interpolated
        rest_from = max(split, start)  # the nodes asked for past the interpolated ones: [rest_from, stop)
        F[:, :], G[:, :] = 0.0, 0.0
        F[0, :] = 1.0
        E[:, rest_from:stop], D[:, rest_from:stop] = 0.0, 0.0
        E[0, rest_from:stop] = 1.0
        E_rest, D_rest, s_rest = E[:, rest_from:stop], D[:, rest_from:stop], s[rest_from:stop]
        live = max(0, stop - rest_from)
        for a in range(lo, hi):
            if inside:
                rate, q_a = q[a] / kappa, q[a]
                for p in range(points):
                    x = rate * at[p]
                    series = taylor[terms - 1]
                    for m in range(terms - 2, -1, -1):
                        series = series * x + taylor[m]
                    clock[p] = series * x
                for d in range(k - 1, 0, -1):
                    for p in range(points):
                        G[d, p] += clock[p] * G[d - 1, p] + q_a * F[d, p]
                        F[d, p] += clock[p] * F[d - 1, p]
                for p in range(points):
                    G[0, p] += q_a * F[0, p]
            if live > 0:
                _clock(q[a], s_rest, live, none, some)
                _add_rank_by_degree(E_rest, D_rest, none, some, q[a], k, live)
                live = live_prefix_nodes(E_rest, D_rest, live)  # the nodes past it stay 0
        for i in range(start, min(split, stop)):  # e^{-S s} (F_e, G_e) at the interpolated nodes, as _pass's block product
            _lagrange(kappa * s[i], at, weights, basis)
            _basis_powers(np.exp(-total * s[i]), kappa * s[i], reciprocal, basis, powers)
            for d in range(k):
                f, h = 0.0, 0.0
                for p in range(points):
                    f += powers[d, p] * F[d, p]
                    h += powers[d, p] * G[d, p]
                GE[g, i, d], GD[g, i, d] = _normal(f), _normal(h)
        for i in range(rest_from, stop):
            for d in range(k):
                GE[g, i, d], GD[g, i, d] = E[d, i], D[d, i]


@_compiled
def _basis_powers(factor, u, reciprocal, basis, out):
    """``out[d, p] = factor L_p(u) (u / u_p)^d`` for ``d < out.shape[0]`` (``basis[p] = L_p(u)``,
    ``reciprocal[p] = 1 / u_p``): what the interpolated ``[z^d]`` coefficients, ``u^d h(u)``, take
    from ``h(u_p) = [z^d](u_p) / u_p^d``."""
    for p in range(reciprocal.shape[0]):
        out[0, p] = factor * basis[p]
    for d in range(1, out.shape[0]):
        for p in range(reciprocal.shape[0]):
            out[d, p] = out[d - 1, p] * (u * reciprocal[p])


__all__ = ["CAPABILITIES", "available", "group_tables", "prefix_tables", "INTERPOLATE_BELOW", "INTERPOLATE_FROM", "TRUNCATION", "chebyshev_points", "group_pass_chebyshev",
           "prefix_pass_chebyshev", "taylor_terms"]
