"""Replicated data types ready to use (PySyncObj's batteries and more).

Each holds JSON data (what the codec carries: None, bool, int, float, str, lists and
dicts with str keys); keys and set members are JSON scalars (str, int, float, bool,
None). Every replicated method checks its arguments before it changes anything
(``checks_first``), so a call that raises costs no rollback; what a method returns
is a copy, never the replica's own data. Orders are deterministic: a set or a dict
iterates in insertion order on every replica (Python's ``set`` of strings would not).

- ``ReplCounter``: add, sub, inc, set; read ``get``.
- ``ReplDict``: set, setdefault, update, pop, delete, cas (compare-and-set), incr,
  clear, reset; reads get, contains, keys, values, items, size.
- ``ReplSet``: add, discard, remove, pop (oldest), update, clear, reset.
- ``ReplList``: append, extend, insert, set, remove, pop, sort, clear, reset.
- ``ReplQueue`` (FIFO, optional ``maxsize``): put, get; reads peek, size, empty, full.
- ``ReplPriorityQueue``: put, get (smallest first).
- ``Bundle``: several objects in one replica (methods named ``"name.method"``).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Collection, Iterable
from typing import Any, ClassVar

from mailroom.replicated.methods import replicated
from mailroom.replicated.operations import private_copy
from mailroom.replicated.replica import Members
from mailroom.replicated.state import put_state, take_state

_MISSING: Any = object()
_SCALARS = (str, int, float, bool, type(None))


class _Held:
    """``size()``, ``len()`` and ``in`` over the collection held in the attribute that
    ``holds`` names (each battery states it once)."""

    holds: ClassVar[str]

    def _held(self) -> Collection[Any]:
        held: Collection[Any] = getattr(self, self.holds)
        return held

    def size(self) -> int:
        return len(self._held())

    def qsize(self) -> int:
        """``size()``, as ``queue.Queue`` and PySyncObj's queues call it."""
        return len(self._held())

    def __len__(self) -> int:
        return len(self._held())

    def __contains__(self, item: object) -> bool:
        return item in self._held()


class _Bounded(_Held):
    """A queue of at most ``maxsize`` items (0: unbounded)."""

    maxsize = 0

    def empty(self) -> bool:
        return not self._held()

    def full(self) -> bool:
        return 0 < self.maxsize <= len(self._held())


def _key(key: Any) -> Any:
    """``key`` if it is a JSON scalar (a dict key or set member), else TypeError."""
    if not isinstance(key, _SCALARS):
        raise TypeError(f"a key must be a str, int, float, bool or None, not {type(key).__name__}")
    return key


def _pairs(items: Any) -> list[tuple[Any, Any]]:
    """``items``, a list of ``[key, value]`` pairs, as tuples; TypeError if it is not."""
    pairs = _items(items)
    if not all(type(p) is list and len(p) == 2 for p in pairs):
        raise TypeError("expected a list of [key, value] pairs")
    return [(_key(k), v) for k, v in pairs]


def _number(value: Any) -> int | float:
    if type(value) not in (int, float):
        raise TypeError(f"a number is an int or a float, not {type(value).__name__}")
    return value  # type: ignore[no-any-return]


def _items(items: Any) -> list[Any]:
    if type(items) is not list:
        raise TypeError(f"expected a list, not {type(items).__name__}")
    return items


class ReplCounter:
    """A replicated number (an int unless a float is added)."""

    def __init__(self, value: int | float = 0) -> None:
        self.value = _number(value)

    @replicated(checks_first=True)
    def add(self, amount: int | float) -> int | float:
        """Add ``amount``; returns the new value."""
        self.value += _number(amount)
        return self.value

    @replicated(checks_first=True)
    def sub(self, amount: int | float) -> int | float:
        self.value -= _number(amount)
        return self.value

    @replicated(checks_first=True)
    def inc(self) -> int | float:
        self.value += 1
        return self.value

    @replicated(checks_first=True)
    def set(self, value: int | float) -> int | float:
        self.value = _number(value)
        return self.value

    def get(self) -> int | float:
        return self.value


