"""A newcomer's first day, with real processes on 127.0.0.1: PySyncObj's README counter
and lock as mailroom examples (examples/counter.py, examples/lock.py), three processes
each, started staggered as people start services by hand. The counter's founders start
10 s apart, five times the time after which a silent member is suspected: every
process serves without an exception, they agree, and closing leaves the group without
a quorum warning anywhere. Then ``mailroom status`` on a served replica."""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

from mailroom.cli import main as cli_main
from mailroom.net.config import parse_address
from mailroom.replicated import ReplCounter, serve

from .net_support import KEY, group

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


def sh_lines(page: Path, heading: str) -> list[str]:
    """The command lines of the first ``sh`` block after ``heading`` on ``page``, without
    comments."""
    text = page.read_text(encoding="utf-8")
    block = re.search(r"```sh\n(.*?)```", text[text.index(heading) :], re.S)
    assert block is not None, f"no sh block after {heading!r} in {page.name}"
    return [line for line in block.group(1).splitlines() if line and not line.startswith("#")]


def as_run(line: str) -> list[str]:
    """A page's command line as this test runs it: ``mailroom`` and ``.venv/bin/python``
    as this interpreter."""
    argv = shlex.split(line)
    if argv[0] == "mailroom":
        return [sys.executable, "-m", "mailroom", *argv[1:]]
    if argv[0].endswith("python") or argv[0].endswith("python3"):
        return [sys.executable, *argv[1:]]
    raise AssertionError(f"a command this test does not run: {line}")


def test_a_newcomers_path_runs_as_the_pages_write_it(tmp_path: Path) -> None:
    """README, then the tutorial, a group of three, a replicated object and ``mailroom
    status``, each step the commands its page writes: the README's demo; getting
    started's simulate and check; runtime.md's three processes; the README's three
    counter members (their addresses made free ones here, started 5 s apart); and the
    status of a served replica (``test_mailroom_status_shows_a_served_replica``)."""
    env = {**os.environ, "MAILROOM_KEY": KEY.decode(), "PYTHONPATH": str(ROOT / "src")}

    def run(argv: list[str]) -> str:
        done = subprocess.run(
            argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=LIMIT, check=False
        )
        assert done.returncode == 0, (argv, done.stdout, done.stderr)
        return done.stdout

    assert "P2" in run(as_run("mailroom demo"))
    for line in sh_lines(ROOT / "docs" / "getting-started.md", "## Simulating and checking"):
        run(as_run(line))
    assert (tmp_path / "report").is_dir()
    loop = " ".join(sh_lines(ROOT / "docs" / "runtime.md", "`python -m mailroom.net` runs"))
    loop = " ".join(loop.replace("\\", " ").split())
    assert "--protocol cbcast --count 100 --expect 300" in loop
    with group(tmp_path, 3, ["--protocol", "cbcast", "--count", "100", "--expect", "300"]) as g:
        g.start_all()
        g.wait_done(LIMIT)
        g.stop()
        assert g.check().returncode == 0
    readme = sh_lines(ROOT / "README.md", "## Replicated state in a few lines")
    members = [as_run(line) for line in readme if "examples/counter.py" in line]
    assert len(members) == 3
    written = sorted({a for argv in members for a in argv[2:]})
    free = dict(zip(written, free_addresses(len(written)), strict=True))
    starts = [
        (5.0 * k, [*argv[:2], *(free[a] for a in argv[2:])]) for k, argv in enumerate(members)
    ]
    for proc in run_staggered(starts):
        assert proc.returncode == 0 and proc.stdout == "counter 30\n", (proc.args, proc.stderr)
