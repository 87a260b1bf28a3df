"""Certify a chain verifier: one that checks a chain of ``g`` drafts and emits the accepted
prefix and one more token (token-wise verification, Leviathan et al. 2023, Alg. 1; block
verification, Sun et al., ICLR 2025, arXiv:2403.10444).

Contract (the emitted tokens as vLLM returns them, padded with -1)::

    chain_verify(target_probs [b, g + 1, V],   # p at each chain position, the last for the bonus
                 draft_probs [b, g, V],        # q at each drafted position
                 draft_tokens [b, g],          # the chain
                 generator) -> emitted [b, g + 1] int (tokens, then -1)

The instance is context-free: ``p`` and ``q`` are the same at every position, so a lossless
chain verifier turns the steps of a decoding into an i.i.d. ``p`` stream. The test
(:func:`assert_chain_lossless`): the first two tokens of that stream, ``(Y_1, Y_2)``, have
the law ``p x p`` (``Y_2`` is the second emitted token of the step, or the first of a second
step, with a freshly drafted chain, when the first step emitted one token); the set test of
:mod:`decoding.certify.bounds` over the ``V^2`` pairs at false-alarm rate ``alpha``, chains
enumerated (``Q = q^g``) where they are at most ``max_tuples``. The accepted tokens must be
the drafts (any other emitted prefix fails outright). Power, negative control and dtype tolerance as in
:mod:`decoding.certify.assertions` (the control gives every position the target ``p'``).

What it cannot prove: that the later stream tokens, or a chain in a context where ``p``
changes along the chain, are right; only what the first two tokens show.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np
import torch

from otm.draft_laws import iid_law
from otm.errors import InvalidDistributionError, ShapeMismatchError

from decoding.validation.own_verifier import ELEMENTS_PER_CALL
from decoding.validation.stats import IMPOSSIBLE_PROBABILITY
from decoding.verifiers.base import sample_iid

from .assertions import (
    DEFAULT_ALPHA,
    DEFAULT_ROWS,
    MAX_TUPLES,
    IndexMismatch,
    Measured,
    OutputLawMismatch,
    _check_arguments,
    _target_twin,
    dtype_tolerance,
    power_line,
    require_detectable,
    set_test_line,
    target_control,
    worst_tokens,
)
from .bounds import SetTest, detectable_tv, set_test
from .harness import Inputs, cast_inputs, enumeration_copies

#: ``chain_verify(target [b, g + 1, V], draft [b, g, V], drafts [b, g], generator) -> emitted [b, g + 1]``.
ChainVerifyFunction = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, "torch.Generator | None"], torch.Tensor]


@dataclass(frozen=True, kw_only=True)
class ChainCertificate(Measured):
    """What :func:`assert_chain_lossless` measured, besides :class:`~decoding.certify.assertions.Measured`
    (``tv_estimate``: the pair law's TV from ``p x p``).

    Attributes:
        g: drafts per chain.
        tv: the smallest TV of the pair law detected with probability ``1 - POWER_MISS``.
        pair_test: the set test of ``(Y_1, Y_2)`` against ``p x p``; first_token_law: ``[V]``
            the estimated law of ``Y_1``; first_tv_estimate: its TV from ``p``.
        tokens_per_step: mean emitted tokens of the first step.
    """

    g: int
    tv: float
    pair_test: SetTest
    first_token_law: np.ndarray  # [V]
    first_tv_estimate: float
    tokens_per_step: float

    def report(self) -> str:
        test = self.pair_test
        return "\n".join([
            f"chain verifier, g={self.g} drafts, V={self.vocab_size}, {self.mode}, n={self.n:,} ({self.rows:,} rows), "
            f"seed={self.seed}",
            f"  (Y1, Y2) law: TV estimate {self.tv_estimate:.4g} (Y1 alone {self.first_tv_estimate:.4g}); "
            f"{set_test_line(test)}",
            f"  tokens per step {self.tokens_per_step:.4f}",
            "  " + power_line(f"a pair law at TV >= {self.tv:.4g} from p x p is detected", [f"alpha={self.alpha:g}"], 0.0),
            f"  negative control: {self.control}",
        ])


def block_emitted(verify) -> ChainVerifyFunction:
    """The toolkit's chain contract (:mod:`decoding.verifiers.block`: ``BlockOutput(n_accepted,
    tokens)``) as emitted tokens: the first ``n_accepted`` drafts, the token, then -1."""

    def chain_verify(target_probs, draft_probs, draft_tokens, generator):  # [b, g+1, V], [b, g, V], [b, g]
        out = verify(target_probs, draft_probs, draft_tokens, generator)
        batch, g = draft_tokens.shape
        positions = torch.arange(g + 1, device=draft_tokens.device)
        tau = out.n_accepted.unsqueeze(1)
        padded = torch.cat([draft_tokens, draft_tokens[:, :1]], dim=1)
        emitted = torch.where(positions < tau, padded, torch.full_like(padded, -1))
        return torch.where(positions == tau, out.tokens.unsqueeze(1), emitted)

    return chain_verify


def _emit(chain_verify: ChainVerifyFunction, inputs: Inputs, drafts: torch.Tensor, generator) -> tuple[np.ndarray, int]:
    """``(emitted [rows, g + 1], rows whose accepted prefix is not their drafts)``, in chunks."""
    rows, g = drafts.shape
    vocab = inputs.target.shape[-1]
    chunk = max(1, ELEMENTS_PER_CALL // ((2 * g + 1) * vocab))
    out, wrong = [], 0
    for start in range(0, rows, chunk):
        x = drafts[start : start + chunk]
        b = x.shape[0]
        emitted = chain_verify(inputs.target.expand(b, g + 1, vocab), inputs.draft.expand(b, g, vocab), x, generator)
        if not isinstance(emitted, torch.Tensor) or emitted.shape != (b, g + 1) or emitted.is_floating_point():
            got = tuple(emitted.shape) if isinstance(emitted, torch.Tensor) else type(emitted).__name__
            raise ShapeMismatchError(f"a chain verifier must return integer emitted tokens [batch={b}, g + 1={g + 1}], got {got}")
        e = emitted.long().cpu().numpy()
        valid = e >= 0
        length = valid.sum(axis=1)
        if (length < 1).any() or (valid != (np.arange(g + 1) < length[:, None])).any() or (e >= vocab).any():
            raise InvalidDistributionError(f"a chain verifier must emit 1..g+1 tokens in range(vocab_size={vocab}) "
                                           f"followed by -1 padding")
        prefix = np.arange(g) < (length - 1)[:, None]
        wrong += int((prefix & (e[:, :g] != x.cpu().numpy())).any(axis=1).sum())
        out.append(e)
    return np.concatenate(out), wrong


def assert_chain_lossless(chain_verify: ChainVerifyFunction, p, q, g: int, *, n: int = DEFAULT_ROWS,
                          alpha: float = DEFAULT_ALPHA, seed: int = 0, device="cpu", dtype: torch.dtype = torch.float32,
                          detect_tv: float | None = None, control: bool = True,
                          max_tuples: int = MAX_TUPLES) -> ChainCertificate:
    """Assert that ``chain_verify`` is lossless on chains of ``g`` drafts from ``q`` against
    ``p`` (module docstring), at false-alarm rate ``alpha`` (1e-9 by default). Raises
    :class:`~decoding.certify.assertions.OutputLawMismatch`, ``IndexMismatch`` (accepted tokens
    that are not the drafts), ``NoPower`` or ``Undetectable``, as :func:`~decoding.certify.assert_lossless`."""
    p, q, g, n = _check_arguments(p, q, g, "iid", n, alpha)
    inputs = cast_inputs(p, q, dtype, device)
    vocab = p.size
    live = int((inputs.p > IMPOSSIBLE_PROBABILITY).sum())
    count = int(np.count_nonzero(inputs.q)) ** g
    law = iid_law(inputs.q, g) if count <= max_tuples else None
    copies, per_copy = enumeration_copies(law.probs, n) if law is not None else (None, None)
    rows = int(copies.sum()) if law is not None else int(n)
    tolerance = dtype_tolerance(dtype, vocab)
    tv = detectable_tv(n, rows, live * live, alpha, tolerance=tolerance)
    reference = np.outer(inputs.p, inputs.p).ravel()
    require_detectable(detect_tv, None, reference, tv=tv, n=n, rows=rows, cells=live * live, alpha=alpha, share=alpha,
                       tolerance=tolerance, law="a pair law", of="p x p", unit="pairs")
    generator = torch.Generator(device=inputs.target.device).manual_seed(seed)

    def run(target_inputs: Inputs):
        if law is not None:
            drafts = torch.as_tensor(np.repeat(law.tuples, copies, axis=0), device=inputs.target.device)
            weights = np.repeat(per_copy, copies)
        else:
            drafts = sample_iid(inputs.draft.expand(n, vocab), g, generator)
            weights = np.ones(n)
        emitted, wrong = _emit(chain_verify, target_inputs, drafts, generator)
        second = emitted[:, 1].copy()
        short = np.flatnonzero(second < 0)
        if short.size:
            fresh = sample_iid(inputs.draft.expand(short.size, vocab), g, generator)
            again, more = _emit(chain_verify, target_inputs, fresh, generator)
            second[short], wrong = again[:, 0], wrong + more
        pairs = emitted[:, 0] * vocab + second
        return np.bincount(pairs, weights=weights, minlength=vocab * vocab), wrong, emitted

    counts, wrong, emitted = run(inputs)
    pair_test = set_test(counts, reference, n, rows, alpha, tolerance)
    first = counts.reshape(vocab, vocab).sum(axis=1) / n
    certificate = ChainCertificate(
        g=g, vocab_size=vocab, mode="enumeration" if law is not None else "sampling", n=n, rows=rows, alpha=alpha,
        seed=seed, dtype=str(dtype).replace("torch.", ""), device=str(inputs.target.device), tv=tv, pair_test=pair_test, tv_estimate=0.5 * float(np.abs(counts / n - reference).sum()),
        first_token_law=first, first_tv_estimate=0.5 * float(np.abs(first - inputs.p).sum()),
        tokens_per_step=float((emitted >= 0).sum(axis=1).mean()),
    )
    if wrong:
        raise IndexMismatch(f"FAIL: the accepted prefix is not the drafted chain in {wrong:,} rows\n" + certificate.report(),
                            certificate)
    if not pair_test.passed:
        raise OutputLawMismatch(f"FAIL: the emitted tokens are not i.i.d. p: the first two carry mass "
                                f"{pair_test.observed_mass:.4f} instead of {pair_test.expected_mass:.4f} on "
                                f"{pair_test.deviating.size} pairs; first token: {worst_tokens(first, inputs.p)}\n"
                                + certificate.report(), certificate)
    if not control:
        return certificate
    line = target_control(certificate, reference, rows, live * live, alpha, tolerance,
                          lambda pair_tv: _pair_twin(inputs.p, pair_tv),
                          lambda twin: run(cast_inputs(twin, inputs.q, dtype, device))[0],
                          law="pair law", of="p x p", given="targets at pair TV {tv:.4g}", verifier="chain verifier")
    return replace(certificate, control=line)


def _pair_twin(p: np.ndarray, tv: float) -> np.ndarray | None:
    """A target ``p'`` (:func:`~decoding.certify.assertions._target_twin`) with
    ``TV(p' x p', p x p) = tv``, by bisection on its own distance; ``None`` if none."""
    def pair_tv(single):
        twin = _target_twin(p, single)
        return math.inf if twin is None else 0.5 * float(np.abs(np.outer(twin, twin) - np.outer(p, p)).sum())

    low, high = 0.0, tv  # the pair distance is at least the single one
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if pair_tv(middle) < tv else (low, middle)
    return _target_twin(p, high)


__all__ = ["ChainCertificate", "ChainVerifyFunction", "assert_chain_lossless", "block_emitted"]
