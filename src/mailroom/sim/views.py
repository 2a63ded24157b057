"""Group membership as the simulator hosts it: the views each process installs.

For endpoints with a ``view`` (``mailroom.protocols.membership``'s Group and
HeartbeatDetector): each process's installed view id (None while it is out of
the group), the views it installed in order, its application state (the ids of
the messages it delivered, or was handed by a state transfer, as [origin, seq]
lists: what the default state transfer hands over), and the exclusions.
"""

from __future__ import annotations

from mailroom.core.actions import Excluded, View, ViewChange
from mailroom.core.messages import MessageId


def view_of(endpoint: object) -> View | None:
    """The view a membership endpoint has installed (None for other endpoints)."""
    view = getattr(endpoint, "view", None)
    return view if isinstance(view, View) else None


def is_member_endpoint(endpoint: object) -> bool:
    """True for endpoints of group membership (they say which view a send goes in)."""
    return hasattr(endpoint, "sending_view")


class Views:
    """The views and application state of ``n`` processes; ``membership`` is True once
    any of them is a group endpoint (only then is application state kept)."""

    def __init__(self, n: int, membership: bool) -> None:
        self.membership = membership
        self.current_view: list[int | None] = [None] * n
        self.app_state: list[list[list[int]]] = [[] for _ in range(n)]
        self.views: list[list[View]] = [[] for _ in range(n)]
        self.excluded: list[tuple[int, Excluded]] = []

    def install(self, pid: int, view: View) -> None:
        self.current_view[pid] = view.id
        self.views[pid].append(view)

    def take_state(self, pid: int, change: ViewChange) -> None:
        """The state a view change hands over replaces ``pid``'s (if it carries one)."""
        if change.state is not None:
            self.app_state[pid] = [list(m) for m in change.state]

    def state(self, pid: int) -> list[list[int]]:
        """A copy of ``pid``'s application state, for a state transfer."""
        return [list(m) for m in self.app_state[pid]]

    def deliver(self, pid: int, mid: MessageId) -> None:
        if self.membership:
            self.app_state[pid].append([mid.origin, mid.seq])

    def exclude(self, pid: int, action: Excluded) -> None:
        """``pid`` was excluded: it is out of the group and drops its state."""
        self.current_view[pid] = None
        self.app_state[pid] = []
        self.excluded.append((pid, action))

    def leave(self, pid: int) -> None:
        """``pid`` stopped: it is in no view (its state stays, as the record of it)."""
        self.current_view[pid] = None

    def fresh(self, pid: int) -> None:
        """A joiner takes slot ``pid``: out of the group, with no state yet."""
        self.membership = True
        self.current_view[pid] = None
        self.app_state[pid] = []
