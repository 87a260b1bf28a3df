"""Per-row cost of every batched verifier on special input families, against typical rows.

    .venv/bin/python scripts/bench_input_families.py [--rows 500000] [--seconds 0.1] [--vocab 6] [--ks 2,3,4]
        [--repeats 5] [--rules optimal,rrs] [--threads 1] [--quick] [--out docs/benchmarks.md] [--json FILE]

For every rule with a verifier (:data:`decoding.verifiers.VERIFIERS`), every ``k`` it takes
among ``--ks`` (``single`` at ``k = 1``, ``spechub`` and ``optimal_pair_wor`` at ``k = 2``) and
every family of :data:`FAMILIES`: seeded pairs ``(p, q)`` in float64 at ``V = vocab``, drafts
drawn with the rule's ``sample_drafts``, then ``verify`` on all rows in one batched call on
the CPU (``--threads`` torch threads), timed ``repeats`` times on fresh rows each time (no
verifier's cache of rows it has seen answers for them). Rows per call: as many as take about
``--seconds`` when typical (:func:`batch_rows`), at most ``--rows``, the same for every family
of a rule and ``k``. Those families are timed round-robin (repetition by repetition), so a
change of load on this shared machine falls on all of them alike; the table reports the
median cost per row of the typical family and every other family's as a multiple of it (the
figures to read: absolute times move with the load). ``--out`` replaces the section of the
file headed :func:`heading` (up to the next ``## `` heading), or appends it: one section per
vocabulary.

Families (each row normalised; ``V >= 2``):

- ``typical``: ``p``, ``q`` independent Dirichlet(1);
- ``ties``: ``p``, ``q`` with entries from ``{1, 2}`` (many equal ratios and equal masses);
- ``onehot_p`` / ``onehot_q``: one of them a point mass (a temperature near 0), the other Dirichlet;
- ``p_eq_q``: ``p = q`` Dirichlet;
- ``disjoint``: ``p`` on a random half of the tokens, ``q`` on the rest;
- ``masked``: Dirichlet with each entry zeroed with probability 1/2 (at least one kept);
- ``mixed``: each row from one of the families above, chosen at random.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

from decoding.verifiers import VERIFIERS
from otm.rules.registry import rule_spec

#: The heading of the section this script owns in ``--out``.
HEADING = "## Verifier cost by input family"
#: The family every other is compared with.
TYPICAL = "typical"
#: The cost of no family should exceed this multiple of the typical family's.
RATIO_TARGET = 2.0
#: Rules that verify the drafts one after the other until one is accepted.
REJECTION_RULES = ("rrs", "rrs_wor", "specinfer")
#: Rows of the call that sizes the batches (:func:`batch_rows`), and the fewest per call.
PILOT_ROWS = 100


def _dirichlet(rows: int, vocab: int, generator: torch.Generator) -> torch.Tensor:
    weights = -torch.log1p(-torch.rand(rows, vocab, generator=generator, dtype=torch.float64))
    return weights / weights.sum(dim=1, keepdim=True)


def _onehot(rows: int, vocab: int, generator: torch.Generator) -> torch.Tensor:
    hot = torch.randint(vocab, (rows, 1), generator=generator)
    return torch.zeros(rows, vocab, dtype=torch.float64).scatter_(1, hot, 1.0)


def _masked(rows: int, vocab: int, generator: torch.Generator) -> torch.Tensor:
    weights = _dirichlet(rows, vocab, generator)
    keep = torch.rand(rows, vocab, generator=generator) < 0.5
    keep[torch.arange(rows), torch.randint(vocab, (rows,), generator=generator)] = True
    weights = weights * keep
    return weights / weights.sum(dim=1, keepdim=True)


def _ties(rows: int, vocab: int, generator: torch.Generator) -> torch.Tensor:
    weights = torch.randint(1, 3, (rows, vocab), generator=generator).double()
    return weights / weights.sum(dim=1, keepdim=True)


def _twice(p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return p, p.clone()


def _disjoint(rows: int, vocab: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    half = torch.rand(rows, vocab, generator=generator).argsort(dim=1) < vocab // 2  # vocab // 2 tokens per row
    weights = _dirichlet(rows, vocab, generator)
    p, q = weights * half, weights * ~half
    return p / p.sum(dim=1, keepdim=True), q / q.sum(dim=1, keepdim=True)


#: Family name -> ``(rows, vocab, generator) -> (p, q)``, both ``[rows, vocab]`` float64;
#: :data:`FAMILIES` adds ``mixed``, rows of these.
PURE_FAMILIES = {
    "typical": lambda n, v, g: (_dirichlet(n, v, g), _dirichlet(n, v, g)),
    "ties": lambda n, v, g: (_ties(n, v, g), _ties(n, v, g)),
    "onehot_p": lambda n, v, g: (_onehot(n, v, g), _dirichlet(n, v, g)),
    "onehot_q": lambda n, v, g: (_dirichlet(n, v, g), _onehot(n, v, g)),
    "p_eq_q": lambda n, v, g: _twice(_dirichlet(n, v, g)),
    "disjoint": _disjoint,
    "masked": lambda n, v, g: (_masked(n, v, g), _masked(n, v, g)),
}


def _mixed(rows: int, vocab: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    which = torch.randint(len(PURE_FAMILIES), (rows,), generator=generator)
    p, q = torch.empty(rows, vocab, dtype=torch.float64), torch.empty(rows, vocab, dtype=torch.float64)
    for f, make in enumerate(PURE_FAMILIES.values()):
        members = (which == f).nonzero().squeeze(1)
        p[members], q[members] = make(members.numel(), vocab, generator)
    return p, q


FAMILIES = {**PURE_FAMILIES, "mixed": _mixed}


def rule_ks(name: str, ks: list[int]) -> list[int]:
    """The ``ks`` rule ``name`` is defined for, or its only ``k`` when it takes one and that
    is not among them (``single``: 1)."""
    spec = rule_spec(name)
    allowed = [k for k in ks if spec.allows(k)]
    return allowed or ([spec.ks[0]] if spec.ks[0] == spec.ks[1] else [])


def family_inputs(name: str, family: str, rows: int, vocab: int, k: int, seed: int):
    """``(p, q [rows, k, vocab], drafts)`` of ``family`` for rule ``name`` (seeded)."""
    generator = torch.Generator().manual_seed(seed)
    p, q = FAMILIES[family](rows, vocab, generator)
    verifier = VERIFIERS[name]
    drafts = verifier.sample_drafts(q, k, generator)
    return p, q.unsqueeze(1).expand(rows, k, vocab), drafts


def call_seconds(name: str, family: str, rows: int, vocab: int, k: int, seed: int) -> float:
    """Seconds of one ``verify`` call of rule ``name`` on fresh rows of ``family`` (seeded by
    ``seed``; fresh rows, so that no verifier's cache of rows it has seen answers for them)."""
    inputs = family_inputs(name, family, rows, vocab, k, seed)
    generator = torch.Generator().manual_seed(seed)
    start = time.perf_counter()
    VERIFIERS[name].verify(*inputs, generator)
    return time.perf_counter() - start


def batch_rows(name: str, k: int, vocab: int, most: int, seconds: float, seed: int) -> int:
    """Rows per call for rule ``name``: enough typical rows for a call of about ``seconds``
    (from :data:`PILOT_ROWS` on, scaled by the fastest of two calls until a call takes half
    of it; the fixed cost of a call shrinks in the per-row figure as the rows grow), at most
    ``most``."""
    rows = min(most, PILOT_ROWS)
    call_seconds(name, TYPICAL, rows, vocab, k, seed)  # compiled code loaded
    while rows < most:
        took = min(call_seconds(name, TYPICAL, rows, vocab, k, seed + s) for s in (1, 2))
        if took >= seconds / 2:
            break
        rows = min(most, int(rows * seconds / max(took, seconds / 100)))
    return rows


def time_rule(name: str, k: int, families: list[str], rows: int, vocab: int, repeats: int, seed: int) -> dict[str, float]:
    """Median seconds per row of ``verify`` on ``rows`` rows per family (fresh rows each call),
    the families timed round-robin after one untimed call each."""
    for f in families:  # compiled code loaded, memory allocated
        call_seconds(name, f, rows, vocab, k, seed)
    times: dict[str, list[float]] = {f: [] for f in families}
    for repeat in range(1, repeats + 1):
        for f in families:
            times[f].append(call_seconds(name, f, rows, vocab, k, seed + repeat) / rows)
    return {f: statistics.median(t) for f, t in times.items()}


def table(results: dict[tuple[str, int], dict], families: list[str]) -> list[str]:
    """Markdown: per rule and ``k`` the rows per call, the typical cost per row (us) and every
    other family's cost as a multiple of it; the largest multiple last."""
    others = [f for f in families if f != TYPICAL]
    lines = ["| rule | k | rows | typical (us/row) | " + " | ".join(others) + " | worst |",
             "|---|---|---|---" + "|---" * len(families) + "|"]
    for (name, k), entry in results.items():
        per_row = entry["seconds_per_row"]
        ratios = [per_row[f] / per_row[TYPICAL] for f in others]
        lines.append(f"| {name} | {k} | {entry['rows']:,} | {1e6 * per_row[TYPICAL]:.2f} | "
                     + " | ".join(f"{r:.2f}" for r in ratios) + f" | {max(ratios, default=1.0):.2f} |")
    return lines


def verdict(results: dict[tuple[str, int], dict]) -> str:
    """One line: the families above :data:`RATIO_TARGET` times typical, or that there are none."""
    above = [(name, f"{name} k = {k} {f} ({per_row[f] / per_row[TYPICAL]:.2f})")
             for (name, k), entry in results.items() for per_row in [entry["seconds_per_row"]]
             for f in per_row if per_row[f] > RATIO_TARGET * per_row[TYPICAL]]
    if not above:
        return f"Every family within {RATIO_TARGET:g} times typical."
    line = f"Above {RATIO_TARGET:g} times typical: {'; '.join(text for _, text in above)}."
    if any(name in REJECTION_RULES for name, _ in above):
        line += (f" The recursive rejection rules ({', '.join(REJECTION_RULES)}) test the drafts one after the other "
                 "until one is accepted: rows that reject every draft (disjoint supports) take all k steps, typical "
                 "rows one or two.")
    return line


def heading(vocab: int) -> str:
    """The section's heading: :data:`HEADING` at the default vocabulary (6), with the vocabulary
    at any other."""
    return HEADING if vocab == 6 else f"{HEADING} at V = {vocab:,}"


def replace_section(text: str, section: str, title: str = HEADING) -> str:
    """``text`` with its section headed by the line ``title`` (up to the next ``## `` heading)
    replaced by ``section``, or ``section`` appended when it has none."""
    line = f"\n{title}\n"
    if line not in "\n" + text:
        return text.rstrip("\n") + "\n\n" + section if text.strip() else section
    start = ("\n" + text).index(line)
    following = text.find("\n## ", start + len(title))
    rest = "" if following < 0 else text[following + 1:]
    return text[:start] + section + ("\n" + rest if rest else "")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=500_000, help="most rows per call")
    parser.add_argument("--seconds", type=float, default=0.1, help="about this long per call of typical rows")
    parser.add_argument("--vocab", type=int, default=6)
    parser.add_argument("--ks", default="2,3,4", help="comma-separated numbers of drafts")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per family (median)")
    parser.add_argument("--rules", default=",".join(VERIFIERS), help="comma-separated rules with a verifier")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads for the timings")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="k = 2, at most 200 rows, 1 repeat (a smoke test)")
    parser.add_argument("--out", help="write the section into this markdown file")
    parser.add_argument("--json", help="write the per-row costs to this JSON file")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.ks, args.repeats = min(args.rows, 200), "2", 1
    ks = [int(k) for k in args.ks.split(",")]
    rules = args.rules.split(",")
    unknown = [r for r in rules if r not in VERIFIERS]
    if unknown:
        parser.error(f"no verifier for {', '.join(unknown)}; choose among {', '.join(VERIFIERS)}")
    if args.vocab < 2 or args.rows < 1 or args.repeats < 1 or not args.seconds > 0:
        parser.error("--vocab must be at least 2, --rows and --repeats at least 1, --seconds positive")
    torch.set_num_threads(args.threads)
    families = list(FAMILIES)
    started, load_before = time.perf_counter(), os.getloadavg()
    results = {}
    for name in rules:
        for k in rule_ks(name, ks):
            if k > args.vocab and VERIFIERS[name].draft_scheme == "without_replacement":
                continue
            rows = batch_rows(name, k, args.vocab, args.rows, args.seconds, args.seed)
            results[(name, k)] = {"rows": rows, "seconds_per_row": time_rule(name, k, families, rows, args.vocab,
                                                                             args.repeats, args.seed)}
            print(table({(name, k): results[(name, k)]}, families)[-1], flush=True)
    load_after = os.getloadavg()
    command = "python " + " ".join(["scripts/bench_input_families.py"] + (sys.argv[1:] if argv is None else argv))
    section = "\n".join([
        heading(args.vocab),
        "",
        f"Command: `{command}` ({datetime.date.today().isoformat()}; {platform.platform()}, {os.cpu_count()} CPUs, "
        f"{args.threads} torch thread(s); 1-minute load average {load_before[0]:.1f} before, {load_after[0]:.1f} after; "
        f"{time.perf_counter() - started:.0f} s).",
        "",
        f"`verify` on the rows of each family at V = {args.vocab} (float64, CPU; as many rows per call as take about "
        f"{args.seconds:g} s when typical, at most {args.rows:,}), median of {args.repeats} calls. Per rule and k: the "
        f"cost per row of typical rows (Dirichlet p, q) and each other family's as a multiple of it, all timed side by "
        f"side in one run (the families: `scripts/bench_input_families.py`). The multiples are the figures to read: "
        f"this machine is shared, and its load moves the absolute costs. Target: no multiple above {RATIO_TARGET:g}.",
        "",
        *table(results, families),
        "",
        verdict(results),
        "",
    ])
    print(section)
    if args.out:
        path = Path(args.out)
        path.write_text(replace_section(path.read_text() if path.exists() else "", section, heading(args.vocab)))
    data = {"results": [{"rule": name, "k": k, **entry} for (name, k), entry in results.items()], "section": section}
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=1))
    return data


if __name__ == "__main__":
    main()
