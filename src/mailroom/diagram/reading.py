"""What every renderer (text, SVG, matplotlib) reads from one run's events first:
the messages' names, the processes to draw, and, in a membership trace, each view's
members, the deliveries the flush handed on and the processes' lifelines."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import attrs

from mailroom.core.messages import MessageId
from mailroom.diagram.views import Lifeline, lifelines, processes, recovered, view_members
from mailroom.trace.events import Event


def message_names(events: Iterable[Event]) -> dict[MessageId, str]:
    """m1, m2, ... in the order the messages were sent."""
    names: dict[MessageId, str] = {}
    for e in events:
        if e.kind == "send" and e.message not in names:
            names[e.message] = f"m{len(names) + 1}"
    return names


@attrs.frozen
class Reading:
    """One run's events as a renderer needs them (see ``mailroom.diagram.views``)."""

    names: dict[MessageId, str]
    processes: tuple[int, ...]
    members: dict[int, tuple[int, ...]]
    recovered: set[tuple[MessageId, int]]
    lifelines: dict[int, Lifeline]

    @classmethod
    def of(cls, events: Sequence[Event], names: Mapping[MessageId, str] | None) -> Reading:
        """Read ``events``; ``names`` (m1, m2, ... in order of sending if None)."""
        return cls(
            dict(names) if names is not None else message_names(events),
            tuple(processes(events)),
            view_members(events),
            recovered(events),
            lifelines(events),
        )

    def name(self, m: MessageId) -> str:
        return self.names.get(m, str(m))
