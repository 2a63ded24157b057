"""Recording a client history as JSON Lines, as ``read_history`` reads it.

A service's clients write one row when they invoke an operation and one when they
learn its outcome: ``ok`` (it happened, with this result), ``fail`` (it certainly did
not happen: the request never left, or the service refused it before doing anything)
or ``info`` (unknown: a timeout, a connection cut after the request went out, an
"outcome unknown" answer). ``HistoryRecorder`` writes the rows, one JSON object a
line, flushed at once, each with the time of a clock every recording process shares
(``time.monotonic``: one machine's monotonic clock, by default).

Jepsen's rule is kept for you: an ``info`` call stays open to the end of the history,
so the process that made it never invokes again; the ``Client`` handle takes a fresh
process id from its recorder for its next operation. Several recorders (one per OS
process) write several files; ``merge_histories`` interleaves them by time into one
history.
"""

from __future__ import annotations

import heapq
import json
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

from mailroom.core.errors import LocalError

#: the completions a client may record
OUTCOMES = ("ok", "fail", "info")


class HistoryRecorder:
    """Writes a client history's rows to ``out`` (a path, appended to, or an open
    text file). Thread-safe: a row is one ``write`` under a lock, flushed at once.
    Process ids are ``prefix`` followed by a counter (``prefix`` "" gives integers)."""

    def __init__(
        self,
        out: str | Path | TextIO,
        *,
        prefix: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._own = not hasattr(out, "write")
        self._out: TextIO = (
            open(out, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()
            if isinstance(out, str | Path)
            else out
        )
        self.prefix = prefix
        self.clock = clock
        self.rows = 0
        self._lock = threading.Lock()
        self._next = 0

    def fresh(self) -> Hashable:
        """A process id this recorder has not given before."""
        with self._lock:
            self._next += 1
            n = self._next - 1
        return f"{self.prefix}{n}" if self.prefix else n

    def client(self) -> Client:
        """A handle for one client that runs one operation at a time."""
        return Client(self)

    def row(self, process: Hashable, kind: str, f: str, key: Any, value: Any) -> None:
        """Write one row now (``kind``: invoke, ok, fail or info)."""
        data: dict[str, Any] = {"process": process, "type": kind, "f": f}
        if key is not None:
            data["key"] = key
        data["value"] = value
        with self._lock:
            data["time"] = self.clock()
            self._out.write(json.dumps(data) + "\n")
            self._out.flush()
            self.rows += 1

    def close(self) -> None:
        """Close the file if the recorder opened it."""
        if self._own:
            self._out.close()

    def __enter__(self) -> HistoryRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Client:
    """One client of a recorded history: ``invoke``, then one of ``ok``, ``fail``,
    ``info``. After ``info`` the next ``invoke`` is made as a fresh process (the open
    call stays open to the end, Jepsen's rule). LocalError on a second invocation while
    one is pending, or a completion with none pending: the history would be unreadable."""

    def __init__(self, recorder: HistoryRecorder) -> None:
        self.recorder = recorder
        self.process = recorder.fresh()
        self._pending: tuple[str, Any] | None = None

    def invoke(self, f: str, key: Any = None, value: Any = None) -> None:
        """Record the invocation of ``f`` on ``key`` with argument ``value``."""
        if self._pending is not None:
            why = f"process {self.process} invokes {f} while its {self._pending[0]} is pending"
            raise LocalError(why)
        self._pending = (f, key)
        self.recorder.row(self.process, "invoke", f, key, value)

    def complete(self, kind: str, value: Any = None) -> None:
        """Record the pending call's outcome ``kind`` (ok, fail or info) and result."""
        if kind not in OUTCOMES:
            raise LocalError(f"an outcome is one of {', '.join(OUTCOMES)}, not {kind!r}")
        if self._pending is None:
            raise LocalError(f"process {self.process} completes {kind} with nothing pending")
        (f, key), self._pending = self._pending, None
        self.recorder.row(self.process, kind, f, key, value)
        if kind == "info":
            self.process = self.recorder.fresh()

    def ok(self, value: Any = None) -> None:
        self.complete("ok", value)

    def fail(self, value: Any = None) -> None:
        self.complete("fail", value)

    def info(self, value: Any = None) -> None:
        self.complete("info", value)


def _rows(path: Path) -> Iterator[tuple[float, str]]:
    """A history file's complete rows with their times (a line cut short at the end, as
    a ``kill -9`` leaves it, is dropped); LocalError if the times go back."""
    last = float("-inf")
    with open(path, encoding="utf-8") as fh:
        for text in fh:
            if not text.endswith("\n") or not text.strip():
                continue
            try:
                row = json.loads(text)
            except ValueError:
                raise LocalError(f"{path}: not a JSON row: {text[:80]}") from None
            stamp = row.get("time") if isinstance(row, dict) else None
            if isinstance(stamp, bool) or not isinstance(stamp, int | float):
                raise LocalError(f"{path}: a row without a time cannot be merged: {text[:80]}")
            if stamp < last:
                raise LocalError(f"{path}: the times go back at {text[:80]}")
            last = float(stamp)
            yield last, text


def merge_histories(paths: Iterable[str | Path], out: str | Path) -> int:
    """Interleave the histories of ``paths`` (each in its own time order, as a
    recorder writes it) into one history ``out`` in time order; the rows written.
    The times must come from one clock (one machine's monotonic clock)."""
    streams = [_rows(Path(p)) for p in paths]
    count = 0
    with open(out, "w", encoding="utf-8") as dest:
        for _, text in heapq.merge(*streams, key=lambda r: r[0]):
            dest.write(text)
            count += 1
    return count


__all__ = ["OUTCOMES", "Client", "HistoryRecorder", "merge_histories"]
