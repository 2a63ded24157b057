"""What a group member sees of its group, as one value a host can log or show.

``Group.status()`` returns a ``GroupStatus``: the installed view and its members'
incarnations, the coordinator, where the flush stands, the wanted changes, and
whether the member waits for a majority (and since when, in the host's time). The
group reads no clock and writes no log; the host decides how often to log it (a
member that cannot install a view for lack of a majority says so at every retry) and
``data()`` gives it as JSON data for a status command.
"""

from __future__ import annotations

from typing import Any

import attrs

from mailroom.core.actions import View
from mailroom.protocols.membership.flush import Freeze, Round


@attrs.frozen
class GroupStatus:
    """One member's view of its group at one moment (``Group.status()``).

    ``view``: the installed view (id and members), None while joining or once out;
    ``incarnations``: its members' incarnations, in member order; ``joined``: it holds
    the application state; ``flush``: the member's side of the flush (RUNNING, or frozen:
    PROMISED, ACCEPTED) and ``round``: the coordinator's (IDLE, PREPARE, ACCEPT);
    ``suspects``, ``leaving``, ``joiners``: the changes it knows are wanted (joiners wait
    to be let in); ``staying``: the members the next view would keep; ``waiting_for_majority``:
    a change is wanted but ``staying`` is no majority of the view, so no view can be
    installed (primary partition) and ``waiting_since`` is the host time of the first tick
    that found it so; ``future``: packets of later views it holds; ``queued``: messages
    issued and not sent yet; ``flush_log``: deliveries a flush would carry (not known to be
    stable); ``gone``: it left the group for good; ``waiting_safe``: under safe delivery,
    the messages it holds and has not handed over until every member (``safe_quorum``
    "all") or a majority ("majority") holds them.
    """

    pid: int
    incarnation: int
    view: View | None
    incarnations: tuple[int, ...]
    joined: bool
    coordinator: int | None
    flush: Freeze
    round: Round
    suspects: tuple[int, ...]
    leaving: tuple[int, ...]
    joiners: tuple[int, ...]
    staying: tuple[int, ...]
    waiting_for_majority: bool
    waiting_since: float | None
    future: int
    queued: int
    flush_log: int
    gone: bool
    waiting_safe: int = 0
    safe_quorum: str = "all"

    def data(self) -> dict[str, Any]:
        """As JSON data (phases by their lower-case names)."""
        out: dict[str, Any] = attrs.asdict(self, recurse=False)
        out["view"] = (
            None if self.view is None else {"id": self.view.id, "members": list(self.view.members)}
        )
        out["flush"] = self.flush.name.lower()
        out["round"] = self.round.name.lower()
        for key in ("incarnations", "suspects", "leaving", "joiners", "staying"):
            out[key] = list(out[key])
        return out

    def summary(self, now: float | None = None) -> str:
        """One line for a log. The flush reads "no flush" while the member is not frozen
        (it delivers and sends) and "frozen by a flush (promised)" or "(accepted)" while
        it is. With ``now`` (the host's time, the clock of ``waiting_since``) a wait for a
        majority is given as a duration ("for 12.3 s"); without it, as the host time it
        began ("since t=5")."""
        who = f"P{self.pid}#{self.incarnation}"
        if self.gone:
            return f"{who} has left the group"
        if self.view is None:
            held = f"{self.future} packets of later views held"
            return f"{who} is not in a view: it asks to join ({held})"
        members = ", ".join(map(str, self.view.members))
        line = f"{who} in view {self.view.id} [{members}]"
        if not self.joined:
            line += ", waiting for the application state"
        line += f"; coordinator {_pid(self.coordinator)}; {_flush(self.flush)}"
        if self.round is not Round.IDLE:
            line += f", coordinating ({self.round.name.lower()})"
        for what, pids in (
            ("suspects", self.suspects),
            ("leaving", self.leaving),
            ("joining", self.joiners),
        ):
            if pids:
                line += f"; {what} " + ", ".join(f"P{p}" for p in pids)
        if self.waiting_for_majority:
            since = _since(self.waiting_since, now)
            line += (
                f"; WAITING FOR A MAJORITY{since}: {len(self.staying)} of "
                f"{len(self.view.members)} members would stay"
            )
        if self.future:
            line += f"; {self.future} packets of later views held"
        if self.waiting_safe:
            who = "every member has" if self.safe_quorum == "all" else "a majority has"
            line += f"; {self.waiting_safe} held until {who} them (safe delivery)"
        return line


def _flush(freeze: Freeze) -> str:
    return "no flush" if freeze is Freeze.RUNNING else f"frozen by a flush ({freeze.name.lower()})"


def _since(start: float | None, now: float | None) -> str:
    if start is None:
        return ""
    if now is None:
        return f" since t={start:g}"
    return f" for {max(0.0, now - start):.1f} s"


def _pid(pid: int | None) -> str:
    return "none" if pid is None else f"P{pid}"
