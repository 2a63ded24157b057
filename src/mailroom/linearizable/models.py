"""Sequential specifications that a history is checked against.

A model is a small object with a ``name``, the operations it knows (``fs``), an
initial state (``init``), a ``step`` and a ``validate``:

- ``step(state, call) -> (ok, new_state)``: could ``call`` take effect in ``state``,
  giving the result its client saw, and what is the state after it? For an open call
  (``call.open``: its client saw ``info`` or nothing) the result is unknown: ``step``
  says whether it can take effect at all and the state after it (that it did not take
  effect at all is the search's business, not the model's).
- states are hashable and compared by equality (the search memoizes them);
- ``validate(call)`` names what is wrong with a call's arguments, or returns None;
- optionally ``uses_process = False``: ``step`` never reads ``call.process``, so open
  calls alike but for their process are interchangeable (the search lifts them in
  order: ``search.twins``). Without it the search assumes the process matters.

Every key of a history names its own object of the model (a register per key, a lock
per lock name...), so the search checks each key on its own (P-compositionality);
``Whole`` turns a model into one whose single state holds every key's state, for
checking a history without partitioning it.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Protocol

import attrs

from mailroom.linearizable.history import Call, show

Step = tuple[bool, Hashable]


class Model(Protocol):
    """What the search needs of a sequential specification (see the module doc)."""

    @property
    def name(self) -> str:
        """The model's name, as ``--model`` spells it."""

    @property
    def fs(self) -> frozenset[str]:
        """The operations (``f``) the model knows."""

    def init(self) -> Hashable: ...

    def step(self, state: Hashable, call: Call) -> Step: ...

    def validate(self, call: Call) -> str | None: ...


def order_key(value: Any) -> tuple[str, Any]:
    """A total, deterministic order on keys of any type: by type, then numbers and
    strings by value (2 before 10), anything else by its repr."""
    plain = type(value) in (int, float, str)
    return type(value).__name__, value if plain else repr(value)


def _pair_arg(call: Call) -> str | None:
    arg = call.arg
    if not (isinstance(arg, tuple) and len(arg) == 2):
        return f"{call.f} takes [expected new], not {show(arg)}"
    return None


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _flag(call: Call) -> bool | None:
    """The boolean result of a completed call, None if open or not a boolean."""
    return call.result if not call.open and isinstance(call.result, bool) else None


def _read(state: Hashable, call: Call, missing: tuple[Any, ...] = (None,)) -> Step:
    """A read: it saw the state (a missing value may read as any of ``missing``)."""
    if call.open or call.result == state:
        return True, state
    return state in missing and call.result in missing, state


@attrs.frozen
class Register:
    """One register per key: ``read``, ``write``, ``cas [expected new]`` (a ``:fail``
    cas did not happen; an ``:ok`` one found ``expected``). Initially nil."""

    name: str = "register"
    fs: frozenset[str] = frozenset({"read", "write", "cas"})
    uses_process: bool = False

    def init(self) -> Hashable:
        return None

    def step(self, state: Hashable, call: Call) -> Step:
        if call.f == "read":
            return _read(state, call)
        if call.f == "write":
            return True, call.arg
        expected, new = call.arg
        return (True, new) if state == expected else (False, state)

    def validate(self, call: Call) -> str | None:
        return _pair_arg(call) if call.f == "cas" else None


@attrs.frozen
class KeyValue:
    """A key-value map, each key on its own: ``get``/``read``, ``put``/``write``,
    ``append`` (strings concatenated). A key never written reads as nil or ""."""

    name: str = "kv"
    fs: frozenset[str] = frozenset({"get", "read", "put", "write", "append"})
    uses_process: bool = False

    def init(self) -> Hashable:
        return None

    def step(self, state: Hashable, call: Call) -> Step:
        if call.f in ("get", "read"):
            return _read(state, call, (None, ""))
        if call.f in ("put", "write"):
            return True, call.arg
        return True, (state or "") + call.arg

    def validate(self, call: Call) -> str | None:
        if call.f == "append" and not isinstance(call.arg, str):
            return f"append takes a string, not {show(call.arg)}"
        return None


@attrs.frozen
class DictModel:
    """``ReplDict`` as its callers see it, each key on its own: ``get``/``read`` (nil
    when absent), ``set``/``put``/``write`` a value, ``setdefault`` (the value, set to
    the call's value first if absent), ``pop`` (the value removed, or the call's value,
    the default, if absent) and ``delete`` (true if the key was there). A null value
    reads as absent. Initially absent."""

    name: str = "dict"
    fs: frozenset[str] = frozenset(
        {"get", "read", "set", "put", "write", "setdefault", "pop", "delete"}
    )
    uses_process: bool = False

    def init(self) -> Hashable:
        return None

    def step(self, state: Hashable, call: Call) -> Step:
        if call.f in ("get", "read"):
            return _read(state, call)
        if call.f in ("set", "put", "write"):
            return True, call.arg
        if call.f == "setdefault":
            now = call.arg if state is None else state
            return call.open or call.result == now, now
        if call.f == "pop":
            got = call.arg if state is None else state
            return call.open or call.result == got, None
        flag = _flag(call)  # delete
        return flag is None or flag == (state is not None), None

    def validate(self, call: Call) -> str | None:
        if call.f == "delete" and not call.open and not isinstance(call.result, bool | None):
            return f"delete completes with true or false, not {show(call.result)}"
        return None


