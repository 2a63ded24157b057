"""Readers for histories as people have them, each giving ``Op`` rows in file order.

- ``edn``: Jepsen's history, one EDN map per line,
  ``{:process 0, :type :invoke, :f :read, :value nil}`` (``:key`` optional);
- ``log``: Jepsen's older console log, ``INFO jepsen.util - 3 :invoke :cas [1 4]``
  (lines without ``jepsen.util -`` are skipped: a console log has other lines);
- ``jsonl``: JSON Lines as mailroom's clients write them, one object a line:
  ``{"process": 3, "type": "invoke", "f": "cas", "key": "k1", "value": [1, 4],
  "time": 0.25}`` (``key`` and ``time`` optional; ``time`` in seconds, informational).

Rows of the nemesis (``:process :nemesis``) are skipped. A row that cannot be read
raises ``HistoryError`` naming its file and line; blank lines are skipped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Hashable, Iterable, Iterator
from pathlib import Path
from typing import Any

from mailroom.linearizable.edn import EdnError, Keyword, read_edn
from mailroom.linearizable.history import TYPES, HistoryError, Op, freeze

FORMATS = ("auto", "edn", "log", "jsonl")
#: the longest line a reader accepts (characters)
MAX_LINE = 1 << 20
_LOG = re.compile(r"jepsen\.util\s+-\s+(\S+)\s+(:\S+)\s+(:\S+)\s*(.*?)\s*$")


def _name(value: Any, what: str) -> str:
    """A keyword's or string's name."""
    if type(value) is str and value:
        return value
    if isinstance(value, Keyword):
        return value.name
    if isinstance(value, str) and value:
        return value
    raise ValueError(f"{what} must be a keyword or a non-empty string, not {value!r}")


def _process(value: Any) -> Hashable | None:
    """The process, or None for the nemesis (its rows are skipped)."""
    if isinstance(value, Keyword):
        return None if value.name == "nemesis" else value.name
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"process must be an integer or a name, not {value!r}")
    return None if value == "nemesis" else value


def _time(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"time must be a number, not {value!r}")
    return float(value)


def row_op(row: Any, line: int) -> Op | None:
    """The op of one decoded row (a map whose keys are names), None for the nemesis."""
    if not isinstance(row, dict):
        raise ValueError("a row must be a map")
    names = row
    if not all(type(k) is str for k in row):
        names = {_name(k, "a field name"): v for k, v in row.items()}
    for field in ("process", "type", "f"):
        if field not in names:
            raise ValueError(f"the row has no {field}")
    process = _process(names["process"])
    if process is None:
        return None
    kind = _name(names["type"], "type")
    if kind not in TYPES:
        raise ValueError(f"type must be one of {', '.join(TYPES)}, not {kind!r}")
    f = _name(names["f"], "f")
    value, key = freeze(names.get("value")), freeze(names.get("key"))
    return Op(process, kind, f, value, key, line, _time(names.get("time")))


def _edn_row(text: str, line: int) -> Op | None:
    return row_op(read_edn(text), line)


def _json_row(text: str, line: int) -> Op | None:
    return row_op(json.loads(text), line)


def _log_row(text: str, line: int) -> Op | None:
    if "jepsen.util" not in text:
        return None
    match = _LOG.search(text)
    if match is None:
        raise ValueError("a jepsen.util line without 'PROCESS :TYPE :F VALUE'")
    process, kind, f, value = match.groups()
    fields = [Keyword("process"), read_edn(process), Keyword("type"), read_edn(kind)]
    fields += [Keyword("f"), read_edn(f), Keyword("value"), read_edn(value or "nil")]
    return row_op(dict(zip(fields[::2], fields[1::2], strict=True)), line)


ROW_READERS: dict[str, Callable[[str, int], Op | None]] = {
    "edn": _edn_row,
    "log": _log_row,
    "jsonl": _json_row,
}


def sniff(first: str) -> str:
    """The format of a history whose first non-blank line is ``first``."""
    text = first.strip()
    if text.startswith("{:") or text.startswith("{ :"):
        return "edn"
    if text.startswith("{"):
        return "jsonl"
    return "log"


def parse_lines(
    lines: Iterable[str], fmt: str, *, source: str = "", start: int = 1
) -> Iterator[Op]:
    """The ops of ``lines`` (numbered from ``start``) in format ``fmt``."""
    read = ROW_READERS[fmt]
    for number, text in enumerate(lines, start):
        if not text.strip():
            continue
        if len(text) > MAX_LINE:
            raise HistoryError(
                f"line longer than {MAX_LINE} characters", line=number, source=source
            )
        try:
            op = read(text, number)
        except (EdnError, ValueError, TypeError) as exc:
            raise HistoryError(f"cannot read the row: {exc}", line=number, source=source) from None
        if op is not None:
            yield op


def format_of(path: str | Path, fmt: str = "auto") -> str:
    """The format ``fmt`` names, or for "auto" the one the file's first line shows."""
    if fmt != "auto":
        return fmt
    suffix = Path(path).suffix.lower()
    if suffix == ".edn":
        return "edn"
    if suffix in (".jsonl", ".json", ".ndjson"):
        return "jsonl"
    with open(path, encoding="utf-8", errors="replace") as fh:
        for text in fh:
            if text.strip():
                return sniff(text[:MAX_LINE])
    return "jsonl"


def read_history(path: str | Path, fmt: str = "auto") -> list[Op]:
    """Every op of the history file ``path`` (HistoryError on a bad row, OSError if it
    cannot be read)."""
    kind = format_of(path, fmt)
    if kind not in ROW_READERS:
        raise HistoryError(f"unknown history format {kind!r}; use one of {', '.join(FORMATS)}")
    with open(path, encoding="utf-8") as fh:
        try:
            return list(parse_lines(fh, kind, source=str(path)))
        except UnicodeDecodeError as exc:
            raise HistoryError(f"{path}: not UTF-8 text ({exc.reason})") from None


def parse_history(text: str, fmt: str) -> list[Op]:
    """The ops of a history given as text (``fmt`` is edn, log or jsonl)."""
    kind = sniff(next((t for t in text.splitlines() if t.strip()), "")) if fmt == "auto" else fmt
    if kind not in ROW_READERS:
        raise HistoryError(f"unknown history format {kind!r}; use one of {', '.join(FORMATS)}")
    return list(parse_lines(text.splitlines(), kind))
