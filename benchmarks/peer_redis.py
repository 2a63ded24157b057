"""Redis Streams as the fastest honest setup a Python team would write, for
``net_throughput.py``: one stream is one total order; every process appends its
messages with ``XADD`` and reads the whole stream with ``XREAD``.

- sync redis-py with hiredis (the ``bench`` extra), one connection per process;
- peak: ``--pipeline`` (64) ``XADD``s and the ``XREAD`` of everything new in the
  same pipeline, so one round trip sends 64 messages and delivers what arrived;
- paced: the messages that are due and the ``XREAD`` in one pipeline; between
  sends, ``XREAD BLOCK`` until the next message is due;
- a ``redis-server`` of the benchmark's own on a free loopback port, persistence
  off (``--save "" --appendonly no``); the driver reads its CPU from
  ``/proc/<pid>/stat`` at the window's start and end and counts it in the CPU
  per delivery.

An asyncio client with a connection for writing and one for reading (this row's
earlier form) delivered 1.00–1.43x less than this one in the same blocks, so it
is not a row: the peer is the fastest setup.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import tempfile
import time
from typing import Any

from peer_run import (
    PROFILER,
    Clock,
    Counts,
    Window,
    child_parser,
    emit,
    payload,
    run_child,
    start_signal,
    wait_for_end,
)
from rounds import proc_cpu_seconds

STREAM = "mailroom-bench"
INSTALL = (
    "install it with `apt-get install -y redis-server` (the server) and "
    "`pip install -e '.[bench]'` (redis-py with hiredis)"
)


class RedisServer:
    """A redis-server of our own on a free loopback port, no persistence; or why not."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.missing = ""
        self.dir = ""

    def start(self) -> bool:
        binary = shutil.which("redis-server")
        try:
            import hiredis  # noqa: F401
            import redis
        except ImportError as exc:
            self.missing = f"Python package {exc.name!r} is missing"
            return False
        if binary is None:
            self.missing = "redis-server is not on PATH"
            return False
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.dir = tempfile.mkdtemp(prefix="mailroom-redis-")
        cmd = [
            binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            self.dir,
            "--daemonize",
            "no",
            "--loglevel",
            "warning",
        ]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            try:
                redis.Redis(host="127.0.0.1", port=self.port).ping()
                return True
            except redis.ConnectionError:
                time.sleep(0.05)
        self.missing = "redis-server did not answer"
        self.stop()
        return False

    def flush(self) -> None:
        import redis

        redis.Redis(host="127.0.0.1", port=self.port).flushall()

    def cpu_seconds(self) -> float:
        """The server's CPU (user + system) so far."""
        assert self.proc is not None
        return proc_cpu_seconds(self.proc.pid)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)


def hiredis_in_use() -> bool:
    """Whether redis-py parses replies with hiredis (the faster parser)."""
    from redis.utils import HIREDIS_AVAILABLE

    return bool(HIREDIS_AVAILABLE)


def redis_node(args: argparse.Namespace) -> None:
    import redis

    client = redis.Redis(host="127.0.0.1", port=args.redis_port)
    client.ping()
    counts = Counts()
    start = start_signal()
    PROFILER.begin()
    if args.rate:
        clock = Clock(args)
        paced(client, args, clock, counts, start)
        result = clock.result(counts)
    else:
        window = Window(counts, start, args.warmup, args.seconds)
        peak(client, args, window, counts)
        result = window.result()
    PROFILER.end()
    emit(result)
    wait_for_end()
    client.close()


def read_entries(reply: Any, me: bytes, counts: Counts, clock: Clock | None) -> bytes | None:
    """Count an ``XREAD`` reply's entries; the last entry id (None: nothing new)."""
    last = None
    now = time.monotonic()
    for _, entries in reply or ():
        for entry_id, fields in entries:
            last = entry_id
            counts.all += 1
            origin = fields[b"o"]
            if origin != me:
                counts.remote += 1
                if clock is not None:
                    clock.got(int(origin), int(fields[b"p"]), now)
    return last


def peak(client: Any, args: argparse.Namespace, window: Window, counts: Counts) -> None:
    """``--pipeline`` XADDs and the XREAD of everything new, one round trip each,
    until the window is over."""
    key, me, depth = args.key, str(args.pid).encode(), args.pipeline
    pipe = client.pipeline(transaction=False)
    last: bytes | str = "0-0"
    k = 0
    while not window.over.is_set():
        for j in range(k, k + depth):
            pipe.xadd(key, {"o": me, "p": payload(j)})
        pipe.xread({key: last})
        last = read_entries(pipe.execute()[-1], me, counts, None) or last
        k += depth


def paced(
    client: Any, args: argparse.Namespace, clock: Clock, counts: Counts, start: float
) -> None:
    """Each message when due, with the XREAD in the same pipeline; XREAD BLOCK until
    the next is due; until every process's messages have been read."""
    key, me = args.key, str(args.pid).encode()
    expect = args.n * args.count
    pipe = client.pipeline(transaction=False)
    last: bytes | str = "0-0"
    k = 0
    while counts.all < expect:
        now = time.monotonic()
        due = k
        while due < args.count and clock.due(due, start) <= now:
            clock.sent.append(clock.due(due, start))
            pipe.xadd(key, {"o": me, "p": payload(due)})
            due += 1
        if due > k:
            pipe.xread({key: last})
            reply = pipe.execute()[-1]
            k = due
        else:
            wait = clock.due(k, start) - now if k < args.count else 1.0
            reply = client.xread({key: last}, block=max(1, int(wait * 1000)))
        last = read_entries(reply, me, counts, clock) or last


def main() -> None:
    p = child_parser(__doc__.split("\n")[0])
    p.add_argument("--redis-port", type=int, required=True)
    p.add_argument("--key", default=STREAM)
    p.add_argument("--pipeline", type=int, default=64)
    run_child(redis_node, p.parse_args())


if __name__ == "__main__":
    main()
