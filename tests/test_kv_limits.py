"""examples/kv: the service's limits on connections and idle time, and its accept-error log.

A hostile review held every descriptor of a member with idle connections and filled
its log with a traceback per failed ``accept``. These tests run one member in process
(a one-member group on 127.0.0.1 behind ``KvService``), with clients on asyncio
streams in the same loop: past ``max_connections`` a connection gets 503 and is
closed; an idle connection is closed after ``idle_timeout``; a thousand accept errors
make a few log lines. Every wait is bounded and every connection is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import time
import types
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from examples.kv.service import KvService, QuietAcceptErrors, accept_error_kind
from mailroom.net.membership import group_endpoint
from mailroom.replicated import AsyncReplica, ReplDict

from .net_support import HOST, KEY, listening_sockets, table_of

#: Seconds any one wait of these tests may take before it fails.
TIMEOUT = 10.0
EMFILE = "socket.accept() out of system resource: EMFILE (Too many open files)"


@contextlib.asynccontextmanager
async def kv_member(**options: Any) -> AsyncIterator[tuple[KvService, int]]:
    """A one-member store served on a free 127.0.0.1 port: the service and the port."""
    socks = listening_sockets(1)
    endpoint = group_endpoint("sequencer", 0, 1, members=range(1), safe=True)
    r = AsyncReplica(ReplDict(), endpoint, table_of(socks), KEY, safe=True, listen=socks[0])
    try:
        await r.start()
        service = KvService(r, **options)
        server = await service.serve(HOST, 0)
        try:
            yield service, server.sockets[0].getsockname()[1]
        finally:
            server.close()
    finally:
        await r.close()
        socks[0].close()


async def until(predicate: Callable[[], bool], what: str) -> None:
    """Poll ``predicate`` for at most ``TIMEOUT`` seconds."""
    for _ in range(int(TIMEOUT / 0.02)):
        if predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"not within {TIMEOUT:g}s: {what}")


async def http(port: int, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
    """One request on its own connection (``Connection: close``): status and body."""
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        head = f"{method} {path} HTTP/1.1\r\nHost: kv\r\nContent-Length: {len(body)}\r\n"
        writer.write(f"{head}Connection: close\r\n\r\n".encode() + body)
        async with asyncio.timeout(TIMEOUT):
            answer = await reader.read()  # to the end: the service closes
    finally:
        writer.close()
    status = answer.split(b" ", 2)[1]
    return int(status), answer.partition(b"\r\n\r\n")[2]


async def until_closed(reader: asyncio.StreamReader) -> tuple[bytes, float]:
    """Everything the service sends until it closes, and the seconds that took."""
    start = time.monotonic()
    async with asyncio.timeout(TIMEOUT):
        answer = await reader.read()
    return answer, time.monotonic() - start


def test_past_the_bound_a_connection_gets_503_and_is_closed() -> None:
    """Eight idle connections take the bound of eight: the ninth is answered 503 with
    ``Connection: close`` and closed at once (not held); once the idle ones close, a
    PUT and a GET are served."""

    async def main() -> None:
        async with kv_member(max_connections=8, idle_timeout=30.0) as (service, port):
            idle = [await asyncio.open_connection(HOST, port) for _ in range(8)]
            try:
                await until(lambda: service.connections == 8, "eight connections served")
                reader, writer = await asyncio.open_connection(HOST, port)
                try:
                    answer, _ = await until_closed(reader)
                finally:
                    writer.close()
                head = answer.partition(b"\r\n\r\n")[0].split(b"\r\n")
                assert head[0] == b"HTTP/1.1 503 Service Unavailable", answer
                assert b"Connection: close" in head and b"Retry-After: 1" in head, answer
                assert b"8 connections open" in answer
                assert service.shed == 1 and service.connections == 8
            finally:
                for _, w in idle:
                    w.close()
            await until(lambda: service.connections == 0, "the idle connections closed")
            assert await http(port, "PUT", "/kv/greeting", b"hello") == (204, b"")
            assert await http(port, "GET", "/kv/greeting") == (200, b"hello")
            assert service.shed == 1 and service.status()["shed"] == 1
            # serve() put the rate-limited accept-error log in front of the loop's handler
            assert isinstance(asyncio.get_running_loop().get_exception_handler(), QuietAcceptErrors)

    asyncio.run(main())


def test_an_idle_connection_is_closed_after_the_idle_timeout() -> None:
    """With ``idle_timeout=0.5``: a connection that sends nothing, one that sends half
    a request and stops, and one kept alive after an answer are all closed after about
    half a second, not held (the default was two minutes)."""

    async def main() -> None:
        async with kv_member(idle_timeout=0.5) as (service, port):
            reader, writer = await asyncio.open_connection(HOST, port)
            try:
                answer, took = await until_closed(reader)
            finally:
                writer.close()
            assert answer == b"" and took >= 0.3, (answer, took)  # not before the timeout

            reader, writer = await asyncio.open_connection(HOST, port)
            try:
                writer.write(b"GET /kv/greeting HTTP/1.1\r\nHost: kv\r\n")  # no end
                answer, took = await until_closed(reader)
            finally:
                writer.close()
            assert answer.startswith(b"HTTP/1.1 400 "), answer
            assert b"headers not sent within 0.5s" in answer, (answer, took)

            reader, writer = await asyncio.open_connection(HOST, port)
            try:
                writer.write(b"GET /kv/greeting HTTP/1.1\r\nHost: kv\r\n\r\n")  # kept alive
                async with asyncio.timeout(TIMEOUT):
                    head = await reader.readuntil(b"\r\n\r\n")
                assert head.startswith(b"HTTP/1.1 404 ") and b"keep-alive" in head, head
                length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
                answer, took = await until_closed(reader)
            finally:
                writer.close()
            assert answer == b"" and took >= 0.3, (answer, took)  # not before the timeout
            await until(lambda: service.connections == 0, "no connection left open")

    asyncio.run(main())


def test_a_thousand_accept_errors_make_a_few_log_lines(caplog: pytest.LogCaptureFixture) -> None:
    """1,000 accept errors (as asyncio reports EMFILE and ENFILE to the loop's exception
    handler) make one line per kind, without a traceback, and one line per kind at the
    end of the interval with the count of the rest; anything else goes to the handler
    installed before."""
    caplog.set_level(logging.DEBUG)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        others: list[dict[str, Any]] = []
        loop.set_exception_handler(lambda _, context: others.append(context))
        handler = QuietAcceptErrors.install(loop, interval=0.3)
        assert QuietAcceptErrors.install(loop) is handler  # once per loop
        for k in range(1000):
            code = errno.ENFILE if k % 100 == 0 else errno.EMFILE
            loop.call_exception_handler(
                {
                    "message": "socket.accept() out of system resource",
                    "exception": OSError(code, "accept failed"),
                }
            )
        loop.call_exception_handler({"message": "something else", "exception": ValueError()})
        assert len(others) == 1 and others[0]["message"] == "something else"
        first = [r for r in caplog.records if r.name == "examples.kv.service"]
        assert [r.getMessage().split(" (then")[0] for r in first] == [
            "socket.accept() out of system resource: ENFILE (Too many open files in system)",
            EMFILE,
        ]
        await asyncio.sleep(0.45)  # the end of the interval: the counts
        await asyncio.sleep(0.45)  # an interval without errors: nothing more
        lines = [r for r in caplog.records if r.name == "examples.kv.service"]
        texts = [r.getMessage() for r in lines]
        assert len(lines) == 4, texts
        assert f"{EMFILE}: 989 more in the last 0.3s" in texts
        assert any(t.endswith(": 9 more in the last 0.3s") for t in texts), texts
        assert all(r.exc_info is None for r in caplog.records), "a traceback was logged"
        assert (handler.logged, handler.suppressed) == (4, 998)
        loop.call_exception_handler(  # a kind that stopped is logged again when it returns
            {
                "message": "socket.accept() out of system resource",
                "exception": OSError(errno.EMFILE, "accept failed"),
            }
        )
        assert len([r for r in caplog.records if r.name == "examples.kv.service"]) == 5

    asyncio.run(main())


def test_any_oserror_of_the_accept_loop_is_an_accept_error() -> None:
    """An errno asyncio does not pause for escapes its accept callback into the loop's
    handler as "Exception in callback ...": that is an accept error too, of its own kind;
    an OSError of any other callback is not."""

    def _accept_connection() -> None:
        """Stands for asyncio's accept callback (only its name is looked at)."""

    def unrelated() -> None:
        """Any other callback."""

    context = {"message": "Exception in callback ...", "exception": OSError(errno.EPERM, "no")}
    accept = types.SimpleNamespace(_callback=_accept_connection)
    other = types.SimpleNamespace(_callback=unrelated)
    assert accept_error_kind({**context, "handle": accept}) == (
        "socket.accept() failed: EPERM (Operation not permitted)"
    )
    assert accept_error_kind({**context, "handle": other}) is None
    assert accept_error_kind({"message": "something else", "exception": OSError()}) is None
