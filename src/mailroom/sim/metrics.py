"""What a simulation measures: packets, metadata bytes, delivery delay, buffer sizes."""

from __future__ import annotations

from typing import Any

import attrs

from mailroom.core.codec import encode, value_size
from mailroom.core.errors import LocalError
from mailroom.core.wire import is_packet


def varint_size(value: int) -> int:
    """Bytes of a LEB128 varint (counters are non-negative; a negative costs 10)."""
    if value < 0:
        return 10
    v = value
    size = 1
    while v >= 0x80:
        v >>= 7
        size += 1
    return size


def metadata_size(packet: object) -> int:
    """Bytes of a packet on the wire that are not the application's payload.

    Measured through ``mailroom.core.codec`` (every encoded byte but the payload's;
    with stacked layers, one packet carried as another's ``payload``, every
    layer's header counts), so ``simulate``, ``sweep`` and the benchmarks agree.
    A packet the codec cannot encode (a payload it does not know) is measured
    with its payload left out.
    """
    inner = packet
    while is_packet(getattr(inner, "payload", None)):
        inner = inner.payload  # type: ignore[attr-defined]
    if not hasattr(inner, "payload"):
        return len(encode(packet))
    try:
        return len(encode(packet)) - value_size(inner.payload)
    except LocalError:
        return _without_payload(packet) - value_size(None)


def _without_payload(packet: object) -> int:
    """Encoded bytes of ``packet`` with its innermost payload replaced by None."""

    def strip(p: Any) -> Any:
        if is_packet(p.payload):
            return attrs.evolve(p, payload=strip(p.payload))
        return attrs.evolve(p, payload=None)

    return len(encode(strip(packet)))


#: The unit of each figure of ``Metrics.summary()`` (delays are in simulated time units).
UNITS = {
    "app_messages": "messages",
    "packets": "packets",
    "packets_per_message": "packets/message",
    "metadata_bytes": "bytes",
    "metadata_bytes_per_packet": "bytes/packet",
    "metadata_bytes_per_data_packet": "bytes/data packet",
    "metadata_bytes_per_message": "bytes/message",
    "deliveries": "deliveries",
    "mean_delay": "time units",
    "max_delay": "time units",
    "largest_buffer": "messages",
    "mean_buffer": "messages",
    "duplicated": "packets",
    "dropped": "packets",
}


@attrs.define
class Metrics:
    """Counters a simulation keeps; ``summary()`` gives the derived figures."""

    app_messages: int = 0
    packets: int = 0
    data_packets: int = 0
    control_packets: int = 0
    #: ``metadata_size`` of every packet sent (data and control), and of data packets.
    metadata_bytes: int = 0
    data_metadata_bytes: int = 0
    duplicated: int = 0
    dropped: int = 0
    deliveries: int = 0
    delay_total: float = 0.0
    delay_max: float = 0.0
    largest_buffer: int = 0
    #: A process's buffer size after each thing it handles (send, packet, timer), summed.
    buffer_total: int = 0
    buffer_samples: int = 0
    delays: list[float] = attrs.field(factory=list)

    def record_transmit(self, packet: object, message_id: object) -> None:
        """A packet an endpoint transmits (before loss): data if it carries a message."""
        self.packets += 1
        size = metadata_size(packet)
        if message_id is None:
            self.control_packets += 1
        else:
            self.data_packets += 1
            self.data_metadata_bytes += size
        self.metadata_bytes += size

    def record_delay(self, delay: float) -> None:
        self.deliveries += 1
        self.delay_total += delay
        self.delays.append(delay)
        if delay > self.delay_max:
            self.delay_max = delay

    def record_buffer(self, size: int) -> None:
        """One sample of a process's buffer size, taken after it handled something."""
        self.buffer_total += size
        self.buffer_samples += 1
        if size > self.largest_buffer:
            self.largest_buffer = size

    def summary(self) -> dict[str, float]:
        per = max(self.app_messages, 1)
        return {
            "app_messages": self.app_messages,
            "packets": self.packets,
            "packets_per_message": self.packets / per,
            "metadata_bytes": self.metadata_bytes,
            "metadata_bytes_per_packet": self.metadata_bytes / max(self.packets, 1),
            "metadata_bytes_per_data_packet": self.data_metadata_bytes / max(self.data_packets, 1),
            "metadata_bytes_per_message": self.metadata_bytes / per,
            "deliveries": self.deliveries,
            "mean_delay": self.delay_total / max(self.deliveries, 1),
            "max_delay": self.delay_max,
            "largest_buffer": self.largest_buffer,
            "mean_buffer": self.buffer_total / max(self.buffer_samples, 1),
            "duplicated": self.duplicated,
            "dropped": self.dropped,
        }
