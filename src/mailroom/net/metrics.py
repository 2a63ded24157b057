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

#: Counters: (metric name, NetStats field, help).
COUNTERS = (
    ("messages_sent", "sent", "Messages this process sent (issued by its application)."),
    ("messages_delivered", "delivered", "Messages delivered to this process's application."),
    ("frames_in", "frames_in", "Packets received in authenticated frames."),
    ("frames_out", "frames_out", "Packets sent in frames."),
    ("packets_refused", "remote_errors", "Packets the endpoint refused (RemoteError)."),
    ("outbox_dropped", "outbox_dropped", "Frames dropped from a full outbox."),
    ("io_errors", "io_errors", "Failed writes of the trace or checkpoint."),
)
#: Gauges: (metric name, status key, help).
GAUGES = (
    ("held_messages", "held", "Messages the endpoint holds (mail room, queued, later views)."),
    ("retransmissions", "retransmissions", "Retransmissions of the reliable layer in this view."),
    ("unacknowledged", "unacknowledged", "Packets the reliable layer keeps until acknowledged."),
    ("checkpoint_bytes", "checkpoint_bytes", "Size of the checkpoint and its log."),
    ("delivery_lag_seconds", "delivery_lag", "Seconds messages were held with no delivery."),
)


def _families(data: dict[str, Any]) -> Iterator[Any]:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    pid = str(data["pid"])
    stats = data["stats"]
    for name, key, text in COUNTERS:
        c = CounterMetricFamily(f"mailroom_{name}", text, labels=["pid"])
        c.add_metric([pid], stats[key])
        yield c
    rejected = CounterMetricFamily("mailroom_rejected", "Frames and connections rejected, "
                                   "by reason.", labels=["pid", "reason"])  # fmt: skip
    for reason in REJECTED:
        rejected.add_metric([pid, reason], stats[reason])
    yield rejected
    gauges = [(name, data[key], text) for name, key, text in GAUGES]
    links = data["links"]
    gauges += [
        ("links_connected", sum(1 for k in links if k["connected"]), "Links to peers that are up."),
        ("outbox_frames", sum(k["queued"] for k in links), "Frames waiting for a link."),
    ]
    group = data["group"]
    if group is not None:
        view = group["view"] or {"id": 0, "members": []}
        gauges += [
            ("view_id", view["id"], "The installed view's id (0: none)."),
            ("view_members", len(view["members"]), "Members of the installed view."),
            ("waiting_for_majority", int(group["waiting_for_majority"]),
             "1 while no view can be installed for lack of a majority."),
            ("flushing", int(group["flush"] != "running"), "1 while the view changes."),
        ]  # fmt: skip
    for name, value, text in gauges:
        g = GaugeMetricFamily(f"mailroom_{name}", text, labels=["pid"])
        g.add_metric([pid], value)
        yield g


def metrics_routes(node: Node) -> dict[str, Route]:
    """``/metrics``: the node's metrics in the Prometheus text format (LocalError without
    ``prometheus_client``)."""
    try:
        from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
    except ImportError:
        raise LocalError(
            "metrics need the prometheus_client package",
            hint="pip install 'mailroom[metrics]'",
        ) from None

    class Collector:
        def collect(self) -> Iterator[Any]:
            return _families(node_status(node))

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector())
    return {"/metrics": lambda: (generate_latest(registry), CONTENT_TYPE_LATEST)}


__all__ = ["COUNTERS", "GAUGES", "metrics_routes"]
