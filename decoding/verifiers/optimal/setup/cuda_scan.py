"""The blocked scan of :mod:`decoding.verifiers.optimal.setup.torch_scan` as CUDA kernels (numba): the
same steps (each block's product, the blocks' prefixes, ``sigma`` from each block's prefix, the
groups of ranks), with the polynomials of one block at one node held by one GPU thread for the
whole block instead of written to memory at every rank.

Why: the torch scan's steps 1 and 3 are ``2 every`` rounds of elementwise kernels over
``[blocks, N, k]`` arrays, memory-bound (every round reads and writes every block's polynomials
at every node); here each thread keeps its ``(E, D)`` over its ``every`` ranks and reads only
``q`` of its ranks, so steps 1 and 3 read ``O(n)`` floats and write the checkpoints, the groups
and ``sigma``'s terms. The kernels are compiled for each ``k`` (:func:`kernels`: ``k`` a constant
of their code, so the loops over degrees unroll and the polynomials stay in registers). The
blocks' prefixes take two levels, so no thread walks all ``C`` blocks: the groups of ``group /
every`` blocks (step 4, one thread per group and node), their prefixes (one thread per node,
group after group), and each group's blocks from its prefix (one thread per group and node).
``sigma`` sums each rank's terms over the nodes with ``torch.sum`` (deterministic: the same
values at every call; no atomics).

Each thread runs the compiled pass's arithmetic on its block (``e^{-q s} - 1`` by ``expm1``
below ``ln 2``, as :func:`decoding.verifiers.optimal.clock_kernels._clock` does beyond its Taylor
range), so the values agree with the torch scan's and the compiled pass's within roundoff
(tests/decoding/test_optimal_wor_cuda.py: on a CUDA device, and through numba's CUDA simulator
on the CPU). ``k`` up to :data:`MAX_K` (:attr:`CAPABILITIES`; the torch scan beyond).

numba's CUDA target (the ``numba-cuda`` package on a GPU machine) registers ``np.row_stack`` when
it first compiles a kernel, and NumPy 2.5 removed that alias of ``np.vstack``: numba-cuda 0.30.4,
the newest, fails there with ``AttributeError`` (NVIDIA/numba-cuda issue 907, not to be fixed:
the package is in maintenance mode; numba itself guards the name since 0.67). So the launches
run inside :func:`_with_row_stack`, which gives NumPy the alias back while they run where it
lacks it, and takes it away after.
"""
from __future__ import annotations

import contextlib
import functools
import math
from types import SimpleNamespace

import numba
import numpy as np
import torch
from numba import cuda

from . import torch_scan
from .capabilities import SetupCapabilities

#: The largest ``k`` the kernels are compiled for (each ``k`` its own code, a few seconds).
MAX_K = 16

CAPABILITIES = SetupCapabilities(
    name="cuda",
    devices=("cuda",),
    max_k=MAX_K,
    max_threads=None,
    checkpoint=torch_scan.SCAN_CHECKPOINT,
    all_groups=True,
    automatic=True,
    description="the blocked scan as CUDA kernels compiled with numba, one GPU thread per block and node",
)

#: Threads per CUDA block of every kernel.
THREADS = 128


