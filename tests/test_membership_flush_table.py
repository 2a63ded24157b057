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
    assert (f.round, f.freeze) == (IDLE, RUNNING)
    prepare = f.open(view=1, proposal=(0, 1))
    assert f.round is PREPARE and (prepare.attempt, prepare.coord) == (1, 0)
    assert f.promise(f.ballot) is None and f.freeze is PROMISED
    assert not f.count_promise(promise(0), {0, 1})
    assert f.count_promise(promise(1), {0, 1})
    f.propose(1, VALUE)
    assert f.round is ACCEPT
    assert f.accept(f.ballot, VALUE) is None and f.freeze is ACCEPTED
    assert not f.count_accepted(Accepted(1, 0, 1, 0), {0, 1})
    assert f.count_accepted(Accepted(1, 1, 1, 0), {0, 1})
    assert f.round is IDLE and f.value == VALUE


def test_an_event_without_a_transition_is_refused_naming_phase_and_event() -> None:
    f = Flush(0, 3)
    with pytest.raises(LocalError, match="a coordinator in phase IDLE takes no ALL_PROMISED"):
        f.propose(1, VALUE)
    assert f.round is IDLE and f.value is None  # unchanged
    assert not f.takes(Promise) and not f.count_promise(promise(1), {1})
    f.open(view=1, proposal=(0, 1))
    assert not f.takes(Accepted) and not f.count_accepted(Accepted(1, 1, 1, 0), {1})
    assert f.round is PREPARE
