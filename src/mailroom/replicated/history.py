"""Histories of replicated objects: what callers were told and what each replica applied.

One row per event, as JSON Lines; every row names its ``replica`` (pid) and ``inc``
(incarnation): together, one replica's life.

- ``start``: it holds the state after ``applied`` operations, in ``view`` (``members``);
- ``call``: it sent operation ``op`` (``[origin, seq]``, or ``[origin, seq, k]`` for
  the k-th operation of a batch) with ``payload``;
- ``result``: its caller was told ``value``, or ``error`` (``[type, message]``), or
  the outcome is ``unknown`` (it left the group first), or ``withdrawn`` (never sent);
- ``apply``: it applied ``op`` as operation number ``index`` (0, 1, ...);
- ``view``: it installed ``view`` (``members``) after ``after`` operations;
- ``out``: it was excluded; ``crash``: it stopped (its host says so);
- ``end``: it was alive at the end, having applied ``applied`` operations (and, if
  given, with ``state``, the object's state as data).

``check_history(rows, factory)`` judges a history: replicas' applied sequences are
prefixes of one sequence (``prefix``), nothing is applied twice (``once``), nothing
acknowledged is missing from any replica alive at the end (``lost``), and every result
a caller was told (and every state an end row reports) equals what a sequential
replay of that one sequence gives, on a fresh object from ``factory`` (``results``);
``integrity`` covers the rest (an applied operation nobody sent, a malformed row).
``check_files`` is the command-line form.
"""

from __future__ import annotations

import importlib
import json
import os
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, Any

import attrs

from mailroom.core.actions import View, ViewChange
from mailroom.core.errors import MailroomError
from mailroom.core.messages import Message, MessageId
from mailroom.replicated.replica import Outcome, Replica, error_data, jsonable
from mailroom.replicated.state import take_state
from mailroom.trace import TraceError

Row = dict[str, Any]
ROWS = ("start", "call", "result", "apply", "view", "out", "crash", "end")
PROPERTIES = ("prefix", "once", "lost", "results", "integrity")


class History:
    """Rows kept in memory: pass it as a replica's ``history``; ``rows`` holds them."""

    def __init__(self) -> None:
        self.rows: list[Row] = []

    def __call__(self, row: Row) -> None:
        self.rows.append(row)

    def write(self, path: str | Path) -> None:
        with open(path, "w", encoding="utf-8") as out:
            for row in self.rows:
                out.write(json.dumps(row, separators=(",", ":")) + "\n")


class HistoryFile:
    """Rows appended to a JSON Lines file as they happen, each written through to the
    operating system (with ``sync``, to the disk) before the call returns."""

    def __init__(self, path: str | Path, *, sync: bool = False) -> None:
        self.path = Path(path)
        self.sync = sync
        self._out: IO[str] | None = open(self.path, "a", encoding="utf-8")  # noqa: SIM115

    def __call__(self, row: Row) -> None:
        if self._out is None:
            return
        self._out.write(json.dumps(row, separators=(",", ":")) + "\n")
        self._out.flush()
        if self.sync:
            os.fsync(self._out.fileno())

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None


def read_history(paths: Iterable[str | Path]) -> list[Row]:
    """The rows of every file, in order (file by file); TraceError on a malformed line.
    A last line cut short (a process killed while writing it) is left out."""
    rows: list[Row] = []
    for path in paths:
        lines = Path(path).read_text(encoding="utf-8").split("\n")
        for k, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError:
                if k == len(lines):  # no newline after it: cut short
                    continue
                raise TraceError(f"{path}:{k}: not a JSON object") from None
            rows.append(_checked(row, f"{path}:{k}"))
    return rows


#: The fields each kind of row must hold as non-negative ints (every row: replica, inc).
_COUNTS = {"apply": ("index",), "start": ("applied",), "view": ("after", "view")}


def _checked(row: object, where: str) -> Row:
    if type(row) is not dict or row.get("row") not in ROWS:
        raise TraceError(f"{where}: not a history row (row must be one of {', '.join(ROWS)})")
    for name in ("replica", "inc", *_COUNTS.get(row["row"], ())):
        if type(row.get(name)) is not int or row[name] < 0:
            raise TraceError(f"{where}: {name} must be a non-negative int")
    op = row.get("op")
    if op is not None and not (
        type(op) is list and len(op) in (2, 3) and all(type(v) is int and v >= 0 for v in op)
    ):
        raise TraceError(f"{where}: op must be [origin, seq] or [origin, seq, part]")
    if row["row"] in ("call", "result", "apply") and op is None:
        raise TraceError(f"{where}: a {row['row']} row names its op")
    if row["row"] == "view" and type(row.get("members")) is not list:
        raise TraceError(f"{where}: a view row lists its members")
    return row


@attrs.frozen
class Problem:
    """One way the history breaks ``property``, in words; ``op`` the operation at fault."""

    property: str
    reason: str
    op: tuple[int, ...] | None = None

    def explain(self) -> str:
        at = f" (op {'.'.join(map(str, self.op))})" if self.op else ""
        return f"[{self.property}] {self.reason}{at}"


