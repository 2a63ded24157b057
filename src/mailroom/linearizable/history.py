"""Operations and histories as a service's clients saw them (Jepsen's conventions).

A history is a sequence of ``Op`` rows in real-time order: each client process
*invokes* an operation and later sees it complete as ``ok`` (it happened, with this
result), ``fail`` (it did not happen) or ``info`` (unknown: it may or may not have
happened). ``pair`` turns the rows into ``Call`` s, one per operation that may have
happened: ``fail`` ones are dropped, and an ``info`` completion or an invocation never
completed leaves the call *open* to the end of the history (``returned`` is None).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from itertools import pairwise
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

    ``index`` names the call in its history (its invocation's position, so calls sort
    in invocation order).
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


_SCALARS = (str, int, float, bool)


def freeze(value: Any) -> Hashable:
    """``value`` with lists as tuples, dicts as tuples of pairs and sets as frozensets."""
    if value is None or type(value) in _SCALARS:
        scalar: Hashable = value
        return scalar
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple((freeze(k), freeze(v)) for k, v in value.items())
    if isinstance(value, set | frozenset):
        return frozenset(freeze(v) for v in value)
    if not isinstance(value, Hashable):
        raise TypeError(f"a {type(value).__name__} cannot be a value of a history")
    return value


def positions(ops: Sequence[Op]) -> list[int]:
    """Where each row is in the history: its line when every row has one (lines rise),
    else its place in ``ops``."""
    lines = [op.line for op in ops]
    if all(b > a for a, b in pairwise(lines)) and (not lines or lines[0] > 0):
        return lines
    return list(range(len(ops)))


def pair(ops: Iterable[Op], *, source: str = "") -> list[Call]:
    """The calls of a history in invocation order; HistoryError (the first in the
    history) on a row that completes nothing, or an invocation by a process whose last
    call is still pending. Each process's rows are paired on their own
    (``pair_process``), as the Spark engine pairs them."""
    rows = list(ops)
    by_process: dict[Hashable, list[tuple[int, Op]]] = {}
    for at, op in zip(positions(rows), rows, strict=True):
        by_process.setdefault(op.process, []).append((at, op))
    calls: list[Call] = []
    errors: list[HistoryError] = []
    for group in by_process.values():
        found, error = pair_process(group, source=source)
        calls += found
        errors += [error] if error is not None else []
    if errors:
        raise min(errors, key=lambda e: e.line or 0)
    calls.sort(key=lambda c: c.index)
    return calls


def pair_process(
    rows: Iterable[tuple[int, Op]], *, source: str = ""
) -> tuple[list[Call], HistoryError | None]:
    """The calls of one process's rows (position, op), in order, and the first error."""
    calls: list[Call] = []
    pending: tuple[int, Op] | None = None
    for at, op in rows:
        if op.type == "invoke":
            if pending is not None:
                why = (
                    f"process {show(op.process)} invokes {op.f} while its {pending[1].f} is pending"
                )
                return calls, HistoryError(why, line=op.line, source=source)
            pending = (at, op)
            continue
        if pending is None:
            why = f"{op.type} {op.f} of process {show(op.process)}, which invoked nothing"
            return calls, HistoryError(why, line=op.line, source=source)
        if op.f != pending[1].f:
            why = f"{op.type} {op.f} completes an invocation of {pending[1].f}"
            return calls, HistoryError(why, line=op.line, source=source)
        if op.type != "fail":
            calls.append(_call(*pending, at if op.type == "ok" else None, op))
        pending = None
    if pending is not None:
        calls.append(_call(*pending, None, None))
    return calls, None


def _call(start: int, inv: Op, end: int | None, done: Op | None) -> Call:
    key = inv.key if inv.key is not None or done is None else done.key
    return Call(
        index=start,
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
