"""Persistent fields: what an endpoint's snapshot holds, declared once.

An endpoint lists its persistent fields in the class attribute ``persistent``, a
tuple of ``Field``. ``EndpointBase.snapshot`` writes the snapshot header and then
each field under its key, in the declared order; ``EndpointBase._load`` reads the
same fields back, strictly, in the same order. A field's *kind* says both how its
value becomes JSON data and how that data is checked and turned back into the
value, so the two directions cannot drift apart: adding a field to the table adds
it to both, and a snapshot with a key the table does not declare is refused (the
restore round-trip compares the rebuilt endpoint's snapshot with the input).

Most fields name an attribute and a kind (``Field("delivered", COUNTS)``); a field
whose state is spread over several attributes, or whose check needs what earlier
fields loaded, declares its two directions side by side with ``Field.custom``.
Loading runs in table order, so a field may rely on every field above it. A field
added to an endpoint after its snapshots were in use may name the data it writes
when it holds nothing new (``absent``): it is then left out, and a snapshot without
it loads that, so earlier snapshots restore exactly.

Why a table and not attrs + cattrs: the endpoints keep their state in plain
attributes tuned for the per-packet path (lists shared with buffers, dicts keyed
by message id); a table describes those attributes where they are, adds no
dependency, and keeps the strict checks (counters, pids, packets a peer could
have sent) next to the field they guard.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import attrs

from mailroom.core.errors import LocalError

#: Counters above this are refused as corrupt (as on the wire).
MAX_COUNTER = 2**53
#: A field's ``absent`` when it is always written.
ALWAYS = object()


@attrs.frozen
class Kind:
    """How one kind of value is written to snapshot data and read back.

    ``dump(value)`` returns JSON data; ``load(data, endpoint, key)`` returns the value
    or raises LocalError naming ``key``. ``load`` may read ``endpoint.n`` and every
    field loaded before this one.
    """

    dump: Callable[[Any], Any]
    load: Callable[[Any, Any, str], Any]

    def optional(self) -> Kind:
        """The same kind, or None (written as null)."""
        dump, load = self.dump, self.load
        return Kind(
            lambda v: None if v is None else dump(v),
            lambda d, ep, key: None if d is None else load(d, ep, key),
        )


@attrs.frozen
class Field:
    """One persistent field: its snapshot ``key``, the attribute it lives in, its kind.

    ``inplace``: the attribute holds a list other objects share (a buffer keeps a
    reference to ``delivered``), so loading replaces the list's contents rather
    than the list. ``absent``: the data for which the key is left out of the snapshot
    (and that a snapshot without the key loads); ``ALWAYS``: the key is always there.
    """

    key: str
    attr: str | None = None
    kind: Kind | None = None
    inplace: bool = False
    #: for custom fields: endpoint -> data, and (endpoint, data) -> None
    dumper: Callable[[Any], Any] | None = None
    loader: Callable[[Any, Any], None] | None = None
    absent: Any = ALWAYS

    def __attrs_post_init__(self) -> None:
        if self.kind is None and (self.dumper is None or self.loader is None):
            raise TypeError(f"field {self.key!r} needs a kind or both dump and load")

    @classmethod
    def custom(
        cls,
        key: str,
        dump: Callable[[Any], Any],
        load: Callable[[Any, Any], None],
        absent: Any = ALWAYS,
    ) -> Field:
        """A field written by ``dump(endpoint)`` and read by ``load(endpoint, data)``."""
        return cls(key, dumper=dump, loader=load, absent=absent)

    def left_out(self, data: Any) -> bool:
        """The field writes ``data``, for which its key is left out of the snapshot."""
        absent = self.absent
        return absent is not ALWAYS and type(data) is type(absent) and data == absent

    def dump(self, endpoint: object) -> Any:
        if self.dumper is not None:
            return self.dumper(endpoint)
        assert self.kind is not None
        return self.kind.dump(getattr(endpoint, self.attr or self.key))

    def load(self, endpoint: object, data: Any) -> None:
        if self.loader is not None:
            self.loader(endpoint, data)
            return
        assert self.kind is not None
        value = self.kind.load(data, endpoint, self.key)
        name = self.attr or self.key
        if self.inplace:
            getattr(endpoint, name)[:] = value
        else:
            setattr(endpoint, name, value)


def dump_fields(endpoint: object, fields: tuple[Field, ...], data: dict[str, Any]) -> None:
    """Write each field of ``fields`` into ``data`` under its key, in order."""
    for f in fields:
        value = f.dump(endpoint)
        if not f.left_out(value):
            data[f.key] = value


def load_fields(endpoint: object, fields: tuple[Field, ...], data: dict[str, Any]) -> None:
    """Read each field of ``fields`` from ``data``, in order; LocalError if one is missing
    (one with an ``absent`` value loads that)."""
    for f in fields:
        if f.key in data:
            f.load(endpoint, data[f.key])
        elif f.absent is not ALWAYS:
            f.load(endpoint, f.absent)
        else:
            raise LocalError(f"snapshot lacks field {f.key!r}")


# -- checks of single values: each returns the value or raises LocalError ------------------
def snap_counter(value: object, what: str) -> int:
    """A counter: an int in 0..MAX_COUNTER."""
    if type(value) is not int or not 0 <= value <= MAX_COUNTER:
        raise LocalError(f"snapshot field {what} holds {value!r}, not a counter")
    return value


def snap_positive(value: object, what: str) -> int:
    """A counter of at least 1."""
    if snap_counter(value, what) == 0:
        raise LocalError(f"snapshot field {what} must be at least 1")
    return value  # type: ignore[return-value]


def snap_pid(value: object, n: int, what: str) -> int:
    """A process id below ``n``."""
    if type(value) is not int or not 0 <= value < n:
        raise LocalError(f"snapshot field {what} holds {value!r}, not a pid below {n}")
    return value


def snap_bool(value: object, what: str) -> bool:
    if type(value) is not bool:
        raise LocalError(f"snapshot field {what} holds {value!r}, not a bool")
    return value


def snap_time(value: object, what: str) -> float:
    """A finite, non-negative float (times and timeouts)."""
    if type(value) is not float or not math.isfinite(value) or value < 0:
        raise LocalError(f"snapshot field {what} holds {value!r}, not a finite time")
    return value


def snap_list(value: object, what: str, length: int | None = None) -> list[Any]:
    """A list (of ``length`` items, if given)."""
    if type(value) is not list or (length is not None and len(value) != length):
        size = "a list" if length is None else f"a list of {length}"
        raise LocalError(f"snapshot field {what} must be {size}")
    return value


def load_counts(value: object, n: int, what: str) -> list[int]:
    """A snapshot's vector of n non-negative counters, or LocalError."""
    if not isinstance(value, list) or len(value) != n:
        raise LocalError(f"snapshot field {what} must be a list of {n} counters")
    if any(type(v) is not int or v < 0 or v > MAX_COUNTER for v in value):
        raise LocalError(f"snapshot field {what} holds something other than counters")
    return list(value)


