"""Shared output type and tensor helpers of the batched verifiers.

Every rule module in :mod:`decoding.verifiers` exposes

- ``draft_scheme``: ``"iid" | "without_replacement" | "hub" | "greedy" | "independent"``,
  the joint draft law ``Q`` of :mod:`otm.draft_laws` that ``sample_drafts`` draws from;
- ``sample_drafts(draft_probs, k, generator) -> draft_tokens``  ``# [batch, k]`` int64;
- ``verify(target_probs, draft_probs, draft_tokens, generator) -> VerifierOutput``;
- ``uniforms_per_row(k) -> int``: how many uniforms ``verify`` draws per row.

Randomness contract (what lets the plain-Python references in
:mod:`decoding.verifiers.reference` reproduce a batched run draw for draw): ``verify``
draws exactly one tensor ``torch.rand(batch, uniforms_per_row(k), generator=generator,
dtype=torch.float64, device=target_probs.device)`` (float64 whatever the rows' dtype:
:data:`SAMPLING_DTYPE`; see :func:`draw_uniforms` and
:func:`verify_uniforms`) and uses column ``j`` of row ``b`` for the ``j``-th random
decision of row ``b``, as documented in each rule. Rows never share randomness, so the
law of a row does not depend on the other rows.

Numerics: all comparisons are written without division (``u * q(x) < p(x)`` for
``u < p(x) / q(x)``), so a zero draft probability never produces a NaN; a residual of
zero mass is replaced by a documented fallback (it is only reached with probability 0
in exact arithmetic); sampling is by inverse CDF and can only return a token of
positive weight (:func:`sample_weighted`). Inputs are validated for shape only: a
NaN check would force a device synchronisation on every step.

Cost (what the verifiers are built around; ``scripts/bench_verifier_cost.py`` measures
it): a verification reads ``[batch, vocab]`` tensors, so its time is the number of
V-sized passes (one elementwise op, reduction or scan over a ``[rows, vocab]`` tensor)
times the rows they touch. The rules therefore do V-sized work only for the rows that
need it (the rows still rejecting, gathered into a compact batch; see
:mod:`decoding.verifiers.rrs`), never materialise what an index correction can replace,
and sample by inverse CDF from unnormalised weights. On the CPU, a large fresh tensor
(above glibc's mmap threshold, at most 32 MiB; 64 rows at ``V = 151,936`` in float32 are
39 MB) is a new mapping whose pages fault in on first touch, which costs more than the
arithmetic (``p - q`` on 64 such rows: about 20 ms, against 5 ms row by row):
:func:`map_row_chunks` runs a verification on chunks of rows whose temporaries stay
within :data:`CPU_CHUNK_BYTES` (4 MiB measured best, from 1 to 8), reused from the heap
and warm in the cache. Rows never share randomness, so the chunking changes no draw.
"""
from __future__ import annotations

import concurrent.futures
import functools
import math
import os
import threading
from dataclasses import dataclass
from typing import Callable

import torch

from otm.errors import InvalidDistributionError, InvalidDraftCountError, ShapeMismatchError
from otm.draft_laws import DRAFT_SCHEMES  # noqa: F401  (re-exported: the schemes a verifier may draw from)


@dataclass(frozen=True)
class VerifierOutput:
    """What a verifier returns for a batch of rows.

    Attributes:
        tokens: ``[batch]`` int64, the output token ``Y`` of each row.
        accepted_index: ``[batch]`` int64, the 0-based index ``i`` of the accepted draft
            (``Y = x_i``), or ``-1`` when ``Y`` was drawn from a residual distribution
            (it may then still equal one of the drafts by chance; membership
            acceptance ``P(Y in S(X))`` counts it, this index does not).
    """

    tokens: torch.Tensor  # [batch]
    accepted_index: torch.Tensor  # [batch]


