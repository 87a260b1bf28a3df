"""The rule registry: every fact about a selection rule, written once.

Each rule is one :class:`RuleSpec`. The command line's choices, the report's columns,
recording validation, the theorem suite, the decoding verifiers' registry and the tests
are all derived from :data:`RULE_SPECS`; nothing else lists rule names. A new rule is its module,
its spec here, its verifier and its reference (docs/adding-a-rule.md).

>>> rule_spec("rrs").draft_scheme, rule_spec("spechub").ks
('iid', (2, 2))
>>> rule_spec("is_truncated").name          # old names resolve to the current one
'importance_sampling_truncated'
>>> [s.name for s in rule_specs(closed_form_at=(151_936, 2))]
['rrs', 'rrs_wor', 'specinfer', 'kseq', 'spechub', 'greedy', 'optimal']
"""
from __future__ import annotations

import importlib
import math
from dataclasses import dataclass

from ..draft_laws import DRAFT_SCHEMES
from ..errors import InvalidDraftCountError, UnknownNameError


@dataclass(frozen=True)
class RuleSpec:
    """What the toolkit knows about one selection rule.

    Attributes:
        name: the rule's name everywhere (``otm.rule_law(name, ...)``, ``otm decode --rule``).
        title: a few words for tables and help texts.
        reference: the paper and algorithm / theorem (bibliography: docs/references.md).
        module: the module under :mod:`otm.rules` holding its exact law.
        law_function: the function of ``module`` computing the exact law.
        draft_scheme: the joint draft law its drafts come from (:data:`otm.draft_laws.DRAFT_SCHEMES`).
        lossless: its output law is ``p`` (the speculative-ensemble rules output ``r``).
        ks: ``(smallest, largest)`` number of drafts it is defined for (``None``: any).
        closed_form: cost of its closed-form acceptance (``method="closed_form"``: the
            acceptance and output law without the coupling over the draft tuples), or ``None``
            when the exact law needs an enumeration of draft tuples. Where a closed form can
            refuse (:class:`otm.errors.NotApplicableError`, before any long computation), it
            says where.
        closed_form_ks: ``(smallest, largest)`` ``k`` the closed form covers (``largest``
            ``None``: no bound; ``None``: every allowed ``k``).
        reference_optimum: the draft scheme whose optimum is the fair reference (its own
            law's): a rule never beats it. ``None`` for rules not judged against ``p``.
        attains_own_optimum: it reaches that optimum on every instance (proved; for
            ``optimal_wor`` by docs/optimal-verifier-proofs.md, "Water levels are probabilities";
            checked by the theorem suite).
        computed_as_optimum: its law is built on the cut of that optimum, so where only its
            acceptance is asked for (a sweep's cells, the report's columns) it is computed as
            that optimum, a closed form at any vocabulary (:mod:`otm.positions`); implies
            ``attains_own_optimum``.
        gain_baselines: the rules ``otm report`` compares it with, position by position
            (``rule - baseline`` per ``k``, each baseline on its own draft law).
        in_report: a default column of ``otm report`` (``--rules``).
        at_least_single_draft: its acceptance is at least ``sum min(p, q)``, the
            single-draft test of its first draft.
        exact_on_merged_tail: ``"q"`` and/or ``"p"``: its acceptance does not change when the
            tokens with ``q = 0`` (``"q"``), or with ``p = 0`` (``"p"``), are merged into one
            token (what validating a top-m recording relies on; proofs in
            :mod:`decoding.validation.recordings`).
        verifier: the module under :mod:`decoding.verifiers` with its batched sampler, or
            ``None`` when it has none.
        seconds_per_lp_tuple: for rules that solve an LP over the draft tuples, the
            measured cost per tuple (``scripts/bench_rule_cost.py``): what
            :func:`estimated_seconds` multiplies; ``None`` for the others.
        latent_paths: the exact law enumerates, for every draft tuple, the latent i.i.d.
            sequences behind it (up to ``k^k``; ``optimal_latent``), so a tuple costs
            :data:`LATENT_SECONDS_PER_PATH` ``* k^k`` at least.
        cost_model: for a closed form that is not near free, ``"module.function"`` under
            :mod:`otm.rules` estimating its seconds from ``(draft support, k)``, what
            :func:`estimated_seconds` returns there (``None``: a closed form costs nothing).
        aliases: earlier names, still accepted.
    """

    name: str
    title: str
    reference: str
    module: str
    draft_scheme: str
    lossless: bool = True
    ks: tuple = (1, None)
    closed_form: str | None = None
    closed_form_ks: tuple | None = None
    reference_optimum: str | None = None
    attains_own_optimum: bool = False
    computed_as_optimum: bool = False
    gain_baselines: tuple = ()
    in_report: bool = False
    at_least_single_draft: bool = False
    exact_on_merged_tail: tuple = ()
    verifier: str | None = None
    law_function: str = "exact_law"
    seconds_per_lp_tuple: float | None = None
    latent_paths: bool = False
    cost_model: str | None = None
    aliases: tuple = ()

    def allows(self, k: int) -> bool:
        """True when the rule is defined for ``k`` drafts."""
        low, high = self.ks
        return k >= low and (high is None or k <= high)

    def check_k(self, k: int) -> int:
        """``k``, or :class:`InvalidDraftCountError` when the rule is not defined for it."""
        if not self.allows(k):
            low, high = self.ks
            allowed = f"k = {low}" if low == high else f"k >= {low}" if high is None else f"{low} <= k <= {high}"
            raise InvalidDraftCountError(f"rule {self.name!r} is defined for {allowed} only, got k={k}")
        return k

    def has_closed_form(self, k: int) -> bool:
        """True when its acceptance has a closed form at ``k`` drafts."""
        if self.closed_form is None or not self.allows(k):
            return False
        low, high = self.closed_form_ks or (k, k)
        return low <= k and (high is None or k <= high)