def _same(value: Any) -> Any:
    return value


#: A counter (int in 0..2**53).
COUNTER = Kind(_same, lambda d, ep, key: snap_counter(d, key))
#: A counter of at least 1.
POSITIVE = Kind(_same, lambda d, ep, key: snap_positive(d, key))
#: A bool.
FLAG = Kind(_same, lambda d, ep, key: snap_bool(d, key))
#: A finite, non-negative float.
TIME = Kind(_same, lambda d, ep, key: snap_time(d, key))
#: A process id of the endpoint's group.
PID = Kind(_same, lambda d, ep, key: snap_pid(d, ep.n, key))
#: A vector of ``n`` counters (a list in the endpoint, a list in the data).
COUNTS = Kind(list, lambda d, ep, key: load_counts(d, ep.n, key))
#: A set of process ids, written sorted.
PIDS = Kind(
    sorted,
    lambda d, ep, key: {snap_pid(q, ep.n, key) for q in snap_list(d, key)},
)


def counter(attr: str, key: str | None = None) -> Field:
    """A counter field (``key`` defaults to the attribute's name without a leading _)."""
    return Field(key or attr.lstrip("_"), attr, COUNTER)


def counts(attr: str, key: str | None = None) -> Field:
    """A vector of ``n`` counters, loaded in place (other objects may share the list)."""
    return Field(key or attr.lstrip("_"), attr, COUNTS, inplace=True)


__all__ = [
    "ALWAYS",
    "COUNTER",
    "COUNTS",
    "FLAG",
    "MAX_COUNTER",
    "PID",
    "PIDS",
    "POSITIVE",
    "TIME",
    "Field",
    "Kind",
    "counter",
    "counts",
    "dump_fields",
    "load_counts",
    "load_fields",
    "snap_bool",
    "snap_counter",
    "snap_list",
    "snap_pid",
    "snap_positive",
    "snap_time",
]
