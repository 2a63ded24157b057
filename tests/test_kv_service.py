"""examples/kv: the replicated key-value store as three real processes over HTTP.

Writes through one member are read from the others; malformed requests get one-line
4xx answers and break nothing; a member killed with SIGKILL while the survivors go on
writing restarts from its checkpoint and catches up; no acknowledged write is lost.
The slow test kills a random member at random moments under load, 50 times, and
judges the client's history and the replicas' histories (``check_files``).
Every wait is a bounded number of polls; every process is ended by its pid.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from examples.kv.client import RecordingClient, workload
from examples.kv.demo import ROOT, Cluster, request
from examples.kv.wire import MAX_BODY
from mailroom.linearizable import (
    LINEARIZABLE,
    MODELS,
    NOT_LINEARIZABLE,
    HistoryRecorder,
    Verdict,
    check_calls,
    merge_histories,
    pair,
    read_history,
)
from mailroom.net.membership import group_endpoint, group_of, rejoined
from mailroom.replicated import ReplDict
from mailroom.replicated.history import check_files

from .budgets import schedule
from .net_support import HOST

#: Faster failure detection than the defaults, so a killed member is excluded sooner.
FAST = ["--heartbeat", "0.2", "--suspect-after", "1.5", "--write-timeout", "60"]


class Members(Cluster):
    """The demo's three processes, each also recording its replica's history, and a
    ``kill`` that is SIGKILL (then a ``crash`` row closes the killed life)."""

    def __init__(self, folder: Path, extra: list[str]) -> None:
        super().__init__(folder, 0, FAST)
        self.lives = 0
        self.options = [*FAST, *extra]

    def start(self, pid: int) -> None:
        self.lives += 1
        history = self.folder / f"history-{self.lives:03}-p{pid}"
        self.extra = [*self.options, "--history", str(history)]
        super().start(pid)

    def kill(self, pid: int) -> None:
        proc = self.procs.pop(pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        self.crashed(pid)

    def crashed(self, pid: int) -> None:
        """A ``crash`` row for the killed process's last life (its highest incarnation)."""
        rows = []
        for path in sorted(self.folder.glob(f"history-*-p{pid}")):
            text = path.read_text()
            complete = text[: text.rfind("\n") + 1]
            path.write_text(complete)  # a line cut short by the kill is dropped
            rows += [json.loads(line) for line in complete.splitlines() if line]
        if rows:
            inc = max(row["inc"] for row in rows)
            with open(self.folder / "history-zz-crashes", "a") as out:
                out.write(json.dumps({"row": "crash", "replica": pid, "inc": inc}) + "\n")

    def histories(self) -> list[Path]:
        return sorted(self.folder.glob("history-*"))

    def status(self, pid: int) -> dict[str, Any]:
        code, body = request(self.port(pid), "GET", "/status")
        assert code == 200
        data: dict[str, Any] = json.loads(body)
        return data

    def items(self, pid: int) -> dict[str, str]:
        code, body = request(self.port(pid), "GET", "/kv")
        assert code == 200
        data: dict[str, str] = json.loads(body)
        return data

    def wait_member(self, pid: int, polls: int = 1500) -> None:
        for _ in range(polls):
            if self.healthy(pid):
                return
            threading.Event().wait(0.1)
        raise AssertionError(f"P{pid} did not rejoin")

    def wait_equal(self, pids: list[int], polls: int = 600) -> dict[str, str]:
        """Until the replicas of ``pids`` hold the same items; returns them."""
        seen: list[dict[str, str]] = []
        for _ in range(polls):
            seen = [self.items(p) for p in pids]
            if all(s == seen[0] for s in seen):
                return seen[0]
            threading.Event().wait(0.1)
        raise AssertionError(f"replicas {pids} never agreed: {[len(s) for s in seen]} keys")


@contextlib.contextmanager
def members(folder: Path, extra: list[str] | None = None) -> Iterator[Members]:
    cluster = Members(folder, extra or [])
    try:
        for pid in range(3):
            cluster.start(pid)
        cluster.wait_healthy(polls=1500)
        yield cluster
    except BaseException:
        for proc in cluster.procs.values():  # a failure: SIGKILL every member, by pid
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        raise
    finally:
        cluster.stop()  # SIGTERM by pid (a clean close), SIGKILL after 10 s


