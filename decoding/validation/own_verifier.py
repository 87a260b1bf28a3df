"""Bring your own verifier: is it lossless, what does it accept, how far from the optimum?

:func:`validate_verifier` holds a user's torch verifier - any callable with the signature of
the toolkit's ``verify`` (:mod:`decoding.verifiers`)::

    verifier(target_probs,   # [batch, vocab]
             draft_probs,    # [batch, k, vocab]  (every row of a batch is the same q here)
             draft_tokens,   # [batch, k] int64
             generator)      # torch.Generator
        -> VerifierOutput (or anything with a ``.tokens`` [batch] int64, or that tensor)

to the target ``p`` for drafts drawn from the joint law ``Q`` of a scheme (``iid``,
``without_replacement``, ``hub``, ``greedy``, or a rule name, which selects the rule's
scheme and also its exact acceptance for comparison). ``q`` must be the law the drafts
are really drawn from (after any temperature / top-k / top-p masking).

Two modes, each a test of "the output law is ``p``" with a stated false-alarm rate
``alpha`` (the probability that a lossless verifier is reported as not lossless, up to the
chi-square approximation):

``"enumeration"`` (small vocabularies: at most ``max_tuples`` draft tuples).
    Every tuple ``x`` of ``Q`` is listed with its **exact** weight ``Q(x)``
    (:func:`otm.draft_laws.draft_law`) and the verifier is run on
    ``n_x = ceil(samples * Q(x)) >= 1`` seeded copies of it, in batches. Its kernel
    ``K(y | x)`` is a black box, so it can only be *estimated* per tuple (``K^_x``); the
    output law estimate is ``P^ = sum_x Q(x) K^_x``. What is exact: the draft side (every
    tuple is visited, rare ones included, with exact weights - no draft-sampling noise),
    and one check with no false alarm at all: a token with ``p(y) = 0`` that is ever
    output fails the test outright. What is statistical: ``K^``. The test is Pearson's
    chi-square of ``samples * P^`` against ``samples * p`` (:func:`decoding.validation.stats.chi_square_test`,
    small cells pooled). It is conservative: if the verifier is lossless,
    ``Cov(P^) = sum_x Q(x)^2 C_x / n_x <= sum_x Q(x) C_x / samples <= (diag p - p p^T) / samples``
    (``C_x`` = the multinomial covariance of ``K_x``; the last step is
    ``sum_x Q(x) K_x K_x^T >= p p^T``), i.e. at most the covariance of a multinomial sample
    of size ``samples``; so the false-alarm rate is at most ``alpha``.
``"sampling"`` (large vocabularies).
    ``samples`` draft tuples from ``draft_sampler`` (default: the toolkit's sampler of the
    scheme), one verifier call per batch; Pearson's chi-square of the output counts
    against ``p`` (small cells pooled; outputs with ``p = 0`` fail outright), false-alarm
    rate ``alpha``.

Acceptance ``P(Y in S(X))`` (the output is one of the tuple's drafts): the estimate with
a Wilson score interval at level ``confidence`` for ``samples`` trials (valid in both
modes: in enumeration mode the estimator's variance is at most ``A (1 - A) / samples`` by
the same argument). With a rule name, a z-test of it against the rule's exact acceptance
(:func:`otm.rule_acceptance`), same ``alpha``. The gap is ``alpha*(p, Q) - acceptance``
with ``alpha*`` from :func:`otm.optimal_acceptance` for the scheme (closed forms, any ``V``).

Two realistic bugs the tests show it catches (:func:`example_unnormalised_residual_verifier`,
:func:`example_unmasked_draft_probs_verifier`).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Callable

import numpy as np
import torch
from scipy import stats as scipy_stats

from otm.distributions import as_distribution_pair, check_draft_count
from otm.draft_laws import ONE_Q_SCHEMES, draft_law
from otm.errors import InvalidDistributionError, OTMError, UnknownNameError
from otm.optimum import optimal_acceptance
from otm.rules import rule_acceptance, rule_spec, rule_specs

from decoding.validation.stats import DEFAULT_ALPHA, GoodnessOfFit, chi_square_test
from decoding.verifiers import get_verifier
from decoding.verifiers.protocol import VerifyFunction, as_verifier_output
from decoding.verifiers.base import (
    VerifierOutput,
    check_verify_inputs,
    draw_uniforms,
    gather_tokens,
    sample_iid,
    sample_without_replacement,
)

#: Default number of (effective) samples: detects a change of about 0.01 in a token's
#: probability around 0.2 at alpha = 1e-4.
DEFAULT_SAMPLES = 40_000

#: ``mode="auto"`` enumerates the draft law up to this many tuples.
ENUMERATION_LIMIT = 2_000

#: Rows per verifier call: bounds the ``[rows, k, vocab]`` tensors to ~2^22 elements.
ELEMENTS_PER_CALL = 1 << 22

#: Default confidence level of the acceptance interval.
DEFAULT_CONFIDENCE = 0.99

DraftSampler = Callable[[torch.Tensor, int, torch.Generator], torch.Tensor]


@dataclass(frozen=True)
class VerifierReport:
    """What :func:`validate_verifier` found (module docstring for the tests).

    Attributes:
        scheme: the joint draft law ``Q`` (``iid``, ``without_replacement``, ``hub``, ``greedy``).
        rule: the rule name given, or ``None``.
        k, vocab_size: drafts per row, tokens.
        mode: ``"enumeration"`` or ``"sampling"``.
        samples: ``N``, the sample size the tests are stated for.
        verifier_rows: rows the verifier was run on (``>= N`` when enumerating).
        lossless: ``law_test.passed``: the output law is consistent with ``p``.
        law_test: the chi-square test (:class:`decoding.validation.stats.GoodnessOfFit`).
        output_law: ``[V]`` the estimated output law ``P^``.
        acceptance: estimated ``P(Y in S(X))``; ``acceptance_interval`` its Wilson interval
            at ``confidence``.
        optimum: ``alpha*(p, Q)``; ``gap = optimum - acceptance``; ``gap_interval``.
        expected_acceptance: the rule's exact acceptance (``None`` without a rule, or
            where it cannot be computed: ``details["expected_acceptance_error"]``); for a
            rule that attains the optimum of its draft law (registry
            ``attains_own_optimum``) whose exact law is too costly, that optimum
            (``details["expected_acceptance_from"]`` says so).
        acceptance_test: z-test of ``acceptance`` against it (``None`` without one).
        details: ``tuples`` (enumeration), ``mismatched_accepted_index`` (rows whose
            ``accepted_index >= 0`` does not point at the output token), ``beats_optimum``
            (the acceptance interval lies above ``alpha*(p, Q)``: impossible for a lossless
            verifier, so a sure sign of a biased one, e.g. one that uses the wrong ``q``).
    """

    scheme: str
    rule: str | None
    k: int
    vocab_size: int
    mode: str
    samples: int
    verifier_rows: int
    lossless: bool
    law_test: GoodnessOfFit
    output_law: np.ndarray  # [V]
    acceptance: float
    acceptance_interval: tuple[float, float]
    confidence: float
    optimum: float
    gap: float
    gap_interval: tuple[float, float]
    expected_acceptance: float | None
    acceptance_test: GoodnessOfFit | None
    details: dict = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """Lossless, (with a rule) its acceptance matches the rule's exact one, and its
        acceptance is not above its draft law's optimum beyond the interval."""
        return (self.lossless and (self.acceptance_test is None or self.acceptance_test.passed)
                and self.gap_interval[1] >= 0)

    def summary(self) -> str:
        """A PASS/FAIL headline (what failed, if anything), then the measurements."""
        lo, hi = self.acceptance_interval
        failures = [] if self.lossless else ["output law is not p"]
        if self.acceptance_test is not None and not self.acceptance_test.passed:
            failures.append(f"acceptance differs from rule {self.rule}'s exact law")
        if self.gap_interval[1] < 0:
            failures.append("acceptance above the optimum of its draft law (impossible for a lossless verifier)")
        headline = "PASS" if not failures else "FAIL: " + "; ".join(failures)
        lines = [
            headline,
            f"verifier on {self.scheme} drafts, k={self.k}, V={self.vocab_size} ({self.mode}, N={self.samples}):",
            f"  output law = p: {'yes' if self.lossless else 'NO'} ({self.law_test.reason})",
            f"  acceptance {self.acceptance:.4f}  [{lo:.4f}, {hi:.4f}] at {self.confidence:.0%}",
            f"  optimum for this draft law {self.optimum:.4f}, gap {self.gap:.4f}  [{self.gap_interval[0]:.4f}, {self.gap_interval[1]:.4f}]",
        ]
        if self.acceptance_test is not None:
            lines.append(f"  rule {self.rule}: exact acceptance {self.expected_acceptance:.4f}, {self.acceptance_test.reason}")
        return "\n".join(lines)

    def as_dict(self) -> dict:
        out = {key: getattr(self, key) for key in ("scheme", "rule", "k", "vocab_size", "mode", "samples", "verifier_rows",
                                                    "lossless", "acceptance", "confidence", "optimum", "gap", "expected_acceptance")}
        out.update(passed=self.passed, acceptance_interval=list(self.acceptance_interval), gap_interval=list(self.gap_interval),
                   law_test=asdict(self.law_test),
                   acceptance_test=None if self.acceptance_test is None else asdict(self.acceptance_test))
        return out