def check_probs_matrix(probs: torch.Tensor, name: str) -> torch.Tensor:
    """Check that ``probs`` is a floating ``[batch, vocab]`` tensor with ``vocab >= 1``."""
    if not isinstance(probs, torch.Tensor):
        raise InvalidDistributionError(f"{name} must be a torch.Tensor, got {type(probs).__name__}")
    if not probs.is_floating_point():
        raise InvalidDistributionError(f"{name} must be a floating tensor, got dtype {probs.dtype}")
    if probs.ndim != 2 or probs.shape[1] < 1:
        raise ShapeMismatchError(f"{name} must have shape [batch, vocab], got {tuple(probs.shape)}")
    return probs


def check_k(k) -> int:
    """``k`` as an int >= 1, else :class:`InvalidDraftCountError`."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidDraftCountError(f"the number of drafts k must be an integer >= 1, got {k!r}")
    return k


def check_verify_inputs(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, k, vocab]
    draft_tokens: torch.Tensor,  # [batch, k]
) -> tuple[int, int, int]:
    """Shape checks shared by every ``verify``; returns ``(batch, k, vocab)``."""
    check_probs_matrix(target_probs, "target_probs")
    batch, vocab = target_probs.shape
    if not isinstance(draft_probs, torch.Tensor) or draft_probs.ndim != 3:
        raise ShapeMismatchError(
            f"draft_probs must have shape [batch, k, vocab], got "
            f"{tuple(draft_probs.shape) if isinstance(draft_probs, torch.Tensor) else type(draft_probs).__name__}"
        )
    if draft_probs.dtype != target_probs.dtype or draft_probs.device != target_probs.device:
        raise InvalidDistributionError(
            f"draft_probs ({draft_probs.dtype}, {draft_probs.device}) and target_probs "
            f"({target_probs.dtype}, {target_probs.device}) must share dtype and device"
        )
    k = draft_probs.shape[1]
    if draft_probs.shape[0] != batch or draft_probs.shape[2] != vocab or k < 1:
        raise ShapeMismatchError(
            f"draft_probs has shape {tuple(draft_probs.shape)}, expected [batch={batch}, k>=1, vocab={vocab}]"
        )
    if not isinstance(draft_tokens, torch.Tensor) or draft_tokens.shape != (batch, k):
        raise ShapeMismatchError(
            f"draft_tokens must have shape [batch={batch}, k={k}], got "
            f"{tuple(draft_tokens.shape) if isinstance(draft_tokens, torch.Tensor) else type(draft_tokens).__name__}"
        )
    if draft_tokens.dtype != torch.int64:
        raise ShapeMismatchError(f"draft_tokens must be int64 token ids, got dtype {draft_tokens.dtype}")
    return batch, k, vocab


#: The dtype of every uniform and every sampling CDF, whatever the rows' dtype. A float32
#: uniform is a multiple of ``2^-24`` and a float32 CDF drops every weight below half an ulp
#: of the sum before it: on real float32 rows at ``V = 151,936`` (the tokens below ``3e-8`` of
#: a Qwen draft row, ``5.0e-4`` of its mass at T = 1, ``1.7e-7`` at T = 0.1) the exponential
#: clocks of :func:`sample_without_replacement` drew one of them first with probability
#: ``2.1e-3`` and ``7.9e-3``, and the inverse CDF's law was ``1.4e-3`` in total variation from
#: the row's (``scripts/float32_sampling.py``; docs/theory.md, section 4, "Sampling float32 rows").
SAMPLING_DTYPE = torch.float64


def draw_uniforms(generator: torch.Generator | None, batch: int, n: int, like: torch.Tensor) -> torch.Tensor:
    """``[batch, n]`` uniforms in ``[0, 1)`` in :data:`SAMPLING_DTYPE` on the device of ``like``
    (the one random draw of a ``verify`` call; see the module docstring)."""
    return torch.rand(batch, n, generator=generator, dtype=SAMPLING_DTYPE, device=like.device)


def verify_uniforms(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, k, vocab]
    draft_tokens: torch.Tensor,  # [batch, k]
    generator: torch.Generator | None,
    uniforms_per_row: Callable[[int], int],
) -> torch.Tensor:
    """The start of a ``verify``: :func:`check_verify_inputs`, then its one random draw,
    ``[batch, uniforms_per_row(k)]`` (:func:`draw_uniforms`). ``uniforms_per_row`` is the
    rule's own, so a ``k`` the rule does not take raises before anything is drawn."""
    batch, k, _ = check_verify_inputs(target_probs, draft_probs, draft_tokens)
    return draw_uniforms(generator, batch, uniforms_per_row(k), target_probs)


