"""The reliable layer, step by step: numbering, acks, retransmission with backoff,
duplicates, flow control (window, Backpressure, can_send, refusal) and checkpoints."""

from __future__ import annotations

import json

import pytest

from mailroom import (
    CBCAST,
    RST,
    Backpressure,
    Deliver,
    Fifo,
    LocalError,
    Message,
    MessageId,
    Reliable,
    RemoteError,
    Stack,
    Transmit,
)
from mailroom.protocols import CBCASTPacket, ReliableAck, ReliablePacket


def _data(actions: list[object]) -> list[ReliablePacket]:
    return [
        a.packet for a in actions if isinstance(a, Transmit) and type(a.packet) is ReliablePacket
    ]


def test_send_numbers_per_channel_and_names_the_message() -> None:
    r = Reliable(0, 3)
    assert r.send("a", to=1) == [Transmit(1, ReliablePacket(0, 1, 1, 1, 0, "a"), MessageId(0, 1))]
    assert r.send("b", to=2) == [Transmit(2, ReliablePacket(0, 2, 1, 2, 0, "b"), MessageId(0, 2))]
    assert r.send("c", to=1) == [Transmit(1, ReliablePacket(0, 1, 2, 3, 0, "c"), MessageId(0, 3))]
    assert r.retained() == 3
    with pytest.raises(LocalError):
        r.send("x", to=3)


def test_in_order_delivery_acks_and_forgetting() -> None:
    a, b = Reliable(0, 2), Reliable(1, 2)
    p1, p2, p3 = (_data(a.send(x, to=1))[0] for x in "xyz")
    assert b.receive(p2) == [Transmit(0, ReliableAck(1, 0, 0), None, lazy=True)]  # held, ack says 0
    assert b.buffered() == 1
    assert [p.explain() for p in b.pending()] == [
        "P0#2 waits for 1 message from P0 (its 1st packet to P1)"
    ]
    out = b.receive(p1)
    assert out == [
        Deliver(Message(MessageId(0, 1), 0, "x")),
        Deliver(Message(MessageId(0, 2), 0, "y")),
        Transmit(0, ReliableAck(1, 0, 2), None, lazy=True),
    ]
    # a duplicate: acknowledged again
    assert b.receive(p1) == [Transmit(0, ReliableAck(1, 0, 2), None, lazy=True)]
    assert b.duplicates == 1
    assert a.receive(ReliableAck(1, 0, 2)) == []
    assert a.retained() == 1 and a.acked == [0, 2]
    # the ack riding on a data packet the other way forgets p3
    back = _data(b.send("r", to=0))[0]
    b.receive(p3)
    back = ReliablePacket(1, 0, back.seq, back.msg, 3, back.payload)
    a.receive(back)
    assert a.retained() == 0 and a.next_deadline() is None


def test_ack_beyond_what_was_sent_is_a_remote_error_and_changes_nothing() -> None:
    a = Reliable(0, 2)
    a.send("x", to=1)
    before = a.snapshot()
    for bad, words in [
        (ReliableAck(1, 0, 2), "never sent"),
        (ReliableAck(5, 0, 1), "not a process"),
        (ReliableAck(1, 1, 1), "arrived at P0"),
        (ReliableAck(1, 0, -1), "negative"),
        (ReliablePacket(1, 0, 0, 1, 0, "x"), "seq must be at least 1"),
        (ReliablePacket(1, 0, 1, 0, 0, "x"), "message seq must be at least 1"),
        (ReliablePacket(1, 0, 2**60, 1, 0, "x"), "absurdly large"),
        (CBCASTPacket(1, (0, 1), "x"), "expected a ReliablePacket"),
    ]:
        with pytest.raises(RemoteError, match=words):
            a.receive(bad)
        assert a.snapshot() == before


def test_retransmission_with_exponential_backoff() -> None:
    a = Reliable(0, 2, rto=1.0, backoff=2.0, max_rto=3.0)
    a.send("x", to=1)
    assert a.next_deadline() == 0.0  # unarmed: the next tick arms it
    assert a.tick(10.0) == []
    assert a.next_deadline() == 11.0
    assert a.tick(10.5) == []
    retransmits = [a.tick(11.0), a.tick(13.0), a.tick(16.0), a.tick(19.0)]
    assert [len(r) for r in retransmits] == [1, 1, 1, 1]
    assert a.next_deadline() == 22.0  # timeouts 1, 2, 3 (capped), 3, 3
    assert a.retransmissions == 4
    a.receive(ReliableAck(1, 0, 1))
    assert a.next_deadline() is None and a.tick(100.0) == []


