"""``otm validate``: a decoding recording turned into per-node acceptance gaps.

For every verification event of a recording (:mod:`decoding.runtime.recording`: one tree
node, its ``k`` drafts, the target ``p`` and the draft ``q`` at that node):

- ``rule``: the rule's exact membership acceptance for that node's ``(p, q, k)``
  (:func:`otm.rule_acceptance`; ``"single"`` for a node with one child);
- ``optimum``: the OTM optimum for the rule's own draft law (the registry's
  ``reference_optimum``; :func:`otm.optimal_acceptance`, closed forms at any ``V``);
- ``best``: the largest optimum over the laws the toolkit builds from the same ``q`` and
  ``k`` (i.i.d., without replacement, hub at ``k = 2``, greedy), and which one attains it;
- ``accepted``: whether the recorded output is one of the drafts (its mean over nodes is
  z-tested against the mean exact ``rule``).

Truncated recordings (top-``m`` masses plus a checked remainder) give intervals
``[lo, hi]`` that contain the true values (``lo == hi`` when exact); the bounds and their
proofs are in docs/theory.md, section 7. :func:`verdict` is the PASS / FAIL / NOT CHECKED
of ``otm validate``. Tail masses at most :data:`TAIL_NEGLIGIBLE` count as 0.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy import stats

from otm.draft_laws import ONE_Q_SCHEMES
from otm.optimum import optimal_acceptance
from otm.errors import InvalidDraftCountError, NotApplicableError, OTMError, UnknownNameError
from otm.rules import draft_support, estimated_seconds, rule_acceptance, rule_spec

from decoding.runtime.recording import Recording
from decoding.validation.stats import DEFAULT_ALPHA

#: A remainder at most this large counts as 0: the recorder computes it as
#: ``sum(all) - sum(kept)`` in float64, which leaves ~1e-16 of rounding on a tail of zeros.
TAIL_NEGLIGIBLE = 1e-12

#: A rule whose exact law would take longer than this at a node (estimated from measured
#: costs, :func:`otm.rules.estimated_seconds`) gets bounds there instead.
NODE_SECONDS_LIMIT = 1.0


@dataclass(frozen=True)
class Bounds:
    """An interval ``[lo, hi]`` that contains the true value; ``lo == hi`` when exact.
    ``note`` says why it is not exact (empty when it is)."""

    lo: float
    hi: float
    note: str = ""

    @property
    def exact(self) -> bool:
        return self.hi - self.lo <= TAIL_NEGLIGIBLE

    @property
    def value(self) -> float | None:
        """The value when exact, else ``None``."""
        return 0.5 * (self.lo + self.hi) if self.exact else None

    @classmethod
    def point(cls, value: float) -> "Bounds":
        return cls(float(value), float(value))


# --------------------------------------------------------------------------- laws


def _per_token_optimum(pk, qk, ids, p_tail: float, q_tail: float, k: int, scheme: str) -> Bounds:
    """Bounds on ``sum_y min(p(y), M(y))``, ``M(y) = P(y in S(X))``, for the hub, greedy or
    (``k = 1``) single-draft law. ``pk``, ``qk`` (``[n]``): known masses at token ``ids``,
    which must contain the hub / fixed greedy tokens (the top of ``q``); ``p_tail``,
    ``q_tail``: the masses of the other tokens, unknown token by token."""
    order = ids[np.lexsort((ids, -qk))]  # q descending, ties to the lower id
    position = {int(t): i for i, t in enumerate(ids)}
    if k == 1 or scheme in ("iid", "without_replacement"):
        if k != 1:
            raise NotApplicableError(f"the per-token formula covers {scheme!r} drafts only for k=1")
        fixed = []
    elif scheme == "hub":
        if k != 2:
            raise InvalidDraftCountError(f"the hub law has k=2 drafts, got k={k}")
        fixed = [int(order[0])]
    elif scheme == "greedy":
        fixed = [int(t) for t in order[: k - 1]]
    else:
        raise UnknownNameError(f"unknown draft scheme {scheme!r}; choose one of {ONE_Q_SCHEMES}")
    at = [position[t] for t in fixed]
    scale = 1.0 - float(qk[at].sum())  # q outside the fixed tokens
    lo = float(pk[at].sum())
    rest = np.ones(len(ids), dtype=bool)
    rest[at] = False
    tails_known = p_tail <= TAIL_NEGLIGIBLE
    if scale <= TAIL_NEGLIGIBLE:
        # no q mass outside the fixed tokens. hub: one-hot q, the single pair (a, a), accepts p(a);
        # greedy: the last draft is the next token in the order, surely (otm.draft_laws.greedy_law)
        if scheme == "hub":
            return Bounds.point(lo)
        if tails_known and k - 1 < len(order):
            return Bounds.point(lo + float(pk[position[int(order[k - 1])]]))
        extra = max(float(pk[rest].max(initial=0.0)), p_tail)
        return Bounds(lo, min(1.0, lo + extra), "greedy: the deterministic last draft is not among the recorded tokens")
    lo += float(np.minimum(pk[rest], np.minimum(1.0, qk[rest] / scale)).sum())
    tail = min(p_tail, q_tail / scale)
    return Bounds(lo, min(1.0, lo + tail), "" if tail <= TAIL_NEGLIGIBLE else "tail masses of p and q unknown token by token")


# --------------------------------------------------------------------------- one node


@dataclass(frozen=True)
class NodeInstance:
    """One verification event reduced to the known tokens ``K`` and a merged tail ``U``.

    Attributes:
        ids: ``[n]`` token ids of ``K`` (ascending).
        p, q: ``[n]`` their target / draft masses.
        p_tail, q_tail: ``p(U)``, ``q(U)`` (0 when the recording is full).
        q_top_ids, q_top_probs: the recorded top of ``q``, by ``q`` descending (ties to
            the lower id): the hub and the fixed greedy tokens.
    """

    ids: np.ndarray  # [n]
    p: np.ndarray  # [n]
    q: np.ndarray  # [n]
    p_tail: float
    q_tail: float
    q_top_ids: np.ndarray  # [m]
    q_top_probs: np.ndarray  # [m]

    def merged(self) -> tuple[np.ndarray, np.ndarray]:
        """``[n (+1)]`` renormalised ``(p, q)`` over ``K`` plus one merged tail token
        (dropped when both tails are negligible)."""
        p, q = self.p, self.q
        if self.p_tail > TAIL_NEGLIGIBLE or self.q_tail > TAIL_NEGLIGIBLE:
            p, q = np.append(p, self.p_tail), np.append(q, self.q_tail)
        return p / p.sum(), q / q.sum()


def node_instance(recording: Recording, event: int) -> NodeInstance:
    """The :class:`NodeInstance` of ``event`` (module docstring: how ``K`` is chosen)."""
    a = recording.arrays
    k = int(a["k"][event])
    drafts = a["drafts"][event, :k]
    p_ids, p_probs, p_rest = a["p_ids"][event], a["p_probs"][event], float(a["p_rest"][event])
    q_ids, q_probs, q_rest = a["q_ids"][event], a["q_probs"][event], float(a["q_rest"][event])
    p_known = {int(t): float(v) for t, v in zip(p_ids, p_probs) if t >= 0}
    q_known = {int(t): float(v) for t, v in zip(q_ids, q_probs) if t >= 0}
    p_listed, q_listed = set(p_known), set(q_known)
    for t, pv, qv in zip(drafts, a["drafts_p"][event, :k], a["drafts_q"][event, :k]):
        p_known.setdefault(int(t), float(pv))
        q_known.setdefault(int(t), float(qv))
    p_zero, q_zero = p_rest <= TAIL_NEGLIGIBLE, q_rest <= TAIL_NEGLIGIBLE
    candidates = sorted(set(p_known) | set(q_known))
    ids = np.array([t for t in candidates if (t in p_known or p_zero) and (t in q_known or q_zero)], dtype=np.int64)
    in_k = set(ids.tolist())
    pk = np.array([p_known.get(t, 0.0) for t in ids.tolist()])
    qk = np.array([q_known.get(t, 0.0) for t in ids.tolist()])
    # tail = remainder, minus the known tokens that were outside the top list, plus the
    # listed tokens that are not in K (their other mass is unknown)
    p_tail = p_rest - sum(p_known[t] for t in in_k if t not in p_listed and t in p_known) + sum(p_known[t] for t in p_listed - in_k)
    q_tail = q_rest - sum(q_known[t] for t in in_k if t not in q_listed and t in q_known) + sum(q_known[t] for t in q_listed - in_k)
    listed = q_ids >= 0
    order = np.lexsort((q_ids[listed], -q_probs[listed]))  # q descending, ties to the lower id
    return NodeInstance(ids, pk, qk, max(p_tail, 0.0), max(q_tail, 0.0), q_ids[listed][order], q_probs[listed][order])


def rule_scheme(rule: str) -> str:
    """The draft law whose optimum is ``rule``'s reference (the registry's
    ``reference_optimum``: i.i.d. for ``specinfer`` with one ``q``)."""
    return rule_spec(rule).reference_optimum


def scheme_optimum(node: NodeInstance, k: int, scheme: str) -> Bounds:
    """Bounds on ``alpha*(p, Q_scheme(q, k))`` for one node (module docstring)."""
    if k == 1 or scheme in ("hub", "greedy"):
        if scheme in ("hub", "greedy") and k >= 2 and not _covers_fixed(node, k):
            return _fixed_token_unknown(node, k, scheme)
        return _per_token_optimum(node.p, node.q, node.ids, node.p_tail, node.q_tail, k, scheme)
    p, q = node.merged()
    if scheme == "iid":
        merged = optimal_acceptance(p, q, k, draft_scheme="iid")
        if node.q_tail <= TAIL_NEGLIGIBLE:
            return Bounds.point(merged)
        return Bounds(max(0.0, merged - node.p_tail), merged, "i.i.d. optimum bounded from the merged tail")
    if scheme == "without_replacement":
        if node.q_tail <= TAIL_NEGLIGIBLE:
            return Bounds.point(optimal_acceptance(p, q, k, draft_scheme="without_replacement"))
        lower = scheme_optimum(node, k, "iid").lo
        top = np.sort(node.q_top_probs[node.q_top_ids >= 0])[::-1]
        taken = np.concatenate([[0.0], np.cumsum(top[: k - 1])])
        if len(taken) < k or taken[-1] >= 1 - TAIL_NEGLIGIBLE:
            return Bounds(lower, 1.0, "without-replacement optimum: only the trivial upper bound")
        c = float((1.0 / (1.0 - taken)).sum())
        upper = float(np.minimum(node.p, np.minimum(1.0, c * node.q)).sum()) + min(node.p_tail, c * node.q_tail)
        return Bounds(lower, max(lower, min(1.0, upper)), "without-replacement optimum bounded (per-token bound)")
    raise UnknownNameError(f"unknown draft scheme {scheme!r}; choose one of {ONE_Q_SCHEMES}")


def _covers_fixed(node: NodeInstance, k: int) -> bool:
    """True when the hub / greedy fixed tokens (the top ``k - 1`` of ``q``, ``k >= 2``; the
    hub is the top one) are in ``K``."""
    return bool(np.isin(node.q_top_ids[: k - 1], node.ids).all())


def _fixed_token_unknown(node: NodeInstance, k: int, scheme: str) -> Bounds:
    """Hub / greedy optimum (``k >= 2``) when the target mass of a fixed token (the top
    ``k - 1`` of ``q``, membership 1) is not recorded: the known tokens count with their per-token
    bound, the tail (which holds the unknown fixed token) with at most ``p(U)``."""
    fixed = node.q_top_ids[: k - 1]
    scale = 1.0 - float(node.q_top_probs[: len(fixed)].sum())
    is_fixed = np.isin(node.ids, fixed)
    lo = float(node.p[is_fixed].sum())
    if scale > TAIL_NEGLIGIBLE:
        lo += float(np.minimum(node.p[~is_fixed], np.minimum(1.0, node.q[~is_fixed] / scale)).sum())
    return Bounds(lo, min(1.0, lo + node.p_tail), f"{scheme}: target mass of a fixed draft token not recorded")


def rule_bounds(rule: str, node: NodeInstance, k: int, own: Bounds) -> Bounds:
    """Bounds on ``rule``'s exact acceptance at one node (``own``: its law's optimum)."""
    spec = rule_spec(rule)
    if spec.attains_own_optimum:
        return own  # the rule reaches its own law's optimum on every instance
    q_zero, p_zero = node.q_tail <= TAIL_NEGLIGIBLE, node.p_tail <= TAIL_NEGLIGIBLE
    exact_ok = (q_zero and "q" in spec.exact_on_merged_tail) or (p_zero and "p" in spec.exact_on_merged_tail) or (q_zero and p_zero)
    why = "tail mass of p and q unknown token by token"
    if exact_ok:
        p, q = node.merged()
        try:
            cost = estimated_seconds(spec, draft_support(q), k)
            if cost > NODE_SECONDS_LIMIT:
                raise NotApplicableError(f"the exact law of {rule} would take about {cost:.3g} s at this node")
            params = {"method": "closed_form"} if spec.has_closed_form(k) else {}
            return Bounds.point(float(rule_acceptance(rule, p, q, k, **params)))
        except OTMError as exc:
            why = str(exc)
    lo = float(np.minimum(node.p, node.q).sum()) if spec.at_least_single_draft else 0.0
    return Bounds(min(lo, own.hi), own.hi, f"{rule} acceptance bounded: {why}")


# --------------------------------------------------------------------------- a recording


@dataclass(frozen=True)
class NodeResult:
    """The validation of one verification event (module docstring). ``rule``,
    ``optimum``, ``best``: :class:`Bounds`; ``schemes``: each scheme's bounds (or the
    reason it does not apply); ``accepted``: the output is one of the drafts."""

    event: int
    step: int
    row: int
    depth: int
    node: int
    k: int
    rule_name: str
    scheme: str
    rule: Bounds
    optimum: Bounds
    best: Bounds
    best_scheme: str | None
    schemes: dict = field(default_factory=dict)
    accepted: bool = False

    def as_dict(self) -> dict:
        out = {key: getattr(self, key) for key in ("event", "step", "row", "depth", "node", "k", "rule_name", "scheme", "best_scheme", "accepted")}
        for key in ("rule", "optimum", "best"):
            out[key] = asdict(getattr(self, key))
        out["schemes"] = {s: asdict(b) if isinstance(b, Bounds) else b for s, b in self.schemes.items()}
        return out


def validate_node(recording: Recording, event: int) -> NodeResult:
    """Validate one event with ``k >= 1`` drafts."""
    a = recording.arrays
    k = int(a["k"][event])
    if k < 1:
        raise InvalidDraftCountError(f"event {event} is a bonus draw (k=0): nothing to validate")
    rule = rule_spec(recording.meta["rule"]).name if k >= 2 else "single"
    if not rule_spec(rule).lossless:
        raise NotApplicableError(f"rule {rule!r} is not lossless with respect to p: the OTM gap does not apply")
    scheme = rule_scheme(rule)
    node = node_instance(recording, event)
    schemes: dict = {}
    for name in ONE_Q_SCHEMES:  # the laws compared for the "best law" (module docstring)
        try:
            schemes[name] = scheme_optimum(node, k, name)
        except OTMError as exc:
            schemes[name] = f"not applicable: {exc}"
    own = schemes[scheme] if isinstance(schemes[scheme], Bounds) else scheme_optimum(node, k, scheme)
    valid = {n: b for n, b in schemes.items() if isinstance(b, Bounds)}
    best = Bounds(max(b.lo for b in valid.values()), max(b.hi for b in valid.values()))
    best_scheme = max(valid, key=lambda n: valid[n].lo) if best.exact else None
    drafts = a["drafts"][event, :k]
    return NodeResult(
        event=event, step=int(a["step"][event]), row=int(a["row"][event]), depth=int(a["depth"][event]),
        node=int(a["node"][event]), k=k, rule_name=rule, scheme=scheme,
        rule=rule_bounds(rule, node, k, own), optimum=own, best=best, best_scheme=best_scheme,
        schemes=schemes, accepted=bool(np.isin(a["output"][event], drafts)),
    )


def _mean_se(values) -> tuple[float | None, float | None]:
    values = np.asarray(values, dtype=np.float64)
    if len(values) == 0:
        return None, None
    se = float(values.std(ddof=1) / math.sqrt(len(values))) if len(values) > 1 else None
    return float(values.mean()), se


def summarise(nodes: list[NodeResult], alpha: float = DEFAULT_ALPHA) -> dict:
    """Aggregates of a group of nodes (one rule, or one rule at one depth).

    Means with standard errors (``std / sqrt(n)`` over nodes) of the rule's exact
    acceptance, its law's optimum, the gap ``optimum - rule`` and the gap to the best
    law, over the nodes where both are exact (``n_exact``); over all nodes, the means of
    the lower and upper bounds of the gap (``gap_bounds``), of the rule's acceptance, its
    law's optimum and the best law's optimum (``*_bounds``); the empirical acceptance (fraction of nodes whose
    output was a draft) and a z-test of ``sum(accepted - rule)`` over the exact nodes
    (variance ``sum rule (1 - rule)``; false-alarm rate ``alpha``).
    """
    exact = [n for n in nodes if n.rule.exact and n.optimum.exact]
    rule_values = np.array([n.rule.value for n in exact])
    opt_values = np.array([n.optimum.value for n in exact])
    best_values = np.array([n.best.lo if n.best.exact else np.nan for n in exact])
    gap_lo = [max(0.0, n.optimum.lo - n.rule.hi) for n in nodes]
    gap_hi = [n.optimum.hi - n.rule.lo for n in nodes]
    out = {"n_nodes": len(nodes), "n_exact": len(exact)}
    for key, values in (("rule_acceptance", rule_values), ("optimum", opt_values), ("gap", opt_values - rule_values),
                        ("gap_to_best", best_values[~np.isnan(best_values)] - rule_values[~np.isnan(best_values)])):
        out[key], out[f"{key}_se"] = _mean_se(values)
    out["gap_bounds"] = [float(np.mean(gap_lo)), float(np.mean(gap_hi))] if nodes else None
    for key in ("rule", "optimum", "best"):
        out[f"{key}_bounds"] = [float(np.mean([getattr(n, key).lo for n in nodes])), float(np.mean([getattr(n, key).hi for n in nodes]))] if nodes else None
    accepted = np.array([n.accepted for n in nodes], dtype=np.float64)
    out["empirical_acceptance"], _ = _mean_se(accepted)
    out["empirical_acceptance_se"] = float(math.sqrt(accepted.mean() * (1 - accepted.mean()) / len(accepted))) if len(accepted) else None
    out["acceptance_test"] = _acceptance_z_test(exact, alpha)
    return out


def _acceptance_z_test(exact: list[NodeResult], alpha: float) -> dict | None:
    """z-test that the recorded acceptances are draws with the exact per-node rates."""
    if not exact:
        return None
    rate = np.array([n.rule.value for n in exact])
    observed = np.array([n.accepted for n in exact], dtype=np.float64)
    variance = float((rate * (1 - rate)).sum())
    diff = float((observed - rate).sum())
    if variance <= TAIL_NEGLIGIBLE:
        passed = abs(diff) <= 0.5
        return {"z": 0.0 if passed else math.inf, "p_value": 1.0 if passed else 0.0, "alpha": alpha, "passed": passed}
    z = diff / math.sqrt(variance)
    p_value = float(2 * stats.norm.sf(abs(z)))
    return {"z": z, "p_value": p_value, "alpha": alpha, "passed": p_value >= alpha}


#: The verdicts of :func:`verdict`.
PASS, FAIL, NOT_CHECKED = "pass", "fail", "not_checked"


def verdict(nodes: list[NodeResult], by_rule: dict, skipped: dict | None = None) -> dict:
    """What a recording's validation found, and what it could not check.

    A node is *checked* when its rule's acceptance and its own law's optimum are both exact
    (``n_exact`` of :func:`summarise`); on the other nodes they are bounds, which contain each
    other by construction, so those nodes test nothing. Two checks run on the checked nodes:
    no rule beats its own law's optimum (by more than :data:`TAIL_NEGLIGIBLE`: a lossless
    rule never does, so an excess is a bug in the rule or in the optimum), and every rule's
    recorded acceptance agrees with its exact per-node rates (the z-test of :func:`summarise`).

    Returns ``status``: :data:`FAIL` when a check fails (``reasons`` says which);
    :data:`NOT_CHECKED` when nothing failed but some rule (or the whole recording) has no
    checked node; :data:`PASS` otherwise. ``passed`` is ``status == PASS``; ``checked`` says
    what was checked, ``unchecked`` what was not and why.
    """
    reasons, unchecked = [], []
    above = [n for n in nodes if n.rule.lo > n.optimum.hi + TAIL_NEGLIGIBLE]
    if above:
        worst = max(above, key=lambda n: n.rule.lo - n.optimum.hi)
        reasons.append(f"{len(above)} node(s) where the rule beats its own law's optimum "
                       f"(worst: event {worst.event}, by {worst.rule.lo - worst.optimum.hi:.3g})")
    for rule, group in by_rule.items():
        test = group.get("acceptance_test")
        if test is not None and not test["passed"]:
            reasons.append(f"{rule}: recorded acceptance differs from the exact rates (z = {test['z']:.2f}, "
                           f"p = {test['p_value']:.2g} < alpha = {test['alpha']:g})")
    n_exact = sum(group["n_exact"] for group in by_rule.values())
    per_rule = ", ".join(f"{rule} {group['n_exact']}/{group['n_nodes']}" for rule, group in by_rule.items())
    checked = f"{n_exact} of {len(nodes)} verification nodes checked exactly" + (f" ({per_rule})" if per_rule else "")
    bounded = [n for n in nodes if not (n.rule.exact and n.optimum.exact)]
    if bounded:
        notes = Counter(n.rule.note or n.optimum.note for n in bounded)
        unchecked.append(f"{len(bounded)} node(s) only bounded ({notes.most_common(1)[0][0]})")
    unchecked += [f"{rule}: no node checked exactly" for rule, group in by_rule.items() if group["n_exact"] == 0]
    if skipped:
        unchecked.append(f"{len(skipped)} node(s) skipped ({next(iter(skipped.values()))})")
    if not nodes:
        unchecked.append("no verification node could be validated")
    status = FAIL if reasons else NOT_CHECKED if not nodes or any(g["n_exact"] == 0 for g in by_rule.values()) else PASS
    return {"status": status, "passed": status == PASS, "reasons": reasons, "checked": checked, "unchecked": unchecked}


@dataclass(frozen=True)
class ValidationResult:
    """``nodes``: one :class:`NodeResult` per verification event; ``skipped``: event ->
    reason; ``summary``: per rule (``by_rule``) and per rule and depth (``by_depth``,
    keyed ``"rule/depth"``), see :func:`summarise`."""

    meta: dict
    nodes: list
    skipped: dict
    summary: dict

    def as_dict(self, with_nodes: bool = True) -> dict:
        out = {"meta": self.meta, "summary": self.summary, "skipped": {str(k): v for k, v in self.skipped.items()}}
        if with_nodes:
            out["nodes"] = [n.as_dict() for n in self.nodes]
        return out


def validate_recording(recording: Recording, alpha: float = DEFAULT_ALPHA, progress: bool = False) -> ValidationResult:
    """Validate every verification event of ``recording`` (bonus draws, ``k = 0``, are
    counted in ``summary["bonus_events"]`` and skipped)."""
    k = recording.arrays["k"]
    events = np.flatnonzero(k > 0)
    iterator = events
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(events, desc="validating nodes", unit="node")
    nodes, skipped = [], {}
    for event in iterator:
        try:
            nodes.append(validate_node(recording, int(event)))
        except OTMError as exc:
            skipped[int(event)] = str(exc)
    by_rule, by_depth = {}, {}
    for rule in sorted({n.rule_name for n in nodes}):
        group = [n for n in nodes if n.rule_name == rule]
        by_rule[rule] = summarise(group, alpha)
        for depth in sorted({n.depth for n in group}):
            by_depth[f"{rule}/{depth}"] = summarise([n for n in group if n.depth == depth], alpha)
    summary = {
        "verdict": verdict(nodes, by_rule, skipped),
        "rule": recording.meta.get("rule"), "tree": recording.meta.get("tree"),
        "full": bool(recording.meta.get("full")), "top_m": recording.meta.get("top_m"),
        "sparse_limit": recording.meta.get("sparse_limit"),
        "vocab_size": recording.meta.get("vocab_size"), "events": int(len(k)),
        "bonus_events": int((k == 0).sum()), "validated": len(nodes), "skipped": len(skipped),
        "by_rule": by_rule, "by_depth": by_depth,
    }
    return ValidationResult(dict(recording.meta), nodes, skipped, summary)


__all__ = [
    "Bounds",
    "FAIL",
    "NOT_CHECKED",
    "NodeInstance",
    "NodeResult",
    "PASS",
    "TAIL_NEGLIGIBLE",
    "ValidationResult",
    "node_instance",
    "rule_bounds",
    "rule_scheme",
    "scheme_optimum",
    "summarise",
    "validate_node",
    "validate_recording",
    "verdict",
]
