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
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from typing import Any
from urllib.parse import parse_qsl, unquote

from examples.kv.wire import MAX_LINE, HttpError, Request, Response, read_request
from mailroom.core.errors import LocalError
from mailroom.net.membership import group_of
from mailroom.replicated import AsyncReplica, OutcomeUnknown

log = logging.getLogger(__name__)

#: The longest key, in bytes of UTF-8.
MAX_KEY = 256
ROUTES = "GET|PUT|DELETE /kv/<key>, GET /kv, GET /status, GET /health"


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


class KvService:
    """The HTTP face of one replica ``r`` (an ``AsyncReplica`` of a ``ReplDict``)."""

    def __init__(self, r: AsyncReplica, *, write_timeout: float = 30.0) -> None:
        self.r = r
        self.write_timeout = write_timeout
        self.served = 0

    # -- connections ----------------------------------------------------------------------
    async def serve(self, host: str | None, port: int | None, **options: Any) -> asyncio.Server:
        """Listen (``sock=`` to use a listening socket instead of host and port)."""
        return await asyncio.start_server(self.connection, host, port, limit=MAX_LINE, **options)

    async def connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve requests on one connection until it closes; nothing escapes but a close."""
        try:
            while True:
                try:
                    request = await read_request(reader, writer)
                except HttpError as exc:
                    writer.write(Response.error(exc.status, exc.reason).encode(False))
                    await writer.drain()
                    return
                if request is None:
                    return
                response = await self.respond(request)
                writer.write(response.encode(request.keep_alive))
                await writer.drain()
                self.served += 1
                if not request.keep_alive:
                    return
        except (ConnectionError, TimeoutError):
            return
        finally:
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


__all__ = ["MAX_KEY", "KvService", "parse_key", "parse_target"]
