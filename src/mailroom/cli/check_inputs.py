"""What ``mailroom check`` reads, and how it words what goes wrong: formats, files that
cannot be traces, ShiViz logs and their parsers, and one-line errors.

Every message about bad input is one line on stderr (``fail``, exit code 2); what the
check prints goes through ``say``, which never fails on text a terminal cannot show.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from mailroom.cli import options
from mailroom.cli.options import first_line as first_line
from mailroom.trace.events import Event, TraceError
from mailroom.trace.records import InvalidRow

if TYPE_CHECKING:  # read only for ShiViz logs
    from mailroom.trace.shiviz import ShivizLog


def fail(reason: str) -> int:
    """Say why the input cannot be used, on one line of stderr; the exit code (2)."""
    return options.fail("check", reason)


def say(*lines: str) -> None:
    """Print lines on stdout; characters it cannot encode are shown as escapes."""
    encoding = sys.stdout.encoding or "utf-8"
    for line in lines:
        print(line.encode(encoding, "backslashreplace").decode(encoding))


def progress(text: str) -> None:
    """A phase of the check, on stderr when it is a terminal (silent otherwise)."""
    if sys.stderr.isatty():
        print(f"mailroom check: {text}", file=sys.stderr, flush=True)


def format_of(path: str, fmt: str) -> str:
    """The format of ``path``: ``fmt``, or for "auto" what its name or kind says."""
    if fmt != "auto":
        return fmt
    if path.endswith(".parquet") or Path(path).is_dir():
        return "parquet"
    if path.endswith(".log"):
        return "shiviz"
    return "jsonl"


def unreadable(path: str, fmt: str) -> str | None:
    """Why ``path`` cannot be a trace of format ``fmt``, or None."""
    p = Path(path)
    try:
        if not p.exists():
            return f"cannot read {path}: no such file"
        if p.is_dir():
            if fmt == "parquet":
                return None  # a Parquet dataset directory, for Spark
            return f"cannot read {path}: it is a directory"
        if not p.is_file():
            return f"cannot read {path}: not a regular file"
        with open(p, "rb"):
            pass
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror or exc}"
    return None


def size(paths: Sequence[str]) -> int:
    """The bytes of ``paths`` (directories: every file under them)."""
    total = 0
    for path in map(Path, paths):
        files = path.rglob("*") if path.is_dir() else [path]
        total += sum(f.stat().st_size for f in files if f.is_file())
    return total


def has_rows(path: str) -> bool:
    """Whether a JSON Lines file has a line that is neither blank nor the header."""
    try:
        with open(path, "rb") as src:
            for raw in iter(lambda: src.readline(1 << 16), b""):
                if raw.strip() and not raw.lstrip().startswith(b'{"header"'):
                    return True
    except OSError:
        return True  # the reader will say what is wrong
    return False


def read_events(path: str, fmt: str) -> list[Event]:
    """A JSON Lines or Parquet trace's events (the reference readers)."""
    if fmt == "parquet":
        from mailroom.trace.parquet import read_parquet

        return read_parquet(path)
    from mailroom.trace.jsonl import read_jsonl

    return read_jsonl(path)


def bad_row(where: str, reason: str, paths: Sequence[str], fmt: str) -> str:
    """The first row Spark rejected (``SOURCE:LINE``) as the reference reader words it:
    FILE:LINE: reason, with the file named as the user named it."""
    reason = reason.removeprefix("malformed clock: ")
    source, _, line = where.rpartition(":")
    if not source or not line.isdigit():
        return f"{where}: {reason}"
    for path in paths:  # Spark saw the path absolute, or as a URI
        if source.endswith(str(Path(path).resolve())):
            source = path
            break
    if fmt == "parquet":
        return f"{source}: row {line}: {reason}"
    return f"{source}:{line}: {reason}"


def _shiviz_spec(path: Path, parser: str | None, delimiter: str | None) -> tuple[Any, Any]:
    """The parser and delimiter for ``path``: the options, else parsers.json beside it."""
    if parser is not None:
        return parser, delimiter
    spec_file = path.parent / "parsers.json"
    if spec_file.is_file():
        try:
            spec = json.loads(spec_file.read_text(encoding="utf-8")).get(path.name)
        except (ValueError, AttributeError, OSError, RecursionError):
            spec = None
        if isinstance(spec, dict) and isinstance(spec.get("parser"), str):
            return spec["parser"], delimiter or spec.get("delimiter")
    return None, delimiter  # GoVector: the first line is the parser


@attrs.frozen
class Logs:
    """ShiViz logs read as one: the log, and the file each execution came from."""

    log: ShivizLog
    sources: dict[str, str]
    #: the source of a record whose execution names no file (all the files)
    source: str = "log"

    def invalid(self, records: Sequence[Any]) -> list[InvalidRow]:
        """Unusable records as invalid rows, each named by its file and line."""
        where = {r.execution: self.sources.get(r.execution, self.source) for r in records}
        return [
            InvalidRow(where[r.execution], r.line, r.execution, None, None, r.reason)
            for r in records
        ]

    def head(self, engine: str, checked: Sequence[str]) -> tuple[str, str]:
        """What was checked, on which engine, and what ShiViz logs allow to check."""
        log = self.log
        regexes = (
            "" if "causal" in checked else "; fifo and causal need --send-regex/--deliver-regex"
        )
        return (
            f"checked {len(log.events)} ShiViz records in {len(log.executions)} execution(s), "
            f"{len(log.hosts())} hosts, on {engine}",
            f"checked: {', '.join(checked)} (ShiViz logs have no message ids; "
            f"total, integrity and liveness need them{regexes})",
        )


def read_logs(paths: Sequence[str], parser: str | None, delimiter: str | None) -> Logs | str:
    """All ShiViz logs of ``paths`` as one (executions named ``FILE:`` first when there are
    several), or a one-line error."""
    from mailroom.trace.shiviz import ShivizLog, read_shiviz

    events, invalid, executions = [], [], []
    sources: dict[str, str] = {}
    many = len(paths) > 1
    for path in map(Path, paths):
        spec_parser, spec_delimiter = _shiviz_spec(path, parser, delimiter)
        try:
            log = read_shiviz(path, spec_parser, spec_delimiter)
        except (TraceError, OSError) as exc:
            return f"cannot read {path}: {exc}"
        prefix = f"{path.name}:" if many else ""
        events += [attrs.evolve(e, execution=prefix + e.execution) for e in log.events]
        invalid += [attrs.evolve(r, execution=prefix + r.execution) for r in log.invalid]
        executions += [prefix + x for x in log.executions]
        sources.update({prefix + x: str(path) for x in log.executions})
    if not events and not invalid:
        return f"the parser matched no record in {', '.join(paths)}"
    return Logs(ShivizLog(events, invalid, tuple(executions)), sources, ",".join(paths))
