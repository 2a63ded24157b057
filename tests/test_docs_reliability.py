"""The usage example in docs/reliability.md really runs (and its asserts hold)."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "reliability.md"


def test_reliability_page_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert blocks, "docs/reliability.md has no python example"
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), {"__name__": "docs_example"})
