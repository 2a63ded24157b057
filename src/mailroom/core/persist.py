"""Persistent fields: what an endpoint's snapshot holds, declared once.

An endpoint lists its persistent fields in the class attribute ``persistent``, a
tuple of ``Field``. ``EndpointBase.snapshot`` writes the snapshot header and then
each field under its key, in the declared order; ``EndpointBase.restore`` reads the
same fields back, strictly, in the same order. A field's *kind* says both how its
value becomes JSON data and how that data is checked and turned back into the
value, so the two directions cannot drift apart: adding a field to the table adds
it to both, and a snapshot with a key the table does not declare is refused (the
restore round-trip compares the rebuilt endpoint's snapshot with the input).

Three sorts of field:

- a kind field names an attribute and a kind (``Field("delivered", COUNTS)``, or the
  shorthands ``counter``, ``counts``, ``matrix``); ``check`` adds a rule the value
  must meet given what the fields above it loaded (``Field.check``);
- a constructor argument (``argument``, ``arguments``): the constructor's own checks
  apply, since ``restore`` passes the value to it;
- a custom field (``Field.custom``, or ``window`` and ``packets``) declares its two
  directions side by side, for state spread over several attributes or rebuilt
  one item at a time (a mail room, whose packets must be ones the protocol accepts).

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
import operator
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from mailroom.clocks import VectorClock
from mailroom.core.errors import LocalError
from mailroom.core.messages import MessageId
from mailroom.core.wire import packet_from_data, packet_to_data

#: Counters above this are refused as corrupt (as on the wire).
MAX_COUNTER = 2**53
#: A field's ``absent`` when it is always written.
ALWAYS = object()


def _refill(target: Any, value: Any) -> None:
    """Replace the items of a list or deque that other objects hold a reference to."""
    target.clear()
    target.extend(value)


@attrs.frozen
class Kind:
    """How one kind of value is written to snapshot data and read back.

    ``dump(value)`` returns JSON data; ``load(data, endpoint, key)`` returns the value
    or raises LocalError naming ``key``. ``load`` may read ``endpoint.n`` and every
    field loaded before this one (not for a constructor argument: there is no
    endpoint yet, and ``endpoint`` is None). ``fill(target, value)`` puts a loaded
    value into the attribute's existing object, for fields loaded in place.
    """

    dump: Callable[[Any], Any]
    load: Callable[[Any, Any, str], Any]
    fill: Callable[[Any, Any], None] = _refill

    def optional(self) -> Kind:
        """The same kind, or None (written as null)."""
        dump, load = self.dump, self.load
        return Kind(
            lambda v: None if v is None else dump(v),
            lambda d, ep, key: None if d is None else load(d, ep, key),
        )


def _get(obj: object, path: str) -> Any:
    return operator.attrgetter(path)(obj)


def _set(obj: object, path: str, value: Any) -> None:
    owner, _, name = path.rpartition(".")
    setattr(_get(obj, owner) if owner else obj, name, value)


@attrs.frozen
class Field:
    """One persistent field: its snapshot ``key``, the attribute it lives in, its kind.

    ``attr`` may be a dotted path (``"deliv._counts"``); it defaults to ``key``.
    ``inplace``: the attribute holds an object others share (a buffer keeps a
    reference to ``delivered``), so loading fills it (``Kind.fill``) rather than
    replacing it. ``check(endpoint, value)``: a rule the loaded value must meet,
    checked before it is stored; it returns what is wrong (``"is true with nothing
    unconsumed"``) or None. ``init(value)``: the field is given to the constructor,
    as the keyword arguments it returns; loading then leaves it alone. ``absent``:
    the data for which the key is left out of the snapshot (and that a snapshot
    without the key loads); ``ALWAYS``: the key is always there.
    """

    key: str
    attr: str | None = None
    kind: Kind | None = None
    inplace: bool = False
    check: Callable[[Any, Any], str | None] | None = None
    init: Callable[[Any], dict[str, Any]] | None = None
    #: for custom fields: endpoint -> data, and (endpoint, data) -> None
    dumper: Callable[[Any], Any] | None = None
    loader: Callable[[Any, Any], None] | None = None
    absent: Any = ALWAYS

    def __attrs_post_init__(self) -> None:
        if self.kind is None and self.dumper is None:
            raise TypeError(f"field {self.key!r} needs a kind or a dump")
        if self.kind is None and self.loader is None and self.init is None:
            raise TypeError(f"field {self.key!r} needs a kind, a load or an init")
        if self.check is not None and (self.kind is None or self.loader is not None):
            raise TypeError(f"field {self.key!r}: only a kind field takes a check")

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
        return self.kind.dump(_get(endpoint, self.attr or self.key))

    def load(self, endpoint: object, data: Any) -> None:
        if self.init is not None:
            return  # the constructor took it (``arguments``)
        if self.loader is not None:
            self.loader(endpoint, data)
            return
        assert self.kind is not None
        value = self.kind.load(data, endpoint, self.key)
        if self.check is not None and (problem := self.check(endpoint, value)) is not None:
            raise LocalError(f"snapshot field {self.key} {problem}")
        path = self.attr or self.key
        if self.inplace:
            self.kind.fill(_get(endpoint, path), value)
        else:
            _set(endpoint, path, value)

    def arguments(self, data: Any) -> dict[str, Any]:
        """The constructor's keyword arguments this field's ``data`` stands for."""
        assert self.init is not None
        return self.init(data if self.kind is None else self.kind.load(data, None, self.key))


def dump_fields(endpoint: object, fields: tuple[Field, ...], data: dict[str, Any]) -> None:
    """Write each field of ``fields`` into ``data`` under its key, in order."""
    for f in fields:
        value = f.dump(endpoint)
        if not f.left_out(value):
            data[f.key] = value


def _present(f: Field, data: dict[str, Any]) -> Any:
    if f.key in data:
        return data[f.key]
    if f.absent is not ALWAYS:
        return f.absent
    raise LocalError(f"snapshot lacks field {f.key!r}")


def load_fields(endpoint: object, fields: tuple[Field, ...], data: dict[str, Any]) -> None:
    """Read each field of ``fields`` from ``data``, in order; LocalError if one is missing
    (one with an ``absent`` value loads that)."""
    for f in fields:
        f.load(endpoint, _present(f, data))


def init_arguments(fields: tuple[Field, ...], data: dict[str, Any]) -> dict[str, Any]:
    """The constructor's keyword arguments held by the ``init`` fields of ``fields``."""
    out: dict[str, Any] = {}
    for f in fields:
        if f.init is not None:
            out.update(f.arguments(_present(f, data)))
    return out


def check_table(owner: str, fields: tuple[Field, ...], reserved: Iterable[str] = ()) -> None:
    """TypeError unless every key of ``fields`` is unique and none is ``reserved``."""
    seen = set(reserved)
    for f in fields:
        if f.key in seen:
            raise TypeError(f"{owner} declares the snapshot key {f.key!r} twice")
        seen.add(f.key)


# -- checks of single values: each returns the value or raises LocalError ------------------
def snap_counter(value: object, what: str) -> int:
    """A counter: an int in 0..MAX_COUNTER."""
    if type(value) is not int or not 0 <= value <= MAX_COUNTER:
        raise LocalError(f"snapshot field {what} holds {value!r}, not a counter")
    return value


def snap_positive(value: object, what: str) -> int:
    """A counter of at least 1."""
    if type(value) is not int or not 1 <= value <= MAX_COUNTER:
        raise LocalError(f"snapshot field {what} holds {value!r}, not a counter of at least 1")
    return value


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


def snap_dict(value: object, what: str) -> dict[str, Any]:
    """A dict (with str keys, as JSON objects have)."""
    if type(value) is not dict or not all(type(k) is str for k in value):
        raise LocalError(f"snapshot field {what} must be a dict")
    return value


def load_counts(value: object, n: int, what: str) -> list[int]:
    """A snapshot's vector of n non-negative counters, or LocalError."""
    if not isinstance(value, list) or len(value) != n:
        raise LocalError(f"snapshot field {what} must be a list of {n} counters")
    if any(type(v) is not int or v < 0 or v > MAX_COUNTER for v in value):
        raise LocalError(f"snapshot field {what} holds something other than counters")
    return list(value)


def load_matrix(value: object, n: int, what: str) -> list[list[int]]:
    """A snapshot's n x n matrix of counters, or LocalError."""
    if not isinstance(value, list) or len(value) != n:
        raise LocalError(f"snapshot field {what} must be {n} x {n}")
    return [load_counts(row, n, f"{what}[{k}]") for k, row in enumerate(value)]


def snap_seen(value: object, n: int, what: str) -> list[tuple[int, set[int]]]:
    """Per process: [low, sorted indexes above low + 1], as senders' dedup windows."""
    out = []
    for k, item in enumerate(snap_list(value, what, n)):
        low, high = snap_list(item, f"{what}[{k}]", 2)
        low = snap_counter(low, what)
        above = [snap_counter(v, what) for v in snap_list(high, what)]
        if above != sorted(set(above)) or (above and above[0] <= low + 1):
            raise LocalError(f"snapshot field {what}[{k}] is not a window above {low}")
        out.append((low, set(above)))
    return out


def _same(value: Any) -> Any:
    return value


def _fill_rows(target: list[list[int]], rows: list[list[int]]) -> None:
    for mine, row in zip(target, rows, strict=True):
        mine[:] = row


def _load_message_id(data: Any, ep: Any, key: str) -> MessageId:
    origin, seq = snap_list(data, f"{key} item", 2)
    return MessageId(snap_pid(origin, ep.n, key), snap_positive(seq, key))


def _refill_set(target: set[Any], value: set[Any]) -> None:
    target.clear()
    target.update(value)


def set_of(kind: Kind) -> Kind:
    """A set of values of ``kind``, written as a sorted list."""
    dump, load = kind.dump, kind.load
    return Kind(
        lambda v: sorted(dump(x) for x in v),
        lambda d, ep, key: {load(x, ep, key) for x in snap_list(d, key)},
        _refill_set,
    )


def list_of(kind: Kind) -> Kind:
    """A sequence (list or deque) of values of ``kind``, in order."""
    dump, load = kind.dump, kind.load
    return Kind(
        lambda v: [dump(x) for x in v],
        lambda d, ep, key: [load(x, ep, key) for x in snap_list(d, key)],
    )


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
#: An ``n`` x ``n`` matrix of counters (a list of row lists; in place: row by row).
MATRIX = Kind(
    lambda rows: [list(r) for r in rows], lambda d, ep, key: load_matrix(d, ep.n, key), _fill_rows
)
#: A ``VectorClock`` of ``n`` entries.
CLOCK = Kind(VectorClock.tolist, lambda d, ep, key: VectorClock(load_counts(d, ep.n, key)))
#: A message id, written [origin, seq].
MESSAGE_ID = Kind(lambda m: [m.origin, m.seq], _load_message_id)
#: A set of process ids, written sorted.
PIDS = set_of(PID)


def counter(attr: str, key: str | None = None) -> Field:
    """A counter field (``key`` defaults to the attribute's name without a leading _)."""
    return Field(key or attr.lstrip("_"), attr, COUNTER)


def counts(attr: str, key: str | None = None) -> Field:
    """A vector of ``n`` counters, loaded in place (other objects may share the list)."""
    return Field(key or attr.lstrip("_"), attr, COUNTS, inplace=True)


def matrix(
    attr: str, key: str | None = None, check: Callable[[Any, Any], str | None] | None = None
) -> Field:
    """An ``n`` x ``n`` matrix of counters, loaded row by row in place."""
    return Field(key or attr.lstrip("_"), attr, MATRIX, inplace=True, check=check)


def argument(key: str, attr: str | None = None, kind: Kind | None = None) -> Field:
    """A constructor argument: written from ``attr`` (default ``key``), by ``kind`` if
    given, and given back to the constructor as the keyword ``key``, whose own checks
    apply (after ``kind``'s, which must not read the endpoint: there is none yet)."""
    if kind is not None:
        return Field(key, attr, kind, init=lambda value: {key: value})
    path = attr or key
    return Field(key, attr, dumper=lambda ep: _get(ep, path), init=lambda value: {key: value})


def arguments(key: str, names: tuple[str, ...]) -> Field:
    """Constructor arguments written together as one dict {name: attribute} and given
    back to the constructor as keywords."""
    return Field(
        key,
        dumper=lambda ep: {name: getattr(ep, name) for name in names},
        init=lambda value: snap_dict(value, key),
    )


def window(key: str, low: str, high: str) -> Field:
    """Per process a reordering window: every index up to ``low[p]`` and each in the
    set ``high[p]`` (all above ``low[p] + 1``), written [low, sorted high]."""

    def dump(ep: Any) -> list[list[Any]]:
        return [[lo, sorted(hi)] for lo, hi in zip(_get(ep, low), _get(ep, high), strict=True)]

    def load(ep: Any, data: Any) -> None:
        lows, highs = _get(ep, low), _get(ep, high)
        for p, (lo, hi) in enumerate(snap_seen(data, ep.n, key)):
            lows[p], highs[p] = lo, hi

    return Field.custom(key, dump, load)


def packets(
    key: str,
    cls: type,
    items: Callable[[Any], Iterable[Any]],
    add: Callable[[Any, Any], None],
) -> Field:
    """A list of packets of ``cls``, written as their data in the order ``items(endpoint)``
    gives them; each is read back and handed to ``add(endpoint, packet)``, which checks
    it (LocalError, or RemoteError for a packet the protocol would refuse) and keeps it."""

    def dump(ep: Any) -> list[dict[str, Any]]:
        return [packet_to_data(p) for p in items(ep)]

    def load(ep: Any, data: Any) -> None:
        for item in snap_list(data, key):
            add(ep, packet_from_data(cls, item))

    return Field.custom(key, dump, load)


def lift(get: Callable[[Any], Any], fields: tuple[Field, ...]) -> tuple[Field, ...]:
    """``fields`` of a part, as fields of the object that holds it (``get(holder)`` is
    the part): each part keeps its own table, and its holder's table is the parts'
    tables put together, so snapshot and restore of the whole cannot drift apart."""
    return tuple(_lifted(get, f) for f in fields)


def _lifted(get: Callable[[Any], Any], f: Field) -> Field:
    return Field.custom(
        f.key, lambda ep: f.dump(get(ep)), lambda ep, data: f.load(get(ep), data), f.absent
    )


__all__ = [
    "ALWAYS",
    "CLOCK",
    "COUNTER",
    "COUNTS",
    "FLAG",
    "MATRIX",
    "MAX_COUNTER",
    "MESSAGE_ID",
    "PID",
    "PIDS",
    "POSITIVE",
    "TIME",
    "Field",
    "Kind",
    "argument",
    "arguments",
    "check_table",
    "counter",
    "counts",
    "dump_fields",
    "init_arguments",
    "lift",
    "list_of",
    "load_counts",
    "load_fields",
    "load_matrix",
    "matrix",
    "packets",
    "set_of",
    "snap_bool",
    "snap_counter",
    "snap_dict",
    "snap_list",
    "snap_pid",
    "snap_positive",
    "snap_seen",
    "snap_time",
    "window",
]
