"""Network namespaces on a bridge, and the nftables rules that cut links between them.

Each member of a run lives in its own network namespace with one address on a
private subnet; the namespaces' veth ends meet on a bridge in a hub namespace of
their own, so nothing is added to the machine's own namespace. A cut link is a
drop rule in the *receiving* member's namespace (table ``inet nemesis``), and a
member's outgoing connections can be redirected to a local fault-injecting proxy
(table ``ip nemesis_nat``) that marks its own connections so they pass. Every
rule set is written whole with ``nft -f -``, so a change is atomic; deleting the
namespaces removes the links, addresses and rules with them.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
from collections.abc import Iterable, Iterator, Sequence

import attrs

from mailroom.core.errors import MailroomError

#: The private subnet every run uses inside its own namespaces (never in the host's).
SUBNET = "10.77.0"
#: The mark a proxy sets on its own connections (SO_MARK), so the redirect skips them.
PROXY_MARK = 0x4D
#: A proxy for member i listens on 127.0.0.1:(PROXY_BASE + j) for its link to member j.
PROXY_BASE = 20000


class NetworkError(MailroomError, RuntimeError):
    """The machine cannot build the network (no root, no ``ip netns`` or no ``nft``)."""


def missing_support() -> str | None:
    """Why this machine cannot run the nemesis (one line), or None if it can."""
    if os.name != "posix" or os.geteuid() != 0:
        return "needs root (network namespaces and nftables)"
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            return f"needs the '{tool}' command"
    probe = f"mrnprobe{os.getpid()}"
    try:
        _run(["ip", "netns", "add", probe])
    except NetworkError as exc:
        return f"cannot create a network namespace: {exc}"
    try:
        _run(["ip", "netns", "exec", probe, "nft", "list", "ruleset"])
    except NetworkError as exc:
        return f"nft does not work inside a namespace: {exc}"
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True, check=False)
    return None


def _run(cmd: Sequence[str], stdin: str | None = None) -> None:
    try:
        done = subprocess.run(
            list(cmd), input=stdin, capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NetworkError(f"{' '.join(cmd[:4])}: {exc}") from exc
    if done.returncode != 0:
        raise NetworkError(f"{' '.join(cmd)}: {done.stderr.strip() or done.returncode}")


@attrs.frozen
class Cut:
    """Packets from ``src`` to ``dst`` are dropped: all of them, or (``one_way``) only
    those to ``dst``'s service port, so connections that ``dst`` opened stay up."""

    src: int
    dst: int
    one_way: bool = False


class Network:
    """``n`` namespaces on one bridge; ``cut`` and ``heal`` links; ``prefix(i)`` runs a
    command inside member ``i``'s namespace. Use as a context manager."""

    def __init__(self, n: int, ports: Sequence[int], proxied: bool = False) -> None:
        self.n = n
        self.ports = list(ports)
        self.proxied = proxied
        self.token = f"{os.getpid() % 100000:05d}{secrets.token_hex(2)}"
        self.hub = f"mrn{self.token}h"
        self.names = [f"mrn{self.token}m{i}" for i in range(n)]
        self.cuts: set[Cut] = set()
        self._made: list[str] = []

    def address(self, i: int) -> str:
        return f"{SUBNET}.{10 + i}"

    def prefix(self, i: int) -> list[str]:
        """The command prefix that runs a program inside member ``i``'s namespace."""
        return ["ip", "netns", "exec", self.names[i]]

    def __enter__(self) -> Network:
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _build(self) -> None:
        _run(["ip", "netns", "add", self.hub])
        self._made.append(self.hub)
        _run(["ip", "-n", self.hub, "link", "add", "br0", "type", "bridge"])
        _run(["ip", "-n", self.hub, "link", "set", "br0", "up"])
        for i, name in enumerate(self.names):
            _run(["ip", "netns", "add", name])
            self._made.append(name)
            _run(
                [
                    "ip",
                    "link",
                    "add",
                    "eth0",
                    "netns",
                    name,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    f"v{i}",
                    "netns",
                    self.hub,
                ]
            )
            _run(["ip", "-n", self.hub, "link", "set", f"v{i}", "master", "br0"])
            _run(["ip", "-n", self.hub, "link", "set", f"v{i}", "up"])
            _run(["ip", "-n", name, "addr", "add", f"{self.address(i)}/24", "dev", "eth0"])
            _run(["ip", "-n", name, "link", "set", "eth0", "up"])
            _run(["ip", "-n", name, "link", "set", "lo", "up"])
            self._write_rules(i)

    def close(self) -> None:
        """Delete every namespace made (their links, addresses and rules go with them)."""
        for name in reversed(self._made):
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)
        self._made.clear()

    # -- cutting links ------------------------------------------------------------------
    def cut(self, cuts: Iterable[Cut]) -> None:
        """Add ``cuts`` to the links that are cut now."""
        self.set_cuts(self.cuts | set(cuts))

    def heal(self) -> None:
        """Every link up again."""
        self.set_cuts(set())

    def set_cuts(self, cuts: set[Cut]) -> None:
        touched = {c.dst for c in cuts ^ self.cuts}
        self.cuts = set(cuts)
        for i in sorted(touched):
            self._write_rules(i)

    def rules(self, i: int) -> str:
        """The whole nftables rule set of member ``i``'s namespace (``nft -f`` input)."""
        lines = [
            "table inet nemesis {}",
            "flush table inet nemesis",
            "table inet nemesis {",
            "  chain input {",
            "    type filter hook input priority 0; policy accept;",
        ]
        for c in sorted(self.cuts, key=attrs.astuple):
            if c.dst != i:
                continue
            only = f" tcp dport {self.ports[i]}" if c.one_way else ""
            lines.append(f"    ip saddr {self.address(c.src)}{only} drop")
        lines += ["  }", "}"]
        if self.proxied:
            lines += [
                "table ip nemesis_nat {}",
                "flush table ip nemesis_nat",
                "table ip nemesis_nat {",
                "  chain output {",
                "    type nat hook output priority -100; policy accept;",
            ]
            for j in range(self.n):
                if j != i:
                    lines.append(
                        f"    meta mark != {PROXY_MARK:#x} ip daddr {self.address(j)} "
                        f"tcp dport {self.ports[j]} redirect to :{PROXY_BASE + j}"
                    )
            lines += ["  }", "}"]
        return "\n".join(lines) + "\n"

    def _write_rules(self, i: int) -> None:
        _run([*self.prefix(i), "nft", "-f", "-"], stdin=self.rules(i))


@contextlib.contextmanager
def network(n: int, ports: Sequence[int], proxied: bool = False) -> Iterator[Network]:
    """A ``Network`` that is torn down whatever happens."""
    with Network(n, ports, proxied) as net:
        yield net


__all__ = [
    "PROXY_BASE",
    "PROXY_MARK",
    "SUBNET",
    "Cut",
    "Network",
    "NetworkError",
    "missing_support",
    "network",
]
