"""Parquet traces round-trip exactly; a bad row is named."""

from __future__ import annotations

from pathlib import Path

import pytest

from mailroom.core.messages import MessageId
from mailroom.protocols import CBCAST
from mailroom.sim.simulation import NetworkModel, Simulation
from mailroom.sim.workload import random_workload
from mailroom.trace.events import Event, TraceError

pytest.importorskip("pyarrow")

from mailroom.trace.parquet import event_row, read_parquet, write_parquet


def test_round_trip(tmp_path: Path) -> None:
    sim = Simulation([CBCAST(p, 3) for p in range(3)], NetworkModel(delay=(1, 5)), seed=1, run="c")
    random_workload(sim, 15, mode="broadcast", seed=1)
    sim.run()
    path = tmp_path / "t.parquet"
    assert write_parquet(sim.trace, path, batch=7) == len(sim.trace)
    back = read_parquet(path)
    assert back == sim.trace
    assert [(e.vc, e.time, e.payload) for e in back] == [
        (e.vc, e.time, e.payload) for e in sim.trace
    ]


def test_empty_and_bad(tmp_path: Path) -> None:
    assert write_parquet([], tmp_path / "e.parquet") == 0
    assert read_parquet(tmp_path / "e.parquet") == []
    row = event_row(Event("r", 0, 1, "send", MessageId(0, 1), 0, (1,)))
    write_parquet([row, {**row, "kind": "shout"}], tmp_path / "b.parquet")
    with pytest.raises(TraceError, match="row 2: unknown kind 'shout'"):
        read_parquet(tmp_path / "b.parquet")


def test_the_header_is_kept_in_the_schema_metadata(tmp_path: Path) -> None:
    from mailroom.trace.header import TraceHeader, read_header
    from mailroom.trace.parquet import read_parquet_trace

    header = TraceHeader("mailroom test", "cbcast", ("causal",), 2, {"seed": 1})
    events = [Event("r", 0, 1, "send", MessageId(0, 1), 0, (1,))]
    path = tmp_path / "t.parquet"
    write_parquet(events, path, header=header)
    assert read_header(path) == header
    assert read_parquet_trace(path) == (header, events)
    write_parquet(events, tmp_path / "bare.parquet")
    assert read_header(tmp_path / "bare.parquet") is None
