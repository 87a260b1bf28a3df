"""Batched, seeded verifiers (samplers) for every rule of :mod:`otm.rules` that has one.

Which rules have a verifier, and in which module, is read from the rule registry
(:data:`otm.rules.registry.RULE_SPECS`, field ``verifier``); each module follows the
contract of :mod:`decoding.verifiers.protocol`::

    draft_scheme                                   # the joint draft law (registry)
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

import importlib
from types import ModuleType

from otm.errors import UnknownNameError
from otm.rules.registry import rule_spec, rule_specs

from .base import DRAFT_SCHEMES, VerifierOutput
from .protocol import Verifier, VerifyFunction, as_verifier_output

#: Rule name -> its verifier module (from the registry).
VERIFIERS: dict[str, ModuleType] = {
    spec.name: importlib.import_module(f"{__name__}.{spec.verifier}") for spec in rule_specs(verifier=True)
}


def get_verifier(name: str) -> ModuleType:
    """The verifier module of rule ``name`` (old names resolved);
    :class:`otm.errors.UnknownNameError` for a name without one."""
    try:
        spec = rule_spec(name)
    except UnknownNameError:
        spec = None
    if spec is None or spec.name not in VERIFIERS:
        raise UnknownNameError(f"no verifier for rule {name!r}; choose one of {', '.join(VERIFIERS)}")
    return VERIFIERS[spec.name]


__all__ = ["DRAFT_SCHEMES", "VERIFIERS", "Verifier", "VerifierOutput", "VerifyFunction", "as_verifier_output", "get_verifier"]
