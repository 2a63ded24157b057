"""RST-style causal unicast written to be read and changed: the lab's workbench.

``MatrixLab`` is Raynal–Schiper–Toueg causal unicast (SENT and DELIV, as in
docs/story.md) with each rule in its own small method, and a mail room that is
a plain list rescanned after every delivery. It trades the speed of
``mailroom.RST`` for clarity: to try a variant, subclass it and override one
rule. The lab's variants:

- ``IncrementFirst`` (the increment-first hunch of the open questions, and the
  textbook matrix protocol's send rule): increment SENT[i][j] *before*
  attaching it; the deliverable condition gains the "one
  greater" clause SENT_m[j][i] == DELIV_i[j] + 1 for the sender j; the
  post-delivery step 2 (SENT_i[j][i] += 1) goes away, because the merge with
  SENT_m already brings that count in.
- ``ColumnForDeliv`` ("is DELIV redundant?", taken literally): drop DELIV and read
  column i of SENT_i instead. Wrong for self-sends: the sender counted its own
  message in SENT_i[i][i] when it sent it, so the column claims a self-message
  is delivered while it is still on its way.
- ``ColumnForDelivSelfCounter``: the repair: column i of SENT for every other
  process, and a single counter for self-messages delivered.
- ``MatrixWithoutDeliv`` (also exported as ``Seed003Matrix``): the textbook
  matrix protocol, literally: increment first, and the local matrix M plays
  DELIV's part (M[k][j] at j takes consecutive values as messages from k are
  delivered). It shares
  ``ColumnForDeliv``'s self-send corner.

Lab endpoints trust their input (no RemoteError checks): they are for exploring
rules under the harness, not for production. Duplicates are dropped by id. A
snapshot (version 2) holds the mail room and the ids seen as well, so a lab
endpoint restores mid-run like the others.
"""

from __future__ import annotations

from typing import ClassVar

from mailroom.clocks import DelivVector, SentMatrix
from mailroom.core.actions import Action, Deliver, Transmit
from mailroom.core.endpoint import EndpointBase
from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.messages import Message, MessageId, Payload
from mailroom.core.pending import Pending, Wait
from mailroom.core.persist import MESSAGE_ID, Field, counts, matrix, packets, set_of
from mailroom.protocols._buffer import rescan
from mailroom.protocols.causal.unicast import RSTPacket


class MatrixLab(EndpointBase):
    """RST (docs/story.md), one rule per method, for subclassing."""

    protocol = "lab.RST"
    snapshot_version = 2
    #: Increment SENT[i][j] before attaching it (True) or after (False, RST).
    increment_first: ClassVar[bool] = False

    def __init__(self, pid: int, n: int) -> None:
        super().__init__(pid, n)
        self.sent = SentMatrix(n)
        self.deliv = DelivVector(n)
        self.held: list[RSTPacket] = []
        self.seen: set[MessageId] = set()

    # -- the rules ------------------------------------------------------------------
    def delivered_from(self, k: int) -> int:
        """How many messages from k this process counts as delivered (DELIV_i[k])."""
        return self.deliv[k]

    def deliverable(self, p: RSTPacket) -> bool:
        """RST's condition: for all k, DELIV_i[k] >= SENT_m[k][i]."""
        i = self.pid
        return all(self.delivered_from(k) >= p.sent[k][i] for k in range(self.n))

    def after_delivery(self, p: RSTPacket) -> None:
        """RST's post-delivery steps (step 2 skipped for self-sends, which the sender counted)."""
        j = p.sender
        self.deliv.increment(j)
        if j != self.pid:
            self.sent.increment(j, self.pid)
        self.sent.merge(p.sent)

    # -- plumbing --------------------------------------------------------------------
    def send(self, payload: Payload, to: int) -> list[Action]:
        self.check_dest(to)
        self.check_payload(payload)
        mid = self.next_id()
        if self.increment_first:
            self.sent.increment(self.pid, to)
        packet = RSTPacket(self.pid, to, mid.seq, self.sent.freeze(), payload)
        if not self.increment_first:
            self.sent.increment(self.pid, to)
        return [Transmit(to, packet, mid)]

    def receive(self, packet: object) -> list[Action]:
        if not isinstance(packet, RSTPacket):
            raise RemoteError(f"expected an RSTPacket, got {type(packet).__name__}")
        mid = MessageId(packet.sender, packet.seq)
        if mid in self.seen:
            self.duplicates += 1
            return []
        self.seen.add(mid)
        self.held.append(packet)
        return rescan(self.held, self.deliverable, self._deliver)

    def _deliver(self, p: RSTPacket) -> Action:
        self.after_delivery(p)
        return Deliver(Message(MessageId(p.sender, p.seq), p.sender, p.payload))

    def buffered(self) -> int:
        return len(self.held)

    def pending(self) -> list[Pending]:
        i = self.pid
        out = []
        for p in self.held:
            waits = tuple(
                Wait(k, self.delivered_from(k), p.sent[k][i], f"message to P{i}")
                for k in range(self.n)
                if self.delivered_from(k) < p.sent[k][i]
            )
            reason = "" if waits else "a rule this variant never satisfies"
            out.append(
                Pending(Message(MessageId(p.sender, p.seq), p.sender, p.payload), waits, reason)
            )
        return out

    def _hold_restored(self, p: RSTPacket) -> None:
        mid = MessageId(p.sender, p.seq)
        if mid not in self.seen or any(MessageId(q.sender, q.seq) == mid for q in self.held):
            raise LocalError(f"snapshot holds {mid} twice, or never seen")
        self.held.append(p)

    persistent = (
        matrix("sent._rows", "sent"),
        counts("deliv._counts", "deliv"),
        Field("seen", kind=set_of(MESSAGE_ID), inplace=True),
        packets("held", RSTPacket, lambda lab: lab.held, _hold_restored),
    )


