"""The members' processes: started in their namespaces, killed, paused, their clocks moved.

A ``System`` (``systems.py``) says how to run member ``i``; the ``Cluster`` runs
it inside member ``i``'s namespace (``ip netns exec``, which execs, so the pid it
gets is the member's own), optionally under libfaketime (its offset read from a
file the cluster rewrites: a clock jump is a write) and with a fault-injecting
proxy for its outgoing links. Every process is ended by its pid: a clean stop is
SIGTERM then, after a bound, SIGKILL.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Protocol

from mailroom.testing.nemesis.network import PROXY_BASE, Network
from mailroom.testing.nemesis.progress import Progress
from mailroom.testing.nemesis.proxy import link_arg, settings_line

#: Where Debian's libfaketime lives (the ``faketime`` package).
FAKETIME_LIBS = (
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
)
#: How long a member may take to exit after SIGTERM before it is killed (s).
STOP_BOUND = 20.0


def faketime_lib() -> str | None:
    """The libfaketime preload library, or None if it is not installed."""
    return next((p for p in FAKETIME_LIBS if os.path.exists(p)), None)


class System(Protocol):
    """How to run one member of a system under test: the one place the harness knows it.

    ``prepare`` writes what the members share (peer table, key); ``command(i,
    restart)`` is member ``i``'s command line (``restart``: after a ``kill -9``, from
    its checkpoint); ``progress()`` reads the clients' histories while the run goes
    on; ``settled(progress)`` says whether the workload is done and delivered.
    """

    @property
    def name(self) -> str: ...

    n: int
    port: int
    folder: Path

    def prepare(self, addresses: list[str]) -> None: ...

    def command(self, i: int, restart: bool) -> list[str]: ...

    def progress(self) -> Progress: ...

    def settled(self, progress: Progress) -> bool: ...


class Cluster:
    """``system``'s members on ``net`` (None: all on 127.0.0.1, no network faults)."""

    def __init__(
        self, system: System, net: Network | None, clock: str | None = None, seed: int = 0
    ) -> None:
        self.system = system
        self.net = net
        self.clock = clock  # None, "real" (wall clock only) or "mono" (monotonic too)
        self.seed = seed
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.proxies: dict[int, subprocess.Popen[bytes]] = {}
        self.folder = system.folder
        self.paused: set[int] = set()

    def address(self, i: int) -> str:
        return self.net.address(i) if self.net is not None else "127.0.0.1"

    def _prefix(self, i: int) -> list[str]:
        return self.net.prefix(i) if self.net is not None else []

    def _env(self, i: int) -> dict[str, str]:
        env = dict(os.environ)
        lib = faketime_lib()
        if self.clock is not None and lib is not None:
            env["LD_PRELOAD"] = lib
            env["FAKETIME_TIMESTAMP_FILE"] = str(self.clock_file(i))
            env["FAKETIME_CACHE_DURATION"] = "1"
            if self.clock == "real":
                env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
        return env

    def clock_file(self, i: int) -> Path:
        return self.folder / f"clock{i}"

    def links_file(self, i: int) -> Path:
        return self.folder / f"links{i}.json"

    def start_all(self) -> None:
        """Every proxy first (each is waited for), then every member at once, so that
        the members start together (a founder that starts late is suspected)."""
        self.system.prepare([self.address(i) for i in range(self.system.n)])
        if self.net is not None and self.net.proxied:
            for i in range(self.system.n):
                self._start_proxy(i)
        for i in range(self.system.n):
            self.start(i)

    def _start_proxy(self, i: int) -> None:
        n, port = self.system.n, self.system.port
        links = [
            link_arg(j, PROXY_BASE + j, self.net.address(j), port)  # type: ignore[union-attr]
            for j in range(n)
            if j != i
        ]
        self.links_file(i).write_text(settings_line({}))
        cmd = [
            *self._prefix(i),
            sys.executable,
            "-m",
            "mailroom.testing.nemesis",
            "proxy",
            "--source",
            self.address(i),
            "--config",
            str(self.links_file(i)),
            "--seed",
            str(self.seed + i),
        ]
        cmd += [a for link in links for a in ("--link", link)]
        log = open(self.folder / f"proxy{i}.log", "ab")  # noqa: SIM115
        self.proxies[i] = subprocess.Popen(cmd, stdout=log, stderr=log)
        log.close()
        ready = Path(str(self.links_file(i)) + ".ready")
        deadline = time.monotonic() + 30
        while not ready.exists():  # bounded: the proxy binds its ports in well under that
            if time.monotonic() > deadline or self.proxies[i].poll() is not None:
                raise RuntimeError(f"the proxy of P{i} did not start (see proxy{i}.log)")
            time.sleep(0.02)

    def start(self, i: int, restart: bool = False) -> None:
        """Start member ``i`` (``restart``: again, from its checkpoint)."""
        if self.clock is not None and not self.clock_file(i).exists():
            self.clock_file(i).write_text("+0\n")
        cmd = [*self._prefix(i), *self.system.command(i, restart)]
        log = open(self.folder / f"out{i}.log", "ab")  # noqa: SIM115
        log.write(f"--- start {' '.join(cmd)}\n".encode())
        log.flush()
        self.procs[i] = subprocess.Popen(cmd, stdout=log, stderr=log, env=self._env(i))
        log.close()

    def running(self) -> list[int]:
        """The members whose process is up and not paused."""
        procs = sorted(self.procs.items())
        return [i for i, p in procs if p.poll() is None and i not in self.paused]

    def exited(self) -> dict[int, int]:
        """Members whose process ended on its own, and its exit code."""
        return {i: p.returncode for i, p in self.procs.items() if p.poll() is not None}

    def kill(self, i: int) -> None:
        """``kill -9`` member ``i`` (a paused member too)."""
        proc = self.procs.pop(i, None)
        self.paused.discard(i)
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait(STOP_BOUND)

    def pause(self, i: int) -> None:
        self._signal(i, signal.SIGSTOP)
        self.paused.add(i)

    def resume(self, i: int) -> None:
        self._signal(i, signal.SIGCONT)
        self.paused.discard(i)

    def _signal(self, i: int, sig: signal.Signals) -> None:
        proc = self.procs.get(i)
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, sig)

    def set_clock(self, i: int, offset: float) -> None:
        """Move member ``i``'s clock ``offset`` seconds from the true time."""
        tmp = self.clock_file(i).with_suffix(".tmp")
        tmp.write_text(f"{offset:+g}\n")
        tmp.replace(self.clock_file(i))

    def set_delay(self, i: int, delay: float, jitter: float) -> None:
        """Hold what member ``i`` sends on each of its links ``delay`` (+ jitter) seconds."""
        peers = {j: (delay, jitter) for j in range(self.system.n) if j != i}
        tmp = self.links_file(i).with_suffix(".tmp")
        tmp.write_text(settings_line(peers if delay or jitter else {}))
        tmp.replace(self.links_file(i))

    def stop(self) -> dict[int, int | None]:
        """SIGTERM every member (SIGCONT first if paused), wait; returns exit codes
        (None: it had to be killed)."""
        for i in list(self.paused):
            self.resume(i)
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        codes: dict[int, int | None] = {}
        for i, proc in sorted(self.procs.items()):
            try:
                codes[i] = proc.wait(STOP_BOUND)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(STOP_BOUND)
                codes[i] = None
        self.procs.clear()
        return codes

    def close(self) -> None:
        """Kill whatever is left: members and proxies, each by its pid."""
        for group in (self.procs, self.proxies):
            for proc in group.values():
                with contextlib.suppress(ProcessLookupError):
                    if proc.poll() is None:
                        os.kill(proc.pid, signal.SIGCONT)
                        proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(STOP_BOUND)
            group.clear()


__all__ = ["FAKETIME_LIBS", "Cluster", "System", "faketime_lib"]
