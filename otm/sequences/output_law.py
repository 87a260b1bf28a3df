"""What a sequence-level verifier emits in one step, and when that is lossless.

**Output.** One verification step emits ``O = (u, y)``: the accepted draft tokens ``u``
(a path of the draft block or tree, ``tau = |u|`` tokens, possibly none) followed by one
token ``y`` sampled by the verifier (the correction after a rejection, or the bonus token
when the whole block is accepted). So ``|O| = tau + 1`` tokens are produced per step and
``tau`` drafted tokens are accepted. An :class:`OutputLaw` is the exact law of ``O``.

**Losslessness.** Decoding continues from ``O`` with the target, so a verifier is lossless
when the emitted tokens, extended by sampling the target, are distributed like the target:
for a horizon ``n`` at least the longest output,

    sum_{l = 1..n} m(z_{<=l}) P(z_{l+1..n} | z_{<=l}) = P(z)    for every z in V^n,   (L)

``m`` the law of ``O``. (L) at ``n`` implies (L) at every shorter horizon (sum over the last
tokens) and at every longer one (multiply by the target's conditionals), and by induction
over decoding steps it makes the whole generated text follow ``P``. This is the validity
notion of Sun et al. 2025 (block verification) as we read it, written as one identity.
Equivalently (docs/sequences.md, section 1): with ``A(s) = P(tau >= |s|, u_{<=|s|} = s)``,
(L) holds iff ``m(s y) = A(s) p(y | s) - A(s y)`` for every prefix ``s`` and token ``y``.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ..errors import InvalidDistributionError
from .model import SequenceModel


@dataclass(frozen=True, eq=False)
class OutputLaw:
    """The exact law of one step's output ``O = (accepted tokens, one more token)``.

    Attributes:
        masses: ``{sequence tuple: probability}``; a sequence of length ``tau + 1`` means
            ``tau`` accepted draft tokens and one emitted token. Zero masses are left out.
        method: the verifier that produced it (``"tokenwise"``, ``"block"``, ...).
    """

    masses: dict
    method: str = ""

    def total(self):
        """Sum of the masses (1 for a complete law)."""
        return sum(self.masses.values(), _zero(self.masses))

    def expected_accepted(self):
        """``E[tau]``: expected number of accepted draft tokens."""
        return sum(((len(s) - 1) * m for s, m in self.masses.items()), _zero(self.masses))

    def expected_tokens(self):
        """``E[tau + 1]``: expected number of tokens produced by the step."""
        return sum((len(s) * m for s, m in self.masses.items()), _zero(self.masses))

    def accepted_length_distribution(self) -> dict:
        """``{tau: P(tau accepted draft tokens)}``."""
        out: dict = {}
        for s, m in self.masses.items():
            out[len(s) - 1] = out.get(len(s) - 1, 0) + m
        return out

    def through_masses(self) -> dict:
        """``{s: A(s)}`` for every non-empty accepted prefix: ``A(s) = P(tau >= |s|, u starts
        with s)``; ``E[tau] = sum_s A(s)``."""
        out: dict = {}
        for sequence, m in self.masses.items():
            accepted = sequence[:-1]
            for i in range(1, len(accepted) + 1):
                out[accepted[:i]] = out.get(accepted[:i], 0) + m
        return out

    def longest(self) -> int:
        """Length of the longest output sequence (0 for an empty law)."""
        return max((len(s) for s in self.masses), default=0)


def _zero(masses: dict):
    return Fraction(0) if any(isinstance(m, Fraction) for m in masses.values()) else 0.0


def add_mass(masses: dict, sequence: tuple, mass) -> None:
    """``masses[sequence] += mass``, skipping zero masses (keeps laws sparse)."""
    if mass:
        masses[sequence] = masses.get(sequence, 0) + mass


def extended_law(model: SequenceModel, law: OutputLaw, horizon: int) -> dict:
    """``{z in V^horizon: mass}``: the output extended to ``horizon`` tokens by the target,
    the left side of (L). Outputs longer than ``horizon`` are refused."""
    if law.longest() > horizon:
        raise InvalidDistributionError(f"horizon={horizon} is shorter than the longest output ({law.longest()} tokens)")
    model.require_length(horizon, "extending the outputs")
    out: dict = {}
    for item in law.masses.items():
        pending = [item]  # depth first, without recursion: horizons can exceed Python's limit
        while pending:
            sequence, mass = pending.pop()
            if len(sequence) == horizon:
                out[sequence] = out.get(sequence, 0) + mass
                continue
            row = model.target(sequence)
            pending.extend((sequence + (y,), mass * row[y]) for y in range(model.vocab_size) if row[y])
    return out


def lossless_gap(model: SequenceModel, law: OutputLaw, horizon: int | None = None):
    """``max_z |extended(z) - P(z)|`` over ``z in V^horizon`` (default: the longest output),
    the violation of (L): exactly 0 for a lossless exact law.

    >>> from fractions import Fraction as F
    >>> from otm.sequences.model import context_independent_model
    >>> m = context_independent_model([F(1, 2), F(1, 2)], [F(1), F(0)], 2)
    >>> lossless_gap(m, OutputLaw({(0,): F(1, 2), (1,): F(1, 2)}))      # one target token
    Fraction(0, 1)
    >>> lossless_gap(m, OutputLaw({(0, 1): F(1)}))                    # always "0 then 1"
    Fraction(3, 4)
    """
    horizon = law.longest() if horizon is None else horizon
    extended = extended_law(model, law, horizon)
    gap = model.zero()
    for z in model.sequences(horizon):
        gap = max(gap, abs(extended.get(z, 0) - model.target_prob(z)))
    return gap
