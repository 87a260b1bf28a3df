"""The layers run one way: solvers <- otm <- {proofs | decoding} <- otm_app.

Three independent checks, each shown to fail on a deliberately wrong input:

1. the import-linter contracts in pyproject.toml (the import graph of every module, research/
   included: the product never imports it);
2. a fresh interpreter in which torch, transformers, matplotlib, cvxpy, dask and pyarrow
   cannot be imported imports every module of otm, solvers and proofs and computes with
   them (what a user with only the core dependencies gets);
3. no import cycles between the modules of the packages (grimp's graph, the one
   import-linter reads).
"""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import grimp
import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"

#: Packages of the optional extras: the core must work without any of them.
OPTIONAL = ("torch", "transformers", "matplotlib", "cvxpy", "dask", "distributed", "pyarrow")

#: Modules of the core that are optional by design (they import an extra on purpose).
OPTIONAL_CORE_MODULES = ("otm.plots", "solvers.cvxpy_backend")

BLOCKED_IMPORT_SCRIPT = textwrap.dedent(
    """
    import importlib, pkgutil, sys

    class Block:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {blocked!r}:
                raise ImportError(f"{{name}} is blocked: the core must not need it")

    sys.meta_path.insert(0, Block())
    skip = {skip!r}
    for package in {packages!r}:
        module = importlib.import_module(package)
        for info in pkgutil.walk_packages(module.__path__, package + "."):
            if info.name not in skip:
                importlib.import_module(info.name)
    {work}
    print("ok")
    """
)

CORE_WORK = textwrap.dedent(
    """
    import otm, proofs
    p, q = [0.1, 0.6, 0.3], [0.5, 0.3, 0.2]
    assert abs(otm.optimal_acceptance(p, q, 2) - 0.85) < 1e-12
    assert abs(float(otm.rule_acceptance("spechub", p, q, 2)) - 1.0) < 1e-12
    assert otm.solve_optimum(p, q, 2, method="full_lp").method == "full_lp"
    assert proofs.run_checks("leviathan", 2, 0)[0].status == "holds"
    """
)


def _run_blocked(packages, work="", skip=OPTIONAL_CORE_MODULES) -> subprocess.CompletedProcess:
    script = BLOCKED_IMPORT_SCRIPT.format(blocked=OPTIONAL, skip=tuple(skip), packages=tuple(packages), work=work)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300)


def test_import_linter_contracts_are_kept():
    result = subprocess.run([str(LINT_IMPORTS), "--config", str(ROOT / "pyproject.toml")], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_import_linter_catches_an_arrow_pointing_up(tmp_path):
    """The same tool on the real code with the layers listed upside down must report broken contracts."""
    config = tmp_path / "upside_down.toml"
    config.write_text(textwrap.dedent(
        """
        [tool.importlinter]
        root_packages = ["otm_app", "decoding", "proofs", "otm", "solvers"]

        [[tool.importlinter.contracts]]
        name = "upside down"
        type = "layers"
        layers = ["solvers", "otm", "decoding | proofs", "otm_app"]
        """
    ))
    result = subprocess.run([str(LINT_IMPORTS), "--config", str(config)], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode != 0
    assert "BROKEN" in result.stdout


def test_import_linter_sees_research_import_the_product(tmp_path):
    """The contract that the product never imports research is checked on a graph that holds
    research's own imports: the same tool, told that research must not import otm, reports it."""
    config = tmp_path / "research_reversed.toml"
    config.write_text(textwrap.dedent(
        """
        [tool.importlinter]
        root_packages = ["otm_app", "decoding", "proofs", "otm", "solvers", "research"]

        [[tool.importlinter.contracts]]
        name = "reversed"
        type = "forbidden"
        source_modules = ["research"]
        forbidden_modules = ["otm"]
        """
    ))
    result = subprocess.run([str(LINT_IMPORTS), "--config", str(config)], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode != 0
    assert "BROKEN" in result.stdout and "research.optimal_wor" in result.stdout


def test_core_imports_and_computes_without_the_optional_extras():
    result = _run_blocked(("solvers", "otm", "proofs"), CORE_WORK)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")


def test_the_blocked_import_check_fails_on_a_package_that_needs_torch():
    result = _run_blocked(("decoding",))
    assert result.returncode != 0
    assert "torch is blocked" in result.stderr


OPTIONAL_USES = {
    "otm.plots": "import otm.plots",
    "solvers.cvxpy_backend": "import numpy as np, solvers\nsolvers.solve(solvers.LinearProgram(c=np.ones(1), A_ub=np.ones((1, 1)), b_ub=np.ones(1)), backend='cvxpy')",
}


@pytest.mark.parametrize("module", OPTIONAL_CORE_MODULES)
def test_optional_core_modules_name_their_extra_when_it_is_missing(module):
    body = OPTIONAL_USES[module].replace("\n", "\n    ")
    work = f"try:\n    {body}\nexcept (ImportError, solvers_errors.OTMError) as exc:\n    print('missing:', exc)"
    result = _run_blocked((), "import solvers.errors as solvers_errors\n" + work)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "missing:" in result.stdout
    assert "pip install" in result.stdout
    assert "otm-toolkit[" in result.stdout


#: The packages whose module import graph must have no cycles.
ACYCLIC_PACKAGES = ("solvers", "otm", "proofs", "decoding", "otm_app")

def import_cycles(graph) -> list[frozenset]:
    """The sets of modules of ``graph`` that import each other in a circle (its strongly
    connected components of more than one module; a package counts as the module of its
    ``__init__``)."""
    edges = nx.DiGraph()
    for module in graph.modules:
        edges.add_edges_from((module, imported) for imported in graph.find_modules_directly_imported_by(module))
    return [frozenset(component) for component in nx.strongly_connected_components(edges) if len(component) > 1]


def test_the_packages_have_no_import_cycles():
    cycles = import_cycles(grimp.build_graph(*ACYCLIC_PACKAGES, cache_dir=None))
    assert [sorted(cycle) for cycle in cycles] == []


def test_the_cycle_check_catches_a_cycle():
    """The real graph with one import added back (the max flow importing the LP plumbing,
    which imports the max flow) has that cycle."""
    graph = grimp.build_graph("otm", cache_dir=None)
    assert import_cycles(graph) == []
    graph.add_import(importer="otm.formulations.max_flow", imported="otm.formulations._lp")
    assert import_cycles(graph) == [frozenset({"otm.formulations.max_flow", "otm.formulations._lp"})]
