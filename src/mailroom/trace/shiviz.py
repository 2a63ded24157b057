"""ShiViz / GoVector logs: reading them with a ShiViz parser regex, and writing them.

Rules, in words:

- A log is plain text. A *parser* regular expression, written the way ShiViz
  writes it (JavaScript named groups ``(?<name>...)``), is applied to the whole
  text with ``^``/``$`` matching at line ends, so one record may span two lines
  (``(?<event>.*)\\n(?<host>\\S*) (?<clock>.*)`` or the other way round). It must
  name the groups ``host`` and ``clock``; ``event`` is the record's text and any
  other named group is kept in ``fields``.
- An optional *delimiter* regex splits the file into executions; its ``trace``
  group (if any) names each execution. Text before the first delimiter is an
  execution only if it holds records.
- GoVector writes the parser itself on the first line of a log; ``read_shiviz``
  uses that line when no parser is given.
- ``clock`` is a JSON object from host name to a positive integer counter. A
  record whose clock is not such an object is an ``InvalidRecord`` with the
  reason, never an exception; the rest of the log still loads.
- There are no message ids: a receive shows up as a clock that jumps in another
  host's entry. ``to_events`` turns a log into trace events when regexes name
  the sent and delivered message (``send_regex``/``deliver_regex`` with a
  ``message`` group), so FIFO/causal checks can run on it.
- ``write_shiviz`` exports any subset of a trace (for instance a violation's
  neighbourhood from ``neighbourhood``) as a log ShiViz opens: the hosts are
  ``P<pid>``, and the clocks are recomputed over the exported events alone
  (each host ticks its own entry by one per exported event; a delivery merges
  its send's clock when the send is exported), so they are always consistent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, TextIO

import attrs

from mailroom.core.messages import MessageId
from mailroom.trace.events import Event, TraceError

#: The parser ``write_shiviz`` puts on the first line of the logs it writes.
SHIVIZ_PARSER = r"(?<host>\S*) (?<clock>{.*})\n(?<event>.*)"

_JS_GROUP = re.compile(r"\(\?<(?![=!])")
_JS_BACKREF = re.compile(r"\\k<(\w+)>")


def js_regex(pattern: str) -> str:
    """Convert a JavaScript regex (named groups ``(?<n>``, ``\\k<n>``) to Python's spelling."""
    return _JS_BACKREF.sub(r"(?P=\1)", _JS_GROUP.sub("(?P<", pattern))


def compile_parser(pattern: str) -> re.Pattern[str]:
    """Compile a ShiViz parser; TraceError if it is not a regex or lacks host/clock groups."""
    try:
        regex = re.compile(js_regex(pattern), re.MULTILINE)
    except re.error as exc:
        raise TraceError(f"the parser is not a regular expression: {exc}") from None
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


def _parse_clock(raw: str) -> dict[str, int]:
    try:
        clock = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise TraceError(f"clock is not JSON ({exc.msg})") from None
    if not isinstance(clock, dict) or not clock:
        raise TraceError("clock must be a non-empty JSON object")
    for host, value in clock.items():
        if type(value) is not int or value < 1:
            raise TraceError(f"clock entry {host!r} must be a positive integer")
    return clock


def parse_shiviz(text: str, parser: str, delimiter: str | None = None) -> ShivizLog:
    """Parse a whole log; bad records go to ``invalid``, bad regexes raise TraceError."""
    regex = compile_parser(parser)
    segments: list[tuple[str, int]] = []  # (execution label, start offset)
    if delimiter:
        try:
            delim = re.compile(js_regex(delimiter), re.MULTILINE)
        except re.error as exc:
            raise TraceError(f"the delimiter is not a regular expression: {exc}") from None
        cuts = list(delim.finditer(text))
        segments.append(("", 0))
        for k, cut in enumerate(cuts, 1):
            label = cut.groupdict().get("trace") or str(k)
            segments.append((label, cut.end()))
        bounds = [(label, start) for label, start in segments]
        ends = [c.start() for c in cuts] + [len(text)]
    else:
        bounds = [("", 0)]
        ends = [len(text)]
    events: list[ShivizEvent] = []
    invalid: list[InvalidRecord] = []
    executions: list[str] = []
    for (label, start), end in zip(bounds, ends, strict=True):
        counters: dict[str, int] = {}
        found = False
        for match in regex.finditer(text, start, end):
            found = True
            line = text.count("\n", 0, match.start()) + 1
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
    """Read a log file; without ``parser``, its first line must be the parser (GoVector)."""
    text = Path(path).read_text(encoding="utf-8")
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


def to_events(
    log: ShivizLog,
    send_regex: str,
    deliver_regex: str,
) -> tuple[list[Event], dict[str, int]]:
    """Trace events for the records whose text names a sent or delivered message.

    Both regexes are searched in a record's ``event`` text and must have a
    ``message`` group; records matching neither are left out. Hosts become pids
    in sorted order; a message's id is (pid of its sender, k) for its k-th send.
    The ShiViz clock becomes ``vc``. Returns the events and the host-to-pid map.
    """
    send_re = re.compile(js_regex(send_regex))
    deliver_re = re.compile(js_regex(deliver_regex))
    for name, rx in (("send", send_re), ("deliver", deliver_re)):
        if "message" not in rx.groupindex:
            raise TraceError(f"the {name} regex must name a group 'message'")
    pids = {h: i for i, h in enumerate(log.hosts())}
    ids: dict[tuple[str, str], MessageId] = {}
    counts: dict[str, int] = {}
    events: list[Event] = []
    for e in log.events:
        if any(h not in pids for h in e.clock):
            continue
        vc = {pids[h]: v for h, v in e.clock.items()}
        p = pids[e.host]
        sm = send_re.search(e.text)
        dm = deliver_re.search(e.text)
        if sm is not None:
            key = (e.execution, sm.group("message"))
            counts[e.host] = counts.get(e.host, 0) + 1
            ids[key] = MessageId(p, counts[e.host])
            dest = tuple(range(len(pids)))
            events.append(Event(e.execution, p, e.index, "send", ids[key], p, dest, vc))
        elif dm is not None:
            key = (e.execution, dm.group("message"))
            mid = ids.get(key, MessageId(len(pids), 0))  # never sent: an impossible sender
            dest = tuple(range(len(pids)))
            events.append(Event(e.execution, p, e.index, "deliver", mid, mid.origin, dest, vc))
    return events, pids


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
    core = [e for e in in_run if e.message in msgs]
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
    if e.kind == "send":
        return f"send {e.message} to {list(e.dest)}"
    return f"deliver {e.message} from P{e.sender}"


def write_shiviz(events: Iterable[Event], out: str | Path | TextIO) -> int:
    """Write ``events`` (any subset of a trace) as a ShiViz log; return the record count.

    The first line is the parser (``SHIVIZ_PARSER``), then a blank line, then one
    two-line record per send or delivery; each run becomes one execution,
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
