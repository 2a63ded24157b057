"""Raynal–Schiper–Toueg causal unicast, exactly as docs/story.md tells it.

State at P_i: SENT_i (n x n: [k][j] = messages k sent to j, as P_i knows) and
DELIV_i ([k] = messages from k delivered here).

Send to j: attach the current SENT_i, then increment SENT_i[i][j].
Deliverable: a message m from j is deliverable at i when, for every k,
DELIV_i[k] >= SENT_m[k][i] (column i of the attached matrix).
After delivering m from j: (1) DELIV_i[j] += 1; (2) SENT_i[j][i] += 1, because
the sender incremented after attaching; (3) SENT_i = max(SENT_i, SENT_m).

Self-addressed messages: step (2) is skipped when j == i. The sender already
counted the message in its own SENT_i[i][i] when it sent it; counting it again
on delivery double-increments that entry, so the next self-message waits for a
message that never existed and the process deadlocks.

SENT_m[j][i] is the number of earlier messages from j to i, so the deliverable
condition for k = j is FIFO per channel; that number also identifies duplicates.

Extension points (``mailroom.core.hooks``): ``attached`` (the metadata a message
carries) and ``count_sent`` (step 2).
"""

from __future__ import annotations

from typing import Any

import attrs

from mailroom.clocks import DelivVector, FrozenMatrix, SentMatrix
from mailroom.core import validate
from mailroom.core.actions import Action, Deliver, Transmit
from mailroom.core.errors import RemoteError
from mailroom.core.hooks import hook
from mailroom.core.messages import Message, MessageId, Payload
from mailroom.core.persist import counts, matrix
from mailroom.core.wire import as_matrix, packet
from mailroom.protocols._buffer import DependencyBuffer
from mailroom.protocols._buffered import BufferedEndpoint, mail_room
from mailroom.protocols._packets import carries_seq


@packet
@attrs.frozen
class RSTPacket:
    """An RST message: its id's seq, the SENT matrix attached before the increment."""

    sender: int
    dest: int
    seq: int
    sent: FrozenMatrix = attrs.field(converter=as_matrix)
    payload: Any

    carries = carries_seq


class RST(BufferedEndpoint):
    """Causal unicast with the SENT matrix and DELIV vector (Raynal, Schiper, Toueg 1991)."""

    protocol = "RST"
    persistent = (
        matrix("sent._rows", "sent"),
        counts("deliv._counts", "deliv"),
        mail_room(RSTPacket),
    )

    def __init__(self, pid: int, n: int) -> None:
        super().__init__(pid, n)
        self.sent = SentMatrix(n)
        self.deliv = DelivVector(n)
        # DependencyBuffer reads the live DELIV counts.
        self._buffer: DependencyBuffer[RSTPacket] = DependencyBuffer(self.deliv._counts)

    # -- sending -------------------------------------------------------------
    def send(self, payload: Payload, to: int) -> list[Action]:
        """Send ``payload`` to process ``to`` (which may be this process)."""
        self._check_dest(to)
        self._check_payload(payload)
        mid = self._next_id()
        packet = RSTPacket(self.pid, to, mid.seq, self.attached(to), payload)
        self.sent.increment(self.pid, to)
        return [Transmit(to, packet, mid)]

    # -- receiving -------------------------------------------------------------
    def _validate(self, packet: object) -> RSTPacket:
        validate.expect_type(packet, RSTPacket, "RST")
        assert isinstance(packet, RSTPacket)
        sender = validate.pid(packet.sender, self.n)
        validate.dest(packet.dest, self.pid, self.n)
        validate.positive(packet.seq, "seq")
        sent = validate.matrix(packet.sent, self.n, "SENT")
        mine = self.sent._rows[self.pid]
        for j, v in enumerate(sent[self.pid]):
            if v > mine[j]:
                raise RemoteError(
                    f"SENT[{self.pid}][{j}] = {v} claims P{self.pid} sent more to P{j} "
                    f"than it has ({mine[j]})"
                )
        if sent[sender][self.pid] >= packet.seq:
            raise RemoteError(
                f"SENT[{sender}][{self.pid}] = {sent[sender][self.pid]} exceeds the "
                f"{packet.seq - 1} messages P{sender} had sent before this one"
            )
        return packet

    def _offer(self, p: RSTPacket) -> bool:
        """Hold ``p``: the SENT_m[sender][i]-th from its sender, needing column i of SENT_m."""
        i = self.pid
        return self._buffer.offer(p.sender, p.sent[p.sender][i], [row[i] for row in p.sent], p)

    def receive(self, packet: object) -> list[Action]:
        if not self._offer(self._validate(packet)):
            self.duplicates += 1
            return []
        return self._drain()

    def _drain(self) -> list[Action]:
        actions: list[Action] = []
        while (p := self._buffer.pop_ready()) is not None:
            j = p.sender
            self.deliv.increment(j)  # step 1
            self.count_sent(j)  # step 2
            self.sent.merge(p.sent)  # step 3
            actions.append(Deliver(self._message(p)))
            self._buffer.delivered_one(j)
        return actions

    @hook
    def count_sent(self, j: int) -> None:
        """Rule, step 2 after delivering a message from ``j``: SENT[j][i] += 1, except
        for self-sends, which the sender counted."""
        if j != self.pid:
            self.sent.increment(j, self.pid)

    @hook
    def attached(self, to: int) -> FrozenMatrix:
        """Rule: the matrix attached to a message for ``to`` (before the send is
        counted): all of SENT."""
        return self.sent.freeze()

    def _message(self, p: RSTPacket) -> Message:
        return Message(MessageId(p.sender, p.seq), p.sender, p.payload)
