"""Every notebook in examples/ runs top to bottom, and is stored without outputs.

A notebook that another test file runs (and checks what it prints) is not run
twice: this file runs the others. In CI the executed copies are kept for the docs
build, which shows them instead of executing the notebooks again
(``tests/notebook_support.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbclient")

from tests.notebook_support import errors, execute  # noqa: E402  (after the skips)

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
    assert not errors(execute(path, TIMEOUT))
