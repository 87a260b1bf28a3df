"""``otm acceptance``: the OTM optimum and every rule's exact acceptance for one ``(p, q, k)``.

The optima are reported for i.i.d. and without-replacement drafts with the method that
produced each (the prefix scan answers in milliseconds at any vocabulary). Each rule is
computed on its own draft law (SpecHub on the hub law, greedy on greedy drafts, ...), and
the table says which. A rule whose exact law would take longer than ``time_budget``
seconds (:func:`otm.rules.estimated_seconds`, from measured per-tuple costs) is listed as
skipped with the estimate; ``--rules`` asks for it explicitly (then it runs, with a
progress line first).
"""
from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from otm import rule_acceptance, solve_optimum
from otm.distributions import as_distribution_pair, check_draft_count, logits_to_probs
from otm.errors import InputFileError, InvalidDraftCountError, NotApplicableError, OTMError
from otm.files import load_numpy
from otm.rules import draft_support, estimated_seconds, rule_specs

from ..configs import AcceptanceConfig

#: Built-in examples for ``otm acceptance --example NAME`` (p = target, q = draft).
EXAMPLES = {
    # SpecHub (Sun et al. 2024) Figs. 4-5: RRSw loses 0.06, SpecHub reaches the optimum.
    "spechub-fig5": {"target": [0.1, 0.6, 0.3], "draft": [0.5, 0.3, 0.2]},
    # Khisti et al. 2025, Example 1 style: a three-token pair where two drafts help.
    "three-token": {"target": [0.5, 0.3, 0.2], "draft": [0.2, 0.3, 0.5]},
}

#: What each optimum column is computed for.
OPTIMUM_SCHEMES = ("iid", "without_replacement")


def read_vector(path: str, role: str) -> np.ndarray:
    """A numeric 1-D vector from a ``.npy`` (no pickles) or ``.json`` (a list of numbers) file;
    :class:`InputFileError` naming ``role`` (``"--target"``, ``"--draft"``) otherwise."""
    file = Path(path)
    if file.is_dir():
        raise InputFileError(f"{role}: {path} is a directory; expected a .npy or .json file of numbers")
    if not file.is_file():
        raise InputFileError(f"{role}: no such file: {path}")
    try:
        if file.suffix == ".npy":
            values = load_numpy(file, "npy")
        elif file.suffix == ".json":
            values = json.loads(file.read_text())
            if not isinstance(values, list):
                raise ValueError(f"expected a JSON list of numbers, got a JSON {type(values).__name__}")
        else:
            raise ValueError("expected a .npy or .json file")
        array = np.asarray(values)
        if array.dtype.kind not in "biuf":
            raise ValueError(f"expected real numbers, got {array.dtype} values")
    except (ValueError, OSError, TypeError) as exc:
        raise InputFileError(f"{role} {path}: {exc}") from None
    return array.astype(np.float64)


def _to_probs(vector: np.ndarray, role: str, logits: bool, temperature: float | None) -> np.ndarray:
    if logits:
        return logits_to_probs(vector, 1.0 if temperature is None else temperature, name=f"{role} logits")
    from otm.distributions import as_distribution

    probs = as_distribution(vector, role)
    if temperature is None or temperature == 1.0:
        return probs
    with np.errstate(divide="ignore"):
        return logits_to_probs(np.log(probs), temperature, name=f"{role} (log-probabilities)")


def load_pair(config: AcceptanceConfig) -> tuple[np.ndarray, np.ndarray]:
    """``(p, q)`` from the config's example or files, validated together."""
    if config.example and (config.target or config.draft):
        raise OTMError("give --example NAME or --target FILE and --draft FILE, not both")
    if not config.time_budget >= 0:
        raise OTMError(f"--time-budget must be a number of seconds >= 0, got {config.time_budget}")
    if config.example:
        example = EXAMPLES[config.example]
        target, draft = np.asarray(example["target"], dtype=np.float64), np.asarray(example["draft"], dtype=np.float64)
    elif config.target and config.draft:
        target, draft = read_vector(config.target, "--target"), read_vector(config.draft, "--draft")
    else:
        raise OTMError("give --target FILE and --draft FILE, or --example NAME")
    p = _to_probs(target, "p (target, --target)", config.logits, config.temperature)
    q = _to_probs(draft, "q (draft, --draft)", config.logits, config.temperature)
    return as_distribution_pair(p, q)