def test_arm_within_lets_steady_traffic_skip_the_timer_of_every_send() -> None:
    """With ``arm_within`` the tick that arms new packets' timers may wait that long after
    the last tick: packets acknowledged before it never get a timer; one that is not is
    resent at most rto + arm_within after it was sent. 0 (the default) asks at once."""
    a, b = Reliable(0, 2, rto=1.0, arm_within=0.5), Reliable(1, 2, rto=1.0)
    assert a.tick(5.0) == []
    for _ in range(50):  # each answered at once: nothing to arm, the deadline stays put
        (sent,) = _data(a.send("x", to=1))
        (ack,) = [t.packet for t in b.receive(sent) if isinstance(t, Transmit)]
        a.receive(ack)
        assert a.next_deadline() is None
    a.send("lost", to=1)
    assert a.next_deadline() == 5.5  # within arm_within of the last tick, not at once
    assert a.tick(5.5) == [] and a.next_deadline() == 6.5
    assert len(_data(a.tick(6.5))) == 1  # resent one rto after the arming tick
    at_once = Reliable(0, 2, rto=1.0)
    at_once.tick(5.0)
    at_once.send("y", to=1)
    assert at_once.next_deadline() == 5.0  # the default: the next tick, at once
    restored = Reliable.restore(json.loads(json.dumps(a.snapshot())))
    assert restored.arm_within == 0.5 and "arm_within" not in at_once.snapshot()
    for bad in (-1.0, float("nan"), float("inf"), "0.5", None):
        with pytest.raises(LocalError, match="arm_within"):
            Reliable(0, 2, arm_within=bad)  # type: ignore[arg-type]
    data = a.snapshot()
    data["arm_within"] = -2
    with pytest.raises(LocalError, match="snapshot field arm_within"):
        Reliable.restore(data)


def test_window_backpressure_and_can_send() -> None:
    a = Reliable(0, 2, window=2)
    assert a.can_send(1) and a.can_send()
    assert len(_data(a.send("1", to=1))) == 1
    assert len(_data(a.send("2", to=1))) == 1
    assert not a.can_send(1) and not a.can_send() and a.can_send(0)
    assert a.send("3", to=1) == [Backpressure(1, 1)]
    assert a.send("4", to=1) == [Backpressure(1, 2)]
    with pytest.raises(RemoteError, match="never sent"):
        a.receive(ReliableAck(1, 0, 3))  # packet 3 waits: it was never on the wire
    out = a.receive(ReliableAck(1, 0, 1))  # one slot frees: packet 3 goes out
    assert [p.seq for p in _data(out)] == [3]
    out = a.receive(ReliableAck(1, 0, 3))
    assert [p.seq for p in _data(out)] == [4]
    assert a.can_send(1)


def test_a_flood_past_capacity_is_refused_not_buffered() -> None:
    b = Reliable(1, 2, capacity=4)
    sender = Reliable(0, 2, window=1000)
    packets = [_data(sender.send(i, to=1))[0] for i in range(100)]
    for p in reversed(packets[1:]):
        b.receive(p)
        assert b.buffered() <= 4
    assert b.buffered() == 3 and b.refused == 96  # seq 2..4 held, 5..100 refused
    refused = packets[50]
    before = b.snapshot()
    assert b.receive(refused) == []  # refused: not acknowledged, so it will come again
    assert {k: v for k, v in b.snapshot().items() if k != "refused"} == {
        k: v for k, v in before.items() if k != "refused"
    }
    delivered = b.receive(packets[0])
    assert len([a for a in delivered if isinstance(a, Deliver)]) == 4


