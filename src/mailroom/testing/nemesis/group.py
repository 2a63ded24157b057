"""mailroom's own group under the nemesis: ``python -m mailroom.net`` members.

Member ``i`` runs the runtime's scripted workload inside a ``Group`` (``--members``
at the start, ``--join`` with its checkpoint after a ``kill -9``), broadcasting
``count`` messages ``interval`` apart; its trace is its client's history (every
send, every delivery, every view). At the end, ``mailroom check`` judges the
traces for what the protocol promises plus the view properties, and the final
states (what each member's application holds: the state it received when it last
joined, then what it delivered) are compared.
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path
from typing import Any

import attrs

import mailroom.protocols  # noqa: F401  (registers the protocols)
from mailroom.core.registry import PROTOCOLS
from mailroom.testing.nemesis.progress import Progress, trace_record
from mailroom.testing.nemesis.verdict import MessageKey, Verdict, judge_states, run_check
from mailroom.trace import VIEW_PROPERTIES, Event, read_jsonl

#: The group key of every run (the runs' namespaces are their own; this is no secret).
KEY = "nemesis-group-key-0123456789abcdef0123456789abcdef"
PORT = 7000


@attrs.define
class MailroomGroup:
    """``n`` members of ``mailroom.net`` running ``protocol`` in a group, in ``folder``."""

    protocol: str
    n: int
    folder: Path
    count: int = 400
    interval: float = 0.05
    heartbeat: float = 0.1
    suspect_after: float = 1.0
    rto: float = 0.2
    port: int = PORT
    #: more arguments for every member (``-v``, the default, logs its connections)
    extra: list[str] = attrs.field(factory=lambda: ["-v"])

    @property
    def name(self) -> str:
        return f"mailroom {self.protocol}"

    def path(self, name: str, i: int) -> Path:
        return self.folder / f"{name}{i}"

    def prepare(self, addresses: list[str]) -> None:
        (self.folder / "group.key").write_text(KEY)
        lines = ['key_file = "group.key"', "[peers]"]
        lines += [f'{i} = "{a}:{self.port}"' for i, a in enumerate(addresses)]
        (self.folder / "peers.toml").write_text("\n".join(lines) + "\n")

    def workload(self, i: int) -> list[str]:
        """The options every member's command takes alike: who it is, its peers, its
        protocol, its client's traffic and its failure detector."""
        return [
            "--pid",
            str(i),
            "--peers",
            str(self.folder / "peers.toml"),
            "--protocol",
            self.protocol,
            "--count",
            str(self.count),
            "--interval",
            str(self.interval),
            "--heartbeat",
            str(self.heartbeat),
            "--suspect-after",
            str(self.suspect_after),
        ]

    def command(self, i: int, restart: bool) -> list[str]:
        others = ",".join(str(j) for j in range(self.n) if j != i)
        everyone = ",".join(map(str, range(self.n)))
        membership = ["--join", others] if restart else ["--members", everyone]
        return [
            sys.executable,
            "-m",
            "mailroom.net",
            *self.workload(i),
            "--rto",
            str(self.rto),
            "--trace",
            str(self.path("trace", i)),
            "--checkpoint",
            str(self.path("ckpt", i)),
            "--stats",
            str(self.path("stats", i)),
            *membership,
            *self.extra,
        ]

    def progress(self) -> Progress:
        return Progress.of([self.path("trace", i) for i in range(self.n)], trace_record, self.count)

    def settled(self, progress: Progress) -> bool:
        """Every member sent its ``count`` and no trace grew for a while."""
        progress.poll()
        quiet = max(2.0, 3 * self.suspect_after)
        done = all(progress.sends.get(i, 0) >= self.count for i in range(self.n))
        return done and progress.idle_for() > quiet

    def properties(self) -> list[str]:
        return [*PROTOCOLS[self.protocol][2], *VIEW_PROPERTIES]

    def verdict(self) -> Verdict:
        """``mailroom check`` on the traces, then the final states compared."""
        traces = [self.path("trace", i) for i in range(self.n)]
        counts, shown = run_check(traces, self.properties(), self.folder / "check")
        events = {i: list(read_jsonl(t)) for i, t in enumerate(traces) if t.exists()}
        states, notes = final_states(events, {i: self._stats(i) for i in range(self.n)})
        acked = {
            (e.message.origin, e.message.seq)
            for es in events.values()
            for e in es
            if e.kind == "deliver" and e.process == e.message.origin
        }
        total = "total" in PROTOCOLS[self.protocol][2]
        missing, divergent, duplicates, more = judge_states(states, acked, total)
        kept = delivered_by_survivors(events, set(missing))
        if kept:
            more.append(
                f"{len(kept)} lost message(s) had been delivered by a member that went"
                f" on into the next view, e.g. {sorted(kept)[:5]}"
            )
        if len(missing) > len(kept):
            more.append(
                f"{len(missing) - len(kept)} of those held by no member were lost "
                "with a minority: delivered only by members then excluded or "
                "killed (a Group delivers non-uniformly: not a violation)"
            )
        return Verdict(
            self.properties(),
            counts,
            len(acked),
            len(kept),
            len(missing) - len(kept),
            divergent,
            duplicates,
            notes + more,
            shown,
        )

    def _stats(self, i: int) -> dict[str, Any]:
        try:
            data = json.loads(self.path("stats", i).read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}


def delivered_by_survivors(
    events: dict[int, list[Event]], messages: set[MessageKey]
) -> set[MessageKey]:
    """Those of ``messages`` that some member delivered in a view V and then installed
    V's successor (the next view id installed in the run): it went on with the group."""
    ids = sorted({e.view for es in events.values() for e in es if e.kind == "view" and e.view})
    succ = dict(itertools.pairwise(ids))
    found: set[MessageKey] = set()
    for es in events.values():
        current: int | None = None
        pending: set[MessageKey] = set()
        for e in es:
            if e.kind == "view":
                if current is not None and succ.get(current) == e.view:
                    found |= pending
                current, pending = e.view, set()
            elif e.kind == "deliver" and (e.message.origin, e.message.seq) in messages:
                pending.add((e.message.origin, e.message.seq))
    return found


def final_states(
    events: dict[int, list[Event]], stats: dict[int, dict[str, Any]]
) -> tuple[dict[int, list[MessageKey]], list[str]]:
    """The application state of each member in the last view installed: the state it
    received when it last joined (``received_state`` in its stats) and then what it
    delivered after installing that view; a founder never excluded: all it delivered."""
    last = {i: [e for e in es if e.kind == "view"][-1:] for i, es in events.items()}
    top = max((v[0].view or 0 for v in last.values() if v), default=0)
    members = next((v[0].dest for v in last.values() if v and v[0].view == top), ())
    notes = []
    behind = [i for i, v in last.items() if not v or v[0].view != top]
    if behind:
        notes.append(f"not in the last view {top} {list(members)} at the end: P{behind}")
    states: dict[int, list[MessageKey]] = {}
    for i in members:
        es = events.get(i, [])
        received, at = stats.get(i, {}).get("received_state"), stats.get(i, {}).get("received_view")
        start = 0
        state: list[MessageKey] = []
        if received is not None and at is not None:
            views = [k for k, e in enumerate(es) if e.kind == "view" and e.view == at]
            start = views[-1] + 1 if views else len(es)
            state = [(int(o), int(s)) for o, s in received]
        state += [(e.message.origin, e.message.seq) for e in es[start:] if e.kind == "deliver"]
        states[i] = state
    return states, notes


__all__ = ["KEY", "PORT", "MailroomGroup", "delivered_by_survivors", "final_states"]
