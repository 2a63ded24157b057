"""What a run found: the checkers' counts and the clients' histories judged at the end.

Two judges look at every run. ``mailroom check`` (run as a command, as a user
would) reads the members' traces for the order and view properties. The history
check reads the final state of every member that ends the run in the group (the
messages its application holds, in order) and compares them: every replica holds
the same messages (in the same order under total order), none twice, and none
that a client was told about (its sender delivered it: the acknowledgement a
broadcast client gets) is missing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs

MessageKey = tuple[int, int]


@attrs.define
class Verdict:
    """The findings of one run: checker counts, history counts and notes."""

    #: the properties ``mailroom check`` (and the history check) looked at
    checked: list[str] = attrs.field(factory=list)
    #: rows found per property
    violations: dict[str, int] = attrs.field(factory=dict)
    #: messages (commands) a client was told were delivered (applied)
    acked: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    #: acknowledged messages no member holds at the end, though a member that went on
    #: into the next view had delivered them (a violation)
    lost: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    #: acknowledged messages no member holds at the end, delivered only by members that
    #: were then excluded or killed (what a non-uniform group does not promise)
    lost_outside: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    #: members whose final state differs from the most common one
    divergent: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    #: messages a member's final state holds twice
    duplicates: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    notes: list[str] = attrs.field(factory=list)
    #: the ``mailroom check`` command that judged the run
    check_command: str = ""

    @property
    def violation_count(self) -> int:
        return sum(self.violations.values()) + self.lost + self.divergent + self.duplicates

    def to_dict(self) -> dict[str, object]:
        return attrs.asdict(self)


def run_check(
    traces: Sequence[Path], properties: Sequence[str], out: Path
) -> tuple[dict[str, int], str]:
    """``mailroom check`` on ``traces`` for ``properties``; its counts and the command."""
    cmd = [
        sys.executable,
        "-m",
        "mailroom",
        "check",
        "--engine",
        "reference",
        "--mode",
        "summary",
        "--properties",
        ",".join(properties),
        "--out",
        str(out),
        *map(str, traces),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False)
    (out.parent / f"{out.name}.txt").write_text(done.stdout + done.stderr)
    shown = " ".join(["mailroom", *cmd[3:]])
    if done.returncode not in (0, 1):
        return {"unreadable": 1}, shown
    summary = json.loads((out / "summary.json").read_text())
    counts = {str(k): int(v) for k, v in summary.get("violations", {}).items()}
    if summary.get("invalid"):
        counts["invalid"] = int(summary["invalid"])
    return counts, shown


def judge_states(
    states: Mapping[int, Sequence[MessageKey]], acked: set[MessageKey], total: bool
) -> tuple[list[MessageKey], int, int, list[str]]:
    """(missing, divergent, duplicates, notes) for the final ``states`` of the members that
    end in the group: acknowledged messages none of them holds; members whose state
    differs from the most common one (as sequences under ``total``, else as sets);
    messages a member holds twice."""
    notes = []
    duplicates = 0
    for i, s in sorted(states.items()):
        twice = [m for m, c in Counter(s).items() if c > 1]
        duplicates += len(twice)
        if twice:
            notes.append(f"P{i} holds {len(twice)} message(s) twice, e.g. {twice[:3]}")
    shape = {i: tuple(s) if total else tuple(sorted(set(s))) for i, s in states.items()}
    shapes = Counter(shape.values())
    common = shapes.most_common(1)[0][0] if shapes else ()
    divergent = sum(c for one, c in shapes.items() if one != common)
    if divergent:
        odd = [i for i, s in shape.items() if s != common]
        notes.append(f"final states differ: P{odd} against {len(common)} messages held by the rest")
    held = set().union(*map(set, states.values())) if states else set()
    missing = sorted(acked - held)
    if missing:
        notes.append(f"{len(missing)} acknowledged message(s) held by no member: {missing[:5]}")
    return missing, divergent, duplicates, notes


__all__ = ["MessageKey", "Verdict", "judge_states", "run_check"]
