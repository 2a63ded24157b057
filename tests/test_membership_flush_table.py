"""The flush's tables (``mailroom.protocols.membership.flush``) driven without a Group:
a coordinator moves only as ``COORDINATOR`` says, and an event its phase has no
transition for is refused with a LocalError naming the phase and the event."""

from __future__ import annotations

import pytest

from mailroom.core.errors import LocalError
from mailroom.protocols.membership.flush import (
    ACCEPT,
    ACCEPTED,
    IDLE,
    PREPARE,
    PROMISED,
    RUNNING,
    Flush,
)
from mailroom.protocols.membership.packets import Accepted, Promise
from mailroom.protocols.membership.values import NextView

VALUE = NextView((0, 1), (0, 0), (0, 0), (), [])


def promise(sender: int) -> Promise:
    """Member ``sender``'s promise of ballot (1, P0) in view 1."""
    return Promise(1, sender, 1, 0, 0, True, [], [], None)


def test_a_coordinator_runs_a_ballot_through_its_phases() -> None:
    f = Flush(0, 3)
    c, m = f.coordinator, f.member
    assert (c.round, m.freeze) == (IDLE, RUNNING)
    prepare = c.open(view=1, proposal=(0, 1), promised=m.promised)
    assert c.round is PREPARE and (prepare.attempt, prepare.coord) == (1, 0)
    assert m.promise(c.ballot) is None and m.freeze is PROMISED
    assert not c.count_promise(promise(0), {0, 1})
    assert c.count_promise(promise(1), {0, 1})
    c.propose(1, VALUE)
    assert c.round is ACCEPT
    assert m.accept(c.ballot, VALUE) is None and m.freeze is ACCEPTED
    assert not c.count_accepted(Accepted(1, 0, 1, 0), {0, 1})
    assert c.count_accepted(Accepted(1, 1, 1, 0), {0, 1})
    assert c.round is IDLE and c.value == VALUE


def test_an_event_without_a_transition_is_refused_naming_phase_and_event() -> None:
    c = Flush(0, 3).coordinator
    with pytest.raises(LocalError, match="a coordinator in phase IDLE takes no ALL_PROMISED"):
        c.propose(1, VALUE)
    assert c.round is IDLE and c.value is None  # unchanged
    assert not c.takes(Promise) and not c.count_promise(promise(1), {1})
    c.open(view=1, proposal=(0, 1))
    assert not c.takes(Accepted) and not c.count_accepted(Accepted(1, 1, 1, 0), {1})
    assert c.round is PREPARE
