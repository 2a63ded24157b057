"""The node core (``mailroom.net.nodecore``) driven by hand, without an event loop.

- Three cores wired by hand, packets passed between them in an order Hypothesis
  chooses, with broadcasts made between deliveries: CBCAST delivers causally
  (everything a sender had delivered before a broadcast is delivered before it,
  everywhere), the Sequencer in one total order; every message reaches everyone.
- Persist, then act: a step's packets and deliveries come out (``written()``) only
  after its records were handed out to persist (``to_persist()``), the records name
  the inputs (checkpoint log entries, ``entries``), and a write that fails keeps the
  steps for the next one, in order.
- A packet the endpoint refuses is a typed ``RemoteError``, counted; the endpoint is
  as before it.
- The core module imports no asyncio and no socket (checked in a fresh interpreter),
  and these tests run with asyncio's loop factories and lookups made to fail.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import find, given
from hypothesis import strategies as st

from mailroom.core.codec import decode, encode
from mailroom.core.errors import RemoteError
from mailroom.core.messages import Message, MessageId
from mailroom.net import frames as fr
from mailroom.net.entries import Broadcast, Received, entry_of
from mailroom.net.nodecore import NodeCore
from mailroom.net.stats import NetStats, QuietLog
from mailroom.net.steps import Send, Step
from mailroom.net.tracing import Destinations
from mailroom.protocols import CBCAST, Sequencer
from mailroom.protocols.total.sequencer import SequencerOrder
from mailroom.protocols.unordered import Unordered

N = 3


@pytest.fixture(autouse=True)
def no_event_loop(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Any use of asyncio's event loop during a test fails it."""

    def refuse(*args: object, **kwargs: object) -> Any:
        raise AssertionError("the node core used asyncio's event loop")

    for name in ("get_running_loop", "get_event_loop", "new_event_loop", "run"):
        monkeypatch.setattr(asyncio, name, refuse)
    yield


