"""A growable group found from seed addresses; the status endpoint, the metrics and the
quorum-loss line of a running member.

Real OS processes on 127.0.0.1 (slow): three founders that know only each other's
addresses as seeds (no peer table), then three joiners that know one seed address
each: the group grows from 3 to 6 members, every member learns every address from
the views, ``mailroom status`` and ``/metrics`` describe a running member, and
``mailroom check`` (no options) finds all six traces clean. In one process (fast):
the directory and the probes, a restarted coordinator let back in, quorum loss
stated at a bounded rate and in the status, bad options as one-line errors.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import mailroom
from mailroom.core.errors import LocalError
from mailroom.net import Node, PeerTable, group_endpoint
from mailroom.net.cli import main
from mailroom.net.discovery import Directory, Probe, Roster, format_address
from mailroom.net.service import QUORUM_LOG_EVERY
from mailroom.net.status import node_status, render

from .net_support import KEY, Group, listening_sockets, live_events, mailroom_check, wait_for

HEARTBEAT = 0.1
SUSPECT_AFTER = 1.5
STAGE = 40 * SUSPECT_AFTER + 20  # a safety net only: far above any expected wait


class Seeded(Group):
    """Processes of a growable group: ``--size`` and ``--seeds``, no peer table."""

    def __init__(self, folder: Path, n: int, args: Sequence[str]) -> None:
        super().__init__(folder, n, args)
        self.address = [format_address(s.getsockname()[:2]) for s in self.socks]

    def start(self, pid: int, extra: Sequence[str] = (), max_files: int | None = None) -> None:
        fd = self.socks[pid].fileno()
        cmd = [
            sys.executable,
            "-m",
            "mailroom",
            "node",
            "--pid",
            str(pid),
            "--size",
            str(self.n),
            "--key-file",
            str(self.folder / "group.key"),
            "--listen-fd",
            str(fd),
            "--trace",
            str(self.path("trace", pid)),
            "--stats",
            str(self.path("stats", pid)),
            *self.args,
            *extra,
        ]
        log = open(self.path("log", pid), "ab")  # noqa: SIM115
        self.procs[pid] = subprocess.Popen(cmd, pass_fds=(fd,), stdout=log, stderr=log)
        log.close()

    def views(self, pid: int) -> list[tuple[int, tuple[int, ...]]]:
        return [
            (e.message.seq, e.dest)
            for e in live_events(self.path("trace", pid))
            if e.kind == "view"
        ]

    def printed(self, pid: int, prefix: str) -> str | None:
        """The address a process printed after ``prefix`` (its status or metrics)."""
        log = self.path("log", pid)
        for line in log.read_text().splitlines() if log.exists() else []:
            if line.startswith(prefix):
                return line[len(prefix) :].strip()
        return None


def _settled(g: Seeded, count: int) -> bool:
    """All six in the same six-member view, every message sent, and each delivered every
    message sent in that view."""
    traces = {p: live_events(g.path("trace", p)) for p in range(g.n)}
    last = {p: [e for e in t if e.kind == "view"][-1:] for p, t in traces.items()}
    if not all(last.values()) or len({v[0].message.seq for v in last.values()}) != 1:
        return False
    final = last[0][0]
    sends = [e for t in traces.values() for e in t if e.kind == "send"]
    if final.dest != tuple(range(g.n)) or len(sends) != g.n * count:
        return False
    in_final = {e.message for e in sends if e.view == final.view}
    return all(
        {e.message for e in t if e.kind == "deliver" and e.view == final.view} == in_final
        for t in traces.values()
    )


@pytest.mark.slow
def test_a_group_grows_from_three_to_six_members_by_seed_address(tmp_path: Path) -> None:
    count = 20
    args = [
        "--protocol",
        "cbcast",
        "--count",
        str(count),
        "--interval",
        "0.05",
        "--heartbeat",
        str(HEARTBEAT),
        "--suspect-after",
        str(SUSPECT_AFTER),
        "--rto",
        "0.2",
    ]
    g = Seeded(tmp_path, 6, args)
    try:
        founders = ",".join(g.address[:3])
        for pid in range(3):  # the founders know each other's addresses as seeds only
            extra = ["--members", "0,1,2", "--seeds", founders]
            if pid == 0:
                extra += ["--status", "127.0.0.1:0", "--metrics", "127.0.0.1:0"]
            g.start(pid, extra)
        # view 1 on an idle machine; on a loaded one a founder that starts late may be
        # excluded and rejoin first (a later view of the same three)
        wait_for(lambda: _formed(g), STAGE, "the founders to install a view of all three")
        for pid in range(3, 6):  # each joiner knows one address, not its owner's pid
            g.start(pid, ["--join", "--seeds", g.address[pid - 2]])
            wait_for(lambda p=pid: bool(g.views(p)), STAGE, f"P{pid} to be let in")  # type: ignore[misc]
        wait_for(lambda: _settled(g, count), STAGE * 3, "the six members to deliver everything")

        # The status endpoint and the metrics of a running member (P0).
        status = g.printed(0, "status at ")
        metrics = g.printed(0, "metrics at ")
        assert status is not None and metrics is not None
        shown = subprocess.run(
            [sys.executable, "-m", "mailroom", "status", status],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert shown.returncode == 0, shown.stderr
        final = g.views(0)[-1][0]
        assert f"in view {final} [0, 1, 2, 3, 4, 5]" in shown.stdout, shown.stdout
        assert re.search(
            r"members and incarnations: P0#\d+, P1#\d+, P2#\d+, P3#0, P4#0, P5#0", shown.stdout
        ), shown.stdout
        assert "quorum: LOST" not in shown.stdout
        data = json.loads(
            subprocess.run(
                [sys.executable, "-m", "mailroom", "status", "--json", status],
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            ).stdout
        )
        assert data["group"]["view"]["members"] == list(range(6)) and data["growable"]
        assert {link["peer"] for link in data["links"] if link["connected"]} == {1, 2, 3, 4, 5}
        assert data["addresses"] == {str(p): g.address[p] for p in range(6)}
        assert data["held"] == 0 and data["stats"]["delivered"] > 0
        with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=30) as answer:
            text = answer.read().decode()
        samples = _samples(text)
        assert samples["mailroom_view_members"] == 6
        assert samples["mailroom_view_id"] == final
        assert samples["mailroom_links_connected"] == 5
        assert samples["mailroom_messages_delivered_total"] == data["stats"]["delivered"] or (
            samples["mailroom_messages_delivered_total"] >= data["stats"]["delivered"]
        )
        assert samples["mailroom_waiting_for_majority"] == 0
        g.stop()
        # Each of the six traces checks clean against what its header promises.
        checked = mailroom_check([g.path("trace", p) for p in range(6)])
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert "view_agreement" in checked.stdout
        joiners = {p: g.views(p)[0] for p in range(3, 6)}
        assert [members for _, members in joiners.values()] == [
            (0, 1, 2, 3),
            (0, 1, 2, 3, 4),
            (0, 1, 2, 3, 4, 5),
        ]
    finally:
        g.cleanup()


def _formed(g: Seeded) -> bool:
    """The three founders' last views are one view of all three."""
    last = [g.views(p)[-1:] for p in range(3)]
    return all(v and v[0][1] == (0, 1, 2) for v in last) and len({v[0][0] for v in last}) == 1


