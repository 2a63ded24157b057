"""Metadata bytes per message on the wire, and CPU per delivery: RST vs KS (vs CBCAST).

For n = 4, 8, 16, 32, 64 and three workloads (random unicast; client-server with
P0 serving n-1 clients that each get a reply; broadcast as n-1 unicasts) this
runs one timed simulation with RST endpoints and one with KS endpoints, on the
same seeded schedule, and measures for every application message:

- the bytes of its packet that are not payload, through the codec
  (``mailroom.codec.metadata_bytes``): mean and 99th percentile;
- for CBCAST-as-unicast, the bytes of the ``CBCASTPacket`` that would carry the
  message's vector timestamp (n counters of sends it causally follows);
- the CPU time (``time.process_time``) spent inside the endpoints' ``send`` and
  ``receive``, per delivery, for RST and KS in the same run.

Both runs must deliver the same messages in the same order at every process;
the script checks that too. Each process sends ``--per-process`` messages (32 by
default, so n = 64 is 2048 messages), about one every ``--interval`` = 10
time units while message delays are uniform in 1..10, which keeps the whole sweep to a few
minutes. Writes a Markdown table and a plot, and puts the table into docs/ks.md:

    python benchmarks/metadata_bytes.py            # docs/_static/metadata_bytes.{md,png}
    python benchmarks/metadata_bytes.py --ns 4 8   # a quick look
"""

from __future__ import annotations

import argparse
import math
import random
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from mailroom import KS, RST, Deliver, Transmit
from mailroom.codec import metadata_bytes
from mailroom.core.messages import Message, MessageId
from mailroom.protocols import CBCASTPacket
from mailroom.sim import Simulation
from mailroom.sim.simulation import NetworkModel

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = ("random unicast", "client-server", "broadcast as n-1 unicasts")
PROTOCOLS = ("RST", "KS", "CBCAST")
BEGIN, END = "<!-- metadata_bytes table -->", "<!-- end of metadata_bytes table -->"


class Meter:
    """Shared by a run's endpoints: CPU in endpoint calls, the packets sent, the
    deliveries, and each message's vector timestamp (for CBCAST-as-unicast)."""

    def __init__(self, n: int) -> None:
        self.cpu = 0.0
        self.packets: list[object] = []
        self.cbcast: list[int] = []
        self.delivered: list[list[MessageId]] = [[] for _ in range(n)]
        self.vc = [[0] * n for _ in range(n)]
        self.stamps: dict[MessageId, tuple[int, ...]] = {}


class Metered:
    """An endpoint wrapped so that only its own work is timed."""

    def __init__(self, inner: Any, meter: Meter) -> None:
        self.inner = inner
        self.meter = meter

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def send(self, payload: object, to: int) -> list[Any]:
        start = time.process_time()
        actions: list[Any] = self.inner.send(payload, to=to)
        self.meter.cpu += time.process_time() - start
        self._seen(actions)
        return actions

    def receive(self, packet: object) -> list[Any]:
        start = time.process_time()
        actions: list[Any] = self.inner.receive(packet)
        self.meter.cpu += time.process_time() - start
        self._seen(actions)
        return actions

    def _seen(self, actions: list[Any]) -> None:
        m, me = self.meter, self.inner.pid
        for a in actions:
            if isinstance(a, Transmit) and a.message_id is not None:
                vc = m.vc[me]
                vc[me] += 1
                stamp = tuple(vc)
                m.stamps[a.message_id] = stamp
                m.packets.append(a.packet)
                m.cbcast.append(metadata_bytes(CBCASTPacket(me, stamp, a.packet.payload)))
            elif isinstance(a, Deliver):
                m.delivered[me].append(a.message.id)
                vc = m.vc[me]
                for k, v in enumerate(m.stamps[a.message.id]):
                    if v > vc[k]:
                        vc[k] = v


