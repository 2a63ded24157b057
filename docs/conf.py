"""Sphinx configuration: furo, MyST (Markdown and notebooks), autodoc.

Three things are generated at build time, never by hand and never committed:

- ``_generated/*.svg``: the space-time diagrams, from real simulator runs
  (``figures.py``; in CI, the ones the test suite drew: ``MAILROOM_DRAWN_FIGURES``);
- ``notebooks/*.ipynb``: copies of ``examples/*.ipynb``, executed by myst-nb (or, in
  CI, the copies the test suite executed: ``MAILROOM_EXECUTED_NOTEBOOKS``);
- the module list of ``api.md`` and the commands' help in ``cli.md``, from the
  package and its parser; ``index.md`` is static (tutorial, how-to guides,
  reference, explanation), and a page it does not list is added under "More", so
  none is left out of the toctree.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
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


def _pages() -> set[str]:
    return {p.stem for p in HERE.glob("*.md")} - {"index"}


def _fill_index(text: str) -> str:
    """The static index, less the pages that do not exist here, plus a "More" toctree
    of the pages it does not list (a page another branch adds is never left out)."""
    pages = _pages()
    listed: set[str] = set()

    def keep(block: re.Match[str]) -> str:
        lines = []
        for line in block.group(1).splitlines():
            name = line.strip()
            if name and not name.startswith(":"):
                if name not in pages:
                    continue
                listed.add(name)
            lines.append(line)
        return "```{toctree}\n" + "\n".join(lines) + "\n```"

    text = re.sub(r"```\{toctree\}\n(.*?)\n```", keep, text, flags=re.S)
    rest = sorted(pages - listed)
    if rest:
        text += "\n```{toctree}\n:caption: More\n:maxdepth: 1\n\n" + "\n".join(rest) + "\n```\n"
    return text


def _fill_cli(text: str) -> str:
    """Every subcommand's ``--help``, from the parser ``mailroom`` itself builds."""
    from mailroom.cli import help_texts

    blocks = []
    for name, usage in help_texts().items():
        title = f"mailroom {name}".strip()
        blocks.append(f"## `{title}`\n\n```text\n{usage}```\n")
    return text.replace("%%COMMANDS%%", "\n".join(blocks))


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


def _only_gathers(module: object) -> bool:
    """A package, or a namespace module such as ``mailroom.lowlevel``, defines none of
    the names it offers: they are documented where they are defined (documenting them
    twice would make every reference to them ambiguous)."""
    if hasattr(module, "__path__"):
        return True
    name = getattr(module, "__name__", "")
    offered = [getattr(module, n) for n in getattr(module, "__all__", [])]
    defined = [getattr(x, "__module__", None) for x in offered if callable(x)]
    return bool(defined) and name not in defined


def _fill_api(text: str) -> str:
    """One section per module; a package shows only its docstring, since its
    names are documented where they are defined."""
    blocks = []
    for name in _modules():
        module = importlib.import_module(name)
        option = "\n   :no-members:" if _only_gathers(module) else ""
        blocks.append(f"## `{name}`\n\n```{{eval-rst}}\n.. automodule:: {name}{option}\n```\n")
    return text.replace("%%MODULES%%", "\n".join(blocks))


def _source_read(app: Any, docname: str, source: list[str]) -> None:
    if docname == "index":
        source[0] = _fill_index(source[0])
    elif docname == "api":
        source[0] = _fill_api(source[0])
    elif docname == "cli":
        source[0] = _fill_cli(source[0])


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


def _draw_figures(target: Path) -> None:
    """Draw every figure of ``figures.py`` into ``target``; or, where the tests drew
    them all in this run (``MAILROOM_DRAWN_FIGURES``, set by ``.ci/run``), copy those:
    the same code drew them from the same runs, so drawing again repeats the work."""
    import matplotlib

    matplotlib.use("Agg")
    from figures import FIGURES, write_all

    kept = os.environ.get("MAILROOM_DRAWN_FIGURES")
    drawn = [Path(kept) / f"{name}.svg" for name in FIGURES] if kept else []
    if not drawn or not all(path.exists() for path in drawn):
        write_all(target)
        return
    target.mkdir(parents=True, exist_ok=True)
    for path in drawn:
        shutil.copy(path, target / path.name)


def _generate(app: Any) -> None:
    _draw_figures(HERE / "_generated")
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
