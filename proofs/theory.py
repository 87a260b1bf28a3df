"""The toolkit's own results, beyond the papers (docs/theory.md, sections 1-3), checked the same way.

- min-cut formula: ``alpha*(p, Q) = min_H p(H) + 1 - Q(all drafts in H)`` for any k, any Q;
- prefix optimality: for i.i.d. and without-replacement drafts a minimising ``H`` is a
  prefix of the tokens sorted by ``p/q`` ascending (``q = 0`` last);
- SpecHub = greedy drafts with k = 2 in acceptance, and both reach the per-token bound
  ``sum_y min(p(y), P(y in S(X)))`` for their own laws;
- no rule beats the optimum (nor the per-token bound) of its own draft law;
- the optimal verifier (rule ``optimal``, docs/optimal-verifier.md) is lossless and attains
  ``alpha*(p, q^k)``; its latent form ``optimal_latent`` is lossless on drafts without
  replacement and attains the same value;
- the water-level rule for two drafts without replacement (``optimal_pair_wor``) is lossless
  and attains ``alpha*(p, WOR(q, 2))``, and its yields are bounded by the flux alone
  (docs/optimal-verifier-proofs.md#bounds-on-a-water-level-from-the-flux); the same water levels for ``k = 3, 4``
  drafts (``optimal_wor``) are lossless and attain ``alpha*(p, WOR(q, k))``;
- the water levels of both are probabilities
  (docs/optimal-verifier-proofs.md#water-levels-are-probabilities), checked claim by claim
  along the nesting.
"""
from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np

import otm
from otm.rules import rule_spec, rule_specs
from otm.errors import NotApplicableError
from otm.formulations import min_cut_value, solve_full_lp, solve_max_flow
from otm.formulations.prefix_scan import prefix_scan, ratio_order

from otm.draft_laws import greedy_law, hub_law, iid_law, without_replacement_law

from .check import RANDOM_SEARCH, Check, SlackSearch, identity_slack, run_search
from .instances import random_exact, random_pair
from .spechub import random_law_cases

PAPER = "theory"
SOURCE = "docs/theory.md"


def brute_force_min_cut(p, law) -> float:
    """``min_H p(H) + 1 - Q(all drafts in H)`` over all ``2^V`` token sets (small V)."""
    V = law.vocab_size
    p = np.asarray(p, dtype=np.float64)
    best = np.inf
    for mask in itertools.product((False, True), repeat=V):
        mask = np.array(mask)
        best = min(best, float(p[mask].sum()) + 1 - float(law.all_in_probability(mask)))
    return best


def check_min_cut(instances: int, rng: np.random.Generator, cut_fn=brute_force_min_cut, full=None) -> Check:
    """The min-cut formula for any k and any joint Q (brute force over H vs the full LP)."""
    full = full or solve_full_lp
    check = Check(
        id="theory.min_cut", paper=PAPER, source=f"{SOURCE}; SpecHub (Sun et al. 2024), App. F generalised",
        claim="For any number of drafts and any joint draft law Q, the optimal acceptance is the minimum over token sets H of p(H) + 1 - Q(all drafts in H).",
        formula="alpha*(p, Q) = min_H [ p(H) + 1 - Q(X_1..X_k in H) ]",
        method=RANDOM_SEARCH,
        note="Brute force over all 2^V sets against the full LP (i.i.d., without replacement, hub, greedy and arbitrary laws; V <= 5, k <= 3).",
    )
    return run_search(
        check,
        random_law_cases(rng, instances, max_vocab=5, max_k=3),
        lambda c: identity_slack(cut_fn(c["p"], c["law"]), float(full(c["p"], c["law"]).value)),
    )


