"""Space-time diagrams of traces (text for the terminal)."""

from mailroom.diagram.text import message_names, render_text

__all__ = ["message_names", "render_text"]
