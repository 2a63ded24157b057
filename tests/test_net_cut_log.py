"""A checkpoint log cut in the middle (a disk fault without --sync, an operator's
mistake) never makes a process hand a message twice or reuse a message id.

Real OS processes on 127.0.0.1 (slow): a member is killed (SIGKILL) mid-run, its
checkpoint log is cut at every line and in the middle of every line, and each cut
is restored: every cut that lost a step the process acted on (its log's head
counts them) is refused with one line, the others restore; restarted from its
whole log it finishes the run, and ``mailroom check`` finds the traces clean. A
group member whose log was cut rejoins as a new incarnation instead, its ids
counting on after the last one it used: no id is sent twice, nothing is
delivered twice, and the traces check clean.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mailroom.core.errors import LocalError
from mailroom.net import Node
from mailroom.net.cli import make_endpoint
from mailroom.net.store import log_of
from mailroom.trace import Event

from .net_support import KEY, Group, group, live_events, wait_for

pytestmark = pytest.mark.slow


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def _delivered(path: Path) -> int:
    return path.read_text().count('"kind":"deliver"') if path.exists() else 0


def _acted(log: bytes) -> int:
    """The steps the log's head says were written (so, at most, acted on)."""
    head = json.loads(log.split(b"\n", 1)[0].split(b" ", 1)[1])
    steps: int = head["steps"]
    return steps


def _kill_with_a_long_log(g: Group, victim: int, lines: int) -> tuple[Path, bytes]:
    """Kill ``victim`` once its log holds ``lines`` lines; its checkpoint and log."""
    ckpt = g.path("checkpoint", victim)
    wait_for(lambda: _lines(log_of(ckpt)) >= lines, 60, f"P{victim}'s log to grow")
    g.kill(victim)
    return ckpt, log_of(ckpt).read_bytes()


def test_a_log_cut_at_any_line_is_refused_or_restores_what_was_acted_on(tmp_path: Path) -> None:
    count = 60
    args = [
        "--protocol",
        "cbcast",
        "--count",
        str(count),
        "--expect",
        str(3 * count),
        "--interval",
        "0.02",
        "--rto",
        "0.2",
    ]
    with group(tmp_path, 3, args) as g:
        for pid in range(3):
            g.start(pid, ["--checkpoint", str(g.path("checkpoint", pid))])
        ckpt, log = _kill_with_a_long_log(g, 0, 20)
        acted = _acted(log)
        ends = [k + 1 for k, byte in enumerate(log) if byte == ord("\n")]
        cuts = sorted({*ends, *(e - 3 for e in ends[1:]), len(log) // 2})
        copy = tmp_path / "copy"
        shutil.copy(ckpt, copy)
        refused = restored = 0
        for cut in cuts:
            log_of(copy).write_bytes(log[:cut])
            whole = log[:cut].count(b"\n") - 1  # step lines after the head
            endpoint = make_endpoint("cbcast", 0, 3, reliable=True, rto=0.2)
            try:
                Node(endpoint, g.table, KEY, checkpoint=copy)
            except LocalError as exc:
                assert whole < acted, f"a cut at {cut} lost nothing, yet: {exc}"
                assert "\n" not in str(exc)
                refused += 1
            else:
                assert whole >= acted, f"a cut at {cut} lost steps acted on, yet it restored"
                restored += 1
        assert refused >= len(ends) - 2 and restored >= 1
        # The whole log: the process resumes and the run completes clean.
        g.start(0, ["--checkpoint", str(ckpt)])
        g.wait_done(120)
        g.stop()
        checked = g.check()
        assert checked.returncode == 0, checked.stdout + checked.stderr


def _sends(events: list[Event]) -> dict[tuple[int, int], list[object]]:
    sent: dict[tuple[int, int], list[object]] = {}
    for e in events:
        if e.kind == "send":
            sent.setdefault((e.message.origin, e.message.seq), []).append(e.payload)
    return sent


def _view_without(g: Group, pid: int, gone: int) -> bool:
    return any(e.kind == "view" and gone not in e.dest for e in live_events(g.path("trace", pid)))


def _finished(g: Group, count: int) -> bool:
    """Every process sent its last message, the three share a last view, and everything
    sent in it was delivered by all three."""
    traces = {p: live_events(g.path("trace", p)) for p in range(3)}
    for p, events in traces.items():
        if not any(e.kind == "send" and e.payload == {"from": p, "k": count} for e in events):
            return False
    last = {
        p: max((e.view for e in t if e.kind == "view"), default=None) for p, t in traces.items()
    }
    if len(set(last.values())) != 1 or None in last.values():
        return False
    final = last[0]
    sent = {e.message for t in traces.values() for e in t if e.kind == "send" and e.view == final}
    return all(
        sent <= {e.message for e in t if e.kind == "deliver" and e.view == final}
        for t in traces.values()
    )


def test_a_group_member_whose_log_was_cut_rejoins_as_a_new_incarnation(tmp_path: Path) -> None:
    count = 80
    args = [
        "--protocol",
        "cbcast",
        "--count",
        str(count),
        "--interval",
        "0.03",
        "--heartbeat",
        "0.1",
        "--suspect-after",
        "1.5",
        "--rto",
        "0.2",
    ]
    with group(tmp_path, 3, args) as g:
        for pid in range(3):
            g.start(pid, ["--members", "0,1,2", "--checkpoint", str(g.path("checkpoint", pid))])
        wait_for(lambda: _delivered(g.path("trace", 0)) >= 20, 60, "P0 to deliver")
        ckpt, log = _kill_with_a_long_log(g, 0, 12)
        # (restarted before the others exclude it, a member that was the coordinator of
        # its view would be asked to admit itself: wait for the view without it)
        wait_for(lambda: all(_view_without(g, p, 0) for p in (1, 2)), 60, "P0's exclusion")
        acted = _acted(log)
        lines = log.split(b"\n")
        keep = max(1, min(acted, len(lines) - 1) // 2)  # half the steps acted on
        log_of(ckpt).write_bytes(b"\n".join(lines[: keep + 1]) + b"\n")
        g.start(0, ["--members", "0,1,2", "--checkpoint", str(ckpt)])
        wait_for(lambda: _finished(g, count), 240, "the group to finish")
        g.stop()
        output = g.path("log", 0).read_text()
        assert "was cut" in output and "new incarnation" in output, output
        events = g.trace()
        for mid, payloads in _sends(events).items():
            assert len(payloads) == 1, f"{mid} was sent {len(payloads)} times: {payloads}"
        checked = g.check()
        assert checked.returncode == 0, checked.stdout + checked.stderr