#: Every rule, in the order tables list them.
RULE_SPECS: dict[str, RuleSpec] = {spec.name: spec for spec in (
    RuleSpec(
        "single", "single draft", "Leviathan et al. 2023, Alg. 1", "single", "iid",
        ks=(1, 1), closed_form="O(V)", reference_optimum="iid", attains_own_optimum=True,
        at_least_single_draft=True, exact_on_merged_tail=("q", "p"), verifier="single", in_report=True,
    ),
    RuleSpec(
        "rrs", "recursive rejection sampling", "Sun et al. 2024 (SpecHub), Alg. 1; Miao et al. 2024 (SpecInfer)",
        "rrs", "iid", closed_form="O(k V)", reference_optimum="iid", at_least_single_draft=True,
        exact_on_merged_tail=("q", "p"), verifier="rrs", in_report=True,
    ),
    RuleSpec(
        "rrs_wor", "recursive rejection sampling without replacement", "Sun et al. 2024 (SpecHub), Alg. 1",
        "rrs_wor", "without_replacement", closed_form="O(V log V)", closed_form_ks=(1, 2),
        reference_optimum="without_replacement", at_least_single_draft=True, exact_on_merged_tail=("q",),
        verifier="rrs_wor", in_report=True,
    ),
    RuleSpec(
        "specinfer", "recursive rejection, draft i from q_i", "Khisti et al. 2025, Remark 1; Miao et al. 2024",
        "specinfer", "independent", closed_form="O(k V)", reference_optimum="iid", at_least_single_draft=True,
        exact_on_merged_tail=("q", "p"), verifier="specinfer",
    ),
    RuleSpec(
        "kseq", "k-sequential selection (k-SEQ)", "Sun et al. 2023 (SpecTr), Alg. 2", "kseq", "iid",
        closed_form="O(V) per bisection step", reference_optimum="iid", at_least_single_draft=True,
        exact_on_merged_tail=("q", "p"), verifier="kseq", in_report=True,
    ),
    RuleSpec(
        "spechub", "SpecHub", "Sun et al. 2024 (SpecHub), Alg. 3", "spechub", "hub", ks=(2, 2),
        closed_form="O(V)", reference_optimum="hub", attains_own_optimum=True, exact_on_merged_tail=("q",),
        verifier="spechub", in_report=True,
    ),
    RuleSpec(
        "importance_sampling", "importance sampling, LP-optimal weights", "Khisti et al. 2025, Thm 1",
        "importance_sampling", "iid", reference_optimum="iid", attains_own_optimum=True,
        seconds_per_lp_tuple=3e-4, aliases=("is_optimal",),
    ),
    RuleSpec(
        "importance_sampling_wor", "importance sampling, LP-optimal weights, drafts without replacement",
        "Khisti et al. 2025, Thm 4 (any joint draft law)", "importance_sampling", "without_replacement",
        reference_optimum="without_replacement", attains_own_optimum=True, seconds_per_lp_tuple=4e-4,
        law_function="exact_law_without_replacement",
    ),
    RuleSpec(
        "importance_sampling_truncated", "truncated importance sampling", "Khisti et al. 2025, Sec. 4, Remark 3",
        "importance_sampling_truncated", "iid", reference_optimum="iid", verifier="importance_sampling_truncated",
        seconds_per_lp_tuple=5e-5, aliases=("is_truncated",),
    ),
    RuleSpec(
        "greedy", "optimal verifier for greedy drafts", "this toolkit (docs/theory.md, greedy drafts)",
        "greedy", "greedy", closed_form="O(V log V)", reference_optimum="greedy",
        attains_own_optimum=True, computed_as_optimum=True, exact_on_merged_tail=("q",), verifier="greedy",
        in_report=True,
    ),
    RuleSpec(
        "optimal", "the optimal verifier (max-ratio priority with block exchanges)",
        "this toolkit (docs/optimal-verifier.md); canonical decomposition of Khisti et al. 2025", "optimal", "iid",
        closed_form="O(V log V)", reference_optimum="iid", attains_own_optimum=True, computed_as_optimum=True,
        at_least_single_draft=True, exact_on_merged_tail=("q", "p"), verifier="optimal.iid",
        gain_baselines=("rrs", "rrs_wor", "spechub"), in_report=True,
    ),
    RuleSpec(
        "optimal_latent", "the i.i.d.-optimal verifier on the latent draws behind drafts without replacement",
        "this toolkit (docs/optimal-verifier.md)", "optimal_latent", "without_replacement",
        reference_optimum="without_replacement", at_least_single_draft=True, verifier="optimal.latent", latent_paths=True,
    ),
    RuleSpec(
        "optimal_wor", "the optimal rule for k drafts without replacement (water levels)",
        "this toolkit (docs/optimal-verifier.md#water-levels-for-drafts-without-replacement)", "optimal_wor", "without_replacement", ks=(2, None),
        closed_form=("k >= 3: the water levels on the masses of the draft sets (from every draft tuple, or from the "
                     "clock integral for float inputs; otm.rules.water_levels.parameters.wor_parameters), priced by its "
                     "cost model (the tuples, or the clock integral's tables up to their limit; refused in milliseconds "
                     "above); k = 2 is the nesting on the pair masses, which can take minutes at a real vocabulary, so it "
                     "is priced as an enumeration"), closed_form_ks=(3, None),
        cost_model="water_levels.parameters.estimated_seconds",
        reference_optimum="without_replacement", attains_own_optimum=True, computed_as_optimum=True,
        at_least_single_draft=True, verifier="optimal.wor", gain_baselines=("rrs_wor",), in_report=True,
        aliases=("optimal_pair_wor",),
    ),
    RuleSpec(
        "ensemble_weighted", "speculative ensemble, weighted", "Fu et al. 2025, eq. (4)",
        "speculative_ensemble", "iid", lossless=False, ks=(1, 1), closed_form="O(V)",
        law_function="exact_law_weighted",
    ),
    RuleSpec(
        "ensemble_contrastive", "speculative ensemble, contrastive", "Fu et al. 2025, eq. (5)",
        "speculative_ensemble", "iid", lossless=False, ks=(1, 1), closed_form="O(V)",
        law_function="exact_law_contrastive",
    ),
)}

