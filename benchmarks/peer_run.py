"""What every peer process of a group benchmark shares, and the driver that runs them.

A run is n OS processes (one per member) started by the driver with a command line
that says everything (system, pid, n, rate, duration). Each process:

1. sets up (connects, elects, ...) and prints ``ready`` (optionally followed by
   one word, e.g. the leader it sees), then reads one line: the common start time
   (``time.monotonic()``: CLOCK_MONOTONIC, the same clock in every process);
2. **peak** (rate 0): sends as fast as its system allows from the start time;
   a ``Window`` thread takes the counts at ``start + warmup`` and at
   ``start + warmup + seconds`` (each with the time it actually read them), and
   the process stops sending at the second;
   **paced** (rate r > 0): sends ``count`` messages, message k when due (``Clock``),
   and records when each remote message reached its application, until every
   message of every member has been delivered here;
3. prints one JSON line (its result) and waits for end of file on stdin, which is
   how the driver ends it (and how it ends if the driver dies).

``Children`` is the driver's side: spawn, wait for ``ready``, send the start time,
read the results, with a deadline on every read.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import gc
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

PAYLOAD_SIZE = 16
START_DELAY = 0.3  # seconds between the start line and the start time
#: this checkout's library: what a row of the pure build imports (first on PYTHONPATH)
SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
#: the builds a mailroom row runs: this checkout's ``src`` (pure), another tree's
#: ``src`` (``--baseline-src``: before), or an interpreter's installed compiled build
BUILDS = ("pure", "before", "compiled")


def payload(k: int) -> str:
    """The k-th message's 16-byte payload: its number, so receivers can time it."""
    return f"{k:0{PAYLOAD_SIZE}d}"


# -- the child's side -----------------------------------------------------------------------


def child_parser(description: str) -> argparse.ArgumentParser:
    """The arguments every peer process takes (each peer module adds its own)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--role", required=True, help="the system this process runs")
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--n", type=int, required=True)
    p.add_argument("--seconds", type=float, default=1.0, help="the measured window (peak)")
    p.add_argument("--warmup", type=float, default=0.25, help="sending before the window")
    p.add_argument("--rate", type=float, default=0.0, help="messages/s per process; 0: peak")
    p.add_argument("--count", type=int, default=0, help="messages per process when paced")
    p.add_argument("--profile", default="", help="write a cProfile file here")
    p.add_argument("--tag", default="now", help="the profile file's tag")
    p.add_argument(
        "--build",
        choices=("", "pure", "compiled"),
        default="",
        help="refuse to run (one line, exit 2) unless mailroom here is this build",
    )
    return p


def build_refusal(build: str) -> str:
    """ "" if this process imports the ``build`` of mailroom it was asked for ("": any,
    or no mailroom at all), else the one line that says it does not. A tree from
    before ``mailroom.compiled`` existed is a pure one."""
    if not build:
        return ""
    import mailroom

    running = "compiled" if getattr(mailroom, "compiled", False) else "pure"
    if running == build:
        return ""
    return (
        f"refused: {sys.executable} imports the {running} build of mailroom "
        f"({os.path.dirname(mailroom.__file__ or '?')}), not the {build} one"
    )


class Counts:
    """Deliveries so far: at this process (``all``) and of other processes' messages."""

    __slots__ = ("all", "remote")

    def __init__(self) -> None:
        self.all = 0
        self.remote = 0


class Window:
    """A thread that reads the counts at the window's start and end; ``over`` is set
    at the end (the signal to stop sending)."""

    def __init__(self, counts: Counts, start: float, warmup: float, seconds: float) -> None:
        self.counts = counts
        self.begin = start + warmup
        self.finish = self.begin + seconds
        self.over = threading.Event()
        self.snaps: list[tuple[float, float, int, int]] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _snap(self) -> None:
        c = self.counts
        self.snaps.append((time.monotonic(), time.process_time(), c.remote, c.all))

    def _run(self) -> None:
        for when in (self.begin, self.finish):
            time.sleep(max(0.0, when - time.monotonic()))
            self._snap()
        self.over.set()

    def result(self) -> dict[str, Any]:
        """Deliveries and CPU within the window (after ``over``)."""
        (t0, cpu0, remote0, all0), (t1, cpu1, remote1, all1) = self.snaps
        return {
            "elapsed": t1 - t0,
            "cpu": cpu1 - cpu0,
            "remote": remote1 - remote0,
            "all": all1 - all0,
            "rss_mb": rss_mb(),
        }


