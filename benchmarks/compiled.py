"""What compiling with mypyc gains, per compiled module: the path each module carries,
timed in the pure package and in the compiled build (``MAILROOM_COMPILE=1``,
docs/compiled.md), in the same run.

Each row is a workload that spends its time in one module of ``setup.py``'s
``COMPILED`` (the row names it). A round runs every row once in each build, the two
alternating (``--pure`` first, then ``--compiled``), each in a fresh process that
prints the CPU time (``time.process_time``) of the workload alone, after a warm-up
pass. The gain is pure over compiled time, taken within each round and summarised by
its median over ``--rounds`` rounds (``rounds.py``); a gain near 1.0 says compiling
the module is not worth its build time.

- **codec** (``core/codec.py``, with ``core/wire_format.py``'s reference writer for the
  shapes it has no shortcut for): encode and decode the packets of every protocol
  (``codec_workload.py``'s corpus);
- **wire_format** (``core/wire_format.py``): the reference writer and reader alone;
- **frames** (``net/frames.py``): a frame reader splitting a stream of small frames;
- **buffer** (``protocols/_buffer.py``): ``bench_delivery.py``'s reversed bursts (Fifo
  and CBCAST at n = 8): all but the last message wait in the mail room;
- **safe** (``protocols/membership/safe.py``): ``safe_delivery.py``'s bare host, safe
  delivery on, one packet per step;
- **nodecore** (``net/nodecore.py``, with ``net/steps.py`` and ``net/outgoing.py``):
  ``net_instructions.py``'s three nodes on loopback, CBCAST over
  Reliable, 1,280 broadcasts each;
- **stack** (``core/stack.py``): three ``Stack(Reliable, CBCAST)`` endpoints in one
  process, 1,500 broadcasts each, every packet handed on;
- **replica** (``replicated/replica.py``, ``replicated/operations.py``): three
  replicas of a ``ReplCounter``, 4,000 calls each, every call applied at all three.

    python benchmarks/compiled.py --compiled .venv-compiled/bin/python [--rounds 5]
        [--pure .venv/bin/python] [--rows codec buffer ...]

``--pure`` runs with ``src`` first on ``PYTHONPATH``; ``--compiled`` with nothing on it,
so it imports its installed build (``scripts/test-compiled`` makes one).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"


def codec_row() -> Callable[[], None]:
    import codec_workload as cw

    from mailroom.codec import decode

    groups = cw.corpus(list(cw.RUNS))

    def run() -> None:
        for _ in range(20):
            for group in groups:
                for data in cw.encode_group(group):
                    decode(data)

    return run


def wire_format_row() -> Callable[[], None]:
    import codec_workload as cw

    from mailroom.core.wire_format import decode_reference, encode_reference

    packets = [p for group in cw.corpus(list(cw.RUNS)) for p in group]

    def run() -> None:
        for _ in range(5):
            for p in packets:
                decode_reference(encode_reference(p))

    return run


def frames_row() -> Callable[[], None]:
    from mailroom.net.frames import FrameReader, frame

    stream = b"".join(frame(1, bytes(40 + i % 50)) for i in range(2000))

    def run() -> None:
        for _ in range(100):
            reader = FrameReader()
            for i in range(0, len(stream), 1400):  # as TCP reads arrive
                reader.feed(stream[i : i + 1400])

    return run


def buffer_row() -> Callable[[], None]:
    import bench_delivery as bd

    bursts = {name: bd.burst(name, 8, 3000)[::-1] for name in ("Fifo", "CBCAST")}

    def run() -> None:
        for _ in range(3):
            for name, packets in bursts.items():
                bd.per_message(name, 8, packets, 3000)

    return run


def safe_row() -> Callable[[], None]:
    import safe_delivery as sd

    def run() -> None:
        sd.drive("sequencer", 5, True, 150, False)

    return run


def nodecore_row() -> Callable[[], None]:
    import asyncio

    import net_instructions as ni

    def run() -> None:
        asyncio.run(ni.run("cbcast", "one", 1280))

    return run


def stack_row() -> Callable[[], None]:
    from mailroom.core.actions import Transmit
    from mailroom.core.stack import Stack
    from mailroom.protocols import CBCAST, Reliable

    def run() -> None:
        n = 3
        stacks = [Stack(Reliable(p, n), CBCAST(p, n)) for p in range(n)]
        for k in range(1500):
            for p in range(n):
                queue = list(stacks[p].broadcast(k))
                while queue:
                    a = queue.pop()
                    if isinstance(a, Transmit):
                        for to in range(n) if a.to is None else (a.to,):
                            if to != p:
                                queue += stacks[to].receive(a.packet)

    return run


def replica_row() -> Callable[[], None]:
    from mailroom.core.actions import View
    from mailroom.core.messages import Message, MessageId
    from mailroom.replicated import ReplCounter, Replica

    def run() -> None:
        view = View(1, (0, 1, 2))
        replicas = [Replica(ReplCounter(), p, view=view) for p in range(3)]
        for k in range(1, 4001):
            for p, r in enumerate(replicas):
                mid = MessageId(p, k)
                message = Message(mid, p, r.submit(mid, "add", 1))
                for other in replicas:
                    other.deliver(message)

    return run


ROWS: dict[str, Callable[[], Callable[[], None]]] = {
    "codec": codec_row,
    "wire_format": wire_format_row,
    "frames": frames_row,
    "buffer": buffer_row,
    "safe": safe_row,
    "nodecore": nodecore_row,
    "stack": stack_row,
    "replica": replica_row,
}


def child(row: str) -> None:
    """Time one row in this process (after a warm-up pass) and print its CPU seconds."""
    sys.path.insert(0, str(HERE))
    run = ROWS[row]()
    run()
    start = time.process_time()
    run()
    print(time.process_time() - start)


def timed(python: str, row: str, pure: bool) -> float:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pure:
        env["PYTHONPATH"] = str(SRC)
    check = f"import mailroom, sys; sys.exit(mailroom.compiled == {pure})"
    if subprocess.run([python, "-c", check], env=env, check=False).returncode:
        raise SystemExit(f"{python} is not the {'pure' if pure else 'compiled'} build")
    out = subprocess.run(
        [python, __file__, "--child", row], env=env, check=True, capture_output=True, text=True
    )
    return float(out.stdout.split()[-1])


def load() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", choices=sorted(ROWS), help=argparse.SUPPRESS)
    parser.add_argument("--pure", default=sys.executable)
    parser.add_argument("--compiled", default=".venv-compiled/bin/python")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rows", nargs="+", choices=list(ROWS), default=list(ROWS))
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    times: dict[str, dict[str, list[float]]] = {r: {"pure": [], "compiled": []} for r in args.rows}
    for k in range(args.rounds):
        print(f"round {k + 1}: load {load()}", file=sys.stderr)
        for row in args.rows:
            times[row]["pure"].append(timed(args.pure, row, pure=True))
            times[row]["compiled"].append(timed(args.compiled, row, pure=False))
    print(f"load at the end: {load()}")
    print("| row | pure (s, median) | compiled (s, median) | gain (pure/compiled, median) |")
    print("|---|---|---|---|")
    for row, t in times.items():
        gain = statistics.median(p / c for p, c in zip(t["pure"], t["compiled"], strict=True))
        print(
            f"| {row} | {statistics.median(t['pure']):.3f} | "
            f"{statistics.median(t['compiled']):.3f} | {gain:.2f}x |"
        )


if __name__ == "__main__":
    main()
