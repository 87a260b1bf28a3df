"""The set-up's pass up the ranks of ``optimal_wor`` on a torch device: ``sigma``, the
checkpointed prefixes and the groups of ranks of
:class:`~decoding.verifiers.optimal.clock_masses.CompiledClockSetMasses` by a blocked scan
(:func:`scan`; the masses class that takes it,
:func:`decoding.verifiers.optimal.clock_masses.clock_masses`). It is the plain reference of the CUDA
kernels (:mod:`decoding.verifiers.optimal.setup.cuda_scan`, the same steps with each thread's
polynomials kept in registers), and their stand-in on a device where numba's CUDA target is
missing: as torch operations its steps 1 and 3 are bound by memory traffic, no faster on an H200
than the compiled pass on 16 CPU cores (docs/optimal-verifier-proofs.md#the-set-up-as-a-scan).

**The products as a scan (our derivation).** At a quadrature node ``s`` a group ``G`` of ranks has
the count polynomials, truncated at degree ``k - 1``,
``E_G(z) = prod_{r in G} (a_r + b_r z)`` and ``D_G(z) = sum_{r in G} q_r a_r prod_{r' in G, r' != r}
(a_r' + b_r' z)``, with ``a_r = e^{-q_r s}`` (no arrival by ``s``) and ``b_r = 1 - a_r``
(docs/optimal-verifier.md#water-levels-for-drafts-without-replacement). ``D_G`` is the ``epsilon`` part of
``prod_r (a_r + b_r z +
epsilon q_r a_r)`` with ``epsilon^2 = 0``, so two disjoint groups unite as dual polynomials
multiply, ``(E, D) (E', D') = (E E', D E' + E D')``: associative and commutative, with ``(1, 0)``
the empty group, and a rank the factor ``(a + b z, q a)`` (the compiled pass's ``_add_rank``
is this product). Prefix products are then a scan, in any bracketing:

1. the ranks in blocks of ``every`` (the checkpoints' spacing): every block's product, all
   blocks at once, one rank of each per step (``every`` steps over ``[blocks, N, k]``; the
   clocks ``e^{-q s}`` and ``1 - e^{-q s}``, by ``expm1``, of every rank and node at once);
2. the blocks' exclusive prefix products by doubling (Hillis and Steele, "Data parallel
   algorithms", CACM 1986; ``ceil(log2 blocks)`` steps): the checkpoints, the prefixes
   ``[0, c every)``;
3. ``sigma_a``, the probability that rank ``a`` is the highest drafted, from each block's prefix
   again one rank per step: ``sum_i w_i e^{-q(above a) s_i} (q_a a_{a,i} [z^{k-1}] E(a) +
   b_{a,i} [z^{k-2}] D(a))``, ``(E, D)(a)`` the prefix ``[0, a)``, the compiled pass's sum
   (``prefix_pass``), the two coefficients kept at every rank and summed over the nodes at once;
4. the groups of ``group`` ranks that the walk's reads multiply ranges from: products of
   ``group / every`` consecutive blocks.

Every coefficient is a sum of products of non-negative numbers, so every bracketing gives it
to a few roundings relative: the values are the compiled pass's within roundoff, not to the bit
(tests/decoding/test_optimal_wor_torch.py holds them within ``1e-12`` relative, and fails on a scan
without its prefix products or with a product that drops its cross term). Coefficients below the least normal float64 are set to 0 in
what is returned, as the compiled pass sets them, so the CPU passes that read the checkpoints
leave the same dead nodes. Work ``O(n N k)`` for 1 and 3 and ``O(C log C N k^2)`` for 2 (``C``
blocks), in about ``20 every + 3 k log2 C`` kernel launches; memory six ``[n, N]`` float64
arrays (about 430 MB each for a whole Qwen row at 350 nodes) and a few ``[C, N, k]``.
"""
from __future__ import annotations

import numpy as np
import torch

from .capabilities import SetupCapabilities

#: The checkpoints' spacing of the scans on a device: their blocks of ranks, the spacing their
#: kernels were tuned and checked at (docs/optimal-verifier-proofs.md#the-set-up-as-a-scan); the
#: torch scan launches about ``20`` kernels per rank of it.
SCAN_CHECKPOINT = 64

