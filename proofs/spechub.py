"""Checks of SpecHub (Sun et al. 2024) (SpecHub: Provable Acceleration to Multi-Draft Speculative Decoding).

Letters as in the paper and this project: p = target, q = draft, ``a = argmax q``.
Each ``check_*`` takes the instance budget, a generator, and its ingredients (core
functions by default) so that a test can pass a broken ingredient and see the check fail.
"""
from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import networkx as nx
import numpy as np

import otm
from otm.formulations import reconstruct_coupling, solve_full_lp, solve_simplified_lp
from otm.optimum import optimal_acceptance_for_law

from otm.draft_laws import greedy_law, hub_law, hub_token, iid_law, without_replacement_law

from .check import EXHAUSTIVE, RANDOM_SEARCH, Check, SlackSearch, identity_slack, merge_checks, run_search
from .instances import exact_grid, random_pair, random_table_law

PAPER = "spechub"
SEED = "SpecHub (Sun et al. 2024)"


def _law_for(kind: str, q, k: int, rng):
    if kind == "iid":
        return iid_law(q, k)
    if kind == "without_replacement":
        return without_replacement_law(q, k)
    if kind == "hub":
        return hub_law(q)
    if kind == "greedy":
        return greedy_law(q, k)
    return random_table_law(rng, len(q), k)


def random_law_cases(rng: np.random.Generator, count: int, max_vocab: int = 4, max_k: int = 3):
    """``count`` cases ``{"p", "q", "k", "law_kind", "law"}`` over small vocabularies and every
    kind of joint law (i.i.d., without replacement, hub, greedy, an arbitrary table)."""
    for _ in range(count):
        V = int(rng.integers(2, max_vocab + 1))
        kind = str(rng.choice(["iid", "without_replacement", "hub", "greedy", "table"]))
        k = 2 if kind == "hub" else int(rng.integers(1, max_k + 1))
        p, q = random_pair(rng, V)
        if kind in ("without_replacement", "greedy"):
            k = min(k, V)
        if kind == "without_replacement" and np.count_nonzero(q) < k:
            q = 0.5 * q + 0.5 / V
        yield {"p": p, "q": q, "k": k, "law_kind": kind, "law": _law_for(kind, q, k, rng)}


def plan_slack(plan, p, law, acceptance) -> float:
    """Slack of "``plan`` [n_tuples, V] is a coupling of ``law`` and ``p`` whose membership
    acceptance is ``acceptance``": minus the largest violation."""
    plan = np.asarray(plan, dtype=np.float64)
    Q = law.probs.astype(np.float64)
    member = np.zeros(plan.shape, dtype=bool)
    member[np.arange(len(Q))[:, None], law.tuples] = True
    violations = [
        -plan.min(initial=0.0),
        np.abs(plan.sum(axis=1) - Q).max(),
        np.abs(plan.sum(axis=0) - np.asarray(p, dtype=np.float64)).max(),
        abs(plan[member].sum() - float(acceptance)),
    ]
    return -max(violations)


# --------------------------------------------------------------------------- Thm 1


def check_thm1(instances: int, rng: np.random.Generator, simplified=None, full=None) -> Check:
    """Thm 1: the simplified LP over ``pi(x, x_i)`` has the OTM optimum, for any joint Q."""
    simplified = simplified or solve_simplified_lp
    full = full or solve_full_lp
    check = Check(
        id="spechub.thm1", paper=PAPER, source=f"{SEED}, Thm 1 (§3.2, proof App. B)",
        claim="The simplified LP over pi(x_{1:k}, x_i) has the same optimum as the full OTM LP, for any joint draft law Q.",
        formula="max sum_{x,i} pi(x, x_i) s.t. sum_i pi(x,x_i) <= Q(x), sum_{x,i: x_i=y} pi(x,y) <= p(y)  ==  alpha*(p, Q)",
        method=RANDOM_SEARCH,
        note="Random p and laws (i.i.d., without replacement, hub, greedy, arbitrary tables), V <= 4, k <= 3; both LPs solved with HiGHS.",
    )
    return run_search(
        check,
        random_law_cases(rng, instances),
        lambda c: identity_slack(float(simplified(c["p"], c["law"]).value), float(full(c["p"], c["law"]).value)),
    )


