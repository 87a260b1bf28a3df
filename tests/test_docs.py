"""The docs point at code that exists: every dotted name under one of the packages in
docs/*.md and README.md resolves, and the rule table of docs/theory.md lists every rule
of the registry with its modules."""
from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from otm.rules.registry import RULE_SPECS

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
PACKAGES = ("otm", "solvers", "decoding", "proofs", "otm_app")
DOTTED = re.compile(r"`((?:%s)(?:\.[A-Za-z_][A-Za-z0-9_]*)+)" % "|".join(PACKAGES))


def resolves(dotted: str) -> bool:
    """True when ``dotted`` is a module, or an attribute chain of one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for name in parts[cut:]:
                obj = getattr(obj, name)
        except AttributeError:
            return False
        return True
    return False


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_dotted_name_in_the_docs_resolves(doc):
    names = sorted(set(DOTTED.findall(doc.read_text())))
    missing = [name for name in names if not resolves(name)]
    assert missing == [], f"{doc.name} names code that does not exist: {missing}"


def test_the_name_check_catches_a_stale_name():
    assert resolves("otm.rules.registry.RULE_SPECS")
    assert not resolves("otm.analysis_that_never_was.thing")
    assert not resolves("otm.rules.registry.NO_SUCH_NAME")


def test_theory_rule_table_lists_every_rule_with_its_modules():
    text = (ROOT / "docs" / "theory.md").read_text()
    table = text[text.index("<!-- rule table"):]
    rows = {line.split("|")[1].strip().strip("`"): line for line in table.splitlines() if line.startswith("| `")}
    assert set(rows) == set(RULE_SPECS)
    for name, spec in RULE_SPECS.items():
        assert f"`otm.rules.{spec.module}`" in rows[name]
        if spec.verifier:
            assert f"`decoding.verifiers.{spec.verifier}`" in rows[name]
