"""The sequence-level claims as checks: each returns a :class:`Verdict` whose ``slack`` is
``>= 0`` exactly when the claim holds on the instance (the slack convention of the theorem
suite: ``rhs - lhs`` for ``lhs <= rhs``, ``-|lhs - rhs|`` for ``lhs == rhs``), so it can be fed
to the suite's search loop instance by instance.

Every check computes the claimed object itself by default; passing ``law=`` / ``value=``
checks that object instead, which is how the tests show each check failing on a deliberately
broken verifier. Exact slacks (Fractions) are judged with tolerance 0, float ones with
:data:`otm.tolerances.AGREEMENT_TOLERANCE`.

Claims: block verification (Sun et al. 2025, arXiv:2403.10444) is lossless, attains the
chain optimum of draft-prefix verifiers and is never worse than token-wise verification
(Leviathan et al. 2023, arXiv:2211.17192); traversal verification (Weng et al. 2025,
arXiv:2505.12398) is lossless and reduces to block verification on a chain; node-by-node
tree walks are lossless and stay within the tree-level optimum (the gap is reported).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from ..errors import UnknownNameError
from ..rules import rule_spec
from ..tolerances import AGREEMENT_TOLERANCE
from .block_verification import block_verification_law
from .chain_optimum import draft_prefix_optimum
from .chain_tokenwise import tokenwise_expected_accepted
from .model import SequenceModel
from .output_law import OutputLaw, lossless_gap
from .traversal import traversal_law
from .tree_lp import solve_tree_optimum
from .tree_rules import tree_walk_expected_accepted, tree_walk_law


@dataclass(frozen=True)
class Verdict:
    """Outcome of one check on one instance.

    Attributes:
        claim: the statement checked.
        slack: ``>= 0`` when the claim holds (exact Fraction for exact models).
        tolerance: a slack ``>= -tolerance`` counts as holding (0 when exact).
        details: the numbers behind the slack.
    """

    claim: str
    slack: object
    tolerance: float
    details: dict = field(default_factory=dict)

    @property
    def holds(self) -> bool:
        return self.slack >= -self.tolerance


def _verdict(claim: str, slack, **details) -> Verdict:
    return Verdict(claim, slack, 0.0 if isinstance(slack, Fraction) else AGREEMENT_TOLERANCE, details)


def check_lossless(model: SequenceModel, law: OutputLaw, claim: str = "the verifier is lossless") -> Verdict:
    """Losslessness (L) of :mod:`otm.sequences.output_law` at the longest output length:
    slack ``= -max_z |extended(z) - P(z)|``."""
    return _verdict(claim, -lossless_gap(model, law), method=law.method)


def check_block_verification_lossless(model: SequenceModel, g: int, law: OutputLaw | None = None) -> Verdict:
    """Block verification's output, extended by the target, follows ``P``."""
    law = block_verification_law(model, g) if law is None else law
    return check_lossless(model, law, f"block verification of g={g} drafts is lossless")


def check_block_attains_chain_optimum(model: SequenceModel, g: int, value=None) -> Verdict:
    """``E[tau]`` of block verification equals the draft-prefix optimum
    (:func:`otm.sequences.chain_optimum.draft_prefix_optimum`): slack ``-|optimum - value|``."""
    value = block_verification_law(model, g).expected_accepted() if value is None else value
    optimum = draft_prefix_optimum(model, g)
    return _verdict(f"block verification of g={g} drafts attains the chain optimum", -abs(optimum - value),
                    value=value, optimum=optimum)


def check_block_never_worse_than_tokenwise(model: SequenceModel, g: int, value=None) -> Verdict:
    """``E[tau]`` of block verification ``>=`` that of token-wise verification: slack
    ``value - tokenwise``."""
    value = block_verification_law(model, g).expected_accepted() if value is None else value
    tokenwise = tokenwise_expected_accepted(model, g)
    return _verdict(f"block verification of g={g} drafts is never worse than token-wise", value - tokenwise,
                    value=value, tokenwise=tokenwise)


def check_traversal_lossless(model: SequenceModel, depth: int, k: int, draft="without_replacement",
                             law: OutputLaw | None = None) -> Verdict:
    """Traversal verification's output, extended by the target, follows ``P``."""
    law = traversal_law(model, depth, k, draft) if law is None else law
    return check_lossless(model, law, f"traversal verification (depth {depth}, k={k}, {draft}) is lossless")


def check_traversal_on_chain_is_block_verification(model: SequenceModel, g: int, law: OutputLaw | None = None) -> Verdict:
    """With one draft per node, traversal verification has block verification's exact law:
    slack ``-max |difference of the two laws|``."""
    law = traversal_law(model, g, 1) if law is None else law
    block = block_verification_law(model, g).masses
    keys = set(law.masses) | set(block)
    slack = -max((abs(law.masses.get(s, 0) - block.get(s, 0)) for s in keys), default=model.zero())
    return _verdict(f"traversal verification of a chain of {g} is block verification", slack)


def check_tree_walk_lossless(model: SequenceModel, depth: int, k: int, rule, **params) -> Verdict:
    """The node-by-node walk with ``rule`` (:mod:`otm.sequences.tree_rules`) is lossless."""
    return check_lossless(model, tree_walk_law(model, depth, k, rule, **params),
                          f"the tree walk with {getattr(rule, '__name__', rule)} (depth {depth}, k={k}) is lossless")


def check_tree_rule_within_optimum(model: SequenceModel, depth: int, k: int, rule, draft=None, value=None,
                                   backend: str = "highs", **params) -> Verdict:
    """``E[tau]`` of the walk with ``rule`` is at most the tree-level optimum
    (:func:`otm.sequences.tree_lp.solve_tree_optimum`) for the rule's own per-node draft law
    (``draft``; default: the registry's ``draft_scheme`` of ``rule``): slack ``optimum - value``,
    ``details["gap"]`` the same number (how much the tree as a whole could add)."""
    if draft is None:
        if not isinstance(rule, str):
            raise UnknownNameError("a callable rule has no registry draft scheme: pass draft= (e.g. 'iid')")
        draft = rule_spec(rule).draft_scheme
    value = tree_walk_expected_accepted(model, depth, k, rule, **params) if value is None else value
    optimum = solve_tree_optimum(model, depth, k, draft, backend=backend)
    if not optimum.exact and model.exact:
        value = float(value)
    return _verdict(f"the tree walk with {getattr(rule, '__name__', rule)} stays within the tree optimum",
                    optimum.value - value, value=value, optimum=optimum.value, gap=optimum.value - value,
                    optimum_exact=optimum.exact)
