"""The docs point at code and files that exist: every dotted name under one of the
packages in docs/*.md and README.md resolves, every repository path they name
(``otm/rules/rrs.py``, ``scripts/bench_optimum.py``, ``docs/theory.md``, ...) and every
relative link target exists, every anchor that a doc link or a source file cites
(``docs/optimal-verifier.md#the-problem``) is a heading of that doc, and the rule table of
docs/theory.md is the one scripts/gen_rule_table.py generates from the registry. The examples of docs/howto-validate-verifier.md print the output
the page shows under each."""
from __future__ import annotations

import importlib
import itertools
import re
from pathlib import Path

import pytest

from otm.rules.registry import RULE_SPECS
from scripts import gen_rule_table

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
PACKAGES = ("otm", "solvers", "decoding", "proofs", "otm_app")
DOTTED = re.compile(r"`((?:%s)(?:\.[A-Za-z_][A-Za-z0-9_]*)+)" % "|".join(PACKAGES))
#: The top-level folders of the repository whose paths the docs name.
FOLDERS = PACKAGES + ("scripts", "docs", "notebooks", "tests", "research")
#: A path from the repository root, anywhere in the text: not preceded by a path or word
#: character (so ``https://host/docs/x`` and ``decoding/docs/x`` are not taken), ending
#: on a word character, ``*`` (a glob), ``/`` (a folder) or ``}`` (``x_{a,b}.md``, both
#: ``x_a.md`` and ``x_b.md``).
REPO_PATH = re.compile(r"(?<![\w./~-])((?:%s)/(?:(?:[\w./*-]|\{[\w.,-]+\})*[\w*/}])?)" % "|".join(FOLDERS))
BRACES = re.compile(r"\{([\w.,-]+)\}")
#: The target of a markdown link or image to a file (``[text](theory.md#anchor)``),
#: relative to the document; not ``M_[f,t](j)`` in a formula.
LINK = re.compile(r"\]\(([\w./-]+\.\w+)(?:#[\w-]*)?\)")
#: A link to a heading of a doc: ``[x](optimal-verifier.md#the-problem)`` inside docs/, or
#: ``docs/optimal-verifier.md#the-problem`` from anywhere in the repository.
ANCHOR_LINK = re.compile(r"(?:\]\(|(?<![\w/])docs/)([\w-]+\.md)#([\w-]+)")
HEADING = re.compile(r"^#+ (.+?)\s*$", re.M)
#: The files whose anchors into docs/ are checked: the docs and the code (not this file,
#: whose checks hold stale anchors on purpose).
ANCHOR_SOURCES = DOCS + sorted(
    path for folder in PACKAGES + ("scripts", "research", "tests") for path in (ROOT / folder).rglob("*.py")
    if path != Path(__file__).resolve()
)


def missing_paths(text: str, base: Path) -> list[str]:
    """The repository paths named in ``text`` and the relative link targets (from the
    folder ``base``) that do not exist; a path with ``*`` must match at least one file."""
    missing = []
    for named in sorted(set(REPO_PATH.findall(text))):
        pieces = BRACES.split(named)  # text, choices, text, ...
        for choice in itertools.product(*(piece.split(",") if i % 2 else [piece] for i, piece in enumerate(pieces))):
            path = "".join(choice)
            if not (any(ROOT.glob(path)) if "*" in path else (ROOT / path).exists()):
                missing.append(path)
    missing += [target for target in sorted(set(LINK.findall(text))) if not (base / target).exists()]
    return missing


def anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives the headings of ``markdown``: lower case, punctuation
    dropped, spaces to hyphens; a repeated heading gets ``-1``, ``-2``, ..."""
    seen: dict[str, int] = {}
    for heading in HEADING.findall(markdown):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        if count:
            seen[f"{slug}-{count}"] = 1
    return set(seen)


def missing_anchors(text: str) -> list[str]:
    """The ``doc.md#anchor`` links of ``text`` whose doc in docs/ has no such heading."""
    missing = []
    for name, anchor in sorted(set(ANCHOR_LINK.findall(text))):
        doc = ROOT / "docs" / name
        if doc.exists() and anchor not in anchors(doc.read_text()):
            missing.append(f"{name}#{anchor}")
    return missing


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


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_path_in_the_docs_exists(doc):
    missing = missing_paths(doc.read_text(), doc.parent)
    assert missing == [], f"{doc.name} names files that do not exist: {missing}"