def check_max_flow_certificate(instances: int, rng: np.random.Generator, flow=None, cut_value=None, full=None) -> Check:
    """otm's max flow equals the LP optimum and its certificate cut attains it; a crash of
    the flow on an instance counts as a failure there (with the exception in the instance)."""
    flow = flow or solve_max_flow
    cut_value = cut_value or min_cut_value
    full = full or solve_full_lp
    check = Check(
        id="theory.max_flow_certificate", paper=PAPER, source=f"{SOURCE}; SpecHub (Sun et al. 2024), App. F generalised (implementation check)",
        claim="otm's max-flow formulation returns the OTM optimum, with a cut H whose capacity p(H) + 1 - Q(all in H) equals it.",
        formula="maxflow(p, Q) = alpha*(p, Q) = min_cut_value(p, Q, cut_tokens)",
        method=RANDOM_SEARCH,
        note="Same instances as theory.min_cut; checks the implementation (networkx behind solvers.max_flow), not a paper.",
    )

    def slack(c):
        optimum = float(full(c["p"], c["law"]).value)
        try:
            solution = flow(c["p"], c["law"])
        except Exception as exc:  # an implementation crash is a failure on this instance
            c["error"] = f"{type(exc).__name__}: {exc}"
            return -1.0
        return min(
            identity_slack(float(solution.value), optimum),
            identity_slack(float(cut_value(c["p"], c["law"], solution.cut)), optimum),
        )

    return run_search(check, random_law_cases(rng, instances, max_vocab=5, max_k=3), slack)


def ratio_prefixes(p, q):
    """Token sets ``{first m tokens by p/q ascending}``, m = 0..V (``q = 0`` last; ties by index)."""
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(q > 0, p / np.where(q > 0, q, 1.0), np.inf)
    order = np.lexsort((np.arange(len(p)), ratio))
    for m in range(len(p) + 1):
        mask = np.zeros(len(p), dtype=bool)
        mask[order[:m]] = True
        yield mask


def check_prefix(instances: int, rng: np.random.Generator, prefixes_fn=ratio_prefixes, closed_form=None) -> Check:
    """The prefix theorem for i.i.d. and without-replacement drafts, and otm's prefix scan."""
    closed_form = closed_form or prefix_scan
    check = Check(
        id="theory.prefix", paper=PAPER, source=f"{SOURCE} (prefix scan)",
        claim="For i.i.d. drafts and drafts without replacement, the min cut is attained on a prefix of the tokens sorted by p/q ascending, so one sort and one scan give the optimum.",
        formula="min_H [p(H) + 1 - Q(all in H)] = min_m [p(H_m) + 1 - Q(all in H_m)],  H_m = first m tokens by p/q",
        method=RANDOM_SEARCH,
        note="Brute force over all 2^V sets vs the V+1 prefixes (V <= 6, k <= 4), and otm's prefix_scan vs both; includes ties and q = 0 tokens.",
    )
    search = SlackSearch()
    for _ in range(instances):
        V = int(rng.integers(2, 7))
        k = int(rng.integers(1, 5))
        p, q = random_pair(rng, V)
        if rng.random() < 0.2:  # ties in p/q
            p = q.copy()
        for draft_scheme in ("iid", "without_replacement"):
            if draft_scheme == "without_replacement" and np.count_nonzero(q) < k:
                continue
            law = iid_law(q, k) if draft_scheme == "iid" else without_replacement_law(q, k)
            everything = brute_force_min_cut(p, law)
            prefix_best = min(float(p[m].sum()) + 1 - float(law.all_in_probability(m)) for m in prefixes_fn(p, q))
            case = {"p": p, "q": q, "k": k, "draft_scheme": draft_scheme}
            search.record(identity_slack(prefix_best, everything), {**case, "part": "prefix = all sets"})
            search.record(identity_slack(float(closed_form(p, q, k, draft_scheme).value), everything), {**case, "part": "otm prefix_scan"})
    return search.finish(check)


def lp_optimum_for_law(p, law) -> float:
    """``alpha*(p, Q)`` from the full LP (the oracle; independent of the max-flow path)."""
    return float(solve_full_lp(p, law).value)


