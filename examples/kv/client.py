"""A client of the store that records what it saw, for the black-box check.

Each request is recorded as an invocation and a completion in a client history
(``mailroom.linearizable.HistoryRecorder``, JSON Lines), as ``mailroom check --model
dict`` reads it: ``PUT`` is ``set``, ``DELETE`` is ``delete`` (true if the key was
there), ``GET`` is ``get`` (nil for 404). The outcome:

- ``ok``: the answer says what happened (204, 200, 404 of a GET or DELETE);
- ``fail``: it certainly did not happen: the connection was refused (nothing was
  sent) or the store refused the request (400, 405, 413);
- ``info``: it may or may not have happened: a timeout, a connection cut after the
  request went out, or 503 (``outcome unknown``). The client then goes on as a
  fresh process: the open call stays open to the end of the history.

``workload`` runs several such clients at once against a ``Cluster`` and records
their writes and ordered reads in one history and their local reads in another.
"""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any
from urllib.parse import quote

from examples.kv.demo import Cluster, request
from mailroom.linearizable import Client, HistoryRecorder

#: statuses that say the store refused the request before doing anything
REFUSED = frozenset({400, 405, 413})
#: what a request came to: ok, fail or info, and the result (None unless ok)
Outcome = tuple[str, Any]


class RecordingClient:
    """One client, one request at a time, each recorded by ``client``."""

    def __init__(self, recorder: HistoryRecorder, timeout: float = 30.0) -> None:
        self.client: Client = recorder.client()
        self.timeout = timeout

    def _run(self, f: str, key: str, value: Any, method: str, port: int, target: str) -> Outcome:
        """Send one request; record and return its outcome (ok, fail or info) and the
        result (None unless ok)."""
        self.client.invoke(f, key, value)
        body = value.encode() if isinstance(value, str) else None
        try:
            status, got = request(port, method, target, body, timeout=self.timeout)
        except ConnectionRefusedError:
            self.client.fail()  # nothing was sent
            return "fail", None
        except OSError:
            self.client.info()  # a timeout, or cut after the request went out
            return "info", None
        if status in REFUSED:
            self.client.fail(status)
            return "fail", None
        result = _result(f, status, got)
        if result is _UNKNOWN:
            self.client.info(status)  # 503: outcome unknown (or not a member: for a read)
            return "info", None
        self.client.ok(result)
        return "ok", result

    def put(self, port: int, key: str, value: str) -> Outcome:
        """``PUT /kv/key``, recorded as ``set``."""
        return self._run("set", key, value, "PUT", port, f"/kv/{quote(key, safe='')}")

    def delete(self, port: int, key: str) -> Outcome:
        """``DELETE /kv/key``, recorded as ``delete`` (ok true or false)."""
        return self._run("delete", key, None, "DELETE", port, f"/kv/{quote(key, safe='')}")

    def get(self, port: int, key: str, consistent: bool = True) -> Outcome:
        """``GET /kv/key``, ordered (``?consistent=1``) or local, recorded as ``get``."""
        target = f"/kv/{quote(key, safe='')}" + ("?consistent=1" if consistent else "")
        return self._run("get", key, None, "GET", port, target)


_UNKNOWN = object()


def _result(f: str, status: int, body: bytes) -> Any:
    """The result an answer gives (``_UNKNOWN`` for any other status)."""
    if f == "set" and status == 204:
        return None
    if f == "delete" and status in (204, 404):
        return status == 204
    if f == "get" and status in (200, 404):
        return body.decode("utf-8") if status == 200 else None
    return _UNKNOWN


def workload(
    cluster: Cluster, folder: Path, *, clients: int = 4, ops: int = 50, keys: int = 3, seed: int = 0
) -> tuple[Path, Path]:
    """``clients`` threads, each making ``ops`` requests to members in turn on ``keys``
    shared keys ``w0``, ``w1``... (writes, deletes, ordered reads, and a local read
    after each): the history of writes and ordered reads and the history of local
    reads, in ``folder``. The check takes the keys to start absent: use keys nothing
    else wrote."""
    ordered, local = folder / "history.jsonl", folder / "local-reads.jsonl"
    with HistoryRecorder(ordered) as rec, HistoryRecorder(local, prefix="local-") as loc:

        def run(c: int) -> None:
            rng = random.Random(seed * 1000 + c)
            me, reader = RecordingClient(rec), RecordingClient(loc)
            for k in range(ops):
                port = cluster.port((c + k) % len(cluster.procs))
                key = f"w{rng.randrange(keys)}"
                roll = rng.random()
                if roll < 0.45:
                    me.put(port, key, f"{c}.{k}")
                elif roll < 0.55:
                    me.delete(port, key)
                else:
                    me.get(port, key)
                reader.get(cluster.port((c + k + 1) % len(cluster.procs)), key, consistent=False)

        threads = [threading.Thread(target=run, args=(c,)) for c in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return ordered, local


__all__ = ["REFUSED", "Outcome", "RecordingClient", "workload"]
