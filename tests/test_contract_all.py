"""The whole contract, for every registered protocol, bare and over ``Reliable``:
typed capabilities, hosts that refuse what an endpoint cannot do, snapshots taken
mid-run that restore exactly, and strict restore: any mutated snapshot gives only
``LocalError`` (or, if ``snapshot()`` could have written it, an endpoint that works)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mailroom import (
    RST,
    Endpoint,
    Group,
    LocalError,
    MailroomError,
    Reliable,
    RemoteError,
    Sequencer,
    Stack,
    restore_endpoint,
)
from mailroom.core.endpoint import CAPABILITIES, capabilities
from mailroom.core.registry import PROTOCOLS
from mailroom.sim import NetworkModel, Simulation

N = 3

CASES: dict[str, tuple[Callable[[int, int], Any], str]] = {}
for _name, (_factory, _mode, _) in PROTOCOLS.items():
    CASES[_name] = (_factory, _mode)
    CASES[f"reliable+{_name}"] = (
        lambda p, n, f=_factory: Stack(Reliable(p, n, rto=2.0, max_rto=4.0), f(p, n)),
        _mode,
    )
CASES["reliable"] = (lambda p, n: Reliable(p, n, rto=2.0, max_rto=4.0), "unicast")
for _name in ("cbcast", "sequencer", "skeen", "rst"):  # group membership around a protocol
    _mode = PROTOCOLS[_name][1]
    CASES[f"group+{_name}"] = (
        lambda p, n, x=_name: Group(p, n, x, members=range(n)),
        _mode,
    )
    CASES[f"reliable+group+{_name}"] = (
        lambda p, n, x=_name: Group(p, n, x, members=range(n), reliable=True),
        _mode,
    )

_MIDRUN: dict[str, list[dict[str, Any]]] = {}


def midrun(name: str) -> list[dict[str, Any]]:
    """Every process's snapshot in the middle of a lossy, duplicating, reordering run."""
    if name not in _MIDRUN:
        factory, mode = CASES[name]
        lossy = name.startswith("reliable")
        net = NetworkModel(delay=(0.2, 3.0), loss=0.2 if lossy else 0.0, duplicate=0.2)
        sim = Simulation([factory(p, N) for p in range(N)], net, seed=7)
        for k in range(24):
            p = k % N
            if mode == "broadcast":
                sim.schedule(k * 0.4, lambda s, p=p, k=k: s.broadcast(p, [k, {"p": None}]))
            else:
                sim.schedule(k * 0.4, lambda s, p=p, k=k: s.send(p, f"m{k}", to=(p + k) % N))
        sim.run(until=6.0)
        _MIDRUN[name] = [json.loads(json.dumps(ep.snapshot())) for ep in sim.endpoints]
        sim.run()
        assert all(ep.buffered() == 0 for ep in sim.endpoints)
    return _MIDRUN[name]


cases = pytest.mark.parametrize("name", sorted(CASES))


@cases
def test_capabilities_are_typed_and_hosts_refuse_the_rest(name: str) -> None:
    factory, mode = CASES[name]
    ep = factory(0, N)
    assert isinstance(ep, Endpoint)
    assert type(ep.sent_count) is int and type(ep.duplicates) is int
    offered = capabilities(ep)
    assert mode in offered and offered <= set(CAPABILITIES)
    if isinstance(ep, Stack):
        assert offered - {"can_send"} == capabilities(ep.top) - {"can_send"}
        flow = any(isinstance(x, Reliable) for x in ep.layers)
        assert ("can_send" in offered) is flow  # a reliable layer below is flow-controlled
    sim = Simulation([factory(p, N) for p in range(N)])
    for capability, call in (
        ("broadcast", lambda: sim.broadcast(0, "x")),
        ("unicast", lambda: sim.send(0, "x", to=1)),
        ("multicast", lambda: sim.multicast(0, "x", [0, 1])),
    ):
        if capability not in offered:
            before = sim.endpoints[0].snapshot()
            with pytest.raises(LocalError, match=f"does not offer {capability}"):
                call()
            assert sim.endpoints[0].snapshot() == before


def test_a_stack_exposes_exactly_its_top_layer() -> None:
    stack = Stack(Reliable(0, 2), RST(0, 2))
    assert stack.capabilities == {"unicast", "send_many", "can_send"}
    for call in (
        lambda: stack.broadcast("x"),
        lambda: stack.multicast("x", to=[1]),
        lambda: stack.consume(),
    ):
        with pytest.raises(LocalError, match="does not offer"):
            call()
    with pytest.raises(LocalError, match="no send"):
        Stack(Sequencer(0, 2), RST(0, 2))  # a sequencer cannot carry another layer
    with pytest.raises(LocalError, match="not an endpoint"):
        Stack(Reliable(0, 2), object())
    assert "can_send" not in Stack(RST(0, 2)).capabilities
    with pytest.raises(LocalError, match="can_send"):
        Stack(RST(0, 2)).can_send()


@cases
def test_snapshots_taken_mid_run_restore_exactly(name: str) -> None:
    for data in midrun(name):
        ep = restore_endpoint(data)
        assert ep.snapshot() == data
        again = restore_endpoint(json.loads(json.dumps(ep.snapshot())))
        assert [p.explain() for p in again.pending()] == [p.explain() for p in ep.pending()]
        assert again.buffered() == ep.buffered()


