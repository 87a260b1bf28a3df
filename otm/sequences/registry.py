"""The registry of sequence-level verifiers: every fact about one, written once.

A *sequence-level* verifier decides on a whole draft chain or draft tree at once and emits
an accepted draft path plus one token (docs/sequences.md, section 1), unlike the per-node
selection rules of :mod:`otm.rules.registry`, which see one node's ``k`` drafts and whose
exact laws take ``(p, q, k)``. The two registries are kept apart because the exact laws
differ in kind: here they take a :class:`otm.sequences.model.SequenceModel` and a tree
shape and return an :class:`otm.sequences.output_law.OutputLaw`.

Each verifier is one :class:`SequenceRuleSpec`; ``otm decode --rule`` and the decoding
loop route these names (:data:`SEQUENCE_RULES`) to the batched verifier module named by
``verifier`` under :mod:`decoding.verifiers`.

>>> sequence_rule_spec("block").tree_shape, sequence_rule_spec("traversal").draft_scheme
('chain', 'without_replacement')
>>> str(sequence_rule_spec("block").reference)
'Sun, Mendlovic, Leviathan, Aharoni, Ro, Beirami, Suresh, "Block Verification Accelerates Speculative Decoding", 2025, arXiv:2403.10444'
>>> from fractions import Fraction as F
>>> from otm.sequences.model import context_independent_model
>>> m = context_independent_model([F(1, 3), F(2, 3)], [F(2, 3), F(1, 3)], 3)
>>> sequence_rule_spec("block").exact_law(m, 2).expected_accepted()   # Sun et al. 2025's example
Fraction(11, 9)
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass

from ..errors import NotApplicableError, UnknownNameError
from .output_law import OutputLaw

#: The draft shapes a sequence verifier applies to: one chain (``k = 1`` at every node) or
#: any tree.
TREE_SHAPES = ("chain", "tree")

#: The sibling draft laws a tree verifier's exact law and sampler support.
SIBLING_SCHEMES = ("iid", "without_replacement")


@dataclass(frozen=True)
class PaperReference:
    """A paper: ``authors, "title"``, its year and arXiv id (bibliography: docs/references.md)."""

    paper: str
    year: int
    arxiv: str

    def __str__(self) -> str:
        return f"{self.paper}, {self.year}, arXiv:{self.arxiv}"


@dataclass(frozen=True)
class SequenceRuleSpec:
    """What the toolkit knows about one sequence-level verifier.

    Attributes:
        name: its name everywhere (``otm decode --rule NAME``).
        title: a few words for tables and help texts.
        reference: the paper it comes from.
        tree_shape: ``"chain"`` (one draft chain, e.g. ``chain:4``) or ``"tree"`` (any draft
            tree), :data:`TREE_SHAPES`.
        module: the module under :mod:`otm.sequences` holding its exact law.
        law_function: the function of ``module`` computing the exact law:
            ``f(model, g)`` for a chain of ``g`` drafts, ``f(model, depth, k, draft)`` for a
            full ``k``-ary tree whose siblings come from the scheme ``draft``.
        draft_scheme: how the siblings of a tree node are drawn (:data:`SIBLING_SCHEMES`);
            for a chain (one child per node) both schemes are the same law.
        verifier: the module under :mod:`decoding.verifiers` with its batched sampler.
    """

    name: str
    title: str
    reference: PaperReference
    tree_shape: str
    module: str
    law_function: str
    draft_scheme: str
    verifier: str

    def exact_law(self, model, depth: int, k: int = 1, draft: str | None = None) -> OutputLaw:
        """The exact law of one step's output on ``model``: a chain of ``depth`` drafts
        (``k`` must be 1), or a full ``k``-ary tree of ``depth`` levels with siblings drawn
        by ``draft`` (default: :attr:`draft_scheme`)."""
        function = getattr(importlib.import_module(f"{__package__}.{self.module}"), self.law_function)
        if self.tree_shape == "chain":
            if k != 1:
                raise NotApplicableError(f"{self.name} verification verifies one draft chain (k = 1), got k={k}; "
                                         "use 'traversal' for trees")
            return function(model, depth)
        return function(model, depth, k, draft or self.draft_scheme)


#: Every sequence-level verifier, in the order tables list them.
SEQUENCE_RULES: dict[str, SequenceRuleSpec] = {spec.name: spec for spec in (
    SequenceRuleSpec(
        "block", "block verification",
        PaperReference('Sun, Mendlovic, Leviathan, Aharoni, Ro, Beirami, Suresh, '
                       '"Block Verification Accelerates Speculative Decoding"', 2025, "2403.10444"),
        "chain", "block_verification", "block_verification_law", "iid", "block",
    ),
    SequenceRuleSpec(
        "traversal", "traversal verification",
        PaperReference('Weng, Hu, Chen, Liu, Mei, Qiu, Tian, Shi, '
                       '"Traversal Verification for Speculative Tree Decoding"', 2025, "2505.12398"),
        "tree", "traversal", "traversal_law", "without_replacement", "traversal",
    ),
)}


def sequence_rule_spec(name: str) -> SequenceRuleSpec:
    """The spec of the sequence verifier ``name``; :class:`otm.errors.UnknownNameError`
    otherwise (per-node rules live in :func:`otm.rules.registry.rule_spec`)."""
    spec = SEQUENCE_RULES.get(name) if isinstance(name, str) else None
    if spec is None:
        raise UnknownNameError(f"unknown sequence verifier {name!r}; choose one of {', '.join(SEQUENCE_RULES)} "
                               "(per-node rules such as 'rrs' are in otm.rules.registry)")
    return spec


__all__ = ["SEQUENCE_RULES", "SIBLING_SCHEMES", "TREE_SHAPES", "PaperReference", "SequenceRuleSpec", "sequence_rule_spec"]