class Clock:
    """A paced run's send schedule and the time each remote message was delivered."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.rate = args.rate
        self.n = args.n
        self.pid = args.pid
        self.count = args.count
        self.sent: list[float] = []
        self.delivered: dict[int, list[float]] = {
            o: [0.0] * args.count for o in range(args.n) if o != args.pid
        }
        self.cpu0 = time.process_time()

    def due(self, k: int, start: float) -> float:
        """When message k is due; staggered so the processes do not send at once."""
        return start + (k + self.pid / self.n) / self.rate

    def got(self, origin: int, k: int, now: float) -> None:
        self.delivered[origin][k] = now

    def result(self, counts: Counts) -> dict[str, Any]:
        return {
            "cpu": time.process_time() - self.cpu0,
            "remote": counts.remote,
            "all": counts.all,
            "rss_mb": rss_mb(),
            "sent": self.sent,
            "delivered": {str(o): t for o, t in self.delivered.items()},
        }


def rss_mb() -> float:
    """This process's peak resident memory so far (VmHWM), in MB. Not ``ru_maxrss``:
    that survives ``execve``, so a child would report its parent's peak."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


#: Set in a benchmark child's environment: freeze its heap (``gc.freeze()``) before the
#: measured window, as a long-running service does once it has started, so that the
#: collector's full passes skip what start-up made (``--gc-freeze``).
GC_FREEZE = "MAILROOM_BENCH_GC_FREEZE"
#: Set in a benchmark child's environment: the collector's young-generation threshold
#: (``mailroom.net.tune_collector``) for every process of every row (``--gc-young``).
GC_YOUNG = "MAILROOM_BENCH_GC_YOUNG"


def start_signal(extra: str = "") -> float:
    """Say ``ready`` to the driver, read the common start time, sleep until then."""
    if os.environ.get(GC_FREEZE):  # every process of every row alike (--gc-freeze)
        gc.freeze()
    young = int(os.environ.get(GC_YOUNG) or 0)
    if young:  # every process of every row alike (--gc-young), as tune_collector does
        gc.set_threshold(young, *gc.get_threshold()[1:])
    print(f"ready {extra}".rstrip(), flush=True)
    start = float(sys.stdin.readline())
    time.sleep(max(0.0, start - time.monotonic()))
    return start


def emit(result: dict[str, Any]) -> None:
    """Print the result line. Asyncio processes call this in a thread: a result with
    latency samples is larger than a pipe's buffer, and the driver reads the
    processes one by one, so a blocking print on the event loop would hold back
    the frames that the processes still waiting need."""
    print(json.dumps(result), flush=True)


def wait_for_end() -> None:
    """Block until the driver closes stdin (or dies)."""
    sys.stdin.read()


class Profiler:
    """cProfile of the main thread from the start time to the result (``--profile``),
    counting CPU time (``time.thread_time``), not wall time: waiting for the network,
    a lock or the start costs nothing in it, in asyncio and blocking clients alike,
    and the set-up (imports, connecting) is left out."""

    def __init__(self) -> None:
        self.prof: Any = None

    def begin(self) -> None:
        """Start profiling (call in the main thread, once the run has started)."""
        if self.prof is not None:
            self.prof.enable()

    def end(self) -> None:
        if self.prof is not None:
            self.prof.disable()


PROFILER = Profiler()


def run_child(main: Callable[[argparse.Namespace], None], args: argparse.Namespace) -> None:
    """Run ``main(args)``; with ``--profile``, write what ``PROFILER`` saw to
    ``<dir>/<role>-n<n>-<tag>-P<pid>.prof``. First, with ``--build``, check that this
    process imports that build of mailroom: if not, one line on stderr and exit 2."""
    if why := build_refusal(getattr(args, "build", "")):
        print(why, file=sys.stderr, flush=True)
        raise SystemExit(2)
    if args.profile:
        import cProfile

        PROFILER.prof = cProfile.Profile(time.thread_time)
    try:
        main(args)
    finally:
        if args.profile:
            name = f"{args.role}-n{args.n}-{args.tag}-P{args.pid}.prof"
            os.makedirs(args.profile, exist_ok=True)
            PROFILER.prof.dump_stats(os.path.join(args.profile, name))


# -- the driver's side ----------------------------------------------------------------------


def build_env(build: str, before_src: str = "") -> dict[str, str]:
    """The environment of a process of a row of ``build`` (``BUILDS``): pure imports
    this checkout's ``src`` (first on PYTHONPATH, the rest kept: a peer's packages
    may be there), before imports ``before_src``, compiled has nothing on PYTHONPATH,
    so that its interpreter imports its installed (compiled) build."""
    env = dict(os.environ)
    if build == "compiled":
        env.pop("PYTHONPATH", None)
    elif build == "before":
        env["PYTHONPATH"] = os.path.abspath(before_src)
    else:
        rest = env.get("PYTHONPATH", "")
        env["PYTHONPATH"] = SRC + (os.pathsep + rest if rest else "")
    return env


