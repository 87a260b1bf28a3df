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
    CONTROL_MISS,
    DEFAULT_ALPHA,
    DEFAULT_ROWS,
    MAX_TUPLES,
    IndexMismatch,
    NoPower,
    OutputLawMismatch,
    Undetectable,
    _check_arguments,
    _p_bound,
    dtype_tolerance,
    _target_twin,
)
from .bounds import POWER_MISS, SetTest, detectable_tv, samples_needed, set_test
from .harness import Inputs, cast_inputs

#: ``chain_verify(target [b, g + 1, V], draft [b, g, V], drafts [b, g], generator) -> emitted [b, g + 1]``.
ChainVerifyFunction = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, "torch.Generator | None"], torch.Tensor]


@dataclass(frozen=True)
class ChainCertificate:
    """What :func:`assert_chain_lossless` measured.

    Attributes:
        g, vocab_size, mode, n, rows, alpha, seed: how it ran.
        tv: the smallest TV of the pair law detected with probability ``1 - POWER_MISS``.
        pair_test: the set test of ``(Y_1, Y_2)`` against ``p x p``; first_token_law: ``[V]``
            the estimated law of ``Y_1``; tv_estimate, first_tv_estimate: ``TV`` of the pair
            law and of ``Y_1``'s law from theirs.
        tokens_per_step: mean emitted tokens of the first step.
        control: what the negative control did.
    """

    g: int
    vocab_size: int
    mode: str
    n: int
    rows: int
    alpha: float
    seed: int
    tv: float
    pair_test: SetTest
    tv_estimate: float
    first_token_law: np.ndarray  # [V]
    first_tv_estimate: float
    tokens_per_step: float
    control: str = "not run"

    def report(self) -> str:
        test = self.pair_test
        return "\n".join([
            f"chain verifier, g={self.g} drafts, V={self.vocab_size}, {self.mode}, n={self.n:,} ({self.rows:,} rows), "
            f"seed={self.seed}",
            f"  (Y1, Y2) law: TV estimate {self.tv_estimate:.4g} (Y1 alone {self.first_tv_estimate:.4g}); set test "
            f"T={test.statistic:.4g} vs threshold {test.threshold:.4g} ({_p_bound(test.p_bound)})",
            f"  tokens per step {self.tokens_per_step:.4f}",
            f"  power: with probability >= {1 - POWER_MISS:g}, a pair law at TV >= {self.tv:.4g} from p x p is detected "
            f"(alpha={self.alpha:g})",
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
    rows = int(np.maximum(1, np.ceil(n * np.asarray(law.probs))).sum()) if law is not None else int(n)
    tolerance = dtype_tolerance(dtype, vocab)
    tv = detectable_tv(n, rows, live * live, alpha, tolerance=tolerance)
    if detect_tv is not None and not tv <= detect_tv:
        needed = samples_needed(detect_tv, live * live, alpha, extra_rows=rows - n, tolerance=tolerance)
        raise Undetectable(f"undetectable at n={n:,}: a deviation of TV {detect_tv:.3g} of the pair law is below the "
                           f"power (TV {tv:.3g} detected with probability {1 - POWER_MISS:g}); it needs n >= {needed:,}")
    generator = torch.Generator(device=inputs.target.device).manual_seed(seed)
    reference = np.outer(inputs.p, inputs.p).ravel()

    def run(target_inputs: Inputs):
        if law is not None:
            copies = np.maximum(1, np.ceil(n * np.asarray(law.probs))).astype(np.int64)
            drafts = torch.as_tensor(np.repeat(law.tuples, copies, axis=0), device=inputs.target.device)
            weights = np.repeat(n * np.asarray(law.probs) / copies, copies)
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
        seed=seed, tv=tv, pair_test=pair_test, tv_estimate=0.5 * float(np.abs(counts / n - reference).sum()),
        first_token_law=first, first_tv_estimate=0.5 * float(np.abs(first - inputs.p).sum()),
        tokens_per_step=float((emitted >= 0).sum(axis=1).mean()),
    )
    if wrong:
        raise IndexMismatch(f"FAIL: the accepted prefix is not the drafted chain in {wrong:,} rows\n" + certificate.report(),
                            certificate)
    if not pair_test.passed:
        worst = np.argsort(-np.abs(first - inputs.p), kind="stable")[:3]
        listed = ", ".join(f"token {y}: {first[y]:.4f} vs {inputs.p[y]:.4f}" for y in worst)
        raise OutputLawMismatch(f"FAIL: the emitted tokens are not i.i.d. p: the first two carry mass "
                                f"{pair_test.observed_mass:.4f} instead of {pair_test.expected_mass:.4f} on "
                                f"{pair_test.deviating.size} pairs; first token: {listed}\n" + certificate.report(),
                                certificate)
    if not control:
        return certificate
    target_tv = detectable_tv(n, rows, live * live, alpha, CONTROL_MISS, tolerance)
    twin = _pair_twin(inputs.p, target_tv)
    if twin is None:
        raise NoPower(f"no power here: at n={n:,} no pair law is sure to be told from p x p\n" + certificate.report(),
                      certificate)
    twin_counts, _, _ = run(cast_inputs(twin, inputs.q, dtype, device))
    twin_test = set_test(twin_counts, reference, n, rows, alpha, tolerance)
    if twin_test.passed:
        raise NoPower(f"no power here: the same chain verifier given targets whose pair law is at TV {target_tv:.4g} "
                      f"was not detected (T={twin_test.statistic:.4g} < {twin_test.threshold:.4g})\n" + certificate.report(),
                      certificate)
    return replace(certificate, control=f"targets at pair TV {target_tv:.4g} detected (T={twin_test.statistic:.4g} >= "
                                        f"{twin_test.threshold:.4g})")


def _pair_twin(p: np.ndarray, tv: float) -> np.ndarray | None:
    """A target ``p'`` (:func:`~decoding.certify.assertions._target_twin`) with
    ``TV(p' x p', p x p) = tv``, by bisection on its own distance; ``None`` if none."""
    def pair_tv(single):
        twin = _target_twin(p, single)
        return math.inf if twin is None else 0.5 * float(np.abs(np.outer(twin, twin) - np.outer(p, p)).sum())

    if not math.isfinite(tv):
        return None
    low, high = 0.0, tv  # the pair distance is at least the single one
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if pair_tv(middle) < tv else (low, middle)
    return _target_twin(p, high)


__all__ = ["ChainCertificate", "ChainVerifyFunction", "assert_chain_lossless", "block_emitted"]