@pytest.mark.slow
def test_a_coordinator_killed_and_restarted_at_once_is_let_back_in(tmp_path: Path) -> None:
    """``kill -9`` of P0, the coordinator, and its restart with ``--join`` before the
    others suspect it: they let its old incarnation go and its next one in (before
    this was fixed they forwarded its Join to the joiner itself and stalled), and the
    traces check clean."""
    count = 100
    # suspected after 5 s: the restart (a new Python process) comes well within that
    args = [
        "--protocol",
        "cbcast",
        "--count",
        str(count),
        "--interval",
        "0.03",
        "--heartbeat",
        str(HEARTBEAT),
        "--suspect-after",
        "5",
        "--rto",
        "0.2",
    ]
    g = Group(tmp_path, 3, args)
    try:
        ckpt = [str(g.path("checkpoint", p)) for p in range(3)]
        for p in range(3):
            g.start(p, ["--members", "0,1,2", "--checkpoint", ckpt[p]])

        def views(p: int) -> list[tuple[int, tuple[int, ...]]]:
            return [
                (e.message.seq, e.dest) for e in live_events(g.path("trace", p)) if e.kind == "view"
            ]

        wait_for(lambda: all(views(p) for p in range(3)), STAGE, "view 1 everywhere")
        wait_for(
            lambda: g.path("trace", 0).read_text().count('"deliver"') >= 20, STAGE, "P0 to deliver"
        )
        g.kill(0)
        g.start(0, ["--join", "1,2", "--checkpoint", ckpt[0]])

        def back() -> bool:
            last = [views(p)[-1] for p in range(3)]
            return len(set(last)) == 1 and last[0][0] > 1 and last[0][1] == (0, 1, 2)

        wait_for(back, STAGE, "P0's next incarnation in a view with P1 and P2")
        # view 2 lets the old incarnation go, view 3 admits the new one (nobody suspected P0:
        # its Joins kept it heard from, so before the fix this never happened)
        assert views(1) == views(2) == [(1, (0, 1, 2)), (2, (1, 2)), (3, (0, 1, 2))]
        wait_for(
            lambda: all(g.path("trace", p).read_text().count('"send"') >= count for p in range(3)),
            STAGE * 3,
            "every send",
        )
        g.stop()
        checked = mailroom_check([g.path("trace", p) for p in range(3)])
        assert checked.returncode == 0, checked.stdout + checked.stderr
    finally:
        g.cleanup()