def gather_tokens(probs: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """``probs[b, tokens[b]]``: ``probs`` ``[batch, vocab]``, ``tokens`` ``[batch]`` -> ``[batch]``."""
    return probs.gather(1, tokens.unsqueeze(1)).squeeze(1)


def normalise(weights: torch.Tensor) -> torch.Tensor:
    """Rows of ``weights`` ``[batch, vocab]`` (non-negative) divided by their sums; a zero
    row stays zero (no NaN). Callers replace zero rows with :func:`with_fallback`.
    One reduction and one elementwise pass."""
    total = weights.sum(dim=-1, keepdim=True)
    return weights / torch.where(total > 0, total, torch.ones_like(total))


def with_fallback(weights: torch.Tensor, fallback: torch.Tensor) -> torch.Tensor:
    """Rows of ``weights`` ``[batch, vocab]`` with zero mass replaced by the same rows of
    ``fallback``. Used for residuals that are reached with probability 0 in exact
    arithmetic (for example ``max(p - q, 0)`` when ``p = q``), so that any fallback keeps
    the law exact and the output is never NaN. ``weights`` itself is returned when no
    row is empty (one reduction pass)."""
    empty = weights.sum(dim=-1, keepdim=True) <= 0
    if not bool(empty.any()):
        return weights
    return torch.where(empty, fallback, weights)


def cumsum_rows(values: torch.Tensor, out: torch.Tensor | None = None, dtype: torch.dtype | None = None) -> torch.Tensor:
    """``values.cumsum(dim=-1)`` of ``[batch, vocab]`` ``values``, summed in ``dtype`` (default
    theirs; into ``out`` when given, a tensor of the same shape and of that dtype that does not
    overlap ``values``). On the CPU, for arrays over :data:`SCAN_BYTES`, in blocks of as many
    rows as fit in it (one row at a time at the real vocabulary): a fresh ``[rows, V]`` result
    pays its page faults, a block-sized temporary that the allocator reuses does not; smaller
    arrays (short rows, such as the optimal verifier's sorted path at small vocabularies) in
    one call. Blocks, not rows, so that a batch of many short rows (drafts sampled for a large
    batch) does not pay a call per row. Every way adds left to right, so the sums are the same
    bit for bit (``tests/decoding/test_verifiers_fast_paths.py``). Off the CPU, rows of at
    least ``2 * SCAN_BLOCK`` entries by :func:`blocked_cumsum`."""
    dtype = values.dtype if dtype is None else dtype
    if values.device.type != "cpu" and values.ndim == 2 and values.shape[1] >= 2 * SCAN_BLOCK:
        return blocked_cumsum(values, out, dtype=dtype)
    if values.device.type != "cpu" or values.ndim != 2 or values.numel() * values.element_size() <= SCAN_BYTES:
        return torch.cumsum(values, dim=-1, dtype=dtype, out=out) if out is not None else values.cumsum(dim=-1, dtype=dtype)
    out = torch.empty(values.shape, dtype=dtype, device=values.device) if out is None else out
    block = max(1, SCAN_BYTES // (values.shape[1] * values.element_size()))
    for start in range(0, values.shape[0], block):
        torch.cumsum(values[start : start + block], dim=-1, dtype=dtype, out=out[start : start + block])
    return out


#: :func:`cumsum_rows` scans arrays of at most this many bytes in one call.
SCAN_BYTES = 1 << 22

#: Entries per block of :func:`blocked_cumsum`, about (:func:`scan_block`).
SCAN_BLOCK = 1024


@functools.lru_cache(maxsize=64)
def scan_block(n: int, target: int = SCAN_BLOCK) -> int:
    """The block length of :func:`blocked_cumsum` for rows of ``n`` entries: the divisor of
    ``n`` nearest to ``target`` between ``target / 4`` and ``4 target`` (1,187 at ``V = 151,936``),
    so that a row is whole blocks and the scan reads and writes contiguous views; ``target``
    if ``n`` has none (the last partial block is then scanned apart, through copies)."""
    divisors = [d for i in range(1, math.isqrt(n) + 1) if n % i == 0 for d in (i, n // i)]
    near = [d for d in divisors if target // 4 <= d <= 4 * target]
    return min(near, key=lambda d: (abs(d - target), d)) if near else target


def blocked_cumsum(values: torch.Tensor, out: torch.Tensor | None = None, block: int | None = None,
                   dtype: torch.dtype | None = None) -> torch.Tensor:
    """``values.cumsum(dim=-1)`` of ``[batch, n]`` ``values`` (into ``out`` when given, as in
    :func:`cumsum_rows`) in two levels: each block of ``block`` entries (default
    :func:`scan_block`) of a row is scanned on its own, then the blocks' totals, then each
    block gets the total of the blocks before it. Torch's GPU scan of a long innermost
    dimension runs one row per thread block (64 rows at ``V = 151,936`` in float64: about
    290 us on an H200, a quarter of the optimal verifier's full path; docs/optimal-verifier.md#on-a-gpu),
    whereas ``batch * n / block`` short rows fill the device. The
    same sums up to rounding (sums of other partial sums;
    tests/decoding/test_verifiers_fast_paths.py)."""
    batch, n = values.shape
    block = scan_block(n) if block is None else block
    dtype = values.dtype if dtype is None else dtype
    out = torch.empty(values.shape, dtype=dtype, device=values.device) if out is None else out
    whole = n - n % block
    inner = out[:, :whole].unflatten(1, (whole // block, block))
    torch.cumsum(values[:, :whole].unflatten(1, (whole // block, block)), dim=2, dtype=dtype, out=inner)
    before = inner[:, :, -1].cumsum(dim=1)  # [batch, blocks] the totals up to each block
    inner[:, 1:] += before[:, :-1].unsqueeze(2)
    if whole < n:
        torch.cumsum(values[:, whole:], dim=1, dtype=dtype, out=out[:, whole:])
        out[:, whole:] += before[:, -1:]
    return out


class Scratch:
    """Named work arrays reused by the chunks of one verification. On this kind of CPU VM
    the first touch of a fresh V-sized array costs about a millisecond of page faults, more
    than the arithmetic on it (docs/benchmarks.md), and glibc returns the freed memory of a
    chunk's temporaries to the system before the next chunk asks again; taking the same
    buffer for every chunk touches its pages once per call. ``take`` returns a view of the
    first ``prod(shape)`` entries of the buffer ``name``, enlarged when too small: what it
    held before is garbage, and a caller must not keep a view across chunks."""

    def __init__(self) -> None:
        self._buffers: dict[str, torch.Tensor] = {}

    def take(self, name: str, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        numel = math.prod(shape)
        buffer = self._buffers.get(name)
        if buffer is None or buffer.numel() < numel or buffer.dtype != dtype or buffer.device != device:
            buffer = self._buffers[name] = torch.empty(numel, dtype=dtype, device=device)
        return buffer[:numel].view(shape)


def inverse_cdf(cdf: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Tokens from cumulative weights ``cdf`` ``[batch, vocab]`` (non-decreasing rows with a
    positive last entry) and ``uniforms`` ``[batch, m]`` in ``[0, 1)``: token ``t`` for
    ``u * cdf[-1]`` in ``[cdf[t-1], cdf[t])``. A rounding overshoot (``u * cdf[-1]``
    rounding up to ``cdf[-1]``) goes to the first token at which the CDF reaches its total,
    a token of positive weight (its CDF step is positive). ``O(m log vocab)`` per row."""
    total = cdf[:, -1:]
    idx = torch.searchsorted(cdf, (uniforms * total).contiguous(), right=True)
    last = torch.searchsorted(cdf, total.contiguous(), right=False)
    return torch.where(idx >= cdf.shape[-1], last, idx)


def sample_weighted(weights: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF sampling from unnormalised non-negative rows.

    Args:
        weights: ``[batch, vocab]`` non-negative, every row with positive mass.
        uniforms: ``[batch]`` or ``[batch, m]`` in ``[0, 1)``.

    Returns:
        int64 tokens of the shape of ``uniforms``: token ``t`` of row ``b`` is returned for
        ``uniforms`` in ``[cdf[t-1], cdf[t]) / cdf[-1]``, so it has probability
        ``weights[b, t] / sum(weights[b])`` and a zero-weight token is never returned
        (:func:`inverse_cdf`; one scan pass over the rows).
    """
    squeeze = uniforms.ndim == 1
    u = uniforms.unsqueeze(1) if squeeze else uniforms
    idx = inverse_cdf(cumsum_rows(weights, dtype=SAMPLING_DTYPE), u)
    return idx.squeeze(1) if squeeze else idx


def sample_residual(
    residual: torch.Tensor,  # [batch, vocab]
    fallback: torch.Tensor,  # [batch, vocab], or [n, vocab] with fallback_rows
    uniforms: torch.Tensor,  # [batch]
    fallback_rows: torch.Tensor | None = None,  # [batch] int64
) -> torch.Tensor:
    """``[batch]`` tokens from ``norm(residual)`` (non-negative), rows of zero mass replaced
    by ``fallback`` (row ``fallback_rows[b]`` of it when given), as :func:`with_fallback`
    then :func:`sample_weighted`, without normalising (the inverse CDF scales by the
    total) and reading the fallback only for the rows that are empty."""
    cdf = cumsum_rows(residual, dtype=SAMPLING_DTYPE)
    empty = cdf[:, -1] <= 0
    if bool(empty.any()):
        rows = empty.nonzero().squeeze(1)
        source = rows if fallback_rows is None else fallback_rows[rows]
        cdf.index_copy_(0, rows, cumsum_rows(torch.index_select(fallback, 0, source), dtype=SAMPLING_DTYPE))
    return inverse_cdf(cdf, uniforms.unsqueeze(1)).squeeze(1)


def take_rows(values: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``values[rows]`` (``rows``: sorted distinct row indices, e.g. from ``nonzero``) by
    ``index_select`` (CPU advanced indexing is about 10x slower), or ``values`` itself when
    ``rows`` holds every row: modify the result in place only if ``values`` is your own."""
    return values if rows.numel() == values.shape[0] else torch.index_select(values, 0, rows)


def sample_iid(draft_probs: torch.Tensor, k: int, generator: torch.Generator | None) -> torch.Tensor:
    """``[batch, k]`` i.i.d. draws from the rows of ``draft_probs`` ``[batch, vocab]``
    (one ``torch.rand(batch, k)`` draw)."""
    check_probs_matrix(draft_probs, "draft_probs")
    k = check_k(k)
    u = draw_uniforms(generator, draft_probs.shape[0], k, draft_probs)
    return sample_weighted(draft_probs, u)


#: The clocks of :func:`sample_without_replacement` ring at ``E / q`` times this: with
#: ``E <= 40`` and ``q >= 5e-324`` the ring stays below 1e306, and with ``E >= 1e-17`` above
#: float32's smallest normal (so every ring keeps its precision).
RING_SCALE = 2.0**-64


def sample_without_replacement(draft_probs: torch.Tensor, k: int, generator: torch.Generator | None) -> torch.Tensor:
    """``[batch, k]`` distinct drafts, each drawn from ``q`` (``draft_probs`` ``[batch, vocab]``)
    renormalised over the tokens not yet drawn (the law of
    :func:`otm.draft_laws.without_replacement_law`), completed by the lowest-index ``q = 0``
    tokens when a row has fewer than ``k`` positive entries.

    Exponential clocks: token ``x`` rings at ``E_x / q(x)`` with ``E_x`` i.i.d. Exp(1);
    the order of the rings is exactly successive sampling without replacement (the first
    ring is ``x`` with probability ``q(x) / sum q`` and, by memorylessness, the remaining
    clocks restart). ``E_x`` comes from a float64 uniform (:data:`SAMPLING_DTYPE`: from a float32
    one, every ``E`` below ``6e-8`` was 0, and every token of ``q`` below that rang first with
    probability ``6e-8``). The rings are computed as ``(E_x 2^-64) / q(x)``, the same order and ties
    (scaling by a power of 2 is exact), so that a denormal ``q`` (down to ``5e-324`` in float64)
    does not overflow to a tie with the other tiny ones (float16 and bfloat16 rows are ringed in
    float32, whose range holds them); they are capped at the largest finite float so that a positive
    ``q`` never ties with the ``q = 0`` tokens, which never ring and come after every positive
    one, in index order. ``k > vocab`` raises :class:`InvalidDraftCountError`.
    """
    check_probs_matrix(draft_probs, "draft_probs")
    k = check_k(k)
    batch, vocab = draft_probs.shape
    if k > vocab:
        raise InvalidDraftCountError(f"k={k} drafts without replacement from a vocabulary of {vocab} tokens")
    positive = draft_probs > 0
    u = torch.rand(draft_probs.shape, generator=generator, dtype=SAMPLING_DTYPE, device=draft_probs.device)
    ringing = torch.float32 if draft_probs.dtype in (torch.float16, torch.bfloat16) else draft_probs.dtype
    exponential = -torch.log1p(-u).to(ringing) * RING_SCALE  # Exp(1) 2^-64, finite since u < 1
    largest = torch.finfo(ringing).max
    ring = torch.where(positive, (exponential / torch.where(positive, draft_probs.to(ringing), 1.0)).clamp(max=largest),
                       torch.inf)
    drawn = torch.topk(ring, k, dim=-1, largest=False, sorted=True).indices  # [batch, k]; first m are the draws
    index = torch.arange(vocab, device=draft_probs.device)
    zero_first = torch.topk(positive.long() * vocab + index, k, dim=-1, largest=False, sorted=True).indices  # [batch, k]
    m = positive.sum(dim=-1, keepdim=True)  # [batch, 1]
    slot = torch.arange(k, device=draft_probs.device).unsqueeze(0)  # [1, k]
    tail = zero_first.gather(1, (slot - m).clamp(min=0).expand(batch, k))
    return torch.where(slot < m, drawn, tail)


def first_draft_probs(draft_probs: torch.Tensor) -> torch.Tensor:
    """``draft_probs[:, 0, :]`` (``[batch, vocab]``): the shared ``q`` of the rules whose
    drafts all come from one distribution (the other rows are expected to equal it and
    are not read)."""
    return draft_probs[:, 0, :]


#: Bytes of one ``[rows, vocab]`` temporary of a CPU chunk (:func:`map_row_chunks`).
CPU_CHUNK_BYTES = 4 << 20


def chunk_rows(batch: int, vocab: int, like: torch.Tensor, chunk_bytes: int | None = None) -> int:
    """Rows per chunk: all of them off the CPU (the CUDA caching allocator reuses memory),
    else as many as keep a ``[rows, vocab]`` tensor of ``like``'s dtype within
    ``chunk_bytes`` (default :data:`CPU_CHUNK_BYTES`; at least one row)."""
    if like.device.type != "cpu":
        return max(batch, 1)
    limit = CPU_CHUNK_BYTES if chunk_bytes is None else chunk_bytes
    return max(1, min(batch, limit // max(1, vocab * like.element_size())))


def map_row_chunks(
    verify_rows: Callable[..., VerifierOutput | torch.Tensor],
    *tensors: torch.Tensor,
    rows: torch.Tensor | None = None,
    chunk_bytes: int | None = None,
) -> VerifierOutput | torch.Tensor:
    """``verify_rows(*tensors)`` computed on aligned chunks of rows (:func:`chunk_rows`; the
    first tensor is ``[batch, vocab]``, every tensor has the batch as its first axis) and
    concatenated (a :class:`VerifierOutput` field by field, a tensor along its first axis;
    ``chunk_bytes`` as in :func:`chunk_rows`).
    With ``rows`` (sorted distinct indices), on those rows only: a chunk of consecutive rows
    is a view of the inputs, any other is gathered into the same :class:`Scratch` buffers
    (no ``[len(rows), vocab]`` copy), so ``verify_rows`` must not return views of its inputs.
    Exact for any chunking since rows never share randomness: the uniforms are drawn for the
    whole batch before the call and sliced with the rows."""
    batch, vocab = (tensors[0].shape[0] if rows is None else rows.numel()), tensors[0].shape[-1]
    size = chunk_rows(batch, vocab, tensors[0], chunk_bytes)
    if rows is None and size >= batch:
        return verify_rows(*tensors)
    scratch = Scratch()

    def chunk(start: int) -> list[torch.Tensor]:
        if rows is None:
            return [t[start : start + size] for t in tensors]
        index = rows[start : start + size]
        first = int(index[0]) if index.numel() else 0
        if index.numel() and int(index[-1]) - first + 1 == index.numel():  # consecutive rows: a view
            return [t[first : first + index.numel()] for t in tensors]
        return [torch.index_select(t, 0, index, out=scratch.take(f"input {i}", (index.numel(), *t.shape[1:]), t.dtype, t.device))
                for i, t in enumerate(tensors)]

    parts = [verify_rows(*chunk(start)) for start in range(0, max(batch, 1), size)]  # no rows: one empty chunk
    if isinstance(parts[0], torch.Tensor):
        return torch.cat(parts)
    return VerifierOutput(torch.cat([o.tokens for o in parts]), torch.cat([o.accepted_index for o in parts]))


@functools.cache
def _row_threads(process: int) -> concurrent.futures.ThreadPoolExecutor:
    """The threads that run shares of rows beside the calling one, one pool per process (made
    at first use): a child forked after its parent made its pool inherits the pool without
    its threads, and work handed to it would never run."""
    return concurrent.futures.ThreadPoolExecutor(max_workers=max(1, (os.cpu_count() or 1) - 1), thread_name_prefix=_POOL_PREFIX)


#: The names of the threads of :func:`_row_threads` start with this.
_POOL_PREFIX = "verifier-rows"


def row_parts(rows: int) -> int:
    """How many parts :func:`share_rows` cuts ``rows`` into: ``min(torch.get_num_threads(),
    rows, CPUs)``, at least 1."""
    return max(1, min(torch.get_num_threads(), rows, os.cpu_count() or 1))


def sharing_threads(rows: int) -> int:
    """How many threads :func:`share_rows` runs ``rows`` on: :func:`row_parts`, or 1 when called
    from one of its pool's own threads (a share within a share runs in the calling thread)."""
    return 1 if threading.current_thread().name.startswith(_POOL_PREFIX) else row_parts(rows)


def share_rows(run: Callable[[int, int], None], rows: int) -> None:
    """``run(part, parts)`` for every ``part < parts``, ``parts =`` :func:`row_parts`: part 0
    in the calling thread, the others on a pool of threads. For compiled per-row code that
    releases the GIL (the optimal verifiers' passes on the CPU), where part ``i`` takes the
    rows ``i, i + parts, ...``: rows never share randomness, so a row's draw does not depend
    on ``parts``. An exception of any part is raised here. Called from one of the pool's own
    threads (a share within a share, as the clock masses' chunks of nodes within rows), every
    part runs in the calling thread: a pool thread never waits on the pool."""
    parts = row_parts(rows)
    if sharing_threads(rows) == 1:
        for part in range(parts):
            run(part, parts)
        return
    others = [_row_threads(os.getpid()).submit(run, part, parts) for part in range(1, parts)]
    try:
        run(0, parts)
    finally:
        for other in others:
            other.result()
