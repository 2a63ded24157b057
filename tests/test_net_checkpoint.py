"""mailroom.net checkpoints: a base plus a log of steps, hostile files, the protocol stack.

- a node restored from base + log has exactly the state of the node that wrote
  them (no ``close``: as after a crash), and a torn last line is dropped; a log
  cut short of the steps its head counts is refused;
- a step writes what it changed (its inputs), not the whole state, however
  large the state grows; compaction keeps the log within a constant factor;
- a checkpoint of another protocol stack is refused, and hostile checkpoint
  files give a one-line CLI error and exit 2, never a traceback.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mailroom.core.errors import LocalError
from mailroom.net import Node, PeerTable, cli
from mailroom.net.store import MIN_LOG, log_of, write_atomic
from mailroom.protocols import CBCAST, Skeen

from .net_support import KEY, listening_sockets, reliable_cbcast, table_of, until, write_group

TABLE = PeerTable.of({0: "127.0.0.1:1", 1: "127.0.0.1:2", 2: "127.0.0.1:3"})


def test_base_plus_log_restores_exactly_the_state_and_drops_a_torn_line(tmp_path: Path) -> None:
    socks = listening_sockets(3)
    table = table_of(socks)
    ckpt = tmp_path / "p0.ckpt"

    async def main() -> Any:
        nodes = [Node(reliable_cbcast(0, 3), table, KEY, listen=socks[0], checkpoint=ckpt)]
        nodes += [Node(reliable_cbcast(p, 3), table, KEY, listen=socks[p]) for p in (1, 2)]
        for node in nodes:
            await node.start()
        for k in range(10):
            for node in nodes:
                node.broadcast({"k": k})
        await until(lambda: all(n.stats.delivered == 30 for n in nodes))
        await asyncio.sleep(0.5)  # let acknowledgements and retransmission timers settle
        state = nodes[0].endpoint.snapshot()
        counters = (nodes[0].stats.sent, nodes[0].stats.delivered)
        for node in nodes[1:]:
            await node.close()
        return state, counters  # P0 is never closed: its files are as after a crash

    state, counters = asyncio.run(main())
    assert log_of(ckpt).stat().st_size > 0
    back = Node(reliable_cbcast(0, 3), TABLE, KEY, checkpoint=ckpt)
    assert back.endpoint.snapshot() == state
    assert (back.stats.sent, back.stats.delivered) == counters
    with open(log_of(ckpt), "ab") as out:
        out.write(b'0badc0de {"ops":[["t",1')  # the crash cut the last write short
    torn = Node(reliable_cbcast(0, 3), TABLE, KEY, checkpoint=ckpt)
    assert torn.endpoint.snapshot() == state


def test_a_step_writes_its_inputs_not_the_whole_state(tmp_path: Path) -> None:
    socks = listening_sockets(3)
    table = table_of(socks)
    ckpt = tmp_path / "p0.ckpt"
    payload = "x" * 4096

    async def main() -> tuple[list[int], int]:
        # P1 and P2 are down: every broadcast stays in the mail room, 300 x 4 KiB.
        node = Node(reliable_cbcast(0, 3), table, KEY, listen=socks[0], checkpoint=ckpt)
        await node.start()
        written = []
        for _ in range(300):
            before = log_of(ckpt).stat().st_size + ckpt.stat().st_size
            node.broadcast(payload)
            node.flush()  # a step now, not with the other sends of this turn
            written.append(log_of(ckpt).stat().st_size + ckpt.stat().st_size - before)
        state = len(json.dumps(node.endpoint.snapshot()))
        await node.close()
        return written, state

    written, state = asyncio.run(main())
    assert state > 2_000_000  # 300 messages kept for two peers
    appends = [w for w in written if 0 < w < 2 * len(payload)]
    # Most steps append about their input; the few compactions rewrite the base.
    assert len(appends) >= 290
    assert sum(written) < 4 * (300 * len(payload) + MIN_LOG) + 2 * state


def _checkpoint_of(endpoint: Any, tmp_path: Path) -> Path:
    path = tmp_path / "c0"
    write_atomic(path, {"endpoint": endpoint.snapshot(), "trace": 0})
    return path


def test_a_checkpoint_of_another_protocol_stack_is_refused(tmp_path: Path) -> None:
    cases = [
        (Skeen(0, 3), reliable_cbcast(0, 3)),  # a Skeen checkpoint under --protocol cbcast
        (CBCAST(0, 3), reliable_cbcast(0, 3)),  # bare CBCAST for a Reliable stack
        (reliable_cbcast(0, 3), CBCAST(0, 3)),  # a Reliable stack for bare CBCAST
    ]
    for saved, fresh in cases:
        path = _checkpoint_of(saved, tmp_path)
        with pytest.raises(LocalError, match="protocol stack"):
            Node(fresh, TABLE, KEY, checkpoint=path)
    path = _checkpoint_of(reliable_cbcast(0, 3), tmp_path)
    assert Node(reliable_cbcast(0, 3), TABLE, KEY, checkpoint=path).stats.sent == 0


def _good() -> dict[str, Any]:
    return {"endpoint": reliable_cbcast(0, 3).snapshot(), "trace": 0}


def _with(path: list[Any], value: Any) -> bytes:
    data = _good()
    where: Any = data
    for key in path[:-1]:
        where = where[key]
    where[path[-1]] = value
    return json.dumps(data).encode()


HOSTILE: dict[str, bytes] = {
    "empty": b"",
    "truncated": json.dumps(_good()).encode()[:100],
    "not UTF-8": b'{"endpoint": "\xff\xfe"}',
    "deeply nested": b"[" * 1_000_000 + b"]" * 1_000_000,
    "a list": b"[1, 2, 3]",
    "sent_count null": _with(["endpoint", "layers", 1, "sent_count"], None),
    "now NaN": json.dumps(_good()).replace('"now": 0.0', '"now": NaN').encode(),
    "now 1e400": json.dumps(_good()).replace('"now": 0.0', '"now": 1e400').encode(),
    "layers a string": _with(["endpoint", "layers"], "Reliable"),
    "an unknown protocol": _with(["endpoint", "protocol"], "Nope"),
    "trace negative": _with(["trace"], -1),
    "stack mistyped": _with(["stack"], [1, 2]),
    "params missing": _with(["endpoint", "layers", 0, "params"], None),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_checkpoint_is_one_line_and_exit_2(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    socks = listening_sockets(3)
    peers = write_group(tmp_path, socks)
    ckpt = tmp_path / "c0"
    ckpt.write_bytes(HOSTILE[name])
    try:
        code = cli.main(
            [
                "--pid",
                "0",
                "--peers",
                str(peers),
                "--checkpoint",
                str(ckpt),
                "--listen-fd",
                str(os.dup(socks[0].fileno())),
            ]
        )
    finally:
        for s in socks:
            s.close()
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err


def test_a_directory_or_a_damaged_log_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    socks = listening_sockets(3)
    peers = write_group(tmp_path, socks)
    (tmp_path / "dir").mkdir()
    ckpt = tmp_path / "c0"
    write_atomic(ckpt, {**_good(), "epoch": 1})
    log_of(ckpt).write_bytes(b'00000000 {"epoch":1}\nnot a line\n00000000 {}\n')
    try:
        for path in [tmp_path / "dir", ckpt]:
            code = cli.main(
                [
                    "--pid",
                    "0",
                    "--peers",
                    str(peers),
                    "--checkpoint",
                    str(path),
                    "--listen-fd",
                    str(os.dup(socks[0].fileno())),
                ]
            )
            err = capsys.readouterr().err
            assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    finally:
        for s in socks:
            s.close()


def test_after_a_crash_the_last_steps_deliveries_are_handed_again_with_the_app_state(
    tmp_path: Path,
) -> None:
    socks = listening_sockets(1)
    table = table_of(socks)
    ckpt = tmp_path / "p0.ckpt"

    async def run(got: list[Any], close: bool) -> Node:
        node = Node(
            CBCAST(0, 1),
            table,
            KEY,
            listen=socks[0].dup(),
            checkpoint=ckpt,
            on_deliver=lambda m: got.append(m.payload),
            app_state=lambda: {"handled": len(got)},
        )
        await node.start()
        if not close:
            node.broadcast("a")
            await until(lambda: got == ["a"])
            return node  # a crash: no close
        await node.close()
        return node

    first: list[Any] = []
    asyncio.run(run(first, close=False))
    # The state saved with the step that delivered "a" was taken before "a" was handed:
    # the restarted node hands "a" again, so the application's state catches up.
    second: list[Any] = []
    back = asyncio.run(run(second, close=True))
    assert back.resumed_state == {"handled": 0}
    assert second == ["a"]
    socks[0].close()


def _logged_run(tmp_path: Path) -> tuple[Path, Any, list[Any]]:
    """A checkpoint (base + log) of P0 in a simulated 3-process CBCAST-over-Reliable
    run, written the way the node writes it, and P0's snapshot after each step."""
    import base64

    from mailroom.core.actions import Transmit
    from mailroom.core.codec import encode
    from mailroom.net.steps import replay_op
    from mailroom.net.store import CheckpointLog

    eps = [reliable_cbcast(p, 3) for p in range(3)]
    base = eps[0].snapshot()
    path = tmp_path / "p0.ckpt"
    ckpt = CheckpointLog(path, None)
    ckpt.compact({"endpoint": base, "stack": ["Reliable", "CBCAST"], "trace": 0})
    states = [base]
    wire: list[Transmit] = []
    ops: list[Any] = [["b", {"k": k}] for k in range(4)] + [["t", 0.5], ["t", 2.0]]
    for op in ops:
        for a in replay_op(eps[0], op):
            if isinstance(a, Transmit):
                wire.append(a)
        ckpt.append([{"ops": [op], "trace": 0, "trace_bytes": 0, "sent": 0, "delivered": 0}])
        states.append(eps[0].snapshot())
        for p in (1, 2):
            wire += [a for a in eps[p].broadcast(f"P{p}") if isinstance(a, Transmit)]
        while wire:  # every packet arrives; P0's receptions are logged steps
            t = wire.pop(0)
            if t.to == 0:
                got = ["r", base64.b64encode(encode(t.packet)).decode()]
                wire += [a for a in replay_op(eps[0], got) if isinstance(a, Transmit)]
                ckpt.append(
                    [{"ops": [got], "trace": 0, "trace_bytes": 0, "sent": 0, "delivered": 0}]
                )
                states.append(eps[0].snapshot())
            else:
                wire += [a for a in eps[t.to].receive(t.packet) if isinstance(a, Transmit)]
    ckpt.close()
    return path, eps[0], states


