"""A small, bounded reader for the EDN that Jepsen histories are written in.

Only data, never code: ``nil``, ``true``, ``false``, integers, floats, strings,
keywords (read as ``Keyword``), symbols (read as ``Keyword`` too), vectors and lists
(read as tuples), sets (frozensets) and maps (dicts at the top, tuples of pairs when
nested, so that a value stays hashable). Tagged literals (``#inst "..."``) read as the
value they tag; comments (``;``) and commas are whitespace. Anything else, a text
longer than ``MAX_CHARS`` or nested deeper than ``MAX_DEPTH``, raises ``EdnError``.
"""

from __future__ import annotations

import re
from typing import Any

import attrs

from mailroom.core.errors import MailroomError

#: the longest text one call reads (a history row is far shorter)
MAX_CHARS = 1 << 20
#: the deepest nesting of collections accepted
MAX_DEPTH = 64

_ATOM = re.compile(r"[^\s,()\[\]{}\"]+")
_INT = re.compile(r"[+-]?\d+N?")
_FLOAT = re.compile(r"[+-]?\d+(\.\d*)?([eE][+-]?\d+)?M?")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "b": "\b", "f": "\f"}
_CLOSE = {"(": ")", "[": "]", "{": "}", "#{": "}"}


class EdnError(MailroomError):
    """The text is not in the EDN subset this reader accepts."""


@attrs.frozen(order=True)
class Keyword:
    """An EDN keyword such as ``:read`` (``name`` without the colon)."""

    name: str

    def __str__(self) -> str:
        return f":{self.name}"


def read_edn(text: str) -> Any:
    """The one EDN value of ``text`` (EdnError if there is not exactly one)."""
    if len(text) > MAX_CHARS:
        raise EdnError(f"EDN text longer than {MAX_CHARS} characters")
    reader = _Reader(text)
    value = reader.value(0)
    if reader.skip() < len(text):
        raise EdnError(f"unexpected text after the value at character {reader.pos}")
    return value


class _Reader:
    """A cursor over one text; each method reads one construct from ``pos``."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def skip(self) -> int:
        """Move past whitespace, commas and comments; the new position."""
        text, pos = self.text, self.pos
        while pos < len(text):
            ch = text[pos]
            if ch in " \t\r\n,":
                pos += 1
            elif ch == ";":
                end = text.find("\n", pos)
                pos = len(text) if end < 0 else end
            else:
                break
        self.pos = pos
        return pos

    def value(self, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise EdnError(f"EDN nested deeper than {MAX_DEPTH}")
        pos = self.skip()
        if pos >= len(self.text):
            raise EdnError("EDN text ends where a value was expected")
        ch = self.text[pos]
        if ch == '"':
            return self.string()
        if ch in "([{":
            self.pos += 1
            return self.collection(ch, depth)
        if ch == "#":
            return self.dispatch(depth)
        if ch in ")]}":
            raise EdnError(f"unexpected {ch!r} at character {pos}")
        return self.atom()

    def dispatch(self, depth: int) -> Any:
        """``#{...}`` a set, ``#_`` a discarded value, ``#tag value`` the value."""
        text, pos = self.text, self.pos
        if text.startswith("#{", pos):
            self.pos += 2
            return self.collection("#{", depth)
        if text.startswith("#_", pos):
            self.pos += 2
            self.value(depth + 1)
            return self.value(depth)
        match = _ATOM.match(text, pos + 1)
        if match is None:
            raise EdnError(f"unexpected '#' at character {pos}")
        self.pos = match.end()
        return self.value(depth + 1)

    def collection(self, opening: str, depth: int) -> Any:
        closing = _CLOSE[opening]
        items: list[Any] = []
        while True:
            pos = self.skip()
            if pos >= len(self.text):
                raise EdnError(f"EDN text ends inside {opening!r}")
            if self.text[pos] == closing:
                self.pos += 1
                break
            items.append(self.value(depth + 1))
        if opening == "{":
            return _map(items, depth)
        if opening == "#{":
            return frozenset(_hashable(i) for i in items)
        return tuple(items)

    def string(self) -> str:
        text, pos = self.text, self.pos + 1
        out: list[str] = []
        while True:
            end = text.find('"', pos)
            slash = text.find("\\", pos)
            if end < 0:
                raise EdnError("EDN string not closed")
            if 0 <= slash < end:
                out.append(text[pos:slash])
                out.append(self.escape(slash))
                pos = self.pos
                continue
            out.append(text[pos:end])
            self.pos = end + 1
            return "".join(out)

    def escape(self, slash: int) -> str:
        """The character of the escape at ``slash``; ``pos`` is set past it."""
        code = self.text[slash + 1 : slash + 2]
        if code == "u":
            digits = self.text[slash + 2 : slash + 6]
            if not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise EdnError(f"bad \\u escape at character {slash}")
            self.pos = slash + 6
            return chr(int(digits, 16))
        if code not in _ESCAPES:
            raise EdnError(f"bad escape at character {slash}")
        self.pos = slash + 2
        return _ESCAPES[code]

    def atom(self) -> Any:
        match = _ATOM.match(self.text, self.pos)
        assert match is not None  # value() saw a character that starts an atom
        self.pos = match.end()
        return _atom(match.group(), match.start())


def _atom(word: str, at: int) -> Any:
    """nil, a boolean, a number, a keyword or symbol (as Keyword), a character."""
    fixed: dict[str, Any] = {"nil": None, "true": True, "false": False}
    if word in fixed:
        return fixed[word]
    if _INT.fullmatch(word):
        return int(word.rstrip("N"))
    if _FLOAT.fullmatch(word):
        return float(word.rstrip("M"))
    if word.startswith(":") and len(word) > 1:
        return Keyword(word[1:])
    if word.startswith("\\") and len(word) == 2:
        return word[1]
    if word[0].isalpha() or word[0] in "*+!-_?<>=/.":
        return Keyword(word)
    raise EdnError(f"cannot read {word[:40]!r} at character {at}")


def _hashable(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple((_hashable(k), _hashable(v)) for k, v in value.items())
    return value


def _map(items: list[Any], depth: int) -> Any:
    if len(items) % 2:
        raise EdnError("EDN map with an odd number of forms")
    pairs = {_hashable(items[i]): items[i + 1] for i in range(0, len(items), 2)}
    return pairs if depth == 0 else _hashable(pairs)
