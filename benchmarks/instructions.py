"""Instructions per delivery (callgrind), for each protocol at each n: a measure that a
loaded machine does not change, to compare the state machines before and after a change.

Two workloads, each run alone under ``valgrind --tool=callgrind`` twice, with ``count``
and ``2 * count`` messages; the difference of the two totals, divided by the deliveries
it adds, is the cost per delivery at steady state (start-up and imports cancel out):

- **receive** (``bench_delivery.py``'s workload): P0 sends a burst to P1 (``broadcast``
  for the broadcast protocols, ``send(..., to=1)`` for the others); a fresh P1 takes the
  packets in order. Both runs build the same ``2 * count`` packets; they differ only in
  how many P1 receives. Counts P1's ``receive`` calls and the loop around them, as
  bench_delivery does; **no-op** is that loop around a receive that does nothing.
- **group**: n processes broadcast in turn (or, with ``--batch K``, ``broadcast_many``
  of K), every packet delivered oldest first through one queue until the network is
  empty: every endpoint step, sends, receipts and replies included, per message
  delivered at a member (k messages delivered at n members are k * n deliveries).
- **unicast**: the same for the unicast protocols: process p sends in turn to
  p + 1 (mod n) with ``send`` (or, with ``--batch K``, ``send_many`` of K), the
  network drained oldest first after each turn; every endpoint step per delivery.

    python benchmarks/instructions.py [--count 2000] [--sizes 3 8] [--only Fifo CBCAST]
        [--batch 64] [--kinds receive group unicast]

Needs valgrind. Hash randomization is off (``PYTHONHASHSEED=0``) so both runs of a pair
execute the same start-up. Instruction counts are not times: they say how much work
the interpreter does, the same whatever else runs on the machine.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections import deque
from collections.abc import Callable
from typing import Any

from bench_delivery import PROTOCOLS, NoOp, burst

from mailroom import (
    CBCAST,
    KS,
    RST,
    Deliver,
    Fifo,
    LamportTotalOrder,
    Sequencer,
    Skeen,
    TaggedCausalBroadcast,
    Transmit,
    Unordered,
)
from mailroom.core.endpoint import broadcast_batch, send_batch

RECEIVE = ("no-op", "Unordered", "Fifo", "CBCAST", "Tagged", "KS", "RST")
GROUP: dict[str, Callable[[int, int], Any]] = {
    "Fifo": Fifo,
    "CBCAST": CBCAST,
    "Tagged": TaggedCausalBroadcast,
    "Sequencer": Sequencer,
    "Skeen": Skeen,
    "Lamport": LamportTotalOrder.stack,
}
UNICAST: dict[str, Callable[[int, int], Any]] = {"Fifo": Fifo, "RST": RST, "KS": KS}
#: the unicast workload's rows, as run_group names them
UNICAST_KIND = {f"unicast:{name}": make for name, make in UNICAST.items()}
BROADCASTING = {"CBCAST", "Tagged"}


def receive_packets(name: str, n: int, count: int) -> list[object]:
    if name != "Tagged":
        return burst(name, n, count)
    sender = TaggedCausalBroadcast(0, n)
    return [
        a.packet
        for i in range(count)
        for a in sender.broadcast(i)
        if isinstance(a, Transmit) and a.to == 1
    ]


def run_receive(name: str, n: int, count: int, made: int) -> int:
    """P1 takes the first ``count`` of ``made`` packets from P0; its deliveries."""
    packets = receive_packets(name, n, made)[:count]
    if name == "no-op":
        deliver = next(a for a in Unordered(1, n).receive(packets[0]) if isinstance(a, Deliver))
        r: Any = NoOp((deliver,))
    elif name == "Tagged":
        r = TaggedCausalBroadcast(1, n)
    else:
        r = PROTOCOLS[name](1, n)
    delivered = 0
    for p in packets:
        delivered += sum(1 for a in r.receive(p) if isinstance(a, Deliver))
    return delivered


def run_group(name: str, n: int, count: int, batch: int) -> int:
    """``count`` messages broadcast (``name`` of the form "unicast:RST": sent to the
    next process) by the processes in turn, the network drained oldest first; the
    deliveries at all members."""
    eps = [(UNICAST_KIND.get(name) or GROUP[name])(p, n) for p in range(n)]
    queue: deque[tuple[int, object]] = deque()
    delivered = 0

    def apply(actions: list[Any]) -> None:
        nonlocal delivered
        for a in actions:
            if isinstance(a, Transmit):
                queue.append((a.to, a.packet))
            elif isinstance(a, Deliver):
                delivered += 1

    sent = 0
    turn = 0
    while sent < count:
        size = min(batch, count - sent)
        ep, to = eps[turn % n], (turn + 1) % n
        payloads = list(range(sent, sent + size))
        if name in UNICAST_KIND:
            apply(ep.send(sent, to=to) if batch == 1 else send_batch(ep, payloads, to))
        elif batch == 1:
            apply(ep.broadcast(sent))
        else:
            apply(broadcast_batch(ep, payloads))
        sent += size
        turn += 1
        while queue:
            to, packet = queue.popleft()
            apply(eps[to].receive(packet))
    return delivered


def one(args: argparse.Namespace) -> None:
    """The workload alone (what valgrind runs)."""
    kind, name, n, count, made = args.one[0], args.one[1], *map(int, args.one[2:])
    if kind == "receive":
        got = run_receive(name, n, count, made)
        want = count
    elif kind == "unicast":
        got = run_group(f"unicast:{name}", n, count, args.batch)
        want = count
    else:
        got = run_group(name, n, count, args.batch)
        want = count * n
    if got != want:
        raise SystemExit(f"{name} at n = {n} delivered {got} of {want}")


def instructions(kind: str, name: str, n: int, count: int, made: int, batch: int) -> int:
    """Instructions callgrind counts for one run of the workload."""
    cmd = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        __file__,
        "--batch",
        str(batch),
        "--one",
        kind,
        name,
        str(n),
        str(count),
        str(made),
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode or found is None:
        raise SystemExit(f"{name} n={n}: valgrind failed:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def per_delivery(kind: str, name: str, n: int, count: int, batch: int) -> float:
    low = instructions(kind, name, n, count, 2 * count, batch)
    high = instructions(kind, name, n, 2 * count, 2 * count, batch)
    return (high - low) / (count if kind != "group" else count * n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--sizes", type=int, nargs="+", default=[3, 8])
    parser.add_argument("--only", nargs="+", default=None, help="these rows only")
    parser.add_argument("--kinds", nargs="+", default=["receive", "group"])
    parser.add_argument("--batch", type=int, default=1, help="group: broadcast_many of this")
    parser.add_argument("--one", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        one(args)
        return
    print(f"instructions per delivery (callgrind; {args.count} vs {2 * args.count} messages)")
    for kind in args.kinds:
        names = {"receive": RECEIVE, "unicast": tuple(UNICAST)}.get(kind, tuple(GROUP))
        label = kind if args.batch == 1 or kind == "receive" else f"{kind}, batches of {args.batch}"
        for name in names:
            if args.only and name not in args.only:
                continue
            cells = [
                f"{per_delivery(kind, name, n, args.count, args.batch):9.0f}" for n in args.sizes
            ]
            print(
                f"{label:22s} {name:10s} "
                + " ".join(f"n={n}: {c}" for n, c in zip(args.sizes, cells, strict=True)),
                flush=True,
            )


if __name__ == "__main__":
    main()
