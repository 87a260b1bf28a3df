"""The ``otm`` command line: parse the options into a typed config, run the command.

Every subcommand is one module of :mod:`otm_app.commands` (or :mod:`otm_app.report.run`)
taking one config of :mod:`otm_app.configs`; this module only builds the parser from the
configs' defaults and the rule registry, and turns errors into one line on stderr with
exit status 2. torch is imported only by the subcommands that need it (``decode``,
``report``, ``validate``).
"""
from __future__ import annotations

import argparse
import os
import sys

from otm.corpus import DTYPES as CORPUS_DTYPES
from otm.errors import OTMError
from otm.optimum import METHODS
from otm.rules.registry import rule_spec, rule_specs
from otm.sequences.registry import SEQUENCE_RULES

from .configs import (
    AcceptanceConfig,
    CorpusConfig,
    DecodeConfig,
    ReportConfig,
    ReproduceConfig,
    SweepConfig,
    TheoremsConfig,
    ValidateConfig,
)

#: Exit status of a usage or input error (one line on stderr, no traceback).
EXIT_USAGE = 2

#: Set this environment variable to see the traceback of an unexpected error.
TRACEBACK_VARIABLE = "OTM_TRACEBACK"


class OneLineParser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line (``otm CMD: error: ...``), exit 2."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class DefaultsOnceFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Help that says each option's default once: ``(default: X)`` is added unless the help
    text already says the default, the default is ``None`` (nothing to say), or the option
    is a switch (``--json``, ``--no-figures``: on when given)."""

    def _get_help_string(self, action) -> str:
        text = action.help or ""
        if ("(default" in text or action.default is None or action.default is argparse.SUPPRESS
                or not action.option_strings or action.nargs == 0):
            return text
        return text + " (default: %(default)s)"


class _RefusedOption(argparse.Action):
    """An option a command does not take, refused with ``message`` (what to write instead)
    rather than read as an abbreviation of a longer option."""

    def __init__(self, option_strings, dest, message: str, **kwargs):
        super().__init__(option_strings, dest, nargs="?", **kwargs)
        self.message = message

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error(self.message)


def _rule_name(allowed: list, extra: tuple = ()) -> callable:
    """An argparse type: a rule name (old names accepted) among ``allowed`` specs, or one
    of the names ``extra``."""
    names = [spec.name for spec in allowed] + list(extra)

    def parse(text: str) -> str:
        if text in extra:
            return text
        try:
            name = rule_spec(text).name
        except OTMError:
            name = None
        if name not in names:
            raise argparse.ArgumentTypeError(f"invalid rule {text!r}; choose one of {', '.join(names)}")
        return name

    return parse


def _rule_list(allowed: list) -> callable:
    one = _rule_name(allowed)

    def parse(text: str) -> tuple:
        names = tuple(dict.fromkeys(one(part.strip()) for part in text.split(",") if part.strip()))  # an old name: one rule
        if not names:
            raise argparse.ArgumentTypeError("give at least one rule name")
        return names

    return parse


def _positive_ints(text: str) -> tuple:
    """``"1,2,4"`` or a range ``"1-8"`` -> a tuple of integers >= 1."""
    try:
        if "-" in text and "," not in text:
            low, high = (int(v) for v in text.split("-"))
            values = tuple(range(low, high + 1))
        else:
            values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers like 1,2,4 or a range 1-8, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected integers >= 1, got {text!r}")
    return values


def _computations(text: str) -> tuple:
    from otm.positions import OPTIMA

    allowed = list(OPTIMA) + [s.name for s in rule_specs(lossless=True)]
    names = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        try:
            names.append(part if part in OPTIMA else rule_spec(part).name)
        except OTMError:
            raise argparse.ArgumentTypeError(f"invalid computation {part!r}; choose from {', '.join(allowed)}") from None
    if not names:
        raise argparse.ArgumentTypeError("give at least one computation")
    return tuple(dict.fromkeys(names))  # an old rule name and its current one: one column


def _positive_floats(text: str) -> tuple:
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if not values or any(not (v > 0 and v < float("inf")) for v in values):
        raise argparse.ArgumentTypeError(f"expected positive finite numbers, got {text!r}")
    return values


def _add_acceptance(sub) -> None:
    from .commands.acceptance import EXAMPLES

    d = AcceptanceConfig
    acc = sub.add_parser("acceptance", help="optimal and per-rule acceptance for one (p, q, k)",
                         formatter_class=DefaultsOnceFormatter)
    acc.add_argument("--target", help="target distribution p: a .npy (no pickles) or .json list of numbers")
    acc.add_argument("--draft", help="draft distribution q: a .npy or .json list of numbers")
    acc.add_argument("--example", choices=sorted(EXAMPLES), help="use a built-in (p, q) instead of files")
    acc.add_argument("-k", "--k", dest="k", type=int, default=d.k, help="number of drafts")
    acc.add_argument("--draft-scheme", choices=("iid", "without_replacement"), default=d.draft_scheme,
                     help="draft scheme whose optimum takes --method")
    acc.add_argument("--sampling", action=_RefusedOption, help=argparse.SUPPRESS,
                     message="--sampling is now --draft-scheme (the draft scheme whose optimum takes --method)")
    acc.add_argument("--method", default=d.method, choices=METHODS, help="how the optimum is computed")
    acc.add_argument("--rules", type=_rule_list(rule_specs(lossless=True)), default=d.rules,
                     help="comma-separated rules to compute whatever their cost (default: every lossless rule "
                          "whose estimated cost fits --time-budget)")
    acc.add_argument("--time-budget", type=float, default=d.time_budget,
                     help="seconds a rule may take by default; slower ones are listed as skipped")
    acc.add_argument("--temperature", type=float, default=d.temperature, help="apply a temperature (0 = argmax)")
    acc.add_argument("--logits", action="store_true", help="the files hold logits, not probabilities")
    acc.add_argument("--json", action="store_true", help="print JSON")
    acc.set_defaults(command_config=AcceptanceConfig, run="otm_app.commands.acceptance:run_acceptance")


def _add_theorems(sub) -> None:
    from proofs.registry import PAPERS

    d = TheoremsConfig
    th = sub.add_parser("theorems", help="check the papers' theorems, claim by claim (about 40 s)",
                        formatter_class=DefaultsOnceFormatter)
    th.add_argument("--paper", choices=PAPERS, help="only this paper's claims")
    th.add_argument("--instances", type=int, default=d.instances, help="random instances per check (default: each check's own)")
    th.add_argument("--seed", type=int, default=d.seed, help="seed of every check's random instances")
    th.add_argument("--json", action="store_true", help="print one JSON list of the claims")
    th.add_argument("--allow-failures", action="store_true", help="exit 0 even when a claim fails")
    th.set_defaults(command_config=TheoremsConfig, run="otm_app.commands.theorems:run_theorems_command")


def _add_reproduce(sub) -> None:
    from proofs.table4 import READINGS, REPRODUCING_READING

    d = ReproduceConfig
    rep = sub.add_parser("reproduce", help="reproduce a paper table next to the paper's numbers",
                         formatter_class=DefaultsOnceFormatter)
    rep.add_argument("table", choices=("spechub-table4", "list"), help="the table to reproduce; list: the tables and readings")
    rep.add_argument("--pairs", type=int, default=d.pairs, help="random pairs per cell")
    rep.add_argument("--seed", type=int, default=d.seed, help="seed of the random pairs")
    rep.add_argument("--reading", default=d.reading, choices=READINGS,
                     help=f"how the paper's recipe is read; the table reproduces under {REPRODUCING_READING} "
                          "(docs/theorems.md)")
    rep.add_argument("--json", action="store_true", help="print the table (or the list) as JSON")
    rep.set_defaults(command_config=ReproduceConfig, run="otm_app.commands.theorems:run_reproduce_command")


#: ``--dtype`` of the commands that run a model pair (otm_app.commands.decode.DTYPES, named
#: here so that parsing imports no torch); bfloat16 is the Qwen checkpoints' own dtype.
MODEL_DTYPES = ("bfloat16", "float32", "float64", "float16")

#: The Qwen pair's memory need, said by the help of the commands that load it.
QWEN_MEMORY = ("Memory with --pair qwen2.5-coder: about 4.7 GB in bfloat16 (the default), 8.7 GB in float32, "
               "21 GB in float64.")


def _top_m(text: str) -> int | None:
    """``--record-top-m``: an integer >= 1, or ``full`` (whole rows: ``None``)."""
    if text == "full":
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1 or 'full', got {text!r}")
    return value


def _add_decode(sub) -> None:
    d = DecodeConfig
    dec = sub.add_parser("decode", help="speculative decoding with a rule and a draft tree",
                         description="Speculative decoding of prompts with a model pair, a rule and a draft tree; "
                         "--record writes every verification for `otm validate` (docs/validate.md). " + QWEN_MEMORY,
                         formatter_class=DefaultsOnceFormatter)
    dec.add_argument("--rule", type=_rule_name(rule_specs(verifier=True) + rule_specs(lossless=False), tuple(SEQUENCE_RULES)),
                     default=d.rule,
                     help="selection rule: " + ", ".join(s.name for s in rule_specs(verifier=True) + rule_specs(lossless=False))
                     + "; or a sequence verifier: block (a chain, default chain:4), traversal (any tree)")
    dec.add_argument("--pair", default=d.pair, help="qwen2.5-coder (the embedded pair) | tiny (two random 8-token models, "
                     "no tokenizer: prompts are token ids like 1,2,3; for tests) | DRAFT,TARGET (local paths)")
    dec.add_argument("--tree", default=d.tree,
                     help="draft tree: chains:K,D, chain:D, binary:D, ternary:D, kary:K,D, prefix:k1,..., branching:A;B;.., "
                     "or a nested list [[[],[]],[[]]] (default: chains:2,4, two draft chains of 4 "
                     "tokens; chain:4 for --rule block; not for the ensemble rules)")
    dec.add_argument("--lam", type=float, default=d.lam, help="ensemble_weighted: r = lam q + (1 - lam) p")
    dec.add_argument("--mu", type=float, default=d.mu, help="ensemble_contrastive: r ~ p q^(-mu)")
    dec.add_argument("--gammas", default=d.gammas, help="ensemble proposal lengths, draft,target (default 1)")
    dec.add_argument("--temperature", type=float, default=d.temperature,
                     help="sampling temperature of both models (0 = argmax)")
    dec.add_argument("--top-p", type=float, default=d.top_p,
                     help="nucleus sampling for both models: keep the most likely tokens up to this mass, in (0, 1] "
                     "(unset or 1: none; not for the ensemble rules)")
    dec.add_argument("--max-new-tokens", type=int, default=d.max_new_tokens,
                     help="tokens generated per prompt (the last step's extra tokens are cut)")
    dec.add_argument("--prompt", help="the prompt (required unless --prompts)")
    dec.add_argument("--prompts", help="a file with one prompt per line (instead of --prompt)")
    dec.add_argument("--seed", type=int, default=d.seed, help="seed of every random draw (drafts and verification)")
    dec.add_argument("--record", help="write a recording (.npz) of every verification for `otm validate`")
    dec.add_argument("--record-top-m", type=_top_m, default=d.record_top_m,
                     help="most likely tokens of p and of q kept per verification (a sparse law, e.g. a --top-p "
                     "nucleus, is kept whole: exact validation), or 'full' for whole rows: exact validation "
                     "everywhere, 24 bytes per token and verification (3.6 MB at the Qwen vocabulary)")
    dec.add_argument("--device", default=d.device, help="cpu, cuda, cuda:1, ...")
    dec.add_argument("--dtype", default=d.dtype, choices=MODEL_DTYPES,
                     help="dtype the models run in (the sampling laws are float32 for the half-precision dtypes)")
    dec.add_argument("--json", action="store_true", help="print the summary as JSON (keys: docs/validate.md)")
    dec.set_defaults(command_config=DecodeConfig, run="otm_app.commands.decode:decode_command")


def _add_report(sub) -> None:
    d = ReportConfig
    rep = sub.add_parser("report", help="the main job: theorems, real-logit bounds, decoding; writes a report folder "
                         "(slow: about 26 min on 2 CPU cores with the Qwen pair; --no-models: about 1 min)",
                         formatter_class=DefaultsOnceFormatter)
    rep.add_argument("--texts", default=d.texts, help="comma-separated built-in text names or text files (default: every built-in text)")
    rep.add_argument("--k-max", metavar="K", type=int, default=d.k_max, help="largest number of drafts; k = 1..K")
    rep.add_argument("-k", "--k", action=_RefusedOption, help=argparse.SUPPRESS,
                     message="otm report takes --k-max K (every k = 1..K); -k/--k is one draft count "
                             "(`otm acceptance`), --ks a list of them (`otm sweep`)")
    rep.add_argument("--temperatures", type=_positive_floats, default=d.temperatures, help="comma-separated temperatures of the per-position tables")
    rep.add_argument("--rules", type=_rule_list(rule_specs(lossless=True)), default=d.rules, help="comma-separated rules")
    rep.add_argument("--out", default=d.out, help="output folder")
    rep.add_argument("--no-models", action="store_true", help="toy distributions only, no model and no decoding")
    rep.add_argument("--pair", default=d.pair, choices=("qwen2.5-coder", "tiny"), help="model pair (tiny: random tiny models, for tests)")
    rep.add_argument("--max-new-tokens", type=int, default=d.max_new_tokens, help="tokens per prompt in the decoding step")
    rep.add_argument("--decode-prompts", type=int, default=d.decode_prompts, help="prompts per rule in the decoding step")
    rep.add_argument("--seed", type=int, default=d.seed, help="seed of every random choice")
    rep.add_argument("--tree", default=d.tree, help="draft tree of the decoding step, as in `otm decode --tree` "
                     "(single and block decode a chain of the same depth)")
    rep.add_argument("--decode-temperature", type=float, default=d.decode_temperature, help="temperature of the decoding step")
    rep.add_argument("--no-decode", action="store_true", help="skip the speculative decoding step")
    rep.add_argument("--positions", type=int, default=d.positions,
                     help="evenly spaced positions analysed, the same for every column (0 = every position)")
    rep.add_argument("--sweep-positions", type=int, default=d.sweep_positions, help="evenly spaced positions of the optimum-vs-temperature sweep (0 = all)")
    rep.add_argument("--mc-paths", type=int, default=d.mc_paths, help="Monte Carlo draft paths per position for rrs_wor at k > 2")
    rep.add_argument("--workers", type=int, default=d.workers, help="Dask worker processes of the per-position sweep (0: one per core)")
    rep.add_argument("--keep-corpus", action="store_true", help="keep OUT/corpus, the scored texts as an `otm sweep` corpus (float32, ~1.2 MB per position)")
    rep.add_argument("--device", default=d.device, help="where the models run")
    rep.add_argument("--dtype", default=d.dtype, choices=MODEL_DTYPES, help="dtype the models run in")
    rep.add_argument("--json", action="store_true", help="print the summary as JSON")
    rep.add_argument("--quiet", action="store_true", help="no progress bars")
    rep.set_defaults(command_config=ReportConfig, run="otm_app.commands.report:run_report_command")


def _add_sweep(sub) -> None:
    d = SweepConfig

    def listed(values) -> str:  # a default as the option is written, not as a Python tuple
        return ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values)

    sw = sub.add_parser("sweep", help="every position of a corpus, every optimum and rule, on Dask; Parquet out",
                        formatter_class=DefaultsOnceFormatter)
    sw.add_argument("corpus", help="a corpus folder (written by `otm corpus`, see otm.corpus)")
    sw.add_argument("--out", default=d.out, help="output folder: parts/*.parquet, summary.json, figures; rerun to resume")
    sw.add_argument("--ks", type=_positive_ints, default=d.ks, help=f"draft counts, e.g. 1-8 or 2,4,8 (default: {listed(d.ks)})")
    sw.add_argument("--temperatures", type=_positive_floats, default=d.temperatures,
                    help=f"comma-separated temperatures (default: {listed(d.temperatures)})")
    sw.add_argument("--top-ps", dest="top_ps", type=_positive_floats, default=d.top_ps,
                    help=f"comma-separated top-p values, 1 = none (default: {listed(d.top_ps)})")
    sw.add_argument("--computations", type=_computations, default=d.computations,
                    help="comma-separated: optimum_iid, optimum_without_replacement, optimum_hub, optimum_greedy, rule names "
                         f"(default: {listed(d.computations)})")
    sw.add_argument("--workers", type=int, default=d.workers, help="local worker processes (0: one per core)")
    sw.add_argument("--scheduler", default=d.scheduler, help="address of a running Dask scheduler (tcp://host:8786) instead of a local cluster")
    sw.add_argument("--connect-timeout", type=float, default=d.connect_timeout,
                    help="seconds the --scheduler has to answer before the sweep gives up")
    sw.add_argument("--retries", type=int, default=d.retries, help="resubmissions of a failed task")
    sw.add_argument("--positions-per-task", type=int, default=d.positions_per_task, help="positions per Dask task (and per Parquet file)")
    sw.add_argument("--mc-paths", type=int, default=d.mc_paths, help="Monte Carlo draft paths for rrs_wor at k > 2")
    sw.add_argument("--seed", type=int, default=d.seed, help="seed of the Monte Carlo columns")
    sw.add_argument("--time-budget", type=float, default=d.time_budget, help="seconds an exact law may take per cell; slower ones are skipped")
    sw.add_argument("--no-figures", dest="figures", action="store_false", help="do not draw the figures (drawn by default)")
    sw.add_argument("--json", action="store_true", help="print the summary as JSON")
    sw.add_argument("--quiet", action="store_true", help="no progress output")
    sw.set_defaults(command_config=SweepConfig, run="otm_app.commands.sweep:sweep_command")


def _add_corpus(sub) -> None:
    d = CorpusConfig
    co = sub.add_parser("corpus", help="teacher-forced logits of texts under a model pair, as a corpus for `otm sweep`",
                        formatter_class=DefaultsOnceFormatter)
    co.add_argument("--pair", default=d.pair, help="qwen2.5-coder | tiny | DRAFT,TARGET (local Hugging Face model folders sharing a tokenizer)")
    co.add_argument("--texts", default=d.texts, help="comma-separated built-in text names or text files (default: every built-in text)")
    co.add_argument("--out", default=d.out, help="corpus folder to write")
    co.add_argument("--shard-size", type=int, default=d.shard_size, help="positions per shard")
    co.add_argument("--dtype", default=d.dtype, choices=MODEL_DTYPES, help="dtype the models run in")
    co.add_argument("--logits-dtype", default=d.logits_dtype, choices=CORPUS_DTYPES, help="how the logits are stored")
    co.add_argument("--model-dtype", action=_RefusedOption, help=argparse.SUPPRESS,
                    message="--model-dtype is now --dtype (the dtype the models run in, as in otm decode and otm report); "
                            "--logits-dtype is how the logits are stored")
    co.add_argument("--device", default=d.device, help="where the models run")
    co.add_argument("--quiet", action="store_true", help="no progress bar")
    co.set_defaults(command_config=CorpusConfig, run="otm_app.commands.sweep:corpus_command")


def _add_validate(sub) -> None:
    val = sub.add_parser("validate", help="per-node gap between a recording's rule and the OTM optimum, with a verdict",
                         description="Per tree node of a recording: the rule's exact acceptance, the OTM optimum for its "
                         "draft law and the recorded acceptance (docs/validate.md). Loads no model: its memory is the "
                         "recording's (small at the default top-64; 3.6 MB per verification for a whole-row recording "
                         "of the Qwen pair).",
                         epilog="exit status: 0 PASS (every rule checked on exactly computed nodes, nothing failed); "
                         "1 FAIL (a rule beats its own law's optimum, or the recorded acceptance differs from the exact "
                         "rates); 2 an error (unreadable or inconsistent recording); 3 NOT CHECKED (nothing failed, but "
                         "some rule had no node with exact values, e.g. a top-m recording without --top-p)",
                         formatter_class=DefaultsOnceFormatter)
    val.add_argument("recording", help="a .npz recording written by `otm decode --record FILE`")
    val.add_argument("--json", action="store_true", help="print the summary as JSON")
    val.add_argument("--out", default=None, help="folder for validation.json and the figures")
    val.set_defaults(command_config=ValidateConfig, run="otm_app.commands.validate:validate_command")


def build_parser() -> argparse.ArgumentParser:
    """The ``otm`` parser; every default comes from :mod:`otm_app.configs`."""
    parser = OneLineParser(prog="otm", description="Exact analysis of multi-draft speculative decoding "
                           "(optimal transport with membership cost).")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    for add in (_add_acceptance, _add_theorems, _add_reproduce, _add_decode, _add_report, _add_validate, _add_sweep, _add_corpus):
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``otm``; returns the exit status: 0 ok, 1 a check failed, 2 a usage or input error,
    3 ``otm validate`` checked nothing exactly (NOT CHECKED)."""
    import importlib

    args = build_parser().parse_args(argv)
    config = args.command_config.from_mapping(args)
    module_name, function = args.run.split(":")
    try:
        result = getattr(importlib.import_module(module_name), function)(config)
        return result if isinstance(result, int) else 0
    except OTMError as exc:
        print(f"otm {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ImportError as exc:  # an optional extra is missing; the message names it
        print(f"otm {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"otm {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug: still one line, the traceback on request
        if os.environ.get(TRACEBACK_VARIABLE):
            raise
        print(f"otm {args.command}: unexpected {type(exc).__name__}: {exc} "
              f"(please report it; set {TRACEBACK_VARIABLE}=1 for the traceback)", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["EXIT_USAGE", "build_parser", "main"]
