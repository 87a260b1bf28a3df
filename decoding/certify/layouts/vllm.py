"""vLLM's rejection-sampler layout (vLLM v1, ``vllm/v1/sample/rejection_sampler.py`` and
``vllm/v1/spec_decode/metadata.py``), an adapter from it to the toolkit's contracts, and a
plain PyTorch implementation of the algorithm vLLM publishes for it.

The layout, for a batch of requests, request ``i`` with ``n_i`` drafts (ragged)::

    metadata.draft_token_ids      [num_tokens]        the drafts of every request, flattened
    metadata.num_draft_tokens     list[int]           n_i
    metadata.cu_num_draft_tokens  [batch]             inclusive cumulative sums of n_i
    metadata.cu_num_sampled_tokens [batch]            inclusive cumulative sums of n_i + 1
    metadata.target_logits_indices [num_tokens]       the row of ``logits`` at each draft
    metadata.bonus_logits_indices  [batch]            the row of ``logits`` of each bonus position
    draft_probs                   [num_tokens, V]     q at each draft, or None: one-hot drafts (n-gram)
    logits                        [num_tokens + batch, V]  per request: its n_i target rows, then its bonus row
    temperature                   [batch]             0 means greedy
    -> output_token_ids           [batch, max_spec_len + 1] int32: accepted drafts, then the
                                  recovered token (after a rejection) or the bonus token, then -1

A sampler in this layout is ``sampler(metadata, draft_probs, logits, temperature, generator)``
(vLLM's ``RejectionSampler.forward`` takes a ``SamplingMetadata`` holding the temperature and
per-request generators; a two-line shim builds it from these arguments).

:func:`vllm_verifier` presents such a sampler as a one-draft verifier (``k = 1``) of the
toolkit's contract; its bonus rows hold a sentinel law (all mass on the least likely token of
``p``), so a sampler that reads the bonus row where it should read the target row (a wrong
logits slice) outputs the sentinel and fails. :func:`vllm_chain_verifier` presents it as a
chain verifier (:mod:`decoding.certify.chains`). :func:`rejection_sampler` is the published
algorithm (Leviathan et al. 2023, Alg. 1, token by token along each request's chain, as vLLM
documents it), written here from that contract.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from otm.errors import NotApplicableError, ShapeMismatchError

from decoding.verifiers.base import VerifierOutput

#: The padding of ``output_token_ids``.
PLACEHOLDER_TOKEN_ID = -1


@dataclass(frozen=True)
class SpecDecodeMetadata:
    """The draft bookkeeping of a batch (module docstring)."""

    draft_token_ids: torch.Tensor  # [num_tokens] int32
    num_draft_tokens: list
    cu_num_draft_tokens: torch.Tensor  # [batch] int32
    cu_num_sampled_tokens: torch.Tensor  # [batch] int32
    target_logits_indices: torch.Tensor  # [num_tokens] int32
    bonus_logits_indices: torch.Tensor  # [batch] int32

    @property
    def max_spec_len(self) -> int:
        return max(self.num_draft_tokens)

    @classmethod
    def from_chains(cls, draft_tokens: torch.Tensor) -> "SpecDecodeMetadata":  # [batch, g]
        """The metadata of ``batch`` requests of ``g`` drafts each."""
        batch, g = draft_tokens.shape
        device = draft_tokens.device
        requests = torch.arange(batch, device=device)
        positions = torch.arange(g, device=device)
        return cls(
            draft_token_ids=draft_tokens.reshape(-1).to(torch.int32).contiguous(),
            num_draft_tokens=[g] * batch,
            cu_num_draft_tokens=((requests + 1) * g).to(torch.int32),
            cu_num_sampled_tokens=((requests + 1) * (g + 1)).to(torch.int32),
            target_logits_indices=(requests[:, None] * (g + 1) + positions).reshape(-1).to(torch.int32),
            bonus_logits_indices=(requests * (g + 1) + g).to(torch.int32),
        )


#: ``sampler(metadata, draft_probs [num_tokens, V] | None, logits [num_tokens + batch, V],
#: temperature [batch], generator) -> output_token_ids [batch, max_spec_len + 1]``.
VllmSampler = Callable[[SpecDecodeMetadata, "torch.Tensor | None", torch.Tensor, torch.Tensor, "torch.Generator | None"],
                       torch.Tensor]


def logits_of(probs: torch.Tensor, temperature: float) -> torch.Tensor:
    """``temperature * log(probs)`` (``-inf`` where 0): logits whose softmax at
    ``temperature`` is ``probs`` (``log(probs)`` at temperature 0: the same argmax)."""
    return (temperature if temperature > 0 else 1.0) * torch.log(probs.float())


def sentinel_law(target_probs: torch.Tensor) -> torch.Tensor:  # [batch, V] -> [batch, V]
    """All mass on each row's least likely token (lowest index on ties): what the adapter
    puts in the bonus rows of a one-draft check."""
    return torch.nn.functional.one_hot(target_probs.argmin(dim=-1), target_probs.shape[-1]).to(target_probs.dtype)


def _call(sampler: VllmSampler, target_rows: torch.Tensor, draft_probs: torch.Tensor, draft_tokens: torch.Tensor,
          temperature: float, ngram: bool, generator) -> torch.Tensor:
    """Pack ``target_rows`` (``[batch, g + 1, V]``, the last row the bonus), ``draft_probs``
    (``[batch, g, V]``) and the chains into the layout, call ``sampler``, check its output
    (``[batch, g + 1]`` int64)."""
    batch, g = draft_tokens.shape
    vocab = target_rows.shape[-1]
    metadata = SpecDecodeMetadata.from_chains(draft_tokens)
    if ngram:
        one_hot = torch.nn.functional.one_hot(draft_tokens, vocab).to(draft_probs.dtype)
        if not torch.equal(draft_probs, one_hot):
            raise NotApplicableError("draft_probs=None (n-gram drafts) needs one-hot drafts: certify with q a point mass")
        flat_draft_probs = None
    else:
        flat_draft_probs = draft_probs.reshape(batch * g, vocab).float().contiguous()
    logits = logits_of(target_rows.reshape(batch * (g + 1), vocab), temperature).contiguous()
    temperatures = torch.full((batch,), float(temperature), device=target_rows.device)
    out = sampler(metadata, flat_draft_probs, logits, temperatures, generator)
    if not isinstance(out, torch.Tensor) or out.shape != (batch, g + 1) or out.is_floating_point():
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ShapeMismatchError(f"a vLLM-layout sampler must return output_token_ids [batch={batch}, max_spec_len + 1={g + 1}] "
                                 f"of integers, got {got}")
    return out.long()


def vllm_verifier(sampler: VllmSampler, *, temperature: float = 1.0, ngram: bool = False):
    """``sampler`` as a verifier of the toolkit's contract for one draft (``k = 1``): each row
    is a request of one draft; the output token is ``output_token_ids[:, 0]``, accepted
    (``accepted_index = 0``) when the bonus position is filled. ``temperature`` is passed to
    the sampler and the logits are scaled so that the softmax at it is ``p``; ``ngram``:
    ``draft_probs=None`` (certify with one-hot ``q``)."""

    def verify(target_probs, draft_probs, draft_tokens, generator):  # [b, V], [b, 1, V], [b, 1]
        if draft_tokens.shape[1] != 1:
            raise NotApplicableError(f"vllm_verifier checks one draft per request (k=1), got k={draft_tokens.shape[1]}; "
                                     "chains go through vllm_chain_verifier")
        rows = torch.stack([target_probs, sentinel_law(target_probs)], dim=1)
        out = _call(sampler, rows, draft_probs, draft_tokens, temperature, ngram, generator)
        accepted = out[:, 1] != PLACEHOLDER_TOKEN_ID
        return VerifierOutput(out[:, 0], torch.where(accepted, 0, -1))

    return verify


def vllm_chain_verifier(sampler: VllmSampler, *, temperature: float = 1.0, ngram: bool = False):
    """``sampler`` as a chain verifier (:mod:`decoding.certify.chains`): its output is already
    the emitted tokens padded with -1."""

    def chain_verify(target_probs, draft_probs, draft_tokens, generator):  # [b, g+1, V], [b, g, V], [b, g]
        return _call(sampler, target_probs, draft_probs, draft_tokens, temperature, ngram, generator)

    return chain_verify


# --------------------------------------------------------------------------- the published algorithm


def request_positions(metadata: SpecDecodeMetadata) -> tuple[torch.Tensor, torch.Tensor]:
    """``(request [num_tokens], position in its chain [num_tokens])`` of every draft."""
    counts = torch.as_tensor(metadata.num_draft_tokens, device=metadata.draft_token_ids.device)
    request = torch.repeat_interleave(torch.arange(counts.numel(), device=counts.device), counts)
    starts = metadata.cu_num_draft_tokens.long() - counts
    return request, torch.arange(request.numel(), device=counts.device) - starts[request]


def rejection_sampler(metadata: SpecDecodeMetadata, draft_probs: torch.Tensor | None, logits: torch.Tensor,
                      temperature: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """Speculative sampling along each request's chain (Leviathan et al. 2023, Alg. 1) in
    vLLM's layout: with ``p = softmax(logits / T)`` at the draft's row, draft ``x`` is
    accepted when ``u <= p(x) / q(x)`` (``q(x) = 1`` for n-gram drafts; rejected when
    ``q(x) = 0``), until the first rejection, whose position gets the recovered token drawn
    from ``max(p - q, 0)`` (for n-gram drafts, ``p`` without the draft) by an exponential race
    (``argmax w / E``, one ``E ~ Exp(1)`` vector per request); if every draft is accepted,
    the bonus token is drawn from the bonus row. ``T = 0``: greedy (accept while the draft is
    the argmax, emit the argmax). Returns ``[batch, max_spec_len + 1]`` int32, -1 padded."""
    batch = len(metadata.num_draft_tokens)
    g_max = metadata.max_spec_len
    device, vocab = logits.device, logits.shape[-1]
    request, position = request_positions(metadata)
    greedy = temperature <= 0
    scale = torch.where(greedy, torch.ones_like(temperature), temperature)
    target_logits = logits[metadata.target_logits_indices.long()].double() / scale[request].double().unsqueeze(1)
    target = torch.softmax(target_logits, dim=-1)  # [num_tokens, V]
    drafts = metadata.draft_token_ids.long()
    rows = torch.arange(drafts.numel(), device=device)
    p_x = target[rows, drafts]
    q_x = torch.ones_like(p_x) if draft_probs is None else draft_probs.double()[rows, drafts]
    uniforms = torch.rand(drafts.numel(), generator=generator, dtype=torch.float64, device=device)
    accept = torch.where(greedy[request], drafts == target.argmax(dim=-1), (q_x > 0) & (uniforms * q_x <= p_x))
    if draft_probs is None:
        residual = target.clone()
        residual[rows, drafts] = 0
    else:
        residual = (target - draft_probs.double()).clamp(min=0)
    race = torch.empty(batch, vocab, dtype=torch.float64, device=device).exponential_(generator=generator)
    recovered = torch.where(greedy[request], target.argmax(dim=-1), (residual / race[request]).argmax(dim=-1))
    bonus_probs = torch.softmax(logits[metadata.bonus_logits_indices.long()].double() / scale.double().unsqueeze(1), dim=-1)
    bonus = torch.where(greedy, bonus_probs.argmax(dim=-1),
                        torch.multinomial(bonus_probs, 1, generator=generator).squeeze(1))
    out = torch.full((batch, g_max + 1), PLACEHOLDER_TOKEN_ID, dtype=torch.int64, device=device)
    rejected_before = torch.zeros(batch, dtype=torch.bool, device=device)
    for j in range(g_max):  # along the chains: accepted drafts, then the first rejection's recovered token
        here = position == j
        req = request[here]
        live = ~rejected_before[req]
        out[req[live], j] = torch.where(accept[here][live], drafts[here][live], recovered[here][live])
        rejected_before[req[live & ~accept[here]]] = True
    counts = torch.as_tensor(metadata.num_draft_tokens, device=device)
    all_accepted = ~rejected_before
    out[torch.arange(batch, device=device)[all_accepted], counts[all_accepted]] = bonus[all_accepted]
    return out.to(torch.int32)


__all__ = [
    "PLACEHOLDER_TOKEN_ID", "SpecDecodeMetadata", "VllmSampler", "logits_of", "rejection_sampler", "request_positions",
    "sentinel_law", "vllm_chain_verifier", "vllm_verifier",
]
