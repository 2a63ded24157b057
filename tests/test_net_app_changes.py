"""An application's data kept as its changes (``NodeConfig.app_changes``): each step's
checkpoint record holds what the data gained, not the data whole, and a restart gives
the data back exactly, failed writes included; the replicated objects keep their log
this way. Real nodes on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import attrs
import pytest

from mailroom.core.errors import LocalError
from mailroom.core.messages import Message
from mailroom.net import Node, NodeConfig
from mailroom.net.journal import restore
from mailroom.net.store import CheckpointLog, log_of, read_checkpoint
from mailroom.protocols.membership import Group
from mailroom.replicated import ReplDict
from mailroom.replicated.aiohost import AsyncReplica

from .net_support import KEY, listening_sockets, reliable_cbcast, table_of, until


class Ledger:
    """An application whose data is the payloads it was handed, in order."""

    def __init__(self, start: list[Any] | None = None) -> None:
        self.items: list[Any] = list(start or [])
        self._told = len(self.items)

    def deliver(self, m: Message) -> None:
        self.items.append(m.payload)

    def whole(self) -> list[Any]:
        self._told = len(self.items)
        return list(self.items)

    def changes(self) -> list[Any]:
        out = self.items[self._told :]
        self._told = len(self.items)
        return out


def crash_copy(checkpoint: Path, folder: Path) -> Path:
    """A copy of a running node's checkpoint and log, as a crash now would leave them."""
    folder.mkdir()
    for path in (checkpoint, log_of(checkpoint)):
        shutil.copyfile(path, folder / path.name)
    return folder / checkpoint.name


def records(checkpoint: Path) -> list[dict[str, Any]]:
    """The step records of a checkpoint's log: after its head, each line a checksum and
    a record."""
    lines = log_of(checkpoint).read_bytes().splitlines()[1:]
    return [json.loads(line.split(b" ", 1)[1]) for line in lines if line.strip()]


def test_a_write_of_several_steps_hands_all_their_deliveries_again(tmp_path: Path) -> None:
    # Steps that waited while writes failed are written as one, the application's data
    # as of before the first: a restart hands the deliveries of all of them again. The
    # log of a real run, its last two steps made one write (as a retry writes them).
    socks = listening_sockets(3)
    table = table_of(socks)
    ckpt = tmp_path / "p0.ckpt"

    async def main() -> Path:
        app = Ledger()
        others = [Node(reliable_cbcast(p, 3), table, KEY, listen=socks[p]) for p in (1, 2)]
        nodes = [
            Node(
                reliable_cbcast(0, 3),
                table,
                KEY,
                listen=socks[0],
                checkpoint=ckpt,
                on_deliver=app.deliver,
                app_state=app.whole,
            ),
            *others,
        ]
        for node in nodes:
            await node.start()
        for burst in range(3):
            for k in range(5):
                nodes[1].broadcast(f"b{burst}.{k}")
            await until(lambda want=5 * (burst + 1): len(app.items) == want)
        crashed = crash_copy(ckpt, tmp_path / "crashed")
        for node in nodes:
            await node.close()
        return crashed

    saved = read_checkpoint(asyncio.run(main()))
    assert saved is not None
    fresh = reliable_cbcast(0, 3)

    def handed_again(steps: list[dict[str, Any]]) -> list[Any]:
        done = restore(attrs.evolve(saved, steps=steps), fresh, "copy", None)
        return [m.payload for m in done.redelivered]

    # the last two steps that delivered, each alone the last write of a shorter log
    last, before = [k for k in range(len(saved.steps)) if handed_again(saved.steps[: k + 1])][-2:][
        ::-1
    ]
    alone = [handed_again(saved.steps[: k + 1]) for k in (before, last)]
    assert all(alone) and alone[0] != alone[1]
    steps = saved.steps[: last + 1]
    steps[before] = {**steps[before], "batch": last - before + 1}  # one write from there
    assert handed_again(steps) == alone[0] + alone[1]