@pytest.mark.parametrize("source", ANCHOR_SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_anchor_into_the_docs_exists(source):
    missing = missing_anchors(source.read_text())
    assert missing == [], f"{source.relative_to(ROOT)} links to headings that do not exist: {missing}"


def test_the_anchor_check_catches_a_stale_anchor():
    assert anchors("# The problem\n## Floats, and `x`\n## Floats, and `x`\n") == {
        "the-problem", "floats-and-x", "floats-and-x-1"}
    assert missing_anchors("[p](optimal-verifier.md#the-problem), docs/optimal-verifier.md#what-is-open") == []
    assert missing_anchors("see docs/optimal-verifier.md#section-8") == ["optimal-verifier.md#section-8"]
    assert missing_anchors("[x](theory.md#never-was)") == ["theory.md#never-was"]


def test_the_path_check_catches_a_stale_path():
    docs = ROOT / "docs"
    assert missing_paths("see `otm/rules/rrs.py`, docs/theory.md section 4 and [x](theory.md#top).", docs) == []
    assert missing_paths("tests/otm/test_*.py, the folder decoding/verifiers/ and https://x.org/docs/none.md", docs) == []
    assert missing_paths("Code: `decoding/ensemble_laws.py`.", docs) == ["decoding/ensemble_laws.py"]
    assert missing_paths("(scripts/never_was.py, section 2)", docs) == ["scripts/never_was.py"]
    assert missing_paths("tests/otm/test_never_*.py", docs) == ["tests/otm/test_never_*.py"]
    assert missing_paths("`otm/rules/{rrs,kseq}.py`", docs) == []
    assert missing_paths("`otm/rules/{rrs,never_was}.py`", docs) == ["otm/rules/never_was.py"]
    assert missing_paths("![plot](figures/never_was.png)", docs) == ["figures/never_was.png"]
    assert missing_paths("`M_[f,t](j)` and [SpecHub](https://arxiv.org/abs/2411.05289)", docs) == []


def test_the_name_check_catches_a_stale_name():
    assert resolves("otm.rules.registry.RULE_SPECS")
    assert not resolves("otm.analysis_that_never_was.thing")
    assert not resolves("otm.rules.registry.NO_SUCH_NAME")


#: A Python example of a doc and the output block shown after it (the next fenced block).
EXAMPLE_AND_OUTPUT = re.compile(r"```python\n(.*?)```.*?```\n(.*?)```", re.S)


def test_the_howto_examples_print_what_the_page_shows(capsys, monkeypatch):
    """Each example of docs/howto-validate-verifier.md, run as written on the CPU (the page
    shows CPU output; an example that picks CUDA when it is there is kept off it), prints
    exactly the output block that follows it."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    page = ROOT / "docs" / "howto-validate-verifier.md"
    examples = EXAMPLE_AND_OUTPUT.findall(page.read_text())
    assert len(examples) == 3
    for code, shown in examples:
        exec(compile(code, page.name, "exec"), {})
        assert capsys.readouterr().out == shown


def test_theory_rule_table_is_generated_from_the_registry():
    text = (ROOT / "docs" / "theory.md").read_text()
    assert gen_rule_table.with_table(text) == text, (
        f"docs/theory.md's rule table differs from otm.rules.registry: run {gen_rule_table.COMMAND}")


def test_the_rule_table_lists_every_rule_and_catches_a_stale_doc(tmp_path, monkeypatch):
    table = gen_rule_table.rule_table()
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert [line.split("`")[1] for line in rows] == list(RULE_SPECS)
    for spec, line in zip(RULE_SPECS.values(), rows):
        assert f"`otm.rules.{spec.module}.{spec.law_function}`" in line
        assert (f"`decoding.verifiers.{spec.verifier}`" if spec.verifier else "| - |") in line
    stale = tmp_path / "theory.md"
    stale.write_text("intro\n" + table.replace(rows[-1] + "\n", "") + "\nrest\n")
    monkeypatch.setattr(gen_rule_table, "DOC", stale)
    monkeypatch.setattr(gen_rule_table, "ROOT", tmp_path)
    assert gen_rule_table.main(["--check"]) == 1
    assert gen_rule_table.main([]) == 0 and gen_rule_table.main(["--check"]) == 0
    assert stale.read_text() == "intro\n" + table + "\nrest\n"
    with pytest.raises(ValueError, match="rules:begin"):
        gen_rule_table.with_table("no markers")
