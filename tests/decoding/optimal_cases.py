"""Row families for the optimal verifier's tests (tests/decoding/test_verifier_optimal_lazy.py,
tests/decoding/test_verifier_optimal_buckets.py): exact ratio ties, one-hot rows, ``p = q``,
disjoint supports, ``q`` with zeros and peaked Dirichlet rows; LLM-like softmax rows at any
vocabulary (:func:`softmax_rows`); and the compiled cut of one row (:func:`compiled_cut`) for
the tests of the merged rows."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch
from hypothesis import strategies as st

from decoding.verifiers.optimal import iid as optimal, unsorted as optimal_buckets, unsorted_rows as optimal_merged

FAMILIES = ("ties", "one_hot", "p_equals_q", "disjoint", "q_zeros", "dirichlet")


def family(name: str, rows: int, vocab: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``(p, q)`` ``[rows, vocab]``, unnormalised where the family is integer (exact ratio ties)."""
    q = rng.integers(1, 5, size=(rows, vocab)).astype(float)
    if name == "ties":  # p = m q with m in {0, 1, 2}: every ratio is one of three, exactly
        return q * rng.integers(0, 3, size=(rows, vocab)), q
    if name == "one_hot":
        p = np.eye(vocab)[rng.integers(vocab, size=rows)]
        return p, np.where(rng.random((rows, 1)) < 0.5, np.eye(vocab)[rng.integers(vocab, size=rows)], q)
    if name == "p_equals_q":
        return q.copy(), q
    if name == "disjoint":
        cut = vocab // 2
        return np.concatenate([q[:, :cut], 0 * q[:, cut:]], 1), np.concatenate([0 * q[:, :cut], q[:, cut:]], 1)
    if name == "q_zeros":
        return rng.dirichlet(np.ones(vocab), size=rows), np.where(rng.random((rows, vocab)) < 0.4, 0.0, q)
    peaked = rng.dirichlet(np.full(vocab, 0.3), size=rows)
    return peaked, 0.7 * peaked + 0.3 * rng.dirichlet(np.ones(vocab), size=rows)


def case(name: str, rows: int, vocab: int, k: int, seed: int, dtype):
    """``(p, q, drafts, uniforms)``: half the rows draft one token ``k`` times."""
    rng = np.random.default_rng(seed)
    p, q = family(name, rows, vocab, rng)
    q[:, 0] += (q.sum(1) == 0)  # a row needs some q
    p, q = torch.as_tensor(p, dtype=dtype), torch.as_tensor(q, dtype=dtype)
    g = torch.Generator().manual_seed(seed)
    drafts = optimal.sample_drafts(q / q.sum(1, keepdim=True), k, g)
    repeat = torch.rand(rows, generator=g) < 0.5
    drafts = torch.where(repeat.unsqueeze(1), drafts[:, :1].expand(-1, k), drafts)
    return p, q, drafts, torch.rand(rows, optimal.uniforms_per_row(k), generator=g, dtype=dtype)


def case_parameters(max_vocab: int) -> dict:
    """hypothesis strategies for the arguments ``name, vocab, k, seed, dtype`` of :func:`case`."""
    return {
        "name": st.sampled_from(FAMILIES),
        "vocab": st.integers(2, max_vocab),
        "k": st.integers(1, 6),
        "seed": st.integers(0, 2**31 - 1),
        "dtype": st.sampled_from([torch.float64, torch.float32, torch.bfloat16, torch.float16]),
    }


def softmax_rows(rows: int, vocab: int, seed: int, dtype, device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """``(p, q)`` ``[rows, vocab]``: softmaxes of target logits ``N(0, 2.5^2)`` and of draft
    logits = target + ``N(0, 1.5^2)`` (seeded, float64, then ``dtype`` on ``device``)."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, vocab, generator=g, dtype=torch.float64) * 2.5
    q_logits = logits + torch.randn(rows, vocab, generator=g, dtype=torch.float64) * 1.5
    return torch.softmax(logits, -1).to(device, dtype), torch.softmax(q_logits, -1).to(device, dtype)


def row_numpy(values: torch.Tensor) -> np.ndarray:
    """One row as the compiled passes read it (half precision widened to float32, exactly)."""
    return (values if values.dtype in (torch.float32, torch.float64) else values.float()).numpy()


def compiled_cut(p: torch.Tensor, q: torch.Tensor, k: int, buckets: int = optimal_buckets.BUCKETS, margin: float | None = None):
    """:func:`decoding.verifiers.optimal.unsorted_rows.cut` of one row ``p``, ``q`` ``[V]``: the
    bucket ids and, per bucket, the sums of ``p`` and ``q``, the sizes, the lower and upper keys, the
    signs and whether it holds a token (``torch`` tensors), with the row's NumPy views."""
    vocab = p.shape[0]
    p_np, q_np = row_numpy(p), row_numpy(q)
    keys, ids = np.empty(vocab, np.int64), np.empty(vocab, np.int32)
    margin = optimal_buckets.sign_margin(vocab, k) if margin is None else margin
    target, draft, sizes, lower, upper, sign = optimal_merged.cut(p_np, q_np, k, buckets, margin, keys, ids)
    as_torch = [torch.from_numpy(a) for a in (ids, target, draft, sizes, lower, upper, sign)]
    return SimpleNamespace(**dict(zip(("ids", "target", "draft", "sizes", "lower", "upper", "sign"), as_torch)),
                           present=torch.from_numpy(sizes > 0), p=p_np, q=q_np)