#: Every rule name, in table order.
RULES = tuple(RULE_SPECS)

#: Old name -> current name.
ALIASES = {alias: spec.name for spec in RULE_SPECS.values() for alias in spec.aliases}


def rule_spec(name: str) -> RuleSpec:
    """The spec of rule ``name`` (an old name is resolved); :class:`UnknownNameError` otherwise."""
    spec = RULE_SPECS.get(ALIASES.get(name, name)) if isinstance(name, str) else None
    if spec is None:
        raise UnknownNameError(f"unknown rule {name!r}; choose one of {', '.join(RULES)}")
    return spec


def rule_specs(*, lossless: bool | None = None, verifier: bool | None = None,
               closed_form_at: tuple | None = None, names=None) -> list[RuleSpec]:
    """The specs matching every given filter, in table order.

    Args:
        lossless: keep rules whose output law is (``True``) / is not (``False``) ``p``.
        verifier: keep rules with (``True``) / without (``False``) a batched sampler.
        closed_form_at: ``(V, k)``: keep rules whose exact acceptance is available at this
            size in closed form (the rules usable at a 150k-token vocabulary).
        names: restrict to these names (aliases resolved).
    """
    specs = [rule_spec(n) for n in names] if names is not None else list(RULE_SPECS.values())
    if lossless is not None:
        specs = [s for s in specs if s.lossless == lossless]
    if verifier is not None:
        specs = [s for s in specs if (s.verifier is not None) == verifier]
    if closed_form_at is not None:
        specs = [s for s in specs if s.has_closed_form(closed_form_at[1])]
    return specs


