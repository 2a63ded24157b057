"""The known-buggy variants and the lab change protocols through documented hooks
(``mailroom.core.hooks``), never through names private to a protocol."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path
from types import ModuleType

import pytest

import mailroom.lab
import mailroom.testing
from mailroom import (
    CBCAST,
    KS,
    RST,
    Fifo,
    LamportTotalOrder,
    Reliable,
    Sequencer,
    Skeen,
    TaggedCausalBroadcast,
)
from mailroom.core import EndpointBase, hook, hooks
from mailroom.core.endpoint import Endpoint
from mailroom.protocols.membership import Group


def _all_modules() -> list[ModuleType]:
    """Every module of the harness and the lab (``__main__`` aside: importing it runs it)."""
    found = []
    for pkg in (mailroom.testing, mailroom.lab):
        found.append(pkg)
        for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            if not info.name.endswith("__main__"):
                found.append(importlib.import_module(info.name))
    return found


MODULES = _all_modules()
#: What every endpoint offers a host (the Endpoint contract and the capabilities).
CONTRACT = {name for name in dir(Endpoint) if not name.startswith("_")} | {
    "send",
    "broadcast",
    "multicast",
    "consume",
    "can_send",
    "__init__",
}
#: EndpointBase's helpers for subclasses (documented in docs/writing-a-protocol.md).
BASE_HELPERS = {name for name in vars(EndpointBase) if name.startswith("_")}


def _variants(module: ModuleType) -> list[type]:
    """The endpoint classes ``module`` defines (variants of a protocol)."""
    return [
        cls
        for cls in vars(module).values()
        if inspect.isclass(cls)
        and cls.__module__ == module.__name__
        and issubclass(cls, EndpointBase)
    ]


def test_the_guard_covers_the_known_variant_modules() -> None:
    names = {m.__name__ for m in MODULES if _variants(m)}
    assert {
        "mailroom.testing.variants",
        "mailroom.testing.variants_total",
        "mailroom.testing.membership",
        "mailroom.lab.total",
    } <= names


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_variants_override_only_hooks_and_the_endpoint_contract(module: ModuleType) -> None:
    for cls in _variants(module):
        bases = [b for b in cls.__mro__[1:] if b.__module__ != module.__name__]
        base_hooks = {name for base in bases for name in hooks(base)}
        inherited = {name for base in bases for name in vars(base)}
        for name in vars(cls):
            if callable(vars(cls)[name]) and name in inherited:
                assert name in base_hooks or name in CONTRACT, (cls.__name__, name)


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_variants_use_no_name_private_to_a_protocol(module: ModuleType) -> None:
    tree = ast.parse(Path(inspect.getfile(module)).read_text(encoding="utf-8"))
    own = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    own |= {
        t.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign | ast.AnnAssign)
        for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        if isinstance(t, ast.Attribute)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert not any(a.name.startswith("_") for a in node.names), ast.dump(node)
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            name = node.attr
            if not name.startswith("__"):
                assert name in own or name in BASE_HELPERS, (module.__name__, name)


def test_every_hook_is_documented_as_a_rule() -> None:
    expected = {
        Skeen: {"learn_final", "learn_finals", "next_delivery"},
        LamportTotalOrder: {"stamp_batch"},
        Fifo: {"deliver_run"},
        Sequencer: {"deliver_order", "deliver_batch"},
        RST: {"attached", "count_sent", "entry_sent"},
        KS: {"piggyback", "implied_by", "batch_log"},
        CBCAST: {"batch_deliverable"},
        Reliable: {"on_copy"},
        TaggedCausalBroadcast: {"stamp", "entry_tag"},
        Group: {"flush_quorum", "recover_flush_log", "safe_holds", "safe_needed"},
    }
    for cls, names in expected.items():
        found = hooks(cls)
        assert set(found) == names, cls
        for name, line in found.items():
            assert line.startswith("Rule"), (cls.__name__, name)
            assert f"``{name}``" in (inspect.getmodule(cls).__doc__ or ""), (cls, name)


def test_hook_marks_a_method_and_changes_nothing_else() -> None:
    class Base:
        @hook
        def rule(self) -> int:
            """Rule: one."""
            return 1

    class Variant(Base):
        def rule(self) -> int:
            return 2

    assert hooks(Variant) == {"rule": "Rule: one."} and Variant().rule() == 2
