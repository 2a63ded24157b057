"""Just enough HTTP/1.1 for the store, on asyncio streams: read one request, write one
response. Every malformed or oversized request becomes an ``HttpError`` (a status and
a one-line reason) before anything reaches the store.

Limits (documented in docs/kv.md): a request line or header line of at most
``MAX_LINE`` bytes, at most ``MAX_HEADERS`` headers, a body of at most ``MAX_BODY``
bytes sent with ``Content-Length`` (no chunked bodies), ``Expect: 100-continue``
answered. Connections are kept alive (HTTP/1.1) unless the client says ``close``; a
connection that has not sent a complete request line and headers within ``idle``
seconds (``IDLE_SECONDS`` unless the caller says) of being opened or answered is
closed, so a silent or trickling client cannot hold a connection.
"""

from __future__ import annotations

import asyncio

import attrs

#: The longest request line or header line, in bytes.
MAX_LINE = 8192
#: The most header lines in one request.
MAX_HEADERS = 64
#: The largest body (a value), in bytes.
MAX_BODY = 32 * 1024
#: Seconds a client has to send the rest of a request (its body) once it started one.
REQUEST_SECONDS = 30.0
#: Seconds a connection may wait, once opened or answered, before its request line and
#: headers are complete; then it is closed (an idle connection holds a descriptor).
IDLE_SECONDS = 10.0

REASONS = {
    200: "OK",
    204: "No Content",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    411: "Length Required",
    413: "Content Too Large",
    414: "URI Too Long",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
    503: "Service Unavailable",
    505: "HTTP Version Not Supported",
}


class HttpError(Exception):
    """A request refused with ``status`` and a one-line ``reason``; ``close`` when the
    connection cannot be trusted to carry another request."""

    def __init__(self, status: int, reason: str, *, close: bool = False) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.close = close


@attrs.frozen
class Request:
    """One parsed request; ``target`` as sent (path and query, still percent-encoded)."""

    method: str
    target: str
    version: str
    headers: dict[str, str]
    body: bytes

    @property
    def keep_alive(self) -> bool:
        said = self.headers.get("connection", "").lower()
        if self.version == "HTTP/1.0":
            return said == "keep-alive"
        return said != "close"


@attrs.frozen
class Response:
    """A response: ``status``, a text ``body``, extra ``headers``."""

    status: int
    body: str = ""
    content_type: str = "text/plain; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def error(cls, status: int, reason: str, **more: str) -> Response:
        """The one-line error every refusal gets."""
        return cls(status, f"error: {reason}\n", headers=tuple(more.items()))

    def encode(self, keep_alive: bool) -> bytes:
        body = self.body.encode("utf-8")
        lines = [f"HTTP/1.1 {self.status} {REASONS.get(self.status, 'Unknown')}"]
        if self.status != 204:
            lines += [f"Content-Type: {self.content_type}", f"Content-Length: {len(body)}"]
        lines += [f"{name}: {value}" for name, value in self.headers]
        lines.append("Connection: keep-alive" if keep_alive else "Connection: close")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        return head if self.status == 204 else head + body


async def _line(reader: asyncio.StreamReader, too_long: HttpError) -> bytes:
    """One CRLF-terminated line without its end; ``too_long`` past ``MAX_LINE``."""
    try:
        line = await reader.readuntil(b"\n")
    except asyncio.LimitOverrunError:
        raise too_long from None
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            raise EOFError from None
        raise HttpError(400, "the request ended in the middle of a line", close=True) from None
    if len(line) > MAX_LINE:
        raise too_long
    return line.rstrip(b"\r\n")


def _request_line(line: bytes) -> tuple[str, str, str]:
    try:
        text = line.decode("ascii")
    except UnicodeDecodeError:
        raise HttpError(400, "the request line is not ASCII", close=True) from None
    parts = text.split(" ")
    if len(parts) != 3 or not all(parts) or not parts[0].isalpha() or not parts[1].startswith("/"):
        raise HttpError(400, "malformed request line (want: METHOD /path HTTP/1.1)", close=True)
    if parts[2] not in ("HTTP/1.1", "HTTP/1.0"):
        raise HttpError(505, f"{parts[2][:20]!r}: only HTTP/1.1 and HTTP/1.0", close=True)
    return parts[0], parts[1], parts[2]


async def _headers(reader: asyncio.StreamReader) -> dict[str, str]:
    headers: dict[str, str] = {}
    too_long = HttpError(431, f"a header line is longer than {MAX_LINE} bytes", close=True)
    for _ in range(MAX_HEADERS + 1):
        line = await _line(reader, too_long)
        if not line:
            return headers
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip() or b" " in name:
            raise HttpError(400, "malformed header line (want: Name: value)", close=True)
        key = name.decode("latin-1").lower()
        text = value.strip().decode("latin-1")
        if key in headers and key in ("content-length", "transfer-encoding", "host"):
            raise HttpError(400, f"header {key} given twice", close=True)
        headers[key] = text
    raise HttpError(431, f"more than {MAX_HEADERS} headers", close=True)


def _length(headers: dict[str, str]) -> int:
    if "transfer-encoding" in headers:
        raise HttpError(501, "chunked bodies are not supported: send Content-Length", close=True)
    text = headers.get("content-length")
    if text is None:
        return 0
    if not text.isdigit() or len(text) > 12:
        raise HttpError(400, f"bad Content-Length {text[:20]!r}", close=True)
    size = int(text)
    if size > MAX_BODY:
        raise HttpError(413, f"the body is {size} bytes; the limit is {MAX_BODY}", close=True)
    return size


async def read_request(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, idle: float = IDLE_SECONDS
) -> Request | None:
    """The next request on the connection; None once the client closed it or sent no
    complete request line within ``idle`` seconds; ``HttpError`` for a malformed or
    oversized one, or for one whose headers are not complete within those ``idle``
    seconds (a client that trickles bytes is closed as surely as a silent one), or
    whose body is not sent within ``REQUEST_SECONDS``."""
    loop = asyncio.get_running_loop()
    headers_by = loop.time() + idle
    too_long = HttpError(414, f"the request line is longer than {MAX_LINE} bytes", close=True)
    try:
        async with asyncio.timeout_at(headers_by):
            first = await _line(reader, too_long)
            if not first:  # a stray empty line between requests is allowed once
                first = await _line(reader, too_long)
    except (EOFError, TimeoutError, ConnectionError):
        return None
    method, target, version = _request_line(first)
    sent_by = loop.time() + REQUEST_SECONDS
    headers: dict[str, str] | None = None
    try:
        async with asyncio.timeout_at(min(headers_by, sent_by)) as deadline:
            headers = await _headers(reader)
            deadline.reschedule(sent_by)
            size = _length(headers)
            if size and headers.get("expect", "").lower() == "100-continue":
                writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            body = await reader.readexactly(size) if size else b""
    except EOFError:
        raise HttpError(400, "the request ended in its headers", close=True) from None
    except asyncio.IncompleteReadError:
        raise HttpError(400, "the body is shorter than Content-Length", close=True) from None
    except TimeoutError:
        if headers is None and headers_by <= sent_by:
            reason = f"request headers not sent within {idle:g}s"
        else:
            reason = f"request not sent within {REQUEST_SECONDS:g}s"
        raise HttpError(400, reason, close=True) from None
    return Request(method, target, version, headers, body)


__all__ = [
    "IDLE_SECONDS",
    "MAX_BODY",
    "MAX_HEADERS",
    "MAX_LINE",
    "REQUEST_SECONDS",
    "HttpError",
    "Request",
    "Response",
    "read_request",
]
