"""Bring your own chain or tree verifier (decoding.validation.own_tree_verifier): the toolkit's
sequence verifiers pass with their exact accepted lengths inside the interval, four realistic
bugs are caught at the default alpha, an accepted length above the optimum fails, the
false-alarm rate is at most alpha, bad inputs raise typed errors, degenerate models work."""
import json
from fractions import Fraction as F

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from decoding.runtime.trees import parse_tree
from decoding.validation.own_tree_verifier import (
    ExampleRecursiveRejection,
    PrefixTables,
    chain_verifier,
    enumerate_trees,
    example_shared_coin_tree_verifier,
    example_stale_residual_tree_verifier,
    example_tokenwise_residual_block_verifier,
    example_unprocessed_draft_probs_verifier,
    node_walk_verifier,
    sample_trees,
    validate_tree_verifier,
)
from decoding.validation.own_verifier import default_draft_sampler
from decoding.validation.stats import DEFAULT_ALPHA, chi_square_test
from decoding.verifiers import block, traversal
from decoding.verifiers.base import draw_uniforms, sample_weighted
from otm.distributions import logits_to_probs
from otm.errors import (
    InvalidDistributionError,
    NotApplicableError,
    ShapeMismatchError,
    UnknownNameError,
)
from otm.rules import rule_acceptance, rule_law
from otm.sequences import (
    block_expected_accepted,
    context_independent_model,
    path_set_law,
    random_model,
    sequence_model,
    tokenwise_expected_accepted,
    traversal_law,
    tree_walk_expected_accepted,
)
from otm.tolerances import AGREEMENT_TOLERANCE

pytestmark = pytest.mark.usefixtures("one_torch_thread")

MODES = ("enumeration", "sampling")

#: An interval at this level misses the exact value with probability DEFAULT_ALPHA, the
#: false-alarm rate of every other check here.
CONFIDENCE = 1 - DEFAULT_ALPHA

#: V = 3, length 4: chains up to chain:3. Block verification with the token-wise residual is
#: far from lossless on it (on many random chains it is only slightly lossy).
CHAIN_MODEL = random_model(3, 4, np.random.default_rng(2))

#: V = 3, length 3: trees up to depth 2 (kary:2,2 has 729 i.i.d. and 216 without-replacement draft trees).
TREE_MODEL = random_model(3, 3, np.random.default_rng(0))

#: Every node has the same rows, chosen so that one coin shared by two i.i.d. siblings is far
#: from lossless (its output is 0.05 from p in total variation at every node): the second
#: sibling's ratio r_1(x)/q(x) must lie strictly between 0 and 1, which many rows never give.
SHARED_COIN_MODEL = context_independent_model([F(7, 20), F(8, 20), F(5, 20)], [F(12, 20), F(7, 20), F(1, 20)], 3)


def traversal_with(scheme: str):
    """The toolkit's traversal verifier for siblings drawn with ``scheme``."""
    def verify(tree, draft_tokens, target_probs, draft_probs, generator):
        return traversal.verify(tree, draft_tokens, target_probs, draft_probs, generator, scheme)

    return verify


def merged_rrs_walk_expected_accepted(model) -> float:
    """Exact ``E[tau]`` of the decoding loop's walk with i.i.d. recursive rejection sampling on
    ``kary:2,2`` (SpecTr, Sun et al. 2023, arXiv:2310.15141, Alg. 3, which merges the subtrees
    of equal accepted drafts; otm.sequences.tree_walk_law does not merge). At the root, ``Y = y``
    is accepted with ``a(y)`` (``accepted_per_token``); both drafts equal ``y`` and the first is
    accepted with ``b(y) = q(y) min(p(y), q(y))`` (the second cannot be: ``(p - q)^+`` is 0 at a
    rejected draft). The next level verifies the 4 merged children when both were ``y``, else 2:

        E[tau] = sum_y a(y) + b(y) acc_4(y) + (a(y) - b(y)) acc_2(y),

    ``acc_k(y)`` = rrs's acceptance with ``k`` i.i.d. drafts from ``q(. | y)`` against ``p(. | y)``."""
    def rows(s):
        return np.array(model.target(s), dtype=float), np.array(model.draft(s), dtype=float)

    p, q = rows(())
    accepted = np.asarray(rule_law("rrs", p, q, 2).details["accepted_per_token"], dtype=float)
    both = q * np.minimum(p, q)
    total = accepted.sum()
    for y in range(model.vocab_size):
        p_y, q_y = rows((y,))
        total += both[y] * float(rule_acceptance("rrs", p_y, q_y, 4))
        total += (accepted[y] - both[y]) * float(rule_acceptance("rrs", p_y, q_y, 2))
    return float(total)