@attrs.frozen
class Counter:
    """``ReplCounter``: ``add``/``sub`` an amount, ``inc``, ``set``, each completing with
    the new value (or nil, not checked); ``get``/``read`` the value. Initially 0."""

    name: str = "counter"
    fs: frozenset[str] = frozenset({"add", "sub", "inc", "set", "get", "read"})
    uses_process: bool = False

    def init(self) -> Hashable:
        return 0

    def step(self, state: Hashable, call: Call) -> Step:
        if call.f in ("get", "read"):
            return _read(state, call)
        assert isinstance(state, int | float)
        amount = 1 if call.f == "inc" else call.arg
        new = {"add": state + amount, "inc": state + 1, "sub": state - amount}.get(call.f, amount)
        if call.open or call.result is None:
            return True, new
        return call.result == new, new

    def validate(self, call: Call) -> str | None:
        if call.f in ("add", "sub", "set") and not _number(call.arg):
            return f"{call.f} takes a number, not {show(call.arg)}"
        return None


@attrs.frozen
class SetModel:
    """``ReplSet``: ``add``/``discard`` an item (true if it changed the set, nil not
    checked), ``contains`` (true or false), ``read``/``items`` (every item). Initially
    empty."""

    name: str = "set"
    fs: frozenset[str] = frozenset({"add", "discard", "contains", "read", "items"})
    uses_process: bool = False

    def init(self) -> Hashable:
        return frozenset()

    def step(self, state: Hashable, call: Call) -> Step:
        assert isinstance(state, frozenset)
        if call.f in ("read", "items"):
            seen = call.result if call.open else frozenset(call.result or ())
            return _read(state, attrs.evolve(call, result=seen))
        present, flag = call.arg in state, _flag(call)
        if call.f == "contains":
            return flag is None or flag == present, state
        new = state | {call.arg} if call.f == "add" else state - {call.arg}
        changed = present != (call.f == "add")
        return flag is None or flag == changed, new

    def validate(self, call: Call) -> str | None:
        reads = call.f in ("read", "items") and not call.open
        if reads and not isinstance(call.result, tuple | frozenset | None):
            return f"{call.f} completes with a collection, not {show(call.result)}"
        return None


@attrs.frozen
class Queue:
    """``ReplQueue`` (unbounded): ``put``/``enqueue`` an item, ``get``/``dequeue`` the
    oldest (nil when empty), ``peek`` it without taking it. Initially empty."""

    name: str = "queue"
    fs: frozenset[str] = frozenset({"put", "enqueue", "get", "dequeue", "peek"})
    uses_process: bool = False

    def init(self) -> Hashable:
        return ()

    def step(self, state: Hashable, call: Call) -> Step:
        assert isinstance(state, tuple)
        if call.f in ("put", "enqueue"):
            return call.open or call.result in (None, True), (*state, call.arg)
        head = state[0] if state else None
        new = state[1:] if call.f != "peek" else state
        return call.open or call.result == head, new

    def validate(self, call: Call) -> str | None:
        return None


@attrs.frozen
class Lock:
    """The replicated lock manager, one lock per key: ``acquire`` and ``release``, true
    or false; the holder is the call's value if it names one (a client), else its
    process. A free lock is granted; a held one only to its holder."""

    name: str = "lock"
    fs: frozenset[str] = frozenset({"acquire", "release"})
    uses_process: bool = True  # the holder is the process when no value names one

    def init(self) -> Hashable:
        return None

    def step(self, state: Hashable, call: Call) -> Step:
        holder = call.process if call.arg is None else call.arg
        flag = _flag(call)
        if call.f == "acquire":
            can = state is None or state == holder
            return flag is None or flag == can, holder if can else state
        mine = state == holder
        return flag is None or flag == mine, None if mine else state

    def validate(self, call: Call) -> str | None:
        if not call.open and not isinstance(call.result, bool | None):
            return f"{call.f} completes with true or false, not {show(call.result)}"
        return None


@attrs.frozen
class Whole:
    """``model`` over every key at once: the state is each key's state, in key order.
    For checking a history without partitioning it (the search is then exponential in
    more operations; this is the reference the partitioned search is compared with)."""

    model: Model

    @property
    def name(self) -> str:
        return f"{self.model.name} (whole)"

    @property
    def fs(self) -> frozenset[str]:
        return self.model.fs

    @property
    def uses_process(self) -> bool:
        return bool(getattr(self.model, "uses_process", True))

    def init(self) -> Hashable:
        return ()

    def step(self, state: Hashable, call: Call) -> Step:
        assert isinstance(state, tuple)
        held = dict(state)
        ok, new = self.model.step(held.get(call.key, self.model.init()), call)
        held[call.key] = new
        return ok, tuple(sorted(held.items(), key=lambda kv: order_key(kv[0])))

    def validate(self, call: Call) -> str | None:
        return self.model.validate(call)


#: the models ``mailroom check --model`` knows, by name
MODELS: dict[str, Model] = {
    m.name: m for m in (Register(), KeyValue(), DictModel(), Counter(), SetModel(), Queue(), Lock())
}