def estimated_seconds(spec: RuleSpec, vocab_size: int, k: int) -> float:
    """Estimated cost of ``spec``'s exact law at ``(V, k)``: for a closed form near zero, or
    its ``cost_model``'s estimate; the number of draft tuples times the measured
    ``seconds_per_lp_tuple`` for an LP rule,
    and the tuple enumeration's cost otherwise (``V^k`` or ``V!/(V-k)!`` tuples, about
    ``ENUMERATION_SECONDS_PER_TUPLE`` each, or ``LATENT_SECONDS_PER_PATH * k^k`` for a rule
    with ``latent_paths``). ``inf`` when the count overflows a float."""
    if spec.has_closed_form(k):
        if spec.cost_model is None:
            return 0.0
        module, function = spec.cost_model.rsplit(".", 1)
        return float(getattr(importlib.import_module(f"{__package__}.{module}"), function)(vocab_size, k))
    per_tuple = spec.seconds_per_lp_tuple or ENUMERATION_SECONDS_PER_TUPLE
    if k * math.log10(max(vocab_size, 2)) > 300 or (spec.latent_paths and k * math.log10(k) > 300):
        return math.inf  # more tuples (or latent paths) than a float holds
    if spec.latent_paths:
        per_tuple = max(per_tuple, LATENT_SECONDS_PER_PATH * float(k) ** k)
    tuples = math.perm(vocab_size, k) if spec.draft_scheme == "without_replacement" else vocab_size**k
    return float(tuples) * per_tuple


#: Cost of enumerating one draft tuple of a rule's law (a Python loop), an upper value of what
#: ``python scripts/bench_rule_cost.py`` measures; the LP rules' ``seconds_per_lp_tuple`` come
#: from the same script.
ENUMERATION_SECONDS_PER_TUPLE = 3e-5

#: Cost per latent path of ``optimal_latent``'s exact law: ``LATENT_SECONDS_PER_PATH * k^k``
#: bounds its cost per draft tuple from ``k = 4`` on, as ``python scripts/bench_rule_cost.py``
#: measures it (below, the enumeration constant does).
LATENT_SECONDS_PER_PATH = 4e-6


__all__ = ["ALIASES", "RULES", "RULE_SPECS", "RuleSpec", "estimated_seconds", "rule_spec", "rule_specs"]