def schedule(sim: Simulation, workload: str, per_process: int, seed: int, interval: float) -> None:
    """Put the workload's operations on the simulation's timeline: each process
    sends about once every ``interval`` time units (message delays are 1..10)."""
    n, rng = sim.n, random.Random(seed)
    total = per_process * n
    span = interval * per_process
    if workload == "random unicast":
        for i in range(total):
            p = rng.randrange(n)
            q = rng.choice([q for q in range(n) if q != p])
            sim.schedule(
                rng.uniform(0, span), partial(Simulation.send, pid=p, payload=f"m{i}", to=q)
            )
    elif workload == "client-server":
        for i in range(total // 2):  # each request gets a reply: total messages in all
            c = rng.randrange(1, n)
            sim.schedule(
                rng.uniform(0, span), partial(Simulation.send, pid=c, payload=f"q{i}", to=0)
            )
    else:
        for i in range(max(1, total // (n - 1))):
            p = rng.randrange(n)
            sim.schedule(rng.uniform(0, span), partial(_broadcast, p=p, payload=f"b{i}"))


def _broadcast(sim: Simulation, p: int, payload: str) -> None:
    for q in range(sim.n):
        if q != p:
            sim.send(p, payload, to=q)


def _server(sim: Simulation, pid: int, message: Message) -> None:
    if pid == 0:
        sim.send(0, f"re:{message.payload}", to=message.sender)


def run(
    factory: Callable[[int, int], Any],
    n: int,
    workload: str,
    per_process: int,
    interval: float = 10.0,
) -> Meter:
    meter = Meter(n)
    sim = Simulation(
        [Metered(factory(pid, n), meter) for pid in range(n)],
        NetworkModel(delay=(1.0, 10.0)),
        seed=n,
        record=False,
        on_deliver=_server if workload == "client-server" else None,
    )
    schedule(sim, workload, per_process, seed=n, interval=interval)
    sim.run()
    assert sim.quiescent()
    return meter


def p99(values: list[int]) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]


def measure(
    ns: list[int], per_process: int, interval: float, workloads: tuple[str, ...] = WORKLOADS
) -> list[dict[str, Any]]:
    rows = []
    for workload in workloads:
        for n in ns:
            rst = run(RST, n, workload, per_process, interval)
            ks = run(KS, n, workload, per_process, interval)
            assert rst.delivered == ks.delivered, f"RST and KS disagree at n={n}, {workload}"
            sizes = {
                "RST": [metadata_bytes(p) for p in rst.packets],
                "KS": [metadata_bytes(p) for p in ks.packets],
                "CBCAST": rst.cbcast,
            }
            deliveries = sum(len(d) for d in ks.delivered)
            row: dict[str, Any] = {
                "workload": workload,
                "n": n,
                "interval": interval,
                "messages": len(rst.packets),
            }
            for name in PROTOCOLS:
                row[f"{name} mean"] = sum(sizes[name]) / len(sizes[name])
                row[f"{name} p99"] = p99(sizes[name])
            half = len(sizes["RST"]) // 2  # the second half: past the warm-up
            row["steady"] = sum(sizes["KS"][half:]) / sum(sizes["RST"][half:])
            row["RST cpu"] = rst.cpu / deliveries * 1e6
            row["KS cpu"] = ks.cpu / deliveries * 1e6
            rows.append(row)
            print(
                f"{workload:26s} n={n:2d} every {interval:g} msgs={row['messages']:5d}  "
                + "  ".join(f"{k}={row[f'{k} mean']:.0f}/{row[f'{k} p99']}" for k in PROTOCOLS)
                + f"  cpu us/delivery RST={row['RST cpu']:.0f} KS={row['KS cpu']:.0f}",
                flush=True,
            )
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| workload | n | send every | messages | RST mean | RST p99 | KS mean | KS p99 "
        "| CBCAST mean | CBCAST p99 | KS/RST (mean) | KS/RST (2nd half) "
        "| RST µs/delivery | KS µs/delivery | KS/RST CPU |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['workload']} | {r['n']} | {r['interval']:g} | {r['messages']} "
            f"| {r['RST mean']:.1f} | {r['RST p99']} | {r['KS mean']:.1f} | {r['KS p99']} "
            f"| {r['CBCAST mean']:.1f} | {r['CBCAST p99']} "
            f"| {r['KS mean'] / r['RST mean']:.3f} | {r['steady']:.3f} "
            f"| {r['RST cpu']:.1f} | {r['KS cpu']:.1f} | {r['KS cpu'] / r['RST cpu']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(WORKLOADS), figsize=(13, 4), sharey=True)
    styles = {"RST": ("tab:red", "o"), "KS": ("tab:blue", "s"), "CBCAST": ("tab:gray", "^")}
    for ax, workload in zip(axes, WORKLOADS, strict=True):
        sub = [r for r in rows if r["workload"] == workload]
        ns = [r["n"] for r in sub]
        for name, (color, marker) in styles.items():
            label = "CBCAST-as-unicast" if name == "CBCAST" else name
            ax.plot(
                ns,
                [r[f"{name} mean"] for r in sub],
                marker=marker,
                color=color,
                label=f"{label} mean",
            )
            ax.plot(
                ns,
                [r[f"{name} p99"] for r in sub],
                ls="--",
                color=color,
                alpha=0.6,
                label=f"{label} p99",
            )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(ns, [str(n) for n in ns])
        ax.set_title(workload)
        ax.set_xlabel("processes n")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("metadata bytes per message (codec)")
    axes[-1].legend(fontsize=7)
    fig.suptitle("Causal unicast metadata on the wire: RST's n x n SENT vs KS's pruned log")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ns", type=int, nargs="+", default=[4, 8, 16, 32, 64])
    parser.add_argument("--per-process", type=int, default=32)
    parser.add_argument("--interval", type=float, default=10.0)
    parser.add_argument(
        "--sensitivity",
        type=float,
        nargs="*",
        default=[2.0, 5.0, 20.0],
        help="other send intervals to try on random unicast at n=32",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "_static")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rows = measure(args.ns, args.per_process, args.interval)
    args.out.mkdir(parents=True, exist_ok=True)
    text = table(rows)
    if args.sensitivity and 32 in args.ns:
        extra = [
            r
            for gap in args.sensitivity
            for r in measure([32], args.per_process, gap, ("random unicast",))
        ]
        base = [r for r in rows if r["n"] == 32 and r["workload"] == "random unicast"]
        text += "\nRandom unicast at n = 32, by send interval:\n\n"
        text += table(sorted(extra + base, key=lambda r: r["interval"]))
    (args.out / "metadata_bytes.md").write_text(text, encoding="utf-8")
    page = ROOT / "docs" / "ks.md"
    if args.out == ROOT / "docs" / "_static" and page.exists():
        # the docs page shows the table between these markers: regenerate it there too
        before, rest = page.read_text(encoding="utf-8").split(BEGIN, 1)
        _, after = rest.split(END, 1)
        page.write_text(f"{before}{BEGIN}\n{text}{END}{after}", encoding="utf-8")
    plot(rows, args.out / "metadata_bytes.png")
    print(text)
    print(f"wrote {args.out}/metadata_bytes.md and .png in {time.perf_counter() - started:.0f}s")


if __name__ == "__main__":
    main()
