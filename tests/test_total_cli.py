"""``mailroom demo --protocol sequencer|skeen|lamport`` and ``mailroom simulate`` for them."""

from __future__ import annotations

import io

import pytest

from mailroom.cli import main
from mailroom.cli.demo_total import TOTAL_RUNS


@pytest.mark.parametrize("protocol", sorted(TOTAL_RUNS))
def test_demo_messages_arrive_in_different_orders_and_are_delivered_in_one(protocol):
    _, make, script = TOTAL_RUNS[protocol]
    d = script(make, io.StringIO())
    trace = d.sim.trace
    arrivals = {
        q: [d.names[e.message] for e in trace if e.process == q and e.kind in ("send", "receive")]
        for q in range(3)
    }
    firsts = [next(m for m in arrivals[q] if m in ("m1", "m2")) for q in range(3)]
    assert set(firsts) == {"m1", "m2"}, arrivals  # not everyone saw the same message first
    orders = [[d.names[m.id] for m in got] for got in d.sim.delivered]
    assert orders[0] == orders[1] == orders[2] and sorted(orders[0]) == ["m1", "m2"]


@pytest.mark.parametrize("protocol", sorted(TOTAL_RUNS))
def test_demo_command(protocol, capsys):
    assert main(["demo", "--protocol", protocol]) == 0
    out = capsys.readouterr().out
    assert "total      ok" in out and "liveness   ok" in out
    orders = [
        line.split()[1:]
        for line in out.splitlines()
        if line.startswith("    ")
        and line.split()[0] in ("Alice", "Bob", "Carol")
        and "," in line
        and "mail" not in line
    ]
    assert len(orders) == 3 and orders[0] == orders[1] == orders[2]


@pytest.mark.parametrize("protocol", ["sequencer", "skeen", "lamport"])
def test_simulate_keeps_the_promises(protocol, capsys):
    argv = ["simulate", "--protocol", protocol, "-n", "4", "--messages", "30"]
    assert main([*argv, "--duplicate", "0.2"]) == 0
    out = capsys.readouterr().out
    assert "total      ok" in out and "liveness   ok" in out
