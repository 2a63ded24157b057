"""The witness of a history that is not linearizable (or whose search ran out of
budget), as text and as an SVG timeline of the failing key's operations.

The text names the key, the longest linearizable prefix the search found and the
operation that cannot follow it. The timeline has one row per client process, each
operation a bar from its invocation to its completion (open operations run to the
right edge, dashed); the prefix is green, the operation that cannot follow red.
"""

from __future__ import annotations

from mailroom.diagram.timeline import Bar, render_timeline
from mailroom.linearizable.check import KeyVerdict, Verdict
from mailroom.linearizable.history import Call, show
from mailroom.linearizable.models import order_key
from mailroom.linearizable.search import NOT_LINEARIZABLE, UNKNOWN

#: the most prefix operations the text lists (the last ones; the rest are counted)
SHOWN = 20


def _lines(c: Call) -> str:
    end = "open" if c.return_line is None else str(c.return_line)
    return f"lines {c.call_line}-{end}"


def witness_lines(k: KeyVerdict) -> list[str]:
    """What a person reads: the key, the prefix, the operation that cannot follow."""
    key = "" if k.key is None else f"key {show(k.key)}: "
    head = f"{key}{k.size} operation(s), {k.explored} state(s) explored"
    out = [head, f"longest linearizable prefix found: {len(k.prefix)} operation(s)"]
    hidden = max(len(k.prefix) - SHOWN, 0)
    if hidden:
        out.append(f"  ... {hidden} earlier operation(s)")
    for n, c in enumerate(k.prefix[hidden:], hidden + 1):
        out.append(f"  {n}. {c.describe()}  ({_lines(c)})")
    if k.blocked is not None:
        verb = "was not linearized within the budget" if k.verdict == UNKNOWN else "cannot follow"
        out.append(f"{verb}: {k.blocked.describe()}  ({_lines(k.blocked)})")
    return out


def verdict_lines(v: Verdict) -> list[str]:
    """The verdict in a few lines, with the witness when there is one."""
    bad = sum(1 for k in v.keys if k.verdict == NOT_LINEARIZABLE)
    unknown = sum(1 for k in v.keys if k.verdict == UNKNOWN)
    head = (
        f"{v.verdict} ({v.model} model): {v.calls} operation(s) on {len(v.keys)} key(s), "
        f"{v.explored} state(s) explored"
    )
    if bad or unknown:
        head += f"; {bad} key(s) not linearizable, {unknown} unknown"
    w = v.witness
    return [head] if w is None else [head, *("  " + line for line in witness_lines(w))]


def witness_svg(k: KeyVerdict) -> str:
    """The timeline of the witness key's operations (see the module doc)."""
    procs = sorted({c.process for c in k.calls}, key=order_key)
    row = {p: i for i, p in enumerate(procs)}
    ticks = sorted(
        {c.called for c in k.calls} | {c.returned for c in k.calls if c.returned is not None}
    )
    col = {t: i for i, t in enumerate(ticks)}
    linear = {c.index for c in k.prefix}
    bars = []
    for c in k.calls:
        kind = "open" if c.open else "op"
        kind = "prefix" if c.index in linear else kind
        kind = "bad" if k.blocked is not None and c.index == k.blocked.index else kind
        end = None if c.returned is None else float(col[c.returned])
        label = f"{c.f} {show(c.arg)}" + ("" if c.open else f" → {show(c.result)}")
        bars.append(Bar(row[c.process], float(col[c.called]), end, label, kind, c.describe()))
    notes = [] if k.blocked is None else [f"cannot follow: {k.blocked.describe()}"]
    key = "" if k.key is None else f"key {show(k.key)}, "
    title = f"{key}{k.verdict}: {len(k.prefix)} operation(s) linearized"
    return render_timeline([f"P{show(p)}" for p in procs], bars, title=title, notes=notes)
