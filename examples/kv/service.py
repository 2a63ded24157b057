"""One member of the store: a ``ReplDict`` replicated by ``AsyncReplica`` under safe
delivery, and an HTTP server in front of it, both on one event loop.

Routes (values are UTF-8 text; a key is one percent-encoded path segment):

- ``GET /kv/<key>``: the value (200) or 404; a local read. ``?consistent=1``: an
  ordered (linearizable) read, at its place in the group's order.
- ``PUT /kv/<key>`` (body: the value): 204 once the write is applied here under safe
  delivery, with the node's checkpoint on disk (``sync``).
- ``DELETE /kv/<key>``: 204 once applied, 404 if there was no such key.
- ``GET /kv``: every key and value as a JSON object (``?consistent=1`` too).
- ``GET /status``: this member as JSON; ``GET /health``: 200 once a member, else 503.

A write that cannot be confirmed (this member is out of the group, or the group did
not apply it within ``write_timeout`` seconds) gets 503 with ``outcome unknown``: it
may or may not be applied. Anything malformed gets a one-line 4xx and the store is
unchanged.

Limits that keep a flood of connections from taking the member's descriptors: at most
``max_connections`` (default ``MAX_CONNECTIONS``) connections are served at once, and
one more is answered ``503`` with ``Connection: close`` and closed at once, not held;
a connection that sends no complete request line and headers within ``idle_timeout``
seconds (default ``IDLE_SECONDS``) of opening or of its last answer is closed; an
answer the client does not read within ``REQUEST_SECONDS`` drops the connection. When
``accept`` fails anyway (EMFILE), ``QuietAcceptErrors`` logs one line per kind of
error per ``ACCEPT_LOG_SECONDS`` with a count of the rest, never a traceback each.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import json
import logging
import os
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, unquote

from examples.kv.wire import (
    IDLE_SECONDS,
    MAX_LINE,
    REQUEST_SECONDS,
    HttpError,
    Request,
    Response,
    read_request,
)
from mailroom.core.errors import LocalError
from mailroom.net.membership import group_of
from mailroom.replicated import AsyncReplica, OutcomeUnknown

log = logging.getLogger(__name__)

#: The longest key, in bytes of UTF-8.
MAX_KEY = 256
ROUTES = "GET|PUT|DELETE /kv/<key>, GET /kv, GET /status, GET /health"
#: Connections served at once; one more is answered 503 and closed. Well under the
#: common limit of 1,024 open files, leaving room for the node's own connections.
MAX_CONNECTIONS = 256
#: Seconds between two log lines about one kind of accept error (the rest are counted).
ACCEPT_LOG_SECONDS = 10.0
#: The messages asyncio gives the loop's exception handler when accepting fails.
ACCEPT_MESSAGES = frozenset(
    {
        "socket.accept() out of system resource",
        "Error on transport creation for incoming connection",
    }
)

#: An event loop's exception handler (``loop.set_exception_handler``).
LoopErrorHandler = Callable[[asyncio.AbstractEventLoop, dict[str, Any]], object]


def parse_target(target: str) -> tuple[str, dict[str, str]]:
    """The decoded path and the query of a request target; ``HttpError`` if malformed."""
    path, _, query = target.partition("?")
    try:
        params = dict(parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query)))
    except ValueError:
        raise HttpError(400, "malformed query string") from None
    unknown = sorted(set(params) - {"consistent"})
    if unknown:
        raise HttpError(400, f"unknown parameter {unknown[0][:40]!r} (known: consistent)")
    if params.get("consistent", "1") not in ("0", "1", "true", "false"):
        raise HttpError(400, "consistent must be 1 or 0")
    return path, params


def parse_key(raw: str) -> str:
    """The key of ``/kv/<raw>``: percent-decoded UTF-8, 1 to ``MAX_KEY`` bytes, no '/'."""
    if not raw or "/" in raw:
        raise HttpError(404, f"no route for /kv/{raw[:40]} (a key is one path segment)")
    try:
        key = unquote(raw, errors="strict")
    except UnicodeDecodeError:
        raise HttpError(400, "the key is not percent-encoded UTF-8") from None
    if len(key.encode("utf-8")) > MAX_KEY:
        raise HttpError(400, f"the key is longer than {MAX_KEY} bytes")
    return key


def accept_error_kind(context: dict[str, Any]) -> str | None:
    """The kind of accept error a loop exception ``context`` reports (its message and
    errno, e.g. ``socket.accept() out of system resource: EMFILE (Too many open
    files)``), or None if it reports something else."""
    message = str(context.get("message", ""))
    exc = context.get("exception")
    if message not in ACCEPT_MESSAGES:
        # any other OSError of accept() escapes asyncio's accept loop into the handler
        callback = getattr(context.get("handle"), "_callback", None)
        from_accept = getattr(callback, "__name__", "") == "_accept_connection"
        if not (from_accept and isinstance(exc, OSError)):
            return None
        message = "socket.accept() failed"
    if isinstance(exc, OSError) and exc.errno is not None:
        name = errno.errorcode.get(exc.errno, str(exc.errno))
        return f"{message}: {name} ({os.strerror(exc.errno)})"
    return f"{message}: {type(exc).__name__}" if exc is not None else message


class QuietAcceptErrors:
    """An event loop's exception handler that logs accept errors at a bounded rate.

    asyncio reports a failed ``accept`` (EMFILE once every descriptor is taken) to the
    loop's exception handler, and the default one logs a traceback each time: a flood of
    idle connections once wrote tens of thousands of them into a member's log in two
    minutes. Here the first error of a kind is one line (no traceback); the others of
    that kind within ``interval`` seconds are counted, and one line at the end of the
    interval says how many, for as long as they go on. Every other context goes to the
    handler that was installed before (asyncio's default if none), unchanged."""

    def __init__(
        self, previous: LoopErrorHandler | None = None, interval: float = ACCEPT_LOG_SECONDS
    ) -> None:
        self.previous = previous
        self.interval = interval
        self.logged = 0  # lines written
        self.suppressed = 0  # errors counted, not logged one by one
        self._counts: dict[str, int] = {}  # kinds within their interval: errors counted

    @classmethod
    def install(
        cls, loop: asyncio.AbstractEventLoop, interval: float = ACCEPT_LOG_SECONDS
    ) -> QuietAcceptErrors:
        """Make this the handler of ``loop``, in front of its current one (once per loop:
        the installed one is returned if there is one)."""
        current = loop.get_exception_handler()
        if isinstance(current, cls):
            return current
        handler = cls(current, interval)
        loop.set_exception_handler(handler)
        return handler

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        kind = accept_error_kind(context)
        if kind is None:
            if self.previous is not None:
                self.previous(loop, context)
            else:
                loop.default_exception_handler(context)
            return
        if kind in self._counts:
            self._counts[kind] += 1
            self.suppressed += 1
            return
        self._counts[kind] = 0
        self.logged += 1
        log.error("%s (then counted: one line per %gs)", kind, self.interval)
        loop.call_later(self.interval, self._summarize, loop, kind)

    def _summarize(self, loop: asyncio.AbstractEventLoop, kind: str) -> None:
        """The end of ``kind``'s interval: one line with its count, and another interval
        while it goes on; a kind that stopped is forgotten (its next error is logged)."""
        count = self._counts.pop(kind, 0)
        if count:
            self.logged += 1
            log.warning("%s: %d more in the last %gs", kind, count, self.interval)
            self._counts[kind] = 0
            loop.call_later(self.interval, self._summarize, loop, kind)


class KvService:
    """The HTTP face of one replica ``r`` (an ``AsyncReplica`` of a ``ReplDict``).

    ``max_connections`` connections are served at once (one more gets 503 and is
    closed); ``idle_timeout`` seconds is how long a connection may take to send a
    request's line and headers after it opened or got its last answer."""

    def __init__(
        self,
        r: AsyncReplica,
        *,
        write_timeout: float = 30.0,
        max_connections: int = MAX_CONNECTIONS,
        idle_timeout: float = IDLE_SECONDS,
    ) -> None:
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, not {max_connections}")
        if not idle_timeout > 0:
            raise ValueError(f"idle_timeout must be positive, not {idle_timeout}")
        self.r = r
        self.write_timeout = write_timeout
        self.max_connections = max_connections
        self.idle_timeout = idle_timeout
        self.served = 0
        self.connections = 0  # open now
        self.shed = 0  # refused with 503: max_connections were open

    # -- connections ----------------------------------------------------------------------
    async def serve(self, host: str | None, port: int | None, **options: Any) -> asyncio.Server:
        """Listen (``sock=`` to use a listening socket instead of host and port), with
        accept errors logged at a bounded rate (``QuietAcceptErrors``) on this loop."""
        QuietAcceptErrors.install(asyncio.get_running_loop())
        return await asyncio.start_server(self.connection, host, port, limit=MAX_LINE, **options)

    async def connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve requests on one connection until it closes; nothing escapes but a close.
        Past ``max_connections`` open, the connection is shed (``shed_load``)."""
        if self.connections >= self.max_connections:
            self.shed_load(writer)
            return
        self.connections += 1
        try:
            while True:
                try:
                    request = await read_request(reader, writer, idle=self.idle_timeout)
                except HttpError as exc:
                    writer.write(Response.error(exc.status, exc.reason).encode(False))
                    await asyncio.wait_for(writer.drain(), REQUEST_SECONDS)
                    return
                if request is None:
                    return
                response = await self.respond(request)
                writer.write(response.encode(request.keep_alive))
                await asyncio.wait_for(writer.drain(), REQUEST_SECONDS)
                self.served += 1
                if not request.keep_alive:
                    return
        except ConnectionError:
            return
        except TimeoutError:  # the client does not read its answer: drop what is unsent
            writer.transport.abort()
        finally:
            self.connections -= 1
            writer.close()

    def shed_load(self, writer: asyncio.StreamWriter) -> None:
        """Answer 503 with ``Connection: close`` and close at once: under a flood the
        descriptor comes back now, and the client learns why (and when to try again)."""
        self.shed += 1
        reason = f"{self.max_connections} connections open; try again later"
        writer.write(Response.error(503, reason, **{"Retry-After": "1"}).encode(False))
        writer.close()

    async def respond(self, request: Request) -> Response:
        """The response to one well-formed request."""
        try:
            return await self._route(request)
        except HttpError as exc:
            return Response.error(exc.status, exc.reason)
        except Exception as exc:  # a bug here must not take the member down: say so, log it
            log.exception("%s %s failed", request.method, request.target[:80])
            return Response.error(500, f"internal error: {type(exc).__name__}")

    async def _route(self, request: Request) -> Response:
        path, params = parse_target(request.target)
        consistent = params.get("consistent") in ("1", "true", "")
        method = request.method
        if path.startswith("/kv/"):
            key = parse_key(path[4:])
            if method == "GET":
                return await self._get(key, consistent)
            if method == "PUT":
                return await self._put(key, request.body)
            if method == "DELETE":
                return await self._delete(key)
            raise_method(method, "GET, PUT, DELETE")
        routes = {"/kv": self._all, "/status": self._status, "/health": self._health}
        if path in routes:
            if method != "GET":
                raise_method(method, "GET")
            return await routes[path](consistent)
        raise HttpError(404, f"no route for {method} {path[:60]} (try {ROUTES})")

    # -- the store ------------------------------------------------------------------------
    async def _get(self, key: str, consistent: bool) -> Response:
        if consistent:
            value = await self._confirmed(self.r.ordered("get", key))
        else:
            value = self.local("get", key)
        if value is None:
            return Response.error(404, f"no key {key[:60]!r}")
        return Response(200, value)

    async def _put(self, key: str, body: bytes) -> Response:
        try:
            value = body.decode("utf-8")
        except UnicodeDecodeError:
            raise HttpError(400, "the value must be UTF-8 text") from None
        await self._confirmed(self.r.call("set", key, value))
        return Response(204)

    async def _delete(self, key: str) -> Response:
        if await self._confirmed(self.r.call("delete", key)):
            return Response(204)
        return Response.error(404, f"no key {key[:60]!r}")

    async def _all(self, consistent: bool) -> Response:
        if consistent:
            items = await self._confirmed(self.r.ordered("items"))
        else:
            items = self.local("items")
        return Response(200, json.dumps(dict(items)) + "\n", "application/json")

    def local(self, method: str, *args: Any) -> Any:
        """A local read; 503 while this process is not a member (it holds no state)."""
        if self.r.replica.view is None:
            raise HttpError(503, "not a member of the group now (joining or rejoining)")
        return self.r.local(method, *args)

    async def _confirmed(self, call: Any) -> Any:
        """The result of a call through the group, or 503 (outcome unknown) / 413."""
        try:
            return await asyncio.wait_for(call, self.write_timeout)
        except TimeoutError:
            raise HttpError(
                503, f"not applied within {self.write_timeout:g}s: outcome unknown"
            ) from None
        except OutcomeUnknown as exc:
            raise HttpError(503, f"outcome unknown: {exc}") from None
        except LocalError as exc:
            if "above the limit" in str(exc):
                raise HttpError(413, str(exc).splitlines()[0]) from None
            raise HttpError(400, str(exc).splitlines()[0]) from None

    # -- this member ----------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """This member as data: who, which view, how much applied, a digest of the state."""
        replica = self.r.replica
        group = group_of(self.r.node.endpoint)
        view = replica.view
        items = self.r.local("items") if view is not None else None
        digest = hashlib.sha256(json.dumps(items, sort_keys=True).encode()).hexdigest()
        return {
            "pid": replica.pid,
            "incarnation": replica.incarnation,
            "member": view is not None and group is not None and group.joined,
            "view": view.id if view is not None else None,
            "members": list(view.members) if view is not None else [],
            "applied": replica.applied,
            "keys": len(items) if items is not None else None,
            "digest": digest[:16] if items is not None else None,
            "served": self.served,
            "connections": self.connections,
            "shed": self.shed,
            "group": group.status().summary() if group is not None else None,
        }

    async def _status(self, consistent: bool) -> Response:
        return Response(200, json.dumps(self.status()) + "\n", "application/json")

    async def _health(self, consistent: bool) -> Response:
        if self.status()["member"]:
            return Response(200, "ok\n")
        return Response.error(503, "not a member of the group yet (joining or rejoining)")


def raise_method(method: str, allowed: str) -> None:
    """405 with the methods the route takes."""
    raise HttpError(405, f"{method[:20]} not allowed here (allowed: {allowed})")


__all__ = [
    "ACCEPT_LOG_SECONDS",
    "MAX_CONNECTIONS",
    "MAX_KEY",
    "KvService",
    "QuietAcceptErrors",
    "accept_error_kind",
    "parse_key",
    "parse_target",
]
