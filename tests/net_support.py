"""Helpers for the mailroom.net tests: listening sockets, peer tables, a raw client.

Ports are never guessed: the test binds 127.0.0.1:0, keeps the listening socket
and hands it to the node (in-process) or to the child process (``pass_fds``),
so no other program can take the port between choosing and using it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from mailroom import CBCAST, Reliable, Stack
from mailroom.net import PeerTable, pake
from mailroom.net import frames as fr
from mailroom.net import handshake as hs
from mailroom.trace import Event, read_jsonl

KEY = b"test-group-key-0123456789abcdef!"
HOST = "127.0.0.1"


def listening_sockets(n: int) -> list[socket.socket]:
    socks = []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((HOST, 0))
        s.listen(64)
        socks.append(s)
    return socks


def table_of(socks: Sequence[socket.socket]) -> PeerTable:
    return PeerTable.of({pid: f"{HOST}:{s.getsockname()[1]}" for pid, s in enumerate(socks)})


def write_group(folder: Path, socks: Sequence[socket.socket]) -> Path:
    """peers.toml and the key file for ``socks``; returns the peers.toml path."""
    (folder / "group.key").write_bytes(KEY)
    lines = ['key_file = "group.key"', "[peers]"]
    lines += [f'{pid} = "{HOST}:{s.getsockname()[1]}"' for pid, s in enumerate(socks)]
    path = folder / "peers.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


class RawClient:
    """A hand-driven connection to a node: receive its GREET, send what we like."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection((HOST, port), timeout=10)
        kind, body = self.read_frame()
        self.greeting = hs.read_greeting(kind, body, -1)
        self.secret = b""

    def _exact(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    def claim(
        self, sender: int, dest: int, table: PeerTable, key: bytes = KEY, encrypt: bool = False
    ) -> hs.Claim:
        """Send a CLAIM as ``sender`` (the node answers with a CONFIRM if it accepts it)."""
        digest = fr.table_digest(table.entries())
        unsigned = hs.Claim(sender, dest, digest, encrypt, os.urandom(fr.NONCE_SIZE), b"")
        claim, self.secret = hs.claim(key, pake.generator(key, digest), self.greeting, unsigned)
        self.sock.sendall(claim.frame())
        self.last_claim = claim
        return claim

    def read_frame(self) -> tuple[int, bytes]:
        head = self._exact(5)
        size = int.from_bytes(head[:4], "big")
        return head[4], self._exact(size - 1)

    def hello(
        self, sender: int, dest: int, table: PeerTable, key: bytes = KEY, encrypt: bool = False
    ) -> fr.Sealer:
        """The whole handshake as member ``sender``; returns the sealer for data frames.
        If the node refuses the CLAIM (it closes), the sealer is still returned."""
        self.claim(sender, dest, table, key, encrypt)
        sealer = fr.Sealer.keyed(hs.session(self.secret), encrypt)
        try:
            kind, body = self.read_frame()
        except (ConnectionError, TimeoutError):
            return sealer
        self.seen = hs.check_confirm(self.secret, body, kind, dest)
        return sealer

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def closed_by_peer(self, timeout: float = 10.0) -> bool:
        """True once the node has closed the connection (safety-net timeout)."""
        self.sock.settimeout(timeout)
        try:
            while True:
                if not self.sock.recv(4096):
                    return True
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()


def live_events(path: Path) -> list[Event]:
    """The complete lines of a live trace file, as events (its header skipped)."""
    import json

    data = path.read_bytes() if path.exists() else b""
    rows = [json.loads(line) for line in data[: data.rfind(b"\n") + 1].splitlines() if line]
    return [Event.from_dict(row) for row in rows if "header" not in row]


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    """Poll ``predicate`` until true; the timeout is only a safety net."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


class Group:
    """Real OS processes of ``python -m mailroom.net``, killed on exit whatever happens."""

    def __init__(self, folder: Path, n: int, args: Sequence[str]) -> None:
        self.folder = folder
        self.n = n
        self.socks = listening_sockets(n)
        self.peers = write_group(folder, self.socks)
        self.table = table_of(self.socks)
        self.args = list(args)
        self.procs: dict[int, subprocess.Popen[bytes]] = {}

    def path(self, name: str, pid: int) -> Path:
        return self.folder / f"{name}{pid}"

    def start(self, pid: int, extra: Sequence[str] = (), max_files: int | None = None) -> None:
        """Start process ``pid``; ``max_files`` sets its RLIMIT_NOFILE (soft and hard)."""
        fd = self.socks[pid].fileno()
        cmd = [
            sys.executable,
            "-m",
            "mailroom.net",
            "--pid",
            str(pid),
            "--peers",
            str(self.peers),
            "--listen-fd",
            str(fd),
            "--trace",
            str(self.path("trace", pid)),
            "--done",
            str(self.path("done", pid)),
            "--stats",
            str(self.path("stats", pid)),
            *self.args,
            *extra,
        ]
        log = open(self.path("log", pid), "ab")  # noqa: SIM115
        limit = None
        if max_files is not None:

            def limit() -> None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (max_files, max_files))

        self.procs[pid] = subprocess.Popen(
            cmd, pass_fds=(fd,), stdout=log, stderr=log, preexec_fn=limit
        )
        log.close()

    def start_all(self, extra: Sequence[str] = ()) -> None:
        for pid in range(self.n):
            self.start(pid, extra)

    def kill(self, pid: int) -> None:
        proc = self.procs.pop(pid)
        proc.kill()
        proc.wait(10)

    def wait_done(self, timeout: float) -> None:
        def done() -> bool:
            for pid, proc in self.procs.items():
                if proc.poll() is not None:
                    log = self.path("log", pid).read_text()
                    raise AssertionError(f"P{pid} exited with {proc.returncode}:\n{log}")
            return all(self.path("done", pid).exists() for pid in range(self.n))

        wait_for(done, timeout, "every process to deliver what it expects")

    def stop(self) -> None:
        """SIGTERM: the processes close cleanly and write their stats."""
        for proc in self.procs.values():
            proc.send_signal(signal.SIGTERM)
        for pid, proc in list(self.procs.items()):
            assert proc.wait(15) == 0, self.path("log", pid).read_text()
        self.procs.clear()

    def trace(self) -> list[Event]:
        return [e for pid in range(self.n) for e in read_jsonl(self.path("trace", pid))]

    def check(self) -> subprocess.CompletedProcess[str]:
        """``mailroom check`` with no options on every process's trace: it checks what
        the traces' headers say the protocol promises."""
        return mailroom_check([self.path("trace", pid) for pid in range(self.n)])

    def stats(self, pid: int) -> dict[str, int]:
        import json

        data: dict[str, int] = json.loads(self.path("stats", pid).read_text())
        return data

    def cleanup(self) -> None:
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            with contextlib.suppress(Exception):
                proc.wait(10)
        self.procs.clear()
        for s in self.socks:
            s.close()


def mailroom_check(paths: Sequence[Path]) -> subprocess.CompletedProcess[str]:
    """``mailroom check PATHS`` (no options) in a child process; its exit code and output."""
    cmd = [sys.executable, "-m", "mailroom", "check", *map(str, paths)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)


def idle_flood(port: int, count: int, timeout: float = 10.0) -> list[socket.socket]:
    """``count`` attempts at connections that then say nothing; returns those made
    (a node that stopped accepting lets some time out)."""
    socks = []
    for _ in range(count):
        try:
            socks.append(socket.create_connection((HOST, port), timeout=timeout))
        except OSError:
            continue
    return socks


def rss_mb(pid: int) -> float:
    """The resident memory of process ``pid`` in MB (from /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


@contextlib.contextmanager
def group(folder: Path, n: int, args: Sequence[str]) -> Iterator[Group]:
    g = Group(folder, n, args)
    try:
        yield g
    finally:
        g.cleanup()


__all__ = [
    "HOST",
    "KEY",
    "Group",
    "RawClient",
    "group",
    "idle_flood",
    "listening_sockets",
    "live_events",
    "mailroom_check",
    "rss_mb",
    "table_of",
]


def reliable_cbcast(pid: int, n: int) -> Any:
    """``Stack(Reliable, CBCAST)`` with a short retransmission timeout, as most net tests use."""
    return Stack(Reliable(pid, n, rto=0.2), CBCAST(pid, n))


async def until(predicate: Any, timeout: float = 30.0) -> None:
    """Wait for ``predicate`` inside the event loop; the timeout is only a safety net."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)
