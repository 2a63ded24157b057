"""A replica's base state and the log of what it applied since: rollback, checkpoint, compaction.

The base is the replica's state as data at some point (the object's state, how many
operations were applied before it, the view and the members' incarnations); the log
lists, in order, everything applied since:

- ``["m", origin, seq, payload]``: an operation that took effect (redone on replay);
- ``["x", origin, seq, incarnation]``: one that changed nothing (an ordered read, a
  method that raised, a hello, a malformed payload): replay only notes the incarnation;
- ``["v", view, members]``: a view installed at this point.

Base plus log is a checkpoint: restoring the base and redoing the log gives the
state back. Compaction makes the current state the base and empties the log; it is
due when the log's bytes reach the base's (at least ``compact_bytes``), so keeping
the log costs a bounded multiple of the operations' own size, however large the state.
"""

from __future__ import annotations

from typing import Any

from mailroom.core.errors import LocalError

#: The log is compacted once it holds this many bytes, or more when the base is larger.
COMPACT_BYTES = 256 * 1024
#: The version of a checkpoint's data.
FORMAT = 1
Entry = list[Any]


#: The bytes a log counts for an ``"x"`` entry.
SKIPPED_BYTES = 16


def applied_entry(origin: int, seq: int, payload: Any) -> Entry:
    """The entry of an operation of message (origin, seq) that took effect."""
    return ["m", origin, seq, payload]


def skipped_entry(origin: int, seq: int, incarnation: int) -> Entry:
    """The entry of an operation of message (origin, seq) that changed nothing."""
    return ["x", origin, seq, incarnation]


class OperationLog:
    """The base (``dict``: object, applied, view, incarnations) and the log since."""

    def __init__(self, base: dict[str, Any], base_bytes: int, compact_bytes: int) -> None:
        if type(compact_bytes) is not int or compact_bytes < 1:
            raise LocalError(f"compact_bytes must be a positive int, got {compact_bytes!r}")
        self.compact_bytes = compact_bytes
        self.base = base
        self.base_bytes = base_bytes
        self.log: list[Entry] = []
        self.log_bytes = 0
        self.compactions = 0
        #: after a compaction that could not take the state: the log's bytes at which
        #: the next one is tried (0: none failed since the last rebase)
        self._retry_at = 0
        #: entries of ``log`` a node's checkpoint holds (``saved``, ``changes``); None
        #: when the base changed since, so that only the whole checkpoint says it
        self._saved: int | None = None

    def add(self, entry: Entry, size: int) -> None:
        self.log.append(entry)
        self.log_bytes += size

    def due(self) -> bool:
        """The log is as large as the base (and at least ``compact_bytes``), and, after
        a compaction that failed, twice as large as it was then."""
        return self.log_bytes >= max(self.compact_bytes, self.base_bytes, self._retry_at)

    def postpone(self) -> None:
        """The state could not be taken as a new base: try again once the log doubled
        (the log, with the base, still holds the state: nothing is lost meanwhile)."""
        self._retry_at = 2 * self.log_bytes

    def rebase(self, base: dict[str, Any], base_bytes: int) -> None:
        """``base`` is the current state: the log so far is no longer needed."""
        self.base = base
        self.base_bytes = base_bytes
        self.log = []
        self.log_bytes = 0
        self.compactions += 1
        self._retry_at = 0
        self._saved = None

    def checkpoint(self) -> dict[str, Any]:
        return {"format": FORMAT, "base": self.base, "log": list(self.log)}

    def saved(self) -> None:
        """A node's checkpoint now holds ``checkpoint()`` whole: ``changes`` counts from here."""
        self._saved = len(self.log)

    def changes(self) -> list[Entry] | None:
        """The entries logged since ``saved()`` or the last ``changes()``: what a node's
        checkpoint lacks; None if the base changed since (then ``saved()`` is due)."""
        if self._saved is None:
            return None
        out = self.log[self._saved :]
        self._saved = len(self.log)
        return out


def checked_checkpoint(data: object) -> tuple[dict[str, Any], list[Entry]]:
    """The base and log of checkpoint ``data``; LocalError if it is not one."""
    if type(data) is not dict or data.get("format") != FORMAT:
        raise LocalError(f"not a replica checkpoint of format {FORMAT}")
    base, log = data.get("base"), data.get("log")
    if type(base) is not dict or type(log) is not list:
        raise LocalError("a replica checkpoint holds a base (dict) and a log (list)")
    checked_base(base)
    for k, entry in enumerate(log):
        if not _entry_ok(entry):
            raise LocalError(f"replica checkpoint log entry {k} is malformed: {entry!r:.80}")
    return base, log


def _counts(values: list[Any]) -> bool:
    return all(type(v) is int and v >= 0 for v in values)


def _entry_ok(entry: object) -> bool:
    if type(entry) is not list or not entry:
        return False
    if entry[0] == "m":
        return len(entry) == 4 and _counts(entry[1:3])
    if entry[0] == "x":
        return len(entry) == 4 and _counts(entry[1:4])
    if entry[0] == "v":
        return len(entry) == 3 and _counts(entry[1:2]) and type(entry[2]) is list
    return False


def checked_base(base: object) -> dict[str, Any]:
    """A replica state (a base, or what a joiner is sent); LocalError if malformed."""
    if type(base) is not dict or not {"object", "applied", "view", "incarnations"} <= set(base):
        raise LocalError("a replica state holds object, applied, view and incarnations")
    applied, view, incs = base["applied"], base["view"], base["incarnations"]
    if type(applied) is not int or applied < 0:
        raise LocalError(f"a replica state's applied count is not a count: {applied!r}")
    if not (type(view) is list and len(view) == 2 and type(view[0]) is int):
        raise LocalError(f"a replica state's view must be [id, members], not {view!r:.80}")
    if type(view[1]) is not list or not _counts(view[1]):
        raise LocalError(f"a replica state's members must be pids, not {view[1]!r:.80}")
    if type(incs) is not list or not all(
        type(p) is list and len(p) == 2 and _counts(p) for p in incs
    ):
        raise LocalError("a replica state's incarnations must be [pid, incarnation] pairs")
    return base


__all__ = [
    "COMPACT_BYTES",
    "FORMAT",
    "SKIPPED_BYTES",
    "OperationLog",
    "applied_entry",
    "checked_base",
    "checked_checkpoint",
    "skipped_entry",
]
