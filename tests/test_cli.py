"""The mailroom command: demo, simulate, check, and clear errors for bad arguments."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mailroom.cli import main


def _exit_code(argv: list[str]) -> int | str | None:
    """The command's exit code, whether it returns it or raises SystemExit."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def test_demo_tells_the_story(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    # Unordered: Carol delivers m3 first and the checker and detector say so
    parts = out.split("=" * 78)  # banner, title, banner, body, ...
    unordered, rst, cbcast = parts[2], parts[4], parts[6]
    assert "m3 reaches Carol  (delivers m3)" in out
    assert "P2 delivered m3 before m1" in out
    assert "seed 004's detector at Carol: m1 arrived stamped [1, 0, 0]" in out
    # RST: m3 waits, the seed's final matrices appear
    assert "Carol's mail room: m3 waits for 1 message from Alice (its 1st message to Carol)" in rst
    assert "m1 reaches Carol  (delivers m1, m3)" in rst
    assert "causal     ok" in rst and "causal     ok" in cbcast
    assert "SENT      0 1 1             0 1 1             0 1 1" in rst
    assert "deliver m3 ✗" in unordered
    assert "clock" in cbcast and "┊" in rst


def test_demo_one_protocol(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--protocol", "cbcast"]) == 0
    out = capsys.readouterr().out
    assert "CBCAST" in out and "RST" not in out


def test_simulate_and_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.jsonl"
    assert (
        main(
            ["simulate", "--protocol", "rst", "-n", "4", "--messages", "40", "--trace", str(trace)]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "packets_per_message" in out and "causal     ok" in out
    out_dir = str(tmp_path / "report")
    assert main(["check", str(trace), "--engine", "reference", "--out", out_dir]) == 0
    assert (
        main(
            [
                "simulate",
                "--protocol",
                "unordered",
                "-n",
                "4",
                "--messages",
                "80",
                "--trace",
                str(trace),
                "--delay",
                "1",
                "30",
            ]
        )
        == 0
    )  # promises no order
    assert (
        main(
            [
                "check",
                str(trace),
                "--properties",
                "causal",
                "--engine",
                "reference",
                "--out",
                out_dir,
            ]
        )
        == 1
    )
    assert "violation" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["check", "/nonexistent.jsonl", "--engine", "reference"], "nonexistent"),
        (["check", "BAD", "--properties", "speed", "--engine", "reference"], "speed"),
        (["simulate", "--processes", "0"], "--processes"),
        (["simulate", "--delay", "5", "1"], "--delay"),
        (["simulate", "--protocol", "nope"], "invalid choice"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _exit_code(argv) == 2
    err = capsys.readouterr().err
    assert words in err


def test_bad_trace_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"run": "r"}\n')
    assert _exit_code(["check", str(bad), "--engine", "reference", "--out", str(tmp_path)]) == 2
    assert "missing field" in capsys.readouterr().err


def test_console_script_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mailroom", "demo", "--protocol", "rst"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "Raynal-Schiper-Toueg" in done.stdout


def test_check_without_pyspark_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util

    trace = tmp_path / "t.jsonl"
    assert main(["simulate", "--messages", "5", "--trace", str(trace)]) == 0
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pyspark" else real(name, *a)
    )
    assert _exit_code(["check", str(trace), "--out", str(tmp_path / "r")]) == 2
    assert "pip install 'mailroom[spark]'" in capsys.readouterr().err
