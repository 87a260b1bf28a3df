"""Checks of the sequence-level claims: chains and trees of drafts (docs/sequences.md).

Papers: block verification (Sun, Mendlovic, Leviathan, Aharoni, Ro, Beirami, Suresh,
"Block Verification Accelerates Speculative Decoding", ICLR 2025, arXiv:2403.10444) is
lossless, optimal in the expected number of accepted tokens, and never worse than
token-wise verification (Leviathan, Kalman, Matias, ICML 2023, arXiv:2211.17192);
traversal verification (Weng, Hu, Chen, Liu, Mei, Qiu, Tian, Shi, "Traversal Verification
for Speculative Tree Decoding", NeurIPS 2025, arXiv:2505.12398) is lossless and is block
verification on a chain; node-by-node walks of a draft tree with the per-node rules (SpecTr,
Sun et al., NeurIPS 2023, arXiv:2310.15141, Alg. 3) are lossless. New here: the gap of every
such verifier to the tree-level optimum (an LP, docs/sequences.md, section 6).

Every quantity is an exact rational (random models on the grid ``1/N``, zeros included,
built by :func:`otm.sequences.random_model`), so every slack must be exactly ``>= 0``
(tolerance 0; an LP optimum whose float answer could not be certified exactly is compared
within :data:`otm.tolerances.AGREEMENT_TOLERANCE`, see :func:`_against_lp`). The slacks come from :mod:`otm.sequences.checks`. Each ``check_*`` takes
the instance budget, a generator, and its ingredient (the exact law or value under test;
the core function by default), so a test can pass a broken one and see the check fail.
An instance is the model's two tables, so a counterexample is self-contained.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from otm.sequences import (
    block_verification_law,
    checks,
    context_independent_model,
    random_model,
    sequence_model,
    solve_chain_optimum,
    solve_tree_optimum,
    traversal_law,
    tree_walk_expected_accepted,
    tree_walk_law,
)
from otm.rules import rule_spec
from otm.tolerances import AGREEMENT_TOLERANCE

from .check import RANDOM_SEARCH, Check, SlackSearch, run_search

PAPER = "sequences"
BLOCK = "Sun et al. 2025 (Block Verification, arXiv:2403.10444)"
TRAVERSAL = "Weng et al. 2025 (Traversal Verification, arXiv:2505.12398)"
OURS = "docs/sequences.md"

#: The per-node rules whose tree walks are checked, each with its registry draft scheme.
TREE_WALK_RULES = ("rrs", "rrs_wor", "kseq", "spechub", "greedy")

#: The sibling schemes of traversal verification.
TRAVERSAL_SCHEMES = ("iid", "without_replacement")

#: Trees of the tree checks: depth 2, two drafts per node.
TREE_DEPTH, TREE_K = 2, 2

#: Random rows: Dirichlet concentrations (peaked to flat) and grid denominators (zeros appear).
CONCENTRATIONS = (0.3, 1.0, 3.0)
DENOMINATORS = (4, 6, 12)

#: The coupling LP (the definition of the chain optimum) is solved up to this many blocks.
LP_BLOCKS = 9

_F = Fraction
_NOTE_EXACT = "Exact rationals: a slack must be exactly >= 0."


def _tables(model) -> dict:
    return {"target": {s: list(row) for s, row in model.target_table.items()},
            "draft": {s: list(row) for s, row in model.draft_table.items()}}


def fixed_models(lengths) -> list:
    """``[(name, g, model)]``: Sun et al. 2025's motivating example (token-wise 10/9, block
    11/9 at g = 2), the degenerate instances every check must take (p = q, disjoint
    supports) at ``g = lengths[0]``, and at ``g = lengths[-1]`` an adversarial one with two
    tokens where ``p > q`` (only then do the residuals of block verification and of
    recursive rejection sampling's second draft differ from simpler, lossy ones)."""
    g, longest = lengths[0], lengths[-1]
    return [
        ("Sun et al. 2025 example", g, context_independent_model([_F(1, 3), _F(2, 3)], [_F(2, 3), _F(1, 3)], g + 1)),
        ("p equals q", g, context_independent_model([_F(1, 3), _F(1, 6), _F(1, 2)], [_F(1, 3), _F(1, 6), _F(1, 2)], g + 1)),
        ("disjoint supports", g, context_independent_model([_F(1), _F(0)], [_F(0), _F(1)], g + 1)),
        ("two tokens with p > q", longest,
         context_independent_model([_F(1, 5), _F(1, 2), _F(3, 10)], [_F(7, 20), _F(9, 20), _F(1, 5)], longest + 1)),
    ]


def sequence_cases(rng: np.random.Generator, count: int, lengths=(2, 3), vocab_sizes=(2, 3)):
    """The fixed models of :func:`fixed_models`, then ``count`` random exact models; each case
    is ``{"name", "g", "target", "draft"}`` with ``g`` the block length (or tree depth) and
    the model defined for ``g + 1`` tokens."""
    for name, g, model in fixed_models(lengths):
        yield {"name": name, "g": g, **_tables(model)}
    for i in range(count):
        g = int(rng.choice(lengths))
        vocab = int(rng.choice(vocab_sizes))
        seed = int(rng.integers(2**31))
        model = random_model(vocab, g + 1, np.random.default_rng(seed), float(rng.choice(CONCENTRATIONS)),
                             int(rng.choice(DENOMINATORS)))
        yield {"name": f"random {i} (V={vocab}, seed {seed})", "g": g, **_tables(model)}


def model_of(case: dict):
    """The :class:`otm.sequences.SequenceModel` of a case."""
    return sequence_model(case["target"], case["draft"])


def _budget(instances: int, divisor: int, least: int = 3) -> int:
    return max(least, instances // divisor)


def _against_lp(slack, exact: bool):
    """A slack against an LP optimum: as is when the optimum was certified exactly; else
    (HiGHS' float value, ``exact=False``) a violation within
    :data:`otm.tolerances.AGREEMENT_TOLERANCE` is float noise and counts as 0."""
    if exact or slack < -AGREEMENT_TOLERANCE:
        return slack
    return max(float(slack), 0.0)


# --------------------------------------------------------------------------- block verification


def check_block_lossless(instances: int, rng: np.random.Generator, law_fn=None) -> Check:
    """Block verification's exact output law is lossless ((L) of docs/sequences.md, section 1)."""
    law_fn = law_fn or block_verification_law
    check = Check(
        id="sequences.block.lossless", paper=PAPER, source=f"{BLOCK}, main claim (lossless); {OURS} section 2",
        claim="Block verification is lossless: its output (the accepted draft prefix and one token), extended by "
              "sampling the target, follows the target's law over sequences.",
        formula="sum_{l} m(z_<=l) P(z_>l | z_<=l) = P(z) for every z in V^(g+1), m = law of (X_<=tau, Y)",
        method=RANDOM_SEARCH,
        note=f"Exact law by enumeration of every block (otm.sequences.block_verification_law), random exact models "
             f"V = 2..3, g = 2..3, plus fixed and degenerate models. {_NOTE_EXACT} The algorithm is our "
             f"reconstruction from the paper's summary (docs/sequences.md, section 2).",
    )
    return run_search(check, sequence_cases(rng, _budget(instances, 2)),
                      lambda c: checks.check_block_verification_lossless(model_of(c), c["g"], law=law_fn(model_of(c), c["g"])).slack,
                      tolerance=0.0)


def _block_value(model, g):
    return block_verification_law(model, g).expected_accepted()


def check_block_optimal(instances: int, rng: np.random.Generator, value_fn=None) -> Check:
    """Block verification attains the draft-prefix chain optimum: the closed form of Theorem 3
    (docs/sequences.md) and, on small instances, the coupling LP that defines it."""
    value_fn = value_fn or _block_value
    check = Check(
        id="sequences.block.optimal", paper=PAPER,
        source=f"{BLOCK}, main claim (optimal accepted length); {OURS} Theorem 3",
        claim="Block verification's expected accepted length is the best of every lossless verifier that emits an "
              "accepted prefix of the draft block and one token, even one that knows all of P and Q.",
        formula="E[tau_block] = max_{lossless K} E[tau] = sum_u A*(u),  A*(s y) = min(Q(s y), A*(s) p(y|s))",
        method=RANDOM_SEARCH,
        note=f"Against the closed form (otm.sequences.draft_prefix_optimum) always, and against the coupling LP over "
             f"all verifier kernels (otm.sequences.solve_chain_optimum, HiGHS certified exactly) when V^g <= {LP_BLOCKS}. "
             f"{_NOTE_EXACT} The paper states optimality among verifiers that see the conditionals along the draft; "
             "the LP shows it holds against full information too.",
    )
    lp_solved = 0

    def slack(c):
        nonlocal lp_solved
        model, g = model_of(c), c["g"]
        value = value_fn(model, g)
        verdict = checks.check_block_attains_chain_optimum(model, g, value=value)
        slacks = [verdict.slack]
        if model.vocab_size**g <= LP_BLOCKS:
            lp = solve_chain_optimum(model, g)
            lp_solved += 1
            slacks.append(_against_lp(-abs(lp.value - value), lp.exact))
        return min(slacks)

    check = run_search(check, sequence_cases(rng, _budget(instances, 2)), slack, tolerance=0.0)
    check.note += f" The LP was solved on {lp_solved} instances."
    return check


def check_block_vs_tokenwise(instances: int, rng: np.random.Generator, value_fn=None) -> Check:
    """Block verification accepts at least as many tokens as token-wise verification."""
    value_fn = value_fn or _block_value
    check = Check(
        id="sequences.block.never_worse", paper=PAPER,
        source=f"{BLOCK}, main claim (never worse than token-level verification); {OURS} section 2",
        claim="Block verification's expected accepted length is at least that of token-wise verification "
              "(Leviathan et al. 2023) on the same draft block.",
        formula="E[tau_block] = sum_u Q(u) w(u) >= sum_u prod_i min(p_i, q_i)(u_i) = E[tau_tokenwise]",
        method=RANDOM_SEARCH,
        note=_NOTE_EXACT,
    )
    search = SlackSearch(tolerance=0.0)
    strict, best = 0, (_F(0), None)
    for case in sequence_cases(rng, _budget(instances, 2)):
        model, g = model_of(case), case["g"]
        verdict = checks.check_block_never_worse_than_tokenwise(model, g, value=value_fn(model, g))
        search.record(verdict.slack, case)
        if verdict.slack > 0:
            strict += 1
            gain = verdict.slack / verdict.details["tokenwise"] if verdict.details["tokenwise"] else _F(0)
            best = max(best, (gain, case["name"]), key=lambda t: t[0])
    check = search.finish(check)
    check.note += (f" Strictly better on {strict} of {search.count} instances; the largest relative gain was "
                   f"{float(best[0]):.1%} ({best[1]}).")
    return check


# --------------------------------------------------------------------------- traversal verification


def check_traversal_lossless(instances: int, rng: np.random.Generator, law_fn=None) -> Check:
    """Traversal verification's exact output law is lossless on trees of depth 2, k = 2,
    for both sibling schemes."""
    law_fn = law_fn or traversal_law
    check = Check(
        id="sequences.traversal.lossless", paper=PAPER, source=f"{TRAVERSAL}, main claim (lossless); {OURS} section 5",
        claim="Traversal verification is lossless on a random draft tree: its output (an accepted path and one token), "
              "extended by the target, follows the target's law.",
        formula="sum_{l} m(z_<=l) P(z_>l | z_<=l) = P(z) for every z in V^(d+1), m = law of traversal's output",
        method=RANDOM_SEARCH,
        note=f"Exact law by the memoised recursion (otm.sequences.traversal_law), trees of depth {TREE_DEPTH} with "
             f"k = {TREE_K} drafts per node, siblings i.i.d. and without replacement, V = 2..3. {_NOTE_EXACT} "
             "The update rules are our reconstruction (docs/sequences.md, section 5).",
    )

    def cases():
        for case in sequence_cases(rng, _budget(instances, 3), lengths=(TREE_DEPTH,)):
            for scheme in TRAVERSAL_SCHEMES:
                yield {**case, "draft_scheme": scheme}

    def slack(c):
        model = model_of(c)
        law = law_fn(model, TREE_DEPTH, TREE_K, c["draft_scheme"])
        return checks.check_traversal_lossless(model, TREE_DEPTH, TREE_K, c["draft_scheme"], law=law).slack

    return run_search(check, cases(), slack, tolerance=0.0)


def check_traversal_is_block_on_chains(instances: int, rng: np.random.Generator, law_fn=None) -> Check:
    """With one draft per node, traversal verification's exact law is block verification's."""
    law_fn = law_fn or (lambda model, g: traversal_law(model, g, 1))
    check = Check(
        id="sequences.traversal.chain_is_block", paper=PAPER,
        source=f"{TRAVERSAL}, chain case (optimal on chains); {BLOCK}; {OURS} section 5",
        claim="On a single draft chain, traversal verification has exactly the output law of block verification "
              "(so it inherits its losslessness and optimality).",
        formula="law(traversal, k = 1, depth g) == law(block verification, g)",
        method=RANDOM_SEARCH,
        note=f"Both exact laws compared output by output, V = 2..3, g = 2..3. {_NOTE_EXACT}",
    )
    return run_search(check, sequence_cases(rng, _budget(instances, 2)),
                      lambda c: checks.check_traversal_on_chain_is_block_verification(model_of(c), c["g"],
                                                                               law=law_fn(model_of(c), c["g"])).slack,
                      tolerance=0.0)


# --------------------------------------------------------------------------- node-wise tree walks


def check_tree_walks_lossless(instances: int, rng: np.random.Generator, law_fn=None, rules=TREE_WALK_RULES) -> Check:
    """The node-by-node walk of a draft tree with each per-node rule is lossless."""
    law_fn = law_fn or tree_walk_law
    check = Check(
        id="sequences.tree_walk.lossless", paper=PAPER,
        source="SpecTr (Sun et al. 2023), Thm 3 and Alg. 3 (tree walks); " f"{OURS} section 4",
        claim="Walking a random draft tree node by node with a lossless per-node rule (" + ", ".join(rules) + ") and "
              "emitting the accepted path plus the rule's output (or the bonus token at a leaf) is lossless.",
        formula="sum_{l} m(z_<=l) P(z_>l | z_<=l) = P(z) for every z in V^(d+1), m = law of the walk's output",
        method=RANDOM_SEARCH,
        note=f"Exact law (otm.sequences.tree_walk_law), trees of depth {TREE_DEPTH}, k = {TREE_K}, each rule with its "
             f"own per-node draft law (the registry's draft_scheme), V = 2..3. {_NOTE_EXACT}",
    )

    def cases():
        for case in sequence_cases(rng, _budget(instances, 4), lengths=(TREE_DEPTH,)):
            for rule in rules:
                yield {**case, "rule": rule}

    def slack(c):
        model = model_of(c)
        return checks.check_lossless(model, law_fn(model, TREE_DEPTH, TREE_K, c["rule"])).slack

    return run_search(check, cases(), slack, tolerance=0.0)


def _verifier_value(model, depth: int, k: int, verifier: str, scheme: str):
    """``E[tau]`` of a node-wise rule's walk, or of ``"traversal"`` with ``scheme`` siblings."""
    if verifier == "traversal":
        return traversal_law(model, depth, k, scheme).expected_accepted()
    return tree_walk_expected_accepted(model, depth, k, verifier)


def check_tree_optimum_gaps(instances: int, rng: np.random.Generator, value_fn=None, rules=TREE_WALK_RULES) -> Check:
    """Every verifier stays within the tree-level optimum for its own draft law; the measured
    quantity is the gap, reported per verifier in the note."""
    value_fn = value_fn or _verifier_value
    check = Check(
        id="sequences.tree.optimum_gap", paper=PAPER,
        source=f"{OURS} section 6 (tree-level optimum, new); {TRAVERSAL}; SpecTr (Sun et al. 2023), Alg. 3",
        claim="The expected accepted length of each node-wise tree walk (" + ", ".join(rules) + ") and of traversal "
              "verification is at most the tree-level optimum of its draft law (the best lossless verifier that sees "
              "the whole tree and all of P); the gap is measured.",
        formula="E[tau_rule] <= max_{lossless sigma} E[tau]  (tree LP);  gap = optimum - E[tau_rule]",
        method=RANDOM_SEARCH,
        note=f"Trees of depth {TREE_DEPTH}, k = {TREE_K}, V = 2..3; the optimum by otm.sequences.solve_tree_optimum "
             f"(HiGHS, certified exactly), one LP per instance and draft law. {_NOTE_EXACT}",
    )
    verifiers = [(rule, rule_spec(rule).draft_scheme) for rule in rules] + [("traversal", s) for s in TRAVERSAL_SCHEMES]
    gaps: dict = {}
    below_rrs = compared = 0
    search = SlackSearch(tolerance=0.0)
    for case in sequence_cases(rng, _budget(instances, 12), lengths=(TREE_DEPTH,)):
        model = model_of(case)
        optima: dict = {}
        values: dict = {}
        for name, scheme in verifiers:
            if scheme not in optima:
                optima[scheme] = solve_tree_optimum(model, TREE_DEPTH, TREE_K, scheme)
            optimum = optima[scheme]
            value = value_fn(model, TREE_DEPTH, TREE_K, name, scheme)
            values[name, scheme] = value
            gap = optimum.value - value
            gaps.setdefault(f"{name} ({scheme})" if name == "traversal" else name, []).append(
                (float(gap), float(gap / optimum.value) if optimum.value else 0.0))
            search.record(_against_lp(gap, optimum.exact),
                          {**case, "verifier": name, "draft_scheme": scheme, "value": value, "optimum": optimum.value})
        for rule, scheme in (("rrs", "iid"), ("rrs_wor", "without_replacement")):
            if (rule, scheme) in values:
                compared += 1
                below_rrs += values["traversal", scheme] < values[rule, scheme]
    check = search.finish(check)
    parts = [f"{name} {np.mean([g for g, _ in v]):.4f} / {max(g for g, _ in v):.4f} "
             f"({max(r for _, r in v):.1%} of the optimum)" for name, v in gaps.items()]
    check.note += (" Measured gap to the tree optimum, mean / largest over the instances (largest relative gap): "
                   + "; ".join(parts) + f". Traversal verification was below node-wise recursive rejection sampling with "
                   f"the same siblings on {below_rrs} of {compared} comparisons.")
    return check


CHECKS = {
    "sequences.block.lossless": lambda n, rng: check_block_lossless(n, rng),
    "sequences.block.optimal": lambda n, rng: check_block_optimal(n, rng),
    "sequences.block.never_worse": lambda n, rng: check_block_vs_tokenwise(n, rng),
    "sequences.traversal.lossless": lambda n, rng: check_traversal_lossless(n, rng),
    "sequences.traversal.chain_is_block": lambda n, rng: check_traversal_is_block_on_chains(n, rng),
    "sequences.tree_walk.lossless": lambda n, rng: check_tree_walks_lossless(n, rng),
    "sequences.tree.optimum_gap": lambda n, rng: check_tree_optimum_gaps(n, rng),
}
