"""Typed configurations of the ``otm`` subcommands.

One frozen dataclass per subcommand; its field defaults are the command line's defaults
(:mod:`otm_app.cli` reads them from here) and the commands take nothing else, so the same
run can be started from Python without argparse::

    from otm_app.configs import ReportConfig
    from otm_app.report.run import run_report
    run_report(ReportConfig(no_models=True, out="toy-report"))
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from otm.rules.registry import rule_specs

#: Defaults of ``otm report`` used in several places (the rules: the registry's ``in_report``).
DEFAULT_REPORT_TEMPERATURES = (0.6, 1.0)
DEFAULT_REPORT_RULES = tuple(spec.name for spec in rule_specs() if spec.in_report)


class _FromMapping:
    """``Config.from_mapping(values)``: the fields present in ``values`` (a dict or an
    ``argparse.Namespace``), defaults for the others, unknown keys ignored."""

    @classmethod
    def from_mapping(cls, values):
        values = vars(values) if not isinstance(values, dict) else values
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in values.items() if key in names})

    def non_defaults(self) -> dict:
        """The fields whose value differs from the default."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) != f.default}


@dataclass(frozen=True)
class AcceptanceConfig(_FromMapping):
    """``otm acceptance``: the optimum and every rule for one ``(p, q, k)``."""

    target: str | None = None
    draft: str | None = None
    example: str | None = None
    k: int = 2
    draft_scheme: str = "iid"
    method: str = "auto"
    rules: tuple | None = None
    time_budget: float = 2.0
    temperature: float | None = None
    logits: bool = False
    json: bool = False


@dataclass(frozen=True)
class TheoremsConfig(_FromMapping):
    """``otm theorems``: the theorem suite."""

    paper: str | None = None
    instances: int | None = None
    seed: int = 0
    json: bool = False
    allow_failures: bool = False


@dataclass(frozen=True)
class ReproduceConfig(_FromMapping):
    """``otm reproduce TABLE``: a paper table next to the paper's numbers."""

    table: str = "spechub-table4"
    pairs: int = 100
    seed: int = 0
    reading: str = "stated"
    json: bool = False


@dataclass(frozen=True)
class DecodeConfig(_FromMapping):
    """``otm decode``: speculative decoding of prompts with a pair, a rule and a tree."""

    rule: str = "rrs"
    pair: str = "qwen2.5-coder"
    tree: str | None = None
    lam: float | None = None
    mu: float | None = None
    gammas: str | None = None
    temperature: float = 1.0
    top_p: float | None = None
    max_new_tokens: int = 32
    prompt: str | None = None
    prompts: str | None = None
    seed: int = 0
    record: str | None = None
    record_top_m: int | None = 64  # decoding.runtime.recording.DEFAULT_TOP_M; None: whole rows
    device: str = "cpu"
    dtype: str = "bfloat16"  # the models' dtype (the checkpoints' own); sampling laws are float32
    json: bool = False


@dataclass(frozen=True)
class ValidateConfig(_FromMapping):
    """``otm validate RECORDING``: per-node gaps of a recording to the optimum."""

    recording: str = ""
    json: bool = False
    out: str | None = None
    progress: bool = True


#: What ``otm sweep`` computes by default: both optima and every lossless rule with a
#: closed form (specinfer with one q is rrs, so it is left out).
DEFAULT_SWEEP_COMPUTATIONS = ("optimum_iid", "optimum_without_replacement", "single", "rrs", "rrs_wor", "kseq",
                              "spechub", "greedy", "optimal")

#: Seconds a ``--scheduler`` has to complete Dask's handshake (:func:`otm_app.sweep.engine.connect`).
DEFAULT_CONNECT_TIMEOUT = 10.0


@dataclass(frozen=True)
class SweepConfig(_FromMapping):
    """``otm sweep CORPUS``: every position of a corpus, on Dask (:mod:`otm_app.sweep`)."""

    corpus: str = ""
    out: str = "otm-sweep"
    ks: tuple = (1, 2, 3, 4, 5, 6, 7, 8)
    temperatures: tuple = (1.0,)
    top_ps: tuple = (1.0,)
    computations: tuple = DEFAULT_SWEEP_COMPUTATIONS
    workers: int = 0
    scheduler: str | None = None
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    retries: int = 2
    positions_per_task: int = 8
    mc_paths: int = 256
    seed: int = 0
    time_budget: float = 2.0
    figures: bool = True
    json: bool = False
    quiet: bool = False


@dataclass(frozen=True)
class CorpusConfig(_FromMapping):
    """``otm corpus``: teacher-forced logits of texts under a model pair, as a corpus."""

    pair: str = "qwen2.5-coder"
    texts: str | None = None
    out: str = "otm-corpus"
    shard_size: int = 64
    dtype: str = "bfloat16"  # the dtype the models run in, as for decode and report
    logits_dtype: str = "float16"  # how the logits are stored
    device: str = "cpu"
    quiet: bool = False


@dataclass(frozen=True)
class ReportConfig(_FromMapping):
    """``otm report``: the main job (see :mod:`otm_app.report.run`)."""

    texts: str | None = None
    k_max: int = 8
    temperatures: tuple = DEFAULT_REPORT_TEMPERATURES
    rules: tuple = DEFAULT_REPORT_RULES
    out: str = "otm-report"
    no_models: bool = False
    pair: str = "qwen2.5-coder"
    max_new_tokens: int = 24
    decode_prompts: int = 2
    seed: int = 0
    tree: str = "binary:3"
    decode_temperature: float = 1.0
    no_decode: bool = False
    positions: int = 0
    sweep_positions: int = 128
    mc_paths: int = 256
    workers: int = 0
    keep_corpus: bool = False
    device: str = "cpu"
    dtype: str = "bfloat16"  # the dtype the models run in
    json: bool = False
    quiet: bool = False


__all__ = [
    "AcceptanceConfig",
    "CorpusConfig",
    "SweepConfig",
    "DecodeConfig",
    "ReportConfig",
    "ReproduceConfig",
    "TheoremsConfig",
    "ValidateConfig",
]