def assert_contains(report, exact: float) -> None:
    lo, hi = report.accepted_interval
    assert lo - AGREEMENT_TOLERANCE <= exact <= hi + AGREEMENT_TOLERANCE, report.summary()


# --------------------------------------------------------------------------- the real verifiers pass


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("g", [2, 3])
def test_block_verification_passes_on_chains_with_gap_zero(mode, g):
    report = validate_tree_verifier(chain_verifier(block.verify), CHAIN_MODEL, f"chain:{g}", rule="block", mode=mode,
                                    confidence=CONFIDENCE)
    assert report.passed, report.summary()
    assert report.summary().startswith("PASS")
    assert (report.mode, report.depth, report.horizon) == (mode, g, g + 1)
    exact = float(block_expected_accepted(CHAIN_MODEL, g))
    assert_contains(report, exact)
    assert report.expected_rule_accepted == pytest.approx(exact, abs=AGREEMENT_TOLERANCE)
    # docs/sequences.md, Theorem 3: block verification is the chain optimum, so its exact gap is 0
    assert report.optimum == pytest.approx(exact, abs=AGREEMENT_TOLERANCE)
    assert report.optimum_kind.startswith("chain optimum")
    assert report.gap_interval[0] <= 0 <= report.gap_interval[1]
    assert report.optimum_test.passed and report.rule_test.passed
    assert report.accepted_length_law.sum() == pytest.approx(1.0)
    json.dumps(report.as_dict())


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scheme", ["iid", "without_replacement"])
def test_traversal_verification_passes_on_trees_below_the_tree_optimum(mode, scheme):
    report = validate_tree_verifier(traversal_with(scheme), TREE_MODEL, "kary:2,2", rule="traversal", scheme=scheme,
                                    mode=mode, confidence=CONFIDENCE)
    assert report.passed, report.summary()
    exact = float(traversal_law(TREE_MODEL, 2, 2, scheme).expected_accepted())
    assert_contains(report, exact)
    assert report.expected_rule_accepted == pytest.approx(exact, abs=AGREEMENT_TOLERANCE)
    # the tree LP is computed in both modes; traversal verification stays below it (gap reported)
    assert report.optimum_kind == "tree optimum (LP)"
    assert report.optimum >= exact - AGREEMENT_TOLERANCE
    assert report.gap == pytest.approx(report.optimum - report.expected_accepted)
    assert f"gap {report.gap:.4f}" in report.summary()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("rule, scheme", [("rrs", "iid"), ("rrs_wor", "without_replacement")])
def test_node_walk_passes_with_its_exact_accepted_length(mode, rule, scheme):
    report = validate_tree_verifier(node_walk_verifier(rule), TREE_MODEL, "kary:2,2", scheme=scheme, mode=mode,
                                    confidence=CONFIDENCE)
    assert report.passed, report.summary()
    if rule == "rrs":  # i.i.d. siblings: the walk merges equal accepted drafts
        exact = merged_rrs_walk_expected_accepted(TREE_MODEL)
    else:
        exact = float(tree_walk_expected_accepted(TREE_MODEL, 2, 2, rule))
    assert_contains(report, exact)
    assert report.rule_test is None
    assert report.optimum >= exact - AGREEMENT_TOLERANCE


def test_the_correct_example_sampler_passes_and_tuple_outputs_are_read():
    report = validate_tree_verifier(node_walk_verifier(ExampleRecursiveRejection()), SHARED_COIN_MODEL, "kary:2,2")
    assert report.passed, report.summary()

    def as_tuple(*args):
        out = traversal.verify(*args)
        return out.accepted_node, out.tokens

    assert validate_tree_verifier(as_tuple, TREE_MODEL, "kary:2,2", rule="traversal").passed


def test_any_tree_shape_is_validated_and_the_optimum_note_says_why_it_is_missing():
    # branching:2;2,1: the two children of the root have 2 and 1 children (equal draft tokens included)
    for mode in MODES:
        report = validate_tree_verifier(traversal_with("iid"), TREE_MODEL, "branching:2;2,1", scheme="iid", mode=mode)
        assert report.passed, report.summary()
        assert report.optimum is None and report.optimum_test is None
        assert "full k-ary" in report.details["optimum_note"] in report.summary()


