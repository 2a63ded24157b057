"""Operations and histories as a service's clients saw them (Jepsen's conventions).

A history is a sequence of ``Op`` rows in real-time order: each client process
*invokes* an operation and later sees it complete as ``ok`` (it happened, with this
result), ``fail`` (it did not happen) or ``info`` (unknown: it may or may not have
happened). ``pair`` turns the rows into ``Call`` s, one per operation that may have
happened: ``fail`` ones are dropped, and an ``info`` completion or an invocation never
completed leaves the call *open* to the end of the history (``returned`` is None).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

import attrs

from mailroom.core.errors import MailroomError

#: the four kinds of row
TYPES = ("invoke", "ok", "fail", "info")


class HistoryError(MailroomError):
    """A history row cannot be read or does not fit the rows before it."""

    def __init__(self, message: str, *, line: int | None = None, source: str = "") -> None:
        where = f"{source}:{line}: " if source and line is not None else ""
        if not source and line is not None:
            where = f"line {line}: "
        super().__init__(where + message, hint="fix or remove the row")
        self.line = line


@attrs.frozen
class Op:
    """One row: ``process`` invoked or saw complete operation ``f`` on ``key``."""

    process: Hashable
    type: str
    f: str
    value: Any = None
    key: Hashable = None
    #: the row's line in its file (1-based), for error messages and witnesses
    line: int = 0
    time: float | None = None


@attrs.frozen
class Call:
    """One operation that may have happened: its invocation and (if known) completion.

    ``arg`` is the invocation's value, ``result`` the completion's (None while open).
    ``called`` and ``returned`` are positions in the history (the rows' order);
    ``returned`` is None for an open call (``info`` or never completed).
    """

    index: int
    process: Hashable
    f: str
    key: Hashable
    arg: Any
    result: Any
    called: int
    returned: int | None
    call_line: int = 0
    return_line: int | None = None

    @property
    def open(self) -> bool:
        """True if the call may or may not have happened (``info`` or no completion)."""
        return self.returned is None

    def describe(self) -> str:
        """One line: ``P3 cas [1 4] -> ok`` (the key when it has one)."""
        key = "" if self.key is None else f" {show(self.key)}"
        got = "?" if self.open else show(self.result)
        return f"P{show(self.process)} {self.f}{key} {show(self.arg)} -> {got}"


def show(value: Any) -> str:
    """A value as Jepsen writes it: nil, [1 4], "text", :keyword."""
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple | list):
        return "[" + " ".join(show(v) for v in value) + "]"
    if isinstance(value, frozenset | set):
        return "#{" + " ".join(sorted(show(v) for v in value)) + "}"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value)


def freeze(value: Any) -> Hashable:
    """``value`` with lists as tuples, dicts as tuples of pairs and sets as frozensets."""
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple((freeze(k), freeze(v)) for k, v in value.items())
    if isinstance(value, set | frozenset):
        return frozenset(freeze(v) for v in value)
    if not isinstance(value, Hashable):
        raise TypeError(f"a {type(value).__name__} cannot be a value of a history")
    return value


def pair(ops: Iterable[Op], *, source: str = "") -> list[Call]:
    """The calls of a history in invocation order, each numbered by its invocation among
    all invocations (a failed one leaves a gap); HistoryError on a row that completes
    nothing, or an invocation by a process whose last call is still pending."""
    calls: list[Call] = []
    pending: dict[Hashable, tuple[int, Op]] = {}  # process -> (invocation number, row)
    positions: list[int] = []  # the position of each invocation
    for pos, op in enumerate(ops):
        if op.type == "invoke":
            if op.process in pending:
                raise HistoryError(
                    f"process {show(op.process)} invokes {op.f} while its "
                    f"{pending[op.process][1].f} is pending",
                    line=op.line,
                    source=source,
                )
            pending[op.process] = (len(positions), op)
            positions.append(pos)
            continue
        if op.process not in pending:
            raise HistoryError(
                f"{op.type} {op.f} of process {show(op.process)}, which invoked nothing",
                line=op.line,
                source=source,
            )
        number, inv = pending.pop(op.process)
        if op.f != inv.f:
            raise HistoryError(
                f"{op.type} {op.f} completes an invocation of {inv.f}", line=op.line, source=source
            )
        if op.type == "ok":
            calls.append(_call(number, positions[number], inv, pos, op))
        elif op.type == "info":
            calls.append(_call(number, positions[number], inv, None, op))
    calls.extend(_call(n, positions[n], inv, None, None) for n, inv in pending.values())
    calls.sort(key=lambda c: c.index)
    return calls


def _call(number: int, start: int, inv: Op, end: int | None, done: Op | None) -> Call:
    key = inv.key if inv.key is not None or done is None else done.key
    return Call(
        index=number,
        process=inv.process,
        f=inv.f,
        key=key,
        arg=inv.value,
        result=done.value if done is not None and end is not None else None,
        called=start,
        returned=end,
        call_line=inv.line,
        return_line=done.line if done is not None else None,
    )