def per_token_bound(p, law) -> float:
    """``sum_y min(p(y), P(y in S(X)))``: an upper bound on any rule's acceptance for ``law``."""
    return float(np.minimum(np.asarray(p, dtype=np.float64), law.membership_probs().astype(np.float64)).sum())


def check_spechub_greedy(instances: int, rng: np.random.Generator, acceptance_fn=None, optimum_for_law=None) -> Check:
    """SpecHub = greedy (k = 2) in acceptance when q has two or more tokens with positive mass;
    both equal the per-token bound and the optimum of their laws."""
    acceptance_fn = acceptance_fn or otm.rule_acceptance
    optimum_for_law = optimum_for_law or lp_optimum_for_law
    check = Check(
        id="theory.spechub_greedy", paper=PAPER, source=f"{SOURCE}; SpecHub (Sun et al. 2024), §4",
        claim="If q has at least two tokens with positive probability, SpecHub and the greedy-draft verifier with k = 2 have the same acceptance, "
        "p(a) + sum_{x != a} min(p(x), q(x)/(1-q(a))), which is the per-token bound and the optimum of either law.",
        formula="|supp q| >= 2  =>  acc_SpecHub = acc_greedy(k=2) = sum_y min(p(y), P(y in S)) = alpha*(p, hub) = alpha*(p, greedy_2)",
        method=RANDOM_SEARCH,
        note="Exact rule laws and LP optima of the hub and greedy laws (V <= 8). For one-hot q the identity breaks: the hub law is the "
        "pair (a, a) while the greedy law proposes a second, deterministic token, so greedy then accepts p(a) + p(next) > p(a); "
        "those instances are counted separately.",
    )
    search = SlackSearch()
    degenerate = 0
    for _ in range(instances):
        p, q = random_pair(rng, int(rng.integers(2, 9)))
        case = {"p": p, "q": q}
        spechub = float(acceptance_fn("spechub", p, q, 2))
        if np.count_nonzero(q) < 2:
            degenerate += 1
            search.record(float(acceptance_fn("greedy", p, q, 2)) - spechub, {**case, "part": "one-hot q: greedy >= spechub"})
            continue
        a = int(np.argmax(q))
        closed = p[a] + sum(min(p[x], q[x] / (1 - q[a])) for x in range(len(p)) if x != a)
        search.record(identity_slack(float(acceptance_fn("greedy", p, q, 2)), spechub), {**case, "part": "greedy = spechub"})
        search.record(identity_slack(closed, spechub), {**case, "part": "closed form"})
        for name, law in (("hub", hub_law(q)), ("greedy", greedy_law(q, 2))):
            search.record(identity_slack(per_token_bound(p, law), spechub), {**case, "part": f"per-token bound of {name} law"})
            search.record(identity_slack(float(optimum_for_law(p, law)), spechub), {**case, "part": f"optimum of {name} law"})
    check.note += f" One-hot q instances: {degenerate}."
    return search.finish(check)


#: The rules checked by :func:`check_no_rule_beats_optimum`: every lossless rule of the
#: registry whose drafts come from one ``q`` (specinfer with one ``q`` is rrs).
LOSSLESS_RULES = tuple(s.name for s in rule_specs(lossless=True) if s.draft_scheme != "independent")


