"""Stacking layers into one endpoint.

``Stack(lower, ..., upper)``: the application talks to the upper layer and the
network to the lower one. An upper layer's ``Transmit(to, packet)`` goes down
as ``lower.send(packet, to=to)``; a lower layer's ``Deliver(message)`` comes up
as ``upper.receive(message.payload)``. Transmits that leave the stack carry the
upper layer's message id (None for its control packets), so traces name
application messages, not the ids that lower layers give to the packets they carry.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Any, ClassVar, Self

from mailroom.core.actions import Action, Deliver, Transmit
from mailroom.core.endpoint import (
    ENDPOINT_TYPES,
    Endpoint,
    Snapshot,
    broadcast_batch,
    capabilities,
    first_difference,
    receive_batch,
    same_data,
    send_batch,
    snap_counter,
    snap_list,
)
from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.messages import MessageId, Payload
from mailroom.core.pending import Pending
from mailroom.core.wire import layer_message_id


class Stack:
    """Several endpoints of one process acting as one; ``layers[0]`` faces the network.

    Checked at construction: every layer is an ``Endpoint`` of the same pid and n,
    and every layer below another offers ``send`` (unicast), which carries the
    packets of the layer above. A Stack given as a layer is flattened into its
    layers. The Stack offers exactly its top layer's capabilities (``capabilities``),
    plus ``can_send`` when any layer is flow-controlled; asking for one it lacks is
    a LocalError.
    """

    protocol: ClassVar[str] = "Stack"  # a class attribute (compiled too), as endpoints have

    def __init__(self, *layers: Any) -> None:
        if not layers:
            raise LocalError("a Stack needs at least one layer")
        flat: list[Any] = []
        for layer in layers:
            flat += list(layer.layers) if isinstance(layer, Stack) else [layer]
        for layer in flat:
            if not isinstance(layer, Endpoint):
                raise LocalError(f"{layer!r} is not an endpoint (see mailroom.core.Endpoint)")
        self.layers: list[Any] = flat
        self.pid = flat[0].pid
        self.n = flat[0].n
        for layer in flat:
            if layer.pid != self.pid or layer.n != self.n:
                raise LocalError(f"layer {layer!r} does not match pid={self.pid}, n={self.n}")
        for lower in flat[:-1]:
            if "unicast" not in capabilities(lower):
                raise LocalError(f"{lower!r} cannot carry another layer: it has no send()")
        offered = capabilities(flat[-1]) - {"can_send"}
        if any("can_send" in capabilities(x) for x in flat):
            offered |= {"can_send"}
        #: What the application may call: the top layer's capabilities.
        self.capabilities: frozenset[str] = frozenset(offered)
        # the flow-controlled layers, found once: asking a capability protocol costs
        # tens of microseconds, and hosts ask can_send before every send
        self._flow = [x for x in flat if "can_send" in capabilities(x)]
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
        return sum(int(x.duplicates) for x in self.layers)

    def _offers(self, capability: str) -> None:
        if capability not in self.capabilities:
            raise LocalError(
                f"{self!r} does not offer {capability}: its top layer offers "
                f"{', '.join(sorted(self.capabilities)) or 'nothing'}"
            )

    # -- the application's side ----------------------------------------------------
    def send(self, payload: Payload, to: int) -> list[Action]:
        self._offers("unicast")
        return self._from(len(self.layers) - 1, self.top.send(payload, to=to))

    def broadcast(self, payload: Payload) -> list[Action]:
        self._offers("broadcast")
        return self._from(len(self.layers) - 1, self.top.broadcast(payload))

    def broadcast_many(self, payloads: Sequence[Payload]) -> list[Action]:
        """Broadcast ``payloads`` as one step (``broadcast_batch`` on the top layer)."""
        self._offers("broadcast")
        return self._from(len(self.layers) - 1, broadcast_batch(self.top, payloads))

    def send_many(self, payloads: Sequence[Payload], to: int) -> list[Action]:
        """Send ``payloads`` to ``to`` as one step (``send_batch`` on the top layer)."""
        self._offers("unicast")
        return self._from(len(self.layers) - 1, send_batch(self.top, payloads, to))

    def multicast(self, payload: Payload, to: Collection[int]) -> list[Action]:
        self._offers("multicast")
        return self._from(len(self.layers) - 1, self.top.multicast(payload, to=to))

    @property
    def needs_consume(self) -> bool:
        """True when the top layer needs the host to call ``consume``."""
        return "consume" in self.capabilities and bool(self.top.needs_consume)

    def consume(self, message_id: MessageId | None = None) -> list[Action]:
        """The application takes a delivery (tagged causal broadcast on top)."""
        self._offers("consume")
        return self._from(len(self.layers) - 1, self.top.consume(message_id))

    # -- the network's side --------------------------------------------------------------
    def receive(self, packet: object) -> list[Action]:
        return self._from(0, self.layers[0].receive(packet))

    def receive_many(self, packets: Iterable[object]) -> tuple[list[Action], list[RemoteError]]:
        """Receive packets as one step (the network-facing layer batches its replies)."""
        actions, errors = receive_batch(self.layers[0], packets)
        return self._from(0, actions), errors

    def tick(self, now: float) -> list[Action]:
        out: list[Action] = []
        for level, layer in enumerate(self.layers):
            out += self._from(level, layer.tick(now))
        return out

    def next_deadline(self) -> float | None:
        deadlines = [d for x in self.layers if (d := x.next_deadline()) is not None]
        return min(deadlines) if deadlines else None

    def _from(
        self, level: int, actions: list[Action], carry: MessageId | None = None, own: bool = True
    ) -> list[Action]:
        """Route the actions of layer ``level``; ``carry`` names what its Transmits carry,
        unless ``own`` (the layer acts on its own, e.g. retransmits: its packet says)."""
        out: list[Action] = []
        top = len(self.layers) - 1
        for a in actions:
            if isinstance(a, Transmit):
                if level == top:
                    mid = a.message_id
                elif own:  # its packet names the top layer's message, depth layers down
                    mid = layer_message_id(a.packet, top - level)
                else:
                    mid = carry
                if level == 0:
                    out.append(Transmit(a.to, a.packet, mid, lazy=a.lazy))
                else:
                    sent = self.layers[level - 1].send(a.packet, to=a.to)
                    out += self._from(level - 1, sent, mid, own=False)
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
        """Flow control: False while a flow-controlled layer says its channel is full."""
        self._offers("can_send")
        return all(x.can_send(to) for x in self._flow)

    # -- introspection -------------------------------------------------------------------
    def buffered(self) -> int:
        return sum(int(x.buffered()) for x in self.layers)

    def pending(self) -> list[Pending]:
        out: list[Pending] = []
        # a copy reversed, not reversed(): mypy types reversed() of a list[Any] as Any,
        # and mypyc cannot build a loop over that (an internal error)
        for x in self.layers[::-1]:
            out.extend(x.pending())
        return out

    def snapshot(self) -> Snapshot:
        data: Snapshot = {"protocol": self.protocol, "layers": [x.snapshot() for x in self.layers]}
        if self.rejected:
            data["rejected"] = self.rejected
        return data

    @classmethod
    def restore(cls, data: Snapshot) -> Self:
        """Rebuild a Stack from ``snapshot()`` data; LocalError if it does not fit."""
        if not isinstance(data, dict) or data.get("protocol") != cls.protocol:
            raise LocalError("not a Stack snapshot")
        layers = []
        for item in snap_list(data.get("layers"), "layers"):
            name = item.get("protocol") if isinstance(item, dict) else None
            kind = ENDPOINT_TYPES.get(name) if isinstance(name, str) else None
            if kind is None:
                raise LocalError(f"snapshot names unknown protocol {name!r}")
            layers.append(kind.restore(item))
        stack = cls(*layers)
        stack.rejected = snap_counter(data.get("rejected", 0), "rejected")
        back = stack.snapshot()
        if not same_data(back, data):
            where = first_difference(back, data)
            raise LocalError(f"snapshot of a Stack is not what snapshot() writes (at {where})")
        return stack


__all__ = ["Stack"]
