"""An operation as the group carries it: a short list of JSON data, checked at the call.

Wire form (a Group message's payload; its message id names the operation)::

    ["c", incarnation, method, args]            # a replicated call
    ["c", incarnation, method, args, kwargs]    # ... with keyword arguments
    ["r", incarnation, method, args(, kwargs)]  # an ordered read
    ["h", incarnation]                          # a rejoined member says which incarnation it is

A *batch* carries several operations of one member in one Group message: its
payload is a string, the compact JSON text of the list of their payloads
(``'[["c",0,"add",[1]],["c",0,"add",[2]]]'``); operation ``k`` of message
``(origin, seq)`` is ``(origin, seq, k)``. A host gathers the calls of one turn of
its event loop into a batch, so the group orders (and, under safe delivery,
confirms) one message for all of them; a string travels through the codec in one
piece and is parsed by the C ``json`` module, which a list of lists does not.

``incarnation`` is the calling member's (a process that rejoins is its next one),
so every replica learns, at the same point of the order, that an older incarnation
is gone. Arguments must be what the codec carries: JSON data (None, bool, int,
float, str, list, dict with str keys) with ints of at most 64 bits; an operation
whose compact JSON text is longer than ``MAX_OPERATION_BYTES`` is refused. Both
are refused at the call, with LocalError, before anything is sent.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import attrs

from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.messages import Payload, check_payload

#: The longest operation (compact JSON text of its payload, in bytes) a replica sends.
MAX_OPERATION_BYTES = 64 * 1024
#: A batch's text is cut at this many bytes (a longer operation travels alone).
MAX_BATCH_BYTES = 64 * 1024
CALL, READ, HELLO = "c", "r", "h"
_KINDS = (CALL, READ, HELLO)
#: An int the codec carries is in [-INT_LIMIT, INT_LIMIT) (64 bits and a sign).
INT_LIMIT = 1 << 64
#: An int of 20 digits or more in the JSON text may be beyond the codec's 64 bits.
_LONG_DIGITS = re.compile(r"\d{20,}")
#: The compact JSON of operations, built once (``json.dumps`` with options builds one a call).
_COMPACT = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


@attrs.frozen
class Operation:
    """One operation: its kind, the caller's incarnation, the method and its arguments."""

    kind: str
    incarnation: int
    method: str = ""
    # attrs.Factory, not attrs.field(factory=...): the same default, and one mypyc builds
    args: list[Any] = attrs.Factory(list)
    kwargs: dict[str, Any] = attrs.Factory(dict)

    def payload(self) -> list[Any]:
        return operation_payload(self.kind, self.incarnation, self.method, self.args, self.kwargs)


def operation_payload(
    kind: str, incarnation: int, method: str, args: list[Any], kwargs: dict[str, Any]
) -> list[Any]:
    """An operation as a message carries it (what ``parse`` reads back)."""
    if kind == HELLO:
        return [HELLO, incarnation]
    out: list[Any] = [kind, incarnation, method, args]
    if kwargs:
        out.append(kwargs)
    return out


_SCALARS = (str, int, float, bool, type(None))


def scalars_only(args: list[Any], kwargs: dict[str, Any]) -> bool:
    """No keyword arguments, and positional ones that are all scalars (nothing to copy)."""
    if kwargs:
        return False
    for a in args:  # noqa: SIM110 - a loop, not all(genexpr): it runs per operation per replica
        if type(a) not in _SCALARS:
            return False
    return True


def _check_ints(value: Any) -> None:
    """LocalError if ``value`` holds an int the codec cannot carry (beyond 64 bits)."""
    kind = type(value)
    if kind is int:
        if not -INT_LIMIT <= value < INT_LIMIT:
            raise LocalError(f"int {value} does not fit the codec's 64 bits")
    elif kind is list:
        for item in value:
            _check_ints(item)
    elif kind is dict:
        for item in value.values():
            _check_ints(item)


def carried_text(value: Any, what: str, limit: int | None = None, *, scalars: bool = False) -> str:
    """The compact JSON text of ``value``; LocalError unless the codec can carry it
    (and, with ``limit``, unless the text is at most ``limit`` bytes long).
    ``scalars``: ``value`` holds only str, int, float, bool and None (in lists), so
    JSON's own refusal of a float that is not finite is the only check left."""
    if not scalars:
        try:
            check_payload(value)
        except LocalError as exc:
            raise LocalError(f"{what}: {exc}", hint=exc.hint) from None
    try:
        text = _COMPACT.encode(value)
    except ValueError as exc:
        raise LocalError(f"{what}: a float that is not finite ({exc})") from None
    if limit is not None and len(text) > limit:
        raise LocalError(
            f"{what} is {len(text)} bytes, above the limit of {limit}",
            hint="keep large data outside the replicated object and replicate a reference",
        )
    if _LONG_DIGITS.search(text):
        try:
            _check_ints(value)
        except LocalError as exc:
            raise LocalError(f"{what}: {exc}") from None
    return text


