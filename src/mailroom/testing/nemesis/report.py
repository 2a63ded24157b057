"""The results table: one row per fault kind and system, from the runs' ``result.json``.

Columns: fault events, violations found (checker rows, diverging replicas,
messages held twice, acknowledged messages lost by members that went on),
acknowledged messages lost with a minority that was excluded or killed (outside
a non-uniform group's promise), and the recovery time after the fault healed
(median and worst; "stuck" counts faults after which the group did not deliver
again within the bound); "runs formed" counts runs whose members all delivered
before the first fault: the faults of a run that did not form are not counted as
events (its checker findings still are).
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any


def load_results(folders: Iterable[Path]) -> list[dict[str, Any]]:
    """Every ``result.json`` under ``folders`` (searched recursively), sorted by path."""
    found = []
    for folder in folders:
        paths = [folder] if folder.is_file() else sorted(folder.rglob("result.json"))
        for p in paths:
            data = json.loads(p.read_text())
            data["path"] = str(p)
            found.append(data)
    return found


def _violations(r: dict[str, Any]) -> int:
    """Checker rows, acknowledged losses, duplicates, and diverging final states of a run
    that settled (stopped with messages in flight, states may differ for no fault)."""
    v = r["verdict"]
    divergent = v["divergent"] if r["settled"] else 0
    return int(sum(v["violations"].values()) + v["lost"] + divergent + v["duplicates"])


def _label(label: str) -> str:
    """A fault's row: clock jumps either way share one (results of before the sign left
    the label say "clock +" and "clock -")."""
    if label.startswith("clock"):
        return "clock mono" if label.endswith("mono") else "clock"
    return str(label)


def _seconds(xs: Sequence[float]) -> str:
    if not xs:
        return "-"
    return f"{statistics.median(xs):.1f} / {max(xs):.1f}"


def table(results: Sequence[dict[str, Any]]) -> str:
    """A Markdown table, one row per (fault kind, system); a run's findings are counted in
    the row of the kind its schedule holds (a mixed schedule is its own row, "mixed")."""
    zero = {"events": 0, "runs": 0, "violations": 0, "lost": 0, "outside": 0, "stuck": 0}
    rows: dict[tuple[str, str], dict[str, Any]] = defaultdict(
        lambda: {**zero, "settled": 0, "formed": 0, "recovery": []}
    )
    for r in results:
        labels = {_label(f["label"]) for f in r["faults"]}
        kind = labels.pop() if len(labels) == 1 else "mixed"
        size = int(r.get("n", 3))
        row = rows[(kind, r["system"] + (f", {size} members" if size != 3 else ""))]
        row["runs"] += 1
        row["violations"] += _violations(r)
        row["lost"] += int(r["verdict"]["lost"])
        row["outside"] += int(r["verdict"].get("lost_outside", 0))
        row["settled"] += int(bool(r["settled"]))
        if not r.get("formed", True):
            continue  # faults on a group that never formed measure nothing
        row["formed"] += 1
        row["events"] += len(r["faults"])
        for f in r["faults"]:
            if not f.get("measured", True):
                continue
            if f["recovery"] is None:
                row["stuck"] += 1
            else:
                row["recovery"].append(float(f["recovery"]))
    lines = [
        "| fault | system | events | violations | acked lost | lost with a minority "
        "| recovery s (median / max) | stuck | runs formed | runs settled |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (kind, system), row in sorted(rows.items()):
        lines.append(
            f"| {kind} | {system} | {row['events']} | {row['violations']} | {row['lost']} "
            f"| {row['outside']} | {_seconds(row['recovery'])} | {row['stuck']} "
            f"| {row['formed']}/{row['runs']} | {row['settled']}/{row['runs']} |"
        )
    total = sum(r["events"] for r in rows.values())
    formed = sum(r["formed"] for r in rows.values())
    lines.append(f"\n{total} fault events in {formed} runs that formed ({len(results)} runs).")
    return "\n".join(lines) + "\n"


def findings(results: Sequence[dict[str, Any]]) -> str:
    """Each run with a violation or a note: its folder, schedule line count and notes."""
    out = []
    for r in results:
        v = r["verdict"]
        bad = {k: c for k, c in v["violations"].items() if c}
        if bad or v["notes"]:
            rows = bad or "no checker rows"
            out.append(f"- {r['system']} seed {r['seed']} ({r['path']}): {rows}")
            out.extend(f"    - {note}" for note in v["notes"])
    return "\n".join(out) + ("\n" if out else "")


__all__ = ["findings", "load_results", "table"]