#: The plain reference of the CUDA kernels, and their stand-in on a CUDA device where numba's CUDA
#: target is missing or ``k`` is past theirs; on the CPU the compiled passes come first.
CAPABILITIES = SetupCapabilities(
    name="torch",
    devices=("cpu", "cuda"),
    max_k=None,
    max_threads=None,
    checkpoint=SCAN_CHECKPOINT,
    all_groups=True,
    automatic=True,
    description="a blocked scan in torch operations, on any torch device",
)

#: ``e^{-x}`` is 0 in float64 beyond this ``x``: the compiled pass stops its sum over nodes there.
EXP_UNDERFLOW = 745.2

#: The least normal float64 (as :data:`decoding.verifiers.optimal.clock_kernels.SMALLEST_NORMAL`).
SMALLEST_NORMAL = 2.2250738585072014e-308


def _times(E: torch.Tensor, D: torch.Tensor, F: torch.Tensor, G: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(E, D) (F, G) = (E F, D F + E G)``, each polynomial truncated at the last axis' ``k``
    coefficients (broadcast over the leading axes)."""
    k = E.shape[-1]
    out_E, out_D = torch.zeros_like(E), torch.zeros_like(D)
    for e in range(k):
        out_E[..., e:] += E[..., e:e + 1] * F[..., :k - e]
        out_D[..., e:] += D[..., e:e + 1] * F[..., :k - e] + E[..., e:e + 1] * G[..., :k - e]
    return out_E, out_D


def _add_rank(E: torch.Tensor, D: torch.Tensor, a: torch.Tensor, b: torch.Tensor, qa: torch.Tensor) -> None:
    """``(E, D) := (E, D) (a + b z, q a)`` in place (``a``, ``b``, ``qa`` shaped as ``E[..., 0]``):
    ``D a + z D b + q a E`` and ``E a + z E b``, from the old coefficients."""
    lower_E, lower_D = E[..., :-1].clone(), D[..., :-1].clone()
    D.mul_(a[..., None]).addcmul_(E, qa[..., None])
    D[..., 1:].addcmul_(lower_D, b[..., None])
    E.mul_(a[..., None])
    E[..., 1:].addcmul_(lower_E, b[..., None])


def _empty(shape: tuple, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """``(E, D) = (1, 0)`` of shape ``shape + (k,)``: the empty group."""
    E = torch.zeros(shape, dtype=torch.float64, device=device)
    E[..., 0] = 1.0
    return E, torch.zeros_like(E)


def inclusive_products(E: torch.Tensor, D: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The inclusive prefix products along the first axis, by doubling: after step ``h`` each
    entry holds the product of the ``2^h`` entries up to it."""
    step = 1
    while step < E.shape[0]:
        E2, D2 = E.clone(), D.clone()
        E2[step:], D2[step:] = _times(E[:-step], D[:-step], E[step:], D[step:])
        E, D, step = E2, D2, 2 * step
    return E, D


def flushed(x: torch.Tensor) -> np.ndarray:
    """``x`` on the CPU as a contiguous float64 array, entries below the least normal set to 0.
    From a CUDA device it comes back into page-locked memory from torch's caching host allocator
    (a DMA copy into memory that a repeated set-up finds already mapped), not into fresh pageable
    memory: the checkpoints of a whole row are 50-120 MB."""
    flush = torch.where(x < SMALLEST_NORMAL, 0.0, x)
    if flush.device.type != "cuda":
        return np.ascontiguousarray(flush.numpy())
    host = torch.empty(flush.shape, dtype=flush.dtype, pin_memory=True)
    host.copy_(flush)
    return host.numpy()


def check_arguments(k: int, every: int, group: int) -> None:
    """A scan's ``k``, block and group sizes, or :class:`ValueError` (both scans call it)."""
    if k < 2 or every < 1 or group % every:
        raise ValueError(f"scan needs k >= 2 and group a multiple of every; got k={k}, every={every}, group={group}")


def available() -> bool:
    """Always (torch)."""
    return True


def prefix_tables(masses) -> tuple:
    """``(E0, D0, sigma, (GE, GD))`` of the row of ``masses`` (the protocol of
    :mod:`decoding.verifiers.optimal.setup`): :func:`scan` on ``masses.device``, every group
    of ranks at once."""
    E0, D0, sigma, GE, GD = scan(masses.q, masses.s, masses.w, masses._above, masses.k, masses.checkpoint,
                                 masses.group, masses.device)
    return E0, D0, sigma, (GE, GD)


def scan(q: np.ndarray, s: np.ndarray, w: np.ndarray, above: np.ndarray, k: int, every: int, group: int,
         device: torch.device | str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(E0, D0, sigma, GE, GD)`` of the ranks ``q`` ``[n]`` (float64, by rank) at the nodes ``s``
    with weights ``w`` ``[N]``, ``above[a]`` the ``q`` of the ranks above ``a``, computed on
    ``device`` (module docstring) and returned as CPU arrays: ``E0, D0`` ``[n // every + 1, N, k]``
    the prefixes ``[0, c every)``, ``sigma`` ``[n]``, ``GE, GD`` ``[ceil(n / group), N, k]`` the
    groups ``[g group, (g + 1) group)``; ``group`` a multiple of ``every``."""
    check_arguments(k, every, group)
    device = torch.device(device)
    n, nodes = q.size, s.size
    blocks = -(-n // every)
    padded = blocks * every  # ranks of q = 0 past n: the factor (1, 0), nothing changes
    q_t = torch.zeros(padded, dtype=torch.float64, device=device)
    q_t[:n] = torch.as_tensor(q, dtype=torch.float64)
    above_t = torch.zeros(padded, dtype=torch.float64, device=device)
    above_t[:n] = torch.as_tensor(above, dtype=torch.float64)
    s_t = torch.as_tensor(s, dtype=torch.float64).to(device)
    w_t = torch.as_tensor(w, dtype=torch.float64).to(device)
    z = q_t[:, None] * s_t[None, :]  # [padded, N]: every rank's clock at every node, at once
    a, b = torch.exp(-z).view(blocks, every, nodes), (-torch.expm1(-z)).view(blocks, every, nodes)
    qa = q_t.view(blocks, every, 1) * a
    del z

    E, D = _empty((blocks, nodes, k), device)  # 1. each block's product
    for j in range(every):
        _add_rank(E, D, a[:, j], b[:, j], qa[:, j])
    block_E, block_D = E, D

    inclusive_E, inclusive_D = inclusive_products(block_E, block_D)  # 2. the checkpoints
    one_E, one_D = _empty((1, nodes, k), device)
    prefix_E, prefix_D = torch.cat([one_E, inclusive_E]), torch.cat([one_D, inclusive_D])  # [0, c every), c <= blocks

    E, D = prefix_E[:blocks].clone(), prefix_D[:blocks].clone()  # 3. sigma, each block from its prefix
    top_E, top_D = torch.empty_like(a), torch.empty_like(a)  # [z^{k-1}] E and [z^{k-2}] D of [0, a)
    for j in range(every):
        top_E[:, j], top_D[:, j] = E[..., k - 1], D[..., k - 2]
        _add_rank(E, D, a[:, j], b[:, j], qa[:, j])
    exponent = above_t.view(blocks, every, 1) * s_t
    decay = torch.where(exponent > EXP_UNDERFLOW, 0.0, torch.exp(-exponent))
    del exponent
    sigma = ((qa * top_E + b * top_D) * decay) @ w_t  # [blocks, every]

    per_group, groups = group // every, -(-n // group)  # 4. the groups of ranks
    group_E, group_D = _empty((groups * per_group, nodes, k), device)
    group_E[:blocks], group_D[:blocks] = block_E, block_D
    group_E, group_D = group_E.view(groups, per_group, nodes, k), group_D.view(groups, per_group, nodes, k)
    GE, GD = group_E[:, 0], group_D[:, 0]
    for m in range(1, per_group):
        GE, GD = _times(GE, GD, group_E[:, m], group_D[:, m])

    checkpoints = n // every + 1
    return (flushed(prefix_E[:checkpoints]), flushed(prefix_D[:checkpoints]),
            np.ascontiguousarray(sigma.reshape(-1)[:n].cpu().numpy()), flushed(GE), flushed(GD))


__all__ = ["CAPABILITIES", "EXP_UNDERFLOW", "SCAN_CHECKPOINT", "available", "prefix_tables", "check_arguments", "flushed", "inclusive_products", "scan"]