def acceptance_summary(p, q, config: AcceptanceConfig, progress=None) -> dict:
    """The optima (with the method used) and every rule that applies, within the budget."""
    k = check_draft_count(config.k)
    optimal, methods, notes = {}, {}, {}
    for scheme in OPTIMUM_SCHEMES:
        method = config.method if scheme == config.draft_scheme else "auto"
        try:
            solution = solve_optimum(p, q, k, draft_scheme=scheme, method=method)
            optimal[scheme], methods[scheme] = float(solution.value), solution.method
        except (NotApplicableError, InvalidDraftCountError) as exc:  # k distinct drafts from fewer tokens
            optimal[scheme], notes[f"optimal.{scheme}"] = None, str(exc)
    asked = config.rules is not None
    specs = rule_specs(names=config.rules) if asked else rule_specs(lossless=True)
    rules, laws = {}, {}
    for spec in specs:
        laws[spec.name] = spec.draft_scheme
        if not spec.allows(k):
            rules[spec.name], notes[f"rules.{spec.name}"] = None, f"defined for k in {spec.ks}, not k = {k}"
            continue
        cost = estimated_seconds(spec, draft_support(q), k)
        if cost > config.time_budget and not asked:
            rules[spec.name] = None
            notes[f"rules.{spec.name}"] = (f"skipped: its exact law would take {_duration(cost)} here "
                                           f"(over the {config.time_budget:g} s budget); ask with --rules {spec.name}")
            continue
        if cost > 1.0 and progress is not None:
            progress(f"rule {spec.name}: {_duration(cost)} ...")
        try:
            rules[spec.name] = float(rule_acceptance(spec.name, p, q, k, **_closed_form_when_available(spec, k)))
        except (NotApplicableError, InvalidDraftCountError) as exc:
            rules[spec.name], notes[f"rules.{spec.name}"] = None, str(exc)
    return {"vocab_size": int(p.size), "k": k, "optimal": optimal, "optimal_method": methods,
            "rules": rules, "rule_draft_law": laws, "notes": notes}


def _closed_form_when_available(spec, k: int) -> dict:
    return {"method": "closed_form"} if spec.has_closed_form(k) else {}


def _duration(seconds: float) -> str:
    """``"about 3.2 min"``; "longer than the age of the universe" past a float's range."""
    if not math.isfinite(seconds) or seconds > 4.4e17:
        return "longer than the age of the universe"
    for unit, size in (("years", 3.15e7), ("days", 86400.0), ("hours", 3600.0), ("min", 60.0)):
        if seconds >= size:
            return f"about {seconds / size:.3g} {unit}"
    return f"about {seconds:.2g} s"


def format_summary(summary: dict) -> str:
    """The plain-text table of :func:`acceptance_summary`."""
    def fmt(v):
        return "     n/a" if v is None else f"{v:.6f}"

    lines = [f"vocabulary {summary['vocab_size']}, k = {summary['k']} drafts",
             "optimal acceptance (OTM optimum, max P(Y in S(X)) over lossless rules):"]
    for scheme, value in summary["optimal"].items():
        method = summary["optimal_method"].get(scheme)
        lines.append(f"  {scheme + ' drafts':<32}{fmt(value)}" + (f"   ({method})" if method else ""))
    lines.append("rule acceptance P(Y in S(X)), each on its own draft law:")
    for rule, value in summary["rules"].items():
        lines.append(f"  {rule:<32}{fmt(value)}   ({summary['rule_draft_law'][rule]} drafts)")
    for where, why in summary["notes"].items():
        lines.append(f"  note: {where}: {why}")
    return "\n".join(lines)


def run_acceptance(config: AcceptanceConfig) -> dict:
    """Run ``otm acceptance``: print the table (or JSON) and return the summary."""
    p, q = load_pair(config)
    start = time.perf_counter()
    summary = acceptance_summary(p, q, config, progress=None if config.json else lambda line: print(line, file=sys.stderr))
    summary["wall_seconds"] = time.perf_counter() - start
    print(json.dumps(summary, indent=2) if config.json else format_summary(summary))
    return summary


__all__ = ["EXAMPLES", "acceptance_summary", "format_summary", "load_pair", "read_vector", "run_acceptance"]
