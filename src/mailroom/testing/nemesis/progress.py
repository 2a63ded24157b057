"""What the clients have been told so far, read while the run goes on.

Each member's client history is a file that grows by whole lines (a mailroom
trace, or a PySyncObj replica's log); a ``Tail`` reads what was added since the
last look, starting again when the file was cut back (a member restarted from
its checkpoint cuts its trace to what the checkpoint counts). ``Progress`` keeps,
from every member's records, the highest message number each origin has sent and
which messages each member delivered; the recovery time after a fault is the
time until every running member delivered, from every running member still
sending, a message sent after the fault healed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

#: (kind, origin, seq): kind "send" or "deliver", the message's origin and number
Record = tuple[str, int, int]


class Tail:
    """The complete lines added to a file since the last ``read``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.restarted = False

    def read(self) -> list[bytes]:
        """New complete lines; ``restarted`` tells whether the file was cut back first."""
        self.restarted = False
        try:
            with self.path.open("rb") as f:
                f.seek(0, 2)
                size = f.tell()
                if size < self.offset:
                    self.offset, self.restarted = 0, True
                f.seek(self.offset)
                data = f.read(size - self.offset)
        except OSError:
            return []
        end = data.rfind(b"\n") + 1
        self.offset += end
        return [line for line in data[:end].split(b"\n") if line.strip()]


def json_object(line: bytes) -> dict[str, Any] | None:
    """A history line as a JSON object, or None (a line cut short, or not an object)."""
    try:
        row = json.loads(line)
    except ValueError:
        return None
    return row if isinstance(row, dict) else None


def trace_record(line: bytes) -> Record | None:
    """A mailroom trace line as a record (send or deliver), else None."""
    row = json_object(line) or {}
    kind = row.get("kind")
    msg = row.get("message") if kind in ("send", "deliver") else None
    if not isinstance(msg, list) or len(msg) != 2:
        return None
    return str(kind), int(msg[0]), int(msg[1])


@attrs.define
class Progress:
    """Sends and deliveries seen so far, per member, from their history files."""

    tails: list[Tail]
    parse: Callable[[bytes], Record | None]
    #: the messages each member's client sends in all
    count: int
    sent: dict[int, int] = attrs.field(factory=dict)
    sends: dict[int, int] = attrs.field(factory=dict)
    #: member -> origin -> the highest number it delivered from that origin
    latest: dict[int, dict[int, int]] = attrs.field(factory=dict)
    deliveries: dict[int, int] = attrs.field(factory=dict)
    grew_at: float = attrs.field(factory=time.monotonic)

    @classmethod
    def of(
        cls, paths: Iterable[Path], parse: Callable[[bytes], Record | None], count: int
    ) -> Progress:
        return cls([Tail(p) for p in paths], parse, count)

    def poll(self) -> None:
        """Read every history file's new lines."""
        for i, tail in enumerate(self.tails):
            lines = tail.read()
            if tail.restarted:
                self.sends[i] = 0
                self.latest[i] = {}
            if lines:
                self.grew_at = time.monotonic()
            got = self.latest.setdefault(i, {})
            for line in lines:
                rec = self.parse(line)
                if rec is None:
                    continue
                kind, origin, seq = rec
                if kind == "send":
                    self.sent[origin] = max(self.sent.get(origin, 0), seq)
                    self.sends[i] = self.sends.get(i, 0) + 1
                else:
                    got[origin] = max(got.get(origin, 0), seq)
                    self.deliveries[i] = self.deliveries.get(i, 0) + 1

    def marks(self) -> dict[int, int]:
        """The highest number each origin has sent so far (a copy)."""
        self.poll()
        return dict(self.sent)

    def caught_up(self, marks: dict[int, int], members: Sequence[int]) -> bool:
        """True once each of ``members`` delivered, from each of them that has not sent
        its whole workload (``count``) yet, a message sent after ``marks``."""
        self.poll()
        origins = self.sending(members)
        return all(
            self.latest.get(i, {}).get(j, 0) > marks.get(j, 0) for i in members for j in origins
        )

    def sending(self, members: Sequence[int]) -> list[int]:
        """Those of ``members`` whose client has not sent its whole workload yet."""
        return [j for j in members if self.sent.get(j, 0) < self.count]

    def idle_for(self) -> float:
        """Seconds since a history file last grew."""
        return time.monotonic() - self.grew_at

    def summary(self) -> dict[str, Any]:
        return {"sends": dict(self.sends), "deliveries": dict(self.deliveries)}


__all__ = ["Progress", "Record", "Tail", "json_object", "trace_record"]
