"""A replicated object under the nemesis: one member with its client, and the judge.

``member``: member ``--pid`` of a ``ReplDict`` replicated over ``mailroom.net`` under
safe delivery (``Group(safe=True)``; ``--safe-quorum majority`` hands an operation over
once a majority holds it), with its node's checkpoint (``sync``: on disk
before an answer) and trace, recording its replica's history (``history.py``) in one
file across restarts. Its client makes ``--count`` calls ``--interval`` apart
without waiting for results (many in flight), whose results depend on the order
(``setdefault``, ``pop`` and ``set`` on a few shared keys). Started again after a
``kill -9``, it resumes from its checkpoint and rejoins as its next incarnation; it
first closes the killed life's history (a line cut short is dropped, a ``crash`` row
appended) and its client goes on after the calls it made. ``judge``: the history
checker on every member's file, its findings as JSON. Run by
``mailroom.testing.nemesis.replicated`` as commands (the layers below cannot import
this one)::

    python -m mailroom.replicated.nemesis member --pid 0 --peers peers.toml \\
        --history history0 --checkpoint ckpt0 --trace trace0
    python -m mailroom.replicated.nemesis judge --out judge.json history0 history1 history2
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mailroom.core.errors import LocalError, MailroomError
from mailroom.net import PeerTable, load_key
from mailroom.net.membership import group_endpoint
from mailroom.replicated.aiohost import AsyncReplica
from mailroom.replicated.batteries import ReplDict
from mailroom.replicated.history import HistoryFile, check_history, read_history

#: Shared keys the clients' calls contend on (few, so results depend on the order).
KEYS = 7


def close_killed_life(path: Path, pid: int) -> int:
    """Drop a line cut short at the end of ``path``; if the last life there did not end
    (killed), append its ``crash`` row. Returns the calls this member made before."""
    if not path.exists():
        return 0
    text = path.read_text(encoding="utf-8")
    complete = text[: text.rfind("\n") + 1]
    if complete != text:
        path.write_text(complete, encoding="utf-8")
    rows = [json.loads(line) for line in complete.splitlines() if line.strip()]
    mine = [r for r in rows if r.get("replica") == pid]
    if mine and mine[-1].get("row") not in ("out", "crash"):
        with path.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"row": "crash", "replica": pid, "inc": mine[-1]["inc"]}) + "\n")
    return sum(1 for r in mine if r.get("row") == "call")


def operation(pid: int, k: int) -> tuple[str, list[Any]]:
    """Client call ``k`` of member ``pid``: its method and arguments."""
    value = f"{pid}.{k}"
    if k % 3 == 0:
        return "setdefault", [f"s{k % KEYS}", value]
    if k % 3 == 1:
        return "set", [f"k{k % KEYS}", value]
    return "pop", [f"k{(k + 3) % KEYS}", None]


async def one_call(replica: AsyncReplica, pid: int, k: int) -> None:
    """One call; its outcome is in the history (a result row), whatever it is."""
    method, args = operation(pid, k)
    with contextlib.suppress(MailroomError, asyncio.CancelledError):
        await replica.call(method, *args)  # unknown or refused: the history says which


async def run_member(args: argparse.Namespace) -> int:
    """Serve as a member and run the client until SIGTERM."""
    history_path = Path(args.history)
    made = close_killed_life(history_path, args.pid)
    peers = PeerTable.load(args.peers)
    key = load_key(peers.key_file)
    n = peers.n
    detector = {"heartbeat": args.heartbeat, "suspect_after": args.suspect_after}
    endpoint = group_endpoint(
        args.protocol,
        args.pid,
        n,
        members=range(n),
        safe=True,
        safe_quorum=args.safe_quorum,
        **detector,
    )
    history = HistoryFile(history_path)
    others = [p for p in range(n) if p != args.pid]
    replica = AsyncReplica(
        ReplDict(),
        endpoint,
        peers,
        key,
        safe=True,
        history=history,
        checkpoint=args.checkpoint,
        trace=args.trace,
        sync=args.sync,
        rejoin=others,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await replica.start()
    calls: set[asyncio.Task[None]] = set()
    try:
        for k in range(made + 1, args.count + 1):  # bounded by --count
            if stop.is_set():
                break
            task = asyncio.create_task(one_call(replica, args.pid, k))
            calls.add(task)
            task.add_done_callback(calls.discard)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), args.interval)
        await stop.wait()
    finally:
        for task in list(calls):
            task.cancel()
        await replica.close()
        history.close()
    return 0


def judge(paths: Sequence[str], out: Path) -> int:
    """The history check of ``paths`` as JSON in ``out``: 0 if it holds, 1 if not."""
    rows = read_history(paths)
    report = check_history(rows, ReplDict, safe=True)
    counts: dict[str, int] = {}
    for problem in report.problems:
        counts[problem.property] = counts.get(problem.property, 0) + 1
    lost = {p.op for p in report.problems if p.property == "lost"}
    ends = final_counts(rows)
    data = {
        "counts": counts,
        "lost": len(lost),
        "acknowledged": report.acknowledged,
        "applied": report.applied,
        "lives": report.replicas,
        "ends": {f"P{r}.{i}": c for (r, i), c in sorted(ends.items())},
        "divergent": sum(1 for c in ends.values() if c != max(ends.values(), default=0)),
        "summary": report.summary(),
        "problems": [p.explain() for p in report.problems[:20]],
    }
    out.write_text(json.dumps(data, indent=1))
    return 0 if report.ok else 1


def final_counts(rows: Sequence[dict[str, Any]]) -> dict[tuple[int, int], int]:
    """Operations applied by each life that did not end (out or crash): the replicas alive
    at the end, whose states are equal if they applied as many (the order is checked)."""
    applied: dict[tuple[int, int], int] = {}
    last: dict[tuple[int, int], str] = {}
    for row in rows:
        life = (row["replica"], row["inc"])
        last[life] = row["row"]
        if row["row"] == "start":
            applied[life] = row["applied"]
        elif row["row"] == "apply":
            applied[life] = row["index"] + 1
        else:
            applied.setdefault(life, 0)
    return {life: c for life, c in applied.items() if last[life] not in ("out", "crash")}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m mailroom.replicated.nemesis", description=__doc__.split("\n")[0]
    )
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("member", help="one member and its client")
    m.add_argument("--pid", type=int, required=True)
    m.add_argument("--peers", required=True, help="the peer table (with key_file)")
    m.add_argument("--history", required=True, help="the replica's history (JSON Lines)")
    m.add_argument("--checkpoint", required=True)
    m.add_argument("--trace", help="the node's trace, for mailroom check")
    m.add_argument("--protocol", default="sequencer", choices=["sequencer", "skeen", "lamport"])
    m.add_argument("--count", type=int, default=400, help="calls the client makes")
    m.add_argument("--interval", type=float, default=0.05, help="pause between calls (s)")
    m.add_argument("--heartbeat", type=float, default=0.1)
    m.add_argument("--suspect-after", type=float, default=1.0)
    m.add_argument("--no-sync", dest="sync", action="store_false", help="no fsync per step")
    m.add_argument(
        "--safe-quorum",
        default="all",
        choices=["all", "majority"],
        help="apply an operation once every member holds it, or a majority",
    )
    j = sub.add_parser("judge", help="the history check of every member's file, as JSON")
    j.add_argument("--out", required=True)
    j.add_argument("paths", nargs="+")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "judge":
            return judge(args.paths, Path(args.out))
        return asyncio.run(run_member(args))
    except (LocalError, MailroomError, OSError, ValueError) as exc:
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
