"""Certify a tree verifier: one that checks a draft tree (the children of a node drawn
together from ``q`` at that node) and emits the accepted path and one more token (SpecInfer,
Miao et al. 2024, arXiv:2305.09781; SpecTr, Sun et al., NeurIPS 2023, arXiv:2310.15141,
Alg. 3; EAGLE-2, Li et al., EMNLP 2024, arXiv:2406.16858).

Contract: the toolkit's tree verifier (:mod:`decoding.validation.own_tree_verifier`; an
engine's layout goes through an adapter of :mod:`decoding.certify.layouts`)::

    verify(tree,           # decoding.runtime.trees.Tree, breadth-first, node 0 the root
           draft_tokens,   # [b, n_nodes] int64, node j's token (column 0, the root, 0)
           target_probs,   # [b, n_nodes, V]: p(. | tokens on the path to node j)
           draft_probs,    # [b, n_nodes, V]: q(. | path), the law node j's children came from
           generator) -> accepted_node [b], tokens [b]

The step emits the draft tokens on the path to the accepted node, then the token.

The instance is a target ``P`` and a draft ``Q`` over token sequences
(:class:`otm.sequences.SequenceModel`), so ``p`` changes from node to node and a verifier
that reads another node's row is seen. The test (:func:`assert_tree_lossless`): the first
``H`` tokens of the *stream* -- the emitted tokens, continued by the target -- follow ``P``
over the ``V^H`` sequences (``H = depth + 1`` by default). That is condition (L) of
docs/sequences.md at horizon ``H``: it holds for every lossless verifier, and by induction
over the steps it makes the whole text follow ``P``; its total variation is how lossy a
verifier is. The continuation is not sampled: a row whose output is ``o`` (``l`` tokens) adds
to every sequence ``z`` extending ``o`` its exact probability ``P(z_{>l} | o)``, a variable in
``[0, 1]`` with the mean of the sampled indicator, so the set test and its power
(:mod:`decoding.certify.bounds`) apply unchanged, at false-alarm rate ``alpha`` (one test).
Outputs longer than ``H`` count by their first ``H`` tokens. Draft trees are enumerated with
their exact weights (:func:`decoding.validation.own_tree_verifier.enumerate_trees`) where
there are at most ``max_trees``, else sampled level by level. ``detect_tv`` / ``detect_law``
(a stream law, ``[V^H]``) raise :class:`~decoding.certify.assertions.Undetectable` before
anything runs, as in :mod:`decoding.certify.assertions`. Negative control: the root's target
row is replaced by a twin at a known total variation (the stream law then moves by exactly
that much: the later conditionals are unchanged); a lossless verifier given it must fail.
Dtype tolerance: ``H`` times the dtype's (:func:`~decoding.certify.assertions.dtype_tolerance`),
the total variation ``H`` rounded conditionals can add up to.

What it cannot prove: the verifier on other trees, models, sibling laws or dtypes than the ones
run; deviations below the stated power; more than the first ``H`` stream tokens.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, replace

import numpy as np
import torch

from otm.distributions import as_distribution
from otm.errors import NotApplicableError
from otm.sequences import OutputLaw, SequenceModel, sequence_model

from decoding.runtime.trees import Tree
from decoding.validation.own_tree_verifier import (
    PrefixTables,
    TreeVerifyFunction,
    check_model_and_tree,
    enumerate_trees,
    run_on_trees,
    sample_trees,
)
from decoding.validation.own_verifier import DraftSampler, default_draft_sampler
from decoding.validation.stats import IMPOSSIBLE_PROBABILITY

from .assertions import (
    DEFAULT_ALPHA,
    DEFAULT_ROWS,
    MAX_TUPLES,
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
from .bounds import POWER_MISS, SetTest, detectable_tv, set_test
from .harness import enumeration_copies

#: The most sequences ``V^(depth + 1)`` a certification tabulates (the prefix tables and the
#: stream law both have about that many entries).
MAX_SEQUENCES = 1 << 16


@dataclass(frozen=True, kw_only=True)
class TreeCertificate(Measured):
    """What :func:`assert_tree_lossless` measured, besides :class:`~decoding.certify.assertions.Measured`
    (``tv_estimate``: the stream law's TV from ``P``).

    Attributes:
        tree, scheme (the sibling law), depth, horizon ``H``, trees (enumerated): how it ran.
        tv: the smallest TV of the stream law from ``P`` detected with probability
            ``1 - POWER_MISS``; tolerance: the TV allowed for the dtype's rounding.
        stream_test: the set test of the stream's first ``H`` tokens against ``P``;
            stream_estimate: ``[V^H]`` their estimated law (sequences in lexicographic order).
        first_token_law: ``[V]`` the estimated law of the first emitted token;
            first_tv_estimate: its TV from ``p(. | root)``.
        expected_accepted: the mean accepted depth.
    """

    tree: str
    scheme: str
    depth: int
    horizon: int
    trees: int | None
    tv: float
    tolerance: float
    stream_test: SetTest
    stream_estimate: np.ndarray  # [V^H]
    first_token_law: np.ndarray  # [V]
    first_tv_estimate: float
    expected_accepted: float

    def report(self) -> str:
        """The measurements, one per line (what a failure message ends with)."""
        test = self.stream_test
        return "\n".join([
            f"tree verifier on {self.tree} ({self.scheme} siblings), V={self.vocab_size}, depth {self.depth}, "
            f"{self.mode}" + (f" of {self.trees:,} draft trees" if self.trees else "")
            + f", n={self.n:,} ({self.rows:,} rows), {self.dtype} on {self.device}, seed={self.seed}",
            f"  stream of {self.horizon} tokens: TV estimate {self.tv_estimate:.4g} (first token alone "
            f"{self.first_tv_estimate:.4g}); {set_test_line(test)}",
            f"  accepted depth {self.expected_accepted:.4f} on average",
            "  " + power_line(f"a stream law at TV >= {self.tv:.4g} from P is detected",
                              [f"alpha={self.alpha:g}", f"{test.cells} sequences"], self.tolerance),
            f"  negative control: {self.control}",
        ])


# --------------------------------------------------------------------------- exact stream laws


def _levels(model: SequenceModel, horizon: int) -> list[np.ndarray]:
    """``[V^l, V]`` float64 target conditionals at every prefix of length ``l < horizon``, the
    prefixes in lexicographic order (the order of the codes ``sum_i s_i V^(l-1-i)``)."""
    return [np.array([np.asarray(model.target(s), dtype=np.float64) for s in model.sequences(level)])
            for level in range(horizon)]


def _extend(levels: list[np.ndarray], by_length: dict, beyond: np.ndarray | None = None) -> np.ndarray:
    """``[V^H]``: ``ext(z) = sum_l m(z_<=l) P(z_>l | z_<=l)`` for outputs of ``l <= H`` tokens
    (``by_length[l]``: ``[V^l]`` masses by code), plus ``beyond`` (outputs longer than ``H``,
    by their first ``H`` tokens)."""
    acc = np.zeros(1)
    for level, rows in enumerate(levels):
        acc = (acc[:, None] * rows).ravel()
        if level + 1 in by_length:
            acc = acc + by_length[level + 1]
    return acc if beyond is None else acc + beyond


def sequence_law(model: SequenceModel, horizon: int) -> np.ndarray:
    """``[V^H]`` the target's law ``P(z)`` of the first ``horizon`` tokens, sequences in
    lexicographic order (float64).

    >>> from otm.sequences import context_independent_model
    >>> sequence_law(context_independent_model([0.25, 0.75], [0.5, 0.5], 2), 2).tolist()
    [0.0625, 0.1875, 0.1875, 0.5625]
    """
    model.require_length(horizon, "the stream law")
    out = np.ones(1)
    for rows in _levels(model, horizon):
        out = (out[:, None] * rows).ravel()
    return out


def stream_law(model: SequenceModel, outputs, horizon: int) -> np.ndarray:
    """``[V^H]`` the law of the first ``horizon`` stream tokens of a step whose output law is
    ``outputs`` (an :class:`otm.sequences.OutputLaw` or ``{sequence: mass}``): each output
    continued by the target, or cut to ``horizon`` tokens. Equals :func:`sequence_law` for
    a lossless verifier (docs/sequences.md, condition (L)).

    >>> from otm.sequences import context_independent_model
    >>> m = context_independent_model([0.25, 0.75], [0.5, 0.5], 2)
    >>> stream_law(m, {(1,): 1.0}, 2).tolist()        # one target token, then the target
    [0.0, 0.0, 0.25, 0.75]
    """
    model.require_length(horizon, "the stream law")
    masses = outputs.masses if isinstance(outputs, OutputLaw) else outputs
    vocab = model.vocab_size
    by_length: dict = {}
    beyond = np.zeros(vocab**horizon)
    for sequence, mass in masses.items():
        code = 0
        for token in sequence[:horizon]:
            code = code * vocab + int(token)
        if len(sequence) > horizon:
            beyond[code] += float(mass)
        else:
            by_length.setdefault(len(sequence), np.zeros(vocab ** len(sequence)))[code] += float(mass)
    return _extend(_levels(model, horizon), by_length, beyond)


# --------------------------------------------------------------------------- the assertion


def _cast_model(tables: PrefixTables, dtype: torch.dtype) -> SequenceModel:
    """The model as the verifier sees it: every row of ``tables`` (cast to ``dtype``)
    renormalised in float64 (:func:`otm.distributions.as_distribution`, the dtype's sum
    tolerance)."""
    target, draft = {}, {}
    for i in range(tables.target.shape[0]):
        prefix = tables.sequence(i)
        target[prefix] = as_distribution(tables.target[i], f"p(. | {prefix}) in {dtype}")
        draft[prefix] = as_distribution(tables.draft[i], f"q(. | {prefix}) in {dtype}")
    return sequence_model(target, draft)


def _stream_counts(keys: np.ndarray, weights: np.ndarray, offset: np.ndarray, vocab: int,
                   levels: list[np.ndarray]) -> np.ndarray:
    """``[V^H]`` weighted stream counts of the outputs ``keys`` (:class:`PrefixTables` ids)."""
    horizon = len(levels)
    lengths = np.searchsorted(offset, keys, side="right") - 1
    codes = keys - offset[lengths]
    by_length = {int(l): np.bincount(codes[lengths == l], weights[lengths == l], minlength=vocab ** int(l))
                 for l in np.unique(lengths) if l <= horizon}
    longer = lengths > horizon
    beyond = np.bincount(codes[longer] // vocab ** (lengths[longer] - horizon), weights[longer],
                         minlength=vocab**horizon)
    return _extend(levels, by_length, beyond)


def _sequences(cells: np.ndarray, vocab: int, horizon: int, limit: int = 5) -> str:
    """The first ``limit`` sequences of ``cells`` (codes), spelled out."""
    shown = [str(tuple(int(t) for t in np.unravel_index(int(c), (vocab,) * horizon))) for c in cells[:limit]]
    return ", ".join(shown) + (f", ... {cells.size - limit} more" if cells.size > limit else "")


def assert_tree_lossless(verify: TreeVerifyFunction, tree: str | Tree, model: SequenceModel, *, scheme: str = "iid",
                         n: int = DEFAULT_ROWS, alpha: float = DEFAULT_ALPHA, seed: int = 0, device="cpu",
                         dtype: torch.dtype = torch.float32, horizon: int | None = None,
                         detect_tv: float | None = None, detect_law=None, control: bool = True,
                         max_trees: int = MAX_TUPLES, draft_sampler: DraftSampler | None = None) -> TreeCertificate:
    """Assert that ``verify`` (the toolkit's tree verifier contract, module docstring) is
    lossless on draft trees of shape ``tree`` (a :func:`decoding.runtime.trees.parse_tree`
    spec or a ``Tree``) whose siblings are drawn from ``q`` with ``scheme`` (``iid``,
    ``without_replacement``, ``hub``, ``greedy``; a node with one child draws from ``q``),
    against ``model``'s target: the first ``horizon`` stream tokens (default ``depth + 1``)
    follow ``P``, at false-alarm rate ``alpha`` (1e-9 by default).

    Raises :class:`~decoding.certify.assertions.OutputLawMismatch` (naming the sequences and
    first tokens that carry the wrong mass), ``NoPower`` (the control was not detected),
    ``Undetectable``; :class:`otm.errors.NotApplicableError` for a tree without drafts, a
    model too short for it or more than :data:`MAX_SEQUENCES` sequences; typed
    :mod:`otm.errors` for other bad input and for malformed verifier outputs.
    """
    tree = check_model_and_tree(model, tree)
    root = model.as_float()
    _, _, _, n = _check_arguments(root.target(()), root.draft(()), 1, scheme, n, alpha)
    depth, vocab = tree.max_depth, model.vocab_size
    horizon = depth + 1 if horizon is None else horizon
    if isinstance(horizon, bool) or not isinstance(horizon, (int, np.integer)) or not 1 <= horizon <= depth + 1:
        raise NotApplicableError(f"horizon must be an integer in 1..depth + 1 = {depth + 1}, got {horizon!r}")
    if vocab ** (depth + 1) > MAX_SEQUENCES:
        raise NotApplicableError(f"V^(depth + 1) = {vocab}^{depth + 1} sequences exceed MAX_SEQUENCES={MAX_SEQUENCES:,}: "
                                 f"certify on a smaller vocabulary or a shallower tree")
    tables = PrefixTables(model, depth, dtype, device)
    cast = _cast_model(tables, dtype)
    levels = _levels(cast, horizon)
    reference = sequence_law(cast, horizon)
    trees = enumerate_trees(cast, tree, scheme, max_trees)
    generator = torch.Generator(device=tables.target.device).manual_seed(seed)
    if trees is not None:
        copies, per_copy = enumeration_copies([float(w) for _, w in trees], n)
        tokens = torch.as_tensor(np.repeat(np.stack([t for t, _ in trees]), copies, axis=0), device=tables.target.device)
        weights = np.repeat(per_copy, copies)
    else:
        tokens = sample_trees(tables, tree, n, generator, draft_sampler or default_draft_sampler(scheme))
        weights = np.ones(n)
    rows = tokens.shape[0]
    cells = int((reference > IMPOSSIBLE_PROBABILITY).sum())
    tolerance = horizon * dtype_tolerance(dtype, vocab)
    tv = detectable_tv(n, rows, cells, alpha, POWER_MISS, tolerance)
    require_detectable(detect_tv, detect_law, reference, tv=tv, n=n, rows=rows, cells=cells, alpha=alpha, share=alpha,
                       tolerance=tolerance, law="a stream law", of="P", unit="sequences")

    def run(target_tables: PrefixTables) -> tuple[np.ndarray, np.ndarray]:
        keys, taus = run_on_trees(verify, tree, target_tables, tokens, generator)
        return _stream_counts(keys, weights, tables.offset, vocab, levels), taus

    counts, taus = run(tables)
    stream_test = set_test(counts, reference, n, rows, alpha, tolerance)
    first = counts.reshape(vocab, -1).sum(axis=1) / n
    certificate = TreeCertificate(
        tree=tree.spec, scheme=scheme, vocab_size=vocab, depth=depth, horizon=horizon,
        mode="enumeration" if trees is not None else "sampling", trees=len(trees) if trees is not None else None,
        n=n, rows=rows, alpha=alpha, seed=seed, dtype=str(dtype).replace("torch.", ""), device=str(tables.target.device),
        tv=tv, tolerance=tolerance, stream_test=stream_test, stream_estimate=counts / n,
        tv_estimate=0.5 * float(np.abs(counts / n - reference).sum()), first_token_law=first,
        first_tv_estimate=0.5 * float(np.abs(first - cast.target(())).sum()), expected_accepted=float(weights @ taus) / n,
    )
    if not stream_test.passed:
        raise OutputLawMismatch(_failure(certificate, reference, cast.target(()), vocab) + "\n" + certificate.report(),
                                certificate)
    if not control:
        return certificate

    def twin_counts(twin: np.ndarray) -> np.ndarray:
        twin_tables = copy.copy(tables)
        twin_tables.target = tables.target.clone()
        twin_tables.target[0] = torch.as_tensor(twin, dtype=tables.target.dtype, device=tables.target.device)
        return run(twin_tables)[0]

    line = target_control(certificate, reference, rows, cells, alpha, tolerance,
                          lambda tv: _target_twin(cast.target(()), tv), twin_counts, law="stream law", of="P",
                          given="a root target at TV {tv:.4g} from p", verifier="tree verifier",
                          hint=": does it read the target rows it is given?")
    return replace(certificate, control=line)


def _failure(certificate: TreeCertificate, reference: np.ndarray, p_root: np.ndarray, vocab: int) -> str:
    """The first line of a failure: which sequences and which first tokens carry the wrong mass."""
    test, first = certificate.stream_test, certificate.first_token_law
    if math.isinf(test.statistic):
        return (f"FAIL: the stream of emitted tokens holds sequences of target probability 0: "
                f"{_sequences(test.deviating, vocab, certificate.horizon)}")
    return (f"FAIL: the emitted tokens, continued by the target, are not P: TV estimate {certificate.tv_estimate:.4g}; "
            f"{test.deviating.size} sequences of {certificate.horizon} tokens carry {test.observed_mass:.4f} instead of "
            f"{test.expected_mass:.4f} (among them {_sequences(test.deviating, vocab, certificate.horizon, 3)}); first "
            f"token: {worst_tokens(first, p_root)}")


__all__ = ["MAX_SEQUENCES", "TreeCertificate", "assert_tree_lossless", "sequence_law", "stream_law"]
