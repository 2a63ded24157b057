"""Three members on 127.0.0.1 in one command: make a key and a peer table in a folder,
start ``python -m examples.kv --pid N`` three times (each in its own session, so a
Ctrl-C reaches only this process), print their HTTP addresses, and stop them by pid
(SIGTERM, then SIGKILL) on Ctrl-C or SIGTERM; a member killed by a signal meanwhile is
restarted from its checkpoint. ``--check`` writes through one member,
reads from the others, and stops; ``--workload N`` has four recording clients make N
requests each (``examples.kv.client``) and stops.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote

from mailroom.core.errors import LocalError

ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"
N = 3


def request(
    port: int, method: str, path: str, body: bytes | None = None, timeout: float = 60.0
) -> tuple[int, bytes]:
    """One HTTP request to ``127.0.0.1:port``: status and body."""
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request(method, path, body=body)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def bind(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1:port (0: a free port); LocalError if taken."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError as exc:
        sock.close()
        raise LocalError(f"cannot listen on {HOST}:{port}: {exc.strerror} (try --port 0)") from None
    sock.listen(128)
    return sock


class Cluster:
    """Three member processes and the sockets they inherit, in ``folder``."""

    def __init__(self, folder: Path, http_base: int, extra: Sequence[str] = ()) -> None:
        self.folder = folder
        self.extra = list(extra)
        key = folder / "group.key"
        if not key.exists():
            key.write_text(secrets.token_hex(32) + "\n")
            key.chmod(0o600)
        self.socks = [bind(0) for _ in range(N)]
        self.http = [bind(http_base + p if http_base else 0) for p in range(N)]
        lines = ['key_file = "group.key"', "[peers]"]
        lines += [f'{p} = "{HOST}:{s.getsockname()[1]}"' for p, s in enumerate(self.socks)]
        self.peers = folder / "peers.toml"
        self.peers.write_text("\n".join(lines) + "\n")
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.restarts = 0

    def port(self, pid: int) -> int:
        return int(self.http[pid].getsockname()[1])

    def start(self, pid: int) -> None:
        fds = (self.socks[pid].fileno(), self.http[pid].fileno())
        cmd = [sys.executable, "-m", "examples.kv", "--pid", str(pid), "--peers",
               str(self.peers), "--listen-fd", str(fds[0]), "--http-fd", str(fds[1]),
               "--checkpoint", str(self.folder / f"p{pid}.ckpt"), *self.extra]  # fmt: skip
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        }
        with open(self.folder / f"p{pid}.log", "ab") as log:
            self.procs[pid] = subprocess.Popen(
                cmd, cwd=ROOT, env=env, pass_fds=fds, stdout=log, stderr=log,
                start_new_session=True,
            )  # fmt: skip

    def healthy(self, pid: int) -> bool:
        proc = self.procs[pid]
        if proc.poll() is not None:
            lines = (self.folder / f"p{pid}.log").read_text(errors="replace").split("\n")
            last = [line for line in lines if line.strip()][-1:] or ["(no output)"]
            raise LocalError(f"P{pid} exited with {proc.returncode}: {last[0]}")
        try:
            return request(self.port(pid), "GET", "/health", timeout=5)[0] == 200
        except OSError:
            return False

    def wait_healthy(self, polls: int = 600) -> None:
        """Until every member answers /health with 200 (at most ``polls`` rounds)."""
        for _ in range(polls):
            if all(self.healthy(p) for p in self.procs):
                return
            time.sleep(0.1)
        raise LocalError("the members did not all join in time; see their logs")

    def stop(self) -> None:
        """SIGTERM each member by pid, then SIGKILL any still running."""
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        self.procs.clear()
        for s in self.socks + self.http:
            s.close()


def check(cluster: Cluster) -> bool:
    """Write through P0, read it back from P1 and P2 (local reads, bounded polls), and
    with an ordered read; print what happens."""
    key, value = "greeting", f"hello {secrets.token_hex(4)}"
    status, _ = request(cluster.port(0), "PUT", f"/kv/{quote(key)}", value.encode())
    print(f"PUT /kv/{key} through P0: {status}")
    for pid in (1, 2):
        got = b""
        for _ in range(200):
            code, got = request(cluster.port(pid), "GET", f"/kv/{key}")
            if code == 200 and got == value.encode():
                break
            time.sleep(0.05)
        print(f"GET /kv/{key} from P{pid}: {got.decode(errors='replace')!r}")
        if got != value.encode():
            return False
    code, got = request(cluster.port(2), "GET", f"/kv/{key}?consistent=1")
    print(f"GET /kv/{key}?consistent=1 from P2: {code} {got.decode(errors='replace')!r}")
    return status == 204 and code == 200 and got == value.encode()


def record_workload(cluster: Cluster, folder: Path, ops: int) -> int:
    """Four recording clients make ``ops`` requests each; say where their histories are
    and how to check them."""
    from examples.kv.client import workload  # it imports this module
    from mailroom.linearizable import merge_histories

    ordered, local = workload(cluster, folder, ops=ops)
    both = folder / "with-local-reads.jsonl"
    merge_histories([ordered, local], both)
    print(f"4 clients, {ops} requests each: writes and ordered reads in {ordered},")
    print(f"with the local reads too in {both}; check them with")
    print(f"  mailroom check --model dict {ordered}    # linearizable")
    print(f"  mailroom check --model dict {both}    # local reads may be stale")
    return 0


#: Restarts of killed members the demo makes, at most (a member that keeps dying stays down).
MAX_RESTARTS = 100


def watch(cluster: Cluster) -> None:
    """A member killed by a signal (try ``kill -9``) is restarted from its checkpoint;
    one that exited by itself is reported and left down."""
    for pid, proc in list(cluster.procs.items()):
        code = proc.poll()
        if code is None or cluster.restarts > MAX_RESTARTS:
            continue
        if code < 0:
            cluster.restarts += 1
            cluster.start(pid)
            print(f"P{pid} was killed (signal {-code}); restarted from its checkpoint: "
                  f"pid {cluster.procs[pid].pid}", flush=True)  # fmt: skip
        else:
            del cluster.procs[pid]
            print(f"P{pid} exited with {code}; see {cluster.folder}/p{pid}.log", flush=True)


def run_demo(args: argparse.Namespace) -> int:
    """Start three members, print their addresses, wait for Ctrl-C; stop them by pid."""
    folder = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="mailroom-kv-"))
    folder.mkdir(parents=True, exist_ok=True)
    stop = {"now": False}

    def on_signal(signum: int, frame: object) -> None:
        stop["now"] = True

    cluster = Cluster(folder, args.port)
    previous = [signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)]
    try:
        for pid in range(N):
            cluster.start(pid)
        cluster.wait_healthy()
        for pid in range(N):
            print(f"P{pid}: http://{HOST}:{cluster.port(pid)}  (pid {cluster.procs[pid].pid})")
        print(f"data and logs in {folder}")
        if args.check:
            return 0 if check(cluster) else 1
        if args.workload:
            return record_workload(cluster, folder, args.workload)
        first = f"http://{HOST}:{cluster.port(0)}"
        print(f"try: curl -X PUT --data-binary 'hello' {first}/kv/greeting")
        print(f"     curl http://{HOST}:{cluster.port(1)}/kv/greeting")
        print("kill -9 a member's pid: it is restarted from its checkpoint and catches up.")
        print("Ctrl-C stops all three.", flush=True)
        while not stop["now"]:
            watch(cluster)
            time.sleep(0.2)
        return 0
    finally:
        cluster.stop()
        for s, handler in zip((signal.SIGINT, signal.SIGTERM), previous, strict=True):
            signal.signal(s, handler)
        print("stopped.", flush=True)


__all__ = ["Cluster", "bind", "check", "request", "run_demo"]