def _samples(text: str) -> dict[str, float]:
    from prometheus_client.parser import text_string_to_metric_families

    return {
        s.name: s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.labels.get("reason") is None
    }


# -- in one process ------------------------------------------------------------------------
def _until(predicate: Any, what: str, timeout: float = 30.0) -> Any:
    async def poll() -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            await asyncio.sleep(0.01)

    return poll()


def test_a_directory_learns_first_hand_over_second_hand_and_a_table_stays_fixed() -> None:
    table = PeerTable({}, size=4, seeds=(("127.0.0.1", 7000),))
    d = Directory(table, 0, ("127.0.0.1", 7000))
    assert d.identities() == {0, 1, 2, 3} and d.host_of(1) is None
    assert d.learn(1, ("127.0.0.1", 7001), first_hand=False)
    assert not d.learn(1, ("127.0.0.1", 7009), first_hand=False)  # second-hand: a gap only
    assert d.learn(1, ("127.0.0.1", 7002), first_hand=True)  # its own word: it moved
    assert d.learn(2, ("127.0.0.1", 7002), first_hand=True)  # another took the address:
    # P1's entry stays until P1 says where it is (the handshake tells the two apart)
    assert d.entries() == {0: "127.0.0.1:7000", 1: "127.0.0.1:7002", 2: "127.0.0.1:7002"}
    assert d.learn(2, ("127.0.0.1", 7000), first_hand=True)  # P0's own address, claimed
    assert d.entries()[0] == "127.0.0.1:7000"  # P0's own entry is not another's to change
    assert not d.learn(7, ("127.0.0.1", 7003), first_hand=True)  # no such pid
    fixed = Directory(PeerTable.of({0: "127.0.0.1:7000", 1: "127.0.0.1:7001"}), 0)
    assert not fixed.learn(1, ("127.0.0.1", 7005), first_hand=True)
    assert fixed.identities() == {0, 1} and fixed.host_of(1) == "127.0.0.1"
    with pytest.raises(LocalError, match="no address"):
        Directory(table, 3)
    with pytest.raises(LocalError, match="below the group's size"):
        PeerTable({5: ("127.0.0.1", 1)}, size=4)