# --------------------------------------------------------------------------- the bugs fail


BUGS = {
    # name: (deliberately wrong verifier, its correct counterpart, model, tree, arguments)
    "stale residual": (example_stale_residual_tree_verifier(), node_walk_verifier("rrs"), SHARED_COIN_MODEL,
                       "kary:2,2", {"scheme": "iid"}),
    "shared coin": (example_shared_coin_tree_verifier(), node_walk_verifier(ExampleRecursiveRejection()),
                    SHARED_COIN_MODEL, "kary:2,2", {"scheme": "iid"}),
    "token-wise residual": (chain_verifier(example_tokenwise_residual_block_verifier), chain_verifier(block.verify),
                            CHAIN_MODEL, "chain:3", {"rule": "block"}),
}


def processed_pair():
    """``(unprocessed, processed)``: the draft model's softmax, and the law drafts really come
    from after temperature 0.7 and top-p 0.8 (the target is the same)."""
    unprocessed = random_model(3, 3, np.random.default_rng(4))
    draft = {s: logits_to_probs(np.log(row), 0.7, top_p=0.8) for s, row in unprocessed.draft_table.items()}
    return unprocessed, sequence_model(unprocessed.target_table, draft)


UNPROCESSED, PROCESSED = processed_pair()
BUGS["unprocessed draft probs"] = (example_unprocessed_draft_probs_verifier(traversal.verify, UNPROCESSED),
                                   traversal.verify, PROCESSED, "kary:2,2", {"rule": "traversal"})


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("bug", sorted(BUGS))
def test_each_bug_fails_at_the_default_alpha_where_its_fix_passes(bug, mode):
    wrong, correct, model, shape, kwargs = BUGS[bug]
    good = validate_tree_verifier(correct, model, shape, mode=mode, **kwargs)
    bad = validate_tree_verifier(wrong, model, shape, mode=mode, **kwargs)
    assert good.passed, good.summary()
    assert not bad.lossless, bad.summary()
    assert not bad.passed
    assert bad.next_token_test.p_value < DEFAULT_ALPHA / 2, bad.summary()
    assert bad.extended_test.p_value < DEFAULT_ALPHA / 2, bad.summary()
    assert bad.summary().startswith("FAIL: output law, extended by the target, is not P")


def test_accepted_length_above_the_optimum_fails():
    def accept_everything(target_probs, draft_probs, draft_tokens, generator):  # chain signature, lossy
        batch, g = draft_tokens.shape
        bonus = sample_weighted(target_probs[:, g], draw_uniforms(generator, batch, 1, target_probs)[:, 0])
        return block.BlockOutput(n_accepted=torch.full((batch,), g), tokens=bonus)

    report = validate_tree_verifier(chain_verifier(accept_everything), CHAIN_MODEL, "chain:2")
    assert report.expected_accepted == pytest.approx(2.0)
    assert not report.optimum_test.passed and report.optimum_test.p_value < DEFAULT_ALPHA
    assert report.gap_interval[1] < 0
    assert "above the sequence-level optimum" in report.summary()
    # on a tree: the stale residual accepts more than the tree optimum allows
    stale = validate_tree_verifier(example_stale_residual_tree_verifier(), SHARED_COIN_MODEL, "kary:2,2")
    assert not stale.optimum_test.passed, stale.summary()


@pytest.mark.parametrize("mode", MODES)
def test_a_lossless_verifier_that_is_not_the_rule_fails_the_rule_test(mode):
    # token-wise verification (the walk with "single" on a chain) is lossless but accepts less than block verification
    report = validate_tree_verifier(node_walk_verifier("single"), CHAIN_MODEL, "chain:3", rule="block", mode=mode,
                                    confidence=CONFIDENCE)
    assert report.lossless and report.optimum_test.passed, report.summary()
    assert_contains(report, float(tokenwise_expected_accepted(CHAIN_MODEL, 3)))
    assert not report.rule_test.passed and report.rule_test.p_value < DEFAULT_ALPHA
    assert report.summary().startswith("FAIL: accepted length differs from block verification's exact law")


def test_output_with_zero_target_probability_fails_outright():
    model = context_independent_model([F(1, 2), F(1, 2), F(0)], [F(1, 3), F(1, 3), F(1, 3)], 3)

    def emits_token_2(target_probs, draft_probs, draft_tokens, generator):
        return block.BlockOutput(torch.zeros(draft_tokens.shape[0], dtype=torch.int64),
                                 torch.full((draft_tokens.shape[0],), 2))

    report = validate_tree_verifier(chain_verifier(emits_token_2), model, "chain:2", samples=100)
    for test in (report.next_token_test, report.extended_test):
        assert not test.passed and test.p_value == 0.0 and "(2,)" in test.reason


