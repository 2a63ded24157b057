"""Received packets are dispatched one way: each endpoint's ``RECEIVES`` table, by exact class.

A packet of a class the endpoint does not receive (a look-alike subclass included) is a
RemoteError naming the endpoint and what it expected, and leaves its state unchanged.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from typing import Any

import pytest

import mailroom.protocols
from mailroom.core.actions import Action
from mailroom.core.dispatch import Receivers
from mailroom.core.errors import RemoteError
from mailroom.core.registry import PROTOCOLS, entry
from mailroom.protocols.membership import Group

#: Endpoint classes that define ``receive`` without a table, and why.
ONE_RULE = {
    # both of its packet classes carry an acknowledgement, checked by one rule first
    "Reliable",
    # a layer over another endpoint: heartbeats are its own, the rest is the group's
    "HeartbeatDetector",
}


def _endpoints() -> list[Any]:
    """One endpoint of every registered protocol that dispatches by table (P0 of 3),
    and a group member."""
    found: list[Any] = [Group(0, 3, members=[0, 1, 2])]
    for name in sorted(PROTOCOLS):
        endpoint = entry(name).factory(0, 3)
        if isinstance(getattr(type(endpoint), "RECEIVES", None), Receivers):
            found.append(endpoint)
    return found


def _look_alike(cls: type) -> object:
    """An instance of a subclass of ``cls`` (fields unset: it must never be read)."""
    return object.__new__(type(f"LookAlike{cls.__name__}", (cls,), {}))


def test_every_ordering_protocol_dispatches_by_its_table() -> None:
    names = {type(e).__name__ for e in _endpoints()}
    assert {"Fifo", "RST", "KS", "CBCAST", "TaggedCausalBroadcast", "Sequencer", "Skeen"} <= names
    assert "Unordered" in names and "Group" in names


def test_every_class_that_receives_uses_the_convention() -> None:
    """A class in mailroom.protocols that defines its own ``receive`` has a table, or is
    one of the few whose every packet goes through one rule (named above)."""
    offenders = []
    for info in pkgutil.walk_packages(mailroom.protocols.__path__, "mailroom.protocols."):
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__ or "receive" not in vars(cls):
                continue
            if "RECEIVES" not in vars(cls) and cls.__name__ not in ONE_RULE:
                offenders.append(cls.__qualname__)
    assert offenders == []


@pytest.mark.parametrize("endpoint", _endpoints(), ids=lambda e: type(e).__name__)
def test_a_packet_of_another_class_is_refused_and_changes_nothing(endpoint: Any) -> None:
    table: Receivers[Any] = type(endpoint).RECEIVES
    before = endpoint.snapshot()
    strangers: list[object] = ["junk", 42, None, *(_look_alike(c) for c in table.kinds())]
    for stranger in strangers:
        with pytest.raises(RemoteError) as refused:
            endpoint.receive(stranger)
        message = str(refused.value)
        assert message.startswith(f"{table.owner} expected {table.expected}, got ")
        assert message.endswith(type(stranger).__name__)
    assert endpoint.snapshot() == before


def test_an_extended_table_adds_without_changing_its_base() -> None:
    class A:
        pass

    class B:
        pass

    def on_a(endpoint: object, packet: object) -> list[Action]:
        return []

    def on_b(endpoint: object, packet: object) -> list[Action]:
        raise AssertionError("B is handled")

    base: Receivers[object] = Receivers("Base", "an A", {A: on_a})
    more = base.extended("Variant", "an A or a B", {B: on_b})
    assert base.kinds() == frozenset({A}) and more.kinds() == frozenset({A, B})
    assert more(object(), A()) == []
    with pytest.raises(AssertionError, match="B is handled"):
        more(object(), B())
    with pytest.raises(RemoteError, match="Base expected an A, got B"):
        base(object(), B())
    with pytest.raises(TypeError):
        base.table[B] = on_b  # type: ignore[index]
    for edit in (lambda: base.__setitem__(B, on_b), lambda: base.update({B: on_b}), base.clear):
        with pytest.raises(TypeError, match="read-only"):
            edit()
    assert base.kinds() == frozenset({A})
