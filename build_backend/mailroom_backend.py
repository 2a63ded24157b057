"""The build backend: setuptools' own, plus mypy as a build requirement only when
``MAILROOM_COMPILE=1`` asks for the compiled build (``setup.py``, docs/compiled.md).

A pure build (the default) needs only setuptools. An editable install is always pure:
compiled modules would sit in the source tree and shadow the code being edited.
"""

from __future__ import annotations

import os
import sys
import tomllib
from typing import Any

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403  (every hook this module does not change)

#: The build requirement of the compiled build: mypy ships mypyc.
MYPY = "mypy>=1.10"


def _dependencies() -> list[str]:
    """The package's own dependencies (pyproject.toml): mypyc type-checks the source,
    so the compiled build needs what the source imports (attrs above all)."""
    with open("pyproject.toml", "rb") as file:
        return list(tomllib.load(file)["project"]["dependencies"])


def _compile() -> bool:
    """Whether this build is the compiled one."""
    return os.environ.get("MAILROOM_COMPILE") == "1"


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    """setuptools' requirements, plus mypy and the dependencies for the compiled build."""
    requires = list(_setuptools.get_requires_for_build_wheel(config_settings))
    return [*requires, MYPY, *_dependencies()] if _compile() else requires


def build_editable(
    wheel_directory: str,
    config_settings: dict[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    """setuptools' editable wheel, always pure (one line if MAILROOM_COMPILE=1 asked)."""
    if _compile():
        print("mailroom build: an editable install is pure Python", file=sys.stderr)
        os.environ.pop("MAILROOM_COMPILE")
    return str(_setuptools.build_editable(wheel_directory, config_settings, metadata_directory))
