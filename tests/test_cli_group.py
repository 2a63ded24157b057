"""``mailroom simulate --group``: crashes and joins from the command line, checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mailroom.cli import main


@pytest.mark.parametrize(
    "protocol", ["cbcast", "sequencer", "skeen", "lamport", "tagged", "rst", "ks"]
)
def test_a_crash_and_a_join_hold_every_promise(
    protocol: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["simulate", "--protocol", protocol, "--group", "-n", "4", "--messages", "80"]
    argv += ["--crash", "0@6", "--join", "4@12", "--delay", "0.5", "2", "--seed", "2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "P0 (crashed): 1: [0, 1, 2, 3]" in out
    p1 = next(line for line in out.splitlines() if line.startswith("  P1: "))
    assert p1.startswith("  P1: 1: [0, 1, 2, 3], 2: [1, 2, 3") and p1.endswith("[1, 2, 3, 4]")
    assert "P0 crashed at t=6: view without it after" in out
    for prop in ("integrity", "view_agreement", "self_inclusion", "same_view", "virtual_synchrony"):
        assert f"{prop} ok" in " ".join(out.split())


def test_the_trace_is_checked_again_by_mailroom_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "group.jsonl"
    argv = ["simulate", "--protocol", "skeen", "--group", "--crash", "2@5", "--loss", "0.05"]
    assert main([*argv, "--trace", str(trace)]) == 0
    header = json.loads(trace.read_text().splitlines()[0])["header"]
    assert "virtual_synchrony" in header["promises"] and header["settings"]["crash"] == [[2, 5.0]]
    capsys.readouterr()
    assert main(["check", str(trace), "--engine", "reference"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "view_agreement ok" in out and "total ok" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--crash", "1@2"], "--crash and --join need --group"),
        (["--group", "--crash", "1@x"], "is not PID@TIME"),
        (["--group", "--crash", "9@2"], "neither a process nor a joiner"),
        (["--group", "--join", "1@2"], "--join takes a new pid"),
        (["--group", "--crash", "1@2", "--crash", "1@3"], "names a pid twice"),
        (["--group", "--heartbeat", "2", "--suspect-after", "1"], "longer than --heartbeat"),
    ],
)
def test_bad_group_options_are_one_line_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["simulate", *argv])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_the_group_demo_tells_the_crash_story(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--protocol", "group"]) == 0
    out = capsys.readouterr().out
    assert "      Bob    delivered m2, m1, m3\n" in out  # m3 reached Bob only...
    assert "      Alice  delivered m1, m2, m3, m4\n" in out  # ...the flush gave it to Alice
    assert "deliver m3 (flush)" in out and "✕ out" in out
    assert (
        "Dave installs view 3 [Alice, Bob, Dave] with the state "
        "(the messages delivered so far: m1, m2, m3, m4)" in out
    )
    verdict = out[out.index("verdict of the reference checkers") :]
    assert "violation" not in verdict and verdict.count(" ok") == 8
