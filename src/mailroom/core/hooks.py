"""Extension points: the rules of a protocol that a subclass may replace.

A protocol marks each method that states one of its rules, and that a variant may
override to try another rule, with ``@hook``; the method's docstring says which rule
it is and what an override must return. ``hooks(cls)`` lists a class's hooks. A
variant overrides hooks (and the public endpoint methods), and reads the protocol's
public attributes and ``EndpointBase``'s public helpers (``next_id``, ``next_ids``,
``check_dest``, ``check_payload``; ``mailroom.lowlevel`` gathers what a protocol
author uses); names that start with ``_`` are private to the protocol and may change
in any release. The known-buggy variants in ``mailroom.testing`` (the membership
ones included) and the lab's ``SkeenAllFinal`` are written this way
(docs/writing-a-protocol.md, "Changing one rule of a built-in protocol";
``tests/test_variants_use_hooks.py`` checks every module of both).

Why overridable methods and not a strategy object passed to the constructor: a rule
needs the endpoint's state (its clock, its mail room), so a strategy would receive
the endpoint anyway; endpoints are rebuilt from snapshots by class (the protocol name),
so a variant that is a class restores as itself; and a method call adds nothing to
the per-packet path that the protocols did not already pay.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

#: The attribute ``@hook`` sets on a method.
HOOK_MARK = "__mailroom_hook__"


def hook(method: F) -> F:
    """Mark ``method`` as an extension point (it is returned unchanged otherwise)."""
    setattr(method, HOOK_MARK, True)
    return method


def hooks(cls: type) -> dict[str, str]:
    """The hooks of ``cls`` (its own and inherited), each with the first line of its
    docstring, by name."""
    found: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        for name, value in vars(klass).items():
            if getattr(value, HOOK_MARK, False):
                found[name] = (value.__doc__ or "").strip().splitlines()[0]
    return found


__all__ = ["HOOK_MARK", "hook", "hooks"]
