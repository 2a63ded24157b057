"""PySyncObj (Raft, a system this project did not write) under the same nemesis.

Each replica runs ``raft_replica`` in its own namespace and logs what its state
machine applies and what its client was told. ``read_raft_logs`` reads those
logs; ``judge_raft`` checks them as a history:

- one sequence: no two replicas (or incarnations of one) apply different commands
  at the same position (``diverged`` positions);
- nothing applied twice: no command at two positions (``applied_twice``);
- nothing acknowledged lost: every command a client was told succeeded is in the
  sequence (``lost``), at the position its result named (``wrong_result``);

and ``to_trace`` turns the logs into a mailroom trace (each incarnation of a
replica a process; a call a send to all, an apply a delivery) so that
``mailroom check --properties integrity,total`` judges the same logs. The clients'
calls and results are also a black-box history (``client_history``): the log is a
counter whose ``inc`` returns its position, checked by ``mailroom check --model
counter`` (run as a command: this layer is below ``mailroom.linearizable``).
"""

from __future__ import annotations

import heapq
import json
import re
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from mailroom.testing.nemesis.progress import Progress, Record, json_object
from mailroom.testing.nemesis.verdict import MessageKey, Verdict, run_check

PORT = 7100
#: What PySyncObj logs when a follower drops entries its state machine already applied.
TRUNCATING = re.compile(r"truncating already-applied log entries")


def raft_record(line: bytes) -> Record | None:
    """A replica log line as a progress record: a call is a send, an apply a delivery."""
    row = json_object(line)
    if row is None or row.get("kind") not in ("call", "apply"):
        return None
    kind = "send" if row["kind"] == "call" else "deliver"
    return kind, int(row["origin"]), int(row["seq"])


@attrs.define
class Incarnation:
    """One run of one replica: what it applied (position -> command) and its client's news."""

    replica: int
    number: int
    applied: list[tuple[int, MessageKey]] = attrs.field(factory=list)
    calls: list[MessageKey] = attrs.field(factory=list)
    ok: dict[MessageKey, int] = attrs.field(factory=dict)
    failed: dict[MessageKey, int] = attrs.field(factory=dict)


def read_raft_log(path: Path, replica: int) -> list[Incarnation]:
    """A replica's log as its incarnations (a line cut by ``kill -9`` is skipped)."""
    runs: list[Incarnation] = []
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if not isinstance(row, dict):
            continue
        kind = row.get("kind")
        if kind == "start" or not runs:
            runs.append(Incarnation(replica, len(runs)))
            if kind == "start":
                continue
        cur = runs[-1]
        key = (int(row.get("origin", -1)), int(row.get("seq", -1)))
        if kind == "apply":
            cur.applied.append((int(row["pos"]), key))
        elif kind == "call":
            cur.calls.append(key)
        elif kind == "ok":
            cur.ok[key] = int(row["pos"])
        elif kind == "fail":
            cur.failed[key] = int(row.get("err", -1))
    return runs


def judge_raft(incarnations: list[Incarnation]) -> tuple[dict[str, int], list[str], int, int]:
    """(counts, notes, acknowledged, lost) for the logs of every replica."""
    at: dict[int, dict[MessageKey, list[tuple[int, int]]]] = defaultdict(lambda: defaultdict(list))
    where: dict[MessageKey, set[int]] = defaultdict(set)
    twice_local = 0
    for inc in incarnations:
        seen: dict[MessageKey, int] = {}
        for pos, key in inc.applied:
            at[pos][key].append((inc.replica, inc.number))
            where[key].add(pos)
            if key in seen:
                twice_local += 1
            seen[key] = pos
    diverged = sorted(pos for pos, keys in at.items() if len(keys) > 1)
    twice = sorted(k for k, ps in where.items() if len(ps) > 1)
    acked = {k: pos for inc in incarnations for k, pos in inc.ok.items()}
    lost = sorted(k for k in acked if k not in where)
    wrong = sorted(k for k, pos in acked.items() if k in where and pos not in where[k])
    notes = []
    if diverged:
        p = diverged[0]
        notes.append(
            f"{len(diverged)} position(s) applied differently, first {p}: "
            f"{ {str(k): v for k, v in at[p].items()} }"
        )
    if twice:
        notes.append(
            f"{len(twice)} command(s) applied at two positions, e.g. "
            f"{[(k, sorted(where[k])) for k in twice[:3]]}"
        )
    if lost:
        notes.append(f"{len(lost)} acknowledged command(s) never applied, e.g. {lost[:5]}")
    if wrong:
        notes.append(
            f"{len(wrong)} result(s) name another position than the command's, "
            f"e.g. {[(k, acked[k], sorted(where[k])) for k in wrong[:3]]}"
        )
    ends = {(i.replica, i.number): max((p for p, _ in i.applied), default=0) for i in incarnations}
    last = {r: max(n for (rr, n) in ends if rr == r) for r, _ in ends}
    finals = {r: ends[(r, n)] for r, n in last.items()}
    if len(set(finals.values())) > 1:
        notes.append(f"replicas end at different positions: {finals}")
    counts = {
        "diverged": len(diverged),
        "applied_twice": len(twice),
        "applied_twice_locally": twice_local,
        "wrong_result": len(wrong),
    }
    return counts, notes, len(acked), len(lost)


