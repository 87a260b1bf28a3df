"""Block verification of a batch of draft chains, batched and seeded.

Block verification (Sun, Mendlovic, Leviathan, Aharoni, Ro, Beirami, Suresh, "Block
Verification Accelerates Speculative Decoding", ICLR 2025, arXiv:2403.10444), as written in
docs/sequences.md, section 2 (exact law: :func:`otm.sequences.block_verification_law`).
For a chain ``x = (x_1..x_g)`` drafted from ``q`` with ``p_i = p(. | x_<i)``,
``q_i = q(. | x_<i)`` (``i = 1..g + 1``):

- weights ``w_0 = 1``, ``w_i = min(1, w_{i-1} p_i(x_i) / q_i(x_i))``;
- stop probabilities ``h_g = w_g`` and, for ``0 < i < g``,
  ``h_i = sum_y (w_i p_{i+1}(y) - q_{i+1}(y))^+ / sum_y (q_{i+1}(y) - w_i p_{i+1}(y))^+``
  (0 when either sum is 0), and ``h_0 = 1``;
- ``tau = max{i : eta_i < h_i}`` (the scan ``i = g, .., 0`` that stops at the first success);
- the emitted token: ``y ~ norm((w_tau p_{tau+1} - q_{tau+1})^+)`` if ``tau < g``, the
  bonus ``y ~ p_{g+1}`` if ``tau = g``.

``h_0 = 1`` is exact, not a convention: with ``w_0 = 1`` the two sums are equal, so the
paper's ``h_0`` is 1 unless ``p_1 = q_1``; and for every drafted chain
``prod_{i=0..g} (1 - h_i) = 0`` (docs/sequences.md, Lemma 2 at ``i = 0``), so whenever the
scan reaches 0 with positive probability ``h_0`` is 1. Setting it makes the scan stop in
floating point too. A residual of zero mass (reached with probability 0) falls back to
``p_{tau+1}``; ``h_i`` is clamped to ``[0, 1]`` against rounding.

Randomness contract (:func:`uniforms_per_row`, as :mod:`decoding.verifiers.base`):
:func:`verify` draws exactly one ``torch.rand(batch, g + 2, generator=generator,
dtype=torch.float64, device=target_probs.device)`` (:data:`decoding.verifiers.base.SAMPLING_DTYPE`); column ``i`` (``0 <= i <= g``) is
the coin ``eta_i``, column ``g + 1`` drives the emitted token (inverse CDF,
:func:`decoding.verifiers.base.sample_residual`). Rows never share randomness.
:func:`decoding.verifiers.reference_sequences.block` reproduces it row by row.

Cost: ``O(batch g V)``, a few passes over ``[batch, g, vocab]`` (the stop probabilities)
and one over ``[batch, vocab]`` (the emitted token); no loop over the vocabulary or the
batch, a loop over the ``g`` positions for the running minimum ``w``.

Expected accepted lengths given the drafted chain, for measuring the gain over token-wise
verification without the verifiers' coin noise (docs/sequences.md, section 9):
:func:`expected_accepted` (block verification, ``sum_i w_i``) and
:func:`tokenwise_expected_accepted` (token-wise verification, Leviathan, Kalman, Matias,
ICML 2023, arXiv:2211.17192). Both cost ``O(batch g)`` after one gather per position.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from otm.errors import InvalidDistributionError, InvalidDraftCountError, ShapeMismatchError

from .base import draw_uniforms, sample_iid, sample_residual

__all__ = [
    "BlockOutput", "block_weights", "capped_ratio", "draft_scheme", "expected_accepted", "residual_weights",
    "sample_drafts", "stop_probabilities", "tokenwise_expected_accepted", "uniforms_per_row", "verify",
    "verify_with_uniforms",
]

#: How the drafts of a chain are drawn: one token per node from ``q`` there.
draft_scheme = "iid"


@dataclass(frozen=True)
class BlockOutput:
    """What block verification returns for a batch of chains.

    Attributes:
        n_accepted: ``[batch]`` int64, ``tau``: the drafts ``x_1..x_tau`` are accepted.
        tokens: ``[batch]`` int64, the emitted token (residual after a stop, or the bonus).
    """

    n_accepted: torch.Tensor
    tokens: torch.Tensor


def uniforms_per_row(g: int) -> int:
    """``g + 1`` coins ``eta_0..eta_g`` and one uniform for the emitted token."""
    if isinstance(g, bool) or not isinstance(g, int) or g < 1:
        raise InvalidDraftCountError(f"a draft chain needs g >= 1 tokens, got g={g!r}")
    return g + 2


def sample_drafts(draft_probs: torch.Tensor, k: int, generator: torch.Generator | None) -> torch.Tensor:
    """``[batch, k]`` drafts from ``draft_probs`` ``[batch, vocab]`` (a chain node has ``k = 1``)."""
    return sample_iid(draft_probs, k, generator)


def check_block_inputs(
    target_probs: torch.Tensor,  # [batch, g + 1, vocab]
    draft_probs: torch.Tensor,  # [batch, g, vocab]
    draft_tokens: torch.Tensor,  # [batch, g]
) -> tuple[int, int, int]:
    """Shape, dtype and device checks; returns ``(batch, g, vocab)``."""
    for name, tensor in (("target_probs", target_probs), ("draft_probs", draft_probs)):
        if not isinstance(tensor, torch.Tensor) or not tensor.is_floating_point() or tensor.ndim != 3:
            raise ShapeMismatchError(f"{name} must be a floating tensor [batch, positions, vocab], got "
                                     f"{tuple(tensor.shape) if isinstance(tensor, torch.Tensor) else type(tensor).__name__}")
    batch, positions, vocab = target_probs.shape
    g = positions - 1
    if g < 1:
        raise InvalidDraftCountError(f"target_probs must hold p at g + 1 >= 2 chain prefixes, got {positions}")
    if draft_probs.shape != (batch, g, vocab):
        raise ShapeMismatchError(f"draft_probs has shape {tuple(draft_probs.shape)}, expected "
                                 f"[batch={batch}, g={g}, vocab={vocab}] (q at the g drafted positions)")
    if draft_probs.dtype != target_probs.dtype or draft_probs.device != target_probs.device:
        raise InvalidDistributionError(f"draft_probs ({draft_probs.dtype}, {draft_probs.device}) and target_probs "
                                       f"({target_probs.dtype}, {target_probs.device}) must share dtype and device")
    if not isinstance(draft_tokens, torch.Tensor) or draft_tokens.shape != (batch, g) or draft_tokens.dtype != torch.int64:
        raise ShapeMismatchError(f"draft_tokens must be int64 of shape [batch={batch}, g={g}], got "
                                 f"{tuple(draft_tokens.shape) if isinstance(draft_tokens, torch.Tensor) else type(draft_tokens).__name__}")
    return batch, g, vocab


def capped_ratio(numerator: torch.Tensor, denominator: torch.Tensor) -> torch.Tensor:  # both [batch] or [batch, g]
    """Elementwise ``min(1, numerator / denominator)`` without a division by zero (``numerator >=
    denominator`` gives 1, so ``denominator = 0`` does too)."""
    ratio = numerator / torch.where(denominator > 0, denominator, torch.ones_like(denominator))
    return torch.where(numerator >= denominator, torch.ones_like(ratio), ratio)


def _drafted_probabilities(
    target_probs: torch.Tensor,  # [batch, g + 1, vocab]
    draft_probs: torch.Tensor,  # [batch, g, vocab]
    draft_tokens: torch.Tensor,  # [batch, g]
) -> tuple[torch.Tensor, torch.Tensor]:  # [batch, g] each
    """``(p_i(x_i), q_i(x_i))`` for ``i = 1..g``."""
    index = draft_tokens.unsqueeze(2)
    return target_probs[:, : draft_tokens.shape[1]].gather(2, index).squeeze(2), draft_probs.gather(2, index).squeeze(2)


def block_weights(
    target_probs: torch.Tensor,  # [batch, g + 1, vocab]
    draft_probs: torch.Tensor,  # [batch, g, vocab]
    draft_tokens: torch.Tensor,  # [batch, g]
) -> torch.Tensor:  # [batch, g + 1]
    """``w_0..w_g``: ``w_i = min(1, w_{i-1} p_i(x_i) / q_i(x_i))`` (:func:`capped_ratio`)."""
    p_x, q_x = _drafted_probabilities(target_probs, draft_probs, draft_tokens)
    weights = [torch.ones_like(p_x[:, 0])]
    for i in range(draft_tokens.shape[1]):
        weights.append(capped_ratio(weights[-1] * p_x[:, i], q_x[:, i]))
    return torch.stack(weights, dim=1)


def expected_accepted(
    target_probs: torch.Tensor,  # [batch, g + 1, vocab] (row g, the bonus law, is not read)
    draft_probs: torch.Tensor,  # [batch, g, vocab]
    draft_tokens: torch.Tensor,  # [batch, g]
) -> torch.Tensor:  # [batch]
    """``sum_{i=1..g} w_i`` per chain: block verification's ``E[tau]`` with its coins and
    the draft's later tokens integrated out. By docs/sequences.md, Lemma 2,
    ``w(X_<=i) = E[P(tau >= i | X) | X_<=i]``, so the mean of this over chains drafted from
    ``q`` is block verification's exact ``E[tau]`` (unbiased, no coin noise), and per chain
    it is at least :func:`tokenwise_expected_accepted` (``w_i >= prod_{j<=i} min(1, r_j)``)."""
    check_block_inputs(target_probs, draft_probs, draft_tokens)
    return block_weights(target_probs, draft_probs, draft_tokens)[:, 1:].sum(dim=1)


def tokenwise_expected_accepted(
    target_probs: torch.Tensor,  # [batch, g + 1, vocab] (row g is not read)
    draft_probs: torch.Tensor,  # [batch, g, vocab]
    draft_tokens: torch.Tensor,  # [batch, g]
) -> torch.Tensor:  # [batch]
    """``E[tau | x] = sum_{i=1..g} prod_{j<=i} min(1, p_j(x_j) / q_j(x_j))``: token-wise
    verification (Leviathan, Kalman, Matias, ICML 2023, arXiv:2211.17192, Alg. 1) accepts
    ``x_i`` with ``min(1, r_i)`` given that it reached ``i``, so this is exact given the
    chain (the same conditioning as :func:`expected_accepted`: ``P(tau >= i | X)``
    depends on ``X_<=i`` only)."""
    check_block_inputs(target_probs, draft_probs, draft_tokens)
    p_x, q_x = _drafted_probabilities(target_probs, draft_probs, draft_tokens)
    return capped_ratio(p_x, q_x).cumprod(dim=1).sum(dim=1)


def stop_probabilities(
    target_probs: torch.Tensor,  # [batch, g + 1, vocab]
    draft_probs: torch.Tensor,  # [batch, g, vocab]
    weights: torch.Tensor,  # [batch, g + 1]
) -> torch.Tensor:  # [batch, g + 1]
    """``h_0..h_g`` (module docstring): ``h_0 = 1``, ``h_g = w_g``, in between the ratio of
    the positive and negative parts of ``w_i p_{i+1} - q_{i+1}``, clamped to ``[0, 1]``."""
    g = draft_probs.shape[1]
    diff = weights[:, 1:g, None] * target_probs[:, 1:g] - draft_probs[:, 1:g]  # [batch, g - 1, vocab]
    excess = diff.clamp(min=0).sum(dim=-1)
    deficit = (-diff).clamp(min=0).sum(dim=-1)
    ratio = excess / torch.where(deficit > 0, deficit, torch.ones_like(deficit))
    middle = torch.where((excess > 0) & (deficit > 0), ratio.clamp(max=1.0), torch.zeros_like(ratio))
    return torch.cat([torch.ones_like(weights[:, :1]), middle, weights[:, g:]], dim=1)


def residual_weights(
    weight: torch.Tensor,  # [batch]
    target: torch.Tensor,  # [batch, vocab]
    draft: torch.Tensor,  # [batch, vocab]
) -> torch.Tensor:  # [batch, vocab]
    """``(w p - q)^+``: the unnormalised law of the token emitted after a stop."""
    return (weight.unsqueeze(1) * target - draft).clamp(min=0.0)


def verify_with_uniforms(
    target_probs: torch.Tensor,  # [batch, g + 1, vocab]
    draft_probs: torch.Tensor,  # [batch, g, vocab]
    draft_tokens: torch.Tensor,  # [batch, g]
    uniforms: torch.Tensor,  # [batch, g + 2]
) -> BlockOutput:
    """Block verification on pre-drawn uniforms (module docstring)."""
    batch, g, _ = check_block_inputs(target_probs, draft_probs, draft_tokens)
    weights = block_weights(target_probs, draft_probs, draft_tokens)
    stops = stop_probabilities(target_probs, draft_probs, weights)
    success = uniforms[:, : g + 1] < stops  # [batch, g + 1]; column 0 always (h_0 = 1 > u)
    positions = torch.arange(g + 1, device=target_probs.device)
    tau = torch.where(success, positions, torch.zeros_like(positions)).amax(dim=1)  # [batch]
    rows = torch.arange(batch, device=target_probs.device)
    target_at = target_probs[rows, tau]  # [batch, vocab]: p_{tau+1}
    draft_at = draft_probs[rows, tau.clamp(max=g - 1)]  # q_{tau+1} (unused where tau = g)
    stopped = residual_weights(weights[rows, tau], target_at, draft_at)
    emit = torch.where((tau < g).unsqueeze(1), stopped, target_at)
    tokens = sample_residual(emit, target_at, uniforms[:, g + 1])
    return BlockOutput(n_accepted=tau, tokens=tokens)


def verify(
    target_probs: torch.Tensor,  # [batch, g + 1, vocab]: p at every chain prefix, the last for the bonus
    draft_probs: torch.Tensor,  # [batch, g, vocab]: q at the drafted positions
    draft_tokens: torch.Tensor,  # [batch, g]
    generator: torch.Generator | None,
) -> BlockOutput:
    """Block verification of every row's chain: one ``torch.rand(batch, g + 2)`` draw
    (module docstring), then :func:`verify_with_uniforms`."""
    batch, g, _ = check_block_inputs(target_probs, draft_probs, draft_tokens)
    uniforms = draw_uniforms(generator, batch, uniforms_per_row(g), target_probs)
    return verify_with_uniforms(target_probs, draft_probs, draft_tokens, uniforms)
