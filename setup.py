"""The build: the pure-Python package, or with ``MAILROOM_COMPILE=1`` the same source
with the modules of ``COMPILED`` compiled by mypyc (docs/compiled.md).

Pure Python is the default and the reference: ``pip install -e .``, and any build
without ``MAILROOM_COMPILE=1``, compiles nothing and needs no compiler and no mypy.
``MAILROOM_COMPILE=1 pip install .`` (not editable) asks the in-tree build backend
(``build_backend/mailroom_backend.py``) for mypy as a build requirement and compiles
the list below; a build that cannot compile (mypyc missing or refusing a module, no C
compiler) says so in one line and installs the pure package, so the install still
succeeds. The wheel keeps every ``.py`` file beside its compiled module.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import BaseError, CCompilerError

#: The modules the compiled build compiles, each with what compiling it gained
#: (benchmarks/compiled.py: pure over compiled CPU time of the path the module carries,
#: the median of alternating rounds; where the machine was loaded, also the ratio of
#: instructions, valgrind's callgrind, pure over compiled, for one pass of the same row;
#: docs/benchmarks.md). A module stays pure where compiling it gained nothing, or could
#: not be compiled without changing what it does.
COMPILED = [
    "src/mailroom/_build.py",  # the flag mailroom.compiled reads: compiled with the rest
    "src/mailroom/core/wire_format.py",  # the reference writer and reader: 2.5x
    "src/mailroom/core/codec.py",  # encode and decode, every protocol's packets: 1.95x
    # the payload check on every send and encode, and the packet registry (is_packet):
    # codec 1.035x in instructions with messages.py alone, 1.05x with both (1.09x CPU);
    # stack 1.01x in instructions (1.10x CPU)
    "src/mailroom/core/messages.py",
    "src/mailroom/core/packets.py",
    "src/mailroom/core/stack.py",  # a Stack(Reliable, CBCAST) handing packets on: 1.20x
    "src/mailroom/protocols/membership/safe.py",  # safe delivery's bare host: 1.33x
    # the node core's step (three nodes on loopback): 1.12x in instructions
    "src/mailroom/net/nodecore.py",
    "src/mailroom/net/steps.py",
    "src/mailroom/net/outgoing.py",
    # a frame reader splitting a stream of small frames: 1.14x, 1.13x in instructions
    # (three nodes on loopback, the nodecore row, with it compiled: 1.01x in instructions)
    "src/mailroom/net/frames.py",
    # the replica's apply (three replicas of a counter): 1.05x, 1.10x in instructions
    "src/mailroom/replicated/replica.py",
    "src/mailroom/replicated/operations.py",
]
# Measured and kept pure: protocols/_buffer.py (1.00x); protocols/_window.py (a few
# integer tests per packet, called from pure protocols: not measured alone).
# A compiled class's __new__ runs its __init__ (unless it is open to interpreted
# subclasses): no constructor may skip __init__ through cls.__new__(cls) (net/frames.py's
# Sealer.keyed did: compiled, a TypeError, and no handshake completed); and mypyc
# miscompiles an @overload'ed __init__ (its C passes too few arguments: the build falls
# back to pure).
# Kept pure because compiling them would change what they do, for little: the protocols
# (reliable.py, total/*, causal/*, _buffered.py). Measured on the reliable layer (the
# stack row, instructions for the whole process; its class made buildable: the host's
# clock a part it owns, packets and hook marks kept apart): compiled as a non-native
# class over the pure EndpointBase, 1.02x; as a native class, 1.11x, which needs
# EndpointBase compiled (open to the subclasses every protocol, mailroom.testing's
# variants and applications are). The compiled build would then differ: a compiled
# method checks its annotated argument types itself (a wrongly typed pid, destination
# or time is a TypeError where the protocol's own check says LocalError), reading an
# int field of a crafted packet is a TypeError where validation says RemoteError,
# compiled methods have no docstrings (hooks() reads each rule from them), and the
# heartbeat detector's counters, read through its group, are not what the compiled
# base reads. One behaviour would mean annotating each checked argument as object,
# which users' type checkers would then not check: not worth 1.11x on the tenth of a
# delivery's time that the protocols take (a profile of three nodes on loopback).
# clocks.py: VectorClock's converter and validator (mypyc builds that attrs field
# differently), and the runtime's protocols keep their clocks as lists.
# core/actions.py: attrs.frozen is not among mypyc's dataclass decorators, so its
# classes are built as plain classes whose class-body values mypyc checks against the
# type mypy gives them: `attrs.field(default=False, ...)` (Transmit.lazy) is typed bool
# and `attrs.field(converter=_members)` (View.members, ViewChange's, StateRequest.to)
# tuple[int, ...], so the module fails at import (TypeError: bool/tuple object
# expected); a bare `object` annotation (Transmit.packet) is looked up as a global
# (KeyError). A default typed Any and `builtins.object` would pass; the converter fields
# would not without changing what attrs builds. Its hot function, `delivery`, measured
# alone: 1.5x compiled with its setters bound to Final names, 0.83x as they are.
# The attrs classes of messages.py and packets.py stay attrs classes when compiled
# (attrs writes their methods); check_payload, __str__ and the registry are native.


def say(line: str) -> None:
    """One line of the build's own, on stderr (``pip install -v`` shows it)."""
    print(f"mailroom build: {line}", file=sys.stderr)


