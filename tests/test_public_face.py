"""``import otm`` offers a small public face (otm/__init__.py); every name that left it is
listed in CHANGELOG.md with a replacement that exists."""
from __future__ import annotations

import importlib
import importlib.util
import re
import tomllib
import types
from pathlib import Path

import otm
from tests.test_docs import resolves

ROOT = Path(__file__).resolve().parents[1]

#: A CHANGELOG row: the removed ``otm.NAME`` and the first dotted name of its replacement.
REMOVED_ROW = re.compile(r"^\| `otm\.(\w+)` \| `([\w.]+)`", re.M)

FACE = {
    "logits_to_probs", "draft_law", "solve_optimum", "optimal_acceptance", "OTMSolution",
    "RULES", "rule_spec", "rule_specs", "rule_law", "rule_acceptance", "RuleLaw", "OTMError",
}


def test_the_namespace_holds_the_face_and_the_submodules_only():
    assert set(otm.__all__) == FACE
    public = {name for name in dir(otm) if not name.startswith("_") and not isinstance(getattr(otm, name), types.ModuleType)}
    assert public == FACE


def test_every_removed_name_is_gone_and_its_replacement_exists():
    rows = REMOVED_ROW.findall((ROOT / "CHANGELOG.md").read_text())
    assert len(rows) == 42  # 27 names of the 0.2 namespace and the 15 deprecated aliases
    for name, replacement in rows:
        assert not hasattr(otm, name), name
        assert resolves(replacement), f"CHANGELOG.md: {replacement} does not exist"
    assert importlib.util.find_spec("otm.analysis") is None
    assert resolves("otm.tables.acceptance_vs_k") and resolves("otm.families.uniform_table")


def test_the_version_is_the_one_of_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert otm.__version__ == project["version"]
    assert f"## {project['version']}" in (ROOT / "CHANGELOG.md").read_text()
