"""The example scripts run and tell the story they claim."""

from __future__ import annotations

import re
import runpy
import subprocess
import sys
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


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    """Run a command from the repository root, as the examples' READMEs say."""
    return subprocess.run(
        [sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_crdt_runs_as_its_readme_says() -> None:
    done = _run("-m", "examples.crdt")
    assert done.returncode == 0, done.stderr
    assert "P0 ['milk'], P1 ['milk'] (add wins)" in done.stdout
    assert "both keep ['3pm', '4pm']" in done.stdout


def test_every_documented_example_command_starts() -> None:
    readme = (ROOT / "examples" / "README.md").read_text()
    commands = re.findall(r"`\.venv/bin/python ([^`]+)`", readme)
    assert "-m examples.crdt" in commands and "examples/alice_bob_carol.py" in commands
    for command in commands:
        done = _run(*command.split())
        assert done.returncode == 0, (command, done.stderr)
    chat = (ROOT / "examples" / "chat" / "README.md").read_text()
    lines = re.findall(r"^\.venv/bin/python -m examples\.chat (.*?)\s+#", chat, re.M)
    assert len(lines) == 3
    for line in lines:  # the options parse (the run itself is tests/test_net_chat.py)
        done = _run("-m", "examples.chat", *line.split(), "--help")
        assert done.returncode == 0 and "--pid" in done.stdout, done.stderr