def put(port: int, key: str, value: str) -> int:
    return request(port, "PUT", f"/kv/{key}", value.encode())[0]


def raw(port: int, data: bytes) -> bytes:
    """Send raw bytes, return everything the server answers before it closes."""
    with socket.create_connection((HOST, port), timeout=30) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        out = b""
        for _ in range(1000):
            chunk = sock.recv(65536)
            if not chunk:
                break
            out += chunk
        return out


def check_replica_histories(cluster: Members) -> str:
    lines: list[str] = []
    code = check_files(cluster.histories(), ReplDict, out=lines.append)
    assert code == 0, "\n".join(lines)
    return lines[-1]


def test_a_member_restarted_from_its_checkpoint_rejoins_still_safe() -> None:
    """A safe member that rejoins as a plain one would never report what it holds, and
    the safe survivors would hold every delivery for ever (the restart below found it)."""
    for safe in (True, False):
        again = group_of(
            rejoined(group_endpoint("sequencer", 2, 3, members=[0, 1, 2], safe=safe), [])
        )
        assert again is not None and again.safe is safe and again.incarnation == 1


def test_writes_reads_and_a_killed_member_that_catches_up(tmp_path: Path) -> None:
    acked: dict[str, str] = {}
    with members(tmp_path) as cluster:
        for k in range(10):
            assert put(cluster.port(k % 3), f"k{k}", f"v{k}") == 204
            acked[f"k{k}"] = f"v{k}"
        assert request(cluster.port(2), "GET", "/kv/k9?consistent=1") == (200, b"v9")
        assert cluster.wait_equal([0, 1, 2]) == acked
        assert request(cluster.port(1), "GET", "/kv/k3") == (200, b"v3")
        assert request(cluster.port(0), "DELETE", "/kv/k0")[0] == 204
        del acked["k0"]
        assert request(cluster.port(1), "DELETE", "/kv/k0")[0] == 404
        cluster.kill(2)  # SIGKILL: no goodbye
        for k in range(10, 30):  # the survivors go on (once they exclude P2)
            assert put(cluster.port(k % 2), f"k{k}", f"v{k}") == 204
            acked[f"k{k}"] = f"v{k}"
        cluster.start(2)  # from its checkpoint, as its next incarnation
        cluster.wait_member(2)
        assert cluster.status(2)["incarnation"] >= 1
        assert put(cluster.port(2), "after", "restart") == 204
        acked["after"] = "restart"
        assert cluster.wait_equal([0, 1, 2]) == acked  # caught up, nothing acknowledged lost
        digests = {cluster.status(p)["digest"] for p in range(3)}
        assert len(digests) == 1
        check_recorded_clients(cluster, tmp_path)  # then clients at once, black-box
    print(check_replica_histories(cluster))


def black_box(path: Path) -> Verdict:
    """The client history ``path`` checked against the ``dict`` model."""
    return check_calls(pair(read_history(path, "jsonl")), MODELS["dict"])


def check_recorded_clients(cluster: Members, folder: Path) -> None:
    """Three recording clients at once (writes, deletes, ordered reads, and a local read
    after each): their writes and ordered reads pass the black-box check; the same
    history with one read's answer changed to a value never written does not."""
    ordered, local = workload(cluster, folder, clients=3, ops=25, keys=2)
    verdict = black_box(ordered)
    assert verdict.verdict == LINEARIZABLE and verdict.calls == 75, verdict
    both = folder / "both.jsonl"
    assert merge_histories([ordered, local], both) == 300
    assert black_box(both).calls == 150  # local reads may be stale: judged, not asserted
    rows = [json.loads(line) for line in ordered.read_text().splitlines()]
    reads = [r for r in rows if r["type"] == "ok" and r["f"] == "get"]
    assert reads, "no ordered read completed"
    reads[-1]["value"] = "never written"
    forged = folder / "forged.jsonl"
    forged.write_text("".join(json.dumps(r) + "\n" for r in rows))
    found = black_box(forged)
    assert found.verdict == NOT_LINEARIZABLE and found.witness is not None
    assert found.witness.blocked is not None and found.witness.blocked.result == "never written"


