"""The status endpoint under a slowloris attack, over real sockets on 127.0.0.1.

An attacker holds as many connections as the endpoint has slots
(``status.MAX_CLIENTS``), each sending an incomplete request a few bytes at a
time and renewing it before the endpoint's bound on a request
(``status.REQUEST_TIMEOUT``), as the hostile review did to ``--status`` and
``--metrics``. Meanwhile, real requests (made as ``mailroom status`` makes them,
with ``urllib``) must every one be answered 200: the endpoint closes the oldest
connection that has not sent a complete request to make room for a new one,
and closes any that has not sent one within the bound.

The attack lasts ``ATTACK_SECONDS``; the whole test is bounded by ``TEST_TIMEOUT``.
Only correctness is asserted (each request answered 200), no durations.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import urllib.request

import pytest

from mailroom.net import status

#: How long the attacker keeps the slots taken.
ATTACK_SECONDS = 3.0
#: Real requests made during the attack, and the pause between them.
REQUESTS = 10
PAUSE = ATTACK_SECONDS / (REQUESTS + 2)
#: The attacker renews each connection this often (before the endpoint's bound).
RENEW_EVERY = min(1.5, status.REQUEST_TIMEOUT * 0.75)
#: It trickles a header line this often, keeping each connection busy but incomplete.
TRICKLE_EVERY = 0.25
#: Seconds a real request waits for its answer (as ``mailroom status`` does, shorter).
REQUEST_WAIT = 5.0
#: The bound on the whole test.
TEST_TIMEOUT = 30.0
#: How long a real client stays silent after connecting (well under the endpoint's
#: grace for a silent newcomer, ``status.SILENT_GRACE``).
LATE = 0.2


def _routes() -> dict[str, status.Route]:
    """A trivial ``/status`` route."""
    return {"/status": lambda: (json.dumps({"pid": 0}).encode(), "application/json")}


async def _idle_connection(port: int, until: float, closed_by_server: list[int]) -> None:
    """One attacker slot: connect, send part of a request and trickle header lines, never
    finishing it; renew the connection every ``RENEW_EVERY`` seconds, and at once when the
    endpoint closes it, until ``until`` (loop time)."""
    loop = asyncio.get_running_loop()
    while loop.time() < until:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.01)
            continue
        renew_at = min(until, loop.time() + RENEW_EVERY)
        try:
            writer.write(b"GET /status HTTP/1.0\r\n")
            while loop.time() < renew_at:
                wait = min(TRICKLE_EVERY, renew_at - loop.time())
                try:
                    if await asyncio.wait_for(reader.read(1024), wait) == b"":
                        closed_by_server.append(1)
                        break  # the endpoint closed it: open another at once
                except TimeoutError:
                    writer.write(b"X-Slow: 1\r\n")
        except OSError:
            closed_by_server.append(1)
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()


def _get(url: str) -> int | str:
    """GET ``url``: its HTTP status, or why it failed."""
    try:
        with urllib.request.urlopen(url, timeout=REQUEST_WAIT) as answer:
            json.loads(answer.read())
            return int(answer.status)
    except (OSError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"


async def _attack() -> tuple[list[int | str], int]:
    """Run the attack and the real requests: what each request got, and how many attacker
    connections the endpoint closed."""
    server = await status.serve("127.0.0.1:0", _routes(), loopback=True)
    port = server.sockets[0].getsockname()[1]
    loop = asyncio.get_running_loop()
    until = loop.time() + ATTACK_SECONDS
    closed: list[int] = []
    attackers = [
        asyncio.create_task(_idle_connection(port, until, closed))
        for _ in range(status.MAX_CLIENTS)
    ]
    got: list[int | str] = []
    try:
        await asyncio.sleep(PAUSE)  # the attacker has taken every slot
        for _ in range(REQUESTS):
            got.append(await asyncio.to_thread(_get, f"http://127.0.0.1:{port}/status"))
            await asyncio.sleep(PAUSE)
        await asyncio.gather(*attackers)
    finally:
        for task in attackers:
            task.cancel()
        await asyncio.gather(*attackers, return_exceptions=True)
        server.close()
    return got, len(closed)


def test_status_requests_are_answered_while_idle_connections_hold_every_slot() -> None:
    got, closed = asyncio.run(asyncio.wait_for(_attack(), TEST_TIMEOUT))
    refused = [g for g in got if g != 200]
    assert len(got) == REQUESTS
    assert refused == [], f"{len(refused)} of {REQUESTS} requests refused: {refused}"
    assert closed > 0  # the endpoint shed attacker connections to answer them


async def _open_idle(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection that sends part of a request and no more."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /status HTTP/1.0\r\n")
    await writer.drain()
    return reader, writer


def test_an_idle_connection_is_closed_after_the_request_bound() -> None:
    async def idle() -> bytes:
        server = await status.serve("127.0.0.1:0", _routes(), loopback=True)
        reader, writer = await _open_idle(server.sockets[0].getsockname()[1])
        try:
            return await asyncio.wait_for(reader.read(), status.REQUEST_TIMEOUT + TEST_TIMEOUT)
        finally:
            writer.close()
            server.close()

    assert asyncio.run(idle()) == b""  # closed by the endpoint, with no answer


def test_a_new_connection_sheds_the_oldest_idle_one() -> None:
    async def shed() -> tuple[int | str, bytes]:
        server = await status.serve("127.0.0.1:0", _routes(), loopback=True)
        port = server.sockets[0].getsockname()[1]
        idle = []
        try:
            for _ in range(status.MAX_CLIENTS):
                idle.append(await _open_idle(port))
                await asyncio.sleep(0.02)  # accepted in this order
            got = await asyncio.to_thread(_get, f"http://127.0.0.1:{port}/status")
            oldest = await asyncio.wait_for(idle[0][0].read(), TEST_TIMEOUT)
            return got, oldest
        finally:
            for _, writer in idle:
                writer.close()
            server.close()

    got, oldest = asyncio.run(asyncio.wait_for(shed(), TEST_TIMEOUT))
    assert got == 200
    assert oldest == b""  # the oldest idle connection made room for it


def test_with_every_slot_answering_a_new_request_gets_503(monkeypatch: pytest.MonkeyPatch) -> None:
    """A complete request is never shed: with the only slot holding an answer its client
    does not read, a new request is answered 503 at once."""
    monkeypatch.setattr(status, "MAX_CLIENTS", 1)
    big = b"x" * (16 << 20)  # more than the sockets' buffers hold

    async def busy() -> int | str:
        routes = {**_routes(), "/big": lambda: (big, "text/plain")}
        server = await status.serve("127.0.0.1:0", routes, loopback=True)
        port = server.sockets[0].getsockname()[1]
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)  # no autotuning
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        reader, writer = await asyncio.open_connection(sock=sock)
        try:
            writer.write(b"GET /big HTTP/1.0\r\n\r\n")
            assert (await reader.readexactly(12)) == b"HTTP/1.0 200"  # being answered
            return await asyncio.to_thread(_get, f"http://127.0.0.1:{port}/status")
        finally:
            writer.transport.abort()
            server.close()

    got = asyncio.run(asyncio.wait_for(busy(), TEST_TIMEOUT))
    assert isinstance(got, str) and "503" in got


def test_a_complete_request_is_answered_and_frees_its_slot() -> None:
    """More requests than slots, one after another, are all answered: a slot is freed
    as soon as its request is answered."""

    async def many() -> list[int | str]:
        server = await status.serve("127.0.0.1:0", _routes(), loopback=True)
        port = server.sockets[0].getsockname()[1]
        try:
            url = f"http://127.0.0.1:{port}/status"
            return [await asyncio.to_thread(_get, url) for _ in range(2 * status.MAX_CLIENTS)]
        finally:
            server.close()

    got = asyncio.run(asyncio.wait_for(many(), TEST_TIMEOUT))
    assert got == [200] * (2 * status.MAX_CLIENTS)


def test_a_request_slow_to_start_outlasts_an_attacker_that_reconnects_at_once() -> None:
    """A real client that connects but sends its request only ``LATE`` seconds later (its
    process kept off the CPU) is answered 200, while the attacker's shed connections come
    back at once: each comeback sheds a connection that has begun its request and
    stalled, never the silent newcomer, so the comebacks cannot cycle through every slot
    and reach it (shedding the oldest alone did: its slot was gone within ``LATE``)."""

    async def late_request() -> bytes:
        server = await status.serve("127.0.0.1:0", _routes(), loopback=True)
        port = server.sockets[0].getsockname()[1]
        loop = asyncio.get_running_loop()
        until = loop.time() + LATE + 1.0
        closed: list[int] = []
        attackers = [
            asyncio.create_task(_idle_connection(port, until, closed))
            for _ in range(status.MAX_CLIENTS)
        ]
        try:
            await asyncio.sleep(PAUSE)  # the attacker has taken every slot
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            await asyncio.sleep(LATE)  # connected (a slot taken, one shed), then silent
            try:
                writer.write(b"GET /status HTTP/1.0\r\n\r\n")
                return await asyncio.wait_for(reader.read(), TEST_TIMEOUT)
            except OSError as exc:
                return f"{type(exc).__name__}: {exc}".encode()
            finally:
                writer.close()
        finally:
            for task in attackers:
                task.cancel()
            await asyncio.gather(*attackers, return_exceptions=True)
            server.close()

    answer = asyncio.run(asyncio.wait_for(late_request(), TEST_TIMEOUT))
    assert answer.startswith(b"HTTP/1.0 200"), answer[:80]