class IncrementFirst(MatrixLab):
    """The increment-first hunch: increment before sending, "one greater" clause, no step 2."""

    protocol = "lab.IncrementFirst"
    increment_first = True

    def deliverable(self, p: RSTPacket) -> bool:
        i, j = self.pid, p.sender
        return p.sent[j][i] == self.deliv[j] + 1 and all(
            self.deliv[k] >= p.sent[k][i] for k in range(self.n) if k != j
        )

    def after_delivery(self, p: RSTPacket) -> None:
        self.deliv.increment(p.sender)
        self.sent.merge(p.sent)


class ColumnForDeliv(MatrixLab):
    """DELIV taken as redundant, literally: DELIV_i is column i of SENT_i."""

    protocol = "lab.ColumnForDeliv"

    def delivered_from(self, k: int) -> int:
        return self.sent[k, self.pid]


class ColumnForDelivSelfCounter(MatrixLab):
    """Column i of SENT_i for other processes; one counter for self-messages delivered."""

    protocol = "lab.ColumnForDelivSelfCounter"

    def delivered_from(self, k: int) -> int:
        return self.deliv[k] if k == self.pid else self.sent[k, self.pid]


class MatrixWithoutDeliv(MatrixLab):
    """The textbook matrix protocol, literally: increment M[i][j] and piggyback M; at j,
    deliver when T[k][j] <= M[k][j] for k != i and T[i][j] == M[i][j] + 1, then
    M = max(M, T). No DELIV vector at all."""

    protocol = "lab.MatrixWithoutDeliv"
    increment_first = True

    def delivered_from(self, k: int) -> int:
        return self.sent[k, self.pid]

    def deliverable(self, p: RSTPacket) -> bool:
        i, j = p.sender, self.pid  # the textbook's names: i sends to j
        m, t = self.sent, p.sent
        return t[i][j] == m[i, j] + 1 and all(t[k][j] <= m[k, j] for k in range(self.n) if k != i)

    def after_delivery(self, p: RSTPacket) -> None:
        self.deliv.increment(p.sender)  # kept only for inspection; no rule reads it
        self.sent.merge(p.sent)


VARIANTS: tuple[type[MatrixLab], ...] = (
    MatrixLab,
    IncrementFirst,
    ColumnForDeliv,
    ColumnForDelivSelfCounter,
    MatrixWithoutDeliv,
)

#: the name this variant had before 0.2.0, kept as an alias
Seed003Matrix = MatrixWithoutDeliv