class ReplDict(_Held):
    """A replicated dict: JSON-scalar keys, JSON-data values, insertion order kept."""

    holds = "_data"

    def __init__(self, items: Iterable[tuple[Any, Any]] = ()) -> None:
        self._data: dict[Any, Any] = {_key(k): v for k, v in items}

    def __replicated_state__(self) -> list[list[Any]]:
        return [[k, v] for k, v in self._data.items()]

    def __replicated_restore__(self, state: list[list[Any]]) -> None:
        self._data = {k: v for k, v in state}

    @replicated(checks_first=True)
    def set(self, key: Any, value: Any) -> None:
        self._data[_key(key)] = value

    @replicated(checks_first=True)
    def setdefault(self, key: Any, default: Any = None) -> Any:
        """The value of ``key``, set to ``default`` first if it had none."""
        return private_copy(self._data.setdefault(_key(key), default))

    @replicated(checks_first=True)
    def update(self, items: list[list[Any]]) -> None:
        """Set every ``[key, value]`` pair of ``items`` (all checked first)."""
        self._data.update(_pairs(items))

    @replicated(checks_first=True)
    def pop(self, key: Any, default: Any = _MISSING) -> Any:
        """Remove ``key`` and return its value (``default``, or KeyError, if absent)."""
        if _key(key) not in self._data:
            if default is _MISSING:
                raise KeyError(key)
            return default
        return self._data.pop(key)

    @replicated(checks_first=True)
    def delete(self, key: Any) -> bool:
        """Remove ``key``; True if it was there."""
        return self._data.pop(_key(key), _MISSING) is not _MISSING

    @replicated(checks_first=True)
    def cas(self, key: Any, expected: Any, value: Any) -> bool:
        """Compare and set: set ``key`` to ``value`` if its value is ``expected`` (None:
        absent, or None); True if it did."""
        if self._data.get(_key(key)) != expected:
            return False
        self._data[key] = value
        return True

    @replicated(checks_first=True)
    def incr(self, key: Any, amount: int | float = 1) -> int | float:
        """Add ``amount`` to the number at ``key`` (0 if absent); returns the new value."""
        old = self._data.get(_key(key), 0)
        new = _number(old) + _number(amount)
        self._data[key] = new
        return new

    @replicated(checks_first=True)
    def clear(self) -> None:
        self._data.clear()

    @replicated(checks_first=True)
    def reset(self, items: list[list[Any]]) -> None:
        """Replace the whole content by the ``[key, value]`` pairs of ``items``."""
        self._data = dict(_pairs(items))

    def get(self, key: Any, default: Any = None) -> Any:
        return private_copy(self._data.get(key, default))

    def contains(self, key: Any) -> bool:
        return key in self._data

    def keys(self) -> list[Any]:
        return list(self._data)

    def values(self) -> list[Any]:
        return private_copy(list(self._data.values()))  # type: ignore[no-any-return]

    def items(self) -> list[list[Any]]:
        return private_copy(self.__replicated_state__())  # type: ignore[no-any-return]


class ReplSet(_Held):
    """A replicated set of JSON scalars, iterated in insertion order."""

    holds = "_items"

    def __init__(self, items: Iterable[Any] = ()) -> None:
        self._items: dict[Any, None] = dict.fromkeys(_key(x) for x in items)

    def __replicated_state__(self) -> list[Any]:
        return list(self._items)

    def __replicated_restore__(self, state: list[Any]) -> None:
        self._items = dict.fromkeys(state)

    @replicated(checks_first=True)
    def add(self, item: Any) -> bool:
        """Add ``item``; True if it was not there."""
        if _key(item) in self._items:
            return False
        self._items[item] = None
        return True

    @replicated(checks_first=True)
    def discard(self, item: Any) -> bool:
        """Remove ``item`` if present; True if it was."""
        return self._items.pop(_key(item), _MISSING) is not _MISSING

    @replicated(checks_first=True)
    def remove(self, item: Any) -> None:
        """Remove ``item`` (KeyError if absent)."""
        del self._items[_key(item)]

    @replicated(checks_first=True)
    def pop(self) -> Any:
        """Remove and return the oldest item (KeyError if empty)."""
        if not self._items:
            raise KeyError("pop from an empty set")
        item = next(iter(self._items))
        del self._items[item]
        return item

    @replicated(checks_first=True)
    def update(self, items: list[Any]) -> int:
        """Add every item of ``items``; returns how many were new."""
        new = dict.fromkeys(x for x in map(_key, _items(items)) if x not in self._items)
        self._items.update(new)
        return len(new)

    @replicated(checks_first=True)
    def clear(self) -> None:
        self._items.clear()

    @replicated(checks_first=True)
    def reset(self, items: list[Any]) -> None:
        self._items = dict.fromkeys(_key(x) for x in _items(items))

    def contains(self, item: Any) -> bool:
        return item in self._items

    def items(self) -> list[Any]:
        return list(self._items)