@functools.cache
def kernels(k: int) -> SimpleNamespace:
    """The kernels for ``k`` drafts (module docstring), compiled at their first launch."""
    device, underflow = cuda.jit(device=True), torch_scan.EXP_UNDERFLOW

    @device
    def add_rank(E, D, q, s):
        """``(E, D) := (E, D) (a + b z, q a)``, ``a = e^{-q s}``, ``b = 1 - a``; returns ``(a, b)``."""
        z = q * s
        if z < 0.6931471805599453:
            small = math.expm1(-z)
            a, b = 1.0 + small, -small
        else:
            a = math.exp(-z)
            b = 1.0 - a
        qa = q * a
        for d in range(k - 1, 0, -1):  # downward: degree d - 1 is read before it is written
            D[d] = D[d] * a + qa * E[d] + D[d - 1] * b
            E[d] = E[d] * a + E[d - 1] * b
        D[0] = D[0] * a + qa * E[0]
        E[0] = E[0] * a
        return a, b

    @device
    def times(E, D, F, G):
        """``(E, D) := (E F, D F + E G)``, truncated (downward: the lower degrees are read before
        they are written)."""
        for d in range(k - 1, -1, -1):
            e_value, d_value = 0.0, 0.0
            for e in range(d + 1):
                e_value += E[e] * F[d - e]
                d_value += D[e] * F[d - e] + E[e] * G[d - e]
            E[d], D[d] = e_value, d_value

    @device
    def one(E, D):
        for d in range(k):
            E[d], D[d] = 0.0, 0.0
        E[0] = 1.0

    @device
    def store(E, D, OE, OD, at, i):
        for d in range(k):
            OE[at, i, d], OD[at, i, d] = E[d], D[d]

    @device
    def prefixes(E, D, UE, UD, first, last, i, PE, PD):
        """``PE[c, i], PD[c, i]`` := ``(E, D)`` times the units ``[first, c)`` at node ``i``, for
        ``first <= c < last``; ``(E, D)`` ends as the product through unit ``last - 1``."""
        for c in range(first, last):
            store(E, D, PE, PD, c, i)
            times(E, D, UE[c, i], UD[c, i])

    @cuda.jit
    def block_products(q, s, every, BE, BD):
        """``BE[c, i], BD[c, i]``: the ranks ``[c every, (c + 1) every)`` at node ``i``."""
        t, nodes = cuda.grid(1), s.shape[0]
        if t >= BE.shape[0] * nodes:
            return
        c, i = t // nodes, t % nodes
        E, D = cuda.local.array(k, numba.float64), cuda.local.array(k, numba.float64)
        one(E, D)
        for r in range(c * every, min((c + 1) * every, q.shape[0])):
            add_rank(E, D, q[r], s[i])
        store(E, D, BE, BD, c, i)

    @cuda.jit
    def group_products(BE, BD, per_group, GE, GD):
        """``GE[g, i], GD[g, i]``: the blocks ``[g per_group, (g + 1) per_group)`` at node ``i``."""
        t, nodes = cuda.grid(1), BE.shape[1]
        if t >= GE.shape[0] * nodes:
            return
        g, i = t // nodes, t % nodes
        E, D = cuda.local.array(k, numba.float64), cuda.local.array(k, numba.float64)
        one(E, D)
        for c in range(g * per_group, min((g + 1) * per_group, BE.shape[0])):
            times(E, D, BE[c, i], BD[c, i])
        store(E, D, GE, GD, g, i)

    @cuda.jit
    def group_prefixes(GE, GD, PG, PGD):
        """``PG[g, i], PGD[g, i]``: the groups ``[0, g)`` at node ``i``, ``g = 0..groups``; one
        thread per node."""
        i = cuda.grid(1)
        if i >= GE.shape[1]:
            return
        E, D = cuda.local.array(k, numba.float64), cuda.local.array(k, numba.float64)
        one(E, D)
        prefixes(E, D, GE, GD, 0, GE.shape[0], i, PG, PGD)
        store(E, D, PG, PGD, GE.shape[0], i)

    @cuda.jit
    def block_prefixes(BE, BD, PG, PGD, per_group, PE, PD):
        """``PE[c, i], PD[c, i]``: the blocks ``[0, c)`` at node ``i`` for ``c < C``, from the
        prefix of ``c``'s group and its group's blocks below ``c``."""
        t, nodes = cuda.grid(1), BE.shape[1]
        if t >= (PG.shape[0] - 1) * nodes:
            return
        g, i = t // nodes, t % nodes
        E, D = cuda.local.array(k, numba.float64), cuda.local.array(k, numba.float64)
        for d in range(k):
            E[d], D[d] = PG[g, i, d], PGD[g, i, d]
        prefixes(E, D, BE, BD, g * per_group, min((g + 1) * per_group, BE.shape[0]), i, PE, PD)

    @cuda.jit
    def sigma_terms(q, above, s, w, every, PE, PD, terms):
        """``terms[r, i]``: node ``i``'s term of ``sigma_r`` (step 3 of
        :mod:`decoding.verifiers.optimal.setup.torch_scan`), from block ``c``'s prefix ``PE[c, i]``."""
        t, nodes = cuda.grid(1), s.shape[0]
        if t >= (PE.shape[0] - 1) * nodes:
            return
        c, i = t // nodes, t % nodes
        E, D = cuda.local.array(k, numba.float64), cuda.local.array(k, numba.float64)
        for d in range(k):
            E[d], D[d] = PE[c, i, d], PD[c, i, d]
        for r in range(c * every, min((c + 1) * every, q.shape[0])):
            top_E, top_D = E[k - 1], D[k - 2]
            a, b = add_rank(E, D, q[r], s[i])
            exponent = above[r] * s[i]
            decay = 0.0 if exponent > underflow else math.exp(-exponent)
            terms[r, i] = (q[r] * a * top_E + b * top_D) * decay * w[i]

    return SimpleNamespace(block_products=block_products, group_products=group_products,
                           group_prefixes=group_prefixes, block_prefixes=block_prefixes, sigma_terms=sigma_terms)


