"""The trace of a simulated run, with vector times, and what each process delivered.

Every application send and delivery, every arrival of a packet carrying an
application message and every view installation is an ``Event``; sends and
deliveries carry the vector time of the process (a delivery merges the send's).
The recorder also keeps each process's deliveries and Stable reports, and the
delay from send to delivery in ``Metrics``.
"""

from __future__ import annotations

from collections.abc import Sequence

from mailroom.core.actions import View
from mailroom.core.messages import Message, MessageId, Payload
from mailroom.sim.metrics import Metrics
from mailroom.trace.events import Event


class Recorder:
    """Records the events of run ``run`` among ``n`` processes."""

    def __init__(self, run: str, n: int, metrics: Metrics) -> None:
        self.run = run
        self.metrics = metrics
        self.trace: list[Event] = []
        self.delivered: list[list[Message]] = [[] for _ in range(n)]
        self.stable: list[list[MessageId]] = [[] for _ in range(n)]
        #: (pid, message, len(trace) when the Stable action was applied)
        self.stable_log: list[tuple[int, MessageId, int]] = []
        self._event_seq = [0] * n
        self._vc: list[dict[int, int]] = [{} for _ in range(n)]
        self._send_vc: dict[MessageId, dict[int, int]] = {}
        self._sent_at: dict[MessageId, float] = {}
        self._dest: dict[MessageId, tuple[int, ...]] = {}
        #: per process, a group's sends queued while its view changes (or it waits for
        #: the state): written when an action carries them, in the view of that moment
        self.queued: list[dict[MessageId, Payload]] = [{} for _ in range(n)]

    def events(self, pid: int) -> int:
        """How many events process ``pid`` has recorded."""
        return self._event_seq[pid]

    def sends(
        self,
        pid: int,
        mids: Sequence[MessageId],
        payloads: Sequence[Payload],
        dest: tuple[int, ...],
        view: int | None,
        now: float,
    ) -> None:
        """Process ``pid`` sent ``payloads`` as ``mids`` to ``dest`` (in ``view``)."""
        vc = self._vc[pid]
        for mid, payload in zip(mids, payloads, strict=True):
            self._sent_at[mid] = now
            self._dest[mid] = dest
            vc[pid] = vc.get(pid, 0) + 1
            self._send_vc[mid] = dict(vc)
            self._event(pid, "send", mid, pid, dest, payload, dict(vc), view, now)

    def queue(
        self,
        pid: int,
        mids: Sequence[MessageId],
        payloads: Sequence[Payload],
        dest: tuple[int, ...],
        now: float,
    ) -> None:
        """Process ``pid`` issued ``payloads`` as ``mids``, but its group holds them until
        it runs in a view: their send events wait for ``sent_now``."""
        for mid, payload in zip(mids, payloads, strict=True):
            self._sent_at[mid] = now
            self._dest[mid] = dest
            self.queued[pid][mid] = payload

    def sent_now(self, pid: int, mid: MessageId, view: int | None, now: float) -> None:
        """A queued message of ``pid`` goes out now (an action carries it), in ``view``."""
        payload = self.queued[pid].pop(mid)
        vc = self._vc[pid]
        vc[pid] = vc.get(pid, 0) + 1
        self._send_vc[mid] = dict(vc)
        self._event(pid, "send", mid, pid, self._dest[mid], payload, dict(vc), view, now)

    def receive(self, pid: int, mid: MessageId, view: int | None, now: float) -> None:
        """A packet carrying message ``mid`` reached process ``pid``."""
        dest = self._dest.get(mid, (pid,))
        self._event(pid, "receive", mid, mid.origin, dest, None, None, view, now)

    def deliver(self, pid: int, message: Message, view: int | None, now: float) -> None:
        """Process ``pid`` delivered ``message``: its vector time takes in the send's."""
        mid = message.id
        vc = self._vc[pid]
        for k, v in self._send_vc.get(mid, {}).items():
            if v > vc.get(k, 0):
                vc[k] = v
        vc[pid] = vc.get(pid, 0) + 1
        dest = self._dest.get(mid, (pid,))
        self._event(pid, "deliver", mid, message.sender, dest, message.payload, dict(vc), view, now)
        self.delivered[pid].append(message)
        if mid in self._sent_at:
            self.metrics.record_delay(now - self._sent_at[mid])

    def install(self, pid: int, view: View, now: float) -> None:
        """Process ``pid`` installed ``view``: an event of kind "view"."""
        mid = MessageId(0, view.id)
        self._event(pid, "view", mid, pid, view.members, None, None, view.id, now)

    def report_stable(self, pid: int, messages: tuple[MessageId, ...]) -> None:
        """Process ``pid`` reported ``messages`` stable (recorded with or without a trace)."""
        self.stable[pid].extend(messages)
        mark = len(self.trace)
        self.stable_log.extend((pid, m, mark) for m in messages)

    def _event(
        self,
        pid: int,
        kind: str,
        mid: MessageId,
        sender: int,
        dest: tuple[int, ...],
        payload: Payload,
        vc: dict[int, int] | None,
        view: int | None,
        now: float,
    ) -> None:
        self._event_seq[pid] += 1
        self.trace.append(
            Event(
                run=self.run,
                process=pid,
                seq=self._event_seq[pid],
                kind=kind,
                message=mid,
                sender=sender,
                dest=dest,
                vc=vc,
                time=now,
                payload=payload,
                view=view,
            )
        )
