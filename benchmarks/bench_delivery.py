"""Per-delivery cost of the point-to-point and causal state machines, against a no-op call.

For each protocol and n, one sender produces a burst of ``--burst`` messages to
one receiver (``broadcast`` for CBCAST, ``send(..., to=1)`` for the others). A
fresh receiver takes them (a) in order and (b) in reverse order, so that all but
the last wait in the mail room and the last releases the whole burst. The figure
is CPU time (``time.process_time``) per message of a loop that calls
``receiver.receive(packet)`` and counts its ``Deliver`` actions.

**Fifo/64** and **CBCAST/64**: the same messages sent 64 at a time (``send_many``,
``broadcast_many``), so P1 receives one ``FifoBatch`` / ``CBCASTBatch`` per 64
messages; the figure is still per message delivered.

**no-op** is the same loop around a ``receive`` that does nothing (it returns a
prebuilt tuple holding one ``Deliver``): the floor under every row, the cost of
the call and the loop themselves.

Discipline (``rounds.py``): ``--rounds`` (5) alternating rounds, every protocol
and n once per round, in the same order; each row's median and range (min–max)
over the rounds; the ratio to no-op taken within each round and summarised by
its median; the load average printed at the start and end of every round, and a
1-minute load above ``--max-load`` refuses the run (``--load-policy flag`` or
``wait``). The goal for buffered delivery: a reversed burst costs at most 3x per
message what in-order arrival costs at n = 8 (amortized O(n), no rescans).

    python benchmarks/bench_delivery.py [--burst 10000] [--rounds 5] [--sizes 3 8 32]
        [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import rounds

from mailroom import CBCAST, KS, RST, Deliver, Fifo, Transmit, Unordered


class NoOp:
    """A receiver whose ``receive`` does nothing: it returns one prebuilt delivery."""

    def __init__(self, actions: tuple[Deliver, ...]) -> None:
        self.actions = actions

    def receive(self, packet: object) -> tuple[Deliver, ...]:
        return self.actions


PROTOCOLS: dict[str, Callable[[int, int], Any]] = {
    "Unordered": Unordered,
    "Fifo": Fifo,
    "CBCAST": CBCAST,
    "KS": KS,
    "RST": RST,
}
#: The batched rows: the protocol, and the messages per batch packet.
BATCHED = {"Fifo/64": ("Fifo", 64), "CBCAST/64": ("CBCAST", 64)}
ROWS = ("no-op", *PROTOCOLS, *BATCHED)


def burst(name: str, n: int, count: int) -> list[object]:
    """The packets of ``count`` messages from P0 that P1 receives."""
    kind, size = BATCHED.get(name, ("Unordered" if name == "no-op" else name, 1))
    sender = PROTOCOLS[kind](0, n)
    packets = []
    for i in range(0, count, size):
        if size > 1:
            chunk = list(range(i, min(i + size, count)))
            many = sender.broadcast_many(chunk) if kind == "CBCAST" else sender.send_many(chunk, 1)
            actions = many if len(chunk) > 1 else []
        else:
            actions = sender.broadcast(i) if kind == "CBCAST" else sender.send(i, to=1)
        packets += [a.packet for a in actions if isinstance(a, Transmit) and a.to == 1]
    return packets


def receiver(name: str, n: int, packets: Sequence[object]) -> Any:
    """A fresh receiver P1 (for no-op: one that returns a real ``Deliver``)."""
    if name != "no-op":
        return PROTOCOLS[BATCHED.get(name, (name, 1))[0]](1, n)
    deliver = next(a for a in Unordered(1, n).receive(packets[0]) if isinstance(a, Deliver))
    return NoOp((deliver,))


def per_message(name: str, n: int, packets: Sequence[object], count: int) -> float:
    """CPU seconds per message for a fresh receiver taking ``packets`` (``count``
    messages) in this order."""
    r = receiver(name, n, packets)
    start = time.process_time()
    delivered = 0
    for p in packets:
        delivered += sum(1 for a in r.receive(p) if isinstance(a, Deliver))
    elapsed = time.process_time() - start
    if delivered != count:
        raise RuntimeError(f"{name} at n = {n} delivered {delivered} of {count}")
    return elapsed / count


def measure(args: argparse.Namespace) -> dict[tuple[str, int], dict[str, list[float]]]:
    """Every row's in-order and reverse cost per round (seconds per message)."""
    bursts = {(name, n): burst(name, n, args.burst) for n in args.sizes for name in ROWS}
    runs: dict[tuple[str, int], dict[str, list[float]]] = {
        key: {"forward": [], "reverse": []} for key in bursts
    }
    log = rounds.RoundLog("bench_delivery", args.rounds)
    for r in range(args.rounds):
        log.start(r)
        for (name, n), packets in bursts.items():  # the same order every round
            runs[name, n]["forward"].append(per_message(name, n, packets, args.burst))
            runs[name, n]["reverse"].append(per_message(name, n, packets[::-1], args.burst))
        log.end(r)
    return runs


def table(runs: dict[tuple[str, int], dict[str, list[float]]]) -> list[dict[str, Any]]:
    """Per row: medians and ranges in µs, ratios to no-op and reverse / in order."""
    out = []
    for (name, n), r in runs.items():
        noop = runs["no-op", n]["forward"]
        out.append(
            {
                "protocol": name,
                "n": n,
                "in_order_us": rounds.Spread.of([1e6 * x for x in r["forward"]]),
                "reverse_us": rounds.Spread.of([1e6 * x for x in r["reverse"]]),
                "in_order_vs_noop": rounds.Spread.of(rounds.ratios(r["forward"], noop)),
                "reverse_vs_in_order": rounds.Spread.of(rounds.ratios(r["reverse"], r["forward"])),
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burst", type=int, default=10_000)
    parser.add_argument("--sizes", type=int, nargs="+", default=[3, 8, 32])
    parser.add_argument("--json", default="", help="also write every figure to this file")
    rounds.add_options(parser)
    args = parser.parse_args()
    flag = rounds.flags(rounds.check_load(args), rounds.settings_flag(args.rounds))
    if flag:
        print(flag, flush=True)
    rows = table(measure(args))
    print(
        f"\nburst of {args.burst} messages; CPU µs per message, median (min–max) over "
        f"{args.rounds} alternating rounds; ratios per round, their median"
        f"{'; ' + flag if flag else ''}"
    )
    print(
        f"{'protocol':10s} {'n':>3s} {'in order µs':>22s} {'reverse µs':>22s} "
        f"{'in order / no-op':>22s} {'reverse / in order':>22s}"
    )
    for row in rows:
        print(
            f"{row['protocol']:10s} {row['n']:3d} {row['in_order_us'].text():>22s} "
            f"{row['reverse_us'].text():>22s} {row['in_order_vs_noop'].text():>22s} "
            f"{row['reverse_vs_in_order'].text():>22s}"
        )
    if args.json:
        out = [
            {k: v.to_dict() if isinstance(v, rounds.Spread) else v for k, v in row.items()}
            for row in rows
        ]
        with open(args.json, "w") as f:
            json.dump({"flag": flag, "burst": args.burst, "rows": out}, f, indent=1)


if __name__ == "__main__":
    main()