def test_founders_and_joiners_find_each_other_and_a_restarted_coordinator_gets_back_in() -> None:
    """P0 founds alone; P1 and P2 join knowing only P0's address; then P0 (the
    coordinator) is closed and restarted as its next incarnation before anyone suspects
    it, knowing only P2's address: it is let back in (not asked to admit itself)."""
    socks = listening_sockets(3)
    seed = socks[0].getsockname()[:2]

    def node(p: int, seeds: tuple[Any, ...], members: Any = None, incarnation: int = 0) -> Node:
        ep = group_endpoint("cbcast", p, 4, members=members, heartbeat=0.05, suspect_after=5.0)
        ep.group.incarnation = incarnation
        ep.group.sent_count = 10 * incarnation  # a restart counts its ids on
        listen = socket.socket(fileno=os.dup(socks[p].fileno()))  # a restart uses it again
        return Node(ep, PeerTable({}, size=4, seeds=seeds), KEY, listen=listen)

    async def scenario() -> list[Node]:
        nodes = [node(0, (seed,), members=[0])]
        await nodes[0].start()
        for p in (1, 2):
            nodes.append(node(p, (seed,)))
            await nodes[p].start()
            await _until(lambda p=p: nodes[p].joined, f"P{p} to join")  # type: ignore[misc]
        assert nodes[2].view is not None and nodes[2].view.members == (0, 1, 2)
        assert all(n.directory.entries() == nodes[0].directory.entries() for n in nodes)
        await nodes[0].close()
        again = node(0, (socks[2].getsockname()[:2],), incarnation=1)
        await again.start()
        nodes[0] = again
        await _until(lambda: again.joined, "P0's next incarnation to be let in", timeout=20)
        assert again.view is not None and again.view.members == (0, 1, 2)
        assert nodes[1].endpoint.group.status().incarnations == (1, 0, 0)
        for n in nodes:
            await n.close()
        return nodes

    try:
        asyncio.run(scenario())
    finally:
        for s in socks:
            s.close()


def test_quorum_loss_is_logged_at_a_bounded_rate_and_shown_in_the_status(
    caplog: pytest.LogCaptureFixture,
) -> None:
    socks = listening_sockets(3)
    peers = PeerTable.of({p: format_address(s.getsockname()[:2]) for p, s in enumerate(socks)})

    def member(p: int) -> Node:
        ep = group_endpoint("cbcast", p, 3, members=[0, 1, 2], heartbeat=0.05, suspect_after=0.3)
        return Node(ep, peers, KEY, listen=socks[p])

    async def scenario() -> tuple[dict[str, Any], int, int]:
        nodes = [member(p) for p in range(3)]
        for n in nodes:
            await n.start()
        await _until(
            lambda: all(
                n.transport.links()[q].conn is not None for n in nodes for q in n.transport.links()
            ),
            "every link",
        )
        for n in nodes[1:]:
            await n.close()  # two of three gone: the survivor is a minority
        survivor = nodes[0]
        await _until(lambda: survivor.service.quorum_lines >= 1, "the quorum-loss line")
        data = node_status(survivor)
        service = survivor.service
        lines = service.quorum_lines
        at = service.quorum_said
        assert at is not None
        for k in range(5):  # looks within the bound say nothing more
            service.look(at + k * QUORUM_LOG_EVERY / 10)
        within = service.quorum_lines
        service.look(at + QUORUM_LOG_EVERY)
        after = service.quorum_lines - lines
        await survivor.close()
        return data, within - lines, after

    caplog.set_level(logging.WARNING, logger="mailroom.net")
    try:
        data, within, after = asyncio.run(scenario())
    finally:
        for s in socks:
            s.close()
    assert (within, after) == (0, 1)
    said = [r.getMessage() for r in caplog.records if "waiting for a majority" in r.getMessage()]
    assert said and "WAITING FOR A MAJORITY" in said[0] and "1 of 3 members would stay" in said[0]
    assert data["group"]["waiting_for_majority"] and data["group"]["suspects"] == [1, 2]
    assert "quorum: LOST" in render(data)
    build = "compiled with mypyc" if mailroom.compiled else "pure Python"
    assert data["build"] == build and f"build: {build}" in render(data).splitlines()


def test_probes_and_rosters_round_trip_the_codec() -> None:
    from mailroom.core.codec import decode, encode

    for p in (Probe(3, "127.0.0.1:7003"), Roster(0, 4, (0, 1, 2), (0, 2), ("a:1", "b:2"))):
        assert decode(encode(p)) == p


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--size", "4", "--join", "--pid", "9"], "pid must be"),
        (["--pid", "1", "--join"], "pass --peers"),
        (["--pid", "1", "--size", "0", "--join"], "size must be"),
        (["--pid", "1", "--size", "4", "--seeds", "nowhere", "--join"], "not host:port"),
        (
            [
                "--pid",
                "1",
                "--size",
                "4",
                "--join",
                "--status",
                "0.0.0.0:0",
                "--address",
                "127.0.0.1:1",
            ],
            "loopback",
        ),
    ],
)
def test_bad_discovery_and_status_options_are_one_line_errors(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MAILROOM_KEY", KEY.decode())
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1, err
