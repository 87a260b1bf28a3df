"""Hugging Face transformers' layout (``transformers.generation.utils._speculative_sampling``,
assisted generation with a draft model), an adapter from it to the toolkit's contracts, and a
plain PyTorch implementation of the algorithm it publishes.

The layout (one sequence: batch size 1)::

    _speculative_sampling(candidate_input_ids,  # [1, prompt + L] the prompt, then the L drafts
                          candidate_logits,     # [1, L, V] the draft model's processed logits at each draft
                          candidate_length,     # L
                          new_logits,           # [1, L + 1, V] the target's processed logits, the last for the bonus
                          is_done_candidate)    # the drafts end the sequence (older versions only)
        -> (valid_tokens [1, n + 1], n_matches n)

``softmax(candidate_logits)`` must be the law the drafts were sampled from, and
``softmax(new_logits)`` the target's law (the logits processors, temperature included, are
applied before). Randomness comes from torch's global generator; the adapters seed it from
the certification's generator inside :func:`torch.random.fork_rng`, so runs are repeatable
and the caller's global state is left as it was.

:func:`transformers_verifier` presents such a function as a one-draft verifier (``k = 1``)
of the toolkit's contract, one call per row (the layout has no batch); its bonus row holds the
sentinel law of :func:`decoding.certify.layouts.vllm.sentinel_law`, so reading the wrong logits
row shows. :func:`transformers_chain_verifier` presents it as a chain verifier. The fifth
argument is passed only to a function that has ``is_done_candidate`` (as ``False``);
transformers 5 replaced it by ``assistant_ensemble_weight``, left at its default (the lossless
rule). :func:`speculative_sampling` is the published algorithm (Leviathan et al. 2023, Alg. 1,
as the function's docstring cites it), written here from that contract.
"""
from __future__ import annotations

import inspect
from typing import Callable

import torch

from otm.errors import NotApplicableError, ShapeMismatchError

from decoding.verifiers.base import VerifierOutput

from .vllm import sentinel_law

#: ``(candidate_input_ids, candidate_logits, candidate_length, new_logits[, is_done_candidate])
#: -> (valid_tokens, n_matches)``.
SpeculativeSampling = Callable[..., tuple]

#: The prompt the adapters put before the drafts (one token, id 0).
PROMPT = (0,)


def _runner(speculative_sampling: SpeculativeSampling):
    """Call ``speculative_sampling`` with ``is_done_candidate=False`` where it has that argument."""
    takes_done = "is_done_candidate" in inspect.signature(speculative_sampling).parameters

    def call(candidate_input_ids, candidate_logits, candidate_length, new_logits):
        if takes_done:
            return speculative_sampling(candidate_input_ids, candidate_logits, candidate_length, new_logits,
                                        is_done_candidate=False)
        return speculative_sampling(candidate_input_ids, candidate_logits, candidate_length, new_logits)

    return call


def _emitted(speculative_sampling: SpeculativeSampling, target_rows: torch.Tensor, draft_probs: torch.Tensor,
             draft_tokens: torch.Tensor, generator) -> torch.Tensor:
    """Run the layout row by row: ``target_rows`` ``[b, g + 1, V]``, ``draft_probs`` ``[b, g, V]``,
    ``draft_tokens`` ``[b, g]`` -> emitted ``[b, g + 1]`` int64 padded with -1."""
    call = _runner(speculative_sampling)
    batch, g = draft_tokens.shape
    device = target_rows.device
    emitted = torch.full((batch, g + 1), -1, dtype=torch.int64, device=device)
    prompt = torch.tensor([PROMPT], dtype=torch.int64, device=device)
    seed = int(torch.randint(2**62, (1,), generator=generator, device=generator.device if generator else "cpu"))
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        for row in range(batch):
            ids = torch.cat([prompt, draft_tokens[row : row + 1]], dim=1)
            valid, n_matches = call(ids, torch.log(draft_probs[row : row + 1]), g, torch.log(target_rows[row : row + 1]))
            n = int(n_matches)
            if not isinstance(valid, torch.Tensor) or valid.shape != (1, n + 1) or not 0 <= n <= g:
                got = tuple(valid.shape) if isinstance(valid, torch.Tensor) else type(valid).__name__
                raise ShapeMismatchError(f"_speculative_sampling must return valid_tokens [1, n_matches + 1] with "
                                         f"0 <= n_matches <= {g}, got {got} and n_matches={n}")
            emitted[row, : n + 1] = valid[0].long()
    return emitted


