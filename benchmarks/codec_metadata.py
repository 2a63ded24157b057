"""Metadata bytes per message on the wire, with the codec, for RST, CBCAST and Skeen.

For each protocol and n in 3, 8, 32, a seeded timed simulation (random senders and
destinations, delays that reorder) carries ``--messages`` application messages; every
packet any endpoint transmits (data and control) is encoded with ``mailroom.codec``
and its metadata bytes (everything but the payload) are summed. The baseline,
measured in the same run on the same packets, is the packet's fields as compact
JSON (``packet_to_data``, payload removed); the ratio is codec / JSON.

Protocols come from a list and Skeen is included when ``mailroom.protocols`` has it.

    python benchmarks/codec_metadata.py [--messages 300]
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable
from typing import Any

import mailroom.protocols as protocols
from mailroom import codec
from mailroom.core.actions import Transmit
from mailroom.core.wire import packet_to_data
from mailroom.sim import NetworkModel, Simulation


class Recording:
    """An endpoint that passes everything through and keeps what it transmits."""

    def __init__(self, inner: Any, log: list[object]) -> None:
        self.inner = inner
        self.log = log
        self.pid = inner.pid
        self.n = inner.n

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in ("send", "broadcast", "multicast", "receive", "tick"):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            actions = attr(*args, **kwargs)
            self.log.extend(a.packet for a in actions if isinstance(a, Transmit))
            return actions

        return call


def candidates() -> list[tuple[str, Callable[[int, int], Any], str]]:
    found = [("RST", protocols.RST, "unicast"), ("CBCAST", protocols.CBCAST, "broadcast")]
    skeen = getattr(protocols, "Skeen", None)
    if skeen is not None:
        found.append(("Skeen", skeen, "broadcast" if hasattr(skeen, "broadcast") else "multicast"))
    return found


def json_metadata(packet: object) -> int:
    data = packet_to_data(packet)
    data.pop("payload", None)
    return len(json.dumps(data, separators=(",", ":")))


def measure(
    factory: Callable[[int, int], Any], mode: str, n: int, messages: int
) -> dict[str, float]:
    log: list[object] = []
    eps = [Recording(factory(p, n), log) for p in range(n)]
    sim = Simulation(eps, NetworkModel(delay=(0.5, 3.0)), seed=n)  # type: ignore[arg-type]
    rng = random.Random(n)
    for i in range(messages):
        pid = rng.randrange(n)
        t = i * 0.05
        if mode == "unicast":
            to = rng.choice([q for q in range(n) if q != pid])
            sim.schedule(t, lambda s, pid=pid, to=to, i=i: s.send(pid, f"m{i}", to=to))
        elif mode == "broadcast":
            sim.schedule(t, lambda s, pid=pid, i=i: s.broadcast(pid, f"m{i}"))
        else:
            sim.schedule(t, lambda s, pid=pid, i=i: s.multicast(pid, f"m{i}", range(n)))
    sim.run()
    assert sim.quiescent()
    codec_bytes = sum(codec.metadata_bytes(p) for p in log)
    json_bytes = sum(json_metadata(p) for p in log)
    return {
        "packets": len(log),
        "codec_per_message": codec_bytes / messages,
        "codec_per_packet": codec_bytes / len(log),
        "json_per_message": json_bytes / messages,
        "ratio": codec_bytes / json_bytes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=300)
    args = parser.parse_args()
    print(f"{args.messages} messages per run; metadata = encoded bytes minus the payload's")
    print(
        f"{'protocol':9s} {'n':>3s} {'packets':>8s} {'B/msg':>8s} {'B/packet':>9s} "
        f"{'JSON B/msg':>11s} {'codec/JSON':>10s}"
    )
    for name, factory, mode in candidates():
        for n in (3, 8, 32):
            r = measure(factory, mode, n, args.messages)
            print(
                f"{name:9s} {n:3d} {r['packets']:8d} {r['codec_per_message']:8.1f} "
                f"{r['codec_per_packet']:9.1f} {r['json_per_message']:11.1f} {r['ratio']:10.3f}"
            )


if __name__ == "__main__":
    main()
