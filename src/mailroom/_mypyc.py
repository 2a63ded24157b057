"""``mypyc_attr``, the mark a class carries for mypyc (the compiled build,
docs/compiled.md), without mypy_extensions at run time.

mypy (and so mypyc) sees ``mypy_extensions.mypyc_attr`` here, which mypyc reads when it
compiles a module; at run time it is a decorator that returns the class unchanged, so
neither build needs mypy_extensions installed. This module is never compiled.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

_C = TypeVar("_C")

if TYPE_CHECKING:
    from mypy_extensions import mypyc_attr as mypyc_attr
else:

    def mypyc_attr(*_names: object, **_flags: object) -> Callable[[_C], _C]:
        """Mark a class for mypyc: changes nothing at run time."""
        return lambda cls: cls


__all__ = ["mypyc_attr"]
