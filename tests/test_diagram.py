"""Space-time diagrams: held intervals, lost copies, duplicates and violations are
drawn where the trace says, in every renderer, from real simulator runs."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from mailroom import RST, Unordered
from mailroom.diagram import draw, layout, render_svg
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
