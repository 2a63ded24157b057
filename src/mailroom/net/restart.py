"""A node restarted from its checkpoint checks, before its first step, that the
checkpoint is not behind what its peers have seen of it.

Rules, in words:

- Every CONFIRM tells the connecting node the highest of its message ids the
  acceptor has seen (``seen``; kept in the acceptor's checkpoint).
- A node restored from a checkpoint (with peers) starts with its reading paused:
  it connects to every peer and takes no step until each has confirmed (and said
  what it has seen), or refused the connection (it is down), or the handshake
  timeout has passed.
- If a peer has seen an id above the node's message count, the checkpoint is
  behind what happened: its files were restored from an old copy, and the process
  went on after that copy, using the ids after it with payloads the checkpoint
  does not know. The trace's events after the checkpoint's position happened, so
  they stay in the trace. Then a group member rejoins as its next incarnation, its
  ids counting on after the highest any peer has seen and the highest its trace
  says it sent; any other endpoint refuses to start (``LocalError``, one line): it
  can neither skip ids (its peers would wait for the missing ones forever) nor
  reuse them.
- A CONFIRM that shows the node behind later (from a peer that was down when it
  started, or to a node started without its checkpoint) is logged as an error and
  counted (``behind``): the node may have reused ids by then.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import TYPE_CHECKING

from mailroom.core.errors import LocalError
from mailroom.net.membership import group_of
from mailroom.net.stats import NetStats, QuietLog

if TYPE_CHECKING:
    from mailroom.net.journal import Restored
    from mailroom.net.store import TraceFile
    from mailroom.net.transport import Transport

log = logging.getLogger("mailroom.net")


class Restart:
    """What the peers of process ``pid`` (``others``: those whose addresses it knows)
    have seen of its message ids: gathered before its first step if it was ``restored``
    from a checkpoint, checked afterwards."""

    def __init__(
        self,
        pid: int,
        others: set[int],
        restored: bool,
        stats: NetStats,
        quiet: QuietLog,
    ) -> None:
        self.pid = pid
        self.checking = restored
        self.waiting = set(others) if restored else set()
        self.seen: dict[int, int] = {}
        self._all_heard = asyncio.Event()
        self._stats, self._quiet = stats, quiet

    def heard(self, peer: int, seen: int | None, sent: int) -> None:
        """``peer`` confirmed a connection, having seen our ids up to ``seen`` (None: it
        refused the connection, it is down); ``sent`` is our message count now."""
        if not self.checking:
            if seen is not None and seen > sent:
                self._stats.behind += 1
                self._quiet(
                    logging.ERROR,
                    "P%d: P%d has seen its message %d, but it has sent %d: its ids are reused",
                    self.pid,
                    peer,
                    seen,
                    sent,
                )
            return
        if seen is not None:
            self.seen[peer] = max(self.seen.get(peer, 0), seen)
        self.waiting.discard(peer)
        if not self.waiting:
            self._all_heard.set()

    async def confirm(
        self,
        transport: Transport,
        trace: TraceFile | None,
        done: Restored,
        seconds: float,
    ) -> bool:
        """Hear every peer (``transport``'s reading paused: no step is taken) for at most
        ``seconds``; True if ``done`` was replaced by its next incarnation (a group member
        behind its peers); LocalError if it is behind and cannot rejoin (close the node)."""
        transport.pause(True)
        if self.waiting:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._all_heard.wait(), seconds)
        transport.pause(False)
        self.checking = False
        seen, peer = max(((s, p) for p, s in self.seen.items()), default=(0, -1))
        sent = int(done.endpoint.sent_count)
        cut = trace.cut if trace is not None else b""
        if seen <= sent:
            if trace is not None:
                trace.cut = b""  # written, never acted on: gone
            return False
        if trace is not None:  # it happened: the trace keeps it
            trace.restore_cut()
        refusal = behind(self.pid, peer, seen, sent)
        if group_of(done.endpoint) is None:
            raise refusal
        log.warning("%s; P%d rejoins its group as a new incarnation", refusal, self.pid)
        done.rejoin((), max(seen, sent_in(cut, self.pid)))
        return True


def sent_in(lines: bytes, pid: int) -> int:
    """The highest message id that trace ``lines`` say process ``pid`` sent (0: none);
    a line that is not a JSON event is skipped."""
    top = 0
    for line in lines.splitlines():
        if b'"send"' not in line:
            continue
        try:
            event = json.loads(line)
            if event.get("kind") == "send" and event.get("process") == pid:
                origin, seq = event["message"]
                if origin == pid and type(seq) is int:
                    top = max(top, seq)
        except (ValueError, TypeError, KeyError, AttributeError):
            continue
    return top


def behind(pid: int, peer: int, seen: int, sent: int) -> LocalError:
    """The one-line refusal of a process whose checkpoint is behind its peers."""
    return LocalError(
        f"P{pid}'s checkpoint is behind: P{peer} has seen its message {seen}, the checkpoint "
        f"has sent {sent} (restored from an old copy?); resuming would reuse message ids",
        hint="restore the checkpoint the process had when it stopped",
    )


__all__ = ["Restart", "behind", "sent_in"]
