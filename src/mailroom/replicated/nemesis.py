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
appended) and its client goes on after the calls it made. With ``--client-history``
and ``--local-history`` the client also records what it saw as JSON Lines
(``mailroom.linearizable``): its calls, an ordered ``get`` as every fourth, and a
local read before each. ``judge``: the history checker on every member's file, and
with ``--clients`` (and ``--local``) the black-box check of those histories (the
``dict`` model), its findings as JSON. Run by
``mailroom.testing.nemesis.replicated`` as commands (the layers below cannot import
this one)::

    python -m mailroom.replicated.nemesis member --pid 0 --peers peers.toml \\
        --history history0 --checkpoint ckpt0 --trace trace0
    python -m mailroom.replicated.nemesis judge --out judge.json \\
        --clients client0 client1 client2 --local local0 local1 local2 -- history0 ...
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from mailroom.core.errors import LocalError, MailroomError
from mailroom.linearizable import (
    MODELS,
    HistoryRecorder,
    check_calls,
    merge_histories,
    pair,
    verdict_lines,
)
from mailroom.linearizable import (
    read_history as read_client_history,
)
from mailroom.net import PeerTable, load_key
from mailroom.net.membership import group_endpoint
from mailroom.replicated.aiohost import AsyncReplica
from mailroom.replicated.batteries import ReplDict
from mailroom.replicated.history import HistoryFile, check_history, read_history
from mailroom.replicated.replica import OutcomeUnknown

#: Shared keys the clients' calls contend on (few, so results depend on the order).
KEYS = 7


def close_killed_life(path: Path, pid: int) -> int:
    """Drop a line cut short at the end of ``path``; if the last life there did not end
    (killed), append its ``crash`` row. Returns the calls this member made before."""
    rows = [json.loads(line) for line in complete_lines(path)]
    mine = [r for r in rows if r.get("replica") == pid]
    if mine and mine[-1].get("row") not in ("out", "crash"):
        with path.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"row": "crash", "replica": pid, "inc": mine[-1]["inc"]}) + "\n")
    return sum(1 for r in mine if r.get("row") == "call")


def complete_lines(path: Path) -> list[str]:
    """The complete lines of ``path``; a line cut short at its end (by a ``kill -9``) is
    dropped from the file."""
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    complete = text[: text.rfind("\n") + 1]
    if complete != text:
        path.write_text(complete, encoding="utf-8")
    return [line for line in complete.splitlines() if line.strip()]


def operation(pid: int, k: int, reads: bool = False) -> tuple[str, list[Any]]:
    """Client call ``k`` of member ``pid``: its method and arguments. With ``reads``
    (a recorded client history) every fourth call is an ordered ``get``."""
    value = f"{pid}.{k}"
    if reads and k % 4 == 3:
        return "get", [f"k{k % KEYS}"]
    if k % 3 == 0:
        return "setdefault", [f"s{k % KEYS}", value]
    if k % 3 == 1:
        return "set", [f"k{k % KEYS}", value]
    return "pop", [f"k{(k + 3) % KEYS}", None]


@attrs.define
class ClientRecord:
    """The member's client history for the black-box check (``mailroom.linearizable``):
    its replicated calls and ordered reads in ``ordered``, its local reads in ``local``
    (one recorder each, one clock: they merge by time), each call its own process."""

    ordered: HistoryRecorder
    local: HistoryRecorder

    @classmethod
    def open(cls, ordered: Path, local: Path, pid: int) -> ClientRecord:
        """Recorders appending to the files, with process ids no earlier life used."""
        rows = sum(len(complete_lines(p)) for p in (ordered, local))
        prefix = f"{pid}.{rows}."  # rows grow with every life that called
        return cls(
            HistoryRecorder(ordered, prefix=prefix), HistoryRecorder(local, prefix=f"{prefix}r")
        )

    def local_read(self, replica: AsyncReplica, key: str) -> None:
        """A local read, recorded (a replica that is not a member now reads nothing)."""
        if replica.replica.view is None:
            return
        client = self.local.client()
        client.invoke("get", key)
        client.ok(replica.local.get(key))

    def close(self) -> None:
        self.ordered.close()
        self.local.close()