@pytest.mark.parametrize("kept", ["changes", "whole", "changes, compactions failing"])
def test_steps_keep_what_the_data_gained_and_a_restart_gives_it_back_failed_writes_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kept: str
) -> None:
    # Writes fail while messages come: the steps wait and are written as one, the data
    # saved with them as of before the first (their deliveries are handed again at a
    # restart, all of them, not only the last step's); the copy is what a kill -9 leaves.
    socks = listening_sockets(3)
    table = table_of(socks)
    ckpt = tmp_path / "p0.ckpt"
    failing = {"left": 0}
    real_append = CheckpointLog.append

    def append(self: CheckpointLog, recs: list[Any], *tail: Any) -> None:
        if self.path == ckpt and failing["left"] > 0:
            failing["left"] -= 1
            raise OSError(28, "No space left on device")
        real_append(self, recs, *tail)

    monkeypatch.setattr(CheckpointLog, "append", append)
    if kept.endswith("failing"):  # a compaction after every step, failing after the first
        real_compact, tries = CheckpointLog.compact, {"n": 0}

        def compact(self: CheckpointLog, *args: Any) -> None:
            tries["n"] += 1
            if self.path == ckpt and tries["n"] > 1:
                raise OSError(28, "No space left on device")
            real_compact(self, *args)

        monkeypatch.setattr(CheckpointLog, "compact", compact)
        monkeypatch.setattr(CheckpointLog, "wants_compaction", lambda self: self.path == ckpt)

    def node0(app: Ledger, checkpoint: Path = ckpt) -> Node:
        return Node(
            reliable_cbcast(0, 3),
            table,
            KEY,
            listen=socks[0].dup(),
            checkpoint=checkpoint,
            on_deliver=app.deliver,
            app_state=app.whole,
            app_changes=None if kept == "whole" else app.changes,
        )

    async def main() -> tuple[list[Any], list[dict[str, Any]], Ledger, list[Any]]:
        app = Ledger()
        others = [Node(reliable_cbcast(p, 3), table, KEY, listen=socks[p]) for p in (1, 2)]
        nodes = [node0(app), *others]
        for node in nodes:
            await node.start()
        for k in range(20):
            nodes[1 + k % 2].broadcast(f"m{k}")
            await asyncio.sleep(0.005)  # several steps, not one
        await until(lambda: len(app.items) == 20)
        failing["left"] = 3  # changes taken for these writes must not be lost
        for k in range(20, 40):
            nodes[1 + k % 2].broadcast(f"m{k}")
        await until(lambda: len(app.items) == 40 and failing["left"] == 0)
        crashed = crash_copy(ckpt, tmp_path / "crashed")  # what a kill -9 now would leave
        held, logged = list(app.items), records(crashed)
        for node in nodes:
            await node.close()
        again = Ledger()
        back = node0(again, crashed)  # the application as a restarted process builds it
        resumed = [back.resumed_state, back.resumed_changes]
        again.items = list(back.resumed_state or []) + back.resumed_changes
        await back.start()  # hands the last step's deliveries again
        await until(lambda: len(again.items) >= 40)
        await back.close()
        return held, logged, again, resumed

    held, logged, again, resumed = asyncio.run(main())
    assert again.items == held  # nothing lost, nothing twice
    if kept != "changes":
        return
    whole = [r for r in logged if "app" in r]
    gained = [r for r in logged if "app_log" in r]
    # Only a record after the base may hold the data whole (the first, a new start's);
    # every other step that changed it keeps what it gained, each payload once.
    assert len(whole) <= 1 and (not whole or whole[0] is logged[0])
    assert len(gained) >= 5
    told = [x for r in gained for x in r["app_log"]]
    assert len(told) == len(set(told))
    assert resumed[1] == told[len(told) - len(resumed[1]) :]


def test_app_changes_needs_app_state() -> None:
    with pytest.raises(LocalError, match="app_changes needs app_state"):
        NodeConfig(app_changes=lambda: [])


def test_a_replica_keeps_its_log_as_entries_and_restarts_from_them(tmp_path: Path) -> None:
    socks = listening_sockets(2)
    peers = table_of(socks)

    def replica(p: int, checkpoint: Path) -> AsyncReplica:
        group = Group(p, 2, "sequencer", members=[0, 1], reliable=True, retry=0.1, safe=True)
        return AsyncReplica(
            ReplDict(), group, peers, KEY, listen=socks[p].dup(), safe=True, checkpoint=checkpoint
        )

    async def main() -> tuple[list[Any], list[Any], list[dict[str, Any]]]:
        rs = [replica(p, tmp_path / f"r{p}.ckpt") for p in (0, 1)]
        for r in rs:
            await r.start()
        for k in range(20):  # a log below the size at which the node compacts it
            await rs[k % 2].call("set", f"key{k}", "v" * 40)
        await until(lambda: rs[0].local("items") == rs[1].local("items"))
        before = rs[0].local("items")
        crashed = crash_copy(tmp_path / "r0.ckpt", tmp_path / "crashed")
        logged = records(crashed)
        for r in rs:
            await r.close()
        back = replica(0, crashed)  # the replica as its checkpoint and entries say
        await back.start()  # with the last step's deliveries handed again
        after = back.local("items")
        await back.close()
        return before, after, logged

    before, after, logged = asyncio.run(main())
    assert after == before and len(before) == 20
    assert sum("app" in r for r in logged) <= 1  # the replica's checkpoint whole: once
    entries = [e for r in logged for e in r.get("app_log", [])]
    assert len(entries) >= 10 and all(e[0] in ("m", "x", "v") for e in entries)
