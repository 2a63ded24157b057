"""The replicated objects (safe delivery on) under the nemesis.

Member ``i`` is ``python -m mailroom.replicated.nemesis member``: a ``ReplDict``
replica over ``mailroom.net`` in a ``Group(safe=True)`` (counting every member as
holders, or a majority: ``safe_quorum``), with its node's checkpoint
and trace, its client calling its own replica; its history file (one across its
restarts) is its client's history: every call, every result it was told (or
``unknown``), every operation its replica applied, every view. Restarted after a
``kill -9``, it resumes from its checkpoint and rejoins. Its client also records
its calls and ordered reads (``client{i}``) and local reads (``local{i}``) as JSON
Lines for the black-box check. At the end the replicated history checker judges
every file (nothing acknowledged lost, replicas' applied
sequences prefixes of one, results equal to a replay of that order, replicas alive
at the end equal) and ``mailroom check`` the nodes' traces (total order and views).
"""

from __future__ import annotations

import json
import subprocess
import sys

import attrs

from mailroom.testing.nemesis.group import MailroomGroup
from mailroom.testing.nemesis.progress import Progress, Record, json_object
from mailroom.testing.nemesis.verdict import Verdict, run_check


def history_record(line: bytes) -> Record | None:
    """A history row as a progress record: a call is a send, an apply a delivery (of
    the message carrying it: a batch's operations count as their message)."""
    row = json_object(line)
    if row is None or row.get("row") not in ("call", "apply"):
        return None
    op = row.get("op")
    if not isinstance(op, list) or len(op) not in (2, 3):
        return None
    return ("send" if row["row"] == "call" else "deliver"), int(op[0]), int(op[1])


@attrs.define
class ReplicatedGroup(MailroomGroup):
    """``n`` replicas of a ``ReplDict`` under safe delivery, their clients, in ``folder``."""

    sync: bool = True
    #: "all": an operation is applied once every member holds it; "majority": once a
    #: majority does (``Group(safe_quorum=...)``)
    safe_quorum: str = "all"

    @property
    def name(self) -> str:
        quorum = "" if self.safe_quorum == "all" else f", {self.safe_quorum}"
        return f"replicated {self.protocol} (safe{quorum})"

    def command(self, i: int, restart: bool) -> list[str]:
        # the same command either way: a checkpoint there is resumed from
        return [
            sys.executable,
            "-m",
            "mailroom.replicated.nemesis",
            "member",
            *self.workload(i),
            "--history",
            str(self.path("history", i)),
            "--checkpoint",
            str(self.path("ckpt", i)),
            "--trace",
            str(self.path("trace", i)),
            "--client-history",
            str(self.path("client", i)),
            "--local-history",
            str(self.path("local", i)),
            *([] if self.sync else ["--no-sync"]),
            "--safe-quorum",
            self.safe_quorum,
        ]

    def progress(self) -> Progress:
        paths = [self.path("history", i) for i in range(self.n)]
        return Progress.of(paths, history_record, self.count)

    def _existing(self, name: str) -> list[str]:
        return [str(p) for i in range(self.n) if (p := self.path(name, i)).exists()]

    def verdict(self) -> Verdict:
        """The history checker on the histories, the clients' histories checked
        black-box (``mailroom check --model dict``: calls and ordered reads must be
        linearizable; local reads may be stale), then ``mailroom check`` on the traces."""
        histories = [self.path("history", i) for i in range(self.n)]
        out = self.folder / "judge.json"
        cmd = [
            sys.executable,
            "-m",
            "mailroom.replicated.nemesis",
            "judge",
            "--out",
            str(out),
            "--clients",
            *self._existing("client"),
            "--local",
            *self._existing("local"),
            "--",
            *[str(h) for h in histories if h.exists()],
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False)
        notes: list[str] = []
        try:
            judged = json.loads(out.read_text())
        except (OSError, ValueError):
            judged = {"counts": {"unreadable": 1}, "lost": 0, "acknowledged": 0, "divergent": 0}
            notes.append(f"the history judge failed: {(done.stderr or done.stdout)[-300:]}")
        history = {f"history {k}": int(v) for k, v in judged["counts"].items()}
        traces = [self.path("trace", i) for i in range(self.n)]
        checked, shown = run_check(
            [t for t in traces if t.exists()], self.properties(), self.folder / "check"
        )
        notes += [str(p) for p in judged.get("problems", [])[:10]]
        notes += black_box_notes(judged)
        if judged.get("summary"):
            notes.append(f"history: {judged['summary']}; replicas end at {judged.get('ends')}")
        lost = int(judged["lost"])
        violations = {**checked, **{k: v for k, v in history.items() if k != "history lost"}}
        return Verdict(
            [*self.properties(), "history"],
            violations,
            int(judged["acknowledged"]),
            lost,
            0,
            int(judged["divergent"]),
            0,
            notes,
            shown,
        )


def black_box_notes(judged: dict[str, object]) -> list[str]:
    """One note per black-box check the judge made (its verdict, size and time)."""
    notes = []
    for name, what in (("ordered", "calls and ordered reads"), ("local", "with local reads")):
        found = judged.get(name)
        if isinstance(found, dict):
            notes.append(
                f"black-box, {what}: {found.get('verdict')} ({found.get('operations')} "
                f"operations on {found.get('keys')} keys, {found.get('failing keys')} failing, "
                f"{found.get('seconds')} s; mailroom check --model dict {found.get('history')})"
            )
    return notes


__all__ = ["ReplicatedGroup", "black_box_notes", "history_record"]