async def one_call(
    replica: AsyncReplica, pid: int, k: int, record: ClientRecord | None = None
) -> None:
    """One call; its outcome is in the history (a result row), whatever it is, and in
    the client history if one is recorded (``info`` when unknown or cut short)."""
    method, args = operation(pid, k, reads=record is not None)
    if record is not None:
        record.local_read(replica, f"k{(k + 1) % KEYS}")
    client = None if record is None else record.ordered.client()
    if client is not None:
        client.invoke(method, args[0], args[1] if len(args) > 1 else None)
    outcome, result = "info", None
    try:
        if method == "get":
            result = await replica.ordered.get(*args)
        else:
            result = await replica.call(method, *args)
        outcome = "ok"
    except OutcomeUnknown:
        pass  # the replica left the group or closed first: it may or may not happen
    except LocalError:
        outcome = "fail"  # refused before it was sent, or it raised: it changed nothing
    except MailroomError:
        pass
    except asyncio.CancelledError:
        pass  # stopped with the call in flight: it may or may not happen
    finally:
        if client is not None:
            client.complete(outcome, result if outcome == "ok" else None)


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
    record = None
    if args.client_history:
        record = ClientRecord.open(Path(args.client_history), Path(args.local_history), args.pid)
    await replica.start()
    calls: set[asyncio.Task[None]] = set()
    try:
        for k in range(made + 1, args.count + 1):  # bounded by --count
            if stop.is_set():
                break
            task = asyncio.create_task(one_call(replica, args.pid, k, record))
            calls.add(task)
            task.add_done_callback(calls.discard)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), args.interval)
        await stop.wait()
    finally:
        for task in list(calls):
            task.cancel()
        if calls:  # the cancelled calls record their outcome (info) before the files close
            await asyncio.gather(*calls, return_exceptions=True)
        await replica.close()
        history.close()
        if record is not None:
            record.close()
    return 0


def check_clients(paths: Sequence[str], out: Path) -> dict[str, Any]:
    """The clients' histories ``paths`` merged by time into ``out`` and checked black-box
    against the ``dict`` model: the verdict, its size, time and first lines."""
    start = time.perf_counter()
    try:
        rows = merge_histories(paths, out)
        calls = pair(read_client_history(out, "jsonl"), source=str(out))
        verdict = check_calls(calls, MODELS["dict"])
    except (MailroomError, OSError) as exc:  # times that go back (a clock fault that
        # moved the monotonic clock), or a bug: said in the notes, the rest is kept
        return {"history": str(out), "verdict": "unreadable", "report": [str(exc)[:300]]}
    return {
        "history": str(out),
        "rows": rows,
        "verdict": verdict.verdict,
        "operations": verdict.calls,
        "keys": len(verdict.keys),
        "failing keys": sum(1 for k in verdict.keys if k.verdict == "not linearizable"),
        "seconds": round(time.perf_counter() - start, 3),
        "report": verdict_lines(verdict)[:12],
    }


def judge(
    paths: Sequence[str],
    out: Path,
    clients: Sequence[str] = (),
    local: Sequence[str] = (),
) -> int:
    """The history check of ``paths`` as JSON in ``out``: 0 if it holds, 1 if not. With
    ``clients``, their histories (calls and ordered reads) must be linearizable too
    (histories that cannot be merged or read are reported, not counted); ``local``
    (local reads) are checked with them, and stale reads reported, not counted:
    sequential consistency allows them."""
    rows = read_history(paths)
    report = check_history(rows, ReplDict, safe=True)
    counts: dict[str, int] = {}
    for problem in report.problems:
        counts[problem.property] = counts.get(problem.property, 0) + 1
    lost = {p.op for p in report.problems if p.property == "lost"}
    ends = final_counts(rows)
    data: dict[str, Any] = {
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
    if clients:
        data["ordered"] = check_clients(clients, out.with_name("clients.jsonl"))
        if data["ordered"]["verdict"] == "not linearizable":
            counts["clients not linearizable"] = 1  # unreadable ones: in the notes
        if local:
            data["local"] = check_clients([*clients, *local], out.with_name("local-reads.jsonl"))
    out.write_text(json.dumps(data, indent=1))
    return 0 if report.ok and "clients not linearizable" not in counts else 1


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
    m.add_argument(
        "--client-history",
        help="record the client's calls and ordered reads here (JSON Lines, for mailroom check"
        " --model dict); its local reads go to --local-history",
    )
    m.add_argument("--local-history", help="the client's local reads (with --client-history)")
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
    j.add_argument("--clients", nargs="*", default=[], help="the clients' histories (merged)")
    j.add_argument("--local", nargs="*", default=[], help="the clients' local reads")
    j.add_argument("paths", nargs="+")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "judge":
            return judge(args.paths, Path(args.out), args.clients, args.local)
        if bool(args.client_history) != bool(args.local_history):
            raise LocalError("--client-history and --local-history go together")
        return asyncio.run(run_member(args))
    except (LocalError, MailroomError, OSError, ValueError) as exc:
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
