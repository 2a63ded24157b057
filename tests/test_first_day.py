"""A newcomer's first day, with real processes on 127.0.0.1: PySyncObj's README counter
and lock as mailroom examples (examples/counter.py, examples/lock.py), three processes
each, started staggered as people start services by hand. The counter's founders start
10 s apart, five times the time after which a silent member is suspected: every
process serves without an exception, they agree, and closing leaves the group without
a quorum warning anywhere. Then ``mailroom status`` on a served replica."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from mailroom.cli import main as cli_main
from mailroom.net.config import parse_address
from mailroom.replicated import ReplCounter, serve

from .net_support import KEY

ROOT = Path(__file__).resolve().parents[1]
#: Seconds a process may take in all: bounds every wait of the test.
LIMIT = 90.0


def free_addresses(n: int) -> list[str]:
    """``n`` addresses on 127.0.0.1 whose ports were free a moment ago (the examples bind
    their own: the way a newcomer runs them)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [f"127.0.0.1:{s.getsockname()[1]}" for s in socks]
    finally:
        for s in socks:
            s.close()


def group_of_three(script: str) -> list[list[str]]:
    """The three command lines of ``script``: each member's address, then the others'."""
    at = free_addresses(3)
    example = str(ROOT / "examples" / script)
    return [[sys.executable, example, me, *[a for a in at if a != me]] for me in at]


def run_staggered(starts: list[tuple[float, list[str]]]) -> list[subprocess.CompletedProcess[str]]:
    """Start each command at its time (seconds from now), wait for all (bounded), and
    end any still running by its pid."""
    env = {**os.environ, "MAILROOM_KEY": KEY.decode(), "PYTHONPATH": str(ROOT / "src")}
    begin = time.monotonic()
    procs: list[subprocess.Popen[str]] = []
    try:
        for at, argv in sorted(starts, key=lambda s: s[0]):
            time.sleep(max(0.0, begin + at - time.monotonic()))
            pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
            procs.append(subprocess.Popen(argv, env=env, cwd=ROOT, text=True, **pipes))
        done = []
        for proc in procs:
            left = max(1.0, begin + LIMIT - time.monotonic())
            out, err = proc.communicate(timeout=left)
            done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
        return done
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_the_counter_and_the_lock_with_founders_started_apart() -> None:
    counter = group_of_three("counter.py")
    lock = group_of_three("lock.py")
    starts = [(10.0 * k, argv) for k, argv in enumerate(counter)]
    starts += [(3.0 * k + 1.0, argv) for k, argv in enumerate(lock)]
    done = run_staggered(starts)
    for proc in done:
        assert proc.returncode == 0, (proc.args, proc.stderr)
        assert "Traceback" not in proc.stderr and "waiting for a majority" not in proc.stderr
    counts = [p.stdout.split() for p in done if str(p.args[1]).endswith("counter.py")]
    assert counts == [["counter", "30"]] * 3  # every increment, at every member
    held = 0
    for proc in done:
        if str(proc.args[1]).endswith("lock.py") and proc.stdout:
            me, *others = proc.args[2:]
            pid = sorted([me, *others], key=parse_address).index(me)
            assert proc.stdout == f"holding test-lock: [{pid}, 0, '']\n"  # its own replica agrees
            held += 1
    assert held >= 1


def test_mailroom_status_shows_a_served_replica() -> None:
    (me,) = free_addresses(1)
    with serve(ReplCounter(), me, [], key=KEY, status="127.0.0.1:0") as counter:
        assert counter.sync.inc() == 1
        port = counter.replica.status_address[1]  # type: ignore[index]
        assert cli_main(["status", f"127.0.0.1:{port}"]) == 0
