"""Every Python example in the README and docs runs (a block may opt out with
a first line ``# not run``)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _blocks() -> list[tuple[str, int, str]]:
    found = []
    for page in PAGES:
        for i, code in enumerate(BLOCK.findall(page.read_text(encoding="utf-8"))):
            if not code.startswith("# not run"):
                found.append((page.name, i, code))
    return found


@pytest.fixture(scope="module", autouse=True)
def _in_scratch_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Run the blocks in one scratch directory, so files they write (a page's
    later blocks may read them) stay out of the checkout."""
    here = Path.cwd()
    scratch = tmp_path_factory.mktemp("docs")
    (scratch / "examples").symlink_to(ROOT / "examples")  # pages run from the repo root
    os.chdir(scratch)
    try:
        yield
    finally:
        os.chdir(here)


@pytest.mark.parametrize(("page", "index", "code"), _blocks(), ids=lambda v: str(v)[:20])
def test_example_runs(page: str, index: int, code: str) -> None:
    exec(compile(code, f"{page}[{index}]", "exec"), {"__name__": "__docs__"})
