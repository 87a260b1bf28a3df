"""Certify a sampler: its output law is ``p`` (:func:`assert_lossless`), it is the rule it
claims (:func:`assert_rule`), and how far its acceptance is from the optimum.

The verifier is any callable with the toolkit's contract (:mod:`decoding.verifiers.protocol`;
an engine's own calling convention goes through an adapter of :mod:`decoding.certify.layouts`)::

    verify(target_probs [b, V], draft_probs [b, k, V], draft_tokens [b, k], generator)
        -> VerifierOutput or [b] tokens

What each assertion proves, at false-alarm rate ``alpha`` (default :data:`DEFAULT_ALPHA` =
1e-9: a correct verifier fails with probability at most ``alpha``, by the finite-sample
bound of :mod:`decoding.certify.bounds`, no asymptotic approximation):

- :func:`assert_lossless`: the law of the output token is ``p`` (the set test over the
  ``V`` tokens, at ``alpha / 2``), and the membership acceptance ``P(Y in S(X))`` is not
  above the optimum ``alpha*(p, Q)`` of the draft law (one-sided Hoeffding tail at
  ``alpha / 2``): no lossless verifier can beat it, so an acceptance above it is a sure
  sign of a biased one. Every ``accepted_index >= 0`` must point at a draft equal to the
  output (no statistics: any mismatch fails).
- :func:`assert_rule`: besides, the verifier is the rule: at ``alpha / 3`` each, (i) its
  output law is the rule's (:func:`otm.rule_law`), (ii) the pooled law of the position of
  the output among the drafts (first draft equal to it, or none; its last cell is one minus
  the acceptance) is the rule's, and (iii) for every enumerated draft tuple ``x``, the law of
  ``Y`` given ``x`` on the cells "each distinct draft of ``x``" and "not a draft" is the
  rule's ``K(. | x)`` (union bound over the tuples).

Draft tuples are enumerated exactly where they are few (at most ``max_tuples``): every
tuple is given to the verifier ``n_x = max(1, ceil(n Q(x)))`` times, so the only randomness
is the verifier's coins and rare tuples are visited too; otherwise ``n`` tuples are sampled
(test (iii) then does not apply, and test (ii) uses the rule's exact acceptance when its
exact per-tuple law is too large to enumerate).

Power (:func:`power`): every result and every failure message states the smallest total
variation of the output law, and the smallest acceptance change, that the tests detect with
probability at least 0.99 at this ``n`` and ``alpha``, whatever the shape of the deviation
(:func:`decoding.certify.bounds.detectable_tv`). ``detect_tv=tau`` asks that every deviation
of ``tau`` be detectable, ``detect_law`` that a given output law (a suspected bug's, of its own
shape) be: when it is not at this ``n``, :class:`Undetectable` is raised before anything
runs, with the ``n`` it would need, never a pass.

Negative controls (``control=True``): after the tests pass, the same verifier is run on a
twin instance whose output law must differ from ``p`` by a known total variation, at the
size the tests detect with probability ``1 - CONTROL_MISS``: it is given the target
``p' = (1 - lam) p + lam r`` (``r`` = ``p`` restricted to the least likely tokens of mass
about 1/2, the hardest shape for the test; ``TV(p', p) = lam (1 - p(L))`` exactly for a
lossless verifier); :func:`assert_rule` also perturbs the acceptance of its outputs by a
known amount (outputs moved into or out of the drafts). A control that is not detected
raises :class:`NoPower`: the run could not have seen a bug of that size (a verifier that
ignores the tensors it is given, a harness that drops rows, too few rows), so it certifies
nothing.

Dtypes. A verifier computing in ``dtype`` is the rule only up to that dtype's rounding: every
test allows a total variation of :func:`dtype_tolerance` (``otm.tolerances.softmax_sum_tolerance``:
about 1e-6 in float32, 2^-7 in bfloat16) from the exact law before it counts a deviation
(:mod:`decoding.certify.bounds`, "Tolerance"); the power is stated above it.

What it cannot prove: deviations below the stated power; the behaviour at other ``p``,
``q``, ``k``, vocabularies, dtypes or batch compositions than the ones run; verifiers that
share randomness across rows (the bound needs independent rows); rules that are not
lossless for every target (the target twin assumes losslessness at ``p'``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np
import torch

from otm.distributions import as_distribution, as_distribution_pair, check_draft_count, total_variation
from otm.draft_laws import ONE_Q_SCHEMES, draft_law
from otm.errors import InvalidArgumentError, NotApplicableError, ShapeMismatchError, UnknownNameError
from otm.optimum import optimal_acceptance
from otm.rules import rule_law, rule_spec
from otm.tolerances import softmax_sum_tolerance

from decoding.validation.own_verifier import DraftSampler, draft_tuple_count
from decoding.validation.stats import IMPOSSIBLE_PROBABILITY
from decoding.verifiers.protocol import VerifyFunction

from .bounds import (
    POWER_MISS,
    SetTest,
    chernoff_interval,
    detectable_shift,
    detectable_tv,
    is_weighted,
    law_miss_bound,
    samples_needed,
    samples_needed_for_law,
    set_statistic,
    set_test,
    set_threshold,
    upper_root,
)
from .harness import Inputs, Rows, cast_inputs, enumerated_rows, enumeration_copies, sampled_rows

#: Default false-alarm rate of an assertion (all its tests together).
DEFAULT_ALPHA = 1e-9

#: Default ``n``: at ``alpha = 1e-9`` and ``V = 64`` the output-law test detects a total
#: variation of about 0.017 with probability 0.99 (:func:`power`).
DEFAULT_ROWS = 200_000

#: Draft laws with at most this many tuples are enumerated.
MAX_TUPLES = 8192

#: The negative controls are built at the deviation detected with probability ``1 - CONTROL_MISS``.
CONTROL_MISS = 1e-4

#: Level of the acceptance interval reported.
DEFAULT_CONFIDENCE = 0.99

#: A dtype tolerance at least this large is named in the power line (float32's, about 1e-6, is not).
SHOWN_TOLERANCE = 1e-5

#: ``alpha`` is split equally among the tests of an assertion (module docstring).
TESTS = {"lossless": 2, "rule": 3}


class CertificationError(AssertionError):
    """A verifier failed a certification; the message says what is wrong, with the power
    and the acceptance report. ``certificate`` holds every measurement (a
    :class:`Certificate`, or a :class:`decoding.certify.chains.ChainCertificate`)."""

    def __init__(self, message: str, certificate=None):
        super().__init__(message)
        self.certificate = certificate


class OutputLawMismatch(CertificationError):
    """The output law is not ``p`` (or not the rule's output law)."""


class RuleMismatch(CertificationError):
    """The verifier is not the rule it claims: its per-tuple or per-position law deviates."""


class AcceptanceMismatch(CertificationError):
    """The acceptance is above the optimum of the draft law (impossible for a lossless verifier)."""


class IndexMismatch(CertificationError):
    """``accepted_index`` points at a draft that is not the output token."""


class NoPower(CertificationError):
    """A negative control was not detected (or could not be built): the run certifies nothing."""


class Undetectable(CertificationError):
    """The deviation asked for (``detect_tv``) is below what ``n`` rows can detect."""


@dataclass(frozen=True)
class Power:
    """What the tests of an assertion detect with probability at least ``1 - miss``.

    Attributes:
        tv: the smallest total variation of the output law from ``p``, any shape.
        acceptance: the smallest change of the acceptance (``assert_rule``: either way from
            the rule's; ``assert_lossless``: above the optimum), at ``acceptance_at`` (the
            exact value used) or the worst case over acceptances where that is ``None``.
        n, rows, alpha, cells (tokens of positive ``p``), k, assertion, miss.
        tolerance: the total variation the tests allow for the dtype's rounding.
    """

    tv: float
    acceptance: float
    acceptance_at: float | None
    n: int
    rows: int
    alpha: float
    cells: int
    k: int
    assertion: str
    miss: float
    tolerance: float = 0.0

    def describe(self) -> str:
        """One line: what is detected with probability ``1 - miss``."""
        what = "acceptance above the optimum by" if self.assertion == "lossless" else "an acceptance off the rule's by"
        return power_line(f"an output law at TV >= {self.tv:.4g} from p, and {what} >= {self.acceptance:.4g}, are "
                          f"detected", [f"n={self.n:,}", f"alpha={self.alpha:g}", f"{self.cells} tokens"],
                          self.tolerance, self.miss)


def power(n: int = DEFAULT_ROWS, vocab_size: int = 64, k: int = 2, *, alpha: float = DEFAULT_ALPHA,
          assertion: str = "lossless", acceptance: float | None = None, rows: int | None = None,
          miss: float = POWER_MISS, tolerance: float = 0.0) -> Power:
    """The power of :func:`assert_lossless` (``assertion="lossless"``) or :func:`assert_rule`
    (``"rule"``) at ``n`` (``rows`` verifier rows, default ``n``; enumeration runs a few more)
    over ``vocab_size`` tokens of positive ``p`` with ``k`` drafts. ``acceptance``: the
    optimum (lossless) or the rule's exact acceptance, where the acceptance power is
    evaluated; ``None``: the worst case. ``tolerance``: the dtype's (:func:`dtype_tolerance`).

    >>> round(power(200_000, 64, 2).tv, 3)
    0.016
    """
    if assertion not in TESTS:
        raise UnknownNameError(f"unknown assertion {assertion!r}; choose one of {tuple(TESTS)}")
    rows = n if rows is None else rows
    share = alpha / TESTS[assertion]
    tv = detectable_tv(n, rows, vocab_size, share, miss, tolerance)
    if assertion == "lossless":
        shift = detectable_shift(acceptance, n, rows, math.log(1 / share), miss, upward_only=True)
    else:
        none_mass = None if acceptance is None else 1 - acceptance
        level = set_threshold(k + 1, share, is_weighted(n, rows))
        shift = detectable_shift(none_mass, n, rows, level, miss, tolerance=tolerance)
    return Power(tv, shift, acceptance, n, rows, alpha, vocab_size, k, assertion, miss, tolerance)


def dtype_tolerance(dtype: torch.dtype, vocab_size: int) -> float:
    """The total variation a verifier computing in ``dtype`` may be off by without failing:
    :func:`otm.tolerances.softmax_sum_tolerance` (the dtype's epsilon and its accumulation's
    over ``vocab_size`` tokens; negligible in float32 and float64, 2^-7 in bfloat16)."""
    return softmax_sum_tolerance(str(dtype).replace("torch.", ""), vocab_size)


@dataclass(frozen=True, kw_only=True)
class Measured:
    """What every certificate holds (the assertions of :mod:`decoding.certify.chains` and
    :mod:`decoding.certify.trees` too).

    Attributes:
        vocab_size; mode: ``"enumeration"`` or ``"sampling"``; n, rows, alpha, seed, dtype,
            device: how it ran.
        tv_estimate: the estimated law's TV from the reference (noisy: for a lossless verifier
            the noise alone is a fraction of the power).
        control: what the negative controls did.
    """

    vocab_size: int
    mode: str
    n: int
    rows: int
    alpha: float
    seed: int
    dtype: str
    device: str
    tv_estimate: float
    control: str = "not run"


@dataclass(frozen=True, kw_only=True)
class Certificate(Measured):
    """What a certification measured (returned on success, attached to every failure), besides
    :class:`Measured`.

    Attributes:
        assertion: ``"lossless"`` or ``"rule"``; rule: the rule claimed, or ``None``.
        scheme, k; tuples: enumerated tuples.
        power: :class:`Power`.
        output_test: the set test of the output law; output_estimate: ``[V]`` the estimated
            output law ``P^`` (``tv_estimate``: ``TV(P^, p)``, about ``power.tv / 3`` from the
            noise alone for a lossless verifier).
        acceptance, acceptance_interval (at ``confidence``), rule_acceptance (the rule's
            exact one, ``assert_rule``), optimum (``alpha*(p, Q)``).
        position_test, tuple_test: ``assert_rule``'s tests (ii) and (iii) (``None`` where not run).
        cast_tv: how far casting to ``dtype`` moved ``p`` (the tests use the cast law).
    """

    assertion: str
    rule: str | None
    scheme: str
    k: int
    tuples: int | None
    power: Power
    output_test: SetTest
    output_estimate: np.ndarray  # [V]
    acceptance: float
    acceptance_interval: tuple[float, float]
    confidence: float
    rule_acceptance: float | None
    optimum: float
    cast_tv: float
    position_test: SetTest | None = None
    tuple_test: dict | None = None
    details: dict = field(default_factory=dict)

    @property
    def gap(self) -> float:
        """``alpha*(p, Q) - acceptance``: what an optimal verifier would add."""
        return self.optimum - self.acceptance

    def report(self) -> str:
        """The measurements, one per line (what a failure message ends with)."""
        lo, hi = self.acceptance_interval
        out = self.output_test
        claimed = f"rule {self.rule}" if self.rule else "verifier"
        lines = [
            f"{claimed} on {self.scheme} drafts, k={self.k}, V={self.vocab_size}, {self.mode}"
            + (f" of {self.tuples:,} tuples" if self.tuples else "")
            + f", n={self.n:,} ({self.rows:,} rows), {self.dtype} on {self.device}, seed={self.seed}",
            f"  output law: TV estimate {self.tv_estimate:.4g}; {set_test_line(out)}",
            f"  acceptance {self.acceptance:.4f} [{lo:.4f}, {hi:.4f}] at {self.confidence:.0%}"
            + (f"; rule {self.rule} exactly {self.rule_acceptance:.4f}" if self.rule_acceptance is not None else "")
            + f"; optimum for this draft law {self.optimum:.4f} (gap {self.gap:.4f})",
            f"  {self.power.describe()}",
            f"  negative control: {self.control}",
        ]
        if self.cast_tv > 0:
            lines.append(f"  casting p to {self.dtype} moved it by TV {self.cast_tv:.3g}; the tests use the cast law, "
                         f"up to a TV of {self.power.tolerance:.3g} for the dtype's rounding")
        return "\n".join(lines)


# --------------------------------------------------------------------------- the assertions


def assert_lossless(verify: VerifyFunction, p, q, k: int, scheme: str = "iid", *, n: int = DEFAULT_ROWS,
                    alpha: float = DEFAULT_ALPHA, seed: int = 0, device="cpu", dtype: torch.dtype = torch.float32,
                    detect_tv: float | None = None, detect_law=None, control: bool = True,
                    max_tuples: int = MAX_TUPLES, draft_sampler: DraftSampler | None = None) -> Certificate:
    """Assert that ``verify``'s output law is ``p`` for drafts of ``scheme`` (``iid``,
    ``without_replacement``, ``hub``, ``greedy``) from ``q`` (module docstring: the tests,
    false-alarm rate ``alpha`` = 1e-9 by default, power, controls).

    Args:
        verify: the verifier (toolkit contract).
        p: ``[V]`` target; q: ``[V]`` the law the drafts are drawn from; k: drafts per row.
        n: sample size (rows of weight one; enumeration runs a few more rows).
        seed: seeds the one ``torch.Generator`` every call draws from (deterministic).
        device, dtype: of the tensors given to the verifier (``p``, ``q`` cast; the
            reference law is the cast one, renormalised).
        detect_tv: raise :class:`Undetectable` unless every deviation of this total variation
            is detected with probability 0.99 at ``n``.
        detect_law: ``[V]`` the exact output law of a suspected bug: raise :class:`Undetectable`
            unless that deviation (its own shape: :func:`decoding.certify.bounds.law_miss_bound`)
            is detected with probability 0.99 at ``n``.
        control: run the negative control.
        max_tuples: enumerate draft laws with at most this many tuples.
        draft_sampler: ``(draft_probs [b, V], k, generator) -> [b, k]`` for sampled drafts.

    Returns the :class:`Certificate`. Raises :class:`OutputLawMismatch`,
    :class:`AcceptanceMismatch`, :class:`IndexMismatch`, :class:`NoPower` or
    :class:`Undetectable` (all :class:`AssertionError`); typed :mod:`otm.errors` for bad input.
    """
    return _certify("lossless", verify, None, p, q, k, scheme, n, alpha, seed, device, dtype, (detect_tv, detect_law),
                    control, max_tuples, draft_sampler)


def assert_rule(verify: VerifyFunction, rule: str, p, q, k: int, *, n: int = DEFAULT_ROWS,
                alpha: float = DEFAULT_ALPHA, seed: int = 0, device="cpu", dtype: torch.dtype = torch.float32,
                detect_tv: float | None = None, detect_law=None, control: bool = True,
                max_tuples: int = MAX_TUPLES, draft_sampler: DraftSampler | None = None) -> Certificate:
    """Assert that ``verify`` is ``rule`` (a name of :func:`otm.rules.rule_spec`) on drafts of
    the rule's own scheme: its output law, its law of the accepted position and, per draft
    tuple, its law of the output given the tuple equal the rule's exact law
    (:func:`otm.rule_law`), at false-alarm rate ``alpha`` (1e-9 by default); arguments and
    controls as :func:`assert_lossless`. Raises :class:`RuleMismatch` (naming the tuples or
    positions that deviate), :class:`OutputLawMismatch`, :class:`IndexMismatch`,
    :class:`NoPower`, :class:`Undetectable`."""
    spec = rule_spec(rule)
    if spec.draft_scheme not in ONE_Q_SCHEMES:
        raise NotApplicableError(f"rule {spec.name!r} draws each draft from its own q_i ({spec.draft_scheme}); "
                                 f"assert_rule takes one q: certify it with assert_lossless per q")
    return _certify("rule", verify, spec.name, p, q, k, spec.draft_scheme, n, alpha, seed, device, dtype,
                    (detect_tv, detect_law), control, max_tuples, draft_sampler)


def _check_arguments(p, q, k, scheme, n, alpha):
    if scheme not in ONE_Q_SCHEMES:
        raise UnknownNameError(f"unknown draft scheme {scheme!r}; choose one of {ONE_Q_SCHEMES}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InvalidArgumentError(f"n must be an integer >= 1, got {n!r}")
    if not (isinstance(alpha, (float, int)) and 0 < alpha < 1):
        raise InvalidArgumentError(f"alpha (the false-alarm rate) must be in (0, 1), got {alpha!r}")
    p, q = as_distribution_pair(p, q)
    return p, q, check_draft_count(k), int(n)


def _certify(assertion, verify, rule, p, q, k, scheme, n, alpha, seed, device, dtype, detect, control, max_tuples,
             draft_sampler) -> Certificate:
    p, q, k, n = _check_arguments(p, q, k, scheme, n, alpha)
    inputs = cast_inputs(p, q, dtype, device)
    count = draft_tuple_count(inputs.q, k, scheme)
    enumerate_ = count <= max_tuples
    exact = rule_law(rule, inputs.p, inputs.q, k, method="enumeration" if enumerate_ else "auto") if rule else None
    law = (exact.draft_law if exact is not None else draft_law(scheme, inputs.q, k)) if enumerate_ else None
    rows_planned = int(enumeration_copies(law.probs, n)[0].sum()) if law else n
    optimum = float(optimal_acceptance(inputs.p, inputs.q, k, draft_scheme=scheme))
    reference = np.asarray(exact.output_distribution, dtype=np.float64) if exact is not None else inputs.p
    rule_acceptance = float(exact.acceptance) if exact is not None else None
    cells = int((reference > IMPOSSIBLE_PROBABILITY).sum())
    tolerance = dtype_tolerance(dtype, inputs.p.size)
    strength = power(n, cells, k, alpha=alpha, assertion=assertion, rows=rows_planned,
                     acceptance=optimum if rule is None else rule_acceptance, tolerance=tolerance)
    require_detectable(*detect, reference, tv=strength.tv, n=n, rows=rows_planned, cells=cells, alpha=alpha,
                       share=alpha / TESTS[assertion], tolerance=tolerance, law="an output law", of="p", unit="tokens")
    generator = torch.Generator(device=inputs.target.device).manual_seed(seed)

    def run(target_inputs: Inputs) -> Rows:
        if law is not None:
            return enumerated_rows(verify, target_inputs, law, n, generator)
        return sampled_rows(verify, target_inputs, scheme, k, n, generator, draft_sampler)

    rows = run(inputs)
    share = alpha / TESTS[assertion]
    counts = rows.output_counts(inputs.p.size)
    output_test = set_test(counts, reference, n, rows.rows, share, tolerance)
    accepted = rows.acceptance_count()
    scale = n / rows.rows
    certificate = Certificate(
        assertion=assertion, rule=rule, scheme=scheme, k=k, vocab_size=int(inputs.p.size),
        mode="enumeration" if law is not None else "sampling", tuples=len(law.probs) if law is not None else None,
        n=n, rows=rows.rows, alpha=alpha, seed=seed, dtype=str(dtype).replace("torch.", ""),
        device=str(inputs.target.device), power=strength, output_test=output_test, output_estimate=counts / n,
        tv_estimate=0.5 * float(np.abs(counts / n - reference).sum()), acceptance=accepted / n,
        acceptance_interval=chernoff_interval(accepted / rows.rows, scale, rows.rows, DEFAULT_CONFIDENCE),
        confidence=DEFAULT_CONFIDENCE, rule_acceptance=rule_acceptance, optimum=optimum, cast_tv=inputs.cast_tv,
    )
    failures: list[tuple[type, str]] = []
    if rows.mismatched:
        failures.append((IndexMismatch, f"accepted_index points at a draft other than the output token in "
                                        f"{rows.mismatched:,} of {rows.rows:,} rows"))
    if not output_test.passed:
        failures.append((OutputLawMismatch, _output_failure(counts / n, reference, output_test, rule)))
    if rule is None:
        level = math.log(1 / share)
        above = float(upper_root(scale * optimum, level, rows.rows))
        if accepted / rows.rows >= above:
            failures.append((AcceptanceMismatch, f"acceptance {accepted / n:.4f} is above the optimum {optimum:.4f} "
                                                 f"of this draft law (impossible for a lossless verifier: it uses "
                                                 f"another q, or its output law is off)"))
    positions = None
    if rule is not None:
        positions = _position_law(exact, k)
        position_test = set_test(_position_counts(rows, k, positions.size), positions, n, rows.rows, share,
                                 tolerance, strict_zeros=False)
        tuple_test = _tuple_test(rows, exact, rule, share, tolerance) if law is not None else None
        certificate = replace(certificate, position_test=position_test, tuple_test=tuple_test)
        if not position_test.passed:
            failures.append((RuleMismatch, _position_failure(positions, position_test, rule, k)))
        if tuple_test is not None and not tuple_test["passed"]:
            failures.append((RuleMismatch, tuple_test["message"]))
    if failures:
        kind = failures[0][0]
        raise kind("FAIL: " + "; ".join(message for _, message in failures) + "\n" + certificate.report(), certificate)
    if control:
        certificate = replace(certificate, control=_controls(certificate, inputs, rows, run, reference, share, seed,
                                                                     positions))
    return certificate


# --------------------------------------------------------------------------- shared by every assertion


def require_detectable(detect_tv: float | None, detect_law, reference: np.ndarray, *, tv: float, n: int, rows: int,
                       cells: int, alpha: float, share: float, tolerance: float, law: str, of: str, unit: str) -> None:
    """:class:`Undetectable` (before anything runs) when a deviation asked for is not sure to be
    seen: ``detect_tv`` above the power ``tv``, or the law ``detect_law`` (``reference``'s
    shape) missed with probability above ``POWER_MISS`` by the test at ``share`` (the
    assertion's ``alpha``, shown, split among its tests). ``law``, ``of``, ``unit``: what the
    messages call the tested law, its reference and its cells."""
    if detect_tv is not None and not tv <= detect_tv:
        needed = samples_needed(detect_tv, cells, share, extra_rows=rows - n, tolerance=tolerance)
        raise Undetectable(f"undetectable at n={n:,}: a deviation of TV {detect_tv:.3g} from {of} is below the power "
                           f"(TV {tv:.3g} detected with probability {1 - POWER_MISS:g} at alpha={alpha:g}, {cells} "
                           f"{unit}); it needs n >= {needed:,}")
    if detect_law is None:
        return
    given = as_distribution(detect_law, "detect_law")
    if given.shape != reference.shape:
        raise ShapeMismatchError(f"detect_law is {law} over {reference.size} {unit}, got {given.size}")
    miss = law_miss_bound(reference, given, n, rows, share, tolerance)
    if miss > POWER_MISS:
        given_tv = total_variation(given, reference)
        if given_tv <= tolerance:
            raise Undetectable(f"undetectable at any n: the deviation given ({law} at TV {given_tv:.3g} from {of}) is "
                               f"within the {tolerance:.3g} allowed for rounding in this dtype")
        needed = samples_needed_for_law(reference, given, share, POWER_MISS, rows - n, tolerance)
        raise Undetectable(f"undetectable at n={n:,}: the deviation given ({law} at TV {given_tv:.3g} from {of}) is "
                           f"not sure to be detected (miss bound {miss:.3g} > {POWER_MISS:g} at alpha={alpha:g}); it "
                           f"needs n >= {needed:,}")


def target_control(certificate, reference: np.ndarray, rows: int, cells: int, share: float, tolerance: float,
                   twin_of: Callable, counts_of: Callable, *, law: str, of: str, given: str, verifier: str,
                   hint: str = "") -> str:
    """The negative control on the target (module docstring): the twin ``twin_of(tv)`` of the
    target at the deviation ``tv`` detected with probability ``1 - CONTROL_MISS`` (``None``
    where none exists) is run (``counts_of(twin)``: the weighted counts of its run) and must
    fail the set test against ``reference``; the line for the certificate, else
    :class:`NoPower`. ``given`` describes the twin (``{tv}`` is filled in)."""
    n = certificate.n
    tv = detectable_tv(n, rows, cells, share, CONTROL_MISS, tolerance)
    twin = twin_of(tv) if math.isfinite(tv) else None
    if twin is None:
        raise NoPower(f"no power here: at n={n:,} no {law} is sure to be told from {of} (a twin at TV {tv:.3g} "
                      f"cannot be built)\n" + certificate.report(), certificate)
    test = set_test(counts_of(twin), reference, n, rows, share, tolerance)
    given = given.format(tv=tv)
    if test.passed:
        raise NoPower(f"no power here: the same {verifier} given {given} was not detected (T={test.statistic:.4g} < "
                      f"{test.threshold:.4g}){hint}\n" + certificate.report(), certificate)
    return f"{given} detected (T={test.statistic:.4g} >= {test.threshold:.4g})"


def power_line(detected: str, parts: list[str], tolerance: float, miss: float = POWER_MISS) -> str:
    """A certificate's power line: ``detected`` with probability ``1 - miss``, then ``parts``
    (and the dtype tolerance where it shows) in parentheses."""
    shown = [*parts, f"dtype tolerance {tolerance:.3g}"] if tolerance >= SHOWN_TOLERANCE else parts
    return f"power: with probability >= {1 - miss:g}, {detected} ({', '.join(shown)})"


def set_test_line(test: SetTest) -> str:
    """The set test's statistic, threshold and p-value bound, for a certificate's report."""
    return f"set test T={test.statistic:.4g} vs threshold {test.threshold:.4g} ({_p_bound(test.p_bound)})"


def worst_tokens(observed: np.ndarray, reference: np.ndarray, count: int = 3) -> str:
    """The ``count`` tokens whose observed frequency is farthest from the reference, listed."""
    worst = np.argsort(-np.abs(observed - reference), kind="stable")[:count]
    return ", ".join(f"token {y}: {observed[y]:.4f} vs {reference[y]:.4f}" for y in worst)


# --------------------------------------------------------------------------- failure messages


def _output_failure(observed: np.ndarray, reference: np.ndarray, test: SetTest, rule: str | None) -> str:
    what = f"rule {rule}'s output law" if rule else "p"
    if math.isinf(test.statistic):
        tokens = ", ".join(f"{y} ({observed[y]:.3g})" for y in test.deviating[:5])
        return f"output law is not {what}: it outputs tokens of probability 0: {tokens}"
    return (f"output law is not {what}: TV estimate {0.5 * float(np.abs(observed - reference).sum()):.4g}; the "
            f"tokens {_short(test.deviating)} carry {test.observed_mass:.4f} instead of {test.expected_mass:.4f}; "
            f"worst tokens {worst_tokens(observed, reference)}")


def _position_failure(positions: np.ndarray, test: SetTest, rule: str, k: int) -> str:
    names = [f"draft {j + 1}" for j in range(k)] + ["not a draft"]
    cells = " or ".join(names[c] for c in test.deviating)
    return (f"not rule {rule}: the output is {cells} with probability {test.observed_mass:.4f} instead of "
            f"{test.expected_mass:.4f} (acceptance = 1 - P(not a draft) = {1 - positions[k]:.4f} exactly)")


def _p_bound(bound: float) -> str:
    return "p < 1e-300" if bound <= 0 else f"p <= {bound:.3g}"


def _short(tokens: np.ndarray, limit: int = 8) -> str:
    shown = ", ".join(str(int(t)) for t in tokens[:limit])
    return "{" + shown + (f", ... {len(tokens) - limit} more" if len(tokens) > limit else "") + "}"


# --------------------------------------------------------------------------- rule identity


def _position_law(exact, k: int) -> np.ndarray:
    """``[k + 1]``: the exact probability that the output is first equal to draft ``j``, and
    (last) that it is no draft; from the rule's coupling where it has one, else its
    acceptance only (two cells: any draft / none)."""
    coupling = exact.details.get("coupling")
    acceptance = float(exact.acceptance)
    if coupling is None or exact.draft_law is None:
        return np.array([acceptance, 1 - acceptance])
    law = exact.draft_law
    first = law.first_occurrence()
    out = np.zeros(k + 1)
    for j in range(k):
        out[j] = float(np.asarray(coupling, dtype=np.float64)[np.arange(len(law.probs)), law.tuples[:, j]][first[:, j]].sum())
    out[k] = max(0.0, 1 - out[:k].sum())
    return out


def _position_counts(rows: Rows, k: int, cells: int) -> np.ndarray:
    positions = rows.positions()
    if cells == 2:  # acceptance only
        positions = np.where(positions < k, 0, 1)
    return np.bincount(positions, weights=rows.weights, minlength=cells)


def _tuple_test(rows: Rows, exact, rule: str, alpha: float, tolerance: float) -> dict:
    """Test (iii): for each enumerated tuple, the output's law on the cells "each distinct
    draft" and "not a draft" against the rule's ``K(. | x)``, one threshold for all
    (union bound over tuples and sets)."""
    law = exact.draft_law
    tuples, probs = law.tuples, np.asarray(law.probs, dtype=np.float64)
    kernel = np.asarray(exact.details["coupling"], dtype=np.float64) / probs[:, None]  # [T, V] K(y | x)
    vocab = kernel.shape[1]
    counts = np.bincount(rows.owner * vocab + rows.tokens, minlength=len(probs) * vocab).reshape(len(probs), vocab)
    first = law.first_occurrence()
    results, log_sets = [], []
    for t in range(len(probs)):
        drafts = tuples[t][first[t]]
        expected = np.append(kernel[t, drafts], max(0.0, 1 - kernel[t, drafts].sum()))
        observed = np.append(counts[t, drafts], counts[t].sum() - counts[t, drafts].sum())
        trials = int(observed.sum())
        statistic, deviating, obs_mass, exp_mass, cells = set_statistic(observed, expected, trials, trials, tolerance,
                                                                        strict_zeros=False)
        if cells >= 2:
            log_sets.append(set_threshold(cells, 1.0))
        results.append((statistic, t, deviating, obs_mass, exp_mass, drafts, trials))
    threshold = (float(np.logaddexp.reduce(log_sets)) if log_sets else 0.0) - math.log(alpha)
    failing = sorted((r for r in results if r[0] >= threshold and r[0] > 0), key=lambda r: -r[0])
    message = ""
    if failing:
        parts = []
        for statistic, t, deviating, obs_mass, exp_mass, drafts, trials in failing[:3]:
            names = [f"token {int(x)}" for x in drafts] + ["no draft"]
            cells = " or ".join(names[c] for c in deviating)
            parts.append(f"tuple {tuple(int(x) for x in tuples[t])} ({trials} rows): output {cells} with "
                         f"frequency {obs_mass:.3f}, exactly {exp_mass:.3f}")
        message = (f"not rule {rule}: the accept law of {len(failing)} of {len(probs)} draft tuples "
                   f"deviates from the rule's: " + "; ".join(parts))
    return {"passed": not failing, "threshold": threshold, "failing": len(failing), "tuples": len(probs),
            "statistic": max((r[0] for r in results), default=0.0), "message": message}


# --------------------------------------------------------------------------- negative controls


def _target_twin(p: np.ndarray, tv: float) -> np.ndarray | None:
    """``p' = (1 - lam) p + lam r`` at ``TV(p', p) = tv`` exactly: ``r`` is ``p`` restricted to
    the least likely positive tokens ``L`` of total mass at most 1/2 (the hardest shape for
    the set test), ``lam = tv / (1 - p(L))``; ``None`` when ``lam`` would exceed 1."""
    positive = np.flatnonzero(p > IMPOSSIBLE_PROBABILITY)
    if positive.size < 2:
        return None
    order = positive[np.argsort(p[positive], kind="stable")]
    size = max(1, int(np.searchsorted(np.cumsum(p[order]), 0.5, side="right")))
    low = order[:size]
    mass = float(p[low].sum())
    lam = tv / (1 - mass)
    if not lam <= 1:
        return None
    r = np.zeros_like(p)
    r[low] = p[low] / mass
    return (1 - lam) * p + lam * r


def _controls(certificate: Certificate, inputs: Inputs, rows: Rows, run, reference: np.ndarray, share: float,
              seed: int, positions: np.ndarray | None) -> str:
    """Run the negative controls (module docstring); the line for the certificate, or :class:`NoPower`."""
    line = target_control(
        certificate, reference, rows.rows, certificate.output_test.cells, share, certificate.power.tolerance,
        lambda tv: _target_twin(inputs.p, tv),
        lambda twin: run(cast_inputs(twin, inputs.q, inputs.target.dtype, inputs.target.device)).output_counts(inputs.p.size),
        law="output law", of="p", given="a target at TV {tv:.4g} from p", verifier="verifier",
        hint=": does it read the target it is given?")
    if positions is None:
        return line
    return line + "; " + _acceptance_control(certificate, rows, positions, share, seed)


def _acceptance_control(certificate: Certificate, rows: Rows, positions: np.ndarray, share: float, seed: int) -> str:
    """Move the outputs of the main run into or out of the drafts by a known acceptance
    change and check that test (ii) sees it."""
    n, k = certificate.n, certificate.k
    acceptance = certificate.rule_acceptance
    level = set_threshold(positions.size, share, is_weighted(n, rows.rows))
    shift = detectable_shift(1 - acceptance, n, rows.rows, level, CONTROL_MISS, tolerance=certificate.power.tolerance)
    member = rows.positions() < k
    coins = np.random.default_rng(seed).random(rows.rows)
    tokens = rows.tokens.copy()
    if acceptance >= shift:
        moved = member & (coins < shift / acceptance)
        outside = (rows.drafts[:, :, None] != np.arange(k + 1)).all(axis=1)  # [N, k + 1] tokens 0..k not drafted
        tokens[moved] = outside.argmax(axis=1)[moved]
    elif 1 - acceptance >= shift:
        moved = ~member & (coins < shift / (1 - acceptance))
        tokens[moved] = rows.drafts[moved, 0]
    else:
        raise NoPower(f"no power here: an acceptance change of {shift:.3g} cannot be built at acceptance "
                      f"{acceptance:.4f}\n" + certificate.report(), certificate)
    twin = Rows(rows.drafts, tokens, rows.weights, rows.owner, rows.n, 0)
    test = set_test(_position_counts(twin, k, positions.size), positions, n, twin.rows, share,
                    certificate.power.tolerance, strict_zeros=False)
    if test.passed:
        raise NoPower(f"no power here: an acceptance changed by {shift:.4g} was not detected (T={test.statistic:.4g} "
                      f"< {test.threshold:.4g})\n" + certificate.report(), certificate)
    return f"an acceptance changed by {shift:.4g} detected (T={test.statistic:.4g} >= {test.threshold:.4g})"
