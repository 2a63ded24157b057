"""A keyless connection flood, for the hostile tests (standard library only; run it as a
script, end it by its pid).

    python tests/flood.py --port PORT --rate 5000 --seconds 30 --out counts.json

It opens TCP connections to 127.0.0.1:PORT at ``--rate`` per second (paced by the
clock: it catches up after a pause, a burst at most ``BURST`` at a time), each of
which says nothing (``--mode idle``), sends a frame of junk the size of a
handshake frame (``--mode junk``) or the bytes given (``--send-hex``); with
``--every N`` only every N-th connection talks, the others say nothing. It
keeps at most ``--hold`` connections open, resetting the oldest, and stops after
``--count`` connections, ``--seconds`` seconds, or SIGTERM, whichever comes first;
then it writes its counts as JSON to ``--out``: connections opened, attempts
that failed at once, connections the target had already closed when they were
let go, and the seconds it ran.
"""

from __future__ import annotations

import argparse
import collections
import errno
import json
import os
import signal
import socket
import struct
import time
from pathlib import Path

#: At most this many connections are opened in one go (then the clock is read again).
BURST = 200
_LINGER_RESET = struct.pack("ii", 1, 0)


def _closed_by_peer(sock: socket.socket) -> bool:
    """True if the target has closed ``sock`` (a read returns end of file or a reset)."""
    try:
        return sock.recv(1 << 16, socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def _sent(sock: socket.socket, data: bytes) -> bool:
    """True once ``data`` went out on ``sock`` (or the socket is closed or broken)."""
    if sock.fileno() < 0:
        return True
    try:
        sock.send(data)
    except (BlockingIOError, InterruptedError):
        return False
    except OSError as exc:
        return exc.errno != errno.ENOTCONN
    return True


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--rate", type=float, default=5000.0, help="connections per second")
    p.add_argument("--count", type=int, default=1_000_000, help="stop after this many")
    p.add_argument("--seconds", type=float, default=60.0, help="stop after this long")
    p.add_argument("--hold", type=int, default=800, help="connections kept open at most")
    p.add_argument("--mode", choices=("idle", "junk"), default="idle")
    p.add_argument("--send-hex", default="", help="bytes (hex) each connection sends instead")
    p.add_argument("--every", type=int, default=1, help="only every N-th connection talks")
    p.add_argument("--out", required=True, help="JSON file of the counts, written at the end")
    args = p.parse_args()
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    held: collections.deque[socket.socket] = collections.deque()
    pending: list[socket.socket] = []  # junk mode: connected, junk not sent yet
    opened = failed = closed_by_target = 0
    junk = bytes.fromhex(args.send_hex) or struct.pack(">IB", 39, 5) + os.urandom(38)
    talk = args.mode == "junk" or bool(args.send_hex)
    start = time.monotonic()
    while not stop["now"] and opened + failed < args.count:
        elapsed = time.monotonic() - start
        if elapsed >= args.seconds:
            break
        due = min(int(elapsed * args.rate) - opened - failed, BURST, args.count - opened - failed)
        if due <= 0:
            time.sleep(0.0005)
        for _ in range(max(due, 0)):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
            code = s.connect_ex((args.host, args.port))
            if code not in (0, errno.EINPROGRESS):
                failed += 1
                s.close()
                continue
            opened += 1
            held.append(s)
            if talk and opened % args.every == 0:
                pending.append(s)
        if pending:
            pending = [s for s in pending if not _sent(s, junk)]
        while len(held) > args.hold:
            old = held.popleft()
            closed_by_target += _closed_by_peer(old)
            old.close()
    seconds = time.monotonic() - start
    for s in held:
        closed_by_target += _closed_by_peer(s)
        s.close()
    counts = {
        "opened": opened,
        "failed": failed,
        "closed_by_target": closed_by_target,
        "seconds": round(seconds, 3),
        "rate": round(opened / seconds, 1) if seconds else 0,
    }
    tmp = Path(args.out + ".tmp")
    tmp.write_text(json.dumps(counts))
    tmp.replace(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
