"""JSON Lines traces: an optional header line, then one event object per line.

Reading has a budget: a line longer than ``MAX_LINE_BYTES`` or a payload nested
deeper than ``MAX_DEPTH`` is a ``TraceError`` naming the file and line, so a
hostile or wrong file (``/dev/zero``, a million nested brackets, bytes that are
not UTF-8, a number of thousands of digits, a lone surrogate escape such as
``"\\ud800"``) gets a one-line error, never a traceback or an unbounded read.
``parse_row`` is the one place a line becomes JSON (the Spark loader uses it too).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from mailroom.trace.events import Event, TraceError, lone_surrogate
from mailroom.trace.header import TraceHeader, header_of_row

#: The longest line a reader accepts (an event is usually under 200 bytes).
MAX_LINE_BYTES = 1 << 20
#: The deepest nesting of lists and objects a row's payload may have.
MAX_DEPTH = 64


def write_jsonl(
    events: Iterable[Event], path: str | Path, *, header: TraceHeader | None = None
) -> int:
    """Write events to ``path``, after the header line if one is given; return the count."""
    count = 0
    with open(path, "w", encoding="utf-8") as out:
        if header is not None:
            out.write(header.to_line() + "\n")
        for event in events:
            out.write(json.dumps(event.to_dict(), separators=(",", ":")) + "\n")
            count += 1
    return count


def _too_deep(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists and objects deeper than ``limit`` (iteratively)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, list | dict):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((c, depth + 1) for c in children if isinstance(c, list | dict))
    return False


#: A JSON escape of a UTF-16 surrogate (lone, or half of a pair).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _strings(value: Any) -> Iterator[str]:
    """Every string in a parsed JSON value, keys included (iteratively)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def parse_row(line: str) -> Any:
    """One line's JSON; TraceError saying why it cannot be a row (not JSON, nested too
    deeply, a number too long to read, a lone surrogate that no text can hold)."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise TraceError(f"not JSON ({exc.msg})") from None
    except RecursionError:
        raise TraceError("nested too deeply") from None
    except ValueError:  # an integer longer than Python reads
        limit = sys.get_int_max_str_digits()
        raise TraceError(f"not JSON (a number longer than {limit} digits)") from None
    escaped = "\\u" in line and _SURROGATE_ESCAPE.search(line) is not None
    if escaped and any(lone_surrogate(s) for s in _strings(row)):
        raise TraceError("not text: a lone surrogate escape (such as \\ud800)")
    return row


def iter_rows(path: str | Path, max_line: int = MAX_LINE_BYTES) -> Iterator[tuple[int, Any]]:
    """(line number, parsed JSON) for every non-blank line, within the budgets."""
    with open(path, "rb") as src:
        lineno = 0
        while True:
            raw = src.readline(max_line + 1)
            if not raw:
                return
            lineno += 1
            if len(raw) > max_line:
                raise TraceError(f"{path}:{lineno}: line longer than {max_line} bytes")
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise TraceError(f"{path}:{lineno}: not UTF-8 text") from None
            if not line.strip():
                continue
            try:
                row = parse_row(line)
            except TraceError as exc:
                raise TraceError(f"{path}:{lineno}: {exc}") from None
            yield lineno, row


def read_jsonl_trace(
    path: str | Path, max_line: int = MAX_LINE_BYTES
) -> tuple[TraceHeader | None, list[Event]]:
    """The header (if the first line is one) and the events of a JSON Lines trace.

    A row with a "header" key is never an event; only the first line's is kept.
    TraceError names the first bad line and why.
    """
    header: TraceHeader | None = None
    events = []
    first = True
    for lineno, row in iter_rows(path, max_line):
        try:
            found = header_of_row(row)
            if found is not None:
                if first:
                    header = found
                first = False
                continue
            first = False
            if isinstance(row, dict) and _too_deep(row.get("payload"), MAX_DEPTH):
                raise TraceError(f"payload nested deeper than {MAX_DEPTH}")
            events.append(Event.from_dict(row))
        except TraceError as exc:
            raise TraceError(f"{path}:{lineno}: {exc}") from None
    return header, events


def read_jsonl(path: str | Path) -> list[Event]:
    """Read a JSON Lines trace's events; TraceError names the first bad line and why."""
    return read_jsonl_trace(path)[1]
