"""What a node has seen of every process's message ids (``Seen``).

Rules, in words:

- For each process, the highest message id of its that arrived here in an
  authentic frame (a batch packet counts every id it carries), whether or not the
  endpoint then delivered it: that id was used.
- It is kept in the checkpoint (the base's ``seen``, then the log's received
  packets, replayed), so it survives a restart; a checkpoint of an earlier release
  has no ``seen``: its log's packets only.
- Each CONFIRM tells the connecting process its own (``handshake``): peers know
  what they acknowledged, so a process restarted from an old copy of its files
  learns that its checkpoint is behind (``restart``).
"""

from __future__ import annotations

from typing import Any

from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.messages import MessageId
from mailroom.core.wire import carried_high_ids, naming_packet


class Seen:
    """The highest message id seen of each of ``n`` processes (0: none)."""

    def __init__(self, n: int) -> None:
        self.high = [0] * n

    def of(self, pid: int) -> int:
        return self.high[pid] if 0 <= pid < len(self.high) else 0

    def saw(self, mid: MessageId, packet: object = None) -> None:
        """A frame brought ``packet``, which carries message ``mid`` (and, a batch packet,
        others after it)."""
        high = self.high
        if mid.seq > high[mid.origin]:
            high[mid.origin] = mid.seq
        if packet is None:
            return
        named = naming_packet(packet)
        if hasattr(type(named), "carries_all"):  # a batch: its last id too
            try:
                mids = carried_high_ids(named)
            except RemoteError:
                return
            for m in mids:
                if 0 <= m.origin < len(high) and m.seq > high[m.origin]:
                    high[m.origin] = m.seq

    def saved(self) -> list[int]:
        return list(self.high)

    def load(self, data: Any, where: str) -> None:
        """Take a checkpoint's ``seen`` (absent: nothing); LocalError if it is malformed."""
        if data is None:
            return
        if not isinstance(data, list) or len(data) != len(self.high):
            raise LocalError(f"{where}: field 'seen' must be a list of {len(self.high)} counts")
        if not all(type(x) is int and x >= 0 for x in data):
            raise LocalError(f"{where}: field 'seen' must hold non-negative integers")
        self.high = [max(a, b) for a, b in zip(self.high, data, strict=True)]


__all__ = ["Seen"]
