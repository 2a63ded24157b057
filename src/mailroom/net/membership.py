"""Group endpoints for the runtime: a member or a joiner, with a heartbeat failure detector.

A node hosts ``HeartbeatDetector(Group(...))``: the detector beats every
``heartbeat`` seconds of the node's clock and suspects a member silent for
``suspect_after`` seconds; the group then installs a view without it. A process
restarted from its checkpoint rejoins as its next incarnation (``rejoined``): it
keeps counting its message ids where it stopped, so no id is used twice.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from mailroom.core.errors import LocalError
from mailroom.protocols.membership import Group
from mailroom.protocols.membership.detector import HeartbeatDetector


def group_of(endpoint: Any) -> Group | None:
    """The ``Group`` of ``endpoint`` (itself, or the one a detector wraps), else None."""
    if isinstance(endpoint, HeartbeatDetector):
        endpoint = endpoint.group
    return endpoint if isinstance(endpoint, Group) else None


def is_member(endpoint: Any) -> bool:
    """True for group endpoints: they install views and say which view a send goes in."""
    return group_of(endpoint) is not None


def group_endpoint(
    protocol: str,
    pid: int,
    n: int,
    *,
    members: Collection[int] | None = None,
    contacts: Collection[int] = (),
    reliable: bool = True,
    heartbeat: float = 0.5,
    suspect_after: float = 2.0,
    safe: bool = False,
    safe_quorum: str = "all",
    formation: float = 0.0,
) -> HeartbeatDetector:
    """``HeartbeatDetector(Group(protocol))`` for process ``pid`` of the ``n`` identities:
    a member of the initial view ``members``, or (``members`` None) a joiner that asks
    ``contacts``. Join and flush messages are resent every ``heartbeat`` seconds; with
    ``safe`` the group delivers safely (a message once every member holds it, or with
    ``safe_quorum="majority"`` once a majority of the view does). ``formation``: seconds
    during which a founder never heard from is not suspected (a founder that starts
    late joins the founding view; ``HeartbeatDetector``)."""
    if heartbeat <= 0 or suspect_after <= heartbeat:
        raise LocalError(
            f"need 0 < heartbeat < suspect-after, got {heartbeat} and {suspect_after}",
            hint="suspect a member only after it missed a few heartbeats",
        )
    group = Group(
        pid,
        n,
        protocol,
        members=members,
        contacts=contacts,
        reliable=reliable,
        retry=heartbeat,
        safe=safe,
        safe_quorum=safe_quorum,
    )
    return HeartbeatDetector(group, interval=heartbeat, timeout=suspect_after, formation=formation)


def queues_sends(endpoint: Any) -> bool:
    """True if ``endpoint`` is a group that holds sends now (its view is changing, or it
    is joining): they go out, with their ids, once the next view is installed."""
    group = group_of(endpoint)
    return group is not None and not (group.joined and not group.flushing)


def rejoined(
    endpoint: Any,
    contacts: Collection[int],
    *,
    sent: int = 0,
    incarnation: int = 0,
    requeue: bool = True,
) -> Any:
    """A joiner that takes over from ``endpoint`` (a group endpoint restored from a
    checkpoint): its next incarnation, with the same options, asking ``contacts``
    (default: the other members of its last view), its message ids counting on from
    the last one it used. ``sent`` and ``incarnation``: what the process is known to
    have reached (a log cut after them): ids start after ``sent``, the incarnation
    above ``incarnation``. What the old incarnation queued and never sent is queued
    again with its ids (``requeue``; not after a cut log, or if ``sent`` says the
    process went further: it may have gone out)."""
    old = group_of(endpoint)
    if old is None:
        raise LocalError(f"only a group member can rejoin, not {type(endpoint).__name__}")
    if not contacts:
        contacts = [m for m in (old.view.members if old.view else old.contacts) if m != old.pid]
    group = Group(
        old.pid,
        old.n,
        old.inner_protocol,
        contacts=contacts,
        reliable=old.reliable,
        retry=old.retry,
        stability_every=old.stability_every,
        safe=old.safe,
        safe_quorum=old.safe_quorum,
        incarnation=max(old.incarnation, incarnation) + 1,
    )
    queue = old.unsent() if requeue and sent <= old.sent_count else []
    group.sent_count = max(old.sent_count, sent) - len(queue)
    for payload in queue:  # a joiner queues them for its first view with the state
        group.broadcast(payload)
    if isinstance(endpoint, HeartbeatDetector):
        return HeartbeatDetector(
            group,
            interval=endpoint.interval,
            timeout=endpoint.timeout,
            formation=endpoint.formation,
        )
    return group


__all__ = ["group_endpoint", "group_of", "is_member", "queues_sends", "rejoined"]
