"""A process's files: its checkpoint (a base snapshot plus a log of steps) and its trace.

Rules, in words:

- A checkpoint is two files. ``path`` holds a base: the endpoint's
  ``snapshot()``, the protocol stack it belongs to (``stack``, e.g.
  ``["Reliable", "CBCAST"]``), the trace position, the counters, the
  application's state and an ``epoch``. ``path.log`` is an append-only log:
  a head line, then one line per step with the step's inputs (packets received,
  payloads sent, timer ticks) and the counters after it. The endpoints are
  deterministic state machines, so the base plus the log's inputs, replayed, is
  the state after the last step: a step costs the size of its inputs, not of the
  whole state.
- Each log line is ``crc32 json`` and ends in a newline. The head line names the
  epoch the log continues and has a fixed width: after each append it is
  rewritten in place with the number of steps logged (``steps``), this process's
  message count (``sent``) and group incarnation (``incarnation``), before the
  node acts on the steps. So ``steps`` counts the steps acted on, at most.
- A last line that is cut short or fails its CRC was being written when the
  process died, and was never acted on: it is dropped. Any other bad line is a
  damaged file. A log with fewer complete steps than its head counts was cut (a
  disk fault, an operator's mistake): steps acted on are gone, and resuming
  would hand their deliveries again and reuse their message ids, so the reader
  reports it (``Saved.cut``) and the node refuses to resume. A log whose head is
  gone altogether (for a base that promises a head: ``log_format`` 2) was cut
  too, and nothing says how far.
- Compaction writes a new base (epoch + 1) to a temporary file, ``fsync``s
  it, renames it over the old one, then writes the new log (its head) to a
  temporary file and renames that over the old log. A log whose epoch is not the
  base's (a crash between the two) is already in the base and is ignored.
  Compaction runs when the log is larger than the base (and at least ``MIN_LOG``
  bytes), so it adds a constant factor.
- Appends go to a file that stays open: a step's write needs no new file
  descriptor, so ``EMFILE`` can only delay a compaction, never a step.
- The trace is JSON Lines in the schema of ``mailroom.trace``, its first line the
  header. A step's events are written at the trace's committed end before the
  checkpoint that counts them; a failed attempt is rewritten from the same
  offset, and on restart the trace is cut at the checkpoint's offset, so each
  event appears once.
- Every file read here is validated: bad bytes, bad JSON, deep nesting, NaN,
  missing or mistyped fields give ``LocalError`` naming the file.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import zlib
from pathlib import Path
from typing import IO, Any

import attrs

from mailroom.core.errors import LocalError

#: The format name written into every base file.
FORMAT = "mailroom.net checkpoint"
#: Compaction does not run before the log holds this many bytes.
MIN_LOG = 64 * 1024
#: The log format a base promises: 2, a log with a fixed-width head that counts steps.
LOG_FORMAT = 2
#: The head line's width, newline included (room for six 20-digit counts).
HEAD_WIDTH = 200


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def parse_json(text: str, where: str) -> Any:
    """``json.loads`` that refuses NaN and Infinity and turns every failure into LocalError."""
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise LocalError(f"{where}: nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError is a ValueError
        raise LocalError(f"{where}: not valid JSON: {exc}") from None


def check_finite(data: Any, where: str) -> None:
    """LocalError if ``data`` holds a float that is not finite (JSON's 1e400 reads as inf)."""
    todo = [data]
    while todo:
        value = todo.pop()
        if isinstance(value, float) and not math.isfinite(value):
            raise LocalError(f"{where}: holds the number {value}")
        if isinstance(value, dict):
            todo.extend(value.values())
        elif isinstance(value, list):
            todo.extend(value)


def _read_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise LocalError(f"cannot read checkpoint {path}: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LocalError(f"checkpoint {path}: not UTF-8 text (byte {exc.start})") from None


def _count(data: dict[str, Any], key: str, where: str, default: int | None = None) -> int:
    value = data.get(key, default)
    if type(value) is not int or value < 0:
        raise LocalError(f"{where}: field {key!r} must be a non-negative integer, not {value!r}")
    return value


def fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (best effort where directories cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: Any, *, sync: bool = False) -> int:
    """Write ``data`` as JSON to ``path`` via a temporary file and a rename; returns its size."""
    body = json.dumps(data, separators=(",", ":"), allow_nan=False).encode()
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as out:
        out.write(body)
        if sync:
            out.flush()
            os.fsync(out.fileno())
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)
    return len(body)


@attrs.frozen
class Marks:
    """What a log's head says: steps acted on (at most), and after them the endpoint's
    message count, its group incarnation and the trace's position."""

    steps: int
    sent: int
    incarnation: int
    trace: int
    trace_bytes: int

    def counters(self) -> dict[str, int]:
        """The trace position, as a step record names it."""
        return {"trace": self.trace, "trace_bytes": self.trace_bytes}


@attrs.define
class Saved:
    """What a checkpoint holds: its base and the steps logged after it.

    ``cut``: why the log holds less than this process acted on (None: it does not);
    ``marks``: its head's counts (None: the head is gone or of an older release)."""

    base: dict[str, Any]
    steps: list[dict[str, Any]]
    epoch: int
    log_bytes: int
    cut: str | None = None
    marks: Marks | None = None
    #: The log's head is not of the current fixed-width format (or there is no log).
    legacy: bool = True

    @property
    def last(self) -> dict[str, Any]:
        """The counters after the last step (the base's if no step was logged)."""
        return self.steps[-1] if self.steps else self.base


def _line(record: Any) -> bytes:
    body = json.dumps(record, separators=(",", ":"), allow_nan=False).encode()
    return b"%08x %s\n" % (zlib.crc32(body), body)


#: The head's fields after the epoch and the step count (see ``Marks``).
Tail = tuple[int, int, int, int]


def _head(epoch: int, steps: int, tail: Tail) -> bytes:
    """The log's head line, padded to ``HEAD_WIDTH`` (rewritten in place)."""
    body = b'{"epoch":%d,"steps":%d,"sent":%d,"incarnation":%d,"trace":%d,"trace_bytes":%d}' % (
        epoch,
        steps,
        *tail,
    )
    body = body.ljust(HEAD_WIDTH - 10)
    return b"%08x %s\n" % (zlib.crc32(body), body)


def _marks(head: dict[str, Any]) -> Marks | None:
    counts = [head.get(k) for k in ("steps", "sent", "incarnation", "trace", "trace_bytes")]
    ints = [c for c in counts if type(c) is int and c >= 0]
    return Marks(*ints) if len(ints) == len(counts) else None


def _parse_line(line: bytes) -> Any | None:
    """The record of one log line, or None if it fails its CRC or does not parse."""
    crc, sep, body = line.partition(b" ")
    try:
        if not sep or len(crc) != 8 or int(crc, 16) != zlib.crc32(body):
            return None
        return json.loads(body.decode("utf-8"), parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return None


def _check_step(record: Any, where: str) -> dict[str, Any]:
    if not isinstance(record, dict) or not isinstance(record.get("ops"), list):
        raise LocalError(f"{where}: not a step record")
    for key in ("trace", "trace_bytes", "sent", "delivered"):
        _count(record, key, where)
    if not isinstance(record.get("app_log", []), list):
        raise LocalError(f"{where}: field 'app_log' must be a list")
    batch = record.get("batch", 1)
    if type(batch) is not int or batch < 1:
        raise LocalError(f"{where}: field 'batch' must be a count of steps >= 1")
    return record


def read_checkpoint(path: Path) -> Saved | None:
    """The checkpoint at ``path`` (None if there is none); LocalError if it is damaged."""
    if not path.exists():
        return None
    base = parse_json(_read_text(path), f"checkpoint {path}")
    if not isinstance(base, dict) or not isinstance(base.get("endpoint"), dict):
        raise LocalError(f"{path} is not a mailroom.net checkpoint")
    where = f"checkpoint {path}"
    check_finite(base, where)
    epoch = _count(base, "epoch", where, 0)
    for key in ("trace", "sent", "delivered"):
        _count(base, key, where, 0)
    if "trace_bytes" in base:
        _count(base, "trace_bytes", where)
    stack = base.get("stack")
    if stack is not None and (
        not isinstance(stack, list) or not all(isinstance(s, str) for s in stack)
    ):
        raise LocalError(f"{where}: field 'stack' must be a list of protocol names")
    steps, size, cut, marks, legacy = _read_log(log_of(path), epoch, base)
    return Saved(base, steps, epoch, size, cut, marks, legacy)


def _read_log(
    log_path: Path, epoch: int, base: dict[str, Any]
) -> tuple[list[dict[str, Any]], int, str | None, Marks | None, bool]:
    """The steps of the log of ``epoch``, its size, whether (and why) it was cut, its
    head's marks and whether it is of an older format."""
    promised = base.get("log_format") == LOG_FORMAT and epoch > 0
    try:
        raw = log_path.read_bytes() if log_path.exists() else b""
    except OSError as exc:
        raise LocalError(f"cannot read checkpoint log {log_path}: {exc.strerror}") from None
    lines = raw.split(b"\n")
    complete, tail = lines[:-1], lines[-1]  # tail: b"" or a line cut short
    head = _parse_line(complete[0]) if complete else None
    if not isinstance(head, dict) or head.get("epoch") != epoch:
        if complete and head is None and len(complete) > 1:
            raise LocalError(f"checkpoint log {log_path}, line 1: damaged")
        # A log of an earlier epoch is stale (a crash inside a compaction): in the base.
        gone = promised and head is None
        why = f"checkpoint log {log_path} lost its head: nothing says how far it got"
        return [], 0, why if gone else None, None, True
    steps: list[dict[str, Any]] = []
    size = len(complete[0]) + 1
    for k, line in enumerate(complete[1:], start=2):
        record = _parse_line(line)
        if record is None:
            if k == len(complete) and not tail:
                break  # the last line, torn by a crash: never acted on
            raise LocalError(f"checkpoint log {log_path}, line {k}: damaged")
        at = f"checkpoint log {log_path}, line {k}"
        check_finite(record, at)
        steps.append(_check_step(record, at))
        size += len(line) + 1
    marks = _marks(head)
    cut = None
    if marks is not None and len(steps) < marks.steps:
        cut = (
            f"checkpoint log {log_path} holds {len(steps)} of the {marks.steps} steps "
            "this process acted on: it was cut"
        )
    return steps, size, cut, marks, len(complete[0]) + 1 != HEAD_WIDTH or marks is None


def log_of(path: Path) -> Path:
    return path.with_name(path.name + ".log")


class CheckpointLog:
    """Keeps ``path`` (the base) and ``path.log`` (the steps since) up to date."""

    def __init__(self, path: Path, saved: Saved | None, *, sync: bool = False) -> None:
        self.path = path
        self.sync = sync
        self.epoch = saved.epoch if saved is not None else 0
        self.base_bytes = 0
        self._log: IO[bytes] | None = None
        self._end = saved.log_bytes if saved is not None else 0
        self._steps = len(saved.steps) if saved is not None else 0
        self._legacy = saved is None or saved.legacy
        self._next_compaction = MIN_LOG
        if saved is not None and saved.log_bytes:
            self._log = open(log_of(path), "r+b", buffering=0)  # noqa: SIM115
            self._log.truncate(self._end)  # drop a torn last line

    @property
    def log_bytes(self) -> int:
        return self._end

    def append(self, records: list[Any], tail: Tail = (0, 0, 0, 0)) -> None:
        """Append step records, then count them in the head, with ``tail``: the message
        count, incarnation and trace position after them (``Marks``); on OSError the
        log is as it was and the error propagates."""
        if self._log is None:
            raise OSError("the checkpoint log is not open (no base was written yet)")
        data = b"".join(_line(r) for r in records)
        out = self._log
        try:
            out.seek(self._end)
            view = memoryview(data)
            while view:
                written = out.write(view)
                view = view[written or 0 :]
            if self.sync:
                os.fsync(out.fileno())
            if not self._legacy:  # the steps are written: count them as acted on
                steps = self._steps + len(records)
                os.pwrite(out.fileno(), _head(self.epoch, steps, tail), 0)
        except OSError:
            with contextlib.suppress(OSError):  # else the next append truncates after
                out.truncate(self._end)
            raise
        self._end += len(data)
        self._steps += len(records)
        out.truncate(self._end)  # a longer failed attempt may have left bytes past it

    def wants_compaction(self) -> bool:
        return (
            self._log is None
            or self._legacy
            or self._end >= max(self._next_compaction, self.base_bytes)
        )

    def compact(self, base: dict[str, Any], tail: Tail = (0, 0, 0, 0)) -> None:
        """Write ``base`` as epoch + 1 and start its log; on OSError nothing changed."""
        epoch = self.epoch + 1
        log_path = log_of(self.path)
        fresh = log_path.with_name(log_path.name + ".tmp")
        head = _head(epoch, 0, tail)
        try:
            out = open(fresh, "w+b", buffering=0)  # noqa: SIM115
        except OSError:
            self._next_compaction = max(self._end * 2, MIN_LOG)
            raise
        try:
            out.write(head)
            os.fsync(out.fileno())
            size = write_atomic(
                self.path, {**base, "epoch": epoch, "log_format": LOG_FORMAT}, sync=True
            )
        except OSError:
            out.close()
            self._next_compaction = max(self._end * 2, MIN_LOG)
            raise
        # From here the base is durable: until the rename below, the old log is stale
        # (of the old epoch), and ignored.
        os.replace(fresh, log_path)
        if self.sync:
            fsync_dir(log_path.parent)
        if self._log is not None:
            self._log.close()
        self._log = out
        self.epoch, self.base_bytes = epoch, size
        self._end, self._steps, self._legacy = len(head), 0, False
        self._next_compaction = MIN_LOG

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


class TraceFile:
    """Appends events to a JSON Lines file at its committed end.

    ``keep_bytes`` (or, for older checkpoints, ``keep`` lines) survive from an
    earlier run; the rest, written after the last checkpoint, is cut off, and kept
    in memory (``cut``) until the node knows it had not acted on it: a checkpoint
    restored from an old copy is behind what the trace says happened, and then
    ``restore_cut`` puts it back. A file started afresh begins with ``header`` (a
    line; it is not an event).
    """

    def __init__(
        self,
        path: Path,
        keep: int = 0,
        keep_bytes: int | None = None,
        *,
        sync: bool = False,
        header: bytes = b"",
    ) -> None:
        self.path = path
        self.sync = sync
        if not path.exists() or (keep == 0 and not keep_bytes):
            path.write_bytes(header)
            keep_bytes = len(header)
        self._out: IO[bytes] = open(path, "r+b", buffering=0)  # noqa: SIM115
        if keep_bytes is None:
            keep_bytes = 0
            for k, line in enumerate(self._out):
                if k >= keep:
                    break
                keep_bytes += len(line)
        size = self._out.seek(0, os.SEEK_END)
        #: The complete lines cut off the end (see ``restore_cut``).
        self.cut = b""
        if size < keep_bytes:  # the trace lost its end (or was removed): keep what is left
            self._out.seek(0)
            text = self._out.read(size)
            keep_bytes = text.rfind(b"\n") + 1
            keep = text.count(b"\n") - (1 if text.startswith(b'{"header"') else 0)
        elif size > keep_bytes:
            self._out.seek(keep_bytes)
            tail = self._out.read(size - keep_bytes)
            self.cut = tail[: tail.rfind(b"\n") + 1]
        self._out.truncate(keep_bytes)
        self.end = keep_bytes
        self.count = keep

    def restore_cut(self) -> int:
        """Write back the lines cut at opening (the node had acted on them); how many."""
        lines, self.cut = self.cut.splitlines(keepends=True), b""
        if lines:
            self.confirm(*self.stage(lines))
        return len(lines)

    def stage(self, lines: list[bytes]) -> tuple[int, int]:
        """Write ``lines`` at the committed end; returns the (end, count) that ``confirm``
        makes committed. On OSError the committed end does not move."""
        data = b"".join(lines)
        out = self._out
        out.seek(self.end)
        view = memoryview(data)
        while view:
            written = out.write(view)
            view = view[written or 0 :]
        end = self.end + len(data)
        out.truncate(end)  # a longer earlier attempt may have left bytes past it
        if self.sync:
            os.fsync(out.fileno())
        return end, self.count + len(lines)

    def confirm(self, end: int, count: int) -> None:
        self.end, self.count = end, count

    def rollback(self) -> None:
        """Cut what ``stage`` wrote (the checkpoint that would count it failed)."""
        with contextlib.suppress(OSError):  # else the next stage overwrites it
            self._out.truncate(self.end)

    def close(self) -> None:
        self._out.close()


__all__ = [
    "FORMAT",
    "HEAD_WIDTH",
    "LOG_FORMAT",
    "MIN_LOG",
    "CheckpointLog",
    "Marks",
    "Saved",
    "Tail",
    "TraceFile",
    "log_of",
    "parse_json",
    "read_checkpoint",
    "write_atomic",
]