def fall_back(reason: str) -> None:
    say(f"not compiled ({reason}); installing the pure-Python package")


#: The setup.py commands that build modules: only these compile (the backend also runs
#: setup.py for the build requirements and the metadata, which need no mypyc).
BUILDS = frozenset({"build", "build_ext", "bdist_wheel", "install"})


def ext_modules(
    environ: Mapping[str, str] = os.environ, commands: Sequence[str] = sys.argv[1:]
) -> list[Any]:
    """The extension modules to build: none unless ``MAILROOM_COMPILE=1`` and a command
    of ``BUILDS`` runs; then the modules of ``COMPILED`` as mypyc makes them, or none
    (with one line) if it cannot."""
    if environ.get("MAILROOM_COMPILE") != "1" or not BUILDS.intersection(commands):
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        fall_back("mypyc is not installed")
        return []
    told = io.StringIO()  # mypyc's own messages: the first error line goes in ours
    try:
        with contextlib.redirect_stdout(told), contextlib.redirect_stderr(told):
            return list(mypycify(COMPILED, opt_level="3", group_name="mailroom"))
    except (Exception, SystemExit) as exc:
        lines = [*told.getvalue().splitlines(), str(exc)]
        first = next((line for line in lines if "error" in line), lines[0] or "mypyc failed")
        fall_back(f"mypyc: {first.strip()}")
        return []


def _shortened(text: str, width: int = 100) -> str:
    """The first line of ``text``, its middle cut out past ``width`` characters (a
    compiler's failure quotes its whole command line)."""
    line = (text.strip().splitlines() or ["?"])[0]
    return line if len(line) <= width else f"{line[: width // 2]} ... {line[-width // 2 :]}"


class BuildExtOrPure(build_ext):
    """``build_ext`` that, when the C compiler fails, removes what it built and leaves
    the pure package (every ``.py`` is in the wheel anyway)."""

    def run(self) -> None:
        try:
            super().run()
        except (BaseError, CCompilerError, OSError) as exc:
            for path in self.get_outputs():
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path)
            fall_back(f"the C compiler failed: {_shortened(str(exc))}")


if __name__ == "__main__":
    if BUILDS.intersection(sys.argv[1:]):
        # start from nothing: setuptools copies all of build/lib into the wheel, so a
        # module compiled by an earlier build would otherwise ship in this one
        shutil.rmtree("build", ignore_errors=True)
    setup(ext_modules=ext_modules(), cmdclass={"build_ext": BuildExtOrPure})