def check_thm1_reconstruction(instances: int, rng: np.random.Generator, simplified=None, reconstruct=None) -> Check:
    """Thm 1 / App. B: the reconstruction of the full coupling from the simplified LP is a
    valid coupling of Q and p with the same acceptance."""
    simplified = simplified or solve_simplified_lp
    reconstruct = reconstruct or reconstruct_coupling
    check = Check(
        id="spechub.thm1.reconstruction", paper=PAPER, source=f"{SEED}, §3.2 reconstruction and App. B",
        claim="Filling the rejected mass by the normalised residual of p gives a coupling of Q and p with the LP's acceptance.",
        formula="pi(x,y) = (p(y) - acc(y)) / (1 - sum acc) * (Q(x) - sum_i pi(x,x_i)) for y not in S(x); marginals Q and p",
        method=RANDOM_SEARCH,
        note="Marginal errors, negativity and acceptance mismatch of the reconstructed plan are the violations.",
    )

    def slack(c):
        solution = simplified(c["p"], c["law"])
        plan = reconstruct(c["p"], c["law"], solution.plan)
        return plan_slack(plan, c["p"], c["law"], solution.value)

    return run_search(check, random_law_cases(rng, instances), slack)


# --------------------------------------------------------------------------- Thm 2, Cor 1


def exact_pairs(vocab_size: int = 3, denominator: int = 4):
    """Every pair of exact distributions on the grid (the exhaustive part of exact checks)."""
    grid = exact_grid(vocab_size, denominator)
    for p in grid:
        for q in grid:
            yield {"p": p, "q": q}


def check_thm2(instances: int, rng: np.random.Generator, law_fn=None) -> Check:
    """Thm 2: SpecHub's output law is p (exhaustively in rationals, then random floats)."""
    law_fn = law_fn or otm.rule_law
    check = Check(
        id="spechub.thm2", paper=PAPER, source=f"{SEED}, Thm 2 (App. C.2), Alg. 3",
        claim="SpecHub is lossless: its output token has law p.",
        formula="P_SpecHub(Y = x) = p(x) for every token x",
        method=f"{EXHAUSTIVE}+{RANDOM_SEARCH}",
        note="All pairs on the 1/4-grid over 3 tokens in exact rationals (slack exactly 0 required there), then random float pairs with V <= 8.",
    )
    exact = run_search(
        replace(check),
        exact_pairs(3, 4),
        lambda c: identity_slack(law_fn("spechub", c["p"], c["q"], 2).output_distribution, c["p"]),
        tolerance=0.0,
    )

    def cases():
        for _ in range(instances):
            yield dict(zip(("p", "q"), random_pair(rng, int(rng.integers(2, 9)))))

    check = run_search(check, cases(), lambda c: identity_slack(law_fn("spechub", c["p"], c["q"], 2).output_distribution, c["p"]))
    return merge_checks(check, exact)


def check_cor1(instances: int, rng: np.random.Generator, law_fn=None) -> Check:
    """Cor. 1: the top token a is accepted with probability p(a): every hub pair contains a,
    so P(Y = a, accepted) = P(Y = a), which Thm 2 makes p(a); checked on the rule's own law."""
    law_fn = law_fn or otm.rule_law
    check = Check(
        id="spechub.cor1", paper=PAPER, source=f"{SEED}, Cor. 1 (App. C.2)",
        claim="SpecHub accepts the top draft token a = argmax q with probability p(a).",
        formula="P(Y = a, a in S(X)) = p(a)",
        method=f"{EXHAUSTIVE}+{RANDOM_SEARCH}",
        note="Uses the rule's joint law (every tuple must contain a) and output law at a.",
    )

    def slack(c):
        law = law_fn("spechub", c["p"], c["q"], 2)
        a = hub_token(c["q"])
        if law.draft_law is not None and not (law.draft_law.tuples == a).any(axis=1).all():
            return -1.0  # some pair misses a: a is then not always accepted when output
        return identity_slack(law.output_distribution[a], c["p"][a])

    exact = run_search(replace(check), exact_pairs(3, 4), slack, tolerance=0.0)

    def cases():
        for _ in range(instances):
            yield dict(zip(("p", "q"), random_pair(rng, int(rng.integers(2, 9)))))

    return merge_checks(run_search(check, cases(), slack), exact)


