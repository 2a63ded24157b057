"""Every Python example in the README and docs runs (a block may opt out with
a first line ``# not run``). A block whose first line is ``# file: NAME.py`` is saved
under that name in the scratch directory and imported, so a page's later blocks can
import what it defines (docs/writing-a-protocol.md builds a protocol that way)."""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)
FILE = re.compile(r"# file: (\w+)\.py\n")


def _blocks() -> list[object]:
    """Every block to run; one that starts Spark is ``slow`` (the quick tier skips it)."""
    found: list[object] = []
    for page in PAGES:
        for i, code in enumerate(BLOCK.findall(page.read_text(encoding="utf-8"))):
            if not code.startswith("# not run"):
                marks = [pytest.mark.slow] if "mailroom.spark" in code else []
                found.append(pytest.param(page.name, i, code, marks=marks))
    return found


@pytest.fixture(scope="module", autouse=True)
def _in_scratch_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Run the blocks in one scratch directory, so files they write (a page's
    later blocks may read them) stay out of the checkout."""
    here = Path.cwd()
    scratch = tmp_path_factory.mktemp("docs")
    (scratch / "examples").symlink_to(ROOT / "examples")  # pages run from the repo root
    os.chdir(scratch)
    sys.path.insert(0, str(scratch))
    try:
        yield
    finally:
        sys.path.remove(str(scratch))
        os.chdir(here)


@pytest.mark.parametrize(("page", "index", "code"), _blocks(), ids=lambda v: str(v)[:20])
def test_example_runs(page: str, index: int, code: str) -> None:
    if (named := FILE.match(code)) is not None:
        Path(f"{named.group(1)}.py").write_text(code, encoding="utf-8")
        importlib.invalidate_caches()
        importlib.import_module(named.group(1))
        return
    exec(compile(code, f"{page}[{index}]", "exec"), {"__name__": "__docs__"})
