"""The ``otm`` command line: one thin module that dispatches to the packages.

torch (``decoding``) is imported only by the subcommands that need it.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

from .errors import OTMError, SolverError

#: Built-in examples for ``otm acceptance --example NAME`` (p = target, q = draft).
EXAMPLES = {
    # seed 000 Fig. 4/5: RRSw loses 0.06, SpecHub reaches the optimum.
    "spechub-fig5": {"target": [0.1, 0.6, 0.3], "draft": [0.5, 0.3, 0.2]},
    # seed 001 Example 1 style: a three-token pair where two drafts help.
    "three-token": {"target": [0.5, 0.3, 0.2], "draft": [0.2, 0.3, 0.5]},
}

ALL_RULES = ("single", "rrs", "rrs_wor", "specinfer", "kseq", "spechub", "is_optimal", "is_truncated", "greedy")


def _read_vector(path: str) -> np.ndarray:
    file = Path(path)
    if not file.exists():
        raise OTMError(f"no such file: {path}")
    if file.suffix == ".npy":
        return np.load(file)
    if file.suffix == ".json":
        return np.asarray(json.loads(file.read_text()), dtype=np.float64)
    raise OTMError(f"{path}: expected a .npy or .json vector")


def _to_probs(vector: np.ndarray, logits: bool, temperature: float | None) -> np.ndarray:
    from .distributions import as_distribution, logits_to_probs

    if logits:
        return logits_to_probs(vector, 1.0 if temperature is None else temperature)
    probs = as_distribution(vector)
    if temperature is None or temperature == 1.0:
        return probs
    with np.errstate(divide="ignore"):
        return logits_to_probs(np.log(probs), temperature)


def _acceptance_summary(p, q, k: int, sampling: str, method: str) -> dict:
    """The optimum for both sampling schemes and every rule that applies to (p, q, k)."""
    from . import optimal_acceptance, rule_acceptance

    def attempt(fn, *args, **kwargs):
        try:
            return float(fn(*args, **kwargs)), None
        except OTMError as exc:
            return None, str(exc)

    optimal, notes = {}, {}
    for scheme in ("iid", "without_replacement"):
        value, why = attempt(optimal_acceptance, p, q, k, sampling=scheme, method=method if scheme == sampling else "auto")
        optimal[scheme] = value
        if why:
            notes[f"optimal.{scheme}"] = why
    rules = {}
    for rule in ALL_RULES:
        value, why = attempt(rule_acceptance, rule, p, q, k)
        rules[rule] = value
        if why:
            notes[f"rules.{rule}"] = why
    return {"vocab_size": int(len(p)), "k": k, "optimal": optimal, "rules": rules, "notes": notes}


def _print_summary(summary: dict) -> None:
    def fmt(v):
        return "   n/a" if v is None else f"{v:.6f}"

    print(f"vocabulary {summary['vocab_size']}, k = {summary['k']} drafts")
    print("optimal acceptance (OTM):")
    for scheme, value in summary["optimal"].items():
        print(f"  {scheme:<22}{fmt(value)}")
    print("rule acceptance P(Y in S(X)):")
    for rule, value in summary["rules"].items():
        print(f"  {rule:<22}{fmt(value)}")
    for where, why in summary["notes"].items():
        print(f"  note: {where}: {why}")


def cmd_acceptance(args) -> int:
    if args.example:
        example = EXAMPLES[args.example]
        target, draft = np.asarray(example["target"]), np.asarray(example["draft"])
    elif args.target and args.draft:
        target, draft = _read_vector(args.target), _read_vector(args.draft)
    else:
        raise OTMError("give --target FILE and --draft FILE, or --example NAME")
    from .distributions import as_distribution_pair, check_draft_count

    p, q = as_distribution_pair(_to_probs(target, args.logits, args.temperature),
                                _to_probs(draft, args.logits, args.temperature))
    check_draft_count(args.k)
    summary = _acceptance_summary(p, q, args.k, args.sampling, args.method)
    if args.json:
        print(json.dumps(summary, indent=2, default=lambda v: None if isinstance(v, float) and math.isnan(v) else v))
    else:
        _print_summary(summary)
    return 0


def cmd_theorems(args) -> int:
    from proofs.cli import print_theorems, run_theorems

    rows = run_theorems(paper=args.paper, instances=args.instances, seed=args.seed, progress=not args.json)
    print_theorems(rows, as_json=args.json)
    return 0 if all(row["status"] != "fails" for row in rows) or args.allow_failures else 1


def cmd_reproduce(args) -> int:
    from proofs.cli import print_table4, run_table4

    print_table4(run_table4(pairs=args.pairs, seed=args.seed, reading=args.reading), as_json=args.json)
    return 0


def cmd_decode(args) -> int:
    from decoding.decode_cli import run_decode

    summary = run_decode(args)
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        for key in ("rule", "tree", "pair", "tokens_generated", "target_calls", "block_efficiency",
                    "acceptance_by_depth", "model_calls", "tokens_per_call", "acceptance_rate", "wall_seconds"):
            if key in summary:
                print(f"{key:<20}{summary[key]}")
        for text in summary.get("texts", []):
            print("-" * 60)
            print(text)
    return 0


def cmd_report(args) -> int:
    from decoding.report import run_report
    from proofs.cli import run_theorems

    if not args.quiet:
        print("otm report: step 1/4, the theorem suite", file=sys.stderr)
    rows = run_theorems(seed=args.seed, progress=not args.quiet)
    summary = run_report(args, rows)
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    return 0


def cmd_validate(args) -> int:
    from decoding.validate_cli import run_validate

    run_validate(args)
    return 0



def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="otm", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    acc = sub.add_parser("acceptance", help="optimal and per-rule acceptance for one (p, q, k)")
    acc.add_argument("--target", help="target distribution p: .npy or .json vector")
    acc.add_argument("--draft", help="draft distribution q: .npy or .json vector")
    acc.add_argument("--example", choices=sorted(EXAMPLES), help="use a built-in (p, q) instead of files")
    acc.add_argument("-k", type=int, default=2, help="number of drafts (default 2)")
    acc.add_argument("--sampling", choices=("iid", "without_replacement"), default="iid")
    acc.add_argument(
        "--method",
        default="auto",
        choices=("auto", "full_lp", "simplified_lp", "max_flow", "canonical_lp", "closed_form"),
    )
    acc.add_argument("--temperature", type=float, default=None, help="apply a temperature (0 = argmax)")
    acc.add_argument("--logits", action="store_true", help="the files hold logits, not probabilities")
    acc.add_argument("--json", action="store_true", help="print JSON")
    acc.set_defaults(func=cmd_acceptance)

    theorems = sub.add_parser("theorems", help="check the seed papers' theorems, claim by claim")
    theorems.add_argument("--paper", choices=("spechub", "khisti", "spectr", "leviathan", "ensemble", "beyond"))
    theorems.add_argument("--instances", type=int, default=None, help="random instances per check (default: each check's own)")
    theorems.add_argument("--seed", type=int, default=0)
    theorems.add_argument("--json", action="store_true")
    theorems.add_argument("--allow-failures", action="store_true", help="exit 0 even when a claim fails")
    theorems.set_defaults(func=cmd_theorems)

    reproduce = sub.add_parser("reproduce", help="reproduce a paper table")
    reproduce.add_argument("table", choices=("spechub-table4",))
    reproduce.add_argument("--pairs", type=int, default=100)
    reproduce.add_argument("--seed", type=int, default=0)
    reproduce.add_argument("--reading", default="stated", help="how the paper's recipe is read (docs/theorems.md)")
    reproduce.add_argument("--json", action="store_true")
    reproduce.set_defaults(func=cmd_reproduce)

    decode = sub.add_parser("decode", help="speculative decoding with a rule and a draft tree")
    decode.add_argument("--pair", default="qwen2.5-coder", help="qwen2.5-coder | tiny | DRAFT,TARGET")
    decode.add_argument(
        "--rule",
        required=True,
        choices=("single", "rrs", "rrs_wor", "specinfer", "kseq", "spechub", "is_truncated", "greedy",
                 "ensemble_weighted", "ensemble_contrastive"),
    )
    decode.add_argument("--tree", help="binary:D, ternary:D, kary:K,D, chains:K,D, prefix:k1,..., branching:A;B;.. "
                        "(not for the ensemble rules)")
    decode.add_argument("--lam", type=float, default=None, help="ensemble_weighted: r = lam q + (1 - lam) p")
    decode.add_argument("--mu", type=float, default=None, help="ensemble_contrastive: r ~ p q^(-mu)")
    decode.add_argument("--gammas", default=None, help="ensemble proposal lengths, draft,target (default 1)")
    decode.add_argument("--temperature", type=float, default=1.0)
    decode.add_argument("--top-p", type=float, default=None)
    decode.add_argument("--max-new-tokens", type=int, default=32)
    decode.add_argument("--prompt")
    decode.add_argument("--prompts", help="a file with one prompt per line")
    decode.add_argument("--seed", type=int, default=0)
    decode.add_argument("--record", help="write a recording (.npz) for `otm validate`")
    decode.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ...")
    decode.add_argument("--dtype", default="float32", choices=("float32", "float64", "bfloat16", "float16"))
    decode.add_argument("--json", action="store_true")
    decode.set_defaults(func=cmd_decode)

    report = sub.add_parser("report", help="the main job: theorems, real-logit bounds, decoding; writes a report folder")
    from decoding.report import add_report_arguments  # argparse only: torch is imported when the report runs

    add_report_arguments(report)
    report.set_defaults(func=cmd_report)

    validate = sub.add_parser("validate", help="per-node gap between a recording's rule and the OTM optimum")
    validate.add_argument("recording", help="a .npz recording written by `otm decode --record FILE`")
    validate.add_argument("--json", action="store_true", help="print the summary as JSON")
    validate.add_argument("--out", default=None, help="folder for validation.json and the figures")
    validate.set_defaults(func=cmd_validate)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (OTMError, SolverError) as exc:
        print(f"otm {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
