"""One PySyncObj replica with its client, logging what it applies and what it was told.

The replicated object is a log: ``apply(origin, seq)`` appends a command to the
state machine and returns its position. The replica writes, one JSON object a
line, flushed at once (so a ``kill -9`` loses nothing written):

- ``{"kind": "start"}`` when it starts (a restart begins a new incarnation);
- ``{"kind": "apply", "pos": k, "origin": o, "seq": s}`` for each command its
  state machine applies, in order;
- ``{"kind": "call", "origin": i, "seq": s}`` before its client submits command
  (i, s), and ``{"kind": "ok", ..., "pos": k}`` or ``{"kind": "fail", ..., "err": e}``
  when the client is told the result;

each with ``t``, the machine's monotonic clock (the clients' history is merged by it).

The client submits ``--count`` commands ``--interval`` apart, without waiting for
results (many in flight), and after a restart goes on after the last one it
called. Needs ``pip install pysyncobj`` (the ``nemesis`` extra).

    python -m mailroom.testing.nemesis replica --id 0 --self 10.77.0.10:7100 \\
        --partners 10.77.0.11:7100,10.77.0.12:7100 --log raft0.jsonl --dir state0
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, SupportsIndex, TextIO


class ApplyLog:
    """The replica's log file: one JSON line per record, written and flushed under a lock."""

    def __init__(self, path: Path) -> None:
        self.lock = threading.Lock()
        self.file: TextIO = path.open("a", buffering=1)

    def write(self, **row: Any) -> None:
        """One row, with ``t``: this machine's monotonic clock, read under the lock (so
        the file is in time order; the clients' histories are merged by it)."""
        with self.lock:
            line = json.dumps({**row, "t": time.monotonic()}, separators=(",", ":"))
            self.file.write(line + "\n")
            self.file.flush()


def last_called(path: Path) -> int:
    """The highest command number this replica's client called before (0 if none)."""
    top = 0
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue  # a line cut by kill -9
            if isinstance(row, dict) and row.get("kind") == "call":
                top = max(top, int(row.get("seq", 0)))
    return top


def make_log_class() -> Any:
    """The replicated class (defined here so pysyncobj is imported only when used)."""
    from pysyncobj import SyncObj, replicated

    class AppliedLog(SyncObj):  # type: ignore[misc]
        def __init__(self, me: str, partners: list[str], conf: Any, journal: ApplyLog) -> None:
            self.journal = journal  # set before SyncObj: not part of the replicated state
            super().__init__(me, partners, conf)
            self.applied = 0

        @replicated  # type: ignore[untyped-decorator]
        def apply(self, origin: int, seq: int) -> int:
            self.applied += 1
            self.journal.write(kind="apply", pos=self.applied, origin=origin, seq=seq)
            return int(self.applied)

    return AppliedLog


def pause(seconds: float | SupportsIndex) -> None:
    """Sleep with ``select``: under libfaketime (clock faults) ``time.sleep`` fails and
    timed waits on locks hang, but a select timeout is relative and left alone."""
    select.select([], [], [], float(seconds))


def run(args: argparse.Namespace) -> int:
    if "faketime" in os.environ.get("LD_PRELOAD", ""):
        # PySyncObj's tick thread calls time.sleep, which libfaketime 0.9.10 breaks
        # (EINVAL when the monotonic clock is left alone): sleep with select instead
        time.sleep = pause
    from pysyncobj import SyncObjConf
    from pysyncobj.config import FAIL_REASON

    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    journal = ApplyLog(Path(args.log))
    start = last_called(Path(args.log)) + 1
    journal.write(kind="start")
    conf = SyncObjConf(
        journalFile=str(folder / "journal"),
        fullDumpFile=str(folder / "dump"),
        logCompactionMinEntries=args.compact_entries,
        logCompactionMinTime=args.compact_seconds,
        dynamicMembershipChange=False,
    )
    obj = make_log_class()(args.self, [p for p in args.partners.split(",") if p], conf, journal)
    stop: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))

    def told(seq: int) -> Any:
        def callback(result: Any, err: Any) -> None:
            if err == FAIL_REASON.SUCCESS:
                journal.write(kind="ok", origin=args.id, seq=seq, pos=result)
            else:
                journal.write(kind="fail", origin=args.id, seq=seq, err=int(err))

        return callback

    for seq in range(start, args.count + 1):  # bounded by --count
        pause(args.interval)
        if stop:
            break
        journal.write(kind="call", origin=args.id, seq=seq)
        obj.apply(args.id, seq, callback=told(seq))
    while not stop:  # until SIGTERM
        pause(0.1)
    obj.destroy()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mailroom.testing.nemesis replica")
    p.add_argument("--id", type=int, required=True, help="this replica's number")
    p.add_argument("--self", required=True, help="this replica's HOST:PORT")
    p.add_argument("--partners", required=True, help="the others' HOST:PORT, comma-separated")
    p.add_argument("--log", required=True, help="the JSON Lines log of applies and results")
    p.add_argument("--dir", required=True, help="folder for PySyncObj's journal and dump")
    p.add_argument("--count", type=int, default=400, help="commands the client submits")
    p.add_argument("--interval", type=float, default=0.05, help="pause between commands (s)")
    p.add_argument("--compact-entries", type=int, default=1000)
    p.add_argument("--compact-seconds", type=float, default=15.0)
    args = p.parse_args(argv)
    try:
        import pysyncobj  # noqa: F401
    except ImportError:
        print("error: needs pysyncobj (pip install 'mailroom[nemesis]')", file=sys.stderr)
        return 2
    return run(args)


__all__ = ["ApplyLog", "last_called", "main", "make_log_class", "pause"]