def _resolve(rule_or_scheme: str) -> tuple[str | None, str]:
    """``(rule or None, scheme)`` for a rule name (its draft scheme from the registry) or a
    scheme name; ``"greedy"`` is both, and means the rule (with its exact acceptance)."""
    try:
        spec = rule_spec(rule_or_scheme)
    except UnknownNameError:
        spec = None
    if spec is not None and spec.lossless:
        return spec.name, "iid" if spec.draft_scheme == "independent" else spec.draft_scheme
    if rule_or_scheme in ONE_Q_SCHEMES:
        return None, rule_or_scheme
    raise UnknownNameError(
        f"unknown rule or draft scheme {rule_or_scheme!r}; choose a scheme in {ONE_Q_SCHEMES} "
        f"or a lossless rule in {tuple(s.name for s in rule_specs(lossless=True))}"
    )


def default_draft_sampler(scheme: str) -> DraftSampler:
    """The toolkit's sampler of ``scheme`` (``[batch, vocab]``, k, generator -> ``[batch, k]``)."""
    return {
        "iid": sample_iid,
        "without_replacement": sample_without_replacement,
        "hub": get_verifier("spechub").sample_drafts,
        "greedy": get_verifier("greedy").sample_drafts,
    }[scheme]


def run_on_drafts(verifier: VerifyFunction, p_t: torch.Tensor, q_t: torch.Tensor, drafts: torch.Tensor, generator) -> tuple[np.ndarray, int]:
    """Run ``verifier`` on ``drafts`` (``[rows, k]``) in chunks; returns ``(tokens [rows], mismatches)``."""
    rows, k = drafts.shape
    vocab = p_t.shape[-1]
    chunk = max(1, ELEMENTS_PER_CALL // (vocab * k))
    tokens, mismatched = [], 0
    for start in range(0, rows, chunk):
        x = drafts[start : start + chunk]
        n = x.shape[0]
        target = p_t.expand(n, vocab)
        draft = q_t.expand(n, k, vocab)
        check_verify_inputs(target, draft, x)
        out = as_verifier_output(verifier(target, draft, x, generator), x)
        y, index = out.tokens, out.accepted_index
        if ((y < 0) | (y >= vocab)).any():
            raise InvalidDistributionError(f"the verifier returned token ids outside range(vocab_size={vocab})")
        if ((index < -1) | (index >= k)).any():
            raise InvalidDistributionError(f"the verifier returned accepted_index outside -1..{k - 1} (k = {k} drafts)")
        hit = index >= 0
        pointed = x.gather(1, index.clamp(min=0).unsqueeze(1)).squeeze(1)
        mismatched += int((hit & (pointed != y)).sum())
        tokens.append(y.cpu())
    return torch.cat(tokens).numpy(), mismatched


def wilson_interval(estimate: float, n: int, confidence: float) -> tuple[float, float]:
    """Wilson score interval for a proportion ``estimate`` out of ``n`` trials."""
    z = float(scipy_stats.norm.ppf(0.5 + confidence / 2))
    denom = 1 + z * z / n
    centre = (estimate + z * z / (2 * n)) / denom
    half = z * math.sqrt(max(estimate * (1 - estimate), 0.0) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def z_test(estimate: float, expected: float, variance: float, alpha: float, *, what: str, tolerance: float,
           above_only: bool = False) -> GoodnessOfFit:
    """Two-sided z-test of ``estimate`` against ``expected`` for an estimator of variance at
    most ``variance``; with ``above_only``, the one-sided test of "not above ``expected``"
    (``p = P(Z >= z)``). With no variance, it passes iff ``estimate`` is within ``tolerance``
    of ``expected`` (not above ``expected + tolerance`` with ``above_only``)."""
    if variance <= 0:
        excess = estimate - expected if above_only else abs(estimate - expected)
        passed = excess <= tolerance
        return GoodnessOfFit(0.0 if passed else math.inf, 0, 1.0 if passed else 0.0, alpha, passed,
                             f"{what} {estimate:.6f} for an exact {expected:.6f}")
    z = (estimate - expected) / math.sqrt(variance)
    p_value = float(scipy_stats.norm.sf(z) if above_only else 2 * scipy_stats.norm.sf(abs(z)))
    passed = p_value >= alpha
    return GoodnessOfFit(z, 0, p_value, alpha, passed,
                         f"z={z:.2f}, p={p_value:.3g} {'>=' if passed else '<'} alpha={alpha:g} ({estimate:.6f} vs {expected:.6f})")


def _acceptance_z_test(estimate: float, n: int, expected: float, alpha: float) -> GoodnessOfFit:
    """Two-sided z-test of an acceptance estimate whose variance is at most ``A (1 - A) / n``."""
    return z_test(estimate, expected, expected * (1 - expected) / n, alpha, what="acceptance", tolerance=1 / (2 * n))


def validate_verifier(
    verifier: VerifyFunction,
    rule_or_scheme: str,
    p,
    q,
    k: int,
    *,
    draft_sampler: DraftSampler | None = None,
    mode: str = "auto",
    samples: int = DEFAULT_SAMPLES,
    alpha: float = DEFAULT_ALPHA,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
    max_tuples: int = ENUMERATION_LIMIT,
    dtype: torch.dtype = torch.float64,
    device=None,
) -> VerifierReport:
    """Validate a user's verifier (module docstring: the two modes and their tests).

    Args:
        verifier: ``verify(target_probs [b, V], draft_probs [b, k, V], draft_tokens [b, k],
            generator) -> VerifierOutput``.
        rule_or_scheme: a draft scheme (``iid``, ``without_replacement``, ``hub``,
            ``greedy``) or a rule name of :data:`decoding.verifiers.VERIFIERS` (its scheme,
            plus a test of the acceptance against the rule's exact one).
        p: ``[V]`` target distribution; q: ``[V]`` the law the drafts are drawn from.
        k: drafts per row.
        draft_sampler: ``(draft_probs [b, V], k, generator) -> [b, k]``, used in sampling
            mode (default :func:`default_draft_sampler`).
        mode: ``"enumeration"``, ``"sampling"`` or ``"auto"`` (enumerate when the law has at
            most ``max_tuples`` tuples).
        samples: ``N`` (module docstring).
        alpha: false-alarm rate of the law test and of the acceptance test.
        confidence: level of the acceptance interval.
        seed: seeds the one ``torch.Generator`` every call draws from.
        dtype, device: of the tensors passed to the verifier.

    Raises :class:`otm.errors.InvalidDistributionError` / :class:`ShapeMismatchError` on bad
    ``p``, ``q`` or a verifier that returns malformed tokens; :class:`UnknownNameError`
    for an unknown scheme, rule or mode.
    """
    rule, scheme = _resolve(rule_or_scheme)
    k = check_draft_count(k)
    p, q = as_distribution_pair(p, q)  # numpy or torch, checked within the sum tolerance of their own dtype
    if mode not in ("auto", "enumeration", "sampling"):
        raise UnknownNameError(f"unknown mode {mode!r}; choose auto, enumeration or sampling")
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    vocab = p.size
    law = None
    if mode in ("auto", "enumeration"):
        law = draft_law(scheme, q, k) if mode == "enumeration" or draft_tuple_count(q, k, scheme) <= max_tuples else None
    p_t = torch.as_tensor(p, dtype=dtype, device=device).unsqueeze(0)
    q_t = torch.as_tensor(q, dtype=dtype, device=device).unsqueeze(0)
    generator = torch.Generator(device=p_t.device).manual_seed(seed)
    details: dict = {}
    if law is not None:
        estimate = _enumerated_estimate(verifier, law, samples, p_t, q_t, generator)
        details["tuples"] = len(law.probs)
    else:
        estimate = _sampled_estimate(verifier, draft_sampler or default_draft_sampler(scheme), samples, k, p_t, q_t, generator)
    details["mismatched_accepted_index"] = estimate.mismatched
    law_test = chi_square_test(samples * estimate.output_law, p, alpha)
    optimum = float(optimal_acceptance(p, q, k, draft_scheme=scheme))
    acceptance = estimate.acceptance
    lo, hi = wilson_interval(acceptance, samples, confidence)
    details["beats_optimum"] = lo > optimum  # impossible for a lossless verifier
    expected = None if rule is None else _expected_acceptance(rule, p, q, k, scheme, optimum, details)
    acceptance_test = None if expected is None else _acceptance_z_test(acceptance, samples, expected, alpha)
    return VerifierReport(
        scheme=scheme, rule=rule, k=k, vocab_size=vocab, mode=estimate.mode, samples=samples, verifier_rows=estimate.rows,
        lossless=law_test.passed, law_test=law_test, output_law=estimate.output_law, acceptance=acceptance,
        acceptance_interval=(lo, hi), confidence=confidence, optimum=optimum, gap=optimum - acceptance,
        gap_interval=(optimum - hi, optimum - lo), expected_acceptance=expected, acceptance_test=acceptance_test,
        details=details,
    )


@dataclass(frozen=True)
class _Estimate:
    """The verifier's estimated output law and acceptance, from ``rows`` runs in ``mode``;
    ``mismatched``: rows whose ``accepted_index`` does not point at the output token."""

    mode: str
    rows: int
    output_law: np.ndarray  # [V]
    acceptance: float
    mismatched: int


def _enumerated_estimate(verifier: VerifyFunction, law, samples: int, p_t: torch.Tensor, q_t: torch.Tensor,
                         generator) -> _Estimate:
    """Every draft tuple of ``law``, ``ceil(N Q(x))`` times (at least once), each row weighted
    by ``Q(x) / copies``: the output law and acceptance with the draft noise integrated out."""
    vocab = p_t.shape[-1]
    weights = np.asarray(law.probs, dtype=np.float64)
    copies = np.maximum(1, np.ceil(samples * weights)).astype(np.int64)
    drafts = np.repeat(law.tuples, copies, axis=0)
    tokens, mismatched = run_on_drafts(verifier, p_t, q_t, torch.as_tensor(drafts, device=p_t.device), generator)
    row_weight = (weights / copies)[np.repeat(np.arange(len(weights)), copies)]  # Q(x) / n_x per row
    output_law = np.bincount(tokens, weights=row_weight, minlength=vocab)
    member = (drafts == tokens[:, None]).any(axis=1)
    return _Estimate("enumeration", len(tokens), output_law, float((row_weight * member).sum()), mismatched)


def _sampled_estimate(verifier: VerifyFunction, sampler: DraftSampler, samples: int, k: int, p_t: torch.Tensor,
                      q_t: torch.Tensor, generator) -> _Estimate:
    """``N`` rows of drafts from ``sampler``: the empirical output law and acceptance."""
    vocab = p_t.shape[-1]
    drafts = torch.cat([sampler(q_t.expand(n, vocab), k, generator)
                        for n in chunk_sizes(samples, max(1, ELEMENTS_PER_CALL // (vocab * k)))])
    tokens, mismatched = run_on_drafts(verifier, p_t, q_t, drafts, generator)
    member = (drafts.cpu().numpy() == tokens[:, None]).any(axis=1)
    return _Estimate("sampling", samples, np.bincount(tokens, minlength=vocab) / samples, float(member.mean()), mismatched)


def _expected_acceptance(rule: str, p, q, k: int, scheme: str, optimum: float, details: dict) -> float | None:
    """``rule``'s exact acceptance; where its exact law is too costly, the optimum of its
    draft law if the rule attains it, else ``None`` (``details`` says which and why)."""
    try:
        return float(rule_acceptance(rule, p, q, k))
    except OTMError as exc:
        spec = rule_spec(rule)
        if spec.attains_own_optimum and spec.reference_optimum == scheme:
            details["expected_acceptance_from"] = "the optimum of its draft law, which the rule attains"
            return optimum
        details["expected_acceptance_error"] = str(exc)
        return None


def chunk_sizes(total: int, size: int):
    """The sizes of the chunks of at most ``size`` that ``total`` rows are run in."""
    for start in range(0, total, size):
        yield min(size, total - start)


def draft_tuple_count(q: np.ndarray, k: int, scheme: str) -> int:
    """Number of tuples of ``draft_law(scheme, q, k)`` without building it."""
    m = int(np.count_nonzero(q))
    if scheme == "iid":
        return m**k
    if scheme == "without_replacement":
        return math.perm(m, k) if k <= m else 0
    if scheme == "hub":
        return max(2 * (m - 1), 1)
    return max(m - k + 1, 1)


# --------------------------------------------------------------------------- two realistic bugs


def example_unnormalised_residual_verifier(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, k, vocab]
    draft_tokens: torch.Tensor,  # [batch, k]
    generator: torch.Generator | None,
) -> VerifierOutput:
    """**Deliberately wrong** RRS (SpecHub, Sun et al. 2024, Alg. 1, i.i.d. drafts): the residual
    ``max(p_i - q, 0)`` is never renormalised. The ratio test then compares ``u q(x)``
    with an unnormalised residual (too few acceptances after the first rejection), and the
    final draw inverts the unnormalised CDF with ``u`` in ``[0, 1)``: whenever ``u`` is
    above the residual's mass the search runs off the end and is clamped to the last
    token. The toolkit's correct version is :mod:`decoding.verifiers.rrs`."""
    batch, k, vocab = check_verify_inputs(target_probs, draft_probs, draft_tokens)
    u = draw_uniforms(generator, batch, k + 1, target_probs)
    residual = target_probs
    tokens = torch.zeros(batch, dtype=torch.int64, device=target_probs.device)
    accepted = torch.full_like(tokens, -1)
    pending = torch.ones(batch, dtype=torch.bool, device=target_probs.device)
    for i in range(k):
        x, q_i = draft_tokens[:, i], draft_probs[:, i, :]
        accept = pending & (u[:, i] * gather_tokens(q_i, x) < gather_tokens(residual, x))
        tokens = torch.where(accept, x, tokens)
        accepted = torch.where(accept, torch.full_like(accepted, i), accepted)
        pending = pending & ~accept
        residual = torch.where(pending.unsqueeze(1), torch.clamp(residual - q_i, min=0.0), residual)  # BUG: no / sum
    cdf = residual.cumsum(dim=-1)
    final = torch.searchsorted(cdf, u[:, k:].contiguous(), right=True).squeeze(1).clamp(max=vocab - 1)  # BUG: u not scaled by cdf[-1]
    return VerifierOutput(torch.where(pending, final, tokens), accepted)


def example_unmasked_draft_probs_verifier(unmasked_draft_probs, rule: str = "rrs") -> VerifyFunction:
    """**Deliberately wrong** pipeline: the drafts are sampled from the top-p-masked draft
    law, but the verifier is handed the draft model's softmax *before* the mask
    (``unmasked_draft_probs``, ``[V]``) - the acceptance ratio ``p(x) / q(x)`` and the
    residual ``max(p - q, 0)`` then use the wrong ``q``. Returns a verifier that ignores
    the ``draft_probs`` it is given and runs ``rule``'s toolkit verifier with the unmasked ones."""
    correct = get_verifier(rule).verify
    unmasked = torch.as_tensor(np.asarray(unmasked_draft_probs, dtype=np.float64))

    def verify(target_probs, draft_probs, draft_tokens, generator):  # [batch, vocab], [batch, k, vocab], [batch, k]
        wrong = unmasked.to(dtype=draft_probs.dtype, device=draft_probs.device).expand_as(draft_probs)
        return correct(target_probs, wrong, draft_tokens, generator)

    return verify


__all__ = [
    "DEFAULT_SAMPLES",
    "ENUMERATION_LIMIT",
    "VerifierReport",
    "chunk_sizes",
    "default_draft_sampler",
    "draft_tuple_count",
    "example_unmasked_draft_probs_verifier",
    "example_unnormalised_residual_verifier",
    "run_on_drafts",
    "validate_verifier",
    "wilson_interval",
    "z_test",
]
