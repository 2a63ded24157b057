"""A grid of simulations (protocol x n x network x seed) and what one run measures.

``SweepGrid`` names the grid; ``grid.runs()`` expands it into ``RunConfig`` values,
and ``run_one(config)`` runs one seeded timed simulation and returns one
``RunResult`` row. ``run_one`` is pure (the same config gives the same row, bar
``wall_s``), so ``mailroom.spark.sweep`` can run it on executors and a test can
compare the two.

What a row measures, for ``messages`` random operations (``random_workload``:
unicasts for unicast protocols, broadcasts for the others) in 10 time units:

- delivery delay (time from send to each delivery): mean and 99th percentile;
- buffer size: a process's number of held messages after each thing it handles
  (an application send, a packet, a timer), mean and maximum over the run;
- metadata bytes on the wire through ``mailroom.codec``: every encoded byte of a
  packet that is not the application's payload (for stacked layers, every layer's
  header counts): mean and p99 over data packets, and all packets' bytes (data
  and control) per application message;
- violations of the properties the protocol promises, by the reference checkers.

Loss needs the reliable layer: a protocol alone never gets a lost packet back, so
what waits for it waits forever. With ``reliable=None`` (the default) every run of
a grid that has any loss goes over ``Stack(Reliable, protocol)``, loss-free
settings included, so that the rows of one grid compare like with like.
"""

from __future__ import annotations

import itertools
import math
import time
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from mailroom.core.actions import Transmit
from mailroom.core.errors import MailroomError
from mailroom.sim.metrics import metadata_size
from mailroom.sim.registry import PROTOCOLS, make_endpoints
from mailroom.sim.simulation import NetworkModel, Simulation
from mailroom.sim.workload import random_workload
from mailroom.trace.checkers import check


class SweepError(MailroomError, ValueError):
    """A grid that cannot be run; the message is one line naming the bad setting."""


@attrs.frozen
class NetworkSetting:
    """Uniform packet delay in ``delay``, loss and duplication probabilities."""

    delay: tuple[float, float] = (1.0, 10.0)
    loss: float = 0.0
    duplicate: float = 0.0

    @property
    def label(self) -> str:
        lo, hi = self.delay
        return f"delay {lo:g}:{hi:g} loss {self.loss:g} dup {self.duplicate:g}"


@attrs.frozen
class RunConfig:
    """One simulation of a sweep."""

    protocol: str
    n: int
    network: NetworkSetting
    messages: int
    seed: int
    reliable: bool