# --------------------------------------------------------------------------- false alarms


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("verifier, model, shape, rule", [
    (chain_verifier(block.verify), CHAIN_MODEL, "chain:2", "block"),
    (traversal.verify, TREE_MODEL, "kary:2,2", "traversal"),
], ids=["block", "traversal"])
def test_false_alarm_rate_is_at_most_alpha(verifier, model, shape, rule, mode):
    """docs/howto-validate-verifier.md, "Chains and trees": over 200 seeds at alpha = 0.05, a
    lossless verifier fails the losslessness tests (alpha / 2 each), and one that matches its
    rule the rule's z-test, at most about alpha of the time (3 standard errors allowed); block
    verification attains the chain optimum, so its "not above the optimum" test is at its
    boundary there."""
    alpha, runs = 0.05, 200
    reports = [validate_tree_verifier(verifier, model, shape, rule=rule, mode=mode, samples=1_000, alpha=alpha, seed=seed)
               for seed in range(runs)]
    bound = alpha + 3 * np.sqrt(alpha * (1 - alpha) / runs)
    assert sum(not r.lossless for r in reports) / runs <= bound
    for test in ("optimum_test", "rule_test"):
        assert sum(not getattr(r, test).passed for r in reports) / runs <= bound, test


# --------------------------------------------------------------------------- exact draft side


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), vocab=st.sampled_from([2, 3]), k=st.sampled_from([1, 2]),
       scheme=st.sampled_from(["iid", "without_replacement", "hub", "greedy"]))
def test_enumerated_trees_have_the_exact_path_set_law(seed, vocab, k, scheme):
    model = random_model(vocab, 3, np.random.default_rng(seed), denominator=6)  # exact, zeros included
    trees = enumerate_trees(model, parse_tree(f"kary:{k},2"), scheme, limit=10_000)
    assert sum(w for _, w in trees) == 1
    law: dict = {}
    tree = parse_tree(f"kary:{k},2")
    for tokens, weight in trees:
        paths = frozenset(tuple(tokens[tree.path(node)[1:]].tolist()) for node in range(1, tree.n_nodes))
        law[paths] = law.get(paths, 0) + weight
    assert law == {s: w for s, w in path_set_law(model, 2, k, "iid" if k == 1 else scheme).items() if w}


def test_enumeration_of_an_unbalanced_tree_keys_the_node_laws_by_children():
    # nodes 1 and 2 can hold the same token but have 2 and 1 children
    model = context_independent_model([F(1, 2), F(1, 2)], [F(1, 2), F(1, 2)], 3)
    trees = enumerate_trees(model, parse_tree("branching:2;2,1"), "iid")
    assert len(trees) == 4 * 4 * 2 and sum(w for _, w in trees) == 1
    assert enumerate_trees(model, parse_tree("branching:2;2,1"), "iid", limit=10) is None


@pytest.mark.parametrize("scheme", ["iid", "without_replacement"])
def test_sampled_trees_follow_the_enumerated_law(scheme):
    tree, rows = parse_tree("kary:2,2"), 20_000
    tables = PrefixTables(TREE_MODEL, 2, torch.float64, None)
    sampled = sample_trees(tables, tree, rows, torch.Generator().manual_seed(0), default_draft_sampler(scheme))
    trees = enumerate_trees(TREE_MODEL, tree, scheme)
    index = {tuple(t.tolist()): i for i, (t, _) in enumerate(trees)}
    counts = np.bincount([index[tuple(row)] for row in sampled.tolist()], minlength=len(trees))
    weights = np.array([float(w) for _, w in trees])
    assert chi_square_test(counts, weights / weights.sum()).passed


# --------------------------------------------------------------------------- inputs


def wrong_length(tree, draft_tokens, target_probs, draft_probs, generator):
    rows = draft_tokens.shape[0] + 1
    return torch.zeros(rows, dtype=torch.int64), torch.zeros(rows, dtype=torch.int64)


def float_tokens(tree, draft_tokens, target_probs, draft_probs, generator):
    rows = draft_tokens.shape[0]
    return torch.zeros(rows, dtype=torch.int64), torch.zeros(rows)


