"""The text ``mailroom status`` prints from a member's status (``node_status``'s JSON
data), in a module that loads nothing of the runtime: ``mailroom status`` reads a
running member's status over HTTP and only needs to lay it out."""

from __future__ import annotations

from typing import Any

from mailroom.net.names import ANY, REJECTED


def render(data: dict[str, Any]) -> str:
    """The status as ``mailroom status`` prints it."""
    lines = [f"P{data['pid']}: {data['summary'] or 'not a group member'}"]
    if "build" in data:  # (a member of before 0.3.0 does not say)
        lines.append(f"build: {data['build']}")
    group = data["group"]
    if group is not None and group["view"] is not None:
        pairs = zip(group["view"]["members"], group["incarnations"], strict=False)
        incs = ", ".join(f"P{m}#{i}" for m, i in pairs)
        lines.append(f"members and incarnations: {incs}")
    if group is not None and group["waiting_for_majority"]:
        lines.append("quorum: LOST (no view can be installed without a majority)")
    stats = data["stats"]
    lines.append(
        f"messages: sent {stats['sent']}, delivered {stats['delivered']}, held {data['held']}, "
        f"delivery lag {data['delivery_lag']:g} s"
    )
    lines.append(
        f"reliable layer: {data['retransmissions']} retransmissions in this view, "
        f"{data['unacknowledged']} packets unacknowledged"
    )
    lines.append(f"checkpoint: {data['checkpoint_bytes']} bytes")
    if data.get("replica"):  # a replicated object's member (AsyncReplica(status=...))
        r = data["replica"]
        lines.append(
            f"replica: incarnation {r['incarnation']}, {r['applied']} operations applied, "
            f"log {r['log_entries']} entries ({r['log_bytes']} bytes) since its base, "
            f"{r['calls_waiting']} calls waiting"
        )
    kind = f"growable to {data['size']}" if data["growable"] else "peer table"
    lines.append(f"links ({kind}):")
    for link in data["links"]:
        peer = "seed" if link["peer"] == ANY else f"P{link['peer']}"
        state = "connected" if link["connected"] else "not connected"
        address = link["address"] or "(address unknown)"
        lines.append(f"  {peer} {address}: {state}, {link['queued']} frames waiting")
    rejected = sum(stats[k] for k in REJECTED)
    lines.append(
        f"frames: {stats['frames_in']} in, {stats['frames_out']} out, {rejected} "
        f"rejected; packets refused by the endpoint: {stats['remote_errors']}"
    )
    return "\n".join(lines)


__all__ = ["render"]
