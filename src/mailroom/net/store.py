"""A process's files: its checkpoint and its trace.

Rules, in words:

- A checkpoint is JSON: the endpoint's ``snapshot()``, the number of trace events
  recorded so far, and the application's own state. It is written to a
  temporary file in the same folder and renamed over the old one, so a reader
  (a restarted process) sees the old checkpoint or the new one, never half of
  one. The runtime writes it after every step that changed the endpoint and
  before the step's frames leave or its deliveries reach the application: what
  was acknowledged or delivered is never forgotten by a restart.
- The trace is JSON Lines in the schema of ``mailroom.trace``. Events are
  appended and flushed before the checkpoint that counts them; on restart,
  events beyond the checkpoint's count (written, then lost with the crash) are
  cut off, so each event appears once.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, Any

from mailroom.trace.events import Event


def write_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` via a temporary file and a rename."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        json.dump(data, out, separators=(",", ":"))
    os.replace(tmp, path)


def read_checkpoint(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    with open(path, encoding="utf-8") as src:
        data = json.load(src)
    if not isinstance(data, dict) or "endpoint" not in data:
        raise ValueError(f"{path} is not a mailroom.net checkpoint")
    return data


class TraceFile:
    """Appends events to a JSON Lines file; ``keep`` events survive from an earlier run."""

    def __init__(self, path: Path, keep: int = 0) -> None:
        self.path = path
        lines: list[str] = []
        if keep and path.exists():
            with open(path, encoding="utf-8") as src:
                lines = [line for line in src if line.strip()][:keep]
        self._out: IO[str] = open(path, "w", encoding="utf-8")  # noqa: SIM115
        self._out.writelines(lines)
        self.count = len(lines)
        self.dirty = False

    def write(self, event: Event) -> None:
        self._out.write(json.dumps(event.to_dict(), separators=(",", ":")) + "\n")
        self.count += 1
        self.dirty = True

    def flush(self) -> None:
        if self.dirty:
            self._out.flush()
            self.dirty = False

    def close(self) -> None:
        self._out.close()


__all__ = ["TraceFile", "read_checkpoint", "write_atomic"]
