"""Application messages and their ids, and the check that a payload is encodable."""

from __future__ import annotations

import math
from typing import Any

import attrs

from mailroom.clocks import VectorClock
from mailroom.core.errors import LocalError
from mailroom.core.wire import carried_problem, is_packet

#: A payload is JSON data (None, bool, int, float, str, list, dict with str keys),
#: or a registered packet when one layer of a stack carries another's packets.
Payload = Any


@attrs.frozen(order=True)
class MessageId:
    """The k-th message that process ``origin`` sends through an endpoint is (origin, k)."""

    origin: int
    seq: int

    def __str__(self) -> str:
        return f"P{self.origin}#{self.seq}"


@attrs.frozen
class Message:
    """A message as the application sees it."""

    id: MessageId
    sender: int
    payload: Payload


@attrs.frozen
class TaggedMessage(Message):
    """A message delivered with a vector-clock tag (tagged causal broadcast)."""

    tag: VectorClock


def check_payload(payload: object, _depth: int = 0) -> None:
    """Raise LocalError unless ``payload`` is JSON data (what the codec can carry), or a
    packet as the whole payload (one layer of a stack carrying another's)."""
    if _depth > 64:
        raise LocalError("payload is nested more than 64 levels deep")
    kind = type(payload)
    if kind is str or kind is int or payload is None:  # the common cases, first and cheap
        return
    if is_packet(payload):
        if _depth:  # inside a list or dict it could be neither traced nor checkpointed
            raise LocalError(f"a {kind.__name__} packet inside a payload's data")
        problem = carried_problem(payload)
        if problem is not None:
            raise LocalError(problem)
        return
    if isinstance(payload, bool | int | str):
        return
    if isinstance(payload, float):
        if not math.isfinite(payload):
            raise LocalError(f"payload float {payload!r} is not finite")
        return
    if isinstance(payload, list):
        for item in payload:
            check_payload(item, _depth + 1)
        return
    if isinstance(payload, dict):
        for key, item in payload.items():
            if not isinstance(key, str):
                raise LocalError(f"payload dict key {key!r} is not a string")
            check_payload(item, _depth + 1)
        return
    raise LocalError(
        f"payload of type {type(payload).__name__} cannot be encoded",
        hint="send JSON data: None, bool, int, float, str, list or dict with str keys",
    )