# --------------------------------------------------------------------------- Thm 3, Thm 4


def first_draft_acceptance(p, q) -> float:
    """``alpha = sum_x min(p(x), q(x))``, the first-draft (single-draft) acceptance of Thm 3."""
    return float(np.minimum(np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)).sum())


def thm3_margin(p, q) -> float:
    """``q(a)/(1 - q(a)) - (1 - alpha)``: Thm 3's hypothesis holds when this is > 0."""
    qa = float(np.max(q))
    if qa >= 1.0:
        return np.inf
    return qa / (1 - qa) - (1 - first_draft_acceptance(p, q))


def _boundary_pair(p, q, margin_fn, offset: float):
    """Move p towards q (``p_t = (1-t) p + t q``) until ``margin_fn`` crosses zero, and return
    the pair just inside the hypothesis (margin about ``offset``): adversarial instances."""
    lo, hi = 0.0, 1.0
    if margin_fn(p, q) > 0 or margin_fn(q, q) <= 0:
        return None
    for _ in range(60):
        mid = (lo + hi) / 2
        if margin_fn((1 - mid) * p + mid * q, q) > offset:
            hi = mid
        else:
            lo = mid
    return (1 - hi) * p + hi * q


def _hypothesis_cases(rng, instances, hypothesis, boundary):
    """Random pairs meeting the hypothesis, half of them pushed onto its boundary."""
    made = tries = 0
    while made < instances and tries < 50 * instances:
        tries += 1
        p, q = random_pair(rng, int(rng.integers(2, 9)))
        if made % 2 == 1:
            moved = boundary(p, q)
            if moved is None:
                continue
            p = moved
        if hypothesis(p, q):
            made += 1
            yield {"p": p, "q": q}


def check_thm3(instances: int, rng: np.random.Generator, acceptance_fn=None) -> Check:
    """Thm 3: SpecHub's acceptance is at least RRS's (i.i.d., k=2) when q(a)/(1-q(a)) > 1-alpha."""
    acceptance_fn = acceptance_fn or otm.rule_acceptance
    check = Check(
        id="spechub.thm3", paper=PAPER, source=f"{SEED}, Thm 3 (App. C.3)",
        claim="If q(a)/(1-q(a)) > 1 - alpha (alpha = sum min(p, q)), SpecHub accepts at least as much as RRS with two i.i.d. drafts.",
        formula="q(a)/(1-q(a)) > 1 - alpha  =>  acc_SpecHub(p, q) >= acc_RRS(p, q, k=2)",
        method=RANDOM_SEARCH,
        note="Half the instances sit just inside the hypothesis boundary (p moved towards q by bisection). "
        "The paper says 'higher'; the check is for >= (p = q gives equality).",
    )
    hypothesis = lambda p, q: thm3_margin(p, q) > 0  # noqa: E731
    boundary = lambda p, q: _boundary_pair(p, q, thm3_margin, 1e-7)  # noqa: E731
    search = SlackSearch()
    violations_without_hypothesis = 0
    for case in _hypothesis_cases(rng, instances, hypothesis, boundary):
        search.record(
            float(acceptance_fn("spechub", case["p"], case["q"], 2)) - float(acceptance_fn("rrs", case["p"], case["q"], 2)), case
        )
    for _ in range(instances):  # is the hypothesis needed? (informational)
        p, q = random_pair(rng, int(rng.integers(2, 9)))
        if not hypothesis(p, q) and float(acceptance_fn("spechub", p, q, 2)) < float(acceptance_fn("rrs", p, q, 2)) - 1e-9:
            violations_without_hypothesis += 1
    check.note += f" Without the hypothesis, SpecHub < RRS on {violations_without_hypothesis} of {instances} random pairs."
    return search.finish(check)


