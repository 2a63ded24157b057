"""A replicated object in one call: by addresses, as PySyncObj's ``SyncObj`` takes them.

``replicate(obj, address, others)`` is an ``AsyncReplica`` of ``obj`` for the member
listening at ``address`` (``"host:port"``) in the group of ``address`` and ``others``;
``serve(...)`` is the same, started, its event loop running in a thread of its own, for
synchronous code (a Flask-style app, a script)::

    counter = serve(Counter(), "127.0.0.1:4321", ["127.0.0.1:4322", "127.0.0.1:4323"])
    counter.sync.inc()        # blocks until applied here; its result
    counter.local.value()     # a local read
    counter.close()           # leaves the group, then stops the thread

Rules, in words:

- Every member names the same set of addresses, each written the same way (its own
  and the others): the members' pids are their places in the sorted set, so no peer
  table is needed. Every address is a founder: the group's first view holds them all.
- The key is ``key`` if given, else the file ``key_file``, else ``$MAILROOM_KEY``
  (``mailroom.net.load_key``); at least 32 bytes.
- The group is a Sequencer group with safe delivery counted by a majority (what Raft
  promises: an acknowledged call survives while a majority does) and a heartbeat
  detector (``heartbeat``, ``suspect_after``) that gives founders ``formation``
  seconds (``FORMATION``, 30) to come up before it suspects one never heard from;
  ``protocol``, ``safe_quorum`` and the
  ``AsyncReplica`` and ``Node`` options may say otherwise.
- A founder waits for its peers (``AsyncReplica(wait_for_peers=True)``): calls wait
  until a majority of the view is known to hold it, or until a founder that started
  late has been let in again. Closing leaves the view first (bounded), so the others
  go on at once.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

from mailroom.core.errors import LocalError
from mailroom.net import PeerTable, group_endpoint, load_key
from mailroom.net.config import check_key, parse_address
from mailroom.net.node import LEAVE_TIMEOUT
from mailroom.replicated.aiohost import AsyncReplica, Calls

#: Seconds during which a founder not heard from yet is not suspected (``formation``).
FORMATION = 30.0


def _members(address: str, others: Iterable[str]) -> tuple[int, PeerTable]:
    """This member's pid and the group's table: the addresses sorted, pids in order."""
    if isinstance(others, str):
        raise LocalError("others is a list of host:port addresses, not one string")
    mine = parse_address(address)
    listed = [parse_address(a) for a in others]
    everyone = sorted({mine, *listed})
    if len(everyone) != len(listed) + 1:
        raise LocalError(f"{address} is listed twice (an address names one member)")
    peers = PeerTable(dict(enumerate(everyone)))
    return everyone.index(mine), peers


def _key(key: bytes | str | None, key_file: str | None) -> bytes:
    if key is None:
        return load_key(key_file)
    raw = key.encode() if isinstance(key, str) else bytes(key)
    check_key(raw)
    return raw


def replicate(
    obj: object,
    address: str,
    others: Iterable[str],
    *,
    key: bytes | str | None = None,
    key_file: str | None = None,
    protocol: str = "sequencer",
    safe_quorum: str = "majority",
    heartbeat: float = 0.5,
    suspect_after: float = 2.0,
    formation: float = FORMATION,
    **options: Any,
) -> AsyncReplica:
    """An ``AsyncReplica`` of ``obj`` at ``address`` in the group of ``address`` and
    ``others`` (not started: ``async with replicate(...) as r``). ``options`` go to
    ``AsyncReplica`` (``timeout``, ``history``, ``status``...) and its node."""
    pid, peers = _members(address, others)
    group = group_endpoint(
        protocol,
        pid,
        peers.n,
        members=range(peers.n),
        safe=True,
        safe_quorum=safe_quorum,
        heartbeat=heartbeat,
        suspect_after=suspect_after,
        formation=formation,
    )
    options.setdefault("wait_for_peers", True)
    return AsyncReplica(obj, group, peers, _key(key, key_file), safe=True, **options)


class ServedReplica:
    """An ``AsyncReplica`` (``replica``) whose event loop runs in a thread of its own:
    ``sync`` calls and ``ordered`` reads block until done (``timeout``), ``local`` reads
    run on the loop and return at once. ``close()`` (also at exit, or leaving a
    ``with`` block) leaves the group, closes the replica and ends the thread."""

    def __init__(self, make: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="mailroom-replica", daemon=True)
        self._thread.start()
        try:
            self.replica: AsyncReplica = self._wait(lambda: self._started(make), None)
        except BaseException:
            self._stop()
            raise
        self.sync = self.replica.sync
        self.ordered = Calls(self._ordered)
        self.local = Calls(self._local)
        self._closed = False
        atexit.register(self.close)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def _wait(
        self, coroutine: Callable[[], Coroutine[Any, Any, Any]], timeout: float | None
    ) -> Any:
        """Run ``coroutine()`` on the replica's loop and wait for its result here."""
        if self._loop.is_closed():
            raise LocalError("the replica is closed")
        if threading.current_thread() is self._thread:
            raise LocalError("a served replica's blocking calls are for other threads")
        return asyncio.run_coroutine_threadsafe(coroutine(), self._loop).result(timeout)

    @staticmethod
    async def _started(make: Any) -> AsyncReplica:
        replica: AsyncReplica = make()
        await replica.start()
        return replica

    async def _read(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self.replica.replica_read(method, *args, **kwargs)

    def _local(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._wait(lambda: self._read(method, *args, **kwargs), None)

    def _ordered(self, method: str, *args: Any, **kwargs: Any) -> Any:
        call = self.replica.ordered
        return self._wait(lambda: call(method, *args, **kwargs), self.replica.timeout)

    def wait_joined(self, timeout: float | None = None) -> None:
        """Block until the replica is a member holding the state (TimeoutError after
        ``timeout`` seconds)."""
        self._wait(lambda: asyncio.wait_for(self.replica.wait_joined(), timeout), None)

    def close(self, *, leave: bool | None = None, timeout: float = LEAVE_TIMEOUT) -> None:
        """Leave the group (as ``AsyncReplica.close``), close the replica, end the thread."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        try:
            self._wait(lambda: self.replica.close(leave=leave, timeout=timeout), None)
        finally:
            self._stop()

    def __enter__(self) -> ServedReplica:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve(
    obj: object,
    address: str,
    others: Iterable[str],
    *,
    key: bytes | str | None = None,
    key_file: str | None = None,
    **options: Any,
) -> ServedReplica:
    """``replicate(obj, address, others, ...)`` started, its event loop in a thread of
    its own: the one-call form for synchronous code. Returns once the replica listens
    (its calls wait until it has joined); a bad address, key or option raises here."""
    return ServedReplica(
        lambda: replicate(obj, address, others, key=key, key_file=key_file, **options)
    )


__all__ = ["FORMATION", "ServedReplica", "replicate", "serve"]
