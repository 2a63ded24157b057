"""JSON Lines traces: one event object per line."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from mailroom.trace.events import Event, TraceError


def write_jsonl(events: Iterable[Event], path: str | Path) -> int:
    """Write events to ``path``; return how many were written."""
    count = 0
    with open(path, "w", encoding="utf-8") as out:
        for event in events:
            out.write(json.dumps(event.to_dict(), separators=(",", ":")) + "\n")
            count += 1
    return count


def read_jsonl(path: str | Path) -> list[Event]:
    """Read a JSON Lines trace; TraceError names the first bad line and why."""
    events = []
    with open(path, encoding="utf-8") as src:
        for lineno, line in enumerate(src, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TraceError(f"{path}:{lineno}: not JSON ({exc.msg})") from None
            try:
                events.append(Event.from_dict(row))
            except TraceError as exc:
                raise TraceError(f"{path}:{lineno}: {exc}") from None
    return events
