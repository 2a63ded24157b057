"""What lives for one view at a group member, replaced as a whole when the view ends.

An ``Epoch`` is the installed view (None before the first one and after exclusion),
its flush and its state transfer: a Commit that installs the next view, or excludes
this process, starts a new epoch, so nothing of the old view survives by mistake.
``Retries`` is what this process repeats and whom it asked or told something since
the last installation (an exclusion keeps it: the joiner goes on from there).

Each part declares its own persistent fields; ``lift`` turns a part's fields into
fields of the endpoint that holds it, so ``Group.persistent`` is the parts' tables
put together and snapshot and restore cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import attrs

from mailroom.core.actions import View
from mailroom.core.endpoint import same_data
from mailroom.core.errors import LocalError
from mailroom.core.persist import TIME, Field, lift
from mailroom.protocols.membership.flush import Flush
from mailroom.protocols.membership.transfer import Transfer
from mailroom.protocols.membership.view import InstalledView, view_data


@attrs.define
class Epoch:
    """Process ``pid``'s (of ``n``) view, flush and state transfer."""

    pid: int
    n: int
    installed: InstalledView | None = None
    flush: Flush = attrs.field()
    transfer: Transfer = attrs.field()

    @flush.default
    def _no_flush(self) -> Flush:
        return Flush(self.pid, self.n)

    @transfer.default
    def _no_transfer(self) -> Transfer:
        return Transfer(self.n)

    @property
    def view(self) -> View | None:
        return None if self.installed is None else self.installed.view

    def _load_view(self, data: object) -> None:
        if data is not None:
            self.installed = InstalledView.loading(data, self.pid, self.n)

    persistent: ClassVar[tuple[Field, ...]] = ()  # the parts' fields, set below


@attrs.define
class Retries:
    """When this process next repeats its requests, whom it asked about a later view or
    told they were excluded since the last installation (once each), and since when it
    has waited for a majority (host time; not in snapshots)."""

    at: float | None = None
    asked: set[int] = attrs.Factory(set)
    told: set[int] = attrs.Factory(set)
    waiting_since: float | None = None
    #: safe delivery: the (rank, inner seq) of the first held delivery at the last retry
    head: tuple[int, int] | None = None

    persistent = (Field("retry_at", "at", TIME.optional()),)

    def stuck(self, head: tuple[int, int]) -> bool:
        """``head`` is the first held delivery now and was at the last retry too."""
        again, self.head = head == self.head, head
        return again


def lift_optional(
    get: Callable[[Any], Any], fields: tuple[Field, ...], empty: dict[str, Any]
) -> tuple[Field, ...]:
    """``lift`` for a part that may be None: then each field holds its ``empty`` value."""
    return tuple(_lifted_optional(get, f, empty[f.key]) for f in fields)


def _lifted_optional(get: Callable[[Any], Any], f: Field, empty: Any) -> Field:
    def dump(ep: Any) -> Any:
        part = get(ep)
        return empty if part is None else f.dump(part)

    def load(ep: Any, data: Any) -> None:
        part = get(ep)
        if part is not None:
            f.load(part, data)
        elif not same_data(data, empty):
            raise LocalError(f"snapshot field {f.key} holds data but no view is installed")

    return Field.custom(f.key, dump, load, f.absent)


Epoch.persistent = (
    Field.custom("view", lambda e: None if e.view is None else view_data(e.view), Epoch._load_view),
    *lift_optional(lambda e: e.installed, InstalledView.persistent, InstalledView.EMPTY),
    *lift(lambda e: e.transfer, Transfer.persistent),
    *lift(lambda e: e.flush, Flush.persistent),
)
