"""examples/chat: Alice, Bob and Carol in three real processes, Alice -> Carol slowed down.

Alice tells Carol about the 3pm meeting, then invites Bob; Bob, having read
Alice, asks Carol what it is about. Alice's message to Carol is held back on
the wire, so Bob's question reaches Carol first, yet Carol is shown Alice's
message first: causal order over real sockets.
"""

from __future__ import annotations

import contextlib
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from .net_support import HOST, KEY, listening_sockets, wait_for

ROOT = Path(__file__).resolve().parent.parent
NAMES = ["alice", "bob", "carol"]
M1 = "Let's meet at 3pm to talk about the Foo project."
M2 = "Can you join a meeting with Carol and me at 3pm?"
M3 = "What's the 3pm meeting with Alice about?"

pytestmark = pytest.mark.slow


class Terminal:
    """A chat process with its stdin and a thread collecting its stdout lines."""

    def __init__(self, pid: int, peers: Path, fd: int, extra: list[str]) -> None:
        cmd = [
            sys.executable,
            "-m",
            "examples.chat",
            "--pid",
            str(pid),
            "--peers",
            str(peers),
            "--listen-fd",
            str(fd),
            *extra,
        ]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=env,
            pass_fds=(fd,),
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        self.lines: list[str] = []
        self._q: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._q.put(line.rstrip("\n"))

    def saw(self, text: str) -> bool:
        while not self._q.empty():
            self.lines.append(self._q.get())
        return any(text in line for line in self.lines)

    def type(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        with contextlib.suppress(Exception):
            self.proc.wait(10)


def test_carol_sees_the_story_in_causal_order(tmp_path: Path) -> None:
    socks = listening_sockets(3)
    (tmp_path / "group.key").write_bytes(KEY)
    lines = ['key_file = "group.key"']
    for pid, s in enumerate(socks):
        lines += [
            f"[peers.{pid}]",
            f'name = "{NAMES[pid]}"',
            f'address = "{HOST}:{s.getsockname()[1]}"',
        ]
    peers = tmp_path / "peers.toml"
    peers.write_text("\n".join(lines) + "\n")
    terms: list[Terminal] = []
    try:
        for pid, s in enumerate(socks):
            extra = ["--delay", "carol=1.5"] if pid == 0 else []
            terms.append(Terminal(pid, peers, s.fileno(), extra))
        alice, bob, carol = terms
        for t, name in zip(terms, NAMES, strict=True):
            wait_for(lambda t=t, name=name: t.saw(f"{name} joined"), 30, f"{name} to start")
        alice.type(f"@carol {M1}")
        alice.type(f"@bob {M2}")
        wait_for(lambda: bob.saw(f"alice -> bob: {M2}"), 30, "Bob to read Alice")
        bob.type(f"@carol {M3}")
        wait_for(lambda: carol.saw(M1) and carol.saw(M3), 30, "Carol to read both")
        shown = [line for line in carol.lines if line.startswith(("alice ->", "bob ->"))]
        assert shown == [f"alice -> carol: {M1}", f"bob -> carol: {M3}"]
    finally:
        for t in terms:
            t.kill()
        for s in socks:
            s.close()
