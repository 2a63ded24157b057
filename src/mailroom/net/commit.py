"""Persist, then act: a node's steps are written down before anything they do happens.

``Commit.add(step)`` writes every step not yet written (the journal: trace, then
checkpoint log), then acts on them in order. A write that fails (``OSError``: no
space, too many open files...) acts on nothing: the steps wait, written nowhere
and seen by no one, and the node stalls (``stalled``: it stops reading its
connections and running its timer, and takes no send), retrying the write with
a growing pause (``IO_RETRY`` doubling to 1 s), then acts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from mailroom.net.journal import Journal
from mailroom.net.settings import IO_RETRY
from mailroom.net.stats import NetStats, QuietLog
from mailroom.net.steps import Step

log = logging.getLogger("mailroom.net")


class Commit:
    """The steps of one node between being taken and being acted on."""

    def __init__(
        self,
        pid: int,
        journal: Journal,
        marks: Callable[[], tuple[int, int]],
        act: Callable[[Step], None],
        after: Callable[[], None],
        pause: Callable[[bool], None],
        stats: NetStats,
        quiet: QuietLog,
    ) -> None:
        self.pid, self.journal, self.marks = pid, journal, marks
        self.act, self.after, self.pause = act, after, pause
        self.stats, self.quiet = stats, quiet
        self.writes = journal.trace is not None or journal.ckpt is not None
        #: Why the node's files cannot be written now (None: they can).
        self.stalled: OSError | None = None
        self.closed = False
        self._unwritten: list[Step] = []
        self._pause = IO_RETRY
        self._retry: asyncio.TimerHandle | None = None

    def add(self, step: Step) -> None:
        """Take ``step``: write it (with any waiting), then act, unless stalled."""
        self._unwritten.append(step)
        if self.stalled is None:
            self.commit()

    def commit(self) -> None:
        """Write every unwritten step, then act on them in order; on OSError, stall."""
        self._retry = None
        if self.closed:
            return
        if self.writes:
            try:
                self.journal.write(self._unwritten, *self.marks())
            except OSError as exc:
                self.stats.io_errors += 1
                self._stall(exc)
                return
        steps, self._unwritten = self._unwritten, []
        if self.stalled is not None:
            log.warning("P%d: files written again after %s; resuming", self.pid, self.stalled)
            self.stalled = None
            self._pause = IO_RETRY
            self.pause(False)
        for step in steps:
            self.act(step)
        self.after()

    def _stall(self, exc: OSError) -> None:
        self.pause(True)
        self.stalled = exc
        self.quiet(
            logging.ERROR,
            "P%d: cannot write its checkpoint or trace (%s); %d steps wait, retrying in %.2f s",
            self.pid,
            exc,
            len(self._unwritten),
            self._pause,
        )
        loop = asyncio.get_running_loop()
        self._retry = loop.call_later(self._pause, self.commit)
        self._pause = min(self._pause * 2, 1.0)

    def close(self) -> tuple[bool, list[Step]]:
        """Stop; write what waits. Returns whether everything is written, and the steps
        written now (their deliveries are the application's: hand them)."""
        self.closed = True
        if self._retry is not None:
            self._retry.cancel()
        steps, self._unwritten = self._unwritten, []
        if not steps:
            return True, []
        try:
            self.journal.write(steps, *self.marks())
        except OSError as exc:
            log.error(
                "P%d: %d steps could not be written (%s); a restart resumes from the "
                "checkpoint without them",
                self.pid,
                len(steps),
                exc,
            )
            return False, []
        return True, steps


__all__ = ["Commit"]