@contextlib.contextmanager
def _with_row_stack():
    """``np.row_stack`` (``np.vstack``) while the block runs, where NumPy has none (module
    docstring)."""
    if hasattr(np, "row_stack"):
        yield
        return
    np.row_stack = np.vstack
    try:
        yield
    finally:
        del np.row_stack


def _launch(kernel, threads: int, device: torch.device, *args) -> None:
    """``kernel`` over ``threads`` threads on ``device``'s current torch stream (tensors passed as
    CUDA arrays; under numba's CUDA simulator, CPU tensors as numpy views)."""
    if numba.config.ENABLE_CUDASIM:
        arrays = [a.numpy() if isinstance(a, torch.Tensor) else a for a in args]
        kernel[-(-threads // THREADS), THREADS](*arrays)
        return
    arrays = [cuda.as_cuda_array(a) if isinstance(a, torch.Tensor) else a for a in args]
    stream = cuda.external_stream(torch.cuda.current_stream(device).cuda_stream)
    with _with_row_stack():
        kernel[-(-threads // THREADS), THREADS, stream](*arrays)


def available() -> bool:
    """Whether numba's CUDA target sees a device."""
    return cuda.is_available()


def prefix_tables(masses) -> tuple:
    """``(E0, D0, sigma, (GE, GD))`` of the row of ``masses`` (the protocol of
    :mod:`decoding.verifiers.optimal.setup`): :func:`scan` on ``masses.device``."""
    E0, D0, sigma, GE, GD = scan(masses.q, masses.s, masses.w, masses._above, masses.k, masses.checkpoint,
                                 masses.group, masses.device)
    return E0, D0, sigma, (GE, GD)


def scan(q: np.ndarray, s: np.ndarray, w: np.ndarray, above: np.ndarray, k: int, every: int, group: int,
         device: torch.device | str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`decoding.verifiers.optimal.setup.torch_scan.scan` by the kernels (module docstring): the
    same outputs, as CPU arrays; ``k`` up to :data:`MAX_K` (:class:`ValueError` beyond: the registry
    gives such rows to the torch scan)."""
    if k > MAX_K:
        raise ValueError(f"the CUDA kernels are compiled for k <= {MAX_K}, not k={k}")
    torch_scan.check_arguments(k, every, group)
    device, run = torch.device(device), kernels(k)
    n, nodes, blocks = q.size, s.size, -(-q.size // every)
    groups, per_group = -(-n // group), group // every

    def put(x: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(np.ascontiguousarray(x, dtype=np.float64)).to(device)

    def new(*shape: int) -> torch.Tensor:
        return torch.empty(shape, dtype=torch.float64, device=device)

    q_t, above_t, s_t, w_t = put(q), put(above), put(s), put(w)
    BE, BD, GE, GD = new(blocks, nodes, k), new(blocks, nodes, k), new(groups, nodes, k), new(groups, nodes, k)
    PG, PGD, PE, PD = new(groups + 1, nodes, k), new(groups + 1, nodes, k), new(blocks + 1, nodes, k), new(blocks + 1, nodes, k)
    terms = new(n, nodes)
    _launch(run.block_products, blocks * nodes, device, q_t, s_t, every, BE, BD)
    _launch(run.group_products, groups * nodes, device, BE, BD, per_group, GE, GD)
    _launch(run.group_prefixes, nodes, device, GE, GD, PG, PGD)
    _launch(run.block_prefixes, groups * nodes, device, BE, BD, PG, PGD, per_group, PE, PD)
    PE[blocks], PD[blocks] = PG[groups], PGD[groups]  # every block below: the last checkpoint where n % every == 0
    _launch(run.sigma_terms, blocks * nodes, device, q_t, above_t, s_t, w_t, every, PE, PD, terms)
    checkpoints = n // every + 1
    flushed = torch_scan.flushed
    return (flushed(PE[:checkpoints]), flushed(PD[:checkpoints]), np.ascontiguousarray(terms.sum(dim=1).cpu().numpy()),
            flushed(GE), flushed(GD))


__all__ = ["CAPABILITIES", "MAX_K", "available", "prefix_tables", "THREADS", "kernels", "scan"]
