"""The sequence-level checks (proofs.sequences) hold on the real laws and FAIL on a
deliberately broken ingredient: block verification emitting from the token-wise residual,
token-wise verification's value claimed as the optimum, a verifier emitting one target token,
traversal verification whose residual is not updated between siblings, the token-wise law
claimed as traversal's on a chain, recursive rejection sampling with one coin shared by the
siblings, and a lossy "always accept the first draft" verifier that beats the tree optimum.

Run: .venv/bin/python -m pytest tests/proofs/test_sequences.py -q
"""
from __future__ import annotations

import ast
import json
from fractions import Fraction as F

import numpy as np

from otm.rules.base import RuleLaw
from otm.sequences import OutputLaw, tokenwise_expected_accepted, tokenwise_law, traversal, tree_walk_law
from otm.sequences._arith import normalised, positive_part
from otm.sequences.block_verification import block_weights, stop_probability
from otm.sequences.output_law import add_mass
from proofs import sequences
from proofs.registry import PAPERS, registry

N = 6


def rng():
    return np.random.default_rng(3)


def block_law_with_tokenwise_residual(model, g):
    """Block verification whose token after a stop at ``i < g`` comes from ``norm((p - q)^+)``
    instead of ``norm((w_i p - q)^+)``: a plausible slip, lossy where two tokens have p > q."""
    masses: dict = {}
    for x in model.sequences(g):
        q_x = model.draft_prob(x)
        if not q_x:
            continue
        weights = block_weights(model, x)
        later_fail = model.one()
        for i in range(g, -1, -1):
            h = weights[g] if i == g else stop_probability(model, x[:i], weights[i])
            emitted = model.target(x) if i == g else normalised(positive_part(model.target(x[:i]) - model.draft(x[:i])))
            for y in range(model.vocab_size):
                add_mass(masses, x[:i] + (y,), q_x * later_fail * h * emitted[y])
            later_fail = later_fail * (1 - h)
    return OutputLaw(masses, "block with the token-wise residual")


def shared_coin_rrs(p, q, k):
    """Recursive rejection sampling of k = 2 i.i.d. drafts with ONE uniform for both accept
    tests (x_2 is accepted iff r_1 <= U < r_2): lossy where 0 < r_2 < 1."""
    zero = F(0) if p.dtype == object else 0.0
    out = np.array([zero] * p.size, dtype=p.dtype)
    accepted = out.copy()
    residual = normalised(positive_part(p - q))
    final = normalised(positive_part(residual - q))
    for x1 in range(p.size):
        for x2 in range(p.size):
            w = q[x1] * q[x2]
            if not w:
                continue
            r1, r2 = min(1, p[x1] / q[x1]), min(1, residual[x2] / q[x2])
            for y, mass in ((x1, w * r1), (x2, w * max(r2 - r1, zero))):
                out[y] += mass
                accepted[y] += mass
            out += w * (1 - max(r1, r2)) * final
    return RuleLaw(sum(accepted), out, None, {"accepted_per_token": accepted})


def test_registered_under_sequences_with_the_other_papers_unchanged():
    assert PAPERS[:6] == ("spechub", "khisti", "spectr", "leviathan", "ensemble", "beyond")
    assert PAPERS[-1] == "sequences"
    assert list(registry("sequences")) == list(sequences.CHECKS)
    assert all(cid.startswith("sequences.") for cid in sequences.CHECKS)


def test_block_lossless_holds_and_fails_with_the_tokenwise_residual():
    check = sequences.check_block_lossless(N, rng())
    assert check.status == "holds" and check.worst_slack == 0 and check.tolerance == 0
    broken = sequences.check_block_lossless(N, rng(), law_fn=block_law_with_tokenwise_residual)
    assert broken.status == "fails" and broken.counterexample["target"]
    saved = json.loads(json.dumps(broken.as_dict()))["counterexample"]  # the model's exact tables, JSON-ready
    tables = {side: {ast.literal_eval(prefix): row for prefix, row in saved[side].items()} for side in ("target", "draft")}
    assert sequences.model_of(tables).exact


def test_block_optimal_holds_and_fails_on_tokenwise_value():
    check = sequences.check_block_optimal(N, rng())
    assert check.status == "holds" and "LP was solved on" in check.note
    assert sequences.check_block_optimal(N, rng(), value_fn=tokenwise_expected_accepted).status == "fails"


def test_block_never_worse_holds_and_fails_for_one_target_token_per_step():
    check = sequences.check_block_vs_tokenwise(N, rng())
    assert check.status == "holds" and "Strictly better on" in check.note
    assert sequences.check_block_vs_tokenwise(N, rng(), value_fn=lambda model, g: F(0)).status == "fails"


def test_traversal_lossless_holds_and_fails_when_the_residual_is_not_updated(monkeypatch):
    assert sequences.check_traversal_lossless(N, rng()).status == "holds"
    real = traversal.updated_after_rejection
    monkeypatch.setattr(traversal, "updated_after_rejection",
                        lambda alpha, target_law, proposal: (real(alpha, target_law, proposal)[0], target_law))
    assert sequences.check_traversal_lossless(N, rng()).status == "fails"


def test_traversal_chain_is_block_holds_and_fails_on_the_tokenwise_law():
    assert sequences.check_traversal_is_block_on_chains(N, rng()).status == "holds"
    assert sequences.check_traversal_is_block_on_chains(N, rng(), law_fn=tokenwise_law).status == "fails"


def test_tree_walks_lossless_hold_and_fail_with_a_shared_coin():
    check = sequences.check_tree_walks_lossless(N, rng())
    assert check.status == "holds" and check.instances == 7 * len(sequences.TREE_WALK_RULES)

    def with_shared_coin(model, depth, k, rule):
        return tree_walk_law(model, depth, k, shared_coin_rrs if rule == "rrs" else rule)

    broken = sequences.check_tree_walks_lossless(N, rng(), law_fn=with_shared_coin, rules=("rrs",))
    assert broken.status == "fails" and broken.counterexample["rule"] == "rrs"


def test_tree_gap_holds_reports_the_gaps_and_fails_on_a_lossy_verifier():
    check = sequences.check_tree_optimum_gaps(N, rng())
    assert check.status == "holds" and check.worst_slack >= 0
    for name in (*sequences.TREE_WALK_RULES, "traversal (iid)", "traversal (without_replacement)"):
        assert f"{name} " in check.note
    # "always accept the first draft down the tree": E[tau] = depth, above the optimum unless it is the depth
    broken = sequences.check_tree_optimum_gaps(N, rng(), value_fn=lambda model, depth, k, name, scheme: F(depth),
                                               rules=("rrs",))
    assert broken.status == "fails" and broken.counterexample["value"] == 2

