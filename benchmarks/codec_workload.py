"""A fixed codec workload for instruction counts: encode and decode the packets of every
protocol, many times, so that ``valgrind --tool=callgrind`` can compare two versions.

The packets come from the protocols themselves: each group of processes exchanges a
few messages (unicasts, broadcasts, batches, a Reliable stack carrying CBCAST) with
every transmitted packet delivered at once, in order, and recorded. Then the
recorded packets are encoded (and the bytes decoded) ``--rounds`` times. Timings
on a loaded machine lie; instruction counts do not::

    valgrind --tool=callgrind --callgrind-out-file=/tmp/after.out \\
        .venv/bin/python benchmarks/codec_workload.py --rounds 200
    callgrind_annotate /tmp/after.out | head

Run it again with ``--rounds 0`` and subtract, to leave out start-up and the
recording; ``PYTHONPATH=/tmp/old/src`` measures another version of the library.

    python benchmarks/codec_workload.py [--rounds 200] [--only encode|decode]
        [--runs NAME...] [--skip NAME...]
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Callable
from typing import Any

from mailroom import (
    CBCAST,
    KS,
    RST,
    Fifo,
    LamportTotalOrder,
    Reliable,
    Sequencer,
    Skeen,
    Stack,
    TaggedCausalBroadcast,
    Transmit,
    Unordered,
)
from mailroom.codec import decode, encode

try:
    from mailroom.codec import encode_all
except ImportError:  # a library from before encode_all (--baseline measurements)
    encode_all = None  # type: ignore[assignment]
from mailroom.core.endpoint import broadcast_batch

PAYLOADS: tuple[Any, ...] = ("hello", 7, None, "a longer message of text", {"k": [1, 2.5]}, 300)


def exchange(
    make: Callable[[int, int], Any], n: int, mode: str, rounds: int
) -> list[list[Transmit]]:
    """Every packet transmitted while each process sends ``rounds`` messages (delivered
    at once, in order), grouped by the step that transmitted them."""
    eps = [make(p, n) for p in range(n)]
    log: list[list[Transmit]] = []
    queue: list[list[Transmit]] = []

    def run(actions: list[Any]) -> None:
        queue.append([a for a in actions if isinstance(a, Transmit)])
        while queue:
            group = queue.pop(0)
            log.append(group)
            for t in group:
                queue.append([a for a in eps[t.to].receive(t.packet) if isinstance(a, Transmit)])

    for k in range(rounds):
        for pid, ep in enumerate(eps):
            payload = PAYLOADS[(k + pid) % len(PAYLOADS)]
            if mode == "unicast":
                run(ep.send(payload, to=(pid + 1 + k) % n))
            elif mode == "batch":
                run(broadcast_batch(ep, [f"b{k}.{i}" for i in range(8)]))
            else:
                run(ep.broadcast(payload))
    return [group for group in log if group]


def reliable_cbcast(pid: int, n: int) -> Stack:
    return Stack(Reliable(pid, n), CBCAST(pid, n))


#: name -> (factory, n, how each process sends, messages per process)
RUNS: dict[str, tuple[Callable[[int, int], Any], int, str, int]] = {
    "unordered": (Unordered, 3, "unicast", 6),
    "fifo": (Fifo, 3, "unicast", 6),
    "rst": (RST, 8, "unicast", 6),
    "cbcast": (CBCAST, 8, "broadcast", 2),
    "cbcast32": (CBCAST, 32, "broadcast", 1),  # mostly sparse vectors
    "cbcast-batch": (CBCAST, 3, "batch", 6),
    "ks": (KS, 5, "unicast", 6),
    "tagged": (TaggedCausalBroadcast, 4, "broadcast", 6),
    "lamport": (LamportTotalOrder, 3, "broadcast", 6),
    "sequencer": (Sequencer, 4, "broadcast", 6),
    "sequencer-batch": (Sequencer, 3, "batch", 6),
    "skeen": (Skeen, 4, "broadcast", 6),
    "reliable-cbcast": (reliable_cbcast, 4, "broadcast", 6),
    "fifo-long": (Fifo, 2, "unicast", 200),  # numbers past 127: two-byte varints
    "cbcast-long": (CBCAST, 3, "broadcast", 60),
}


def corpus(names: list[str]) -> list[list[object]]:
    """The recorded packets of the runs ``names``, in the order they were sent, grouped
    by the step that sent them (what a host encodes at once)."""
    groups: list[list[object]] = []
    for name in names:
        make, n, mode, rounds = RUNS[name]
        groups += [[t.packet for t in group] for group in exchange(make, n, mode, rounds)]
    return groups


def encode_group(group: list[object]) -> list[bytes]:
    """The bytes of a step's packets, as a host writes them (``encode_all`` where the
    library has it, else one ``encode`` each)."""
    if encode_all is None:
        return [encode(p) for p in group]
    return encode_all(group)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--only", choices=("encode", "decode"))
    parser.add_argument("--runs", nargs="+", choices=sorted(RUNS), default=sorted(RUNS))
    parser.add_argument("--skip", nargs="+", choices=sorted(RUNS), default=[])
    args = parser.parse_args()
    groups = corpus([r for r in args.runs if r not in args.skip])
    packets = [p for group in groups for p in group]
    encoded = [data for group in groups for data in encode_group(group)]
    for data, p in zip(encoded, packets, strict=True):
        assert decode(data) == p and encode(p) == data, p
    for _ in range(args.rounds):
        if args.only != "decode":
            for group in groups:
                encode_group(group)
        if args.only != "encode":
            for data in encoded:
                decode(data)
    kinds = Counter(type(p).__name__ for p in packets)
    print(f"{len(packets)} packets x {args.rounds} rounds:", dict(sorted(kinds.items())))


if __name__ == "__main__":
    main()
