"""Generate a large synthetic trace as Parquet (the mailroom.trace.parquet schema).

32 processes (by default) send a mix of unicasts and broadcasts. Every process
delivers messages in the global send order, after a random lag, so the trace
is FIFO, causal and totally ordered; each delivery is preceded by a receive.
Vector clocks are exact (sparse maps). Then a few violations are injected:

- ``swaps``: a destination delivers two messages from one origin in the wrong
  order (a FIFO, causal and total-order violation);
- ``drops``: a delivery is missing (liveness);
- ``dups``: a delivery happens twice (integrity).

Usage: python benchmarks/gen_trace.py OUT.parquet --events 1000000 [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from mailroom.trace.parquet import parquet_schema


class Writer:
    def __init__(self, path: str, run: str, batch: int = 200_000) -> None:
        self.schema = parquet_schema()
        self.out = pq.ParquetWriter(path, self.schema)
        self.run = run
        self.batch = batch
        self.count = 0
        self._reset()

    def _reset(self) -> None:
        self.cols: dict[str, list[Any]] = {
            k: [] for k in ("process", "seq", "kind", "message", "sender", "dest", "vc", "time")
        }

    def add(
        self,
        p: int,
        seq: int,
        kind: str,
        m: tuple[int, int],
        sender: int,
        dest: list[int],
        vc: list[tuple[int, int]] | None,
        t: float,
    ) -> None:
        c = self.cols
        c["process"].append(p)
        c["seq"].append(seq)
        c["kind"].append(kind)
        c["message"].append({"origin": m[0], "seq": m[1]})
        c["sender"].append(sender)
        c["dest"].append(dest)
        c["vc"].append(vc)
        c["time"].append(t)
        self.count += 1
        if len(c["seq"]) >= self.batch:
            self.flush()

    def flush(self) -> None:
        n = len(self.cols["seq"])
        if not n:
            return
        arrays = {
            "run": pa.array([self.run] * n, pa.string()),
            **{k: pa.array(v, self.schema.field(k).type) for k, v in self.cols.items()},
            "payload": pa.nulls(n, pa.string()),
        }
        for name in self.schema.names:  # columns this generator never fills (view): null
            if name not in arrays:
                arrays[name] = pa.nulls(n, self.schema.field(name).type)
        self.out.write_table(pa.table(arrays, schema=self.schema))
        self._reset()

    def close(self) -> None:
        self.flush()
        self.out.close()


def generate(
    path: str,
    events: int,
    n: int = 32,
    broadcast: float = 0.03,
    seed: int = 1,
    swaps: int = 3,
    drops: int = 3,
    dups: int = 3,
    max_lag: int = 48,
    run: str = "bench",
) -> dict[str, int]:
    rng = random.Random(seed)
    w = Writer(path, run)
    vc: list[dict[int, int]] = [{} for _ in range(n)]
    seqno = [0] * n
    sent = [0] * n
    send_vc: dict[tuple[int, int], dict[int, int]] = {}
    dests: dict[tuple[int, int], list[int]] = {}
    queues: list[deque[tuple[int, tuple[int, int]]]] = [deque() for _ in range(n)]
    everyone = list(range(n))
    # injected faults: decided up front at message numbers spread over the trace
    est_msgs = max(10, int(events / (3 + broadcast * (2 * n - 2))))
    spots = sorted(rng.sample(range(est_msgs // 10, est_msgs * 8 // 10), swaps + drops + dups))
    plan = {s: "swap" for s in spots[:swaps]}
    plan.update({s: "drop" for s in spots[swaps : swaps + drops]})
    plan.update({s: "dup" for s in spots[swaps + drops :]})
    injected = {"swap": 0, "drop": 0, "dup": 0}
    step = 0

    def deliver(q: int, m: tuple[int, int], t: float, twice: bool = False) -> None:
        seqno[q] += 1
        w.add(q, seqno[q], "receive", m, m[0], dests[m], None, t)
        v = vc[q]
        for k, x in send_vc[m].items():
            if x > v.get(k, 0):
                v[k] = x
        for _ in range(2 if twice else 1):
            v[q] = v.get(q, 0) + 1
            seqno[q] += 1
            w.add(q, seqno[q], "deliver", m, m[0], dests[m], sorted(v.items()), t)

    def drain(q: int, now: int, force: bool = False) -> None:
        queue = queues[q]
        while queue and (force or queue[0][0] <= now):
            _, m = queue.popleft()
            fault = pending_faults.pop((q, m), None)
            if fault == "drop":
                injected["drop"] += 1
                continue
            deliver(q, m, float(now), twice=fault == "dup")
            if fault == "dup":
                injected["dup"] += 1

    pending_faults: dict[tuple[int, tuple[int, int]], str] = {}
    while w.count < events:
        step += 1
        s = rng.randrange(n)
        sent[s] += 1
        m = (s, sent[s])
        fault = plan.get(step)
        if rng.random() < broadcast and fault is None:
            dest = everyone
        else:
            dest = [rng.choice([q for q in everyone if q != s])]
        dests[m] = dest
        v = vc[s]
        v[s] = v.get(s, 0) + 1
        send_vc[m] = dict(v)
        seqno[s] += 1
        w.add(s, seqno[s], "send", m, s, dest, sorted(v.items()), float(step))
        if fault in ("drop", "dup"):
            pending_faults[(dest[0], m)] = fault
        for q in dest:
            due = step + (0 if q == s else rng.randint(1, max_lag))
            queue = queues[q]
            # keep each destination's queue in global send order (FIFO/causal/total)
            due = max(due, queue[-1][0]) if queue else due
            queue.append((due, m))
        if fault == "swap":
            # s sends a second message m2 to the same destination, which delivers
            # m2 first although m was sent before it
            q = dest[0]
            sent[s] += 1
            m2 = (s, sent[s])
            dests[m2] = dest
            v[s] += 1
            send_vc[m2] = dict(v)
            seqno[s] += 1
            w.add(s, seqno[s], "send", m2, s, dest, sorted(v.items()), float(step))
            queue = queues[q]
            due_m, _ = queue.pop()
            queue.append((due_m, m2))
            queue.append((due_m, m))
            injected["swap"] += 1
        for q in everyone:
            drain(q, step)
    for q in everyone:
        drain(q, step, force=True)
    w.close()
    return {"events": w.count, "messages": step, **injected}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--processes", type=int, default=32)
    ap.add_argument("--broadcast", type=float, default=0.03)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    t0 = time.perf_counter()
    info = generate(args.out, args.events, args.processes, args.broadcast, args.seed)
    info["seconds"] = round(time.perf_counter() - t0, 1)  # type: ignore[assignment]
    print(info)


if __name__ == "__main__":
    main()
