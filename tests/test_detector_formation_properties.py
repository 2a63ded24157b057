"""The heartbeat detector's formation window, under Hypothesis-chosen heartbeats and
clocks: a founder not heard from yet is suspected exactly ``formation + timeout`` after
the detector started, never sooner; a founder once heard from is suspected only after
``timeout`` of silence, as without the window. A detector that ignores the window is
caught by the same check."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mailroom.protocols.membership import Group
from mailroom.protocols.membership.detector import Heartbeat, HeartbeatDetector

START = 1.0


def run(
    formation: float, timeout: float, beats: list[float], *, window: float | None = None
) -> tuple[dict[int, float], float | None]:
    """P0 of a founding view {0, 1, 2}: P1 beats at ``beats`` (from START), P2 never
    does. Ticks at every deadline and every beat. Returns when each was first suspected
    and the first time P1 was noted as heard (``window`` builds the detector with that
    formation instead: a detector that ignores the window)."""
    built = formation if window is None else window
    d = HeartbeatDetector(
        Group(0, 3, "sequencer", members=range(3)),
        interval=0.5,
        timeout=timeout,
        formation=built,
    )
    arrivals = sorted(START + b for b in beats)
    end = START + formation + 3 * timeout + 1
    suspected: dict[int, float] = {}
    now = START
    while arrivals and arrivals[0] == now:  # a beat at the first tick
        d.receive(Heartbeat(1, 1))
        arrivals.pop(0)
    beaten = bool(beats) and min(beats) == 0
    d.tick(now)
    noted = now if beaten else None
    while now < end:  # bounded: time strictly advances (deadlines and beats ahead)
        deadline = d.next_deadline()
        upcoming = [t for t in (deadline, *arrivals) if t is not None and t > now]
        if not upcoming:
            break
        now = min(upcoming)
        for t in [t for t in arrivals if t == now]:
            d.receive(Heartbeat(1, 1))
            arrivals.remove(t)
        d.tick(now)
        if noted is None and beats and START + min(beats) <= now:
            noted = now
        assert noted is None or d.heard[1] <= now  # once noted, heard as it is
        for q in sorted(d.suspected - set(suspected)):
            suspected[q] = now
    return suspected, noted


def problems(
    formation: float, timeout: float, beats: list[float], suspected: dict[int, float]
) -> list[str]:
    """What the window promises, checked against when P1 and P2 were suspected."""
    found = []
    if suspected.get(2) != START + formation + timeout:
        found.append(f"P2 (never heard) suspected at {suspected.get(2)}")
    if 1 in suspected:
        heard = [START + b for b in beats if START + b <= suspected[1]]
        last = max(heard) if heard else START + formation
        if suspected[1] < last + timeout:
            found.append(f"P1 suspected at {suspected[1]}, heard at {last}")
    return found


times = st.floats(min_value=0.0, max_value=40.0, allow_nan=False).map(lambda t: round(t, 2))


@given(
    formation=st.sampled_from([0.0, 1.0, 5.0, 30.0]),
    timeout=st.sampled_from([1.0, 2.0, 3.5]),
    beats=st.lists(times, max_size=12),
)
def test_a_founder_not_heard_from_is_suspected_only_after_the_window(
    formation: float, timeout: float, beats: list[float]
) -> None:
    suspected, _ = run(formation, timeout, beats)
    assert problems(formation, timeout, beats, suspected) == []


@given(beats=st.lists(times.filter(lambda t: t < 30.0), min_size=1, max_size=12))
def test_a_founder_heard_once_is_judged_by_silence_alone(beats: list[float]) -> None:
    suspected, noted = run(30.0, 2.0, beats)  # its first beat within the window
    first = START + min(beats)
    assert noted == first  # the first beat ends its window at once
    if 1 in suspected:
        assert suspected[1] >= first + 2.0


@given(
    formation=st.sampled_from([1.0, 5.0, 30.0]),
    beats=st.lists(times, max_size=12),
)
def test_a_detector_that_ignores_the_window_is_caught(formation: float, beats: list[float]) -> None:
    suspected, _ = run(formation, 2.0, beats, window=0.0)
    assert problems(formation, 2.0, beats, suspected) != []


def test_the_window_is_kept_in_snapshots_and_left_out_when_zero() -> None:
    from mailroom.core.registry import restore_endpoint

    plain = HeartbeatDetector(Group(0, 3, "sequencer", members=range(3)))
    assert "formation" not in plain.snapshot()
    d = HeartbeatDetector(Group(0, 3, "sequencer", members=range(3)), formation=7.5)
    d.tick(2.0)
    again = restore_endpoint(d.snapshot())
    assert again.formation == 7.5 and again.heard == {1: 9.5, 2: 9.5}
    assert again.snapshot() == d.snapshot()