@cases
def test_garbage_is_a_remote_error_and_changes_nothing(name: str) -> None:
    ep = restore_endpoint(midrun(name)[1])
    before = ep.snapshot()
    for junk in (None, 42, "x", b"\x00", [1, 2], {"sender": 0}):
        with pytest.raises(RemoteError):
            ep.receive(junk)
        assert ep.snapshot() == before


# -- restore of mutated snapshots: only LocalError ---------------------------------------

JUNK: list[Any] = [None, -1, 2**70, "x", [], {}, True, 1.5, math.nan, [None]]


def _paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(value, dict):
        for k in value:
            yield from _paths(value[k], (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*path, i))


def _set(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    copy = json.loads(json.dumps(data))
    node = copy
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return copy


def _mutations(data: Any, limit: int = 48) -> Iterator[tuple[str, Any, bool]]:
    """Mutations at up to ``limit`` paths, spread over the snapshot (every top-level
    field included)."""
    paths = list(_paths(data))
    top = [p for p in paths if len(p) <= 1]
    rest = [p for p in paths if len(p) > 1]
    step = max(1, len(rest) // max(1, limit - len(top)))
    for path in top + rest[::step]:
        node = data
        for key in path:
            node = node[key]
        for junk in JUNK:
            yield f"{path} = {junk!r}", _set(data, path, junk), _strict(path, junk)
        if isinstance(node, dict):
            extra = {**node, "zzz": 0}
            yield f"{path} + unknown key", _set(data, path, extra), not _in_payload(path)
            for k in node:
                gone = {x: v for x, v in node.items() if x != k}
                yield f"{path} - {k}", _set(data, path, gone), not _in_payload(path)
        if isinstance(node, list) and node:
            yield f"{path} shortened", _set(data, path, node[:-1]), False
            yield f"{path} lengthened", _set(data, path, [*node, node[-1]]), False
        if type(node) is int and not isinstance(node, bool):
            yield f"{path} + 1", _set(data, path, node + 1), False


#: Group snapshot fields that hold application payloads inside flush logs and packets.
GROUP_PAYLOADS = (
    "log",
    "own",
    "outbox",
    "kept",
    "future",
    "promises",
    "value",
    "accepted",
    "last_commit",
)


def _in_payload(path: tuple[Any, ...]) -> bool:
    """Inside an application payload (any JSON data; in Reliable's out rows, [seq, msg,
    payload, ...], the payload may be another layer's packet)."""
    if "payload" in path:
        return True
    if path and path[0] in GROUP_PAYLOADS:
        return True
    if "out" in path:
        at = path.index("out")
        return len(path) > at + 3 and path[at + 3] == 2
    return False


def _strict(path: tuple[Any, ...], junk: Any) -> bool:
    """Whether no snapshot could hold ``junk`` there: absurd counters, strings, dicts,
    NaN and [None] anywhere but in an application payload."""
    if _in_payload(path):
        return False
    return (junk is not None and not isinstance(junk, bool | list | float)) or _nan(junk)


def _nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


@cases
def test_every_mutated_snapshot_restores_or_gives_local_error(name: str) -> None:
    refused = accepted = 0
    for data in midrun(name)[:2]:
        for what, mutated, impossible in _mutations(data):
            try:
                ep = restore_endpoint(mutated)
            except LocalError:
                refused += 1
                continue
            except Exception as exc:  # pragma: no cover - the failure being tested for
                raise AssertionError(f"{name}: {what} raised {exc!r}") from exc
            assert not impossible, f"{name}: {what} was accepted"
            accepted += 1
            # accepted: exactly what snapshot() writes, and a working endpoint
            assert json.dumps(ep.snapshot(), sort_keys=True) == json.dumps(mutated, sort_keys=True)
            try:
                ep.pending()
                ep.buffered()
                ep.next_deadline()
                ep.tick(1.0)
            except MailroomError:
                pass
    assert refused > 0 and accepted + refused > 100


@pytest.mark.parametrize(
    "change",
    [
        {"sent_count": None},
        {"sent_count": -1},
        {"sent_count": True},
        {"duplicates": 2**70},
        {"n": 10**9},
        {"pid": 5},
        {"version": 99},
        {"unknown": 1},
    ],
)
@cases
def test_the_header_is_checked_for_every_protocol(name: str, change: dict[str, Any]) -> None:
    data = midrun(name)[0]
    target = data["layers"][-1] if data["protocol"] == "Stack" else data
    target.update(change)
    try:
        with pytest.raises(LocalError):
            restore_endpoint(data)
    finally:
        _MIDRUN.pop(name)


def test_the_issue_examples_are_local_errors() -> None:
    from mailroom import TaggedCausalBroadcast

    ep = TaggedCausalBroadcast(0, 2, consume="explicit")
    good = ep.snapshot()
    for bad in (
        {**good, "sent_count": None},
        {**good, "sent_count": -1},
        {**good, "unstable": [["x", 1]]},
        {"protocol": "Stack", "layers": 5},
        {"protocol": "Stack", "layers": [good], "rejected": 0},
    ):
        with pytest.raises(LocalError):
            restore_endpoint(bad)