def test_snapshot_round_trips_mid_flight_as_json() -> None:
    a, b = Stack(Reliable(0, 3), CBCAST(0, 3)), Stack(Reliable(1, 3), CBCAST(1, 3))
    out = a.broadcast("hello") + a.broadcast([1, {"k": None}])
    a.tick(5.0)
    to_b = [t.packet for t in out if isinstance(t, Transmit) and t.to == 1]
    b.receive(to_b[1])  # held by Reliable: its predecessor is missing
    for ep in (a, b):
        data = json.loads(json.dumps(ep.snapshot()))
        again = Stack.restore(data)
        assert again.snapshot() == ep.snapshot()
    a2 = Stack.restore(json.loads(json.dumps(a.snapshot())))
    assert a.next_deadline() == 8.0
    assert a2.next_deadline() == 0.0  # restored: tick at once, whatever the host's clock
    assert [x.packet for x in a2.tick(8.0)] == [x.packet for x in a.tick(8.0)]
    delivered = b.receive(to_b[0])
    assert [d.message.payload for d in delivered if isinstance(d, Deliver)] == [
        "hello",
        [1, {"k": None}],
    ]


def test_restore_refuses_snapshots_that_do_not_fit() -> None:
    data = Reliable(0, 2).snapshot()
    with pytest.raises(LocalError):
        Reliable.restore({**data, "params": {"window": 0}})
    with pytest.raises(LocalError):
        Reliable.restore({**data, "out": [[[1, 1, "x", True, None, 3.0, 0]], []]})
    with pytest.raises(LocalError):
        Reliable.restore({**data, "acked": [0]})


@pytest.mark.parametrize("upper", [Fifo, RST])
def test_stacks_route_sends_and_report_backpressure(upper: type) -> None:
    a = Stack(Reliable(0, 2, window=1), upper(0, 2))
    first = a.send("x", to=1)
    assert [type(t.packet) for t in first] == [ReliablePacket]
    assert first[0].message_id == MessageId(0, 1)
    assert not a.can_send(1)
    assert a.send("y", to=1) == [Backpressure(1, 1)]
    b = Stack(Reliable(1, 2), upper(1, 2))
    got = b.receive(first[0].packet)
    assert [type(x).__name__ for x in got] == ["Deliver", "Transmit"]


def test_three_layer_stack_fifo_under_cbcast_over_reliable() -> None:
    eps = [Stack(Reliable(p, 2), Fifo(p, 2), CBCAST(p, 2)) for p in range(2)]
    out = eps[0].broadcast("m")
    assert [type(x).__name__ for x in out] == ["Transmit", "Deliver"]
    got = eps[1].receive(out[0].packet)
    assert got[0] == Deliver(Message(MessageId(0, 1), 0, "m"))
    restored = Stack.restore(json.loads(json.dumps(eps[1].snapshot())))
    assert restored.snapshot() == eps[1].snapshot()


def test_garbage_inside_a_reliable_frame_is_counted_by_the_stack() -> None:
    b = Stack(Reliable(1, 2), CBCAST(1, 2))
    bad = ReliablePacket(0, 1, 1, 1, 0, CBCASTPacket(0, (1, 5), "x"))  # claims P1 sent 5
    out = b.receive(bad)
    assert out == [Transmit(0, ReliableAck(1, 0, 1), None, lazy=True)]
    assert b.rejected == 1 and "claims P1" in b.last_rejection
    assert Stack.restore(b.snapshot()).rejected == 1


def test_receive_many_answers_a_batch_with_one_cumulative_ack_per_peer() -> None:
    a0, a2, b = Reliable(0, 3), Reliable(2, 3), Reliable(1, 3)
    batch: list[object] = [_data(a0.send(f"x{k}", to=1))[0] for k in range(3)]
    batch += [_data(a2.send("y", to=1))[0], "garbage"]
    actions, errors = b.receive_many(reversed(batch))
    acks = [t for t in actions if isinstance(t, Transmit)]
    assert sorted((t.to, t.packet.ack) for t in acks) == [(0, 3), (2, 1)]  # type: ignore[attr-defined]
    assert len([x for x in actions if isinstance(x, Deliver)]) == 4
    assert len(errors) == 1 and "expected a ReliablePacket" in str(errors[0])
    stack = Stack(Reliable(1, 3), Fifo(1, 3))
    actions, errors = stack.receive_many([])
    assert actions == [] and errors == []
