"""Exactness one level up: chains and trees of drafts (docs/sequences.md).

Everything else in :mod:`otm` is per node (one ``p``, one ``q``, ``k`` drafts). Here the
target ``P`` and the draft ``Q`` are laws over token sequences, given as tables of
next-token conditionals (:class:`SequenceModel`), and a verifier emits an accepted draft
path plus one token per step (:class:`OutputLaw`). Exact laws (Fractions on exact models),
expected accepted lengths and optima for

- one draft block: token-wise verification (Leviathan et al. 2023, arXiv:2211.17192),
  block verification (Sun et al. 2025, arXiv:2403.10444), the chain optimum in closed form
  and as LPs (:mod:`otm.sequences.chain_optimum`, :mod:`otm.sequences.sequence_lp`);
- draft trees: node-by-node walks with any registry rule (:mod:`otm.sequences.tree_rules`),
  traversal verification (Weng et al. 2025, arXiv:2505.12398), the tree-level optimum by LP
  (:mod:`otm.sequences.tree_lp`);
- the claims as checks with slacks (:mod:`otm.sequences.checks`).

>>> from fractions import Fraction as F
>>> from otm.sequences import any_output_optimum, block_expected_accepted, context_independent_model, tokenwise_expected_accepted
>>> m = context_independent_model([F(1, 3), F(2, 3)], [F(2, 3), F(1, 3)], 3)
>>> tokenwise_expected_accepted(m, 2), block_expected_accepted(m, 2), any_output_optimum(m, 2)
(Fraction(10, 9), Fraction(11, 9), Fraction(4, 3))
"""
from .block_verification import (
    block_expected_accepted,
    block_verification_law,
    block_weights,
    stop_probabilities,
)
from .chain_optimum import (
    any_output_optimum,
    draft_prefix_optimum,
    optimal_through_masses,
)
from .chain_tokenwise import (
    tokenwise_expected_accepted,
    tokenwise_law,
    tokenwise_law_by_enumeration,
)
from .checks import (
    Verdict,
    check_block_attains_chain_optimum,
    check_block_never_worse_than_tokenwise,
    check_block_verification_lossless,
    check_lossless,
    check_traversal_lossless,
    check_traversal_on_chain_is_block_verification,
    check_tree_rule_within_optimum,
    check_tree_walk_lossless,
)
from .draft_trees import path_set_law
from .lp_tools import SequenceLPResult
from .model import (
    SequenceModel,
    context_independent_model,
    from_level_arrays,
    random_model,
    sequence_model,
)
from .node_optimum import optimal_node_law, optimal_node_rule
from .output_law import OutputLaw, extended_law, lossless_gap
from .sequence_lp import solve_chain_optimum
from .traversal import traversal_law, traversal_law_by_enumeration
from .tree_lp import solve_tree_optimum
from .tree_rules import tree_walk_expected_accepted, tree_walk_law

__all__ = [
    "OutputLaw",
    "SequenceLPResult",
    "SequenceModel",
    "Verdict",
    "any_output_optimum",
    "block_expected_accepted",
    "block_verification_law",
    "block_weights",
    "check_block_attains_chain_optimum",
    "check_block_never_worse_than_tokenwise",
    "check_block_verification_lossless",
    "check_lossless",
    "check_traversal_lossless",
    "check_traversal_on_chain_is_block_verification",
    "check_tree_rule_within_optimum",
    "check_tree_walk_lossless",
    "context_independent_model",
    "draft_prefix_optimum",
    "extended_law",
    "from_level_arrays",
    "lossless_gap",
    "optimal_node_law",
    "optimal_node_rule",
    "optimal_through_masses",
    "path_set_law",
    "random_model",
    "sequence_model",
    "solve_chain_optimum",
    "solve_tree_optimum",
    "stop_probabilities",
    "tokenwise_expected_accepted",
    "tokenwise_law",
    "tokenwise_law_by_enumeration",
    "traversal_law",
    "traversal_law_by_enumeration",
    "tree_walk_expected_accepted",
    "tree_walk_law",
]