def to_trace(incarnations: list[Incarnation], n: int, run: str = "raft") -> list[dict[str, Any]]:
    """The logs as mailroom trace rows: incarnation k of replica i is process i + n*k; a
    call is a send to every process, an apply a delivery (message = the calling
    incarnation's process and the command number)."""
    pid = {(i.replica, i.number): i.replica + n * i.number for i in incarnations}
    everyone = sorted(pid.values())
    caller: dict[MessageKey, int] = {}
    for inc in incarnations:
        for key in inc.calls:
            caller[key] = pid[(inc.replica, inc.number)]
    rows = []
    for inc in incarnations:
        me = pid[(inc.replica, inc.number)]
        # the incarnation's calls first, then its applies: only the order of the
        # deliveries is judged (integrity and total), and every send precedes them
        events: list[tuple[str, MessageKey]] = [("send", k) for k in inc.calls]
        events += [("deliver", k) for _, k in inc.applied]
        for seq, (kind, key) in enumerate(events, start=1):
            origin = caller.get(key, key[0])
            rows.append(
                {
                    "run": run,
                    "process": me,
                    "seq": seq,
                    "kind": kind,
                    "message": [origin, key[1]],
                    "sender": origin,
                    "dest": everyone if kind == "send" else [me],
                }
            )
    return rows


def _client_rows(path: Path) -> Iterator[tuple[float, str]]:
    """A replica log's client rows as JSON Lines of a client history, with their times:
    each command its own process, ``inc`` on the log, ``ok`` with its position; a
    failure is ``info`` (PySyncObj's reasons include a changed leader, after which the
    command may still be applied)."""
    for line in path.read_text().splitlines() if path.exists() else []:
        row = json_object(line.encode())
        if row is None or row.get("kind") not in ("call", "ok", "fail") or "t" not in row:
            continue
        kind = {"call": "invoke", "ok": "ok", "fail": "info"}[row["kind"]]
        value = row.get("pos") if kind == "ok" else None
        process = f"{row.get('origin')}.{row.get('seq')}"
        out = {"process": process, "type": kind, "f": "inc", "value": value, "time": row["t"]}
        yield float(row["t"]), json.dumps(out) + "\n"


def client_history(paths: Sequence[Path], out: Path) -> int:
    """The clients' history of every replica log, merged by time into ``out`` (JSON
    Lines, for ``mailroom check --model counter``); the rows written."""
    count = 0
    with out.open("w") as dest:
        for _, text in heapq.merge(*(_client_rows(p) for p in paths), key=lambda r: r[0]):
            dest.write(text)
            count += 1
    return count


def check_clients(history: Path) -> tuple[str, str]:
    """``mailroom check --model counter`` on ``history``: its verdict (linearizable, not
    linearizable, unknown or unusable) and the first line it printed."""
    cmd = [sys.executable, "-m", "mailroom", "check", "--model", "counter", "--engine", "local"]
    done = subprocess.run(
        [*cmd, str(history)], capture_output=True, text=True, timeout=1800, check=False
    )
    verdict = {0: "linearizable", 1: "not linearizable", 3: "unknown"}.get(done.returncode)
    said = (done.stdout or done.stderr).strip().splitlines()
    return verdict or "unusable", said[0] if said else ""


@attrs.define
class RaftGroup:
    """``n`` PySyncObj replicas with their clients, in ``folder``."""

    n: int
    folder: Path
    count: int = 400
    interval: float = 0.05
    port: int = PORT
    name: str = "pysyncobj"
    addresses: list[str] = attrs.field(factory=list)

    def path(self, name: str, i: int) -> Path:
        return self.folder / f"{name}{i}"

    def prepare(self, addresses: list[str]) -> None:
        self.addresses = list(addresses)

    def command(self, i: int, restart: bool) -> list[str]:
        me = f"{self.addresses[i]}:{self.port}"
        partners = ",".join(f"{a}:{self.port}" for j, a in enumerate(self.addresses) if j != i)
        return [
            sys.executable,
            "-m",
            "mailroom.testing.nemesis",
            "replica",
            "--id",
            str(i),
            "--self",
            me,
            "--partners",
            partners,
            "--log",
            str(self.path("raft", i)),
            "--dir",
            str(self.path("state", i)),
            "--count",
            str(self.count),
            "--interval",
            str(self.interval),
        ]

    def progress(self) -> Progress:
        return Progress.of([self.path("raft", i) for i in range(self.n)], raft_record, self.count)

    def settled(self, progress: Progress) -> bool:
        progress.poll()
        done = all(progress.sends.get(i, 0) >= 1 for i in range(self.n))
        called = all(progress.sent.get(i, 0) >= self.count for i in range(self.n))
        return done and called and progress.idle_for() > 5.0

    def incarnations(self) -> list[Incarnation]:
        return [inc for i in range(self.n) for inc in read_raft_log(self.path("raft", i), i)]

    def verdict(self) -> Verdict:
        incs = self.incarnations()
        counts, notes, acked, lost = judge_raft(incs)
        trace = self.folder / "raft-trace.jsonl"
        trace.write_text("".join(json.dumps(r) + "\n" for r in to_trace(incs, self.n)))
        checked, shown = run_check([trace], ["integrity", "total"], self.folder / "check")
        logs = [self.folder / f"out{i}.log" for i in range(self.n)]
        truncations = sum(len(TRUNCATING.findall(p.read_text())) for p in logs if p.exists())
        if truncations:
            notes.append(
                f"PySyncObj logged 'truncating already-applied log entries' {truncations} time(s)"
            )
        history = self.folder / "clients.jsonl"
        if client_history([self.path("raft", i) for i in range(self.n)], history):
            verdict, said = check_clients(history)
            counts["clients not linearizable"] = int(verdict == "not linearizable")
            notes.append(f"black-box: {said} (mailroom check --model counter {history})")
        return Verdict(
            ["integrity", "total", *counts],
            {**checked, **counts},
            acked,
            lost,
            0,
            0,
            0,
            notes,
            shown,
        )


__all__ = [
    "PORT",
    "Incarnation",
    "RaftGroup",
    "check_clients",
    "client_history",
    "judge_raft",
    "raft_record",
    "read_raft_log",
    "to_trace",
]
