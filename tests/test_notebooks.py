"""Every notebook in examples/ runs top to bottom, and is stored without outputs.

A notebook that another test file runs (and checks what it prints) is not run
twice: this file runs the others.
"""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "examples").glob("*.ipynb"))
OTHER_TESTS = " ".join(
    p.read_text(encoding="utf-8")
    for p in (ROOT / "tests").glob("test_*.py")
    if p.name != Path(__file__).name
)
UNTESTED = [p for p in NOTEBOOKS if f"{p.stem}.ipynb" not in OTHER_TESTS]
TIMEOUT = 180  # seconds per cell, generous for a loaded 2-core machine


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_stored_clean(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, path.name


@pytest.mark.slow
@pytest.mark.parametrize("path", UNTESTED, ids=lambda p: p.stem)
def test_notebook_runs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=TIMEOUT,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    errors = [
        out
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.outputs
        if out.output_type == "error"
    ]
    assert not errors
