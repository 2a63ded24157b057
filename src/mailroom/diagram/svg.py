"""Space-time diagrams as SVG text, with no dependencies (for notebooks and docs).

Processes are vertical lines, time runs downwards. Messages are solid arrows;
the time a message is held in the mail room is a dashed arc down the
receiver's line; a lost copy ends in a cross; duplicates are faint; arrows
and deliveries that take part in a violation are red, and the violations are
listed under the diagram. Held arcs that overlap in time on one process bulge
into separate lanes, message labels are placed along their arrows away from
each other (with a white halo) so that they do not pile up where arrows cross, and a legend
explains filled and hollow dots and the arcs. In a membership trace a view
installation is a green bar across the line labelled ``V2 {0,1}``, a message the
flush handed on is a dotted green arrow, and the line of a process out of the
group ends in a cross (a second legend line says so).
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from mailroom.diagram.layout import Arrow, Layout, Mark

COLUMN = 150.0
ROW = 34.0
LEFT = 70.0
TOP = 48.0
INK = "#1f3b5a"
HELD = "#d98c00"
BAD = "#c62828"
FAINT = "#9e9e9e"
VIEW = "#2e7d32"


def _px(point: tuple[float, float]) -> tuple[float, float]:
    return LEFT + point[0] * COLUMN, TOP + point[1] * ROW


def _colour(arrow: Arrow) -> str:
    if arrow.bad:
        return BAD
    colours = {"message": INK, "held": HELD, "lost": FAINT, "duplicate": FAINT}
    return colours.get(arrow.kind, VIEW)


#: where along an arrow its label may go, in order of preference
LABEL_AT = (0.3, 0.5, 0.7, 0.2, 0.8, 0.4, 0.6)
#: labels closer than this (in SVG pixels) are moved apart if another place is free
LABEL_GAP = 26.0
HALO = 'stroke="white" stroke-width="3" paint-order="stroke"'


def label_places(arrows: Sequence[Arrow]) -> dict[int, float]:
    """Where along each message arrow (a fraction from its start) its label goes.

    Greedy: each arrow takes the first place in ``LABEL_AT`` that is at least
    ``LABEL_GAP`` pixels from every label placed so far, else the place farthest
    from them; so labels do not pile up where arrows cross or fan out.
    """
    placed: list[tuple[float, float]] = []
    places: dict[int, float] = {}
    for i, a in enumerate(arrows):
        if a.kind not in ("message", "lost", "recovered") or a.start[0] == a.end[0]:
            continue
        (x1, y1), (x2, y2) = _px(a.start), _px(a.end)
        best, best_gap = LABEL_AT[0], -1.0
        for at in LABEL_AT:
            x, y = x1 + (x2 - x1) * at, y1 + (y2 - y1) * at
            gap = min((abs(x - px) + abs(y - py) for px, py in placed), default=LABEL_GAP * 9)
            if gap >= LABEL_GAP:
                best = at
                break
            if gap > best_gap:
                best, best_gap = at, gap
        places[i] = best
        placed.append((x1 + (x2 - x1) * best, y1 + (y2 - y1) * best))
    return places


def held_lanes(arrows: Sequence[Arrow]) -> dict[int, int]:
    """A lane (0, 1, ...) for each held arc, by index in ``arrows``: arcs on one process
    whose intervals overlap get different lanes."""
    lanes: dict[int, int] = {}
    busy: dict[int, list[tuple[float, int]]] = {}  # process -> (end row, lane) in use
    held = [(i, a) for i, a in enumerate(arrows) if a.kind == "held"]
    for i, a in sorted(held, key=lambda item: (item[1].start[1], item[0])):
        active = [(end, lane) for end, lane in busy.get(a.dest, []) if end > a.start[1]]
        used = {lane for _, lane in active}
        lane = next(k for k in range(len(used) + 1) if k not in used)
        busy[a.dest] = [*active, (a.end[1], lane)]
        lanes[i] = lane
    return lanes


def _arrow(a: Arrow, lane: int = 0, label_at: float = 0.3) -> list[str]:
    (x1, y1), (x2, y2) = _px(a.start), _px(a.end)
    colour = _colour(a)
    marker = "bad" if a.bad else a.kind
    dash = ' stroke-dasharray="6 4"' if a.kind in ("held", "duplicate") else ""
    if a.kind == "recovered":
        dash = ' stroke-dasharray="2 3"'
    width = 1.0 if a.kind == "duplicate" else 1.6
    out = []
    if x1 == x2:  # held interval or a message to oneself: an arc to the right
        bulge = 28.0 + 22.0 * lane if a.kind == "held" else 40.0
        path = (
            f"M{x1:.1f},{y1:.1f} C{x1 + bulge:.1f},{y1:.1f} "
            f"{x2 + bulge:.1f},{y2:.1f} {x2:.1f},{y2:.1f}"
        )
        lx, ly = x1 + bulge * 0.8, min(y1 + ROW * 0.6, (y1 + y2) / 2) + 10.0 * lane
    else:
        path = f"M{x1:.1f},{y1:.1f} L{x2:.1f},{y2:.1f}"
        lx, ly = x1 + (x2 - x1) * label_at, y1 + (y2 - y1) * label_at - 4
    end = "" if a.kind == "lost" else f' marker-end="url(#arrow-{marker})"'
    out.append(
        f'<path d="{path}" fill="none" stroke="{colour}" stroke-width="{width}"{dash}{end}>'
        f"<title>{escape(a.name)} ({a.kind}) to P{a.dest}</title></path>"
    )
    if a.kind == "lost":
        out.append(
            f'<path d="M{x2 - 5:.1f},{y2 - 5:.1f} L{x2 + 5:.1f},{y2 + 5:.1f} '
            f'M{x2 - 5:.1f},{y2 + 5:.1f} L{x2 + 5:.1f},{y2 - 5:.1f}" '
            f'stroke="{colour}" stroke-width="2"/>'
        )
    if a.kind in ("message", "lost", "recovered"):
        out.append(
            f'<text x="{lx:.1f}" y="{ly:.1f}" font-size="11" fill="{colour}" {HALO}>'
            f"{escape(a.name)}</text>"
        )
    elif a.kind == "held":
        out.append(
            f'<text x="{lx + 4:.1f}" y="{ly:.1f}" font-size="10" fill="{colour}" '
            f'font-style="italic" {HALO}>{escape(a.name)} held</text>'
        )
    return out


def _mark(m: Mark) -> str:
    x, y = _px(m.at)
    if m.kind == "view":
        return (
            f'<path d="M{x - 14:.1f},{y:.1f} L{x + 14:.1f},{y:.1f}" stroke="{VIEW}" '
            f'stroke-width="4"><title>P{m.process} installs {escape(m.name)}</title></path>\n'
            f'<text x="{x + 18:.1f}" y="{y + 4:.1f}" font-size="11" font-weight="bold" '
            f'fill="{VIEW}" {HALO}>{escape(m.name)}</text>'
        )
    if m.kind == "end":
        return (
            f'<path d="M{x - 6:.1f},{y - 6:.1f} L{x + 6:.1f},{y + 6:.1f} '
            f'M{x - 6:.1f},{y + 6:.1f} L{x + 6:.1f},{y - 6:.1f}" stroke="{INK}" '
            f'stroke-width="2.5"><title>P{m.process} is out of the group</title></path>'
        )
    colour = BAD if m.bad else INK
    if m.kind == "receive":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="white" stroke="{colour}"/>'
    radius = 6 if m.bad else 3.5
    title = f"<title>{m.kind} {escape(m.name)} at P{m.process}</title>"
    return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{radius}" fill="{colour}">{title}</circle>'


LEGEND_HEIGHT = 22.0


def _view_legend(y: float) -> list[str]:
    """A second legend line for membership traces: views, the flush, a line's end."""
    return [
        f'<path d="M8,{y - 4:.1f} L24,{y - 4:.1f}" stroke="{VIEW}" stroke-width="4"/>',
        f'<text x="30" y="{y:.1f}" font-size="11" fill="{VIEW}">view installed</text>',
        f'<path d="M134,{y - 4:.1f} L160,{y - 4:.1f}" stroke="{VIEW}" stroke-width="1.6" '
        'stroke-dasharray="2 3"/>',
        f'<text x="166" y="{y:.1f}" font-size="11" fill="{VIEW}">handed on by the flush</text>',
        f'<path d="M322,{y - 9:.1f} L332,{y + 1:.1f} M322,{y + 1:.1f} L332,{y - 9:.1f}" '
        f'stroke="{INK}" stroke-width="2"/>',
        f'<text x="338" y="{y:.1f}" font-size="11" fill="{INK}">out of the group</text>',
    ]


