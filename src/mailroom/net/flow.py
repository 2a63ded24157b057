"""Flow control: whether a node can take a send now (the endpoint's windows, the
bound on the packets the reliable layer keeps unacknowledged, ``max_retained``, and
the bound on this node's broadcasts not yet delivered back to it, ``max_in_flight``).

The endpoint's answers change only when it does (a step, or a send given to it), so
they are kept until ``changed()``: the application may ask before every send.

Why ``max_in_flight``: the reliable windows bound what waits on each channel, not
what a relay accepts. A sequencer numbers every member's requests as they come and
forwards each to every member; when it cannot forward as fast as the members request,
its windows fill and the orders queue behind them without bound (memory, and a wait of
seconds for every message). A broadcast is delivered back to its sender once the
group has taken it (numbered, proposed, acknowledged), so counting the broadcasts
not back yet bounds what each sender has out in the group. (Not the queue to a
receiver slower than the rest: its own broadcasts wait behind it, so it sends less
and catches up; one that stops reading is the failure detector's matter.)"""

from __future__ import annotations

from typing import Any

from mailroom.core.endpoint import capabilities
from mailroom.core.errors import BackpressureError, LocalError
from mailroom.core.stack import Stack


class Busy(BackpressureError, LocalError):
    """The node cannot take a send now (window full, mail room full, or its files
    cannot be written); ``await node.wait_can_send()`` returns when it can.

    A ``BackpressureError``: catch that. It is also a ``LocalError`` only for compatibility
    with code written for 0.2 that catches ``LocalError`` for it (deprecated: that base
    will go in a later major release; back-pressure is not misuse)."""


def check_writable(stalled: object | None) -> None:
    """Busy while the node's files cannot be written (``stalled``: why)."""
    if stalled is not None:
        raise Busy(f"the node cannot write its files ({stalled}); it retries")


class Flow:
    """Asks the endpoint's layers whether a send fits."""

    def __init__(
        self, endpoint: Any, max_retained: int | None, n: int, max_in_flight: int | None = None
    ) -> None:
        self.endpoint = endpoint
        self.max_retained = max_retained
        self.max_in_flight = max_in_flight
        #: this node's broadcasts not yet delivered back to it (as counted since start)
        self.in_flight = 0
        #: sends wait: ``max_in_flight`` were reached and no more than half came back yet
        self.held_back = False
        self.controlled = "can_send" in capabilities(endpoint)
        layers = list(endpoint.layers) if isinstance(endpoint, Stack) else [endpoint]
        self.keepers = [x for x in layers if hasattr(x, "retained")]
        self.fit = self._windows_fit(n)
        self._open: bool | None = None
        self._full: bool | None = None

    def changed(self) -> None:
        """The endpoint changed: ask it again next time."""
        self._open = self._full = None

    def _windows_fit(self, n: int) -> bool:
        """True when open windows alone cannot hold ``max_retained`` packets, so the
        count is needed only once a window is full (it costs a scan per step)."""
        if self.max_retained is None:
            return True
        held = 0
        for x in self.keepers:
            window = getattr(x, "window", None)
            if type(window) is not int:
                return False
            held += window * (n - 1)
        return held < self.max_retained

    def retained(self) -> int:
        """Packets the reliable layers keep until acknowledged."""
        return sum(int(x.retained()) for x in self.keepers)

    def windows_open(self) -> bool:
        """True when the endpoint's flow-controlled layers would send at once."""
        if self._open is None:
            self._open = not self.controlled or bool(self.endpoint.can_send())
        return self._open

    def broadcast(self, count: int) -> None:
        """This node broadcast ``count`` messages: at ``max_in_flight`` sends wait."""
        self.in_flight += count
        if self.max_in_flight is not None and self.in_flight >= self.max_in_flight:
            self.held_back = True

    def came_back(self, count: int) -> None:
        """``count`` of this node's broadcasts were delivered here (at zero it stays: a
        restarted node delivers broadcasts it made before the restart). Sends go on once
        no more than half of ``max_in_flight`` are out, so that they resume as a lot and
        not one message per delivery that comes back."""
        self.in_flight = max(0, self.in_flight - count)
        if self.held_back and self.in_flight <= (self.max_in_flight or 0) // 2:
            self.held_back = False

    def admit(self, stalled: object | None) -> None:
        """Busy while the node's files cannot be written (``stalled``: why) or while the
        reliable layer keeps ``max_retained`` packets; else nothing."""
        check_writable(stalled)
        if self.full():
            raise Busy(
                f"{self.retained()} packets wait for acknowledgement "
                f"(max_retained={self.max_retained})"
            )

    def can_send(self, stalled: object | None) -> bool:
        """True when a send goes at once: files writable (``stalled`` None), windows
        open, ``max_retained`` not reached, not held back by broadcasts in flight."""
        if stalled is not None:
            return False
        return self.windows_open() and not self.full() and not self.held_back

    def full(self) -> bool:
        """True when the reliable layer keeps ``max_retained`` unacknowledged packets."""
        if self._full is None:
            if self.max_retained is None or (self.fit and self.windows_open()):
                self._full = False
            else:
                self._full = self.retained() >= self.max_retained
        return self._full


__all__ = ["Busy", "Flow", "check_writable"]
