"""The examples in docs/tagged-causal.md run as written."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "tagged-causal.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def test_the_page_has_examples() -> None:
    assert len(BLOCKS) == 2


@pytest.mark.parametrize("code", BLOCKS)
def test_doc_example_runs(code: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "path", list(sys.path))
    exec(compile(code, str(DOC), "exec"), {"__name__": "doc_example"})
    assert os.getcwd() == str(ROOT)