@given(st.data())
@settings(max_examples=60, deadline=None)
def test_a_cut_log_restores_every_step_acted_on_or_is_refused(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    """The log's head counts the steps written (and so, at most, acted on): a log cut
    anywhere short of its end lost steps acted on and is refused with a one-line
    reason; a line torn after its end (a crash while writing the next step, never
    acted on) is dropped; a flipped byte is refused or restores a state it held."""
    tmp_path = tmp_path_factory.mktemp("log")
    path, _, states = _logged_run(tmp_path)
    raw = log_of(path).read_bytes()
    choice = data.draw(st.sampled_from(["cut", "torn", "flip"]), label="fault")
    if choice == "cut":
        cut = data.draw(st.integers(0, len(raw)), label="at")
        log_of(path).write_bytes(raw[:cut])  # a disk fault or an operator: any prefix
        if cut < len(raw):
            with pytest.raises(LocalError, match=r"cut|head|damaged") as refused:
                Node(reliable_cbcast(0, 3), TABLE, KEY, checkpoint=path)
            assert "\n" not in str(refused.value)
            return
        restored = Node(reliable_cbcast(0, 3), TABLE, KEY, checkpoint=path)
        assert restored.endpoint.snapshot() == states[-1]
        return
    if choice == "torn":
        torn = data.draw(st.binary(min_size=1, max_size=40).filter(lambda b: b"\n" not in b))
        log_of(path).write_bytes(raw + torn)  # the next step, cut short: never acted on
        restored = Node(reliable_cbcast(0, 3), TABLE, KEY, checkpoint=path)
        assert restored.endpoint.snapshot() == states[-1]
        return
    at = data.draw(st.integers(0, len(raw) - 1), label="flip")
    bit = data.draw(st.integers(0, 7), label="bit")
    damaged = bytearray(raw)
    damaged[at] ^= 1 << bit
    log_of(path).write_bytes(bytes(damaged))
    try:
        node = Node(reliable_cbcast(0, 3), TABLE, KEY, checkpoint=path)
    except LocalError:
        return  # refused, with a message naming the file
    assert node.endpoint.snapshot() in states
