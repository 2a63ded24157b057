"""The peer table (``peers.toml``) and the group key.

Rules, in words:

- A peer table maps every pid 0..n-1 to ``host:port``; pids are consecutive from
  0 and addresses distinct. In ``peers.toml``, under ``[peers]``, each entry is
  either ``0 = "127.0.0.1:7001"`` or a table ``[peers.0]`` with ``address`` and
  an optional display ``name``.
- A growable group's table says ``size = N`` (its members' pids are below N) and
  lists only the addresses known in advance, maybe none; ``seeds = ["host:port"]``
  are addresses where members may be found (``mailroom.net.discovery``).
- The group key is at least 16 bytes. It comes from a file (``--key-file``,
  or ``key_file`` in ``peers.toml``, relative to that file) or from the
  environment variable ``MAILROOM_KEY``, never from code. A key file holds the
  key as text; surrounding whitespace is ignored.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path

import attrs

from mailroom.core.errors import LocalError

KEY_ENV = "MAILROOM_KEY"
MIN_KEY = 16
#: The largest growable group (as many identities as a snapshot may name).
MAX_SIZE = 4096


def parse_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise LocalError(f"address {text!r} is not host:port")
    return host.strip("[]"), int(port)


@attrs.frozen
class PeerTable:
    """pid -> (host, port), and optional display names; for a growable group, its
    ``size`` (pids 0..size-1, only some of them listed) and ``seeds``."""

    addresses: dict[int, tuple[str, int]]
    names: dict[int, str] = attrs.field(factory=dict)
    key_file: Path | None = None
    size: int | None = None
    seeds: tuple[tuple[str, int], ...] = ()

    def __attrs_post_init__(self) -> None:
        if self.size is None:
            if sorted(self.addresses) != list(range(len(self.addresses))) or not self.addresses:
                raise LocalError("peer table pids must be 0..n-1 with none missing")
        elif type(self.size) is not int or not 1 <= self.size <= MAX_SIZE:
            raise LocalError(f"a group's size must be 1..{MAX_SIZE}, got {self.size!r}")
        elif any(not 0 <= pid < self.size for pid in self.addresses):
            raise LocalError(f"peer table pids must be below the group's size {self.size}")
        if len(set(self.addresses.values())) != len(self.addresses):
            raise LocalError("two peers share an address")

    @property
    def n(self) -> int:
        """The number of identities (pids 0..n-1): the table's, or a growable group's size."""
        return len(self.addresses) if self.size is None else self.size

    @property
    def growable(self) -> bool:
        """Members not listed may join (found through seeds and views)."""
        return self.size is not None

    def name(self, pid: int) -> str:
        return self.names.get(pid, f"P{pid}")

    def entries(self) -> dict[int, str]:
        return {pid: f"{h}:{p}" for pid, (h, p) in self.addresses.items()}

    @classmethod
    def of(cls, entries: Mapping[int, str]) -> PeerTable:
        return cls({pid: parse_address(a) for pid, a in entries.items()})

    @classmethod
    def load(cls, path: str | Path) -> PeerTable:
        path = Path(path)
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise LocalError(f"cannot read peer table {path}: {exc}") from None
        peers = data.get("peers", {} if "size" in data else None)  # growable: maybe none
        if not isinstance(peers, dict):
            raise LocalError(f"{path} has no [peers] table")
        addresses: dict[int, tuple[str, int]] = {}
        names: dict[int, str] = {}
        for key, value in peers.items():
            if not key.isdigit():
                raise LocalError(f"{path}: peer {key!r} is not a pid")
            pid = int(key)
            if isinstance(value, dict):
                names[pid] = str(value.get("name", f"P{pid}"))
                value = value.get("address")
            if not isinstance(value, str):
                raise LocalError(f"{path}: peer {pid} has no address")
            addresses[pid] = parse_address(value)
        key_file = data.get("key_file")
        kf = (path.parent / key_file) if isinstance(key_file, str) else None
        size = data.get("size")
        if size is not None and type(size) is not int:
            raise LocalError(f"{path}: size must be an integer")
        seeds = data.get("seeds", [])
        if not isinstance(seeds, list) or not all(isinstance(a, str) for a in seeds):
            raise LocalError(f"{path}: seeds must be a list of host:port strings")
        return cls(addresses, names, kf, size, tuple(parse_address(a) for a in seeds))


def load_key(key_file: str | Path | None = None, env: Mapping[str, str] | None = None) -> bytes:
    """The group key from ``key_file`` if given, else from $MAILROOM_KEY; LocalError if none."""
    env = os.environ if env is None else env
    if key_file is not None:
        try:
            key = Path(key_file).read_bytes().strip()
        except OSError as exc:
            raise LocalError(f"cannot read key file {key_file}: {exc}") from None
    elif env.get(KEY_ENV):
        key = env[KEY_ENV].strip().encode()
    else:
        raise LocalError(
            "no group key: pass --key-file or set MAILROOM_KEY",
            hint="make one with: python -c 'import secrets; print(secrets.token_hex(32))'",
        )
    if len(key) < MIN_KEY:
        raise LocalError(f"the group key is {len(key)} bytes; at least {MIN_KEY} are needed")
    return key


__all__ = ["KEY_ENV", "PeerTable", "load_key", "parse_address"]
