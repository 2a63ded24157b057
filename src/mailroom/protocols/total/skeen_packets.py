"""Skeen's packets (single messages and batches) and the records a Skeen endpoint keeps."""

from __future__ import annotations

from typing import Any

import attrs

from mailroom.core.wire import as_row, packet
from mailroom.protocols._packets import Payloads, carries_batch, carries_none, carries_seq

Key = tuple[int, int, int]


@packet
@attrs.frozen
class SkeenMessage:
    """Message (sender, seq) for the set ``dest``, stamped with the sender's clock;
    ``index``: the sender's multicasts to this destination so far, this one included."""

    sender: int
    seq: int
    ts: int
    dest: tuple[int, ...] = attrs.field(converter=as_row)
    payload: Any
    index: int

    carries = carries_seq


@packet
@attrs.frozen
class SkeenProposal:
    """``sender`` proposes ``number`` for message (origin, seq)."""

    sender: int
    origin: int
    seq: int
    number: int

    carries = carries_none


@packet
@attrs.frozen
class SkeenFinal:
    """Message (origin, seq), the origin's ``index``-th to this destination, has the
    final ``number``."""

    origin: int
    seq: int
    number: int
    index: int

    carries = carries_none


@attrs.define
class _Held:
    """A message in the mail room: its packet's fields (kept flat, so that a batch's
    messages are held without a packet each), its number and whether it is final."""

    sender: int
    seq: int
    ts: int
    dest: tuple[int, ...]
    payload: Any
    index: int
    number: int
    final: bool

    @property
    def message(self) -> SkeenMessage:
        """The message as the packet that carried it alone."""
        return SkeenMessage(self.sender, self.seq, self.ts, self.dest, self.payload, self.index)

    @property
    def key(self) -> Key:
        return (self.number, self.sender, self.seq)


@attrs.define
class _Collecting:
    ts: int
    dest: tuple[int, ...]
    #: the message's index at each destination, aligned with ``dest``
    indexes: tuple[int, ...]
    proposals: dict[int, int]


@packet
@attrs.frozen
class SkeenBatch:
    """Messages (sender, first_seq + i) for the set ``dest``, stamped first_ts + i; the
    (first_index + i)-th of the sender's multicasts to this destination."""

    sender: int
    first_seq: int
    first_ts: int
    dest: tuple[int, ...] = attrs.field(converter=as_row)
    payloads: Payloads = attrs.field(converter=as_row)
    first_index: int

    carries, carries_all, carries_last = carries_batch("sender", "first_seq")


@packet
@attrs.frozen
class SkeenProposalBatch:
    """``sender`` proposes numbers[i] for message (origin, first_seq + i)."""

    sender: int
    origin: int
    first_seq: int
    numbers: tuple[int, ...] = attrs.field(converter=as_row)

    carries = carries_none


@packet
@attrs.frozen
class SkeenFinalBatch:
    """Message (origin, first_seq + i), the origin's (first_index + i)-th to this
    destination, has the final number numbers[i]."""

    origin: int
    first_seq: int
    first_index: int
    numbers: tuple[int, ...] = attrs.field(converter=as_row)

    carries = carries_none