@attrs.frozen
class HistoryReport:
    """The verdict: problems per property, and what was checked."""

    problems: tuple[Problem, ...]
    applied: int
    acknowledged: int
    replicas: int

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        counts = {p: sum(1 for x in self.problems if x.property == p) for p in PROPERTIES}
        verdict = "ok" if self.ok else "FAILED"
        found = ", ".join(f"{p}: {c}" for p, c in counts.items())
        return (
            f"{verdict}: {self.replicas} replica lives, {self.applied} operations in order, "
            f"{self.acknowledged} acknowledged; problems {found}"
        )


Life = tuple[int, int]
#: (origin, seq) of an operation sent alone, (origin, seq, k) for one of a batch
Op = tuple[int, ...]


@attrs.define
class _Seen:
    """What the rows say, gathered in one pass."""

    payloads: dict[Op, Any] = attrs.field(factory=dict)
    told: dict[Op, tuple[Life, Row]] = attrs.field(factory=dict)
    order: dict[int, Op] = attrs.field(factory=dict)
    #: view id -> (operations applied before it, members)
    views: dict[int, tuple[int, tuple[int, ...]]] = attrs.field(factory=dict)
    first: tuple[int, tuple[int, ...]] | None = None
    ends: dict[Life, int] = attrs.field(factory=dict)
    #: the states end rows report: life -> (applied, state)
    states: dict[Life, tuple[int, Any]] = attrs.field(factory=dict)
    lives: set[Life] = attrs.field(factory=set)
    problems: list[Problem] = attrs.field(factory=list)


def _gather(rows: Sequence[Row], safe: bool) -> _Seen:
    """One pass over the rows, then each life's applied sequence into the one order:
    the lives alive at the end first; without ``safe`` delivery, a life that ended
    excluded or crashed only up to its last view (what it applied in that view the
    survivors may never have delivered)."""
    seen = _Seen()
    #: per life, its runs of apply rows, each after a start row (a restart begins a run)
    runs: dict[Life, list[tuple[int | None, list[Row]]]] = defaultdict(list)
    settled: dict[Life, int] = {}  # operations applied before the life's last view
    last: dict[Life, str] = {}
    for row in rows:
        life, kind = (row["replica"], row["inc"]), row["row"]
        seen.lives.add(life)
        op: Op = tuple(row["op"]) if "op" in row else (-1, -1)
        if kind == "start":
            settled[life] = row["applied"]
            runs[life].append((row["applied"], []))
            if row["applied"] == 0 and seen.first is None:
                seen.first = (row.get("view", 1), tuple(row.get("members", ())))
        elif kind == "call":
            seen.payloads[op] = row.get("payload")
        elif kind == "result":
            seen.told[op] = (life, row)
        elif kind == "apply":
            if not runs[life]:
                runs[life].append((None, []))
            runs[life][-1][1].append(row)
        elif kind == "view":
            settled[life] = row["after"]
            entry = (row["after"], tuple(row["members"]))
            if seen.views.setdefault(row["view"], entry) != entry:
                reason = f"replicas disagree on view {row['view']}: {entry}"
                seen.problems.append(Problem("integrity", reason))
        elif kind == "end":
            seen.ends[life] = row.get("applied", -1)
            if "state" in row:
                seen.states[life] = (seen.ends[life], row["state"])
        last[life] = kind
    for life in sorted(last, key=lambda life: last[life] in ("out", "crash")):
        gone = last[life] in ("out", "crash")
        position = None
        for first, applied in runs[life]:
            position = first
            for row in applied:
                if gone and not safe and row["index"] >= settled.get(life, 0):
                    break
                _apply_row(seen, position, life, row)
                position = row["index"] + 1
        if not gone and seen.ends.get(life, -1) < 0:  # files of real processes: no end row
            seen.ends[life] = position if position is not None else 0
    return seen


def _apply_row(seen: _Seen, expected: int | None, life: Life, row: Row) -> None:
    op: Op = tuple(row["op"])
    index = row["index"]
    if expected is not None and index != expected:
        reason = f"P{life[0]}.{life[1]} applied #{index} after #{expected - 1}"
        seen.problems.append(Problem("prefix", reason, op))
    known = seen.order.setdefault(index, op)
    if known != op:
        seen.problems.append(
            Problem(
                "prefix",
                f"P{life[0]}.{life[1]} applied {op} as #{index}, where another replica "
                f"applied {known}: the applied sequences are not prefixes of one sequence",
                op,
            )
        )


