"""Sphinx configuration: furo, MyST (Markdown and notebooks), autodoc.

Three things are generated at build time, never by hand and never committed:

- ``_generated/*.svg``: the space-time diagrams, from real simulator runs
  (``figures.py``);
- ``notebooks/*.ipynb``: copies of ``examples/*.ipynb``, executed by myst-nb (or, in
  CI, the copies the test suite executed: ``MAILROOM_EXECUTED_NOTEBOOKS``);
- the page lists of ``index.md`` and the module list of ``api.md``, filled in
  from what exists, so that pages and modules that other branches add are
  picked up (and none is left out of the toctree).
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import shutil
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

project = "mailroom"
author = "the mailroom authors"
copyright = "2026, the mailroom authors"
extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.viewcode"]
html_theme = "furo"
html_title = "mailroom"
exclude_patterns = [
    "_build",
    "jupyter_execute",
    ".ipynb_checkpoints",
    "notebooks/*/**",
    "_static/*.md",
]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
nb_execution_mode = "force"
nb_execution_timeout = 300
nb_execution_raise_on_error = True
nb_execution_show_tb = True
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
suppress_warnings = ["myst.header", "myst.xref_missing"]

#: Pages in the order the index lists them; any other page goes under "More".
LEARN = ["getting-started", "story", "notebooks", "lab", "writing-a-protocol", "diagrams"]
PROTOCOLS = [
    "causal",
    "total-order",
    "tagged-causal",
    "reliability",
    "runtime",
    "security",
    "ks",
    "membership",
    "replicated",
    "kv",
]
TOOLS = [
    "simulator",
    "testing",
    "faults",
    "open-ended",
    "trace-pipeline",
    "checking-histories",
    "sweep",
    "benchmarks",
    "api",
]


def _pages() -> set[str]:
    return {p.stem for p in HERE.glob("*.md")} - {"index"}


def _fill_index(text: str) -> str:
    pages = _pages()
    listed: set[str] = set()
    for marker, names in (
        ("%%LEARN%%", LEARN),
        ("%%PROTOCOLS%%", PROTOCOLS),
        ("%%TOOLS%%", TOOLS),
    ):
        present = [n for n in names if n in pages]
        listed.update(present)
        text = text.replace(marker, "\n".join(present))
    rest = sorted(pages - listed)
    more = ""
    if rest:
        more = "```{toctree}\n:caption: More\n:maxdepth: 1\n\n" + "\n".join(rest) + "\n```\n"
    return text.replace("%%MORE%%", more)


def _modules() -> list[str]:
    import mailroom

    names = ["mailroom"]
    for info in pkgutil.walk_packages(mailroom.__path__, "mailroom."):
        if info.name.endswith("__main__") or ".cli" in info.name:
            continue
        try:
            importlib.import_module(info.name)
        except ImportError:  # an optional extra is missing: leave the module out
            continue
        names.append(info.name)
    return sorted(names)


def _fill_api(text: str) -> str:
    """One section per module; a package shows only its docstring, since its
    names are documented where they are defined."""
    blocks = []
    for name in _modules():
        package = hasattr(importlib.import_module(name), "__path__")
        option = "\n   :no-members:" if package else ""
        blocks.append(f"## `{name}`\n\n```{{eval-rst}}\n.. automodule:: {name}{option}\n```\n")
    return text.replace("%%MODULES%%", "\n".join(blocks))


def _source_read(app: Any, docname: str, source: list[str]) -> None:
    if docname == "index":
        source[0] = _fill_index(source[0])
    elif docname == "api":
        source[0] = _fill_api(source[0])


def _code(nb: Any) -> list[str]:
    return [cell.source for cell in nb.cells if cell.cell_type == "code"]


def _copy_notebook(source: Path, target: Path) -> None:
    """Copy ``source`` to be executed by myst-nb; or, where the tests kept an executed
    copy of it (``MAILROOM_EXECUTED_NOTEBOOKS``, set by ``.ci/run``) whose code cells
    are still the notebook's own, that copy, shown as it is (not executed again)."""
    kept = os.environ.get("MAILROOM_EXECUTED_NOTEBOOKS")
    executed = Path(kept) / source.name if kept else None
    if executed is None or not executed.exists():
        shutil.copy(source, target)
        return
    import nbformat

    nb = nbformat.read(executed, as_version=4)
    if _code(nb) != _code(nbformat.read(source, as_version=4)):
        shutil.copy(source, target)
        return
    nb.metadata["mystnb"] = {"execution_mode": "off"}
    nbformat.write(nb, target)


def _generate(app: Any) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from figures import write_all

    write_all(HERE / "_generated")
    target = HERE / "notebooks"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir()
    for item in sorted((ROOT / "examples").iterdir()):
        if item.suffix == ".ipynb":
            _copy_notebook(item, target / item.name)
        elif (item / "__init__.py").exists():  # a package the notebooks import (crdt)
            shutil.copytree(item, target / item.name, ignore=shutil.ignore_patterns("__pycache__"))


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", _generate)
    app.connect("source-read", _source_read)
    return {"parallel_read_safe": True}
