"""A welcome side-effect of precise tagging: precise tags deliver no later than over-ordering ones.

Timed simulations of N processes over a network with delays uniform in
[0.5, 5]: a seeded random workload of broadcasts, and applications that reply
from inside their delivery handling (the callback model) to about a third of
the messages they deliver (chosen by a hash of process and payload, so both
protocols see the same decisions). The same seeds, workloads and network model
run under NaiveTagged (tags are the middleware's clock, the pitfall) and
TaggedCausalBroadcast. Printed: mean and max delivery delay (send to delivery,
simulated time units, every delivery including the sender's own), the largest
mail room, and naive / precise ratios.

    python benchmarks/tagged_delay.py [--seeds 10] [--n 4] [--broadcasts 200]
"""

from __future__ import annotations

import argparse
import zlib
from typing import Any

from mailroom import Message, TaggedCausalBroadcast
from mailroom.sim import NetworkModel, Simulation, random_workload
from mailroom.testing import NaiveTagged, tag_violations
from mailroom.trace import check


def explicit(pid: int, n: int) -> TaggedCausalBroadcast:
    """Precise tags: the simulator consumes each delivery as the application takes it."""
    return TaggedCausalBroadcast(pid, n, consume="explicit")


def reply(sim: Simulation, pid: int, m: Message) -> None:
    payload = str(m.payload)
    chosen = zlib.crc32(f"{pid}:{payload}".encode()) % 3 == 0
    if m.sender != pid and not payload.startswith("re:") and chosen:
        sim.broadcast(pid, f"re:{payload}@P{pid}")


def simulate(factory: Any, n: int, count: int, seed: int) -> dict[str, float]:
    sim = Simulation(
        [factory(p, n) for p in range(n)],
        NetworkModel(delay=(0.5, 5.0)),
        seed=seed,
        on_deliver=reply,
    )
    random_workload(sim, count, mode="broadcast", span=count / 4, seed=seed)
    sim.run()
    report = check(sim.trace, ("integrity", "causal", "liveness"))
    assert report.ok, report.summary()
    sent = {e.message: e for e in sim.trace if e.kind == "send"}
    remote = [e for e in sim.trace if e.kind == "deliver" and e.process != e.message.origin]
    delays = [e.time - sent[e.message].time for e in remote]  # type: ignore[operator]
    replies = [d for e, d in zip(remote, delays, strict=True) if str(e.payload).startswith("re:")]
    return {
        "messages": sim.metrics.app_messages,
        "mean": sum(delays) / len(delays),
        "replies": sum(replies) / len(replies),
        "max": max(delays),
        "buffer": sim.metrics.largest_buffer,
        "over": sum("over-orders" in v.reason for v in tag_violations(sim)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--broadcasts", type=int, default=200)
    args = parser.parse_args()
    rows = {"naive": [], "precise": []}  # type: dict[str, list[dict[str, float]]]
    print(f"n={args.n}, {args.broadcasts} workload broadcasts per run plus replies")
    print("mean delay of deliveries at other processes (all / replies only), over-ordered pairs")
    print(f"{'seed':>4} {'msgs':>5}  {'naive':>15} {'over':>4}  {'precise':>15} {'over':>4}  ratio")
    for seed in range(args.seeds):
        naive = simulate(NaiveTagged, args.n, args.broadcasts, seed)
        precise = simulate(explicit, args.n, args.broadcasts, seed)
        rows["naive"].append(naive)
        rows["precise"].append(precise)
        cells = [
            f"{r['mean']:>7.3f} / {r['replies']:<5.3f} {int(r['over']):>4}"
            for r in (naive, precise)
        ]
        ratio = naive["mean"] / precise["mean"]
        print(f"{seed:>4} {int(precise['messages']):>5}  {cells[0]}  {cells[1]}  {ratio:.4f}")

    def avg(name: str, key: str) -> float:
        return sum(r[key] for r in rows[name]) / len(rows[name])

    for key, what in (("mean", "all deliveries"), ("replies", "replies")):
        nm, pm = avg("naive", key), avg("precise", key)
        print(f"mean delay, {what}: naive {nm:.4f}, precise {pm:.4f}; naive/precise {nm / pm:.4f}")
    print(
        f"over-ordered pairs per run: naive {avg('naive', 'over'):.1f}, "
        f"precise {avg('precise', 'over'):.1f}; largest mail room: naive "
        f"{max(r['buffer'] for r in rows['naive'])}, precise "
        f"{max(r['buffer'] for r in rows['precise'])}"
    )


if __name__ == "__main__":
    main()
