"""Batched, seeded verifiers (samplers) for every selection rule, and their registry.

Each rule of :mod:`otm.rules` that has a sampler here is a module with the same name
(``single``, ``rrs``, ``rrs_wor``, ``specinfer``, ``kseq``, ``spechub``, ``is_truncated``,
``greedy``), exposing::

    draft_scheme                                   # "iid" | "without_replacement" | "hub" | "greedy" | "independent"
    sample_drafts(draft_probs, k, generator)       # [batch, vocab] ([batch, k, vocab] for specinfer) -> [batch, k] int64
    verify(target_probs, draft_probs, draft_tokens, generator) -> VerifierOutput
                                                   # [batch, vocab], [batch, k, vocab], [batch, k]
    uniforms_per_row(k)                            # the randomness contract (decoding.verifiers.base)

Tensors stay on their device and dtype (float32 or float64, CPU or CUDA; pass a
``torch.Generator`` on the same device, or ``None`` for the global one). The tests hold
every sampler to its exact law in :mod:`otm.rules` (chi-square and z-tests) and to the
plain-Python references of :mod:`decoding.verifiers.reference`.

>>> import torch
>>> v = get_verifier("rrs")
>>> g = torch.Generator().manual_seed(0)
>>> p = torch.tensor([[0.5, 0.5]], dtype=torch.float64); q = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
>>> x = v.sample_drafts(q, 2, g); out = v.verify(p, q.unsqueeze(1).expand(1, 2, 2), x, g)
>>> x.tolist(), out.tokens.shape, out.accepted_index.dtype
([[0, 0]], torch.Size([1]), torch.int64)
"""
from __future__ import annotations

from types import ModuleType

from otm.errors import UnknownNameError

from . import greedy, is_truncated, kseq, rrs, rrs_wor, single, spechub, specinfer
from .base import DRAFT_SCHEMES, VerifierOutput

#: Rule name (as in :data:`otm.rules.RULES`) -> its verifier module.
VERIFIERS: dict[str, ModuleType] = {
    "single": single,
    "rrs": rrs,
    "rrs_wor": rrs_wor,
    "specinfer": specinfer,
    "kseq": kseq,
    "spechub": spechub,
    "is_truncated": is_truncated,
    "greedy": greedy,
}


def get_verifier(name: str) -> ModuleType:
    """The verifier module of rule ``name``; :class:`otm.errors.UnknownNameError` for a
    name without one."""
    try:
        return VERIFIERS[name]
    except (KeyError, TypeError):
        raise UnknownNameError(
            f"no verifier for rule {name!r}; choose one of {', '.join(VERIFIERS)}"
        ) from None


__all__ = ["DRAFT_SCHEMES", "VERIFIERS", "VerifierOutput", "get_verifier"]
