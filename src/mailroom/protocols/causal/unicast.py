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

Batch form: ``send_many(payloads, to)`` sends k consecutive messages to one
process as one ``RSTBatch``, the matrix attached once: message i's is the first one's
with SENT[i][to] + i, because nothing else changes between consecutive sends. The
receiver takes each entry as the ``RSTPacket`` it stands for, so its state and
snapshot are those of k single packets.

Extension points (``mailroom.core.hooks``): ``attached`` (the metadata a message
carries), ``count_sent`` (step 2) and ``entry_sent`` (the matrix of a batch's i-th
message).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import attrs

from mailroom.clocks import DelivVector, FrozenMatrix, SentMatrix
from mailroom.core import validate
from mailroom.core.actions import Action, Deliver, Transmit
from mailroom.core.dispatch import Receivers
from mailroom.core.errors import RemoteError
from mailroom.core.hooks import hook
from mailroom.core.messages import Message, MessageId, Payload
from mailroom.core.pending import Pending
from mailroom.core.persist import counts, matrix
from mailroom.core.wire import as_matrix, as_row, packet
from mailroom.protocols._buffer import DependencyBuffer
from mailroom.protocols._buffered import BufferedEndpoint, mail_room
from mailroom.protocols._packets import Payloads, UnicastBatch, carries_seq


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


@packet
@attrs.frozen
class RSTBatch(UnicastBatch):
    """k consecutive RST messages from ``sender`` to ``dest``, (sender, first_seq + i),
    with one matrix: the first one's SENT; message i's has SENT[sender][dest] + i."""

    sent: FrozenMatrix = attrs.field(converter=as_matrix)
    payloads: Payloads = attrs.field(converter=as_row)


class RST(BufferedEndpoint):
    """Causal unicast with the SENT matrix and DELIV vector (Raynal, Schiper, Toueg 1991)."""

    protocol = "RST"

    def __init__(self, pid: int, n: int) -> None:
        super().__init__(pid, n)
        self.sent = SentMatrix(n)
        self.deliv = DelivVector(n)
        # DependencyBuffer reads the live DELIV counts.
        self._buffer: DependencyBuffer[RSTPacket] = DependencyBuffer(self.deliv.live_counts())

    # -- sending -------------------------------------------------------------
    def send(self, payload: Payload, to: int) -> list[Action]:
        """Send ``payload`` to process ``to`` (which may be this process)."""
        self.check_dest(to)
        self.check_payload(payload)
        mid = self.next_id()
        packet = RSTPacket(self.pid, to, mid.seq, self.attached(to), payload)
        self.sent.increment(self.pid, to)
        return [Transmit(to, packet, mid)]

    def send_many(self, payloads: Sequence[Payload], to: int) -> list[Action]:
        """Send ``payloads`` to ``to`` in order, up to ``BATCH_LIMIT`` in each ``RSTBatch``
        (the deliveries of one ``send`` each, the matrix attached once per packet)."""
        return self._send_chunks(payloads, to, self._send_batch)

    def _send_batch(self, payloads: tuple[Any, ...], to: int) -> list[Action]:
        first = self.next_ids(len(payloads))
        packet = RSTBatch(self.pid, to, first.seq, self.attached(to), payloads)
        self.sent.increment(self.pid, to, len(payloads))
        return [Transmit(to, packet, first)]

    @hook
    def entry_sent(self, sent: FrozenMatrix, sender: int, dest: int, i: int) -> FrozenMatrix:
        """Rule: the matrix of message i of a batch from ``sender`` to ``dest`` whose
        first message carries ``sent``: the sender counted the i before it, nothing else."""
        row = sent[sender]
        mine = (*row[:dest], row[dest] + i, *row[dest + 1 :])
        return (*sent[:sender], mine, *sent[sender + 1 :])

    # -- receiving -------------------------------------------------------------
    def _validate(self, packet: object) -> RSTPacket:
        validate.expect_type(packet, RSTPacket, "RST")
        assert isinstance(packet, RSTPacket)
        sender = validate.pid(packet.sender, self.n)
        validate.dest(packet.dest, self.pid, self.n)
        validate.positive(packet.seq, "seq")
        sent = validate.matrix(packet.sent, self.n, "SENT")
        mine = self.sent.rows()[self.pid]
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
        return self.RECEIVES[type(packet)](self, packet)

    def _on_packet(self, p: RSTPacket) -> list[Action]:
        return self._run((self._offer(self._validate(p)),), self._drain)

    def _on_batch(self, b: RSTBatch) -> list[Action]:
        return self._run(map(self._offer, self._batch_entries(b)), self._drain)

    def _batch_entries(self, b: RSTBatch) -> list[RSTPacket]:
        """The packets a batch stands for, each checked; RemoteError if any is malformed."""
        payloads = validate.batch_payloads(b.payloads)
        first = validate.first_of_range(b.first_seq, len(payloads), "seq")
        sender = validate.pid(b.sender, self.n)
        dest = validate.pid(b.dest, self.n)
        sent: FrozenMatrix = tuple(map(tuple, validate.matrix(b.sent, self.n, "SENT")))
        return [
            self._validate(
                RSTPacket(sender, dest, first + i, self.entry_sent(sent, sender, dest, i), x)
            )
            for i, x in enumerate(payloads)
        ]

    #: What ``receive`` does with each class of packet.
    RECEIVES: ClassVar[Receivers[RST]] = Receivers(
        "RST", "a RSTPacket", {RSTPacket: _on_packet, RSTBatch: _on_batch}
    )

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

    def pending(self) -> list[Pending]:
        return self._pending_of(self._message)

    persistent = (
        matrix("sent._rows", "sent"),
        counts("deliv._counts", "deliv"),
        mail_room(RSTPacket, _validate, _offer),
    )