class ReplList(_Held):
    """A replicated list of JSON data."""

    holds = "_list"

    def __init__(self, items: Iterable[Any] = ()) -> None:
        self._list: list[Any] = list(items)

    @replicated(checks_first=True)
    def append(self, item: Any) -> int:
        """Append ``item``; returns the new length."""
        self._list.append(item)
        return len(self._list)

    @replicated(checks_first=True)
    def extend(self, items: list[Any]) -> int:
        self._list.extend(_items(items))
        return len(self._list)

    @replicated(checks_first=True)
    def insert(self, index: int, item: Any) -> None:
        self._list.insert(_index(index), item)

    @replicated(checks_first=True)
    def set(self, index: int, item: Any) -> None:
        self._list[_index(index)] = item

    @replicated(checks_first=True)
    def remove(self, item: Any) -> None:
        """Remove the first ``item`` (ValueError if absent)."""
        self._list.remove(item)

    @replicated(checks_first=True)
    def pop(self, index: int = -1) -> Any:
        return self._list.pop(_index(index))

    @replicated(checks_first=True)
    def sort(self, reverse: bool = False) -> None:
        """Sort in place (TypeError, and no change, if the items do not compare)."""
        self._list = sorted(self._list, reverse=bool(reverse))

    @replicated(checks_first=True)
    def clear(self) -> None:
        self._list.clear()

    @replicated(checks_first=True)
    def reset(self, items: list[Any]) -> None:
        self._list = list(_items(items))

    def get(self, index: int) -> Any:
        return private_copy(self._list[index])

    def index(self, item: Any) -> int:
        return self._list.index(item)

    def count(self, item: Any) -> int:
        return self._list.count(item)

    def items(self) -> list[Any]:
        return private_copy(self._list)  # type: ignore[no-any-return]


def _index(index: Any) -> int:
    if type(index) is not int:
        raise TypeError(f"an index is an int, not {type(index).__name__}")
    return index


def _maxsize(maxsize: Any) -> int:
    if type(maxsize) is not int or maxsize < 0:
        raise TypeError(f"maxsize must be an int >= 0 (0: unbounded), not {maxsize!r}")
    return maxsize


class ReplQueue(_Bounded):
    """A replicated FIFO queue; ``maxsize`` > 0 bounds it (``put`` then returns False)."""

    holds = "_queue"

    def __init__(self, maxsize: int = 0) -> None:
        self.maxsize = _maxsize(maxsize)
        self._queue: deque[Any] = deque()

    def __replicated_state__(self) -> dict[str, Any]:
        return {"maxsize": self.maxsize, "items": list(self._queue)}

    def __replicated_restore__(self, state: dict[str, Any]) -> None:
        self.maxsize = state["maxsize"]
        self._queue = deque(state["items"])

    @replicated(checks_first=True)
    def put(self, item: Any) -> bool:
        """Append ``item``; False (and no change) if the queue is full."""
        if self.full():
            return False
        self._queue.append(item)
        return True

    @replicated(checks_first=True)
    def get(self, default: Any = None) -> Any:
        """Remove and return the oldest item (``default`` if empty)."""
        return self._queue.popleft() if self._queue else default

    def peek(self, default: Any = None) -> Any:
        return private_copy(self._queue[0]) if self._queue else default


class ReplPriorityQueue(_Bounded):
    """A replicated priority queue: ``get`` returns the smallest item (items must
    compare: numbers, strings, or lists such as ``[priority, value]``)."""

    holds = "heap"

    def __init__(self, maxsize: int = 0) -> None:
        self.maxsize = _maxsize(maxsize)
        self.heap: list[Any] = []

    @replicated
    def put(self, item: Any) -> bool:
        """Add ``item``; False if the queue is full (a TypeError leaves it unchanged)."""
        if self.full():
            return False
        heapq.heappush(self.heap, item)
        return True

    @replicated
    def get(self, default: Any = None) -> Any:
        """Remove and return the smallest item (``default`` if empty)."""
        return heapq.heappop(self.heap) if self.heap else default

    def peek(self, default: Any = None) -> Any:
        return private_copy(self.heap[0]) if self.heap else default


class Bundle:
    """Several objects replicated together, in one order: ``Bundle(hits=ReplCounter(),
    users=ReplDict())``; call ``"hits.inc"``. Each member's ``on_view`` is called."""

    def __init__(self, **objects: object) -> None:
        for name, obj in objects.items():
            if name.startswith("_"):
                raise TypeError(f"a bundle's member names are public: {name!r}")
            setattr(self, name, obj)

    def __replicated_state__(self) -> dict[str, Any]:
        return {name: take_state(obj)[0] for name, obj in vars(self).items()}

    def __replicated_restore__(self, state: dict[str, Any]) -> None:
        if set(state) != set(vars(self)):
            raise TypeError(f"a bundle of {sorted(vars(self))} cannot take {sorted(state)}")
        for name, data in state.items():
            put_state(getattr(self, name), data)

    def on_view(self, members: Members) -> None:
        for obj in vars(self).values():
            hook = getattr(obj, "on_view", None)
            if hook is not None:
                hook(members)


__all__ = [
    "Bundle",
    "ReplCounter",
    "ReplDict",
    "ReplList",
    "ReplPriorityQueue",
    "ReplQueue",
    "ReplSet",
]