def token_out_of_range(tree, draft_tokens, target_probs, draft_probs, generator):
    rows = draft_tokens.shape[0]
    return torch.zeros(rows, dtype=torch.int64), torch.full((rows,), target_probs.shape[-1])


GOOD = chain_verifier(block.verify)


@pytest.mark.parametrize("verifier, model, shape, kwargs, error, match", [
    (GOOD, CHAIN_MODEL, "chain:2", {"scheme": "spiral"}, UnknownNameError, "scheme"),
    (GOOD, CHAIN_MODEL, "chain:2", {"rule": "tokenwise"}, UnknownNameError, "rule"),
    (GOOD, CHAIN_MODEL, "chain:2", {"mode": "exact"}, UnknownNameError, "mode"),
    (GOOD, CHAIN_MODEL, "chain:2", {"alpha": 0.0}, InvalidDistributionError, "alpha"),
    (GOOD, CHAIN_MODEL, "chain:2", {"alpha": 1.5}, InvalidDistributionError, "alpha"),
    (GOOD, CHAIN_MODEL, "chain:2", {"confidence": 1.0}, InvalidDistributionError, "confidence"),
    (GOOD, CHAIN_MODEL, "chain:2", {"samples": 0}, InvalidDistributionError, "samples"),
    (GOOD, {(): [1.0]}, "chain:2", {}, InvalidDistributionError, "model"),
    (GOOD, CHAIN_MODEL, "chain:4", {}, NotApplicableError, "chain:4"),
    (GOOD, CHAIN_MODEL, "spiral:2", {}, UnknownNameError, "tree kind"),
    (GOOD, CHAIN_MODEL, "chain:3", {"mode": "enumeration", "max_trees": 10}, NotApplicableError, "max_trees"),
    (GOOD, TREE_MODEL, "kary:2,2", {"rule": "block"}, NotApplicableError, "rule='block'"),
    (traversal.verify, TREE_MODEL, "kary:2,2", {"rule": "traversal", "scheme": "hub"}, NotApplicableError, "scheme"),
    (traversal.verify, TREE_MODEL, "chains:2,2", {"rule": "traversal"}, NotApplicableError, "full k-ary"),
    (GOOD, TREE_MODEL, "kary:2,2", {}, NotApplicableError, "needs a chain"),
    (wrong_length, CHAIN_MODEL, "chain:2", {}, ShapeMismatchError, "accepted_node"),
    (float_tokens, CHAIN_MODEL, "chain:2", {}, ShapeMismatchError, "tokens"),
    (token_out_of_range, CHAIN_MODEL, "chain:2", {}, InvalidDistributionError, "vocab_size"),
])
def test_bad_inputs_raise_typed_errors_naming_the_argument(verifier, model, shape, kwargs, error, match):
    with pytest.raises(error, match=match):
        validate_tree_verifier(verifier, model, shape, samples=kwargs.pop("samples", 200), **kwargs)


# --------------------------------------------------------------------------- degenerate models


DEGENERATE = {
    "p equals q": ([F(1, 3), F(1, 6), F(1, 2)], [F(1, 3), F(1, 6), F(1, 2)]),
    "one-hot, equal": ([F(1), F(0), F(0)], [F(1), F(0), F(0)]),
    "one-hot target": ([F(0), F(1), F(0)], [F(1, 3), F(1, 3), F(1, 3)]),
    "one-hot draft": ([F(1, 2), F(1, 4), F(1, 4)], [F(1), F(0), F(0)]),
    "disjoint supports": ([F(1), F(0), F(0)], [F(0), F(1, 2), F(1, 2)]),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(DEGENERATE))
def test_degenerate_models_work(name, mode):
    model = context_independent_model(*DEGENERATE[name], 3)
    kwargs = {"mode": mode, "samples": 2_000, "confidence": CONFIDENCE}
    chain = validate_tree_verifier(chain_verifier(block.verify), model, "chain:2", rule="block", **kwargs)
    assert chain.passed, chain.summary()
    assert_contains(chain, float(block_expected_accepted(model, 2)))
    assert chain.optimum == pytest.approx(chain.expected_rule_accepted, abs=AGREEMENT_TOLERANCE)
    tree = validate_tree_verifier(traversal.verify, model, "kary:2,2", rule="traversal", **kwargs)
    assert tree.passed, tree.summary()
    assert_contains(tree, float(traversal_law(model, 2, 2).expected_accepted()))
    assert all(np.isfinite([tree.expected_accepted, tree.optimum, tree.gap]))