def test_the_core_module_imports_no_asyncio_and_no_socket() -> None:
    code = (
        "import sys, mailroom.net.nodecore; "
        "bad = {'asyncio', 'socket'} & set(sys.modules); assert not bad, bad"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def core_of(endpoint: Any, *, logged: bool = False, coalesce: bool = False) -> NodeCore:
    pid = endpoint.pid
    return NodeCore(
        endpoint,
        Destinations(pid, N, endpoint),
        None,
        NetStats(),
        QuietLog(),
        logged=logged,
        n=N,
        coalesce=coalesce,
    )


def as_batch(send: Send) -> fr.Batch:
    """What a peer's connection would pass on for ``send``: decoded, with its header."""
    data = send.packet if type(send.packet) is bytes else encode(send.packet)
    return [(decode(data), fr.Data(data, send.mid, send.carries))]


class Wired:
    """Cores wired by hand: a shell's pump (persist, then act) and a network whose
    packets wait until the test passes them on."""

    def __init__(self, cores: list[NodeCore]) -> None:
        self.cores = cores
        #: packets in flight: (from, Send)
        self.flight: list[tuple[int, Send]] = []
        self.loops: list[tuple[int, object]] = []
        self.delivered: list[list[MessageId]] = [[] for _ in cores]
        #: every persisted record (the log), and every step acted on, per process
        self.persisted: list[list[Step]] = [[] for _ in cores]

    def pump(self, p: int) -> None:
        core = self.cores[p]
        self.persisted[p] += core.to_persist()
        for step in core.written():
            assert any(step is s for s in self.persisted[p])  # persisted first
            self.flight += [(p, send) for send in step.sends]
            self.loops += [(p, packet) for packet in step.loopback]
            for item in step.handed:
                if type(item) is Message:
                    self.delivered[p].append(item.id)

    def broadcast(self, p: int, payload: str) -> MessageId:
        mid = self.cores[p].broadcast(payload)
        self.cores[p].flush()
        self.pump(p)
        return mid

    def pass_on(self, k: int) -> None:
        if self.loops:
            p, packet = self.loops.pop(0)
            self.cores[p].loopback(packet)
            self.pump(p)
            return
        sender, send = self.flight.pop(k)
        errors = self.cores[send.to].receive(sender, as_batch(send))
        assert errors == []
        self.pump(send.to)

    def drain(self) -> None:
        while self.flight or self.loops:
            self.pass_on(0)


schedules = st.lists(st.tuples(st.booleans(), st.integers(0, 2), st.integers(0, 50)), max_size=40)


def causal_violations(make: Callable[[int], Any], schedule: list[tuple[bool, int, int]]) -> int:
    """Deliveries, by cores of ``make``'s endpoints run along ``schedule``, that come
    before part of their causal past (or are missing, or twice)."""
    net = Wired([core_of(make(p)) for p in range(N)])
    past: dict[MessageId, set[MessageId]] = {}
    for send, p, k in schedule:
        if send or not net.flight:
            before = set(net.delivered[p])
            past[net.broadcast(p, f"m{len(past)}")] = before
        else:
            net.pass_on(k % len(net.flight))
    net.drain()
    bad = 0
    for p in range(N):
        got = net.delivered[p]
        bad += sorted(got) != sorted(past)  # every message, once
        bad += sum(not past[mid] <= set(got[:at]) for at, mid in enumerate(got))
    return bad


@given(schedules)
def test_cbcast_cores_deliver_causally_whatever_the_order_of_packets(
    schedule: list[tuple[bool, int, int]],
) -> None:
    assert causal_violations(lambda p: CBCAST(p, N), schedule) == 0


def test_the_causal_check_catches_cores_that_do_not_order() -> None:
    found = find(schedules, lambda s: causal_violations(lambda p: Unordered(p, N), s) > 0)
    assert found


@given(schedules)
def test_sequencer_cores_deliver_in_one_total_order(
    schedule: list[tuple[bool, int, int]],
) -> None:
    net = Wired([core_of(Sequencer(p, N)) for p in range(N)])
    sent: list[MessageId] = []
    for send, p, k in schedule:
        if send or not net.flight:
            sent.append(net.broadcast(p, f"m{len(sent)}"))
        else:
            net.pass_on(k % len(net.flight))
    net.drain()
    assert sorted(net.delivered[0]) == sorted(sent)
    assert net.delivered[1] == net.delivered[0] == net.delivered[2]


def test_a_steps_packets_come_out_only_after_its_records() -> None:
    a, b = core_of(CBCAST(0, N), logged=True), core_of(CBCAST(1, N), logged=True)
    mid = a.broadcast("x")
    assert a.written() == []  # nothing to act on before it was handed out to persist
    steps = a.to_persist()
    assert len(steps) == 1 and steps[0].sends and steps[0].handed
    (record,) = steps[0].ops
    assert entry_of(record) == Broadcast.of("x")  # the input, as the log keeps it
    # the write failed: the step waits, and comes again with the next one, in order
    mid2 = a.broadcast("y")
    again = a.to_persist()
    assert again[0] is steps[0] and len(again) == 2
    acted = a.written()
    assert acted == again and a.to_persist() == [] and a.written() == []
    assert [m.id for s in acted for m in s.handed if type(m) is Message] == [mid, mid2]
    # the receiver's step records what arrived before it delivers
    b.receive(0, as_batch(acted[0].sends[0]))
    (got,) = b.to_persist()
    assert isinstance(entry_of(got.ops[0]), Received) and [m.id for m in got.handed] == [mid]


def test_a_lot_of_gathered_sends_is_one_step_when_its_turn_ends() -> None:
    core = core_of(Sequencer(1, N), coalesce=True)
    ids = [core.broadcast(f"m{k}") for k in range(5)]
    assert core.wake() == 0.0 and core.wake() is None  # said once: at the end of the turn
    assert core.to_persist() == []  # gathered, not a step yet
    assert core.end_turn()
    (step,) = core.to_persist()
    assert ids == [MessageId(1, k) for k in range(1, 6)]
    assert {send.to for send in step.sends} == {0}  # one request batch to the sequencer


def test_a_refused_packet_is_a_typed_error_and_changes_nothing() -> None:
    core = core_of(CBCAST(1, N), logged=True)
    core.broadcast("mine")
    core.to_persist()
    core.written()
    before = core.endpoint.snapshot()
    alien = SequencerOrder(1, 0, 1, "forged")  # not a packet a CBCAST endpoint takes
    data = encode(alien)
    errors = core.receive(0, [(decode(data), fr.Data(data, MessageId(0, 1), fr.BROADCAST))])
    assert len(errors) == 1 and isinstance(errors[0], RemoteError)
    assert core.stats.remote_errors == 1
    assert core.endpoint.snapshot() == before
    (step,) = core.to_persist()
    assert step.sends == [] and step.handed == []


def test_the_timer_is_the_endpoints_next_deadline() -> None:
    from mailroom.core.stack import Stack
    from mailroom.protocols import Reliable

    core = core_of(Stack(Reliable(0, N, rto=0.5), CBCAST(0, N)))
    core.broadcast("x")
    core.to_persist()
    core.written()
    for _ in range(2):  # the first deadline arms the retransmission clock
        deadline = core.get_timer()
        assert deadline is not None
        core.handle_timer(deadline)
    *_, step = core.to_persist()  # unacknowledged after rto: sent again
    assert {send.to for send in step.sends} == {1, 2} and core.get_timer() is not None
