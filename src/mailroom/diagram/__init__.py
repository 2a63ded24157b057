"""Space-time diagrams of traces: text for the terminal, SVG and matplotlib for
notebooks and docs (matplotlib is optional and imported only when plotting)."""

from mailroom.diagram.draw import Diagram, draw
from mailroom.diagram.layout import Arrow, Layout, Mark, layout
from mailroom.diagram.reading import message_names
from mailroom.diagram.svg import render_svg
from mailroom.diagram.text import render_text

__all__ = [
    "Arrow",
    "Diagram",
    "Layout",
    "Mark",
    "draw",
    "layout",
    "message_names",
    "render_svg",
    "render_text",
]
