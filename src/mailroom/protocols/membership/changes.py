"""The view changes a process knows are wanted: suspected members, leaving members, joiners.

Members learn them from their host (``suspect``, ``leave``) and from each other
(Suspect, Leave and Join packets, forwarded to the coordinator). They decide the next
view's members: the current members less the suspected, the leaving and the old
incarnations of rejoining processes, plus the joiners. Primary partition: the next
view needs a majority of the current view among those that stay, so a minority never
installs a view; when those that stay are no majority alone, the members leaving of
their own accord count too, none of them suspected (``voters``): a member that
leaves still promises and accepts the flush that lets it go, so a group of two
shrinks to one by a leave (never by a crash or a suspicion). What is wanted of
members that the next view settles is forgotten when it is installed; everything is
forgotten when this process is excluded.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from mailroom.core.actions import View
from mailroom.core.persist import Field, snap_counter, snap_list, snap_pid
from mailroom.protocols.membership.packets import Join, Leave, Suspect
from mailroom.protocols.membership.values import MEMBER_SET


@attrs.define
class Changes:
    """Wanted view changes at a process of a group of ``n``."""

    n: int
    suspects: set[int] = attrs.Factory(set)
    leaving: set[int] = attrs.Factory(set)
    #: pid -> (incarnation, messages it sent before asking): processes asking to join
    joiners: dict[int, tuple[int, int]] = attrs.Factory(dict)

    @property
    def wanted(self) -> bool:
        """Some change is wanted (this process waits for a flush to make it)."""
        return bool(self.suspects or self.leaving or self.joiners)

    def next_members(self, view: View) -> tuple[list[int], tuple[int, ...]] | None:
        """The members of ``view`` that stay and the next view's members, or None if
        no change of ``view`` is wanted. A member whose later incarnation asks to join
        (it restarted) leaves in one view and comes back in the next, so its departure
        is a view change that applications and trace checkers see."""
        joiners = set(self.joiners) - self.leaving
        rejoining = joiners & set(view.members)
        gone = (self.suspects | self.leaving | rejoining) & set(view.members)
        if not gone and not joiners:
            return None
        survivors = [m for m in view.members if m not in gone]
        return survivors, tuple(sorted(set(survivors) | (joiners - rejoining)))

    def coordinator(self, view: View, incarnations: Sequence[int]) -> int | None:
        """The member of ``view`` (whose members have ``incarnations``, by rank) that runs
        its change: the lowest one neither suspected nor replaced (a newer incarnation
        of it asks to join: this one crashed, and would never run the flush that lets
        the new one in); None if every member is."""
        joiners, suspects = self.joiners, self.suspects
        for rank, m in enumerate(view.members):
            if m not in suspects and not (m in joiners and joiners[m][0] > incarnations[rank]):
                return m
        return None

    def lacks_majority(self, view: View) -> bool:
        """A change of ``view`` is wanted, but those whose promises it would count
        (``voters``) are no majority of it."""
        if not self.wanted:
            return False  # (the common case, at every tick)
        found = self.next_members(view)
        return found is not None and not has_majority(self.voters(view, found[0]), view)

    def leavers(self, view: View) -> set[int]:
        """Members of ``view`` leaving of their own accord (not rejoining): they take part
        in the flush that lets them go."""
        return (self.leaving & set(view.members)) - set(self.joiners)

    def voters(self, view: View, survivors: list[int]) -> list[int]:
        """The members whose promises a change of ``view`` counts towards its majority:
        ``survivors`` (those that stay), and when they are no majority alone, the
        ``leavers`` too, unless one of them is suspected (it may be gone: only a ballot
        that every counted member can answer may open) or nobody stays."""
        leavers = self.leavers(view)
        if has_majority(survivors, view) or not survivors or leavers & self.suspects:
            return survivors
        return survivors + sorted(leavers - set(survivors))

    def within(self, view: View, incarnations: tuple[int, ...]) -> Changes:
        """What is still wanted once ``view`` is installed: suspicions and leaves of its
        members, joins of processes it does not include (or includes as an older
        incarnation)."""
        members = set(view.members)
        joiners = {
            p: v
            for p, v in self.joiners.items()
            if p not in members or v[0] > incarnations[view.rank(p)]
        }
        return Changes(self.n, self.suspects & members, self.leaving & members, joiners)

    def forward(self, view: int, pid: int, coord: int) -> list[object]:
        """The requests this member repeats to the coordinator ``coord``."""
        out: list[object] = [Suspect(view, pid, p) for p in sorted(self.suspects)]
        if pid in self.leaving:
            out.append(Leave(view, pid))
        out += [Join(p, i, s) for p, (i, s) in sorted(self.joiners.items())]
        return out

    # -- snapshots ---------------------------------------------------------------------------
    def _load_joiners(self, data: object) -> None:
        for row in snap_list(data, "joiners"):
            p, inc, sent = snap_list(row, "joiners", 3)
            self.joiners[snap_pid(p, self.n, "joiners")] = (
                snap_counter(inc, "joiners"),
                snap_counter(sent, "joiners"),
            )

    persistent = (
        Field("suspects", kind=MEMBER_SET),
        Field("leaving", kind=MEMBER_SET),
        Field.custom(
            "joiners",
            lambda c: [[p, i, s] for p, (i, s) in sorted(c.joiners.items())],
            _load_joiners,
        ),
    )


def has_majority(survivors: list[int], view: View) -> bool:
    """``survivors`` are more than half of ``view``'s members (primary partition)."""
    return 2 * len(survivors) > len(view.members)