def thm4_margin(p, q) -> float:
    """``q(a) - 1/2``: Thm 4's hypothesis holds when > 0."""
    return float(np.max(q)) - 0.5


def check_thm4(instances: int, rng: np.random.Generator, acceptance_fn=None, optimum_fn=None) -> Check:
    """Thm 4: SpecHub's acceptance is at least the i.i.d. OTM optimum (k=2) when q(a) > 1/2."""
    acceptance_fn = acceptance_fn or otm.rule_acceptance
    optimum_fn = optimum_fn or otm.optimal_acceptance
    check = Check(
        id="spechub.thm4", paper=PAPER, source=f"{SEED}, Thm 4 (App. C.3)",
        claim="If q(a) > 1/2, SpecHub accepts at least as much as the optimal transport with two i.i.d. drafts.",
        formula="q(a) > 1/2  =>  acc_SpecHub(p, q) >= alpha*(p, q x q)",
        method=RANDOM_SEARCH,
        note="Half the instances have q(a) = 1/2 + 1e-6 (adversarial). The paper says 'higher'; checked as >= (p = q gives 1 = 1).",
    )

    def cases():
        made = 0
        while made < instances:
            V = int(rng.integers(2, 9))
            p, q = random_pair(rng, V)
            a = int(np.argmax(q))
            top = 0.5 + 1e-6 if made % 2 else float(rng.uniform(0.5, 1.0))
            rest = np.delete(q, a)
            rest = rest / rest.sum() if rest.sum() > 0 else np.full(V - 1, 1.0 / (V - 1))
            q = np.insert(rest * (1 - top), a, top)
            made += 1
            yield {"p": p, "q": q}

    search = SlackSearch()
    for case in cases():
        if thm4_margin(case["p"], case["q"]) > 0:
            search.record(
                float(acceptance_fn("spechub", case["p"], case["q"], 2)) - float(optimum_fn(case["p"], case["q"], 2, draft_scheme="iid")),
                case,
            )
    below = 0
    for _ in range(instances):  # is the hypothesis needed? (informational)
        p, q = random_pair(rng, int(rng.integers(2, 9)))
        if thm4_margin(p, q) <= 0 and float(acceptance_fn("spechub", p, q, 2)) < float(optimum_fn(p, q, 2, draft_scheme="iid")) - 1e-9:
            below += 1
    check.note += f" Without the hypothesis, SpecHub < OTM(i.i.d.) on {below} of {instances} random pairs."
    return search.finish(check)


# --------------------------------------------------------------------------- Fig. 4/5


FIG5_Q = (Fraction(1, 2), Fraction(3, 10), Fraction(1, 5))
FIG5_P = (Fraction(1, 10), Fraction(3, 5), Fraction(3, 10))


