"""Persist, then act: a node's steps are written down before anything they do happens.

``Commit.write(steps, marks)`` writes the steps ``NodeCore.to_persist()`` hands out
(the journal: trace, then checkpoint log) and says whether they are written; only
then does the node take them back (``NodeCore.written()``) and act on them. A
write that fails (``OSError``: no space, too many open files...) acts on nothing:
the steps wait, written nowhere and seen by no one, and the node stalls
(``stalled``: it stops reading its connections and running its timer, and takes no
send), writing them again after ``retry_in`` seconds (``IO_RETRY`` doubling to
1 s), then acts. Nothing here calls back and nothing here waits: the node's shell
schedules the retry.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from mailroom.net.journal import Journal
from mailroom.net.settings import IO_RETRY
from mailroom.net.stats import NetStats, QuietLog
from mailroom.net.steps import Step

log = logging.getLogger("mailroom.net")


class Commit:
    """Writes one node's steps down, and keeps whether (and why) it cannot."""

    def __init__(self, pid: int, journal: Journal, stats: NetStats, quiet: QuietLog) -> None:
        self.pid, self.journal = pid, journal
        self.stats, self.quiet = stats, quiet
        self.writes = journal.trace is not None or journal.ckpt is not None
        #: Why the node's files cannot be written now (None: they can).
        self.stalled: OSError | None = None
        #: Seconds before the next try, once stalled.
        self.retry_in = IO_RETRY
        self.closed = False

    def write(self, steps: Sequence[Step], marks: tuple[int, int]) -> bool:
        """Write ``steps`` (every step not written yet, in order), with the endpoint's
        message count and group incarnation ``marks`` after them: True if written (act
        on them now); on OSError, stall and False (write them again in ``retry_in``)."""
        if self.writes and steps:
            try:
                self.journal.write(steps, *marks)
            except OSError as exc:
                self.stats.io_errors += 1
                self._stall(exc, len(steps))
                return False
        if self.stalled is not None:
            log.warning("P%d: files written again after %s; resuming", self.pid, self.stalled)
            self.stalled = None
            self.retry_in = IO_RETRY
        return True

    def _stall(self, exc: OSError, waiting: int) -> None:
        if self.stalled is not None:
            self.retry_in = min(self.retry_in * 2, 1.0)
        self.stalled = exc
        self.quiet(
            logging.ERROR,
            "P%d: cannot write its checkpoint or trace (%s); %d steps wait, retrying in %.2f s",
            self.pid,
            exc,
            waiting,
            self.retry_in,
        )

    def close(self, steps: Sequence[Step], marks: tuple[int, int]) -> bool:
        """Stop, writing the steps that wait: True if everything is written (then their
        deliveries are the application's: hand them)."""
        self.closed = True
        if not steps or not self.writes:
            return True
        try:
            self.journal.write(steps, *marks)
        except OSError as exc:
            log.error(
                "P%d: %d steps could not be written (%s); a restart resumes from the "
                "checkpoint without them",
                self.pid,
                len(steps),
                exc,
            )
            return False
        return True


__all__ = ["Commit"]
