"""Bring your own chain or tree verifier: is it lossless over sequences, how many drafts does
it accept, how far is that from the best any lossless verifier can do?

:func:`validate_tree_verifier` holds a user's torch verifier of a whole draft chain or draft
tree (one speculative step) to a small exact model of the target ``P`` and the draft ``Q``
over token sequences (:class:`otm.sequences.SequenceModel`; docs/sequences.md).

**The verifier's signature** (that of :func:`decoding.verifiers.traversal.verify`, which the
decoding loop calls, :func:`decoding.runtime.tree_walk.walk_sequence`)::

    verifier(tree,           # decoding.runtime.trees.Tree: tree.parent [n_nodes], breadth-first,
                             #   node 0 = the root (the last committed token), same tree every row
             draft_tokens,   # [batch, n_nodes] int64: node j's draft token (column 0 unused, 0)
             target_probs,   # [batch, n_nodes, vocab]: p(. | tokens on the path to node j)
             draft_probs,    # [batch, n_nodes, vocab]: q(. | tokens on the path to node j), the
                             #   law node j's children were drawn from (after temperature/top-p)
             generator)      # torch.Generator
        -> an object with accepted_node [batch] int64 (0: no draft accepted) and tokens [batch]
           int64 (the emitted token); or, on a chain, n_accepted instead of accepted_node
           (block verification's output); or the tuple (accepted_node, tokens).

The step emits the tokens on the path to the accepted node, then the emitted token
(docs/sequences.md, section 1). Trees: any :func:`decoding.runtime.trees.parse_tree` spec
(``chain:g``, ``chains:K,D``, ``binary:d``, ``kary:k,d``, ``branching:...``). The children of a
node are drawn together from ``q`` at that node with the sibling law ``scheme`` (``iid``,
``without_replacement``, ``hub``, ``greedy``; a node with one child draws from ``q``), each
child with its own subtree, as the decoding loop drafts (:func:`decoding.runtime.tree_walk.draft_children`).
Adapters: :func:`chain_verifier` (a verifier of one chain with block verification's signature,
:func:`decoding.verifiers.block.verify`) and :func:`node_walk_verifier` (the decoding loop's
node-by-node walk with a per-node rule).

**Losslessness** (condition (L) of docs/sequences.md, section 1): the output ``O``,
extended by sampling the target, must follow ``P``. Two chi-square tests of it on the
estimated output law ``m^`` (:func:`decoding.validation.stats.chi_square_test`, small cells
pooled), each at ``alpha / 2``, so a lossless verifier fails with probability at most
``alpha`` (up to the chi-square approximation):

- :func:`next_token_test`: (L) in the form of docs/sequences.md, Lemma 1 -- among the
  outputs that go through a prefix ``s`` and have a token after it, that token has law
  ``p(. | s)``; one Pearson statistic per prefix, summed with their degrees of freedom
  (given the outputs' first ``|s|`` tokens and whether they go on, the next tokens at the
  prefixes of one length are independent multinomials). The sharp test.
- :func:`extended_law_test`: (L) as stated -- ``m^`` extended exactly by the target to the
  horizon ``n = depth + 1``, ``ext(z) = sum_l m^(z_<=l) P(z_>l | z_<=l)``, against ``P``
  over ``V^n`` (cells with ``N P(z) < 5`` pooled, found by a pruned walk of the prefix
  tree). Conservative (the extension is a stochastic map, so it shrinks the covariance),
  hence weaker; it is kept as the literal statement of (L).

An output with a token of target probability 0 given its prefix fails both outright (no
false alarm: a lossless verifier puts mass ``m(o) <= P(o)`` on every output). The
false-alarm bound holds in both modes below because the covariance of ``m^`` is at most
that of a multinomial sample of size ``N``, and a smaller Gaussian covariance puts less
mass outside the ellipsoid a chi-square test rejects (Anderson's theorem; our derivation,
docs/howto-validate-verifier.md, "Chains and trees").

Two modes:

``"enumeration"`` (small vocabularies: at most ``max_trees`` draft trees).
    Every draft tree ``x`` with ``Q(x) > 0`` is listed with its **exact** weight (the product
    of the sibling laws, :func:`otm.draft_laws.draft_law`), and the verifier runs on
    ``ceil(N Q(x)) >= 1`` seeded copies of it; ``m^ = sum_x Q(x) K^_x``.
``"sampling"`` (larger vocabularies).
    ``N`` trees drawn level by level with the toolkit's samplers (or ``draft_sampler``),
    one verifier call per chunk; ``m^`` = the empirical law of the outputs.

**Accepted length** ``E[tau]`` (``tau`` = depth of the accepted node): the estimate with a
normal interval at ``confidence`` of half-width ``z sqrt(Var^(tau) / N)`` (in enumeration mode
the estimator's variance is at most ``Var(tau) / N`` by the law of total variance). Its gap
to the **sequence-level optimum**: on a chain, block verification's value, the best of every
lossless verifier (docs/sequences.md, Theorem 3; :func:`otm.sequences.draft_prefix_optimum`);
on a full ``k``-ary tree (``kary:k,d``) with at most ``max_trees`` draft trees, the tree-level
LP (docs/sequences.md, section 6; :func:`otm.sequences.solve_tree_optimum`), in both modes.
No lossless verifier accepts more than the optimum: a one-sided z-test at ``alpha`` of
"``E[tau] <= optimum``" with the variance bound ``opt (depth - opt)`` (Bhatia-Davis: a
variable in ``[0, depth]`` with mean ``opt``) fails a verifier that does. With
``rule="block"`` (chains) or ``rule="traversal"`` (full ``k``-ary trees), a two-sided z-test
at ``alpha`` of ``E[tau]`` against the exact law's (:func:`otm.sequences.block_verification_law`,
:func:`otm.sequences.traversal_law`), with its exact variance. A correct verifier thus fails
the report with probability at most ``3 alpha`` (``2 alpha`` without a rule).

Realistic bugs of production tree samplers, each caught at the default ``alpha``
(tests/decoding/test_own_tree_verifier.py): :func:`example_stale_residual_tree_verifier`,
:func:`example_shared_coin_tree_verifier`, :func:`example_tokenwise_residual_block_verifier`,
:func:`example_unprocessed_draft_probs_verifier`.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from scipy import stats as scipy_stats

from decoding.runtime.tree_walk import resolve_rules, walk_tree
from decoding.runtime.trees import Tree, parse_tree
from decoding.validation.own_verifier import (
    DEFAULT_CONFIDENCE,
    DEFAULT_SAMPLES,
    ELEMENTS_PER_CALL,
    DraftSampler,
    default_draft_sampler,
    z_test,
)
from decoding.validation.stats import (
    DEFAULT_ALPHA,
    IMPOSSIBLE_PROBABILITY,
    MIN_EXPECTED_COUNT,
    GoodnessOfFit,
    chi_square_test,
)
from decoding.verifiers import block
from decoding.verifiers.base import (
    VerifierOutput,
    check_verify_inputs,
    draw_uniforms,
    gather_tokens,
    normalise,
    sample_iid,
    sample_residual,
)
from otm.draft_laws import ONE_Q_SCHEMES, draft_law
from otm.errors import (
    InvalidDistributionError,
    NotApplicableError,
    ShapeMismatchError,
    UnknownNameError,
)
from otm.sequences import (
    SequenceModel,
    block_verification_law,
    draft_prefix_optimum,
    solve_tree_optimum,
    traversal_law,
)
from otm.tolerances import AGREEMENT_TOLERANCE

#: ``mode="auto"`` enumerates the draft trees when there are at most this many; the tree LP
#: is solved when there are at most ``max_trees`` (this by default).
TREE_LIMIT = 2_000

#: Sequence verifiers whose exact law is known here.
EXACT_RULES = ("block", "traversal")

#: ``verifier(tree, draft_tokens, target_probs, draft_probs, generator) -> output`` (module docstring).
TreeVerifyFunction = Callable[[Tree, torch.Tensor, torch.Tensor, torch.Tensor, "torch.Generator | None"], object]


@dataclass(frozen=True)
class TreeVerifierOutput:
    """One verification per row: the accepted node and the emitted token."""

    accepted_node: torch.Tensor  # [batch] int64, 0 = the root (no draft accepted)
    tokens: torch.Tensor  # [batch] int64


@dataclass(frozen=True)
class TreeVerifierReport:
    """What :func:`validate_tree_verifier` found (module docstring for the tests).

    Attributes:
        tree: the tree's spec; scheme: the sibling law; rule: the sequence rule given, or ``None``.
        vocab_size, depth, n_nodes: of the model and the tree.
        mode: ``"enumeration"`` or ``"sampling"``; samples: ``N``; verifier_rows: rows run.
        lossless: both tests of (L) passed: ``next_token_test`` (the token after every prefix
            an output goes through follows ``p``) and ``extended_test`` (the outputs extended
            by the target to ``horizon`` tokens follow ``P``), each at ``alpha / 2``.
        output_law: ``{output sequence: estimated probability}``.
        expected_accepted: estimated ``E[tau]``; accepted_interval: its interval at ``confidence``.
        accepted_length_law: ``[depth + 1]`` estimated ``P(tau = i)``.
        optimum: the sequence-level optimum (``None`` where not computed: ``details["optimum_note"]``);
            optimum_kind: which one; gap = optimum - expected_accepted; gap_interval: from
            ``accepted_interval``; optimum_test: the one-sided test of "not above the optimum".
        expected_rule_accepted: ``E[tau]`` of ``rule``'s exact law; rule_test: the z-test against it.
        details: ``trees`` (enumeration), ``optimum_note``.
    """

    tree: str
    scheme: str
    rule: str | None
    vocab_size: int
    depth: int
    n_nodes: int
    mode: str
    samples: int
    verifier_rows: int
    lossless: bool
    next_token_test: GoodnessOfFit
    extended_test: GoodnessOfFit
    horizon: int
    output_law: dict
    expected_accepted: float
    accepted_interval: tuple[float, float]
    accepted_length_law: np.ndarray  # [depth + 1]
    confidence: float
    optimum: float | None
    optimum_kind: str | None
    gap: float | None
    gap_interval: tuple[float, float] | None
    optimum_test: GoodnessOfFit | None
    expected_rule_accepted: float | None
    rule_test: GoodnessOfFit | None
    details: dict = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """Lossless, (with a rule) its accepted length matches the rule's exact one, and not
        above the sequence-level optimum."""
        return all(test is None or test.passed for test in (self.rule_test, self.optimum_test)) and self.lossless

    def summary(self) -> str:
        """A PASS/FAIL headline (what failed, if anything), then the measurements."""
        failures = [] if self.lossless else ["output law, extended by the target, is not P"]
        if self.rule_test is not None and not self.rule_test.passed:
            failures.append(f"accepted length differs from {self.rule} verification's exact law")
        if self.optimum_test is not None and not self.optimum_test.passed:
            failures.append("accepted length above the sequence-level optimum (impossible for a lossless verifier)")
        lo, hi = self.accepted_interval
        lines = [
            "PASS" if not failures else "FAIL: " + "; ".join(failures),
            (f"verifier on {self.tree} trees ({self.scheme} siblings), V={self.vocab_size}, depth {self.depth} "
             f"({self.mode}, N={self.samples}):"),
            f"  lossless: {'yes' if self.lossless else 'NO'}",
            f"    next token after every prefix ~ p: {self.next_token_test.reason}",
            f"    outputs extended to {self.horizon} tokens ~ P: {self.extended_test.reason}",
            f"  accepted length {self.expected_accepted:.4f}  [{lo:.4f}, {hi:.4f}] at {self.confidence:.0%}",
        ]
        if self.optimum is not None:
            glo, ghi = self.gap_interval
            lines.append(f"  {self.optimum_kind} {self.optimum:.4f}, gap {self.gap:.4f}  [{glo:.4f}, {ghi:.4f}]")
            lines.append(f"    not above the optimum: {self.optimum_test.reason}")
        else:
            lines.append(f"  optimum not computed: {self.details['optimum_note']}")
        if self.rule_test is not None:
            lines.append(f"  {self.rule} verification: exact accepted length {self.expected_rule_accepted:.4f}, "
                         f"{self.rule_test.reason}")
        return "\n".join(lines)

    def as_dict(self) -> dict:
        out = {key: getattr(self, key) for key in (
            "tree", "scheme", "rule", "vocab_size", "depth", "n_nodes", "mode", "samples", "verifier_rows", "lossless",
            "horizon", "expected_accepted", "confidence", "optimum", "optimum_kind", "gap", "expected_rule_accepted")}
        out.update(
            passed=self.passed, accepted_interval=list(self.accepted_interval),
            gap_interval=None if self.gap_interval is None else list(self.gap_interval),
            accepted_length_law=self.accepted_length_law.tolist(),
            output_law={" ".join(map(str, s)): m for s, m in self.output_law.items()},
            **{name: None if getattr(self, name) is None else asdict(getattr(self, name))
               for name in ("next_token_test", "extended_test", "optimum_test", "rule_test")},
        )
        return out


# --------------------------------------------------------------------------- model tables on tensors


class PrefixTables:
    """``p`` and ``q`` of every prefix of at most ``depth`` tokens as ``[n_prefixes, vocab]``
    tensors; prefix ``s`` of length ``n`` has id ``offset[n] + sum_i s_i V^(n-1-i)``
    (``offset[n] = sum_{i<n} V^i``; ids of outputs, one token longer, follow the same rule)."""

    def __init__(self, model: SequenceModel, depth: int, dtype: torch.dtype, device):
        self.vocab = model.vocab_size
        self.offset = np.concatenate([[0], np.cumsum([self.vocab**n for n in range(depth + 2)])]).astype(np.int64)
        prefixes = [s for n in range(depth + 1) for s in model.sequences(n)]

        def table(rows) -> torch.Tensor:  # [n_prefixes, vocab]
            return torch.tensor(np.array([[float(v) for v in rows(s)] for s in prefixes]), dtype=dtype, device=device)

        self.target, self.draft = table(model.target), table(model.draft)

    def node_ids(self, tree: Tree, tokens: torch.Tensor) -> torch.Tensor:  # tokens [rows, n_nodes] -> [rows, n_nodes]
        """The prefix id of the path to every node, per row."""
        codes = torch.zeros_like(tokens)
        ids = torch.zeros_like(tokens)
        for j in range(1, tree.n_nodes):
            codes[:, j] = codes[:, tree.parent[j]] * self.vocab + tokens[:, j]
            ids[:, j] = int(self.offset[tree.depth[j]]) + codes[:, j]
        return ids

    def sequence(self, key: int) -> tuple:
        """The token sequence of a prefix (or output) id."""
        n = int(np.searchsorted(self.offset, key, side="right")) - 1
        code, out = key - int(self.offset[n]), []
        for _ in range(n):
            code, token = divmod(code, self.vocab)
            out.append(token)
        return tuple(reversed(out))


# --------------------------------------------------------------------------- draft trees


def enumerate_trees(model: SequenceModel, tree: Tree, scheme: str, limit: int = TREE_LIMIT):
    """``[(tokens [n_nodes] int64, exact weight)]``: every draft tree with ``Q > 0`` (children
    of a node drawn with ``scheme`` from ``q`` at the node's prefix, each child with its own
    subtree; column 0, the root, is 0), or ``None`` when there are more than ``limit``."""
    trees = [(np.zeros(tree.n_nodes, dtype=np.int64), model.one())]
    laws: dict = {}  # (prefix, number of children) -> DraftLaw
    for node in np.flatnonzero(tree.n_children):
        k = int(tree.n_children[node])
        children, path = tree.children(node), tree.path(node)[1:]
        expanded = []
        for tokens, weight in trees:
            key = (tuple(tokens[path].tolist()), k)
            if key not in laws:
                laws[key] = draft_law("iid" if k == 1 else scheme, model.draft(key[0]), k)
            for row, prob in zip(laws[key].tuples, laws[key].probs):
                child = tokens.copy()
                child[children] = row
                expanded.append((child, weight * prob))
            if len(expanded) > limit:
                return None
        trees = expanded
    return trees


def sample_trees(tables: PrefixTables, tree: Tree, rows: int, generator, sampler: DraftSampler) -> torch.Tensor:
    """``[rows, n_nodes]`` draft trees drawn level by level, the children of a node by ``sampler``
    (``(draft_probs [b, V], k, generator) -> [b, k]``; a node with one child draws from ``q``)."""
    tokens = torch.zeros(rows, tree.n_nodes, dtype=torch.int64, device=tables.target.device)
    for node in np.flatnonzero(tree.n_children):
        k = int(tree.n_children[node])
        q = tables.draft[tables.node_ids(tree, tokens)[:, node]]  # [rows, vocab]
        tokens[:, tree.children(node)] = (sample_iid if k == 1 else sampler)(q, k, generator)
    return tokens


# --------------------------------------------------------------------------- optima and exact laws


def _arity(tree: Tree) -> int:
    """``k`` when ``tree`` is the full ``k``-ary tree of its depth (a chain: 1), else 0."""
    k = int(tree.n_children[0])
    full = np.array_equal(tree.n_children, np.where(tree.depth < tree.max_depth, k, 0))
    return k if full else 0


def _optimum(model: SequenceModel, tree: Tree, scheme: str, enumerable: Callable[[], bool]) -> tuple:
    """``(value, kind, note)``: block verification's value on a chain, the tree LP on a full
    ``k``-ary tree with few enough draft trees (``enumerable()``); ``None`` otherwise."""
    k = _arity(tree)
    if k == 1:
        return float(draft_prefix_optimum(model, tree.max_depth)), "chain optimum (block verification)", \
            "docs/sequences.md, Theorem 3"
    if not k:
        return None, None, "the tree LP (otm.sequences.solve_tree_optimum) is built for full k-ary trees (kary:k,d)"
    if not enumerable():
        return None, None, "more than max_trees draft trees: the tree LP would be too large"
    result = solve_tree_optimum(model.as_float(), tree.max_depth, k, scheme)  # a float optimum is all a test needs
    return float(result.value), "tree optimum (LP)", f"{result.num_variables} variables, {result.note}"


def _rule_law(rule: str, model: SequenceModel, tree: Tree, scheme: str):
    """The exact output law of ``rule`` on this tree (:class:`otm.errors.NotApplicableError`
    where it is not computed)."""
    k, shape = _arity(tree), tree.spec or tree.nested()
    if rule == "block":
        if k != 1:
            raise NotApplicableError(f"rule='block' verifies one chain (chain:g), got the tree {shape}; "
                                     "pass rule=None to test losslessness and the optimum only")
        return block_verification_law(model, tree.max_depth)
    if not k:
        raise NotApplicableError(f"rule='traversal': its exact law is computed for full k-ary trees (kary:k,d, "
                                 f"chain:g), got {shape}; pass rule=None to test losslessness only")
    if scheme not in ("iid", "without_replacement"):
        raise NotApplicableError(f"rule='traversal' draws siblings iid or without replacement, not scheme={scheme!r}")
    return traversal_law(model, tree.max_depth, k, scheme)


# --------------------------------------------------------------------------- running the verifier


def as_tree_output(result, tree: Tree, rows: int) -> TreeVerifierOutput:
    """A tree verifier's return value (module docstring) as a :class:`TreeVerifierOutput`;
    :class:`otm.errors.ShapeMismatchError` when it is malformed."""
    if isinstance(result, tuple) and len(result) == 2:
        node, tokens = result
    else:
        node = getattr(result, "accepted_node", None)
        if node is None and _arity(tree) == 1:
            node = getattr(result, "n_accepted", None)  # on a chain, node i is at depth i
        tokens = getattr(result, "tokens", None)
    for name, value in (("accepted_node", node), ("tokens", tokens)):
        if not isinstance(value, torch.Tensor) or value.shape != (rows,) or value.is_floating_point():
            got = f"{value.dtype} {tuple(value.shape)}" if isinstance(value, torch.Tensor) else type(value).__name__
            raise ShapeMismatchError(f"a tree verifier must return {name} as integers of shape [batch={rows}] "
                                     f"(accepted_node, or n_accepted on a chain, and tokens), got {got}")
    return TreeVerifierOutput(node.long(), tokens.long())


def run_on_trees(verifier: TreeVerifyFunction, tree: Tree, tables: PrefixTables, tokens: torch.Tensor, generator):
    """Run ``verifier`` on the trees ``tokens`` (``[rows, n_nodes]``) in chunks; returns
    ``(output ids [rows], accepted depths [rows])`` as numpy arrays."""
    chunk = max(1, ELEMENTS_PER_CALL // (tree.n_nodes * tables.vocab))
    depth = torch.as_tensor(tree.depth, device=tokens.device)
    offset = torch.as_tensor(tables.offset, device=tokens.device)
    keys, taus = [], []
    for start in range(0, tokens.shape[0], chunk):
        x = tokens[start:start + chunk]
        ids = tables.node_ids(tree, x)
        out = as_tree_output(verifier(tree, x, tables.target[ids], tables.draft[ids], generator), tree, x.shape[0])
        node, y = out.accepted_node, out.tokens
        if ((node < 0) | (node >= tree.n_nodes)).any() or ((y < 0) | (y >= tables.vocab)).any():
            raise InvalidDistributionError(f"the verifier returned accepted nodes outside range({tree.n_nodes}) "
                                           f"or tokens outside range(vocab_size={tables.vocab})")
        d = depth[node]
        code = ids.gather(1, node.unsqueeze(1)).squeeze(1) - offset[d]
        keys.append((offset[d + 1] + code * tables.vocab + y).cpu())
        taus.append(d.cpu())
    return torch.cat(keys).numpy(), torch.cat(taus).numpy()


# --------------------------------------------------------------------------- the two tests of (L)


def _impossible(model: SequenceModel, output_law: dict, alpha: float) -> GoodnessOfFit | None:
    """A failed test when an output holds a token of target probability 0 given its prefix
    (at most :data:`decoding.validation.stats.IMPOSSIBLE_PROBABILITY`, as the chi-square test
    reads it); never a false alarm: a lossless verifier has ``m(o) <= P(o)`` (docs/sequences.md,
    Lemma 1). Else ``None``."""
    impossible = [o for o in output_law
                  if any(float(model.target(o[:i])[o[i]]) <= IMPOSSIBLE_PROBABILITY for i in range(len(o)))]
    if not impossible:
        return None
    shown = ", ".join(str(o) for o in impossible[:5])
    return GoodnessOfFit(math.inf, 0, 0.0, alpha, False, f"outputs of target probability 0 observed: {shown}")


def next_token_test(model: SequenceModel, output_law: dict, samples: int, alpha: float) -> GoodnessOfFit:
    """(L) in the form of docs/sequences.md, Lemma 1: ``m(s y) + A(s y) = A(s) p(y | s)``,
    i.e. among the outputs that go through ``s`` and have a token after it, that token has
    law ``p(. | s)``. One Pearson chi-square per prefix ``s`` of the counts
    ``samples * m^(outputs starting with s y)`` against ``p(. | s)`` (small cells pooled,
    :func:`decoding.validation.stats.chi_square_test`); the statistics and degrees of freedom
    are summed (given the first ``|s|`` tokens of every output and whether it goes on, the
    next tokens at the prefixes of length ``|s|`` are independent multinomials, so the
    statistics are asymptotically independent chi-squares). Outputs with ``P = 0`` fail
    outright."""
    failed = _impossible(model, output_law, alpha)
    if failed is not None:
        return failed
    counts: dict = {}
    for sequence, mass in output_law.items():
        for i in range(len(sequence)):
            counts.setdefault(sequence[:i], np.zeros(model.vocab_size))[sequence[i]] += samples * mass
    statistic, dof = 0.0, 0
    for prefix, row in counts.items():
        test = chi_square_test(row, np.array([float(v) for v in model.target(prefix)]), alpha)
        statistic, dof = statistic + test.statistic, dof + test.dof
    if dof < 1:
        return GoodnessOfFit(0.0, 0, 1.0, alpha, True, "no prefix with two testable cells: nothing to test")
    p_value = float(scipy_stats.chi2.sf(statistic, dof))
    passed = p_value >= alpha
    return GoodnessOfFit(statistic, dof, p_value, alpha, passed, f"chi2={statistic:.2f}, dof={dof} over {len(counts)} "
                         f"prefixes, p={p_value:.3g} {'>=' if passed else '<'} alpha={alpha:g}")


def extended_law_test(model: SequenceModel, output_law: dict, samples: int, alpha: float, horizon: int) -> GoodnessOfFit:
    """(L) as stated, at ``horizon`` (at least the longest output): the estimated output law
    extended exactly by the target, ``ext(z) = sum_l m^(z_<=l) P(z_>l | z_<=l)``, against
    ``P`` by Pearson's chi-square over ``V^horizon`` (cells ``z`` with ``samples * P(z) < 5``
    pooled, found by a pruned walk of the prefix tree). Conservative: the extension is a
    stochastic map, so the covariance of ``samples * ext`` is at most a multinomial's (the
    statistic is usually far below its degrees of freedom, which costs power;
    :func:`next_token_test` is the sharper form). Outputs with ``P = 0`` fail outright."""
    failed = _impossible(model, output_law, alpha)
    if failed is not None:
        return failed
    observed, expected = [], []

    def walk(prefix: tuple, mass_through: float, prob: float) -> None:  # ext mass and P of prefix
        if len(prefix) == horizon:
            observed.append(mass_through)
            expected.append(prob)
            return
        p = np.array([float(v) for v in model.target(prefix)])
        for y in np.flatnonzero(samples * prob * p >= MIN_EXPECTED_COUNT):
            child = prefix + (int(y),)
            walk(child, mass_through * p[y] + output_law.get(child, 0.0), prob * p[y])

    walk((), 0.0, 1.0)
    pooled_expected = 1.0 - sum(expected)
    if pooled_expected > IMPOSSIBLE_PROBABILITY:
        observed.append(max(1.0 - sum(observed), 0.0))
        expected.append(pooled_expected)
    return chi_square_test(samples * np.asarray(observed), np.asarray(expected) / sum(expected), alpha)


# --------------------------------------------------------------------------- the validation


def check_model_and_tree(model, tree_shape) -> Tree:
    """The tree of ``tree_shape`` (a :func:`decoding.runtime.trees.parse_tree` spec or a
    ``Tree``) after checking that it has a draft node and that ``model`` is a
    :class:`~otm.sequences.SequenceModel` long enough for it (its depth plus the emitted token)."""
    if not isinstance(model, SequenceModel):
        raise InvalidDistributionError(f"model must be an otm.sequences.SequenceModel (otm.sequences.sequence_model, "
                                       f"random_model, ...), got {type(model).__name__}")
    tree = parse_tree(tree_shape)
    if tree.n_nodes < 2:
        raise NotApplicableError("the tree has no draft node: give a tree with at least one draft (e.g. chain:1)")
    model.require_length(tree.max_depth + 1,
                         f"the tree {tree.spec or tree.nested()} (depth {tree.max_depth}, plus the emitted token)")
    return tree


def _check_inputs(model, tree_shape, scheme, rule, mode, samples, alpha, confidence) -> tuple[Tree, str]:
    """``(tree, scheme)`` after checking every argument of :func:`validate_tree_verifier`."""
    tree = check_model_and_tree(model, tree_shape)
    if rule is not None and rule not in EXACT_RULES:
        raise UnknownNameError(f"unknown rule {rule!r}; the exact laws known here are {', '.join(EXACT_RULES)} (or None)")
    scheme = scheme or {"traversal": "without_replacement"}.get(rule, "iid")
    if scheme not in ONE_Q_SCHEMES:
        raise UnknownNameError(f"unknown sibling scheme {scheme!r}; choose one of {', '.join(ONE_Q_SCHEMES)}")
    if mode not in ("auto", "enumeration", "sampling"):
        raise UnknownNameError(f"unknown mode {mode!r}; choose auto, enumeration or sampling")
    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or samples < 1:
        raise InvalidDistributionError(f"samples must be an integer >= 1, got {samples!r}")
    for name, value in (("alpha", alpha), ("confidence", confidence)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < 1:
            raise InvalidDistributionError(f"{name} must be a probability in (0, 1), got {value!r}")
    return tree, scheme


def validate_tree_verifier(
    verifier: TreeVerifyFunction,
    model: SequenceModel,
    tree_shape: str | Tree,
    *,
    scheme: str | None = None,
    rule: str | None = None,
    max_trees: int = TREE_LIMIT,
    mode: str = "auto",
    samples: int = DEFAULT_SAMPLES,
    alpha: float = DEFAULT_ALPHA,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
    draft_sampler: DraftSampler | None = None,
    dtype: torch.dtype = torch.float64,
    device=None,
) -> TreeVerifierReport:
    """Validate a user's chain or tree verifier (module docstring: signature, modes, tests).

    Args:
        verifier: ``verify(tree, draft_tokens [b, n], target_probs [b, n, V], draft_probs
            [b, n, V], generator)`` -> accepted node and emitted token per row.
        model: the target and draft over sequences (:class:`otm.sequences.SequenceModel`),
            defined for at least ``depth + 1`` tokens; ``q`` must be the law drafts are drawn
            from (after temperature / top-k / top-p).
        tree_shape: a :func:`decoding.runtime.trees.parse_tree` spec or a ``Tree``.
        scheme: the sibling law (``iid``, ``without_replacement``, ``hub``, ``greedy``);
            default: ``without_replacement`` with ``rule="traversal"``, else ``iid``.
        rule: ``"block"`` (chains) or ``"traversal"`` (full ``k``-ary trees, ``iid`` or
            ``without_replacement`` siblings): also test ``E[tau]`` against its exact law.
        max_trees: the most draft trees enumerated, and for which the tree LP is solved.
        mode: ``"enumeration"``, ``"sampling"`` or ``"auto"`` (enumerate up to ``max_trees`` trees).
        samples: ``N``; alpha: false-alarm rate of each test; confidence: level of the interval.
        seed: seeds the one ``torch.Generator`` every draw comes from.
        draft_sampler: ``(draft_probs [b, V], k, generator) -> [b, k]`` for the sampling mode
            (default: the toolkit's sampler of ``scheme``).
        dtype, device: of the tensors passed to the verifier.

    Raises :class:`otm.errors.UnknownNameError` for an unknown scheme, rule or mode,
    :class:`otm.errors.InvalidDistributionError` for a bad model, ``samples``, ``alpha`` or
    ``confidence``, :class:`otm.errors.NotApplicableError` when the model is too short for
    the tree, the rule's exact law does not apply or enumeration exceeds ``max_trees``,
    :class:`otm.errors.ShapeMismatchError` / :class:`otm.errors.InvalidDistributionError`
    for malformed verifier outputs.
    """
    tree, scheme = _check_inputs(model, tree_shape, scheme, rule, mode, samples, alpha, confidence)
    law = None if rule is None else _rule_law(rule, model, tree, scheme)
    depth, samples = tree.max_depth, int(samples)
    tables = PrefixTables(model, depth, dtype, device)
    generator = torch.Generator(device=tables.target.device).manual_seed(seed)
    trees = None if mode == "sampling" else enumerate_trees(model, tree, scheme, max_trees)
    if trees is None and mode == "enumeration":
        raise NotApplicableError(f"more than max_trees={max_trees} draft trees: raise max_trees or use mode='sampling'")
    details: dict = {}
    if trees is not None:
        tokens, row_weight = _enumerated_rows(trees, samples, tables.target.device)
        details["trees"] = len(trees)
    else:
        tokens = sample_trees(tables, tree, samples, generator, draft_sampler or default_draft_sampler(scheme))
        row_weight = np.full(samples, 1.0 / samples)
    keys, taus = run_on_trees(verifier, tree, tables, tokens, generator)
    distinct, inverse = np.unique(keys, return_inverse=True)
    masses = np.bincount(inverse, weights=row_weight)
    output_law = {tables.sequence(int(key)): float(m) for key, m in zip(distinct, masses)}
    next_test = next_token_test(model, output_law, samples, alpha / 2)
    extended_test = extended_law_test(model, output_law, samples, alpha / 2, depth + 1)

    lengths = np.bincount(taus, weights=row_weight, minlength=depth + 1)  # [depth + 1]
    mean, interval = _accepted_length_interval(lengths, samples, confidence)
    optimum, kind, details["optimum_note"] = _optimum(
        model, tree, scheme, lambda: trees is not None or enumerate_trees(model, tree, scheme, max_trees) is not None)
    gap = gap_interval = optimum_test = None
    if optimum is not None:
        gap, gap_interval = optimum - mean, (optimum - interval[1], optimum - interval[0])
        optimum_test = _not_above_optimum_test(mean, optimum, depth, samples, alpha)
    expected = rule_test = None
    if law is not None:
        expected, rule_test = _rule_length_test(law, mean, samples, alpha)
    return TreeVerifierReport(
        tree=tree.spec or str(tree.nested()), scheme=scheme, rule=rule, vocab_size=model.vocab_size, depth=depth,
        n_nodes=tree.n_nodes, mode="sampling" if trees is None else "enumeration", samples=samples,
        verifier_rows=len(keys), lossless=next_test.passed and extended_test.passed, next_token_test=next_test,
        extended_test=extended_test, horizon=depth + 1, output_law=output_law, expected_accepted=mean,
        accepted_interval=interval, accepted_length_law=lengths, confidence=confidence, optimum=optimum,
        optimum_kind=kind, gap=gap, gap_interval=gap_interval, optimum_test=optimum_test,
        expected_rule_accepted=expected, rule_test=rule_test, details=details,
    )


def _enumerated_rows(trees: list, samples: int, device) -> tuple[torch.Tensor, np.ndarray]:
    """Every draft tree ``x`` of ``trees`` (``(tokens, Q(x))`` pairs), ``ceil(N Q(x))`` times
    (at least once): the rows ``[rows, n_nodes]`` and each row's weight ``Q(x) / copies``."""
    weights = np.array([float(w) for _, w in trees])
    copies = np.maximum(1, np.ceil(samples * weights)).astype(np.int64)
    tokens = torch.as_tensor(np.repeat(np.stack([t for t, _ in trees]), copies, axis=0), device=device)
    return tokens, np.repeat(weights / copies, copies)


def _accepted_length_interval(lengths: np.ndarray, samples: int, confidence: float) -> tuple[float, tuple[float, float]]:
    """``E[tau]`` of the accepted-length law ``lengths`` (``[depth + 1]``) and its normal
    interval at ``confidence`` for ``samples`` draws, clipped to ``[0, depth]``."""
    depth = lengths.size - 1
    mean = float(lengths @ np.arange(depth + 1))
    variance = float(lengths @ (np.arange(depth + 1) - mean) ** 2)
    half = float(scipy_stats.norm.ppf(0.5 + confidence / 2)) * math.sqrt(variance / samples)
    return mean, (max(0.0, mean - half), min(float(depth), mean + half))


def _not_above_optimum_test(mean: float, optimum: float, depth: int, samples: int, alpha: float) -> GoodnessOfFit:
    """The one-sided test of "``E[tau]`` not above ``optimum``", with the largest variance a
    length in ``[0, depth]`` of mean ``optimum`` can have."""
    bound = optimum * (depth - optimum)  # Bhatia-Davis: Var(tau) at E[tau] = optimum; 0 at optimum 0 or depth
    return z_test(mean, optimum, bound / samples if bound > AGREEMENT_TOLERANCE else 0.0, alpha,
                  what="accepted length", tolerance=AGREEMENT_TOLERANCE, above_only=True)


def _rule_length_test(law, mean: float, samples: int, alpha: float) -> tuple[float, GoodnessOfFit]:
    """``E[tau]`` of the rule's exact ``law`` and the z-test of ``mean`` against it."""
    expected = float(law.expected_accepted())
    variance = sum(float(m) * (t - expected) ** 2 for t, m in law.accepted_length_distribution().items())
    return expected, z_test(mean, expected, variance / samples, alpha, what="accepted length", tolerance=AGREEMENT_TOLERANCE)


# --------------------------------------------------------------------------- adapters


def chain_verifier(verify) -> TreeVerifyFunction:
    """A tree verifier from a verifier of one draft chain with block verification's signature
    (:func:`decoding.verifiers.block.verify`): ``verify(target_probs [b, g + 1, V],
    draft_probs [b, g, V], draft_tokens [b, g], generator)`` with ``.n_accepted`` and
    ``.tokens`` (:func:`as_tree_output` reads them; on a chain, ``chain:g``, node ``i`` is at
    depth ``i``)."""
    def tree_verify(tree, draft_tokens, target_probs, draft_probs, generator):
        if _arity(tree) != 1:
            raise NotApplicableError(f"a chain verifier needs a chain (chain:g), got {tree.spec or tree.nested()}")
        return verify(target_probs, draft_probs[:, :tree.max_depth], draft_tokens[:, 1:], generator)

    return tree_verify


def node_walk_verifier(rule) -> TreeVerifyFunction:
    """The decoding loop's node-by-node walk (SpecTr, Sun et al., NeurIPS 2023,
    arXiv:2310.15141, Alg. 3; :func:`decoding.runtime.tree_walk.walk_tree`) as a tree
    verifier: ``rule`` is a rule name of :mod:`decoding.verifiers` or a verifier object
    (``draft_scheme``, ``sample_drafts``, ``verify``); nodes with one child use ``single``.
    Validate it with ``scheme`` = the rule's draft scheme."""
    rules = resolve_rules(rule)

    def tree_verify(tree, draft_tokens, target_probs, draft_probs, generator):
        walk = walk_tree(tree, draft_tokens, target_probs, draft_probs, rules, generator)
        last = walk.path_nodes.gather(1, (walk.n_accepted - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
        return TreeVerifierOutput(torch.where(walk.n_accepted > 0, last, torch.zeros_like(last)), walk.final_token)

    return tree_verify


# --------------------------------------------------------------------------- examples: realistic bugs


class ExampleRecursiveRejection:
    """Recursive rejection sampling of ``k`` i.i.d. siblings at one node (SpecHub, Sun, Zhou,
    Chen, Sun, EMNLP 2024, arXiv:2411.05289, Alg. 1; SpecInfer's multi-round sampling), in
    plain torch, for :func:`node_walk_verifier`: sibling ``x_i`` is accepted when
    ``u_i q(x_i) < r_{i-1}(x_i)``, else ``r_i = norm((r_{i-1} - q)^+)`` (``r_0 = p``); after
    ``k`` rejections the token is drawn from ``r_k``. ``stale_residual`` and ``shared_coin``
    switch on the two bugs of :func:`example_stale_residual_tree_verifier` and
    :func:`example_shared_coin_tree_verifier`; with neither it is correct (the toolkit's own
    version is :mod:`decoding.verifiers.rrs`)."""

    draft_scheme = "iid"

    def __init__(self, stale_residual: bool = False, shared_coin: bool = False):
        self.stale_residual, self.shared_coin = stale_residual, shared_coin
        self.name = "rrs" + (" (stale residual)" if stale_residual else "") + (" (shared coin)" if shared_coin else "")

    def sample_drafts(self, draft_probs: torch.Tensor, k: int, generator) -> torch.Tensor:  # [batch, vocab] -> [batch, k]
        return sample_iid(draft_probs, k, generator)

    def uniforms_per_row(self, k: int) -> int:
        return k + 1

    def verify(self, target_probs, draft_probs, draft_tokens, generator) -> VerifierOutput:
        # target_probs [batch, vocab], draft_probs [batch, k, vocab], draft_tokens [batch, k]
        batch, k, _ = check_verify_inputs(target_probs, draft_probs, draft_tokens)
        u = draw_uniforms(generator, batch, k + 1, target_probs)
        if self.shared_coin:  # BUG: one coin for every sibling's accept test
            u = torch.cat([u[:, :1].expand(batch, k), u[:, k:]], dim=1)
        residual = target_probs
        tokens = torch.zeros(batch, dtype=torch.int64, device=target_probs.device)
        accepted = torch.full_like(tokens, -1)
        pending = torch.ones(batch, dtype=torch.bool, device=target_probs.device)
        for i in range(k):
            x, q = draft_tokens[:, i], draft_probs[:, i]
            accept = pending & (u[:, i] * gather_tokens(q, x) < gather_tokens(residual, x))
            tokens = torch.where(accept, x, tokens)
            accepted = torch.where(accept, torch.full_like(accepted, i), accepted)
            pending = pending & ~accept
            if not self.stale_residual:
                residual = torch.where(pending.unsqueeze(1), normalise((residual - q).clamp(min=0.0)), residual)
        if self.stale_residual:  # BUG: every sibling was tested against p; the residual is taken once at the end
            residual = (target_probs - draft_probs[:, 0]).clamp(min=0.0)
        final = sample_residual(residual, target_probs, u[:, k])
        return VerifierOutput(torch.where(pending, final, tokens), accepted)


def example_stale_residual_tree_verifier() -> TreeVerifyFunction:
    """**Deliberately wrong** node-wise tree sampler: recursive rejection sampling whose
    residual is not updated between siblings (every sibling is tested against ``p`` with
    ``min(1, p(x)/q(x))``, and after all are rejected the token comes from the single-draft
    residual ``norm((p - q)^+)``), walked node by node (:func:`node_walk_verifier`)."""
    return node_walk_verifier(ExampleRecursiveRejection(stale_residual=True))


def example_shared_coin_tree_verifier() -> TreeVerifyFunction:
    """**Deliberately wrong** node-wise tree sampler: recursive rejection sampling with one
    uniform shared by the accept tests of all siblings of a node (a batched kernel that draws
    one random number per node instead of per draft), walked node by node. Lossy where a
    later sibling's acceptance ratio ``r_i(x)/q(x)`` is strictly between 0 and 1, i.e. where
    the residual after a rejection is not a point mass (``V >= 3``, two tokens with ``p > q``)."""
    return node_walk_verifier(ExampleRecursiveRejection(shared_coin=True))


def example_tokenwise_residual_block_verifier(target_probs, draft_probs, draft_tokens, generator):
    """**Deliberately wrong** block verification (Sun, Mendlovic, Leviathan, Aharoni, Ro,
    Beirami, Suresh, ICLR 2025, arXiv:2403.10444; :mod:`decoding.verifiers.block`): after
    stopping at ``tau < g`` the token comes from token-wise verification's residual
    ``norm((p - q)^+)`` instead of ``norm((w_tau p - q)^+)``. Lossy wherever two tokens have
    ``p > q`` and ``w_tau < 1``. Chain signature (wrap it with :func:`chain_verifier`):
    ``target_probs [b, g + 1, V]``, ``draft_probs [b, g, V]``, ``draft_tokens [b, g]``."""
    batch, g, _ = block.check_block_inputs(target_probs, draft_probs, draft_tokens)
    uniforms = draw_uniforms(generator, batch, block.uniforms_per_row(g), target_probs)
    correct = block.verify_with_uniforms(target_probs, draft_probs, draft_tokens, uniforms)
    tau, rows = correct.n_accepted, torch.arange(batch, device=target_probs.device)
    target_at, draft_at = target_probs[rows, tau], draft_probs[rows, tau.clamp(max=g - 1)]
    tokenwise = sample_residual((target_at - draft_at).clamp(min=0.0), target_at, uniforms[:, g + 1])  # BUG: w_tau dropped
    return block.BlockOutput(n_accepted=tau, tokens=torch.where(tau < g, tokenwise, correct.tokens))


def example_unprocessed_draft_probs_verifier(verifier: TreeVerifyFunction, unprocessed: SequenceModel) -> TreeVerifyFunction:
    """**Deliberately wrong** pipeline: the trees are drafted from the request's processed
    draft law (temperature, top-p), but ``verifier`` is handed ``unprocessed``'s draft
    probabilities (the draft model's softmax before the sampling parameters) at every node."""
    def tree_verify(tree, draft_tokens, target_probs, draft_probs, generator):
        tables = PrefixTables(unprocessed, tree.max_depth, draft_probs.dtype, draft_probs.device)
        return verifier(tree, draft_tokens, target_probs, tables.draft[tables.node_ids(tree, draft_tokens)], generator)

    return tree_verify


__all__ = [
    "EXACT_RULES",
    "TREE_LIMIT",
    "ExampleRecursiveRejection",
    "PrefixTables",
    "TreeVerifierOutput",
    "TreeVerifierReport",
    "as_tree_output",
    "chain_verifier",
    "check_model_and_tree",
    "enumerate_trees",
    "example_shared_coin_tree_verifier",
    "example_stale_residual_tree_verifier",
    "example_tokenwise_residual_block_verifier",
    "example_unprocessed_draft_probs_verifier",
    "extended_law_test",
    "next_token_test",
    "node_walk_verifier",
    "run_on_trees",
    "sample_trees",
    "validate_tree_verifier",
]