def _legend(y: float) -> list[str]:
    """One line under the diagram: what the dots and arcs mean."""
    items = [
        f'<circle cx="14" cy="{y - 4:.1f}" r="3.5" fill="{INK}"/>',
        f'<text x="22" y="{y:.1f}" font-size="11" fill="{INK}">send or delivery</text>',
        f'<circle cx="134" cy="{y - 4:.1f}" r="3" fill="white" stroke="{INK}"/>',
        f'<text x="142" y="{y:.1f}" font-size="11" fill="{INK}">packet received</text>',
        f'<path d="M250,{y - 4:.1f} L276,{y - 4:.1f}" stroke="{HELD}" stroke-width="1.6" '
        'stroke-dasharray="6 4"/>',
        f'<text x="282" y="{y:.1f}" font-size="11" fill="{HELD}">held in the mail room</text>',
        f'<text x="412" y="{y:.1f}" font-size="11" fill="{BAD}">red: a violation</text>',
    ]
    return items


def render_svg(lay: Layout, *, title: str = "", legend: bool = True) -> str:
    """The SVG document for a laid-out diagram, with a legend unless ``legend`` is False."""
    width = max(LEFT * 2 + max(len(lay.processes) - 1, 0) * COLUMN + 60, 520.0 if legend else 0)
    bottom = TOP + lay.rows * ROW
    views = any(m.kind == "view" for m in lay.marks)
    legend_lines = (2 if views else 1) if legend else 0
    height = bottom + 20 + 16 * len(lay.notes) + (20 if title else 0) + LEGEND_HEIGHT * legend_lines
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="sans-serif">',
        '<rect width="100%" height="100%" fill="white"/>',
        "<defs>",
    ]
    for key, colour in (
        ("message", INK),
        ("held", HELD),
        ("duplicate", FAINT),
        ("lost", FAINT),
        ("bad", BAD),
        ("recovered", VIEW),
    ):
        out.append(
            f'<marker id="arrow-{key}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
            f'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
            f'fill="{colour}"/></marker>'
        )
    out.append("</defs>")
    for p, label in zip(lay.processes, lay.labels, strict=True):
        x = LEFT + lay.x(p) * COLUMN
        out.append(
            f'<text x="{x:.1f}" y="{TOP - 22:.1f}" font-size="13" text-anchor="middle" '
            f'font-weight="bold" fill="{INK}">{escape(label)}</text>'
        )
        top, end = (TOP + r * ROW for r in lay.line(p))
        out.append(
            f'<line x1="{x:.1f}" y1="{top:.1f}" x2="{x:.1f}" y2="{end:.1f}" '
            f'stroke="#b0bec5" stroke-width="2"/>'
        )
    lanes = held_lanes(lay.arrows)
    places = label_places(lay.arrows)
    for i, a in enumerate(lay.arrows):
        out.extend(_arrow(a, lanes.get(i, 0), places.get(i, LABEL_AT[0])))
    out.extend(_mark(m) for m in lay.marks)
    y = bottom + 20
    for note in lay.notes:
        out.append(f'<text x="10" y="{y:.1f}" font-size="12" fill="{BAD}">{escape(note)}</text>')
        y += 16
    if title:
        out.append(f'<text x="10" y="{y:.1f}" font-size="12" fill="{INK}">{escape(title)}</text>')
        y += 20
    if legend:
        out.extend(_legend(y + 4))
        if views:
            out.extend(_view_legend(y + 4 + LEGEND_HEIGHT))
    out.append("</svg>")
    return "\n".join(out)
