"""The public API is re-exported from one place (trio's test_exports)."""

from __future__ import annotations

import importlib

import mailroom

PROMISED = [
    "LamportClock",
    "VectorClock",
    "SentMatrix",
    "DelivVector",
    "Transmit",
    "Deliver",
    "Stable",
    "Message",
    "MessageId",
    "LocalError",
    "RemoteError",
    "Fifo",
    "RST",
    "CBCAST",
    "Unordered",
    "Stack",
]


def test_promised_names_are_exported() -> None:
    for name in PROMISED:
        assert name in mailroom.__all__, name


def test_all_names_resolve_to_mailroom_objects() -> None:
    for name in mailroom.__all__:
        obj = getattr(mailroom, name)
        if not hasattr(obj, "__qualname__"):
            continue  # a type alias such as Action
        module = getattr(obj, "__module__", "mailroom")
        assert module.startswith("mailroom"), (name, module)


def test_subpackages_export_what_they_list() -> None:
    for pkg in (
        "mailroom.core",
        "mailroom.protocols",
        "mailroom.sim",
        "mailroom.trace",
        "mailroom.testing",
        "mailroom.diagram",
        "mailroom.lab",
        "mailroom.clocks",
    ):
        mod = importlib.import_module(pkg)
        for name in getattr(mod, "__all__", []):
            assert hasattr(mod, name), (pkg, name)
