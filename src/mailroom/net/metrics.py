"""A node's metrics in the Prometheus text format (``--metrics ADDRESS``, ``GET /metrics``).

They are read from ``node_status`` at each scrape, with the Prometheus project's
client library (``prometheus_client``, the ``metrics`` extra): counters of messages
and frames, gauges of what the node holds and of its group. Every sample is labelled
with the node's ``pid``. The endpoint may listen on any address (a Prometheus server
scrapes it from elsewhere): it serves counts, never payloads or keys.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from mailroom.core.errors import LocalError
from mailroom.net.stats import REJECTED
from mailroom.net.status import Route, node_status

if TYPE_CHECKING:
    from mailroom.net.node import Node

#: Each series: (name, counter or gauge, where ``node_status`` holds it, help).
SERIES = (
    ("messages_sent", "counter", "stats.sent", "Messages this process's application sent."),
    ("messages_delivered", "counter", "stats.delivered", "Messages delivered to it."),
    ("frames_in", "counter", "stats.frames_in", "Packets received in authenticated frames."),
    ("frames_out", "counter", "stats.frames_out", "Packets sent in frames."),
    ("data_frames_in", "counter", "stats.data_frames_in", "DATA and BATCH frames received."),
    ("data_frames_out", "counter", "stats.data_frames_out", "DATA and BATCH frames sent."),
    ("steps", "counter", "stats.steps", "Steps the hosted endpoint took."),
    ("packets_refused", "counter", "stats.remote_errors", "Packets the endpoint refused."),
    ("outbox_dropped", "counter", "stats.outbox_dropped", "Frames dropped from a full outbox."),
    ("packets_superseded", "counter", "stats.superseded", "Control packets a later one replaced."),
    ("io_errors", "counter", "stats.io_errors", "Failed writes of the trace or checkpoint."),
    ("app_errors", "counter", "stats.app_errors", "Exceptions the application's callbacks raised."),
    ("connections_authenticated", "counter", "stats.authenticated", "Claims that proved the key."),
    ("checkpoint_behind", "counter", "stats.behind", "Peers that saw more of its ids."),
    ("held_messages", "gauge", "held", "Messages the endpoint holds (mail room, queued...)."),
    ("retransmissions", "gauge", "retransmissions", "The reliable layer's, in this view."),
    ("unacknowledged", "gauge", "unacknowledged", "Packets kept until acknowledged."),
    ("checkpoint_bytes", "gauge", "checkpoint_bytes", "Size of the checkpoint and its log."),
    ("delivery_lag_seconds", "gauge", "delivery_lag", "Seconds held with no delivery."),
    ("links_connected", "gauge", "connected", "Links to peers that are up."),
    ("outbox_frames", "gauge", "queued", "Frames waiting for a link."),
    ("view_id", "gauge", "group.view_id", "The installed view's id (0: none)."),
    ("view_members", "gauge", "group.members", "Members of the installed view."),
    ("waiting_for_majority", "gauge", "group.waiting", "1 while quorum is lost."),
    ("flushing", "gauge", "group.flushing", "1 while the view changes."),
)


def _values(data: dict[str, Any]) -> dict[str, Any]:
    """``node_status`` data, with the sums and the group's numbers the series read."""
    links, group = data["links"], data["group"]
    found = {f"stats.{k}": v for k, v in data["stats"].items()}
    found.update(
        data,
        connected=sum(1 for k in links if k["connected"]),
        queued=sum(k["queued"] for k in links),
    )
    if group is not None:
        view = group["view"] or {"id": 0, "members": []}
        found.update(
            {
                "group.view_id": view["id"],
                "group.members": len(view["members"]),
                "group.waiting": int(group["waiting_for_majority"]),
                "group.flushing": int(group["flush"] != "running"),
            }
        )
    return found


def _families(data: dict[str, Any]) -> Iterator[Any]:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    pid = str(data["pid"])
    found = _values(data)
    for name, kind, key, text in SERIES:
        if key in found:
            family = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
            metric = family(f"mailroom_{name}", text, labels=["pid"])
            metric.add_metric([pid], found[key])
            yield metric
    rejected = CounterMetricFamily(
        "mailroom_rejected", "Frames and connections rejected, by reason.", labels=["pid", "reason"]
    )
    for reason in REJECTED:
        rejected.add_metric([pid, reason], data["stats"][reason])
    yield rejected


def metrics_routes(node: Node) -> dict[str, Route]:
    """``/metrics``: the node's metrics in the Prometheus text format (LocalError without
    ``prometheus_client``)."""
    try:
        from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
    except ImportError:
        raise LocalError(
            "metrics need the prometheus_client package: pip install 'mailroom[metrics]'",
            hint="pip install 'mailroom[metrics]'",
        ) from None

    class Collector:
        def collect(self) -> Iterator[Any]:
            return _families(node_status(node))

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector())
    return {"/metrics": lambda: (generate_latest(registry), CONTENT_TYPE_LATEST)}


__all__ = ["SERIES", "metrics_routes"]
