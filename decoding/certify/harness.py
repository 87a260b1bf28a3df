"""Running a verifier for a certification: the inputs as the verifier sees them, and its
outputs on every row with the row's weight (:mod:`decoding.certify.bounds`, "The rows").

Two designs. **Enumeration** (few draft tuples): every tuple ``x`` of the exact joint draft
law ``Q`` (:func:`otm.draft_laws.draft_law`) is given to the verifier ``n_x = max(1,
ceil(n Q(x)))`` times, batched, so the only randomness left is the verifier's coins; a row
of tuple ``x`` weighs ``a = n Q(x) / n_x <= 1``. **Sampling** (many tuples): ``n`` draft
tuples from the scheme's sampler, each of weight 1. Either way the rows are independent
and the weights sum to ``n``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from otm.distributions import as_distribution, total_variation
from otm.draft_laws import DraftLaw

from decoding.validation.own_verifier import (
    ELEMENTS_PER_CALL,
    DraftSampler,
    chunk_sizes,
    default_draft_sampler,
    run_on_drafts,
)
from decoding.verifiers.protocol import VerifyFunction


@dataclass(frozen=True)
class Inputs:
    """The tensors a verifier is given and the laws they stand for.

    Attributes:
        target: ``[1, V]`` ``p`` cast to the dtype and device; ``draft``: ``[1, V]`` ``q`` likewise.
        p, q: ``[V]`` float64: the cast values renormalised (what a verifier that normalises
            its inputs works with; the reference laws of the tests).
        cast_tv: ``TV`` between the ``p`` given and ``p`` as cast (rounding of the dtype).
    """

    target: torch.Tensor  # [1, V]
    draft: torch.Tensor  # [1, V]
    p: np.ndarray  # [V]
    q: np.ndarray  # [V]
    cast_tv: float


def cast_inputs(p: np.ndarray, q: np.ndarray, dtype: torch.dtype, device) -> Inputs:
    """``p`` and ``q`` (validated float64) cast to ``dtype`` on ``device``; their renormalised
    float64 values are checked by :func:`otm.distributions.as_distribution`, whose sum
    tolerance is the dtype's (:func:`otm.tolerances.sum_tolerance`)."""
    target = torch.as_tensor(p, dtype=dtype, device=device).unsqueeze(0)
    draft = torch.as_tensor(q, dtype=dtype, device=device).unsqueeze(0)
    p_seen = as_distribution(target[0], f"p (target) in {dtype}")
    q_seen = as_distribution(draft[0], f"q (draft) in {dtype}")
    return Inputs(target, draft, p_seen, q_seen, total_variation(p, p_seen))


@dataclass(frozen=True)
class Rows:
    """A verifier's outputs on ``N`` independent rows.

    Attributes:
        drafts: ``[N, k]`` the draft tuple of each row; tokens: ``[N]`` its output.
        weights: ``[N]`` ``a_j`` in ``(0, 1]``, summing to ``n``.
        owner: ``[N]`` the index of the row's tuple in ``law.tuples`` (enumeration), else ``None``.
        n: the sample size the tests are stated for; mismatched: rows whose
            ``accepted_index >= 0`` points at a draft other than the output.
    """

    drafts: np.ndarray  # [N, k]
    tokens: np.ndarray  # [N]
    weights: np.ndarray  # [N]
    owner: np.ndarray | None  # [N]
    n: int
    mismatched: int

    @property
    def rows(self) -> int:
        return int(self.tokens.size)

    def output_counts(self, vocab: int) -> np.ndarray:
        """``[V]`` weighted counts ``Z_y`` of the output tokens (summing to ``n``)."""
        return np.bincount(self.tokens, weights=self.weights, minlength=vocab)

    def positions(self) -> np.ndarray:
        """``[N]`` in ``0..k``: the first draft position equal to the output, ``k`` if none
        (the cells of membership acceptance, position by position)."""
        equal = self.drafts == self.tokens[:, None]
        k = self.drafts.shape[1]
        return np.where(equal.any(axis=1), equal.argmax(axis=1), k)

    def acceptance_count(self) -> float:
        """``Z`` of the event ``Y in S(X)``."""
        return float(self.weights[self.positions() < self.drafts.shape[1]].sum())


def enumeration_copies(probs, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The enumeration design (module docstring) of outcomes of probabilities ``probs``:
    ``(copies [T] int64, weight of each copy [T])``, ``n_x = max(1, ceil(n Q(x)))`` copies of
    outcome ``x`` of weight ``n Q(x) / n_x`` each."""
    probs = np.asarray(probs, dtype=np.float64)
    copies = np.maximum(1, np.ceil(n * probs)).astype(np.int64)
    return copies, n * probs / copies


def enumerated_rows(verify: VerifyFunction, inputs: Inputs, law: DraftLaw, n: int, generator: torch.Generator) -> Rows:
    """The enumeration design (module docstring) on the tuples of ``law``."""
    copies, weights = enumeration_copies(law.probs, n)
    owner = np.repeat(np.arange(len(copies)), copies)
    drafts = law.tuples[owner]
    tokens, mismatched = run_on_drafts(verify, inputs.target, inputs.draft, torch.as_tensor(drafts, device=inputs.target.device), generator)
    return Rows(drafts, tokens, weights[owner], owner, n, mismatched)


def sampled_rows(verify: VerifyFunction, inputs: Inputs, scheme: str, k: int, n: int, generator: torch.Generator,
                 draft_sampler: DraftSampler | None = None) -> Rows:
    """The sampling design: ``n`` tuples from ``draft_sampler`` (default the toolkit's sampler
    of ``scheme``, :func:`decoding.validation.own_verifier.default_draft_sampler`)."""
    sampler = draft_sampler or default_draft_sampler(scheme)
    vocab = inputs.target.shape[-1]
    per_call = max(1, ELEMENTS_PER_CALL // (vocab * k))
    drafts = torch.cat([sampler(inputs.draft.expand(size, vocab), k, generator) for size in chunk_sizes(n, per_call)])
    tokens, mismatched = run_on_drafts(verify, inputs.target, inputs.draft, drafts, generator)
    return Rows(drafts.cpu().numpy(), tokens, np.ones(n), None, n, mismatched)


__all__ = ["Inputs", "Rows", "cast_inputs", "enumerated_rows", "enumeration_copies", "sampled_rows"]