def parse(payload: Payload) -> Operation:
    """The operation a delivered payload holds; RemoteError if it is not one."""
    if type(payload) is not list or not payload or payload[0] not in _KINDS:
        raise RemoteError(f"not a replicated operation: {payload!r:.80}")
    kind = payload[0]
    if len(payload) < 2 or type(payload[1]) is not int or payload[1] < 0:
        raise RemoteError("an operation's incarnation must be a non-negative int")
    if kind == HELLO:
        if len(payload) != 2:
            raise RemoteError("a hello holds its incarnation only")
        return Operation(HELLO, payload[1])
    if not 4 <= len(payload) <= 5:
        raise RemoteError(f"an operation has 4 or 5 fields, not {len(payload)}")
    method, args = payload[2], payload[3]
    kwargs = payload[4] if len(payload) == 5 else {}
    if type(method) is not str or type(args) is not list or type(kwargs) is not dict:
        raise RemoteError("an operation is [kind, incarnation, method, args, kwargs]")
    return Operation(kind, payload[1], method, args, kwargs)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON data the codec carries")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is not a finite float")
    return value


#: The reader of a batch's text, built once (``json.loads`` with options builds one a call).
_READER = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite)


def parse_batch(text: str) -> list[Any]:
    """The operation payloads a batch's text holds; RemoteError if it is not a
    non-empty JSON list of lists the codec could carry (what a checkpoint keeps:
    finite floats, ints of 64 bits, at most 64 levels deep; JSON's keys are strings)."""
    try:
        ops = _READER.decode(text)
    except (ValueError, RecursionError) as exc:
        raise RemoteError(f"a batch is not JSON text: {exc}") from None
    if type(ops) is not list or not ops or any(type(op) is not list for op in ops):
        raise RemoteError("a batch is a non-empty JSON list of operations")
    try:
        for op in ops:  # an operation of scalar arguments is two levels deep: nothing to see
            if len(op) != 4 or type(op[3]) is not list or not scalars_only(op[3], {}):
                check_payload(op, 1)
        if _LONG_DIGITS.search(text):
            _check_ints(ops)
    except LocalError as exc:
        raise RemoteError(f"a batch holds what the codec cannot carry: {exc}") from None
    return ops


def cut_batches(texts: list[str], limit: int = MAX_BATCH_BYTES) -> list[slice]:
    """Consecutive runs of ``texts`` (operations' JSON texts) whose batch text is at
    most ``limit`` bytes long (an operation longer than that is a run of its own)."""
    runs: list[slice] = []
    start, size = 0, 1
    for k, text in enumerate(texts):
        cost = len(text) + 1  # its comma or the closing bracket
        if k > start and size + cost > limit:
            runs.append(slice(start, k))
            start, size = k, 1
        size += cost
    if start < len(texts):
        runs.append(slice(start, len(texts)))
    return runs


def owned(op: Operation) -> tuple[list[Any], dict[str, Any], int]:
    """The operation's arguments as copies no one else holds, and the size of its
    payload in bytes (exact when the arguments hold lists or dicts, else close)."""
    args, kwargs = op.args, op.kwargs
    if scalars_only(args, kwargs):
        return list(args), {}, scalar_size(op.method, args)
    text = json.dumps([args, kwargs], separators=(",", ":"))
    copy = json.loads(text)
    return copy[0], copy[1], 16 + len(op.method) + len(text)


def scalar_size(method: str, args: list[Any]) -> int:
    """The size in bytes of an operation of scalar arguments, close enough for the journal
    (their repr is within a few bytes of their JSON, and one call)."""
    return 16 + len(method) + len(repr(args))


def private_copy(value: Any) -> Any:
    """A copy of delivered data that no one else holds (in one process, a payload is
    shared by every replica and by the group's own log)."""
    kind = type(value)
    if kind is list or kind is dict:
        return json.loads(json.dumps(value))
    return value


__all__ = [
    "INT_LIMIT",
    "MAX_BATCH_BYTES",
    "MAX_OPERATION_BYTES",
    "Operation",
    "carried_text",
    "cut_batches",
    "parse",
    "parse_batch",
]
