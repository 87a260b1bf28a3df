"""Write the rule table of docs/theory.md from the rule registry (``otm.rules.registry``).

    python scripts/gen_rule_table.py           # rewrite the table between the markers
    python scripts/gen_rule_table.py --check   # exit 1 when the doc's table is not the registry's

Every cell comes from a rule's :class:`otm.rules.registry.RuleSpec` (name, title, reference,
draft scheme, allowed ``k``, exact-law module and function, verifier module, aliases), so a rule
added, renamed or moved in the registry reaches the doc by running this script;
tests/test_docs.py fails, naming this command, while the doc and the registry differ.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from otm.draft_laws import DRAFT_SCHEMES
from otm.rules.registry import ALIASES, RULE_SPECS, RuleSpec

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "theory.md"
COMMAND = "python scripts/gen_rule_table.py"
BEGIN_PREFIX = "<!-- rules:begin"
BEGIN = f"{BEGIN_PREFIX} (generated from otm.rules.registry by {COMMAND}; do not edit by hand) -->"
END = "<!-- rules:end -->"

#: How the table names each draft scheme of :data:`otm.draft_laws.DRAFT_SCHEMES`.
SCHEME_WORDS = {
    "iid": "i.i.d.",
    "without_replacement": "without replacement",
    "hub": "hub law (SpecHub)",
    "greedy": "top k-1 + one sampled",
    "independent": "independent `q_1..q_k`",
}
assert set(SCHEME_WORDS) == set(DRAFT_SCHEMES), "name every draft scheme in SCHEME_WORDS"


def drafts_allowed(spec: RuleSpec) -> str:
    """``spec.ks`` in words: ``1``, ``2``, ``>= 2``, ``2-4`` or ``any``."""
    low, high = spec.ks
    if low == high:
        return str(low)
    if high is None:
        return "any" if low <= 1 else f">= {low}"
    return f"{low}-{high}"


def row(spec: RuleSpec) -> str:
    """One table row of ``spec``."""
    name = f"`{spec.name}`" + (f" (also {', '.join(f'`{alias}`' for alias in spec.aliases)})" if spec.aliases else "")
    law = f"`otm.rules.{spec.module}.{spec.law_function}`"
    sampler = f"`decoding.verifiers.{spec.verifier}`" if spec.verifier else "-"
    cells = (name, spec.title, spec.reference, SCHEME_WORDS[spec.draft_scheme], drafts_allowed(spec), law, sampler)
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def rule_table() -> str:
    """The generated block, markers included: every rule of the registry in table order, then
    the old names still accepted."""
    lines = [BEGIN,
             "| rule | what it is | reference | draft law | k | exact law | sampler |",
             "|---|---|---|---|---|---|---|"]
    lines += [row(spec) for spec in RULE_SPECS.values()]
    if ALIASES:
        old = ", ".join(f"`{alias}` (`{name}`)" for alias, name in ALIASES.items())
        lines += ["", f"Old names accepted everywhere (`otm.rules.registry.ALIASES`): {old}."]
    return "\n".join(lines + [END])


def with_table(text: str) -> str:
    """``text`` with its block between the markers replaced by :func:`rule_table`;
    :class:`ValueError` when the markers are missing."""
    start, end = text.find(BEGIN_PREFIX), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"{DOC.relative_to(ROOT)} has no block between {BEGIN_PREFIX!r} and {END!r}")
    return text[:start] + rule_table() + text[end + len(END):]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the doc's table is stale; write nothing")
    args = parser.parse_args(argv)
    text = DOC.read_text()
    new = with_table(text)
    if args.check:
        if new != text:
            print(f"{DOC.relative_to(ROOT)}: the rule table differs from the registry; run {COMMAND}", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
