"""The verifier contract: what a verifier is, and the one output it returns.

A *verify function* takes one verification per row and returns the output token::

    verify(target_probs,   # [batch, vocab] p at the node
           draft_probs,    # [batch, k, vocab] q of each draft (rows equal for one-q rules)
           draft_tokens,   # [batch, k] int64 drafts
           generator)      # torch.Generator or None
        -> VerifierOutput | torch.Tensor

It may return a :class:`~decoding.verifiers.base.VerifierOutput` or just the ``[batch]``
int64 tokens; :func:`as_verifier_output` turns either into a ``VerifierOutput``. When only
tokens are returned, ``accepted_index`` is the first draft equal to the output (``-1``
if none): the decoding loop then descends into that draft's subtree, which is lossless
because the subtree was drafted from ``q(. | prefix, x_i)`` independently of the
verification at this node.

A full :class:`Verifier` (what ``otm decode --rule NAME`` uses, one module per rule in
:mod:`decoding.verifiers`) also draws the drafts (``sample_drafts``) from its joint
draft law (``draft_scheme``) and states its randomness (``uniforms_per_row``). A module
whose first call compiles code may say so with the optional ``compile_seconds(device) ->
float`` (about how long, 0 once compiled; ``otm decode`` announces it before it starts), and
one whose cost or refusals depend on the set-up with the optional ``caveat(widest, top_p) ->
str | None`` (``widest`` the most drafts at a node of the tree; ``otm decode`` prints the
line before it starts).
"""
from __future__ import annotations

from typing import Callable, Protocol, Union, runtime_checkable

import torch

from otm.errors import ShapeMismatchError

from .base import VerifierOutput

#: ``verify(target_probs, draft_probs, draft_tokens, generator) -> VerifierOutput | tokens``.
VerifyFunction = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, Union[torch.Generator, None]], object]


@runtime_checkable
class Verifier(Protocol):
    """A rule's batched sampler (see the module docstring)."""

    draft_scheme: str

    def sample_drafts(self, draft_probs: torch.Tensor, k: int, generator: torch.Generator | None) -> torch.Tensor:
        """``[batch, k]`` int64 drafts from the rows of ``draft_probs`` (``[batch, vocab]``)."""

    def verify(self, target_probs: torch.Tensor, draft_probs: torch.Tensor, draft_tokens: torch.Tensor,
               generator: torch.Generator | None) -> VerifierOutput:
        """The output of each row (module docstring)."""

    def uniforms_per_row(self, k: int) -> int:
        """How many uniforms ``verify`` draws per row."""


def as_verifier_output(result, draft_tokens: torch.Tensor) -> VerifierOutput:  # draft_tokens: [batch, k]
    """A verify function's return value as a :class:`VerifierOutput` (module docstring).

    Raises :class:`otm.errors.ShapeMismatchError` when it holds no ``[batch]`` tokens.
    """
    rows = draft_tokens.shape[0]
    tokens = result if isinstance(result, torch.Tensor) else getattr(result, "tokens", None)
    if not isinstance(tokens, torch.Tensor) or tokens.shape != (rows,):
        got = tuple(tokens.shape) if isinstance(tokens, torch.Tensor) else type(result).__name__
        raise ShapeMismatchError(
            f"a verifier must return a VerifierOutput or a tensor of tokens of shape [batch={rows}], got {got}"
        )
    if tokens.is_floating_point() or tokens.is_complex() or tokens.dtype == torch.bool:
        raise ShapeMismatchError(f"a verifier must return integer token ids, got dtype {tokens.dtype}")
    tokens = tokens.long()
    index = getattr(result, "accepted_index", None)
    if isinstance(index, torch.Tensor) and index.shape == (rows,):
        return VerifierOutput(tokens, index.long())
    equal = draft_tokens == tokens.unsqueeze(1)  # [batch, k]
    first = equal.to(torch.int8).argmax(dim=1)
    return VerifierOutput(tokens, torch.where(equal.any(dim=1), first, torch.full_like(first, -1)))


__all__ = ["Verifier", "VerifyFunction", "as_verifier_output"]
