"""The Sphinx site's generated parts: every page is in a toctree exactly once
(pages other branches add included, missing ones simply absent), every module
is in the API reference, and every figure is drawn from a simulator run."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from types import ModuleType

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
#: The environment variable naming where the figures this file draws are kept for the
#: docs build (docs/conf.py reads it).
DRAWN = "MAILROOM_DRAWN_FIGURES"


def _load(name: str) -> ModuleType:
    sys.path.insert(0, str(DOCS))
    try:
        spec = importlib.util.spec_from_file_location(f"_docs_{name}", DOCS / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(DOCS))


def _toctree_entries(text: str) -> list[str]:
    entries = []
    for block in re.findall(r"```\{toctree\}\n(.*?)```", text, re.S):
        entries += [line.strip() for line in block.splitlines() if line.strip() and ":" not in line]
    return entries


def test_every_page_is_listed_once() -> None:
    pytest.importorskip("sphinx")
    conf = _load("conf")
    entries = _toctree_entries(conf._fill_index((DOCS / "index.md").read_text()))
    pages = sorted(p.stem for p in DOCS.glob("*.md") if p.stem != "index")
    assert sorted(entries) == pages


def test_unknown_and_missing_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("sphinx")
    conf = _load("conf")
    monkeypatch.setattr(conf, "_pages", lambda: {"causal", "lab", "someone-elses-page"})
    entries = _toctree_entries(conf._fill_index((DOCS / "index.md").read_text()))
    assert sorted(entries) == ["causal", "lab", "someone-elses-page"]


def test_api_lists_every_module() -> None:
    pytest.importorskip("sphinx")
    conf = _load("conf")
    text = conf._fill_api("%%MODULES%%")
    for name in ("mailroom.diagram.layout", "mailroom.lab.matrix", "mailroom.clocks"):
        assert f".. automodule:: {name}\n" in text
    assert ".. automodule:: mailroom.lab\n   :no-members:" in text  # packages: docstring only


def test_figures_are_drawn_from_runs(tmp_path: Path) -> None:
    # drawn where the docs build takes them from, when CI names it (MAILROOM_DRAWN_FIGURES,
    # set by .ci/run), so that the build does not run the same simulations again
    figures = _load("figures")
    paths = figures.write_all(Path(os.environ.get(DRAWN, tmp_path)))
    assert len(paths) == len(figures.FIGURES)
    for path in paths:
        ET.fromstring(path.read_text(encoding="utf-8"))


def test_the_index_is_static_and_sorted_by_kind() -> None:
    pytest.importorskip("sphinx")
    text = (DOCS / "index.md").read_text()
    assert "%%" not in text
    captions = re.findall(r":caption: (.+)", text)
    assert captions == ["Tutorial", "How-to guides", "Reference", "Explanation"]


def test_the_cli_reference_has_every_command() -> None:
    pytest.importorskip("sphinx")
    conf = _load("conf")
    text = conf._fill_cli((DOCS / "cli.md").read_text())
    for name in ("demo", "simulate", "check", "sweep", "node", "status"):
        assert f"## `mailroom {name}`\n\n```text\nusage: mailroom {name}" in text
    assert "--seeds ADDRESSES" in text  # a node's options, from the runtime's own parser


#: The archive of dated measurements: kept whole, not a page to learn from.
ARCHIVES = {"history"}
#: The longest a page that teaches may be (about 400 lines: split along topics beyond).
MOST_LINES = 400


def test_no_page_that_teaches_is_too_long() -> None:
    long = {
        p.stem: n for p in DOCS.glob("*.md") if (n := len(p.read_text().splitlines())) > MOST_LINES
    }
    assert set(long) <= ARCHIVES, long
