"""Execute every notebook under notebooks/ with nbclient; a notebook that fails is a failing test.

The kernel is "python3" from ipykernel; jupyter_client replaces its ``python`` command by
``sys.executable``, so the kernel runs in this interpreter's environment (the project
venv when pytest runs from it; checked by ``test_kernel_runs_this_interpreter``).
``OTM_NOTEBOOK_SMALL=1`` makes each notebook pick short sweeps and tiny models.
Notebooks are committed without outputs, so no stale output (a traceback, a solver's banner)
can be saved in them; their executed outputs must hold neither.
"""
import os
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"

#: Per-cell limit: far above the expected seconds, only there to turn a hang into a failure.
CELL_TIMEOUT_S = 600

#: Pieces of the two-line banner HiGHS prints on the C-level stdout when a ``highspy.Highs``
#: is built with its console output on; the kernel forwards that stdout into the cell's
#: outputs, so a solver built the wrong way (not by ``solvers.highs.new_highs``) shows here.
HIGHS_BANNER = ("Running HiGHS", "THIRD_PARTY_NOTICES")


def _execute(notebook: nbformat.NotebookNode, cwd: Path, monkeypatch: pytest.MonkeyPatch) -> nbformat.NotebookNode:
    """Run ``notebook`` in a kernel started with ``OTM_NOTEBOOK_SMALL=1`` and the Agg backend
    (inherited by the kernel process; set through ``monkeypatch``, so the rest of this pytest
    process sees its own environment again)."""
    monkeypatch.setenv("OTM_NOTEBOOK_SMALL", "1")
    monkeypatch.setenv("MPLBACKEND", os.environ.get("MPLBACKEND", "Agg"))
    client = NotebookClient(notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3", resources={"metadata": {"path": str(cwd)}})
    return client.execute()


def _notebooks():
    return sorted(NOTEBOOKS.glob("*.ipynb"))


def _stream_text(notebook: nbformat.NotebookNode) -> str:
    """Everything the code cells printed (stdout and stderr)."""
    return "".join(o.get("text", "") for c in notebook.cells if c.cell_type == "code" for o in c.outputs)


def test_there_are_four_notebooks():
    assert [p.name[:3] for p in _notebooks()] == ["01_", "02_", "03_", "04_"]


@pytest.mark.parametrize("path", _notebooks(), ids=lambda p: p.stem)
def test_notebook_is_committed_without_outputs(path):
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    assert notebook.cells[0].cell_type == "markdown"
    assert notebook.cells[0].source.startswith("# ")
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert not cell.outputs, f"{path.name}: clear the outputs before committing"
            assert cell.execution_count is None, f"{path.name}: clear the outputs before committing"


@pytest.mark.parametrize("path", _notebooks(), ids=lambda p: p.stem)
def test_notebook_executes(path, monkeypatch):
    notebook = nbformat.read(path, as_version=4)
    executed = _execute(notebook, path.parent, monkeypatch)  # raises CellExecutionError on any failing cell
    outputs = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    figures = [o for o in outputs if "image/png" in o.get("data", {})]
    assert figures, f"{path.name} drew no figure"
    text = _stream_text(executed)
    assert "small mode" in text  # the notebook saw OTM_NOTEBOOK_SMALL
    assert not [piece for piece in HIGHS_BANNER if piece in text]
    assert "IProgress" not in text  # progress bars render as widgets (ipywidgets is installed)
    assert "TqdmWarning" not in text


def test_kernel_runs_this_interpreter(monkeypatch):
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import sys; print(sys.executable)")])
    executed = _execute(notebook, NOTEBOOKS, monkeypatch)
    assert Path(executed.cells[0].outputs[0]["text"].strip()).resolve() == Path(sys.executable).resolve()


def test_lp_solves_print_no_solver_banner(monkeypatch):
    """LP optima solved by HiGHS in a kernel, as a notebook solves them, print only what the
    cell prints (HiGHS prints its banner once per process, at the first solver object built
    with its output on)."""
    source = "\n".join([
        "import otm",
        "p, q = [0.1, 0.6, 0.3], [0.5, 0.3, 0.2]",
        "print(round(otm.optimal_acceptance(p, q, 2, method='full_lp'), 6))",
        "print(round(otm.optimal_acceptance(p, q, 2, method='canonical_lp'), 6))",
    ])
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    executed = _execute(notebook, NOTEBOOKS, monkeypatch)
    assert [o.output_type for o in executed.cells[0].outputs] == ["stream"]
    assert _stream_text(executed) == "0.85\n0.85\n"