@attrs.frozen
class SweepGrid:
    """Protocols x process counts x network settings x seeds, each run with ``messages``."""

    protocols: tuple[str, ...]
    ns: tuple[int, ...]
    networks: tuple[NetworkSetting, ...] = (NetworkSetting(),)
    seeds: tuple[int, ...] = (0, 1, 2)
    messages: int = 50
    reliable: bool | None = None

    def __attrs_post_init__(self) -> None:
        for what, values in (
            ("protocol", self.protocols),
            ("n", self.ns),
            ("network", self.networks),
            ("seeds", self.seeds),
        ):
            if not values:
                raise SweepError(f"{what}: the grid needs at least one value")
        unknown = [p for p in self.protocols if p not in PROTOCOLS]
        if unknown:
            raise SweepError(
                f"protocol: unknown {', '.join(map(repr, unknown))}; "
                f"choose from {', '.join(sorted(PROTOCOLS))}"
            )
        if min(self.ns) < 2:
            raise SweepError(f"n: {min(self.ns)} is too small; a sweep needs n >= 2")
        if self.messages < 1:
            raise SweepError(f"messages: {self.messages} is not a positive number")
        for net in self.networks:
            lo, hi = net.delay
            if not 0 <= lo <= hi or not math.isfinite(hi):
                raise SweepError(f"delay: {lo:g}:{hi:g} needs 0 <= MIN <= MAX")
            for what, p in (("loss", net.loss), ("duplicate", net.duplicate)):
                if not 0 <= p < 1:
                    raise SweepError(f"{what}: {p:g} is not a probability in [0, 1)")
        if self.reliable is False and any(net.loss > 0 for net in self.networks):
            raise SweepError(
                "reliable: loss > 0 without the reliable layer loses messages for good; "
                "drop --no-reliable or the loss"
            )

    @property
    def uses_reliable(self) -> bool:
        """Whether runs go over the reliable layer: as asked, else when any loss is set."""
        if self.reliable is not None:
            return self.reliable
        return any(net.loss > 0 for net in self.networks)

    def runs(self) -> list[RunConfig]:
        """Every run of the grid, protocol-major, seeds innermost."""
        return [
            RunConfig(protocol, n, net, self.messages, seed, self.uses_reliable)
            for protocol, n, net, seed in itertools.product(
                self.protocols, self.ns, self.networks, self.seeds
            )
        ]

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> SweepGrid:
        """A grid from plain settings, as a TOML grid file or the CLI give them.

        Keys: ``protocol``, ``n``, ``delay``, ``loss``, ``duplicate`` (each a list, or
        a comma-separated string), ``seeds`` (a count, or a list of seeds),
        ``messages`` and ``reliable``. A delay is ``"MIN:MAX"``, ``[MIN, MAX]`` or
        one number for a fixed delay.
        """
        unknown = sorted(set(data) - set(GRID_KEYS))
        if unknown:
            raise SweepError(f"unknown setting {unknown[0]!r}; expected {', '.join(GRID_KEYS)}")
        seeds = data.get("seeds", 3)
        if isinstance(seeds, list | tuple) or (isinstance(seeds, str) and "," in seeds):
            seed_list = tuple(_items(seeds, lambda v: _int(v, "seeds")))
        else:
            count = _int(seeds, "seeds")
            if count < 1:
                raise SweepError(f"seeds: {count} is not a positive number of seeds")
            seed_list = tuple(range(count))
        delays = _items(data.get("delay", "1:10"), _delay)
        losses = _items(data.get("loss", 0), lambda v: _float(v, "loss"))
        dups = _items(data.get("duplicate", 0), lambda v: _float(v, "duplicate"))
        reliable = data.get("reliable")
        if reliable is not None and not isinstance(reliable, bool):
            raise SweepError(f"reliable: {reliable!r} is not true or false")
        return cls(
            protocols=tuple(
                _items(data.get("protocol", "rst,cbcast,ks"), lambda v: str(v).strip())
            ),
            ns=tuple(_items(data.get("n", "4,8,16"), lambda v: _int(v, "n"))),
            networks=tuple(
                NetworkSetting(d, loss, dup)
                for d, loss, dup in itertools.product(delays, losses, dups)
            ),
            seeds=seed_list,
            messages=_int(data.get("messages", 50), "messages"),
            reliable=reliable,
        )

    @classmethod
    def from_toml(cls, path: str | Path, overrides: Mapping[str, Any] | None = None) -> SweepGrid:
        """A grid from a TOML file of ``from_mapping`` settings, ``overrides`` on top."""
        try:
            with open(path, "rb") as f:
                data = tomllib.load(f)
        except OSError as exc:
            raise SweepError(f"cannot read {path}: {exc.strerror or exc}") from None
        except tomllib.TOMLDecodeError as exc:
            raise SweepError(f"{path} is not valid TOML: {exc}") from None
        return cls.from_mapping({**data, **(overrides or {})})


GRID_KEYS = ("protocol", "n", "delay", "loss", "duplicate", "seeds", "messages", "reliable")


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool | float):
        raise SweepError(f"{what}: {value!r} is not an integer")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise SweepError(f"{what}: {value!r} is not an integer") from None


def _float(value: Any, what: str) -> float:
    if isinstance(value, bool):
        raise SweepError(f"{what}: {value!r} is not a number")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise SweepError(f"{what}: {value!r} is not a number") from None


def _delay(value: Any) -> tuple[float, float]:
    """``"MIN:MAX"``, ``[MIN, MAX]``, or one number for a fixed delay."""
    if isinstance(value, str) and ":" in value:
        parts: Sequence[Any] = value.split(":")
    elif isinstance(value, list | tuple):
        parts = value
    else:
        parts = (value, value)
    if len(parts) != 2:
        raise SweepError(f"delay: {value!r} is not MIN:MAX")
    return (_float(parts[0], "delay"), _float(parts[1], "delay"))