def transformers_verifier(speculative_sampling: SpeculativeSampling):
    """``speculative_sampling`` (transformers' layout) as a one-draft verifier of the toolkit's
    contract: the output is ``valid_tokens[0, 0]``, accepted when ``n_matches = 1``."""

    def verify(target_probs, draft_probs, draft_tokens, generator):  # [b, V], [b, 1, V], [b, 1]
        if draft_tokens.shape[1] != 1:
            raise NotApplicableError(f"transformers_verifier checks one draft (k=1), got k={draft_tokens.shape[1]}; "
                                     "chains go through transformers_chain_verifier")
        rows = torch.stack([target_probs, sentinel_law(target_probs)], dim=1)
        emitted = _emitted(speculative_sampling, rows, draft_probs, draft_tokens, generator)
        return VerifierOutput(emitted[:, 0], torch.where(emitted[:, 1] >= 0, 0, -1))

    return verify


def transformers_chain_verifier(speculative_sampling: SpeculativeSampling):
    """``speculative_sampling`` as a chain verifier (:mod:`decoding.certify.chains`)."""

    def chain_verify(target_probs, draft_probs, draft_tokens, generator):  # [b, g+1, V], [b, g, V], [b, g]
        return _emitted(speculative_sampling, target_probs, draft_probs, draft_tokens, generator)

    return chain_verify


def speculative_sampling(candidate_input_ids: torch.Tensor, candidate_logits: torch.Tensor, candidate_length: int,
                         new_logits: torch.Tensor, is_done_candidate: bool = False) -> tuple[torch.Tensor, int]:
    """Leviathan et al. 2023, Alg. 1 in transformers' layout (module docstring): with ``q``,
    ``p`` the softmax of ``candidate_logits`` and ``new_logits``, draft ``i`` is kept while
    ``r_i <= p_i(x_i) / q_i(x_i)`` (``r_i`` uniform, torch's global generator); ``n`` drafts
    are kept; the next token is drawn from ``norm(max(p_{n+1} - q_{n+1}, 0))`` after a
    rejection, from ``p_{L+1}`` after none. ``is_done_candidate`` and all kept: the drafts end
    the sequence, no token is added (``n`` is reduced by one and its draft is the last)."""
    drafts = candidate_input_ids[0, -candidate_length:]  # [L]
    q = torch.softmax(candidate_logits[0], dim=-1)  # [L, V]
    p = torch.softmax(new_logits[0], dim=-1)  # [L + 1, V]
    positions = torch.arange(candidate_length, device=drafts.device)
    ratio = p[positions, drafts] / q[positions, drafts]
    kept = torch.rand(candidate_length, device=drafts.device, dtype=ratio.dtype) <= ratio
    n = int(kept.long().cumprod(dim=0).sum())
    if is_done_candidate and n == candidate_length:
        return drafts[:n].unsqueeze(0), n - 1
    if n < candidate_length:
        residual = (p[n] - q[n]).clamp(min=0)
        law = residual / residual.sum()
    else:
        law = p[n]
    token = torch.multinomial(law.float(), 1)
    return torch.cat([drafts[:n], token]).unsqueeze(0), n


__all__ = ["PROMPT", "SpeculativeSampling", "speculative_sampling", "transformers_chain_verifier", "transformers_verifier"]
