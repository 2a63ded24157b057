"""State transfer: how a process that joins a view gets the application's state.

The Commit of a view names who needs the state (joiners, and members that promised
without it). The lowest member that holds it is the provider: its host is asked for
the state right after the ViewChange (``StateRequest``), and ``provide_state`` sends it
to every process that needs it. A process that needs the state installs the view at
once but tells its application only when the state arrives (its ViewChange carries
it); meanwhile it holds the view's packets and repeats a Query to the provider, which
answers with the state it kept. A new transfer starts with every view.
"""

from __future__ import annotations

from typing import Any

import attrs

from mailroom.core.actions import Action, StateRequest, Transmit, View
from mailroom.core.errors import LocalError
from mailroom.core.messages import Payload, check_payload
from mailroom.core.persist import FLAG, Field, snap_list
from mailroom.core.wire import is_packet
from mailroom.protocols.membership.packets import Query, StateTransfer
from mailroom.protocols.membership.values import MEMBERS, snap_members

Change = tuple[tuple[int, ...], tuple[int, ...]]


@attrs.define
class Transfer:
    """The state transfer of one view at a process of a group of ``n``."""

    n: int
    #: this process waits for the application state of the view
    needs_state: bool = False
    #: the processes this provider must send the state to (until ``provide``)
    state_to: tuple[int, ...] = ()
    #: what this provider sent, and to whom: kept to answer their Queries
    kept: tuple[tuple[int, ...], Payload] | None = None
    #: who sends this process the state (-1: nobody holds it)
    provider: int = -1
    #: (joined, left): the members the view added and removed, for the ViewChange
    change: Change = ((), ())

    @classmethod
    def of(cls, n: int, pid: int, view: View, needs: tuple[int, ...], change: Change) -> Transfer:
        """The transfer of newly installed ``view``, whose Commit said who ``needs`` the state."""
        holders = [m for m in view.members if m not in needs]
        provider = holders[0] if holders else -1
        state_to = tuple(sorted(needs)) if needs and provider == pid else ()
        return cls(n, pid in needs, state_to, None, provider, change)

    def request(self, view: int) -> list[Action]:
        """The host's request for the application state, if this process provides it."""
        return [StateRequest(view, self.state_to)] if self.state_to else []

    def provide(self, view: int, pid: int, state: Payload) -> list[Action]:
        """Send ``state`` to those who need it (LocalError if none was requested)."""
        if not self.state_to:
            raise LocalError(f"no state was requested for view {view!r}")
        check_payload(state)
        if is_packet(state):
            raise LocalError("the application state must be JSON data, not a packet")
        to, self.state_to = self.state_to, ()
        self.kept = (to, state)
        return [Transmit(p, StateTransfer(view, pid, state), None) for p in to]

    def answer(self, p: Query, pid: int) -> list[Action]:
        """The state again, for a process it was sent to that asks (its copy was lost)."""
        if self.kept is None or p.sender not in self.kept[0]:
            return []
        return [Transmit(p.sender, StateTransfer(p.view, pid, self.kept[1]), None)]

    def repeat(self, view: int, pid: int) -> list[Action] | None:
        """A waiting process asks its provider again (None: it does not wait)."""
        if self.needs_state and self.provider not in (-1, pid):
            return [Transmit(self.provider, Query(view, pid), None)]
        return None

    # -- snapshots ---------------------------------------------------------------------------
    def _dump_kept(self) -> Any:
        return None if self.kept is None else [list(self.kept[0]), self.kept[1]]

    def _load_kept(self, data: object) -> None:
        if data is not None:
            to, state = snap_list(data, "kept", 2)
            check_payload(state)
            self.kept = (snap_members(to, self.n, "kept"), state)

    def _load_provider(self, data: object) -> None:
        if data is not None and (type(data) is not int or not 0 <= data < self.n):
            raise LocalError(f"snapshot field provider holds {data!r}")
        self.provider = -1 if data is None else data

    def _load_change(self, data: object) -> None:
        joined, left = snap_list(data, "change", 2)
        self.change = (snap_members(joined, self.n, "change"), snap_members(left, self.n, "change"))

    persistent = (
        Field("needs_state", kind=FLAG),
        Field("state_to", kind=MEMBERS),
        Field.custom("kept", _dump_kept, _load_kept),
        Field.custom("provider", lambda t: None if t.provider < 0 else t.provider, _load_provider),
        Field.custom("change", lambda t: [list(t.change[0]), list(t.change[1])], _load_change),
    )
