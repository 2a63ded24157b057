"""``python -m mailroom.net``'s ``run`` in one test process: two members of a group with
checkpoints, traces and counters, then a restart that resumes without sending again."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from pathlib import Path

import pytest

from mailroom.net import cli
from mailroom.trace import check, read_jsonl

from .net_support import listening_sockets, write_group


def _args(folder: Path, peers: Path, pid: int, fd: int, extra: list[str]) -> list[str]:
    return [
        "--pid",
        str(pid),
        "--peers",
        str(peers),
        "--listen-fd",
        str(os.dup(fd)),
        "--trace",
        str(folder / f"t{pid}"),
        "--stats",
        str(folder / f"s{pid}"),
        "--done",
        str(folder / f"d{pid}"),
        "--checkpoint",
        str(folder / f"c{pid}"),
        "--rto",
        "0.2",
        *extra,
    ]


def _group(folder: Path, peers: Path, fds: list[int], extra: list[str]) -> None:
    async def main() -> None:
        stops = [asyncio.Event() for _ in fds]
        runs = [
            asyncio.create_task(
                cli.run(cli.build_parser().parse_args(_args(folder, peers, p, fd, extra)), stop)
            )
            for p, (fd, stop) in enumerate(zip(fds, stops, strict=True))
        ]
        async with asyncio.timeout(60):  # a safety net only
            while not all((folder / f"d{p}").exists() for p in range(len(fds))):
                await asyncio.sleep(0.02)
        for stop in stops:
            stop.set()
        assert await asyncio.gather(*runs) == [0] * len(fds)

    asyncio.run(main())


def test_run_records_resumes_and_counts(tmp_path: Path) -> None:
    socks = listening_sockets(2)
    peers = write_group(tmp_path, socks)
    fds = [s.fileno() for s in socks]
    try:
        _group(tmp_path, peers, fds, ["--count", "5", "--expect", "10"])
        stats = json.loads((tmp_path / "s0").read_text())
        assert stats["sent"] == 5 and stats["delivered"] == 10 and stats["bad_mac"] == 0
        # Started again with the same checkpoints: nothing is sent twice, 5 more each.
        for p in range(2):
            (tmp_path / f"d{p}").unlink()
        _group(tmp_path, peers, fds, ["--count", "10", "--expect", "20"])
        events = [e for p in range(2) for e in read_jsonl(tmp_path / f"t{p}")]
        assert sum(e.kind == "send" for e in events) == 20
        assert sum(e.kind == "deliver" for e in events) == 40
        report = check(events, ["integrity", "fifo", "causal", "liveness"])
        assert report.ok, report.summary()
    finally:
        for s in socks:
            s.close()


def test_bad_arguments_are_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MAILROOM_KEY", raising=False)
    peers = tmp_path / "peers.toml"
    peers.write_text('[peers]\n0 = "127.0.0.1:1"\n')
    assert cli.main(["--pid", "0", "--peers", str(peers)]) == 2  # no key anywhere
    assert "key" in capsys.readouterr().err
    with pytest.raises(Exception, match="PID=SECONDS"):
        cli.parse_delays(["x"])
    monkeypatch.setenv("MAILROOM_KEY", "k" * 32)
    for flag, name in (
        ("--linger", "linger"),
        ("--busy-gap", "busy_gap"),
        ("--max-in-flight", "max_in_flight"),
    ):
        assert cli.main(["--pid", "0", "--peers", str(peers), flag, "-1"]) == 2
        err = capsys.readouterr().err
        assert name in err and len(err.strip().splitlines()) == 1


def test_an_encrypted_group_runs_from_the_command_line(tmp_path: Path) -> None:
    pytest.importorskip("cryptography")
    socks = listening_sockets(2)
    peers = write_group(tmp_path, socks)
    try:
        _group(
            tmp_path,
            peers,
            [s.fileno() for s in socks],
            ["--count", "5", "--expect", "10", "--encrypt", "--sync"],
        )
        stats = json.loads((tmp_path / "s1").read_text())
        assert stats["delivered"] == stats["handed"] == 10 and stats["bad_mac"] == 0
    finally:
        for s in socks:
            s.close()


def test_a_taken_address_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An address already in use is named (host:port), not only "Address already in use"."""
    monkeypatch.setenv("MAILROOM_KEY", "k" * 32)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        peers = tmp_path / "peers.toml"
        peers.write_text(f'[peers]\n0 = "127.0.0.1:{port}"\n1 = "127.0.0.1:1"\n')
        assert cli.main(["--pid", "0", "--peers", str(peers)]) == 2
    err = capsys.readouterr().err.strip()
    assert f"127.0.0.1:{port}" in err and "in use" in err and len(err.splitlines()) == 1