def check_no_rule_beats_optimum(instances: int, rng: np.random.Generator, law_fn=None, optimum_for_law=None) -> Check:
    """Every rule: acceptance <= optimum of its own draft law <= per-token bound."""
    law_fn = law_fn or otm.rule_law
    optimum_for_law = optimum_for_law or lp_optimum_for_law
    check = Check(
        id="theory.no_rule_beats_optimum", paper=PAPER, source=f"{SOURCE}, section 1.1 (a lossless rule is a feasible plan of its own law's LP)",
        claim="No selection rule accepts more than the OTM optimum of its own joint draft law, which is at most the per-token bound.",
        formula="acc_rule(p, q, k) <= alpha*(p, Q_rule) <= sum_y min(p(y), P_Q(y in S))",
        method=RANDOM_SEARCH,
        note=f"Rules {', '.join(LOSSLESS_RULES)}; V <= 5, k <= 3 within each rule's allowed k.",
    )
    search = SlackSearch()
    for _ in range(instances):
        V = int(rng.integers(2, 6))
        p, q = random_pair(rng, V)
        q = 0.9 * q + 0.1 / V  # every rule applies (without replacement needs k tokens with q > 0)
        for rule in LOSSLESS_RULES:
            low, high = rule_spec(rule).ks
            k = int(rng.integers(low, min(V, 3, high or 3) + 1))
            law = law_fn(rule, p, q, k)
            optimum = float(optimum_for_law(p, law.draft_law))
            case = {"p": p, "q": q, "k": k, "rule": rule}
            search.record(optimum - float(law.acceptance), {**case, "part": "rule <= optimum"})
            search.record(per_token_bound(p, law.draft_law) - optimum, {**case, "part": "optimum <= per-token bound"})
    return search.finish(check)


def check_optimal_verifier(instances: int, rng: np.random.Generator, law_fn=None, optimum_fn=None) -> Check:
    """``optimal``: output law ``p`` and acceptance ``alpha*(p, q^k)``; ``optimal_latent``
    (drafts without replacement): output law ``p`` and acceptance between ``alpha*(p, q^k)``
    and the without-replacement optimum. Exact rational laws on small instances."""
    law_fn = law_fn or otm.rule_law
    optimum_fn = optimum_fn or (lambda p, q, k, draft_scheme: otm.optimal_acceptance(p, q, k, draft_scheme=draft_scheme))
    check = Check(
        id="theory.optimal_verifier", paper=PAPER,
        source=f"{SOURCE}; docs/optimal-verifier-proofs.md#the-level-rule-is-optimal-for-iid-drafts (after Khisti et al. 2025 and Thomas & Pal 2025)",
        claim="The optimal verifier outputs exactly p and accepts alpha*(p, q^k) with i.i.d. drafts; its latent form "
              "outputs exactly p with drafts without replacement and accepts at least alpha*(p, q^k) (at most that law's optimum).",
        formula="law(Y) = p; optimal: P(Y in S(X)) = alpha*(p, q^k); optimal_latent: alpha*(p, q^k) <= P(Y in S(X)) <= alpha*(p, WOR(q, k))",
        method=RANDOM_SEARCH,
        note="Exact rationals (denominator 12); V <= 5, k <= 3 (optimal_latent: k <= number of tokens with q > 0).",
    )
    search = SlackSearch()
    for _ in range(instances):
        V = int(rng.integers(2, 6))
        p, q = random_exact(rng, V, 12), random_exact(rng, V, 12)
        for rule in ("optimal", "optimal_latent"):
            k = int(rng.integers(1, min(3, sum(1 for v in q if v > 0)) + 1))
            law = law_fn(rule, p, q, k)
            iid = optimum_fn(p, q, k, "iid")
            case = {"p": p, "q": q, "k": k, "rule": rule}
            search.record(identity_slack(list(law.output_distribution), list(p)), {**case, "part": "output law = p"})
            if rule == "optimal":
                search.record(identity_slack(law.acceptance, iid), {**case, "part": "acceptance = alpha* i.i.d."})
            else:
                search.record(float(law.acceptance - iid), {**case, "part": "acceptance >= alpha* i.i.d."})
                wor = optimum_fn(p, q, k, "without_replacement")
                search.record(float(wor - law.acceptance), {**case, "part": "acceptance <= alpha* without replacement"})
    return search.finish(check)


