"""Which build of mailroom is running: the pure-Python package or the one compiled by mypyc.

``MAILROOM_COMPILE=1 pip install .`` compiles this module with every module that
``setup.py``'s ``COMPILED`` lists (all of them or none: a build that cannot compile
installs the pure package), so whether this module's own function is compiled tells
the build apart without importing any of the others.
"""

from __future__ import annotations

import types


def _probe() -> None:
    """A function compiled exactly when the listed modules are (mypyc makes it native)."""


#: True in the build compiled by mypyc, False in the pure-Python package.
COMPILED: bool = not isinstance(_probe, types.FunctionType)

#: How ``mailroom --version`` and ``mailroom status`` name the build.
BUILD: str = "compiled with mypyc" if COMPILED else "pure Python"

__all__ = ["BUILD", "COMPILED"]
