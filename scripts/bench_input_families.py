"""Per-row cost of every batched verifier on special input families, against typical rows.

    .venv/bin/python scripts/bench_input_families.py [--rows 20000] [--vocab 6] [--ks 2,3,4]
        [--repeats 5] [--rules optimal,rrs] [--threads 1] [--quick] [--out docs/benchmarks.md]

For every rule with a verifier (:data:`decoding.verifiers.VERIFIERS`), every ``k`` it takes
among ``--ks`` (``single`` at ``k = 1``, ``spechub`` and ``optimal_pair_wor`` at ``k = 2``) and
every family of :data:`FAMILIES`: ``rows`` seeded pairs ``(p, q)`` in float64 at ``V = vocab``,
drafts drawn once with the rule's ``sample_drafts``, then ``verify`` on all rows in one
batched call on the CPU, timed ``repeats`` times with the same generator seed. The families
of one rule and ``k`` are timed round-robin (repetition by repetition), so a change of load on
this shared machine falls on all of them alike; the table reports the median per row and its
ratio to the median of the ``typical`` family of the same rule and ``k`` (the quantity to
read: absolute times move with the load). ``--out`` replaces the section of the file headed
:data:`HEADING` (up to the next ``## `` heading), or appends it.

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
#: Target of the issue this script was written for: no family above this multiple of typical.
RATIO_TARGET = 2.0


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
    "p_eq_q": lambda n, v, g: (lambda p: (p, p.clone()))(_dirichlet(n, v, g)),
    "disjoint": _disjoint,
    "masked": lambda n, v, g: (_masked(n, v, g), _masked(n, v, g)),
}


def _mixed(rows: int, vocab: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    which = torch.randint(len(PURE_FAMILIES), (rows,), generator=generator)
    p, q = torch.empty(rows, vocab, dtype=torch.float64), torch.empty(rows, vocab, dtype=torch.float64)
    for f, make in enumerate(PURE_FAMILIES.values()):
        p_f, q_f = make(rows, vocab, generator)
        p[which == f], q[which == f] = p_f[which == f], q_f[which == f]
    return p, q


FAMILIES = {**PURE_FAMILIES, "mixed": _mixed}


def rule_ks(name: str, ks: list[int]) -> list[int]:
    """The ``ks`` rule ``name`` is defined for; ``[1]`` for the single-draft rule."""
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


def time_rule(name: str, k: int, families: list[str], rows: int, vocab: int, repeats: int, seed: int) -> dict[str, float]:
    """Median seconds per row of ``verify`` per family, the families timed round-robin."""
    verify = VERIFIERS[name].verify
    inputs = {f: family_inputs(name, f, rows, vocab, k, seed) for f in families}
    for f in families:  # one untimed call each: compiled code loaded, memory allocated
        verify(*inputs[f], torch.Generator().manual_seed(seed))
    times: dict[str, list[float]] = {f: [] for f in families}
    for _ in range(repeats):
        for f in families:
            generator = torch.Generator().manual_seed(seed)
            start = time.perf_counter()
            verify(*inputs[f], generator)
            times[f].append((time.perf_counter() - start) / rows)
    return {f: statistics.median(t) for f, t in times.items()}


def table(results: dict[tuple[str, int], dict[str, float]], families: list[str]) -> list[str]:
    """Markdown: per rule and ``k``, the typical cost per row (us) and every family's ratio to it."""
    lines = ["| rule | k | typical (us/row) | " + " | ".join(f for f in families if f != TYPICAL) + " | worst |",
             "|---|---|---" + "|---" * len(families) + "|"]
    for (name, k), per_family in results.items():
        base = per_family[TYPICAL]
        ratios = [per_family[f] / base for f in families if f != TYPICAL]
        lines.append(f"| {name} | {k} | {1e6 * base:.2f} | " + " | ".join(f"{r:.2f}" for r in ratios)
                     + f" | {max(ratios):.2f} |")
    return lines


def replace_section(text: str, section: str) -> str:
    """``text`` with its :data:`HEADING` section (up to the next ``## `` heading) replaced by
    ``section``, or ``section`` appended when it has none."""
    if HEADING not in text:
        return text.rstrip("\n") + "\n\n" + section
    start = text.index(HEADING)
    following = text.find("\n## ", start + len(HEADING))
    rest = "" if following < 0 else text[following + 1:]
    return text[:start] + section + ("\n" + rest if rest else "")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--vocab", type=int, default=6)
    parser.add_argument("--ks", default="2,3,4", help="comma-separated numbers of drafts")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per family (median)")
    parser.add_argument("--rules", default=",".join(VERIFIERS), help="comma-separated rules with a verifier")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads for the timings")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="200 rows, k = 2, 1 repeat (a smoke test)")
    parser.add_argument("--out", help="write the section into this markdown file")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.ks, args.repeats = 200, "2", 1
    ks = [int(k) for k in args.ks.split(",")]
    rules = args.rules.split(",")
    unknown = [r for r in rules if r not in VERIFIERS]
    if unknown:
        parser.error(f"no verifier for {', '.join(unknown)}; choose among {', '.join(VERIFIERS)}")
    if args.vocab < 2 or args.rows < 1 or args.repeats < 1:
        parser.error("--vocab must be at least 2, --rows and --repeats at least 1")
    torch.set_num_threads(args.threads)
    families = list(FAMILIES)
    started, load_before = time.perf_counter(), os.getloadavg()
    results = {}
    for name in rules:
        for k in rule_ks(name, ks):
            if k > args.vocab and VERIFIERS[name].draft_scheme == "without_replacement":
                continue
            results[(name, k)] = time_rule(name, k, families, args.rows, args.vocab, args.repeats, args.seed)
            print(table({(name, k): results[(name, k)]}, families)[-1], flush=True)
    load_after = os.getloadavg()
    command = "python " + " ".join(["scripts/bench_input_families.py"] + (sys.argv[1:] if argv is None else argv))
    section = "\n".join([
        HEADING,
        "",
        f"Command: `{command}` ({datetime.date.today().isoformat()}; {platform.platform()}, {os.cpu_count()} CPUs, "
        f"{args.threads} torch thread(s); 1-minute load average {load_before[0]:.1f} before, {load_after[0]:.1f} after; "
        f"{time.perf_counter() - started:.0f} s).",
        "",
        f"`verify` on {args.rows:,} rows per call at V = {args.vocab}, float64, CPU, median of {args.repeats} calls; "
        f"per rule and k the cost per row of typical rows (Dirichlet p, q) and each family's cost as a multiple of it "
        f"(families in `scripts/bench_input_families.py`; timed side by side in one run). Target: at most "
        f"{RATIO_TARGET:g}.",
        "",
        *table(results, families),
        "",
    ])
    print(section)
    if args.out:
        path = Path(args.out)
        path.write_text(replace_section(path.read_text() if path.exists() else "", section))
    return {"results": {f"{name} k={k}": v for (name, k), v in results.items()}, "section": section}


if __name__ == "__main__":
    main()
