"""Stacking layers into one endpoint.

``Stack(lower, ..., upper)``: the application talks to the upper layer and the
network to the lower one. An upper layer's ``Transmit(to, packet)`` goes down
as ``lower.send(packet, to=to)``; a lower layer's ``Deliver(message)`` comes up
as ``upper.receive(message.payload)``. Transmits that leave the stack carry the
upper layer's message id (None for its control packets), so traces name
application messages, not the ids that lower layers give to the packets they carry.
"""

from __future__ import annotations

from typing import Any, Self

from mailroom.core.actions import Action, Deliver, Transmit
from mailroom.core.endpoint import ENDPOINT_TYPES, Snapshot
from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.messages import MessageId, Payload
from mailroom.core.pending import Pending


class Stack:
    """Several endpoints of one process acting as one; ``layers[0]`` faces the network."""

    protocol = "Stack"

    def __init__(self, *layers: Any) -> None:
        if not layers:
            raise LocalError("a Stack needs at least one layer")
        self.layers = list(layers)
        self.pid = layers[0].pid
        self.n = layers[0].n
        for layer in layers:
            if layer.pid != self.pid or layer.n != self.n:
                raise LocalError(f"layer {layer!r} does not match pid={self.pid}, n={self.n}")
        for lower in layers[:-1]:
            if not hasattr(lower, "send"):
                raise LocalError(f"{lower!r} cannot carry another layer: it has no send()")
        #: Payloads that a lower layer accepted and the layer above refused as malformed.
        self.rejected = 0
        self.last_rejection = ""

    def __repr__(self) -> str:
        return "Stack(" + ", ".join(repr(x) for x in self.layers) + ")"

    @property
    def top(self) -> Any:
        return self.layers[-1]

    @property
    def sent_count(self) -> int:
        return int(self.top.sent_count)

    @property
    def duplicates(self) -> int:
        return sum(int(getattr(x, "duplicates", 0)) for x in self.layers)

    # -- the application's side ----------------------------------------------------
    def send(self, payload: Payload, to: int) -> list[Action]:
        return self._from(len(self.layers) - 1, self.top.send(payload, to=to))

    def broadcast(self, payload: Payload) -> list[Action]:
        return self._from(len(self.layers) - 1, self.top.broadcast(payload))

    def multicast(self, payload: Payload, to: set[int]) -> list[Action]:
        return self._from(len(self.layers) - 1, self.top.multicast(payload, to=to))

    def consume(self, message_id: MessageId | None = None) -> list[Action]:
        """The application takes a delivery (tagged causal broadcast on top); a no-op
        when the upper layer has no consume step."""
        consume = getattr(self.top, "consume", None)
        if consume is None:
            return []
        return self._from(len(self.layers) - 1, consume(message_id))

    # -- the network's side --------------------------------------------------------------
    def receive(self, packet: object) -> list[Action]:
        return self._from(0, self.layers[0].receive(packet))

    def tick(self, now: float) -> list[Action]:
        out: list[Action] = []
        for level, layer in enumerate(self.layers):
            out += self._from(level, layer.tick(now))
        return out

    def next_deadline(self) -> float | None:
        deadlines = [d for x in self.layers if (d := x.next_deadline()) is not None]
        return min(deadlines) if deadlines else None

    def _from(
        self, level: int, actions: list[Action], carry: MessageId | None = None
    ) -> list[Action]:
        """Route the actions of layer ``level``; ``carry`` names what its Transmits carry."""
        out: list[Action] = []
        top = len(self.layers) - 1
        for a in actions:
            if isinstance(a, Transmit):
                mid = a.message_id if level == top else carry
                if level == 0:
                    out.append(Transmit(a.to, a.packet, mid))
                else:
                    sent = self.layers[level - 1].send(a.packet, to=a.to)
                    out += self._from(level - 1, sent, mid)
            elif isinstance(a, Deliver) and level < top:
                try:
                    up = self.layers[level + 1].receive(a.message.payload)
                except RemoteError as exc:
                    # The layers below have already accepted (and perhaps acknowledged)
                    # the packet, so raising would misstate that nothing changed: the
                    # upper layer, unchanged, refuses the payload and the stack counts it.
                    self.rejected += 1
                    self.last_rejection = str(exc)
                    continue
                out += self._from(level + 1, up)
            else:  # Deliver at the top, Stable, Backpressure: for the application
                out.append(a)
        return out

    def can_send(self, to: int | None = None) -> bool:
        """Flow control: False while a layer with ``can_send`` says its channel is full."""
        for x in self.layers:  # a loop, not all(genexpr): the runtime asks after every step
            can = getattr(x, "can_send", None)
            if can is not None and not can(to):
                return False
        return True

    # -- introspection -------------------------------------------------------------------
    def buffered(self) -> int:
        return sum(int(x.buffered()) for x in self.layers)

    def pending(self) -> list[Pending]:
        return [p for x in reversed(self.layers) for p in x.pending()]

    def snapshot(self) -> Snapshot:
        data: Snapshot = {"protocol": self.protocol, "layers": [x.snapshot() for x in self.layers]}
        if self.rejected:
            data["rejected"] = self.rejected
        return data

    @classmethod
    def restore(cls, data: Snapshot) -> Self:
        if not isinstance(data, dict) or data.get("protocol") != cls.protocol:
            raise LocalError("not a Stack snapshot")
        layers = []
        for item in data.get("layers", []):
            name = item.get("protocol") if isinstance(item, dict) else None
            kind = ENDPOINT_TYPES.get(name) if isinstance(name, str) else None
            if kind is None:
                raise LocalError(f"snapshot names unknown protocol {name!r}")
            layers.append(kind.restore(item))
        stack = cls(*layers)
        rejected = data.get("rejected", 0)
        if type(rejected) is not int or rejected < 0:
            raise LocalError("snapshot field rejected must be a counter")
        stack.rejected = rejected
        return stack


__all__ = ["Stack"]
