"""What a simulation measures: packets, metadata bytes, delivery delay, buffer sizes."""

from __future__ import annotations

from typing import Any

import attrs


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


def _size(value: Any) -> int:
    if isinstance(value, bool) or value is None:
        return 1
    if isinstance(value, int):
        return varint_size(value)
    if isinstance(value, tuple | list):
        return varint_size(len(value)) + sum(_size(v) for v in value)
    if isinstance(value, dict):
        return varint_size(len(value)) + sum(_size(k) + _size(v) for k, v in value.items())
    if isinstance(value, str | bytes):
        return varint_size(len(value)) + len(value)
    if attrs.has(type(value)):
        return metadata_size(value)
    return 8


def metadata_size(packet: object) -> int:
    """Estimated bytes of a packet's metadata: every field but ``payload``, as varints."""
    cls: Any = type(packet)
    if not attrs.has(cls):
        return _size(packet)
    return sum(_size(getattr(packet, f.name)) for f in attrs.fields(cls) if f.name != "payload")


@attrs.define
class Metrics:
    """Counters a simulation keeps; ``summary()`` gives the derived figures."""

    app_messages: int = 0
    packets: int = 0
    data_packets: int = 0
    control_packets: int = 0
    metadata_bytes: int = 0
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
            "deliveries": self.deliveries,
            "mean_delay": self.delay_total / max(self.deliveries, 1),
            "max_delay": self.delay_max,
            "largest_buffer": self.largest_buffer,
            "mean_buffer": self.buffer_total / max(self.buffer_samples, 1),
            "duplicated": self.duplicated,
            "dropped": self.dropped,
        }
