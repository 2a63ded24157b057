"""ShiViz / GoVector logs: reading them with a ShiViz parser regex, and writing them.

Rules, in words (ShiViz's own parser is the reference):

- A log is plain text. A *parser* regular expression, written the way ShiViz
  writes it (JavaScript named groups ``(?<name>...)``), is applied to the whole
  text with ``^``/``$`` matching at line ends, so one record may span lines
  (``(?<event>.*)\\n(?<host>\\S*) (?<clock>.*)`` or the other way round). It must
  name the groups ``host`` and ``clock``; ``event`` is the record's text and any
  other named group is kept in ``fields``.
- Every user regex (parser, delimiter, send and deliver regexes) runs on RE2
  (the ``google-re2`` package), a linear-time engine: no regex can make the
  reader backtrack for ever, and the default GoVector parser is linear on long
  lines. RE2 has no backreferences or lookarounds; a regex using them is a
  ``TraceError`` that says so. Line numbers are counted incrementally, so a log
  reads in time linear in its length.
- An optional *delimiter* regex splits the file into executions; its ``trace``
  group (if any) names each execution. Text before the first delimiter is an
  execution only if it holds records.
- GoVector writes the parser itself on the first line of a log; ``read_shiviz``
  uses that line when no parser is given.
- ``clock`` is a JSON object from host name to a non-negative integer counter,
  read as ShiViz reads it: if it is not JSON as written, escaped quotes
  (``{\\"n1\\":0}``, as TLA+ writes them) are unescaped and it is read again;
  entries equal to 0 are dropped. A record whose clock is not such an object is
  an ``InvalidRecord`` with the reason, never an exception; the rest of the log
  still loads.
- There are no message ids: a receive shows up as a clock that jumps in another
  host's entry. ``to_events`` turns a log into trace events when regexes name
  the sent and delivered message (``send_regex``/``deliver_regex`` with a
  ``message`` group), so FIFO and causal checks can run on it; ``LogNames``
  puts the log's host and message names back into the verdicts.
- ``clock_violations`` checks the clocks themselves (property ``clock``), the
  same rules as ``mailroom.spark.shiviz``.
- ``write_shiviz`` exports any subset of a trace (for instance a violation's
  neighbourhood from ``neighbourhood``) as a log ShiViz opens: the hosts are
  ``P<pid>``, and the clocks are recomputed over the exported events alone
  (each host ticks its own entry by one per exported event; a delivery merges
  its send's clock when the send is exported), so they are always consistent.
  A view installation (group membership) is an event of its process described
  as ``view 3 [0, 2, 4]`` (the view id and its members).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, TextIO

import attrs

from mailroom.core.messages import MessageId
from mailroom.trace.events import MAX_NUMBER, Event, TraceError
from mailroom.trace.jsonl import parse_row
from mailroom.trace.violation import Violation

#: The largest log ``read_shiviz`` reads (ShiViz itself draws about ten thousand events).
MAX_LOG_BYTES = 1 << 28
#: The parser ``write_shiviz`` puts on the first line of the logs it writes.
SHIVIZ_PARSER = r"(?<host>\S*) (?<clock>{.*})\n(?<event>.*)"

_JS_GROUP = re.compile(r"\(\?<(?![=!])")
_JS_BACKREF = re.compile(r"\\k<(\w+)>")
#: Matches a mailroom process (``P3``) or message (``P0#2``) name in a verdict.
_NAME = re.compile(r"\bP(\d+)(?:#(\d+))?\b")


def js_regex(pattern: str) -> str:
    """Convert a JavaScript regex (named groups ``(?<n>``, ``\\k<n>``) to Python's spelling."""
    return _JS_BACKREF.sub(r"(?P=\1)", _JS_GROUP.sub("(?P<", pattern))


def compile_regex(pattern: str, what: str, multiline: bool = True) -> Any:
    """Compile a user regex on RE2 (linear time); TraceError naming ``what`` if it cannot be."""
    import re2

    options = re2.Options()
    options.log_errors = False
    source = js_regex(pattern)
    try:
        return re2.compile(("(?m)" if multiline else "") + source, options)
    except re2.error as exc:
        detail = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        try:
            re.compile(source)
        except re.error as py_exc:
            raise TraceError(f"the {what} is not a regular expression: {py_exc}") from None
        raise TraceError(
            f"the {what} uses a construct the linear-time engine (RE2) does not run, "
            f"such as a backreference or lookaround: {detail}"
        ) from None


def compile_parser(pattern: str) -> Any:
    """Compile a ShiViz parser; TraceError if it is not a regex or lacks host/clock groups."""
    regex = compile_regex(pattern, "parser")
    missing = [g for g in ("host", "clock") if g not in regex.groupindex]
    if missing:
        raise TraceError(f"the parser must name the groups 'host' and 'clock' (missing {missing})")
    return regex


@attrs.frozen
class ShivizEvent:
    """One record: ``line`` is where it starts (from 1), ``index`` its position at its host."""

    execution: str
    host: str
    clock: dict[str, int] = attrs.field(eq=False, hash=False)
    text: str
    line: int
    index: int
    fields: dict[str, str] = attrs.field(factory=dict, eq=False, hash=False)


@attrs.frozen
class InvalidRecord:
    """A record that matched the parser but could not be used, and why."""

    execution: str
    line: int
    text: str
    reason: str


@attrs.frozen
class ShivizLog:
    events: list[ShivizEvent]
    invalid: list[InvalidRecord]
    executions: tuple[str, ...]

    def hosts(self) -> list[str]:
        return sorted({e.host for e in self.events})


def _clock_json(raw: str) -> Any:
    """A clock's JSON as ShiViz reads it: as written, else with ``\\"`` unescaped."""
    try:
        return parse_row(raw)
    except TraceError as exc:
        if not str(exc).startswith("not JSON ("):
            raise TraceError(f"clock is {exc}") from None
        try:
            return parse_row(raw.replace('\\"', '"'))
        except TraceError:
            raise TraceError(f"clock is {exc}") from None


def _parse_clock(raw: str) -> dict[str, int]:
    """A clock as ShiViz reads it (``_clock_json``); zero entries dropped.

    Counters are 64-bit (as Spark reads them); a number of thousands of digits or a
    host name that is not text (a lone surrogate escape) is a reason, never an error."""
    clock = _clock_json(raw)
    if not isinstance(clock, dict) or not clock:
        raise TraceError("clock must be a non-empty JSON object")
    for host, value in clock.items():
        if type(value) is not int or value < 0:
            raise TraceError(f"clock entry {host!r} must be a non-negative integer")
        if value > MAX_NUMBER:
            raise TraceError(f"clock entry {host!r} is above 2**63 - 1")
    return {host: value for host, value in clock.items() if value}


def parse_shiviz(text: str, parser: str, delimiter: str | None = None) -> ShivizLog:
    """Parse a whole log; bad records go to ``invalid``, bad regexes raise TraceError."""
    regex = compile_parser(parser)
    if delimiter:
        delim = compile_regex(delimiter, "delimiter")
        cuts = list(delim.finditer(text))
        labels = ["", *((cut.groupdict().get("trace") or str(k)) for k, cut in enumerate(cuts, 1))]
        bounds = list(zip(labels, [0, *(c.end() for c in cuts)], strict=True))
        ends = [c.start() for c in cuts] + [len(text)]
    else:
        bounds = [("", 0)]
        ends = [len(text)]
    events: list[ShivizEvent] = []
    invalid: list[InvalidRecord] = []
    executions: list[str] = []
    pos, line = 0, 1  # line numbers counted incrementally: matches come in text order
    for (label, start), end in zip(bounds, ends, strict=True):
        counters: dict[str, int] = {}
        found = False
        for match in regex.finditer(text, start, end):
            found = True
            line += text.count("\n", pos, match.start())
            pos = match.start()
            groups = {k: v for k, v in match.groupdict().items() if v is not None}
            host = groups.get("host", "")
            body = groups.get("event", "")
            try:
                if not host:
                    raise TraceError("empty host")
                clock = _parse_clock(groups.get("clock", ""))
            except TraceError as exc:
                invalid.append(InvalidRecord(label, line, match.group(0), str(exc)))
                continue
            counters[host] = counters.get(host, 0) + 1
            extra = {k: v for k, v in groups.items() if k not in ("host", "clock", "event")}
            events.append(ShivizEvent(label, host, clock, body, line, counters[host], extra))
        if found:
            executions.append(label)
    return ShivizLog(events, invalid, tuple(executions))


def read_shiviz(
    path: str | Path, parser: str | None = None, delimiter: str | None = None
) -> ShivizLog:
    """Read a log file; without ``parser``, its first line must be the parser (GoVector).

    A log is read whole, so one larger than ``MAX_LOG_BYTES`` is refused (TraceError),
    as is one that is not UTF-8 text."""
    with open(path, "rb") as src:
        data = src.read(MAX_LOG_BYTES + 1)
    if len(data) > MAX_LOG_BYTES:
        raise TraceError(f"{path}: larger than {MAX_LOG_BYTES:,} bytes (a log is read whole)")
    try:
        text = data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError as exc:
        raise TraceError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    if parser is None:
        first, _, rest = text.partition("\n")
        try:
            compile_parser(first.strip())
        except TraceError:
            raise TraceError(
                f"{path}: no parser given and the first line is not a ShiViz parser"
            ) from None
        parser, text = first.strip(), "\n" + rest
    return parse_shiviz(text, parser, delimiter)


@attrs.frozen
class LogNames:
    """The log's names for mailroom's pids and message ids, to put back into verdicts."""

    hosts: tuple[str, ...]
    messages: dict[tuple[str, MessageId], str] = attrs.field(eq=False)

    def process(self, pid: int) -> str:
        return self.hosts[pid] if 0 <= pid < len(self.hosts) else f"P{pid}"

    def rename(self, run: str, reason: str) -> str:
        """``reason`` with ``P3`` and ``P0#2`` replaced by the log's host and message names."""

        def sub(m: re.Match[str]) -> str:
            pid = int(m.group(1))
            if m.group(2) is None:
                return self.process(pid)
            return self.messages.get((run, MessageId(pid, int(m.group(2)))), m.group(0))

        return _NAME.sub(sub, reason)


@attrs.frozen
class LogEvents:
    """What ``to_events`` found: the events, the names, and the records it could not use."""

    events: list[Event]
    names: LogNames
    unmatched: list[InvalidRecord]


def to_events(
    log: ShivizLog, send_regex: str, deliver_regex: str
) -> tuple[list[Event], dict[str, int]]:
    """The events of ``log_events`` and the host-to-pid map."""
    found = log_events(log, send_regex, deliver_regex)
    return found.events, {h: i for i, h in enumerate(found.names.hosts)}


def log_events(log: ShivizLog, send_regex: str, deliver_regex: str) -> LogEvents:
    """Trace events for the records whose text names a sent or delivered message.

    Both regexes are searched in a record's ``event`` text and must have a
    ``message`` group; a regex that matches no record is a TraceError saying so.
    Hosts become pids in sorted order; a message's id is (pid of its sender, k)
    for its k-th send at that host, and its name is the ``message`` group's text.
    Deliveries whose message no send names, and a second send of a name already
    sent in the same execution, are ``unmatched`` records (reported, not checked).
    The ShiViz clock becomes ``vc``.
    """
    send_re = compile_regex(send_regex, "send regex", multiline=False)
    deliver_re = compile_regex(deliver_regex, "deliver regex", multiline=False)
    for name, rx in (("send", send_re), ("deliver", deliver_re)):
        if "message" not in rx.groupindex:
            raise TraceError(f"the {name} regex must name a group 'message'")
    hosts = tuple(log.hosts())
    pids = {h: i for i, h in enumerate(hosts)}
    dest = tuple(range(len(hosts)))
    ids: dict[tuple[str, str], MessageId] = {}
    names: dict[tuple[str, MessageId], str] = {}
    counts: dict[tuple[str, str], int] = {}
    events: list[Event] = []
    unmatched: list[InvalidRecord] = []
    delivered: list[tuple[ShivizEvent, str]] = []
    for e in log.events:
        sm = send_re.search(e.text)
        if sm is not None:
            text = sm.group("message")
            key = (e.execution, text)
            if key in ids:
                why = f"{e.host} sends {text!r} again; messages are told apart by name"
                unmatched.append(InvalidRecord(e.execution, e.line, e.text, why))
                continue
            p = pids[e.host]
            counts[(e.execution, e.host)] = counts.get((e.execution, e.host), 0) + 1
            ids[key] = MessageId(p, counts[(e.execution, e.host)])
            names[(e.execution, ids[key])] = text
            vc = {pids[h]: v for h, v in e.clock.items() if h in pids}
            events.append(Event(e.execution, p, e.index, "send", ids[key], p, dest, vc))
            continue
        dm = deliver_re.search(e.text)
        if dm is not None:
            delivered.append((e, dm.group("message")))
    if not ids:
        raise TraceError("the send regex matched no record")
    if not delivered:
        raise TraceError("the deliver regex matched no record")
    for e, text in delivered:
        mid = ids.get((e.execution, text))
        if mid is None:
            why = f"{e.host} delivered {text!r}, which no record matched by the send regex sent"
            unmatched.append(InvalidRecord(e.execution, e.line, e.text, why))
            continue
        vc = {pids[h]: v for h, v in e.clock.items() if h in pids}
        p = pids[e.host]
        events.append(Event(e.execution, p, e.index, "deliver", mid, mid.origin, dest, vc))
    unmatched.sort(key=lambda r: (r.execution, r.line))
    return LogEvents(events, LogNames(hosts, names), unmatched)


def clock_violations(log: ShivizLog) -> list[Violation]:
    """The log's clock violations (property ``clock``), as ``mailroom.spark.shiviz`` finds them.

    Per execution: every record's clock has an entry for its own host; ordered
    by that entry, a host's own entry steps by one from 1 and no entry goes down;
    an entry ``h: v`` for another host names an event of h with own entry v that
    is in the log, whose whole clock is entrywise at most this one. Positions are
    line numbers; processes are pids in sorted host order.
    """
    pids = {h: i for i, h in enumerate(log.hosts())}
    found: list[Violation] = []

    def add(e: ShivizEvent, reason: str) -> None:
        found.append(Violation("clock", e.execution, (pids[e.host],), (), (e.line,), reason))

    at: dict[tuple[str, str, int], list[ShivizEvent]] = {}
    own: dict[tuple[str, str], list[ShivizEvent]] = {}
    for e in log.events:
        if e.host not in e.clock:
            add(e, f"line {e.line}: {e.host} has no entry of its own in its clock")
            continue
        at.setdefault((e.execution, e.host, e.clock[e.host]), []).append(e)
        own.setdefault((e.execution, e.host), []).append(e)
    for hist in own.values():
        hist.sort(key=lambda e: (e.clock[e.host], e.line))
        prev: ShivizEvent | None = None
        for e in hist:
            before = 0 if prev is None else prev.clock[prev.host]
            if e.clock[e.host] != before + 1:
                add(
                    e,
                    f"line {e.line}: {e.host}'s own entry steps from {before} to {e.clock[e.host]}",
                )
            if prev is not None and any(v > e.clock.get(k, 0) for k, v in prev.clock.items()):
                add(e, f"line {e.line}: an entry of {e.host}'s clock goes down")
            prev = e
    for e in log.events:
        for h, v in e.clock.items():
            if h == e.host:
                continue
            named = at.get((e.execution, h, v), [])
            if not named:
                where = f"line {e.line}: {e.host}'s clock names event {v} of {h}"
                add(e, f"{where}, which is not in the log")
            for other in named:
                if any(x > e.clock.get(k, 0) for k, x in other.clock.items()):
                    add(
                        e,
                        f"line {e.line}: {e.host} knows event {v} of {h} but not all that it knew",
                    )
    found.sort(key=lambda v: (v.run, v.positions, v.processes, v.reason))
    return found


def neighbourhood(
    events: Sequence[Event],
    run: str,
    processes: Iterable[int],
    messages: Iterable[MessageId],
    context: int = 3,
) -> list[Event]:
    """A violation's causal neighbourhood, small enough to draw.

    The sends of the witness messages and all their deliveries, plus, at each
    witness process, the ``context`` events before and after each of its
    events above, plus the sends of the messages delivered among those.
    """
    in_run = [e for e in events if e.run == run and e.kind != "receive"]
    msgs = set(messages)
    procs = set(processes)
    core = [e for e in in_run if e.kind != "view" and e.message in msgs]
    keep = {(e.process, e.seq) for e in core}
    by_proc: dict[int, list[Event]] = {}
    for e in in_run:
        by_proc.setdefault(e.process, []).append(e)
    for h in by_proc.values():
        h.sort(key=lambda e: e.seq)
    for p in procs:
        hist = by_proc.get(p, [])
        marks = [i for i, e in enumerate(hist) if (e.process, e.seq) in keep]
        for i in marks:
            for e in hist[max(0, i - context) : i + context + 1]:
                keep.add((e.process, e.seq))
    chosen = [e for e in in_run if (e.process, e.seq) in keep]
    delivered = {e.message for e in chosen if e.kind == "deliver"}
    chosen += [
        e
        for e in in_run
        if e.kind == "send" and e.message in delivered and (e.process, e.seq) not in keep
    ]
    return sorted(chosen, key=lambda e: (e.process, e.seq))


def shiviz_clocks(events: Sequence[Event]) -> list[tuple[Event, dict[int, int]]]:
    """Consistent vector clocks over exactly ``events`` (sends and deliveries), in a
    linearization ShiViz can replay: an event comes after its process's earlier
    events and a delivery after its send (when the send is among ``events``)."""
    hist: dict[int, list[Event]] = {}
    for e in events:
        if e.kind != "receive":
            hist.setdefault(e.process, []).append(e)
    for h in hist.values():
        h.sort(key=lambda e: e.seq)
    sends = {e.message for h in hist.values() for e in h if e.kind == "send"}
    clocks: dict[MessageId, dict[int, int]] = {}
    now: dict[int, dict[int, int]] = {p: {} for p in hist}
    cursor = dict.fromkeys(hist, 0)
    out: list[tuple[Event, dict[int, int]]] = []
    progress = True
    while progress:
        progress = False
        for p in sorted(hist):
            h = hist[p]
            while cursor[p] < len(h):
                e = h[cursor[p]]
                vc = now[p]
                if e.kind == "deliver" and e.message in sends:
                    if e.message not in clocks:
                        break
                    for k, v in clocks[e.message].items():
                        vc[k] = max(v, vc.get(k, 0))
                vc[p] = vc.get(p, 0) + 1
                if e.kind == "send":
                    clocks.setdefault(e.message, dict(vc))
                out.append((e, dict(vc)))
                cursor[p] += 1
                progress = True
    # whatever is left waits for a send that comes later in its own process (impossible
    # in a real run): export it without the merge so nothing is silently dropped
    for p in sorted(hist):
        for e in hist[p][cursor[p] :]:
            now[p][p] = now[p].get(p, 0) + 1
            out.append((e, dict(now[p])))
    return out


def _describe(e: Event) -> str:
    if e.kind == "view":
        return f"view {e.view} {list(e.dest)}"
    if e.kind == "send":
        return f"send {e.message} to {list(e.dest)}"
    return f"deliver {e.message} from P{e.sender}"


def write_shiviz(events: Iterable[Event], out: str | Path | TextIO) -> int:
    """Write ``events`` (any subset of a trace) as a ShiViz log; return the record count.

    The first line is the parser (``SHIVIZ_PARSER``), then a blank line, then one
    two-line record per send, delivery or view installation ("view 3 [0, 2, 4]": the
    process installs view 3 with members 0, 2 and 4); each run becomes one execution,
    separated by ``=== run ===`` lines (ShiViz delimiter ``^=== (?<trace>.*) ===$``).
    """
    by_run: dict[str, list[Event]] = {}
    for e in events:
        by_run.setdefault(e.run, []).append(e)
    lines = [SHIVIZ_PARSER, ""]
    count = 0
    for run in sorted(by_run):
        if len(by_run) > 1:
            lines.append(f"=== {run} ===")
        for e, vc in shiviz_clocks(by_run[run]):
            clock = {f"P{k}": v for k, v in sorted(vc.items())}
            lines.append(f"P{e.process} {json.dumps(clock)}")
            lines.append(_describe(e))
            count += 1
    text = "\n".join(lines) + "\n"
    if isinstance(out, str | Path):
        Path(out).write_text(text, encoding="utf-8")
    else:
        out.write(text)
    return count


#: The delimiter that splits the multi-run logs ``write_shiviz`` writes.
SHIVIZ_DELIMITER = r"^=== (?<trace>.*) ===$"


def load_parsers(path: str | Path) -> dict[str, dict[str, Any]]:
    """Read a ``parsers.json`` (file name -> {"parser", "delimiter"})."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise TraceError(f"{path}: expected a JSON object")
    return data
