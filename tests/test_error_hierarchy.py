"""Every exception class mailroom defines derives from ``MailroomError``
(``mailroom.core.errors``), keeping a builtin base where callers catch that."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import mailroom
from mailroom.core.errors import BackpressureError, LocalError, MailroomError

#: the optional extras a module may need (``pyproject.toml``): without them it is skipped
OPTIONAL = ("pyspark", "pyarrow", "matplotlib", "prometheus_client")


def _modules() -> list[object]:
    found = []
    for info in pkgutil.walk_packages(mailroom.__path__, "mailroom."):
        if info.name.endswith("__main__"):
            continue  # running it is its import
        try:
            found.append(importlib.import_module(info.name))
        except ImportError as exc:
            if (exc.name or "").split(".")[0] not in OPTIONAL:
                raise
    return found


def _exception_classes() -> dict[str, type[BaseException]]:
    classes: dict[str, type[BaseException]] = {}
    for module in _modules():
        for obj in vars(module).values():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__.startswith("mailroom")
            ):
                classes[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return classes


def test_every_exception_mailroom_defines_is_a_mailroom_error() -> None:
    classes = _exception_classes()
    # the walk found the ones issue 49 named (not an empty pass)
    names = {cls.__name__ for cls in classes.values()}
    expected = {"TraceError", "FrameError", "Mislabeled", "SweepError", "Busy"}
    assert expected <= names, expected - names
    outside = sorted(name for name, cls in classes.items() if not issubclass(cls, MailroomError))
    assert outside == []


def test_builtin_bases_are_kept_for_callers_that_catch_them() -> None:
    from mailroom.sim.sweep import SweepError
    from mailroom.testing.nemesis.faults import ScheduleError
    from mailroom.testing.nemesis.network import NetworkError
    from mailroom.trace.events import TraceError

    for cls in (TraceError, SweepError, ScheduleError):
        assert issubclass(cls, ValueError)
    assert issubclass(NetworkError, RuntimeError)
    error = TraceError("row 3: field seq")
    assert str(error) == "row 3: field seq" and error.hint == ""


def test_busy_is_back_pressure_and_still_a_local_error() -> None:
    from mailroom.net.node import Busy

    assert issubclass(Busy, BackpressureError)
    assert issubclass(Busy, LocalError)  # deprecated compatibility (CHANGELOG 0.3.0)
    with pytest.raises(BackpressureError):
        raise Busy("the window is full")
    assert not issubclass(LocalError, BackpressureError)
