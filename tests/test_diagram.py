"""Space-time diagrams: held intervals, lost copies, duplicates and violations are
drawn where the trace says, in every renderer, from real simulator runs."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from mailroom import RST, Unordered
from mailroom.diagram import draw, layout, render_svg, render_text
from mailroom.sim import Simulation
from mailroom.trace.events import Event


def _alice_bob_carol(make: type) -> Simulation:
    sim = Simulation([make(pid, 3) for pid in range(3)], adversarial=True)
    m1 = sim.send(0, "meet at 3", to=2)
    m2 = sim.send(0, "join us?", to=1)
    sim.arrive_message(m2, 1)
    m3 = sim.send(1, "what meeting?", to=2)
    sim.arrive_message(m3, 2)
    sim.arrive_message(m1, 2)
    return sim


def _kinds(lay_arrows: tuple, kind: str) -> list[str]:
    return [a.name for a in lay_arrows if a.kind == kind]


def test_rst_holds_m3_in_the_mail_room() -> None:
    sim = _alice_bob_carol(RST)
    lay = layout(sim.trace)
    assert _kinds(lay.arrows, "message") == ["m1", "m2", "m3"]
    (held,) = [a for a in lay.arrows if a.kind == "held"]
    assert held.name == "m3" and held.dest == 2
    assert held.end[1] > held.start[1]  # from receipt down to delivery
    # m1's delivery shares the row of its receipt; m3 is delivered just below it
    m1 = next(a for a in lay.arrows if a.name == "m1")
    assert held.end[1] > m1.end[1]
    assert not any(a.bad for a in lay.arrows) and not any(m.bad for m in lay.marks)


def test_unordered_violation_is_highlighted() -> None:
    sim = _alice_bob_carol(Unordered)
    d = draw(sim.trace, check=["causal"])
    assert len(d.violations) == 1
    lay = d.layout()
    assert not [a for a in lay.arrows if a.kind == "held"]  # delivered on receipt
    assert sorted(a.name for a in lay.arrows if a.bad) == ["m1", "m3"]
    assert sorted(m.name for m in lay.marks if m.bad) == ["m1", "m3"]  # both deliveries
    svg = d.svg()
    assert "#c62828" in svg and "P2 delivered m3 before m1" in svg
    ET.fromstring(svg)  # well-formed
    assert "✗" in d.text()


def test_lost_duplicate_and_never_delivered() -> None:
    sim = Simulation([RST(pid, 3) for pid in range(3)], adversarial=True)
    m1 = sim.send(0, "lost", to=1)
    sim.drop(sim.packets(m1)[0].id)
    m2 = sim.send(0, "twice", to=2)
    sim.duplicate(sim.packets(m2)[0].id)
    for p in sim.packets(m2):
        sim.arrive(p.id)
    m3 = sim.send(0, "stuck", to=1)  # waits forever for m1
    sim.arrive_message(m3, 1)
    lay = layout(sim.trace)
    assert _kinds(lay.arrows, "lost") == ["m1"]
    assert _kinds(lay.arrows, "duplicate") == ["m2"]
    (held,) = [a for a in lay.arrows if a.kind == "held"]
    assert held.name == "m3" and held.end[1] == lay.rows - 0.5  # to the bottom
    ET.fromstring(render_svg(lay))


def test_trace_without_receipts_draws_send_to_delivery() -> None:
    sim = _alice_bob_carol(RST)
    events = [e for e in sim.trace if e.kind != "receive"]
    lay = layout(events)
    assert _kinds(lay.arrows, "message") == ["m1", "m2", "m3"]
    assert not _kinds(lay.arrows, "held")


def test_self_send_is_an_arc() -> None:
    sim = Simulation([RST(pid, 2) for pid in range(2)], adversarial=True)
    m = sim.send(0, "note to self", to=0)
    sim.arrive_message(m, 0)
    (a,) = layout(sim.trace).arrows
    assert a.start[0] == a.end[0] == 0.0
    assert "C" in render_svg(layout(sim.trace))  # drawn as a curve


def test_several_runs_need_a_choice() -> None:
    a = Event("a", 0, 1, "send", __import__("mailroom").MessageId(0, 1), 0, (1,))
    b = Event("b", 0, 1, "send", __import__("mailroom").MessageId(0, 1), 0, (1,))
    with pytest.raises(ValueError, match="2 runs"):
        draw([a, b])
    assert draw([a, b], run="b").events == (b,)
    with pytest.raises(ValueError, match="no events"):
        draw([a, b], run="c")


def test_matplotlib_and_files(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    d = draw(_alice_bob_carol(Unordered).trace, check=["causal"], title="Unordered")
    ax = d.plot()
    assert ax.get_title() == "Unordered"
    for suffix in ("svg", "txt", "png"):
        path = d.save(tmp_path / f"d.{suffix}")
        assert path.stat().st_size > 0
    assert d._repr_svg_().startswith("<svg")


def test_diagram_imports_without_matplotlib() -> None:
    code = "import sys, mailroom.diagram; assert 'matplotlib' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def _chat_room() -> list[Event]:
    from mailroom import CBCAST
    from mailroom.sim import NetworkModel, random_workload

    sim = Simulation([CBCAST(p, 4) for p in range(4)], NetworkModel(delay=(1.0, 10.0)), seed=3)
    random_workload(sim, 6, mode="broadcast", seed=3)
    sim.run()
    return sim.trace


def test_labels_keep_apart_and_held_arcs_take_lanes() -> None:
    from mailroom.diagram.svg import LABEL_GAP, _px, held_lanes, label_places

    lay = layout(_chat_room())
    places = label_places(lay.arrows)
    spots = []
    for i, at in places.items():
        (x1, y1), (x2, y2) = _px(lay.arrows[i].start), _px(lay.arrows[i].end)
        spots.append((x1 + (x2 - x1) * at, y1 + (y2 - y1) * at))
    close = [
        (a, b)
        for k, a in enumerate(spots)
        for b in spots[k + 1 :]
        if abs(a[0] - b[0]) + abs(a[1] - b[1]) < LABEL_GAP / 2
    ]
    assert len(places) > 10 and not close
    held = [a for a in lay.arrows if a.kind == "held"]
    assert held and set(held_lanes(lay.arrows)) == {
        i for i, a in enumerate(lay.arrows) if a.kind == "held"
    }
    # two overlapping holds on one process take different lanes
    Arrow = type(held[0])
    twin = [
        Arrow(**{**_fields(held[0]), "start": (0.0, 1.0), "end": (0.0, 5.0)}),
        Arrow(**{**_fields(held[0]), "start": (0.0, 2.0), "end": (0.0, 4.0)}),
        Arrow(**{**_fields(held[0]), "start": (0.0, 6.0), "end": (0.0, 7.0)}),
    ]
    assert held_lanes(twin) == {0: 0, 1: 1, 2: 0}


def _fields(obj: object) -> dict[str, object]:
    import attrs

    return attrs.asdict(obj, recurse=False)  # type: ignore[arg-type]


def test_svg_has_a_legend_for_dots_and_arcs() -> None:
    svg = draw(_chat_room()).svg()
    ET.fromstring(svg)
    assert "send or delivery" in svg and "packet received" in svg
    assert "held in the mail room" in svg
    assert "send or delivery" not in render_svg(layout(_chat_room()), legend=False)


def test_sweep_charts_have_units_and_distinct_markers() -> None:
    pytest.importorskip("matplotlib")
    from mailroom.diagram.charts import CHARTS, MARKERS

    assert all(spec[3] for spec in CHARTS.values())
    assert "bytes" in CHARTS["metadata"][3] and "time units" in CHARTS["delay"][3]
    assert len(set(MARKERS)) == len(MARKERS)


def _crash_story() -> tuple[Simulation, list[int]]:
    """Alice, Bob and Carol broadcast in V1; Carol's m3 reaches only Bob before she
    crashes; the survivors suspect her, the flush hands m3 to Alice, V2 is installed;
    Dave joins (V3), gets the state and broadcasts m4. Also: the story's step of
    each trace event."""
    from mailroom import Group

    def settle(sim: Simulation) -> None:
        while sim.in_flight:
            sim.arrive(min(sim.in_flight))

    members = (0, 1, 2)
    sim = Simulation(
        [Group(p, 4, "cbcast", members=members) for p in members] + [Group(3, 4, "cbcast")],
        adversarial=True,
    )
    steps: list[int] = []

    def step(k: int) -> None:
        steps.extend([k] * (len(sim.trace) - len(steps)))

    step(0)
    sim.broadcast(0, "a")
    sim.broadcast(1, "b")
    settle(sim)
    step(1)
    m3 = sim.broadcast(2, "c")
    sim.drop(sim.packets(m3, to=0)[0].id)
    sim.crash(2)
    sim.arrive_message(m3, 1)
    step(2)
    sim.suspect(0, 2)
    sim.suspect(1, 2)
    settle(sim)
    step(4)
    sim.join(3, Group(3, 4, "cbcast", contacts=[0, 1]))
    settle(sim)
    sim.broadcast(3, "d")
    settle(sim)
    step(5)
    return sim, steps


CRASH_STORY_TEXT = """\
  step  P0                    P1                    P2                    P3
     0  V1 {0,1,2}            V1 {0,1,2}            V1 {0,1,2}
     1  send m1 ─▶ all        │                     │
     1  deliver m1            │                     │
     1  │                     send m2 ─▶ all        │
     1  │                     deliver m2            │
     1  │                     m1 ▶ recv             │
     1  │                     deliver m1            │
     1  │                     │                     m1 ▶ recv
     1  │                     │                     deliver m1
     1  m2 ▶ recv             │                     │
     1  deliver m2            │                     │
     1  │                     │                     m2 ▶ recv
     1  │                     │                     deliver m2
     2  │                     │                     send m3 ─▶ all
     2  │                     │                     deliver m3
     2  │                     m3 ▶ recv             ✕ out
     2  │                     deliver m3
     4  deliver m3 (flush)    │
     4  V2 {0,1}              V2 {0,1}
     5  V3 {0,1,3}            V3 {0,1,3}                                  V3 {0,1,3}
     5  │                     │                                           send m4 ─▶ all
     5  │                     │                                           deliver m4
     5  m4 ▶ recv             │                                           │
     5  deliver m4            │                                           │
     5  │                     m4 ▶ recv                                   │
     5  │                     deliver m4                                  │"""


def test_text_shows_views_the_flush_and_the_crashed_line() -> None:
    sim, steps = _crash_story()
    assert sim.app_state[3][:3] == [[0, 1], [1, 1], [2, 1]]  # Dave got the state
    assert render_text(sim.trace, steps=steps) == CRASH_STORY_TEXT


def test_text_views_share_a_row_only_at_the_same_moment() -> None:
    sim, _ = _crash_story()
    lines = draw(sim.trace).text().splitlines()  # by time: one arrival, one time unit
    assert lines[1] == "     0  " + "".join(f"{'V1 {0,1,2}':<22}" for _ in range(3)).rstrip()
    v2 = [line for line in lines if "V2 {0,1}" in line]
    assert len(v2) == 2 and v2[0].split()[0] != v2[1].split()[0]  # installed at two times
    assert [line.split()[1:] for line in lines if "(flush)" in line] == [
        ["deliver", "m3", "(flush)", "│"]
    ]


def test_layout_marks_views_recovered_messages_and_line_ends() -> None:
    lay = layout(_crash_story()[0].trace)
    views = [(m.name, m.process, m.at) for m in lay.marks if m.kind == "view"]
    assert views[:3] == [("V1 {0,1,2}", p, (float(p), 0.0)) for p in range(3)]  # one row
    assert [v[:2] for v in views[3:]] == [
        ("V2 {0,1}", 0),
        ("V2 {0,1}", 1),
        ("V3 {0,1,3}", 0),
        ("V3 {0,1,3}", 1),
        ("V3 {0,1,3}", 3),
    ]
    # broadcasts go to the members of their view: nothing from V1 to Dave, nor from V3 to Carol
    arrows = [(a.kind, a.name, a.dest) for a in lay.arrows]
    assert arrows == [
        ("message", "m1", 1),
        ("message", "m1", 2),
        ("message", "m2", 0),
        ("message", "m2", 2),
        ("recovered", "m3", 0),
        ("message", "m3", 1),
        ("message", "m4", 0),
        ("message", "m4", 1),
    ]
    (end,) = [m for m in lay.marks if m.kind == "end"]
    carol_last = max(m.at[1] for m in lay.marks if m.process == 2 and m.kind != "end")
    assert end.process == 2 and end.at == (2.0, carol_last + 0.5)
    assert lay.line(2) == (-0.35, end.at[1])  # Carol's line ends at the cross
    dave_view = next(m.at[1] for m in lay.marks if m.process == 3)
    assert lay.line(3) == (dave_view - 0.35, float(lay.rows))  # Dave's starts when he joins
    assert lay.line(0) == (-0.35, float(lay.rows))


def test_traces_without_views_keep_full_lines() -> None:
    lay = layout(_alice_bob_carol(RST).trace)
    assert lay.lines == () and lay.line(2) == (-0.35, float(lay.rows))
    assert not [m for m in lay.marks if m.kind in ("view", "end")]
    assert "view installed" not in render_svg(lay)


def test_svg_and_matplotlib_draw_the_views() -> None:
    d = draw(_crash_story()[0].trace)
    svg = d.svg()
    ET.fromstring(svg)
    for text in ("V2 {0,1}", "V3 {0,1,3}", "view installed", "handed on by the flush"):
        assert text in svg
    assert "P2 is out of the group" in svg and "arrow-recovered" in svg
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    ax = d.plot()
    texts = [t.get_text() for t in ax.texts]
    assert texts.count("V2 {0,1}") == 2 and texts.count("V3 {0,1,3}") == 3
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "view installed" in legend and "out of the group" in legend


def test_a_send_during_a_flush_is_drawn_where_it_goes_out_in_the_next_view() -> None:
    from mailroom import Group

    sim = Simulation([Group(p, 3, "cbcast", members=range(3)) for p in range(3)], adversarial=True)
    sim.crash(2)
    sim.suspect(0, 2)  # Alice coordinates: she freezes, her broadcast waits for view 2
    sim.broadcast(0, "sent during the flush")
    sim.suspect(1, 2)
    while sim.in_flight:
        sim.arrive(min(sim.in_flight))
    text = draw(sim.trace).text()  # without the time column (the simulator's business)
    assert [line[8:] for line in text.splitlines()] == [
        "P0                    P1                    P2",
        "V1 {0,1,2}            V1 {0,1,2}            V1 {0,1,2}",
        "V2 {0,1}              │                     ✕ out",
        "send m1 ─▶ all        │",
        "deliver m1            │",
        "│                     V2 {0,1}",
        "│                     m1 ▶ recv",
        "│                     deliver m1",
    ]
    arrows = [(a.kind, a.dest, a.start, a.end) for a in layout(sim.trace).arrows]
    assert arrows == [("message", 1, (0.0, 2.0), (1.0, 4.0))]


def test_text_columns_widen_for_long_cells() -> None:
    a = __import__("mailroom").MessageId(0, 1)
    events = [
        Event("r", 0, 1, "send", a, 0, (1,), time=0.0),
        Event("r", 1, 1, "receive", a, 0, (1,), time=1.0),
    ]
    text = render_text(events, names={a: "a-very-long-message-name"}, width=10)
    assert text.splitlines() == [
        "  time  P0                                  P1",
        "     0  send a-very-long-message-name ─▶ P1 │",
        "     1  │                                   a-very-long-message-name ▶ recv",
    ]


def test_a_joiner_that_has_not_joined_gets_no_column() -> None:
    trace = _crash_story()[0].trace
    before = [e for e in trace if e.process != 3 and (e.view or 0) < 3]
    assert all(3 in e.dest for e in before if e.kind == "send")  # the simulator's dest
    assert layout(before).processes == (0, 1, 2)
    assert render_text(before).splitlines()[0].split() == ["time", "P0", "P1", "P2"]
    assert layout(trace).processes == (0, 1, 2, 3)


def test_text_time_column_widens_for_long_times() -> None:
    a = __import__("mailroom").MessageId(0, 1)
    events = [
        Event("r", 0, 1, "send", a, 0, (1,), time=0.0),
        Event("r", 1, 1, "receive", a, 0, (1,), time=1.4179550430877188),
    ]
    assert render_text(events).splitlines() == [
        "   time  P0                    P1",
        "      0  send m1 ─▶ P1         │",
        "1.41796  │                     m1 ▶ recv",
    ]