def check_optimal_pair_wor(instances: int, rng: np.random.Generator, law_fn=None, optimum_fn=None) -> Check:
    """``optimal_pair_wor``: output law ``p`` and acceptance ``alpha*(p, WOR(q, 2))``, its water
    levels in ``[0, 1]``. Exact rational laws on small instances."""
    check = Check(
        id="theory.optimal_pair_wor", paper=PAPER,
        source=f"{SOURCE}; docs/optimal-verifier.md#water-levels-for-drafts-without-replacement (two drafts without replacement, water levels)",
        claim="For two drafts without replacement, the water-level rule outputs exactly p and accepts the optimum of "
              "that draft law; its yield probabilities (the water levels) lie in [0, 1].",
        formula="law(Y) = p; P(Y in S(X)) = alpha*(p, WOR(q, 2)); 0 <= L <= 1",
        method=RANDOM_SEARCH,
        note="Exact rationals (denominator 12, zeros included); V = 3..6, at least two tokens with q > 0. The levels "
             "in [0, 1] are what the rule needs to be a rule; proved in docs/optimal-verifier-proofs.md (water levels are "
             "probabilities, its steps checked by theory.water_levels_at_most_one), checked here on the rule's own levels.",
    )
    return _water_level_search(check, "optimal_pair_wor", instances, rng, law_fn, optimum_fn, sizes=(3, 6), ks=(2, 2))


def check_optimal_wor(instances: int, rng: np.random.Generator, law_fn=None, optimum_fn=None) -> Check:
    """``optimal_wor``: the water levels of two drafts carried over to ``k = 3, 4`` drafts
    without replacement (draft sets in place of pairs): output law ``p``, acceptance
    ``alpha*(p, WOR(q, k))``, levels in ``[0, 1]``. Exact rational laws on small instances."""
    check = Check(
        id="theory.optimal_wor", paper=PAPER,
        source=f"{SOURCE}; docs/optimal-verifier.md#water-levels-for-drafts-without-replacement (k drafts without replacement, the same water levels)",
        claim="For k = 3 and 4 drafts without replacement, the water-level rule (go down from the highest member "
              "while a uniform is below the least level between it and the member) outputs exactly p and accepts "
              "the optimum of that draft law; its levels lie in [0, 1].",
        formula="law(Y) = p; P(Y in S(X)) = alpha*(p, WOR(q, k)); 0 <= L <= 1",
        method=RANDOM_SEARCH,
        note="Exact rationals (denominator 12, zeros included); V = 4..6, k = 3..min(4, V - 1), more than k tokens "
             "with q > 0. The levels in [0, 1]: water levels are probabilities, docs/optimal-verifier-proofs.md, checked here on the rule's own levels.",
    )
    return _water_level_search(check, "optimal_wor", instances, rng, law_fn, optimum_fn, sizes=(4, 6), ks=(3, 4))


def _water_level_search(check: Check, rule: str, instances: int, rng: np.random.Generator, law_fn, optimum_fn,
                        sizes: tuple, ks: tuple) -> Check:
    """The search of the two water-level checks: ``V`` in ``sizes``, ``k`` in ``ks`` (at most
    ``V - 1``), two tokens with ``q > 0`` at least (``k = 2``) or more than ``k``; the
    enumerated law of ``rule``."""
    law_fn = law_fn or otm.rule_law
    optimum_fn = optimum_fn or (lambda p, q, k: otm.optimal_acceptance(p, q, k, draft_scheme="without_replacement"))
    search = SlackSearch()
    for _ in range(instances):
        V = int(rng.integers(sizes[0], sizes[1] + 1))
        k = int(rng.integers(ks[0], min(ks[1], V - 1) + 1))
        p, q = random_exact(rng, V, 12), random_exact(rng, V, 12)
        if sum(1 for v in q if v > 0) < (2 if k == 2 else k + 1):  # k >= 3: not always the same set
            continue
        law = law_fn(rule, p, q, k, method="enumeration")
        case = {"p": p, "q": q, "k": k}
        search.record(identity_slack(list(law.output_distribution), list(p)), {**case, "part": "output law = p"})
        search.record(identity_slack(law.acceptance, optimum_fn(p, q, k)), {**case, "part": "acceptance = alpha* without replacement"})
        levels = law.details.get("levels", [0])
        search.record(float(1 - max(levels)), {**case, "part": "levels <= 1"})
        search.record(float(min(levels)), {**case, "part": "levels >= 0"})
    return search.finish(check)


