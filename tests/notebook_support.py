"""Run a notebook of examples/ top to bottom, as the tests do, and keep what it printed.

The docs build shows the notebooks with their outputs. So that CI does not execute
each notebook twice, a run here saves the executed copy under the directory that
``MAILROOM_EXECUTED_NOTEBOOKS`` names (``.ci/run`` sets it), and docs/conf.py shows
that copy instead of executing the notebook again, if its code cells are still the
notebook's own (any edit since, and the docs build executes it itself).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient

#: The environment variable naming where executed copies are kept (docs/conf.py reads it).
OUTPUTS = "MAILROOM_EXECUTED_NOTEBOOKS"


def execute(path: Path, timeout: int) -> Any:
    """``path`` executed (``timeout`` seconds per cell), as a notebook node; kept for
    the docs build when ``MAILROOM_EXECUTED_NOTEBOOKS`` is set."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    keep = os.environ.get(OUTPUTS)
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, Path(keep) / path.name)
    return nb


def errors(nb: Any) -> list[Any]:
    """The error outputs of ``nb``'s code cells."""
    return [
        out
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.outputs
        if out.output_type == "error"
    ]
