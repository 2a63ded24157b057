"""The trace schema: one event per row (docs/story.md, "The design").

``kind`` is "send", "receive" (a packet carrying the message reached the
process) or "deliver" (the endpoint delivered it to the application). A runtime
writes a deliver event before it hands the message over (persist, then act): a
process killed between the two hands it again when restarted from its checkpoint
(docs/runtime-internals.md, "Traces"), so a trace never records less than the application
will have been handed, and a killed process's trace may show one step more than
its application saw before the kill. ``seq`` is the event's position
in its process's history, from 1. ``dest`` is the message's destination set
(one pid for unicast, every pid for a broadcast). ``vc`` is an optional sparse
vector timestamp {pid: counter}.

Group membership adds kind "view": the process installs view ``view`` whose
members are ``dest`` (``message`` is [0, view id], ``sender`` the process itself);
and ``view`` on send and deliver events names the view the event happened in
(None when the run has no membership).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import attrs

from mailroom.core.errors import MailroomError
from mailroom.core.messages import MessageId
from mailroom.core.wire import plain

KINDS = ("send", "receive", "deliver", "view")
#: The largest number a trace may hold (every column is a 64-bit integer in Parquet and Spark).
MAX_NUMBER = 2**63 - 1
#: A UTF-16 surrogate on its own: JSON can spell one (``\\ud800``), UTF-8 text cannot hold it.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class TraceError(MailroomError, ValueError):
    """A trace row is malformed; the message names the row and the field."""


def lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate (not text that can be printed or stored)."""
    return not text.isascii() and _LONE_SURROGATE.search(text) is not None


def _too_large(row: dict[str, Any], vc: dict[int, Any] | None) -> str | None:
    """The first field holding a number above ``MAX_NUMBER``, or None."""
    for name in ("process", "seq", "sender", "view"):
        if type(row.get(name)) is int and row[name] > MAX_NUMBER:
            return name
    if any(x > MAX_NUMBER for x in row["message"]):
        return "message"
    if any(d > MAX_NUMBER for d in row["dest"]):
        return "dest"
    if vc and any(k > MAX_NUMBER or v > MAX_NUMBER for k, v in vc.items()):
        return "vc"
    return None


def _dest(value: Iterable[int]) -> tuple[int, ...]:
    return tuple(value)


@attrs.frozen
class Event:
    run: str
    process: int
    seq: int
    kind: str
    message: MessageId
    sender: int
    dest: tuple[int, ...] = attrs.field(converter=_dest)
    vc: dict[int, int] | None = attrs.field(default=None, eq=False, hash=False)
    time: float | None = attrs.field(default=None, eq=False)
    payload: Any = attrs.field(default=None, eq=False, hash=False)
    view: int | None = attrs.field(default=None)

    def to_dict(self) -> dict[str, Any]:
        row: dict[str, Any] = {
            "run": self.run,
            "process": self.process,
            "seq": self.seq,
            "kind": self.kind,
            "message": [self.message.origin, self.message.seq],
            "sender": self.sender,
            "dest": list(self.dest),
        }
        if self.vc is not None:
            row["vc"] = {str(k): v for k, v in sorted(self.vc.items())}
        if self.time is not None:
            row["time"] = self.time
        if self.payload is not None:  # a packet carried as the payload becomes JSON data too
            row["payload"] = plain(self.payload)
        if self.view is not None:
            row["view"] = self.view
        return row

    @classmethod
    def from_dict(cls, row: object) -> Event:
        """Parse one row; TraceError names the first thing that is wrong."""
        if not isinstance(row, dict):
            raise TraceError(f"a row must be an object, got {type(row).__name__}")
        for name in ("run", "process", "seq", "kind", "message", "sender", "dest"):
            if name not in row:
                raise TraceError(f"missing field {name!r}")
        kind = row["kind"]
        if kind not in KINDS:
            raise TraceError(f"unknown kind {kind!r} (expected one of {', '.join(KINDS)})")
        for name in ("process", "seq", "sender"):
            if type(row[name]) is not int or row[name] < 0:
                raise TraceError(f"field {name!r} must be a non-negative integer")
        message = row["message"]
        if (
            not isinstance(message, list | tuple)
            or len(message) != 2
            or any(type(x) is not int or x < 0 for x in message)
        ):
            raise TraceError("field 'message' must be [origin, seq]")
        dest = row["dest"]
        if isinstance(dest, int) and not isinstance(dest, bool):
            dest = [dest]
        if not isinstance(dest, list) or any(type(d) is not int or d < 0 for d in dest):
            raise TraceError("field 'dest' must be a pid or a list of pids")
        vc = row.get("vc")
        if vc is not None:
            try:
                vc = {int(k): v for k, v in vc.items()}
            except (AttributeError, ValueError):
                raise TraceError("field 'vc' must map pids to counters") from None
            if any(type(v) is not int or v < 0 or k < 0 for k, v in vc.items()):
                raise TraceError("field 'vc' must map pids to non-negative counters")
        time = row.get("time")
        if time is not None and (isinstance(time, bool) or not isinstance(time, int | float)):
            raise TraceError("field 'time' must be a number")
        view = row.get("view")
        if view is not None and (type(view) is not int or view < 0):
            raise TraceError("field 'view' must be a non-negative integer")
        if kind == "view" and view is None:
            raise TraceError("a 'view' event needs field 'view' (the view id)")
        big = _too_large({**row, "dest": dest}, vc)
        if big is not None:
            raise TraceError(f"field {big!r} holds a number above 2**63 - 1")
        run = str(row["run"])
        if lone_surrogate(run):
            raise TraceError("field 'run' is not text (it holds a lone surrogate)")
        return cls(
            run=run,
            process=row["process"],
            seq=row["seq"],
            kind=kind,
            message=MessageId(message[0], message[1]),
            sender=row["sender"],
            dest=dest,
            vc=vc,
            time=None if time is None else float(time),
            payload=row.get("payload"),
            view=view,
        )