def check_pair_wor_yield_bounds(instances: int, rng: np.random.Generator, lower_fn=None, at_most_fn=None) -> Check:
    """Bounds on a water level from the flux (docs/optimal-verifier-proofs.md): the water-level yields of ``optimal_pair_wor`` are
    bounded by the flux alone, which lets its verifier skip the nesting. Exact rationals."""
    from otm.rules import water_levels

    lower_fn = lower_fn or water_levels.pair.yield_lower_bound
    at_most_fn = at_most_fn or water_levels.pair.yield_at_most
    check = Check(
        id="theory.pair_wor_yield_bounds", paper=PAPER,
        source=f"{SOURCE}; docs/optimal-verifier-proofs.md#bounds-on-a-water-level-from-the-flux",
        claim="For two drafts without replacement, the yield Y of a same-side pair in the water-level rule is at least "
              "the least flux over the first run's pair mass at the cuts between the pair, and at most u whenever the "
              "pair masses of the pair's span widened through the cuts whose own bound is at least u (or, level by "
              "level, exceeds s) carry the flux of some cut between the pair up to level u.",
        formula="Y_bc >= min_{b<j<=c} F(j) / Q_[f,t](j);  F(j) <= u Q_[b',c'](j) or F(j) <= int_0^u Q_{W_s}(j) ds "
                "for some b<j<=c  =>  Y_bc <= u",
        method=RANDOM_SEARCH,
        note="Exact rationals (denominator 12, zeros included); V = 3..8, every pair of ranks on one side of the "
             "cut, u in {0, 1/4, 1/2, 3/4, Y, the lower bound}. Slacks: Y - lower bound, and u - Y where the "
             "upper tests (ii, iii) fire. The verifier's compiled form decides u < Y with them (float64, margin 1e-9).",
    )
    search = SlackSearch(tolerance=0.0)  # exact rationals
    for _ in range(instances):
        V = int(rng.integers(3, 9))
        p, q = random_exact(rng, V, 12), random_exact(rng, V, 12)
        if sum(1 for v in q if v > 0) < 2:
            continue
        params = water_levels.pair_parameters(p, q)
        n, cut = len(params.order), params.cut
        for low, high in itertools.combinations(range(n), 2):
            if low < cut <= high:
                continue
            case = {"p": p, "q": q, "k": 2, "pair": (low, high)}
            y, lower = water_levels.pair.yield_probability(params, low, high), lower_fn(params, q, low, high)
            search.record(float(y - lower), {**case, "part": "Y >= lower bound"})
            for u in {Fraction(0), Fraction(1, 4), Fraction(1, 2), Fraction(3, 4), y, lower}:
                if at_most_fn(params, q, low, high, u):
                    search.record(float(u - y), {**case, "u": u, "part": "Y <= u where the widened masses carry F"})
    return search.finish(check)


def _exact_rows(instances: int, rng: np.random.Generator, sizes: tuple, ks: tuple):
    """``(index, p, q, k)``: ``instances`` draws of exact rows (denominator 12, zeros
    included), ``V`` in ``sizes``, ``k`` in ``ks`` (at most ``V - 1``), kept when more than
    ``k`` tokens have ``q > 0`` (else the drafted set is always the same)."""
    for index in range(instances):
        V = int(rng.integers(sizes[0], sizes[1] + 1))
        k = int(rng.integers(ks[0], min(ks[1], V - 1) + 1))
        p, q = random_exact(rng, V, 12), random_exact(rng, V, 12)
        if sum(1 for v in q if v > 0) > k:
            yield index, p, q, k


