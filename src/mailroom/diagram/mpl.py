"""Space-time diagrams on matplotlib axes (needs the ``viz`` extra).

The same picture as the SVG renderer: vertical process lines, time downwards,
solid arrows for messages, dashed arcs for the time a message is held in the
mail room (overlapping ones in separate lanes), crosses for lost copies, red
for violations, and a legend for the dots and arcs; in membership traces, green
bars labelled ``V2 {0,1}`` for view installations, dotted green arrows for what the
flush handed on, and a cross where the line of a process out of the group ends.
matplotlib is imported
inside the function, so ``mailroom.diagram`` imports without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mailroom.core.extras import need
from mailroom.diagram.layout import Arrow, Layout, Mark
from mailroom.diagram.svg import (
    BAD,
    FAINT,
    HELD,
    INK,
    LABEL_AT,
    VIEW,
    held_lanes,
    label_places,
)


def plot_layout(lay: Layout, ax: Any = None, *, title: str = "", legend: bool = True) -> Any:
    """Draw ``lay`` on ``ax`` (a new figure if None) and return the axes."""
    plt = need("matplotlib.pyplot", "drawing a diagram")

    if ax is None:
        _, ax = plt.subplots(
            figsize=(1.2 + 2.0 * max(len(lay.processes), 1), 0.8 + 0.42 * lay.rows)
        )
    bottom = lay.rows
    for p, label in zip(lay.processes, lay.labels, strict=True):
        x = lay.x(p)
        top, end = lay.line(p)
        ax.plot([x, x], [-0.6 if top < 0 else top, end], color="#b0bec5", lw=2, zorder=1)
        ax.text(x, -0.9, label, ha="center", va="bottom", fontweight="bold", color=INK)
    lanes = held_lanes(lay.arrows)
    places = label_places(lay.arrows)
    for i, a in enumerate(lay.arrows):
        _plot_arrow(ax, a, lanes.get(i, 0), places.get(i, LABEL_AT[0]))
    views = _plot_marks(ax, lay.marks)
    for i, note in enumerate(lay.notes):
        ax.text(-0.4, bottom + 0.5 + 0.45 * i, note, color=BAD, fontsize=9, ha="left", va="top")
    ax.set_xlim(-0.6, max(len(lay.processes) - 1, 0) + 0.8)
    ax.set_ylim(bottom + 0.4 + 0.45 * len(lay.notes), -1.2)
    ax.axis("off")
    if legend:
        _legend(ax, views)
    if title:
        ax.set_title(title)
    return ax


def _plot_arrow(ax: Any, a: Arrow, lane: int, at: float) -> None:
    """One arrow, its label at ``at`` of the way along it (a held arc: in ``lane``)."""
    from matplotlib.patches import FancyArrowPatch

    colours = {"message": INK, "held": HELD, "recovered": VIEW}
    colour = BAD if a.bad else colours.get(a.kind, FAINT)
    vertical = a.start[0] == a.end[0]
    style = "dashed" if a.kind in ("held", "duplicate") else "solid"
    if a.kind == "recovered":
        style = "dotted"
    rad = -0.5 - 0.35 * lane if vertical else 0.0
    ax.add_patch(
        FancyArrowPatch(
            a.start,
            a.end,
            arrowstyle="-" if a.kind == "lost" else "-|>",
            mutation_scale=12,
            color=colour,
            lw=1.0 if a.kind == "duplicate" else 1.6,
            linestyle=style,
            connectionstyle=f"arc3,rad={rad}",
            zorder=2,
        )
    )
    (x1, y1), (x2, y2) = a.start, a.end
    if a.kind == "lost":
        ax.plot([x2], [y2], marker="x", color=colour, ms=9, mew=2, zorder=3)
    if a.kind in ("message", "lost", "recovered"):
        if vertical:
            ax.text(x1 + 0.22, min(y1 + 0.6, (y1 + y2) / 2), a.name, color=colour, fontsize=9)
        else:
            ax.text(
                x1 + (x2 - x1) * at,
                y1 + (y2 - y1) * at - 0.12,
                a.name,
                color=colour,
                bbox={"fc": "white", "ec": "none", "pad": 0.5, "alpha": 0.8},
            )
    elif a.kind == "held":
        ax.text(
            x1 + 0.16 + 0.12 * lane,
            min(y1 + 0.6, (y1 + y2) / 2) + 0.3 * lane,
            f"{a.name} held",
            color=colour,
            fontsize=8,
            style="italic",
        )


def _plot_marks(ax: Any, marks: Sequence[Mark]) -> bool:
    """The dots, view bars and line ends; True if there was a view installation."""
    views = False
    for m in marks:
        colour = BAD if m.bad else INK
        if m.kind == "view":
            views = True
            x, y = m.at
            ax.plot([x - 0.1, x + 0.1], [y, y], color=VIEW, lw=4, zorder=4)
            ax.text(x + 0.13, y, m.name, color=VIEW, fontsize=9, fontweight="bold", va="center")
        elif m.kind == "end":
            ax.plot(*m.at, marker="x", color=INK, ms=10, mew=2.5, zorder=4)
        elif m.kind == "receive":
            ax.plot(*m.at, marker="o", ms=5, mfc="white", mec=colour, zorder=4)
        else:
            ax.plot(*m.at, marker="o", ms=9 if m.bad else 6, color=colour, zorder=4)
    return views


def _legend(ax: Any, views: bool) -> None:
    """The legend below the diagram; the membership entries only if it shows ``views``."""
    from matplotlib.lines import Line2D

    handles = [
        Line2D([], [], ls="", marker="o", ms=6, color=INK, label="send or delivery"),
        Line2D([], [], ls="", marker="o", ms=5, mfc="white", mec=INK, label="packet received"),
        Line2D([], [], ls="--", color=HELD, label="held in the mail room"),
        Line2D([], [], ls="-", color=BAD, label="violation"),
    ]
    if views:
        handles += [
            Line2D([], [], ls="-", lw=4, color=VIEW, label="view installed"),
            Line2D([], [], ls=":", color=VIEW, label="handed on by the flush"),
            Line2D([], [], ls="", marker="x", mew=2, color=INK, label="out of the group"),
        ]
    ax.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=2,
        fontsize="small",
        frameon=False,
    )