def _items(value: Any, convert: Callable[[Any], Any]) -> list[Any]:
    """A list setting: a list, a comma-separated string, or one value."""
    if isinstance(value, str):
        raw: Iterable[Any] = [v for v in value.split(",") if v.strip()]
    elif isinstance(value, list | tuple):
        raw = value
    else:
        raw = [value]
    return [convert(v) for v in raw]


# -- one run ----------------------------------------------------------------------------


@attrs.frozen
class RunResult:
    """One row of a sweep: the run's settings, then what it measured."""

    protocol: str
    n: int
    network: str
    delay_min: float
    delay_max: float
    loss: float
    duplicate: float
    reliable: bool
    messages: int
    seed: int
    sent: int
    deliveries: int
    expected: int
    packets: int
    data_packets: int
    control_packets: int
    dropped: int
    delay_mean: float
    delay_p99: float
    buffer_mean: float
    buffer_max: int
    meta_mean: float
    meta_p99: float
    meta_per_message: float
    violations: int
    wall_s: float


#: The columns of a sweep's table: ``RunResult``'s fields, with their Python types.
COLUMNS: tuple[tuple[str, str], ...] = tuple((f.name, str(f.type)) for f in attrs.fields(RunResult))


def app_metadata_bytes(packet: object) -> int:
    """Encoded bytes of ``packet`` that are not the application's payload: with stacked
    layers (one packet carried as another's ``payload``) every layer's header counts.
    The simulator's one measure, ``mailroom.sim.metrics.metadata_size``."""
    return metadata_size(packet)


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (0 < q <= 100); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return float(ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)])


def run_one(config: RunConfig) -> RunResult:
    """Run one seeded simulation of ``config`` to quiescence and measure it."""
    net = config.network
    rto = 2 * net.delay[1] + 1.0 if config.reliable else None
    _, mode, promised = PROTOCOLS[config.protocol]
    data_sizes: list[int] = []
    all_bytes = 0

    def on_transmit(_sim: Simulation, _pid: int, t: Transmit) -> None:
        nonlocal all_bytes
        size = app_metadata_bytes(t.packet)
        all_bytes += size
        if t.message_id is not None:
            data_sizes.append(size)

    start = time.perf_counter()
    sim = Simulation(
        make_endpoints(config.protocol, config.n, rto=rto),
        NetworkModel(delay=net.delay, loss=net.loss, duplicate=net.duplicate),
        seed=config.seed,
        run=f"{config.protocol}-n{config.n}-seed{config.seed}",
        on_transmit=on_transmit,
    )
    random_workload(sim, config.messages, mode=mode, seed=config.seed)
    sim.run()
    wall = time.perf_counter() - start
    m = sim.metrics
    sends = [e for e in sim.trace if e.kind == "send"]
    report = check(sim.trace, promised)
    return RunResult(
        protocol=config.protocol,
        n=config.n,
        network=net.label,
        delay_min=net.delay[0],
        delay_max=net.delay[1],
        loss=net.loss,
        duplicate=net.duplicate,
        reliable=config.reliable,
        messages=config.messages,
        seed=config.seed,
        sent=m.app_messages,
        deliveries=m.deliveries,
        expected=sum(len(e.dest) for e in sends),
        packets=m.packets,
        data_packets=m.data_packets,
        control_packets=m.control_packets,
        dropped=m.dropped,
        delay_mean=m.delay_total / max(m.deliveries, 1),
        delay_p99=percentile(m.delays, 99),
        buffer_mean=m.buffer_total / max(m.buffer_samples, 1),
        buffer_max=m.largest_buffer,
        meta_mean=sum(data_sizes) / max(len(data_sizes), 1),
        meta_p99=percentile(data_sizes, 99),
        meta_per_message=all_bytes / max(m.app_messages, 1),
        violations=sum(report.count(p) for p in promised),
        wall_s=wall,
    )


__all__ = [
    "COLUMNS",
    "GRID_KEYS",
    "NetworkSetting",
    "RunConfig",
    "RunResult",
    "SweepError",
    "SweepGrid",
    "app_metadata_bytes",
    "percentile",
    "run_one",
]
