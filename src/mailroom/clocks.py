"""Logical clocks: Lamport clocks, vector clocks, RST's SENT matrix and DELIV vector.

Rules, in words:

- A ``LamportClock`` is one counter; ``tick`` adds one, ``merge(t)`` takes the
  maximum with a received time (callers tick afterwards if the receipt is an event).
- A ``VectorClock`` is immutable; ``a < b`` is happened-before (every entry <=,
  at least one <), ``concurrent`` means neither ``a <= b`` nor ``b <= a``.
  ``merge`` is the entrywise maximum, so it is commutative, associative and
  idempotent; ``tick(i)`` adds one to entry i.
- ``SentMatrix`` is the n x n SENT of Raynal, Schiper and Toueg: entry [k][j]
  counts the messages that k sent to j, as far as the owner knows. It is not a
  matrix clock: its second index records destinations, not what k knows that
  j knows. It is mutable because an endpoint updates it in place; ``freeze()``
  gives the immutable copy that travels on the wire.
- ``DelivVector`` counts, per sender, the messages the owner has delivered.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

import attrs

Row = tuple[int, ...]
FrozenMatrix = tuple[Row, ...]


def _check_counters(values: Iterable[object], what: str) -> None:
    for v in values:
        if type(v) is not int or v < 0:
            raise ValueError(f"{what} entries must be non-negative integers, got {v!r}")


@attrs.define
class LamportClock:
    """Lamport's scalar logical clock."""

    time: int = 0

    def tick(self) -> int:
        """Count one local event and return the new time."""
        self.time += 1
        return self.time

    def merge(self, other: int) -> int:
        """Raise the clock to a received time (no tick) and return it."""
        if other > self.time:
            self.time = other
        return self.time

    def tolist(self) -> list[int]:
        return [self.time]


def _tuple_of_counters(values: Iterable[int]) -> Row:
    return tuple(values)


@attrs.frozen(order=False)
class VectorClock:
    """An immutable vector timestamp; the operators compare by happened-before."""

    entries: Row = attrs.field(converter=_tuple_of_counters)

    @entries.validator
    def _check(self, _attribute: object, value: Row) -> None:
        _check_counters(value, "vector clock")

    @classmethod
    def zero(cls, n: int) -> VectorClock:
        return cls((0,) * n)

    @classmethod
    def from_sparse(cls, entries: Mapping[int, int], n: int) -> VectorClock:
        """Build from a map of process to counter (absent processes are 0)."""
        dense = [0] * n
        for k, v in entries.items():
            if not 0 <= k < n:
                raise ValueError(f"process {k} is outside 0..{n - 1}")
            dense[k] = v
        return cls(dense)

    def to_sparse(self) -> dict[int, int]:
        return {k: v for k, v in enumerate(self.entries) if v}

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, k: int) -> int:
        return self.entries[k]

    def __iter__(self) -> Iterator[int]:
        return iter(self.entries)

    def _same_size(self, other: VectorClock) -> None:
        if len(self.entries) != len(other.entries):
            raise ValueError(
                f"cannot compare vector clocks of sizes {len(self.entries)} and "
                f"{len(other.entries)}"
            )

    def __le__(self, other: VectorClock) -> bool:
        self._same_size(other)
        return all(a <= b for a, b in zip(self.entries, other.entries, strict=True))

    def __lt__(self, other: VectorClock) -> bool:
        return self <= other and self.entries != other.entries

    def __ge__(self, other: VectorClock) -> bool:
        return other <= self

    def __gt__(self, other: VectorClock) -> bool:
        return other < self

    def concurrent(self, other: VectorClock) -> bool:
        """Neither happened before the other, and they differ."""
        return not (self <= other) and not (other <= self)

    def merge(self, other: VectorClock) -> VectorClock:
        self._same_size(other)
        return VectorClock(max(a, b) for a, b in zip(self.entries, other.entries, strict=True))

    def tick(self, k: int) -> VectorClock:
        entries = list(self.entries)
        entries[k] += 1
        return VectorClock(entries)

    def tolist(self) -> list[int]:
        return list(self.entries)

    def __repr__(self) -> str:
        return f"VectorClock({list(self.entries)})"


class SentMatrix:
    """RST's n x n SENT matrix: [k][j] = messages k sent to j, as known locally."""

    __slots__ = ("_rows",)

    def __init__(self, n: int, rows: Sequence[Sequence[int]] | None = None) -> None:
        if rows is None:
            self._rows = [[0] * n for _ in range(n)]
        else:
            if len(rows) != n or any(len(r) != n for r in rows):
                raise ValueError(f"SENT must be {n} x {n}")
            for r in rows:
                _check_counters(r, "SENT")
            self._rows = [list(r) for r in rows]

    @property
    def n(self) -> int:
        return len(self._rows)

    def __getitem__(self, index: tuple[int, int]) -> int:
        k, j = index
        return self._rows[k][j]

    def rows(self) -> Sequence[Sequence[int]]:
        """The rows, live and read-only: the matrix's own lists, not copies (cheap to
        compare and merge from; ``tolist`` gives copies)."""
        return self._rows

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SentMatrix):
            return self._rows == other.rows()
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def increment(self, k: int, j: int, by: int = 1) -> None:
        """Count ``by`` more messages from k to j (one unless told)."""
        self._rows[k][j] += by

    def raise_to(self, k: int, j: int, value: int) -> None:
        """Set entry [k][j] to at least ``value``."""
        if self._rows[k][j] < value:
            self._rows[k][j] = value

    def merge(self, other: FrozenMatrix | SentMatrix) -> None:
        """Entrywise maximum with another matrix, in place."""
        rows = other.rows() if isinstance(other, SentMatrix) else other
        for mine, theirs in zip(self._rows, rows, strict=True):
            if mine != list(theirs):  # most rows already agree; comparing is cheap
                mine[:] = map(max, mine, theirs)

    def column(self, j: int) -> list[int]:
        return [row[j] for row in self._rows]

    def freeze(self) -> FrozenMatrix:
        return tuple(tuple(r) for r in self._rows)

    def copy(self) -> SentMatrix:
        return SentMatrix(self.n, self._rows)

    def tolist(self) -> list[list[int]]:
        return [list(r) for r in self._rows]

    def __repr__(self) -> str:
        return f"SentMatrix({self.tolist()})"


class DelivVector:
    """RST's DELIV vector: [k] = messages from k delivered here."""

    __slots__ = ("_counts",)

    def __init__(self, n: int, counts: Sequence[int] | None = None) -> None:
        if counts is None:
            self._counts = [0] * n
        else:
            if len(counts) != n:
                raise ValueError(f"DELIV must have {n} entries")
            _check_counters(counts, "DELIV")
            self._counts = list(counts)

    def __getitem__(self, k: int) -> int:
        return self._counts[k]

    def __len__(self) -> int:
        return len(self._counts)

    def live_counts(self) -> list[int]:
        """The vector's own list, not a copy: it follows later deliveries, and what
        counts a delivery in it (an endpoint's ``DependencyBuffer``) changes the vector
        (``tolist`` gives a copy)."""
        return self._counts

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DelivVector):
            return self._counts == other.live_counts()
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def increment(self, k: int) -> None:
        self._counts[k] += 1

    def tolist(self) -> list[int]:
        return list(self._counts)

    def __repr__(self) -> str:
        return f"DelivVector({self._counts})"