def test_bad_requests_get_one_line_errors_and_break_nothing(tmp_path: Path) -> None:
    with members(tmp_path) as cluster:
        port = cluster.port(0)
        cases = [
            ("GET", "/nowhere", None, 404, "no route"),
            ("POST", "/kv/a", b"x", 405, "not allowed"),
            ("PUT", "/status", b"x", 405, "not allowed"),
            ("GET", "/kv/a?consistent=maybe", None, 400, "consistent"),
            ("GET", "/kv/a?shard=3", None, 400, "unknown parameter"),
            ("GET", "/kv/%ff", None, 400, "UTF-8"),
            ("GET", "/kv/" + "k" * 300, None, 400, "longer than"),
            ("GET", "/kv/missing", None, 404, "no key"),
            ("PUT", "/kv/a", b"\xff\xfe", 400, "UTF-8"),
            ("PUT", "/kv/a", b"x" * (MAX_BODY + 1), 413, "limit"),
        ]
        for method, path, body, status, words in cases:
            code, text = request(port, method, path, body)
            assert code == status, (method, path, code, text)
            assert words in text.decode() and text.count(b"\n") == 1, text
        assert request(port, "PUT", "/kv/ok", b"x" * MAX_BODY)[0] == 204  # the limit itself
        answers = [
            raw(port, b"NONSENSE\r\n\r\n"),
            raw(port, b"GET /kv/a HTTP/2.0\r\n\r\n"),
            raw(port, b"PUT /kv/a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n"),
            raw(port, b"PUT /kv/a HTTP/1.1\r\nContent-Length: -1\r\n\r\n"),
            raw(port, b"PUT /kv/a HTTP/1.1\r\nContent-Length: 5\r\n\r\nab"),
            raw(port, b"GET /kv/a HTTP/1.1\r\nBad header\r\n\r\n"),
            raw(port, b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n"),
            raw(port, b"GET /kv/a HTTP/1.1\r\n" + b"X: y\r\n" * 100 + b"\r\n"),
        ]
        statuses = [a.split(b" ", 2)[1] for a in answers]
        assert statuses == [b"400", b"505", b"501", b"400", b"400", b"400", b"414", b"431"]
        assert all(a.rstrip().endswith(b"\n") or b"error: " in a for a in answers)
        # pipelined keep-alive requests on one connection, then the store still serves
        two = raw(
            port, b"GET /health HTTP/1.1\r\n\r\nGET /kv/ok HTTP/1.1\r\nConnection: close\r\n\r\n"
        )
        assert two.count(b"HTTP/1.1 200") == 2
        assert all(cluster.healthy(p) for p in range(3))
        assert cluster.wait_equal([0, 1, 2]) == {"ok": "x" * MAX_BODY}


def test_the_demo_command_runs_and_stops(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "examples.kv", "--port", "0", "--check", "--dir", str(tmp_path)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("http://127.0.0.1:") == 3 and "stopped." in done.stdout
    assert "from P2: 'hello" in done.stdout


def test_one_member_refuses_bad_options() -> None:
    for argv, words in [
        (["--pid", "0"], "--pid needs --peers"),
        (["--pid", "0", "--peers", "/nonexistent.toml"], "cannot read peer table"),
    ]:
        done = subprocess.run(
            [sys.executable, "-m", "examples.kv", *argv],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2 and words in done.stderr, done.stderr


#: kills of one member at a time under load: 15 in CI, 50 in the thorough run
KILLS = schedule(15, 50)


@pytest.mark.slow
def test_kills_under_load_lose_no_acknowledged_write(tmp_path: Path) -> None:
    rng = random.Random(30)
    history: list[tuple[str, str, bool]] = []  # (key, value, acknowledged)
    lock = threading.Lock()
    stop = threading.Event()
    kills = 0

    recorder = HistoryRecorder(tmp_path / "clients.jsonl")

    def client(c: int, cluster: Members) -> None:
        me = RecordingClient(recorder, timeout=60)
        for k in range(100_000):
            if stop.is_set():
                return
            key, value = f"c{c}-{k}", f"{c}.{k}"
            ok = me.put(cluster.port((c + k) % 3), key, value)[0] == "ok"
            with lock:
                history.append((key, value, ok))
            if k % 4 == 3:  # an ordered read of a key another client wrote
                me.get(cluster.port((c + k + 1) % 3), f"c{(c + 1) % 4}-{k - 1}")
            if not ok:
                threading.Event().wait(0.05)

    with members(tmp_path) as cluster, recorder:
        threads = [threading.Thread(target=client, args=(c, cluster)) for c in range(4)]
        for t in threads:
            t.start()
        try:
            for _ in range(KILLS):
                threading.Event().wait(rng.uniform(0.0, 1.0))  # a random moment
                victim = rng.randrange(3)
                cluster.kill(victim)
                kills += 1
                threading.Event().wait(rng.uniform(0.0, 3.0))  # before or after exclusion
                cluster.start(victim)
                for p in range(3):  # one member down at a time: the majority survives
                    cluster.wait_member(p)
        finally:
            stop.set()
            for t in threads:
                t.join(120)
        final = cluster.wait_equal([0, 1, 2], polls=1200)
        summary = check_replica_histories(cluster)
    acked = [(k, v) for k, v, ok in history if ok]
    lost = [(k, v) for k, v in acked if final.get(k) != v]
    written = {k: v for k, v, _ in history}
    phantom = [k for k, v in final.items() if written.get(k) != v]
    verdict = black_box(tmp_path / "clients.jsonl")  # what the clients saw, black-box
    print(f"kills {kills}, writes {len(history)}, acknowledged {len(acked)}, lost {len(lost)}")
    print(summary, "; black-box:", verdict.verdict, verdict.calls, "operations")
    assert kills == KILLS and len(acked) > 0
    assert lost == [] and phantom == []
    assert verdict.verdict == LINEARIZABLE and verdict.calls >= len(acked), verdict


def test_the_sequencer_restarted_before_the_others_notice_is_let_back_in(tmp_path: Path) -> None:
    """The killed P0 (sequencer, coordinator) is back before anyone suspects it: the
    others stop waiting for its old incarnation to coordinate (the group stalled)."""
    with members(tmp_path, ["--suspect-after", "20"]) as cluster:
        assert put(cluster.port(1), "a", "1") == 204
        cluster.kill(0)  # the sequencer and coordinator
        cluster.start(0)  # long before anyone suspects the killed incarnation
        for _ in range(300):
            if cluster.healthy(0):
                break
            threading.Event().wait(0.1)
        assert cluster.healthy(0)
        assert put(cluster.port(1), "b", "2") == 204


def test_the_demo_restarts_a_killed_member_and_stops_all_on_ctrl_c(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "examples.kv", "--port", "0", "--dir", str(tmp_path)]
    demo = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines: list[str] = []

    def read() -> None:
        assert demo.stdout is not None
        for line in demo.stdout:
            lines.append(line.rstrip("\n"))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()

    def wait_line(words: str) -> str:
        for _ in range(1500):
            found = [line for line in lines if words in line]
            if found:
                return found[-1]
            threading.Event().wait(0.1)
        raise AssertionError(f"the demo never said {words!r}: {lines}")

    try:
        p2 = wait_line("P2: http://")
        port, pid = int(p2.split(":")[3].split()[0]), int(p2.rsplit("pid ", 1)[1].rstrip(")"))
        port0 = int(wait_line("P0: http://").split(":")[3].split()[0])
        assert put(port0, "before", "kill") == 204
        subprocess.run(["kill", "-9", str(pid)], check=True)
        again = wait_line("restarted from its checkpoint: pid ")
        new_pid = int(again.rsplit(" ", 1)[1])
        assert new_pid != pid
        for _ in range(1500):
            with contextlib.suppress(OSError):
                if request(port, "GET", "/kv/before")[0] == 200:
                    break
            threading.Event().wait(0.1)
        assert request(port, "GET", "/kv/before") == (200, b"kill")
        demo.send_signal(signal.SIGINT)  # Ctrl-C
        assert demo.wait(60) == 0
        reader.join(10)
        assert lines[-1] == "stopped."
        with pytest.raises(ProcessLookupError):
            os.kill(new_pid, 0)  # stopped by its pid
    finally:
        if demo.poll() is None:  # a failure: SIGKILL the demo and every member it named
            demo.kill()
            demo.wait(30)
            for line in lines:
                if "pid " in line:
                    with contextlib.suppress(ProcessLookupError, ValueError):
                        os.kill(int(line.rsplit("pid ", 1)[1].rstrip(")")), signal.SIGKILL)