def check_wor_walk_bounds(instances: int, rng: np.random.Generator, lower_fn=None, at_most_fn=None) -> Check:
    """Bounds on a water level from the flux, ``k`` drafts
    (docs/optimal-verifier-proofs.md#bounds-on-a-water-level-from-the-flux): the least level between two
    members of a drafted set is bounded by the flux and
    the set masses alone, which lets the verifier of ``optimal_wor`` decide its walk without the
    nesting. Exact rationals."""
    from otm.rules import optimal_wor as wor_rule, water_levels
    from otm.rules.water_levels import bounds
    from otm.rules.water_levels.construction import flux_setup

    lower_fn = lower_fn or bounds.span_lower_bound
    at_most_fn = at_most_fn or bounds.span_at_most
    check = Check(
        id="theory.wor_walk_bounds", paper=PAPER,
        source=f"{SOURCE}; docs/optimal-verifier-proofs.md#bounds-on-a-water-level-from-the-flux (k drafts)",
        claim="For k drafts without replacement, the least water level M between two members low < high of a drafted "
              "set on one side of the cut is at least the least flux over the first run's set mass at the cuts between "
              "them, and at most u whenever the set masses of their span widened through the cuts whose own bound is at "
              "least u (or, level by level, exceeds s) carry the flux of some cut between them up to level u.",
        formula="M >= min_{low<j<=high} F(j) / M_[f,t](j);  F(j) <= u M_[b',c'](j) or F(j) <= int_0^u M_{W_s}(j) ds "
                "for some low<j<=high  =>  M <= u",
        method=RANDOM_SEARCH,
        note="Exact rationals (denominator 12, zeros included); V = 4..7, k = 3..min(4, V - 1), more than k tokens with "
             "q > 0; every drafted set and every member below its highest on the same side of the cut, u in {0, 1/4, "
             "1/2, 3/4, M, the lower bound}. Slacks: M - lower bound, and u - M where the upper tests (ii, iii) fire. The "
             "verifier decides its walk with them (float64, margin 1e-9, at most 4 windows).",
    )
    search = SlackSearch(tolerance=0.0)  # exact rationals
    for _, p, q, k in _exact_rows(instances, rng, sizes=(4, 7), ks=(3, 4)):
        params = water_levels.wor_parameters(p, q, k)
        setup = flux_setup(p, q, ratio_order(p, q), water_levels.set_masses.set_masses(k))
        for members in water_levels.set_masses.draft_sets([q[t] for t in params.order], k):
            ranks = sorted(members)
            high = ranks[-1]
            for low in ranks[:-1]:
                run = bounds.first_run(setup.flux, low, high)
                if run is None:  # a cut without flux between them: M = 0, nothing to bound
                    continue
                case = {"p": p, "q": q, "k": k, "set": tuple(ranks), "span": (low, high)}
                least = min(params.levels[low + 1:high + 1])
                lower = lower_fn(setup.flux, setup.masses, run, low, high)
                search.record(float(least - lower), {**case, "part": "M >= lower bound"})
                for u in {Fraction(0), Fraction(1, 4), Fraction(1, 2), Fraction(3, 4), least, lower}:
                    if at_most_fn(setup.flux, setup.masses, run, low, high, u):
                        search.record(float(u - least), {**case, "u": u, "part": "M <= u where the widened masses carry F"})
    return search.finish(check)


