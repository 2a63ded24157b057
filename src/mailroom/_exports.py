"""Public names a package imports on first use (PEP 562), so that importing the package
loads none of its modules: ``mailroom`` and ``mailroom.net`` use it."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(
    package: str, homes: dict[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package``: a name of ``homes``
    (name -> the module that defines it) is imported when first read and then kept in
    ``namespace`` (the package's globals), so it is looked up once."""

    def getattr_(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *homes})

    return getattr_, dir_


__all__ = ["lazy_exports"]