def check_compiled(python: str) -> None:
    """Before any round: refuse (one line on stderr, exit 2) unless ``python``, with
    nothing on PYTHONPATH, imports the compiled build of mailroom (``--compiled``)."""
    probe = "import mailroom; print(getattr(mailroom, 'compiled', False))"
    try:
        got = subprocess.run(
            [python, "-c", probe],
            env=build_env("compiled"),
            capture_output=True,
            text=True,
            timeout=120,
        )
    except OSError as exc:
        why = f"cannot run it ({exc.strerror or exc})"
    else:
        said = got.stdout.strip()
        if got.returncode == 0 and said == "True":
            return
        why = (
            "it imports the pure build of mailroom (mailroom.compiled is False)"
            if said == "False"
            else "it cannot import mailroom"
        )
    print(
        f"refused: --compiled {python}: {why}; build one with "
        "MAILROOM_COMPILE=1 pip install . (scripts/test-compiled)",
        file=sys.stderr,
    )
    raise SystemExit(2)


class Children:
    """n peer processes of one run, ended (stdin closed, then killed) on ``close``."""

    def __init__(
        self,
        cmds: Sequence[list[str]],
        env: dict[str, str] | None = None,
        pass_fds: Sequence[int] = (),
        timeout: float = 60.0,
    ) -> None:
        self.timeout = timeout
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(cmds)))
        self.procs: list[subprocess.Popen[str]] = []
        for cmd in cmds:
            self.procs.append(
                subprocess.Popen(
                    cmd,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                    env=env,
                    pass_fds=tuple(pass_fds),
                )
            )

    def _line(self, proc: subprocess.Popen[str], what: str, timeout: float) -> str:
        assert proc.stdout is not None
        try:
            line = self.pool.submit(proc.stdout.readline).result(timeout)
        except concurrent.futures.TimeoutError:
            raise RuntimeError(f"a process gave no {what} within {timeout:g} s") from None
        if not line:
            raise RuntimeError(f"a process ended before its {what} (exit {proc.poll()})")
        return line

    def ready(self) -> list[str]:
        """Wait for every process's ``ready`` line; the words after it."""
        extras = []
        for proc in self.procs:
            words = self._line(proc, "ready line", self.timeout).split()
            if not words or words[0] != "ready":
                raise RuntimeError(f"a process said {' '.join(words)!r} instead of ready")
            extras.append(" ".join(words[1:]))
        return extras

    def start(self, delay: float = START_DELAY) -> float:
        """Send the common start time (now + delay) to every process; return it."""
        start_at = time.monotonic() + delay
        for proc in self.procs:
            assert proc.stdin is not None
            proc.stdin.write(f"{start_at!r}\n")
            proc.stdin.flush()
        return start_at

    def results(self, timeout: float, alive: Sequence[int] | None = None) -> list[dict[str, Any]]:
        """Every process's (or those of ``alive``) result line, within ``timeout`` s."""
        deadline = time.monotonic() + timeout
        chosen = range(len(self.procs)) if alive is None else alive
        out = []
        for i in chosen:
            left = max(0.1, deadline - time.monotonic())
            out.append(json.loads(self._line(self.procs[i], "result", left)))
        return out

    def close(self) -> None:
        for proc in self.procs:
            if proc.stdin is not None and proc.poll() is None:
                with contextlib.suppress(OSError):  # the process is gone already
                    proc.stdin.close()
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        self.pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> Children:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def sleep_until(when: float) -> None:
    time.sleep(max(0.0, when - time.monotonic()))


def peak_figures(results: Sequence[dict[str, Any]], extra_cpu: float = 0.0) -> dict[str, Any]:
    """A peak run's figures: rates summed over the processes (each over its own
    window), CPU per remote delivery (plus ``extra_cpu`` seconds, e.g. a server's)."""
    remote = sum(r["remote"] for r in results)
    cpu = sum(r["cpu"] for r in results) + extra_cpu
    return {
        "remote_rate": sum(r["remote"] / r["elapsed"] for r in results),
        "all_rate": sum(r["all"] / r["elapsed"] for r in results),
        "cpu_us": 1e6 * cpu / max(remote, 1),
        "rss_mb": max(r["rss_mb"] for r in results),
        "server_cpu": extra_cpu,
    }


def latencies(results: Sequence[dict[str, Any]], n: int, count: int) -> list[float]:
    """Per message: from its scheduled send to its delivery at the last other process."""
    out = []
    for origin in range(n):
        sent = results[origin]["sent"]
        for k in range(count):
            last = max(results[r]["delivered"][str(origin)][k] for r in range(n) if r != origin)
            out.append(last - sent[k])
    return out


def attempt(what: str, run: Any, *a: Any) -> Any:
    """``run(*a)``, or None with a one-line warning if it failed (the round goes on)."""
    try:
        return run(*a)
    except (RuntimeError, OSError, ValueError, KeyError) as exc:
        print(f"  warning: {what} failed: {exc}", flush=True)
        return None