def check_fig5(acceptance_fn=None, optimum_for_law=None) -> Check:
    """Fig. 4/5: q = [.5, .3, .2], p = [.1, .6, .3]: RRSw's transport cost is 0.06, SpecHub's 0."""
    acceptance_fn = acceptance_fn or otm.rule_acceptance
    optimum_for_law = optimum_for_law or optimal_acceptance_for_law
    check = Check(
        id="spechub.fig5", paper=PAPER, source=f"{SEED}, Figs. 4 and 5",
        claim="For q = [.5,.3,.2], p = [.1,.6,.3] and k = 2, RRS without replacement has transport cost 0.06 and SpecHub cost 0.",
        formula="1 - acc_RRSw = 3/50,  1 - acc_SpecHub = 0",
        method=EXHAUSTIVE,
        note="Exact rationals.",
    )
    p = np.array(FIG5_P, dtype=object)
    q = np.array(FIG5_Q, dtype=object)
    search = SlackSearch(tolerance=0.0)
    rrsw = acceptance_fn("rrs_wor", p, q, 2)
    spechub = acceptance_fn("spechub", p, q, 2)
    search.record(identity_slack(1 - rrsw, Fraction(3, 50)), {"p": p, "q": q, "rule": "rrs_wor", "acceptance": rrsw})
    search.record(identity_slack(1 - spechub, 0), {"p": p, "q": q, "rule": "spechub", "acceptance": spechub})
    optimum_wor = optimum_for_law(p, without_replacement_law(q, 2))
    check.note += f" The LP optimum for the without-replacement law itself is {optimum_wor} (Fig. 4a's 'optimal solution')."
    return search.finish(check)


# --------------------------------------------------------------------------- App. F


def appendix_f_graph(p, law) -> nx.DiGraph:
    """The flow network of SpecHub (Sun et al. 2024), App. F for a pair law Q (k = 2), as written there:
    ``s -> v`` with capacity ``sum_{x2} Q(v, x2)``, ``u -> v`` (``u != v``) with ``Q(u, v)``,
    ``v -> t`` with ``p(v)``. (This differs from docs/theory.md's tuple graph: mass may travel
    several vocabulary edges; its cuts are ``p(A) + 1 - Q(x1 in A, x2 in A)`` all the same.)"""
    if law.k != 2:
        raise ValueError("App. F's graph is defined for pairs (k = 2)")
    graph = nx.DiGraph()
    V = law.vocab_size
    first = law.marginal(0).astype(np.float64)
    for v in range(V):
        graph.add_edge("s", v, capacity=float(first[v]))
        graph.add_edge(v, "t", capacity=float(p[v]))
    for (u, v), mass in zip(law.tuples.tolist(), law.probs.astype(np.float64)):
        if u != v:
            previous = graph.edges[u, v]["capacity"] if graph.has_edge(u, v) else 0.0
            graph.add_edge(u, v, capacity=previous + float(mass))
    return graph


def check_appendix_f(instances: int, rng: np.random.Generator, graph_fn=appendix_f_graph, full=None) -> Check:
    """App. F: at k = 2 the max flow of the paper's network equals the OTM optimum."""
    full = full or solve_full_lp
    check = Check(
        id="spechub.appF", paper=PAPER, source=f"{SEED}, App. F",
        claim="At k = 2 the maximum flow of App. F's network (source -> x1 -> x2 -> sink) equals the LP optimum, for any pair law Q.",
        formula="maxflow(G(Q, p)) == alpha*(p, Q)",
        method=RANDOM_SEARCH,
        note="networkx preflow-push on the network exactly as App. F writes it, against the full LP.",
    )

    def cases():
        for case in random_law_cases(rng, 3 * instances, max_vocab=5, max_k=2):
            if case["law"].k == 2:
                yield case

    def slack(c):
        flow = nx.maximum_flow_value(graph_fn(np.asarray(c["p"], dtype=np.float64), c["law"]), "s", "t")
        return identity_slack(flow, float(full(c["p"], c["law"]).value))

    return run_search(check, cases(), slack)


CHECKS = {
    "spechub.thm1": lambda n, rng: check_thm1(n, rng),
    "spechub.thm1.reconstruction": lambda n, rng: check_thm1_reconstruction(n, rng),
    "spechub.thm2": lambda n, rng: check_thm2(n, rng),
    "spechub.cor1": lambda n, rng: check_cor1(n, rng),
    "spechub.thm3": lambda n, rng: check_thm3(n, rng),
    "spechub.thm4": lambda n, rng: check_thm4(n, rng),
    "spechub.fig5": lambda n, rng: check_fig5(),
    "spechub.appF": lambda n, rng: check_appendix_f(n, rng),
}
