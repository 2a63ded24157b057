"""The optional extras (``pip install 'mailroom[NAME]'``) and the error that names one.

A feature that needs a package the core does not install (Spark, pyarrow, matplotlib,
prometheus_client) imports it through ``need``: without it the caller gets a
``MissingExtra`` that says which extra to install, not a bare ``ModuleNotFoundError``.
``MissingExtra`` is an ``ImportError`` too, so code that falls back when a package is
missing keeps working.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from mailroom.core.errors import LocalError

#: The extra that installs each optional package (its top-level module name).
EXTRAS = {
    "pyspark": "spark",
    "pyarrow": "spark",
    "matplotlib": "viz",
    "prometheus_client": "metrics",
    "pysyncobj": "nemesis",
}


class MissingExtra(LocalError, ImportError):
    """An optional package is not installed; the message names the extra to install."""


def install_hint(package: str) -> str:
    """The command that installs ``package``'s extra."""
    return f"pip install 'mailroom[{EXTRAS[package]}]'"


def need(module: str, what: str) -> ModuleType:
    """Import ``module`` (of a package in ``EXTRAS``) for ``what`` (a feature's name);
    MissingExtra names the extra if it is not installed."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        package = module.partition(".")[0]
        hint = install_hint(package)
        raise MissingExtra(f"{what} needs {package}: {hint}", hint=hint) from exc


__all__ = ["EXTRAS", "MissingExtra", "install_hint", "need"]
