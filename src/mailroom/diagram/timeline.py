"""Timelines of clients' operations as SVG: one row per client, each operation a bar
from its invocation to its completion (a dashed bar to the right edge when it never
completed), in the colours of the space-time diagrams (``mailroom.diagram.svg``):
ink for an operation, red for the one a checker marks, grey for an open one.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

import attrs

from mailroom.diagram.svg import BAD, FAINT, HALO, INK, LEFT, TOP, VIEW

#: pixels per column (one column per distinct invocation or completion)
STEP = 26.0
LANE = 30.0
LABEL_WIDTH = 60.0


@attrs.frozen
class Bar:
    """One operation: on row ``row``, from column ``start`` to ``end`` (None: open);
    ``kind`` is "op", "prefix" (part of a highlighted sequence), "bad" or "open"."""

    row: int
    start: float
    end: float | None
    label: str
    kind: str = "op"
    title: str = ""


_COLOURS = {"op": INK, "prefix": VIEW, "bad": BAD, "open": FAINT}


def _bar(bar: Bar, right: float) -> list[str]:
    x1 = LEFT + LABEL_WIDTH + bar.start * STEP
    x2 = right if bar.end is None else LEFT + LABEL_WIDTH + bar.end * STEP
    y = TOP + bar.row * LANE
    colour = _COLOURS.get(bar.kind, INK)
    dash = ' stroke-dasharray="5 4"' if bar.end is None else ""
    width = 7 if bar.kind == "bad" else 5
    title = f"<title>{escape(bar.title or bar.label)}</title>"
    return [
        f'<path d="M{x1:.1f},{y:.1f} L{max(x2, x1 + 4):.1f},{y:.1f}" stroke="{colour}" '
        f'stroke-width="{width}" stroke-linecap="round"{dash}>{title}</path>',
        f'<text x="{x1:.1f}" y="{y - 7:.1f}" font-size="10" fill="{colour}" {HALO}>'
        f"{escape(bar.label)}</text>",
    ]


def _legend(y: float) -> list[str]:
    items: list[str] = []
    x = 10.0
    for kind, words in (
        ("prefix", "linearized"),
        ("op", "not linearized"),
        ("open", "may or may not have happened"),
        ("bad", "cannot follow"),
    ):
        colour = _COLOURS[kind]
        items.append(
            f'<path d="M{x:.1f},{y - 4:.1f} L{x + 22:.1f},{y - 4:.1f}" stroke="{colour}" '
            'stroke-width="5"/>'
        )
        items.append(
            f'<text x="{x + 28:.1f}" y="{y:.1f}" font-size="11" fill="{colour}">{words}</text>'
        )
        x += 46 + 6.2 * len(words)
    return items


def render_timeline(
    rows: Sequence[str], bars: Sequence[Bar], *, title: str = "", notes: Sequence[str] = ()
) -> str:
    """The SVG document of a timeline: ``rows`` label the rows, top to bottom."""
    columns = max((b.end if b.end is not None else b.start for b in bars), default=0.0)
    right = LEFT + LABEL_WIDTH + (columns + 2) * STEP
    width = max(right + 30, 640.0)
    bottom = TOP + len(rows) * LANE
    height = bottom + 30 + 16 * len(notes) + (20 if title else 0) + 22
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="sans-serif">',
        '<rect width="100%" height="100%" fill="white"/>',
    ]
    for i, label in enumerate(rows):
        y = TOP + i * LANE
        out.append(
            f'<text x="10" y="{y + 4:.1f}" font-size="12" font-weight="bold" fill="{INK}">'
            f"{escape(label)}</text>"
        )
        out.append(
            f'<line x1="{LEFT + LABEL_WIDTH:.1f}" y1="{y:.1f}" x2="{right:.1f}" y2="{y:.1f}" '
            'stroke="#b0bec5" stroke-width="1"/>'
        )
    for bar in bars:
        out.extend(_bar(bar, right))
    y = bottom + 10
    for note in notes:
        out.append(f'<text x="10" y="{y:.1f}" font-size="12" fill="{BAD}">{escape(note)}</text>')
        y += 16
    if title:
        out.append(f'<text x="10" y="{y:.1f}" font-size="12" fill="{INK}">{escape(title)}</text>')
        y += 20
    out.extend(_legend(y + 4))
    out.append("</svg>")
    return "\n".join(out)
