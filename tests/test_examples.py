"""The example scripts run and tell the story they claim."""

from __future__ import annotations

import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_alice_bob_carol_example() -> None:
    log = runpy.run_path(str(ROOT / "examples" / "alice_bob_carol.py"))["main"]()
    assert log == [
        "Bob reads: Can you join a meeting with Carol and me at 3pm?",
        "Carol's mail room: P1#1 waits for 1 message from P0 (its 1st message to P2)",
        "Carol reads: Let's meet at 3pm to talk about the Foo project.",
        "Carol reads: What's the 3pm meeting with Alice about?",
    ]
