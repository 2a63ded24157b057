"""Flow control: whether a node can take a send now (the endpoint's windows and the
bound on the packets the reliable layer keeps unacknowledged, ``max_retained``).

The answers change only when the endpoint does (a step, or a send given to it), so
they are kept until ``changed()``: the application may ask before every send."""

from __future__ import annotations

from typing import Any

from mailroom.core.endpoint import capabilities
from mailroom.core.stack import Stack


class Flow:
    """Asks the endpoint's layers whether a send fits."""

    def __init__(self, endpoint: Any, max_retained: int | None, n: int) -> None:
        self.endpoint = endpoint
        self.max_retained = max_retained
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

    def full(self) -> bool:
        """True when the reliable layer keeps ``max_retained`` unacknowledged packets."""
        if self._full is None:
            if self.max_retained is None or (self.fit and self.windows_open()):
                self._full = False
            else:
                self._full = self.retained() >= self.max_retained
        return self._full


__all__ = ["Flow"]