def check_history(
    rows: Sequence[Row], factory: Callable[[], object], *, safe: bool = True
) -> HistoryReport:
    """Judge ``rows``; ``factory()`` builds the object as every replica started it.

    ``safe=False`` holds the history to what a group without safe (uniform) delivery
    promises: ``lost`` only for operations acknowledged by a replica alive at the end,
    and ``prefix`` for a replica that was excluded or crashed only up to its last view.
    """
    seen = _gather(rows, safe)
    problems = seen.problems
    sequence = [seen.order[k] for k in range(len(seen.order)) if k in seen.order]
    if len(sequence) != len(seen.order):
        problems.append(Problem("integrity", "some operation numbers were applied by no replica"))
    where: dict[Op, int] = {}
    for k, op in enumerate(sequence):
        if op in where:
            problems.append(Problem("once", f"applied as #{where[op]} and again as #{k}", op))
        where.setdefault(op, k)
    acked = {
        op: (life, row) for op, (life, row) in seen.told.items() if "value" in row or "error" in row
    }
    for op, (life, _) in sorted(acked.items()):
        if not safe and life not in seen.ends:
            continue
        for other, count in sorted(seen.ends.items()):
            if where.get(op, count) >= count:
                problems.append(
                    Problem(
                        "lost",
                        f"acknowledged by P{life[0]}.{life[1]}, missing at "
                        f"P{other[0]}.{other[1]} (which applied {count})",
                        op,
                    )
                )
    problems += _replay(seen, sequence, factory)
    return HistoryReport(tuple(problems), len(sequence), len(acked), len(seen.lives))


def _replay(seen: _Seen, sequence: list[Op], factory: Callable[[], object]) -> list[Problem]:
    """Apply ``sequence`` to a fresh object, views at their places; compare results."""
    if seen.first is None:
        return [Problem("integrity", "no replica started from the beginning: nothing to replay")]
    replica = Replica(factory(), -1, view=View(seen.first[0], seen.first[1]))
    views = sorted((after, vid, members) for vid, (after, members) in seen.views.items())
    problems: list[Problem] = []
    for k in range(len(sequence) + 1):
        while views and views[0][0] <= k:
            _, vid, members = views.pop(0)
            replica.view_changed(ViewChange(View(vid, members), (), ()))
        for life, (count, state) in sorted(seen.states.items()):
            if count == k and take_state(replica.obj)[0] != state:
                reason = f"P{life[0]}.{life[1]}'s state after {k} differs from the replay's"
                problems.append(Problem("results", reason))
        if k == len(sequence):
            break
        op = sequence[k]
        if op not in seen.payloads:
            problems.append(Problem("integrity", f"#{k} was applied but never sent", op))
            break
        outcome = replica.replay(Message(MessageId(op[0], op[1]), op[0], seen.payloads[op]))
        told = seen.told.get(op)
        if told is not None and not _same(outcome, told[1]):
            problems.append(Problem("results", _differs(outcome, told[1]), op))
    return problems


def _same(outcome: Outcome, row: Row) -> bool:
    if "value" in row:
        return outcome.error is None and jsonable(outcome.value) == row["value"]
    if "error" in row:
        return outcome.error is not None and error_data(outcome.error) == row["error"]
    return True  # unknown or withdrawn: nothing was promised


def _differs(outcome: Outcome, row: Row) -> str:
    told = f"value {row['value']!r}" if "value" in row else f"error {row['error']!r}"
    if outcome.error is not None:
        return f"the caller was told {told}; the replay raises {error_data(outcome.error)!r}"
    return f"the caller was told {told}; the replay gives {jsonable(outcome.value)!r}"


def load_factory(spec: str) -> Callable[[], object]:
    """``"package.module:name"`` -> the callable it names; LocalError-like ValueError if not."""
    module, _, name = spec.partition(":")
    if not module or not name:
        raise ValueError(f"a factory is named module:name, not {spec!r}")
    try:
        target: Any = importlib.import_module(module)
        for part in name.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot load {spec}: {exc}") from None
    if not callable(target):
        raise ValueError(f"{spec} is not callable")
    return target  # type: ignore[no-any-return]


def check_files(
    paths: Sequence[str | Path],
    factory: str | Callable[[], object],
    *,
    safe: bool = True,
    out: Callable[[str], None] = print,
) -> int:
    """``mailroom check``'s form: print the verdict; 0 if it holds, 1 if not, 2 on bad input."""
    try:
        make = load_factory(factory) if isinstance(factory, str) else factory
        rows = read_history(paths)
        report = check_history(rows, make, safe=safe)
    except (OSError, ValueError, MailroomError) as exc:
        out(f"error: {exc}")
        return 2
    for problem in report.problems[:20]:
        out(problem.explain())
    if len(report.problems) > 20:
        out(f"... and {len(report.problems) - 20} more")
    out(report.summary())
    return 0 if report.ok else 1


def by_life(rows: Iterable[Row]) -> dict[Life, list[Row]]:
    """The rows of each replica life, in order."""
    out: dict[Life, list[Row]] = defaultdict(list)
    for row in rows:
        out[(row["replica"], row["inc"])].append(row)
    return dict(out)


__all__ = [
    "PROPERTIES",
    "History",
    "HistoryFile",
    "HistoryReport",
    "Problem",
    "by_life",
    "check_files",
    "check_history",
    "load_factory",
    "read_history",
]