def check_water_levels_at_most_one(instances: int, rng: np.random.Generator, order_fn=None) -> Check:
    """Water levels are probabilities (docs/optimal-verifier-proofs.md), for drafts
    without replacement and i.i.d. drafts, any ``k``. Each claim of its proof
    (:mod:`proofs.water_level_residuals`) is checked at every run of the nesting, in exact
    rationals; ``order_fn(p, q)`` replaces the ratio order (the ingredient the proof needs)."""
    from otm.rules.water_levels.construction import water_level_parameters
    from otm.rules.water_levels.set_masses import draft_sets, set_masses
    from .water_level_residuals import residual_runs, run_slacks

    order_fn = order_fn or ratio_order
    check = Check(
        id="theory.water_levels_at_most_one", paper=PAPER,
        source=f"{SOURCE}; docs/optimal-verifier-proofs.md#water-levels-are-probabilities",
        claim="In the water-level construction (k drafts without replacement or i.i.d., ranks by p/q), at every run "
              "R = [f, t] of the nesting and level s the residual y has y/q nondecreasing, nonnegative flux, every "
              "suffix receiving what must select in it, hence every cut's emptying level at most 1; the lowest-member "
              "law has l/q nonincreasing; the levels realise x and lie in [0, 1].",
        formula="y/q nondecreasing; rem(j) >= 0; y([j,t]) >= (1-s)(g([0,f) u [j,t]) - g([0,f))); "
                "rem(j) <= (1-s) M_R(j); l/q nonincreasing; 0 <= L <= 1",
        method=RANDOM_SEARCH,
        note="Exact rationals (denominator 12, zeros included); V = 3..7, k = 2..min(4, V - 1), more than k tokens "
             "with q > 0; every third instance i.i.d. drafts, the others without replacement. Every quantity is "
             "recomputed from the final levels and the draft sets, not from the construction's bookkeeping.",
    )
    search = SlackSearch(tolerance=0.0)  # exact rationals
    for index, p, q, k in _exact_rows(instances, rng, sizes=(3, 7), ks=(2, 4)):
        law = iid_law if index % 3 == 0 else without_replacement_law
        case = {"p": p, "q": q, "k": k, "draft_law": law.__name__}
        try:
            params = water_level_parameters(p, q, order_fn(p, q), set_masses(k, law))
        except NotApplicableError as refusal:
            search.record(-1.0, {**case, "part": f"levels in [0, 1] ({refusal})"})
            continue
        q_ranked = [q[t] for t in params.order]
        sets = draft_sets(q_ranked, k, law)
        runs, left = residual_runs(params, sets)
        search.record(identity_slack(left, [0] * len(left)), {**case, "part": "the levels realise x"})
        search.record(float(1 - max(params.levels)), {**case, "part": "levels <= 1"})
        search.record(float(min(params.levels)), {**case, "part": "levels >= 0"})
        for run in runs:
            slacks = run_slacks(run, q_ranked, sets)
            where = {**case, "run": (run.first, run.last), "level": run.level}
            search.record(slacks.sorted_ratio, {**where, "part": "(a) y/q nondecreasing"})
            search.record(slacks.flux, {**where, "part": "(b) rem >= 0"})
            search.record(identity_slack(slacks.total, 0), {**where, "part": "(b) rem(t + 1) = 0"})
            search.record(slacks.suffixes, {**where, "part": "(c) suffixes"})
            search.record(slacks.key, {**where, "part": "(d) emptying level <= 1"})
            search.record(slacks.lowest_law, {**where, "part": "(e) l/q nonincreasing"})
    return search.finish(check)


CHECKS = {
    "theory.min_cut": lambda n, rng: check_min_cut(n, rng),
    "theory.max_flow_certificate": lambda n, rng: check_max_flow_certificate(n, rng),
    "theory.prefix": lambda n, rng: check_prefix(n, rng),
    "theory.spechub_greedy": lambda n, rng: check_spechub_greedy(n, rng),
    "theory.no_rule_beats_optimum": lambda n, rng: check_no_rule_beats_optimum(n, rng),
    "theory.optimal_verifier": lambda n, rng: check_optimal_verifier(n, rng),
    "theory.optimal_pair_wor": lambda n, rng: check_optimal_pair_wor(n, rng),
    "theory.optimal_wor": lambda n, rng: check_optimal_wor(n, rng),
    "theory.pair_wor_yield_bounds": lambda n, rng: check_pair_wor_yield_bounds(n, rng),
    "theory.water_levels_at_most_one": lambda n, rng: check_water_levels_at_most_one(n, rng),
    "theory.wor_walk_bounds": lambda n, rng: check_wor_walk_bounds(n, rng),
}
