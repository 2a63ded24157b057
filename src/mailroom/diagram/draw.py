"""``draw(trace)``: one space-time diagram, as text, SVG or matplotlib.

A ``Diagram`` holds one run's events, the names and labels to print, and the
violations to highlight (given, or found by the reference checkers when
``check`` names properties). In a notebook it displays itself as SVG.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from mailroom.core.messages import MessageId
from mailroom.diagram.layout import Layout, layout
from mailroom.diagram.mpl import plot_layout
from mailroom.diagram.reading import message_names
from mailroom.diagram.svg import render_svg
from mailroom.diagram.text import render_text
from mailroom.trace.checkers import Violation
from mailroom.trace.checkers import check as check_trace
from mailroom.trace.events import Event


@attrs.frozen
class Diagram:
    """A space-time diagram of one run."""

    events: tuple[Event, ...]
    labels: dict[int, str] = attrs.field(factory=dict)
    names: dict[MessageId, str] = attrs.field(factory=dict)
    violations: tuple[Violation, ...] = ()
    title: str = ""

    def layout(self) -> Layout:
        return layout(self.events, labels=self.labels, names=self.names, violations=self.violations)

    def text(self) -> str:
        """The terminal rendering (``mailroom.diagram.render_text``)."""
        return render_text(
            self.events, labels=self.labels, names=self.names, violations=self.violations
        )

    def svg(self) -> str:
        """A standalone SVG document."""
        return render_svg(self.layout(), title=self.title)

    def _repr_svg_(self) -> str:
        return self.svg()

    def plot(self, ax: Any = None) -> Any:
        """Draw on matplotlib axes (new ones if None); needs the ``viz`` extra."""
        return plot_layout(self.layout(), ax, title=self.title)

    def save(self, path: str | Path) -> Path:
        """Write ``.svg`` or ``.txt`` by the file's suffix; other suffixes go to matplotlib."""
        target = Path(path)
        if target.suffix == ".svg":
            target.write_text(self.svg(), encoding="utf-8")
        elif target.suffix == ".txt":
            target.write_text(self.text() + "\n", encoding="utf-8")
        else:
            ax = self.plot()
            ax.figure.savefig(target, bbox_inches="tight")
            import matplotlib.pyplot as plt

            plt.close(ax.figure)
        return target


def draw(
    events: Iterable[Event],
    *,
    run: str | None = None,
    labels: Mapping[int, str] | None = None,
    names: Mapping[MessageId, str] | None = None,
    violations: Iterable[Violation] = (),
    check: Sequence[str] = (),
    title: str = "",
) -> Diagram:
    """A diagram of ``run`` (the only run in ``events`` if None).

    ``check`` names properties (``"fifo"``, ``"causal"``, ...) for the reference
    checkers to look for; what they find is highlighted with ``violations``.
    """
    evs = list(events)
    runs = sorted({e.run for e in evs})
    if run is None:
        if len(runs) > 1:
            raise ValueError(f"the trace holds {len(runs)} runs; pick one with run=")
    else:
        evs = [e for e in evs if e.run == run]
        if not evs:
            raise ValueError(f"no events of run {run!r}; the trace has {runs}")
    found = list(violations)
    if check:
        report = check_trace(evs, check)
        found += [v for prop in check for v in report.violations[prop]]
    return Diagram(
        tuple(evs),
        dict(labels or {}),
        dict(names) if names is not None else message_names(evs),
        tuple(found),
        title,
    )
