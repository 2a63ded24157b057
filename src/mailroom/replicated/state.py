"""An object's state as data: what a joiner receives and a checkpoint keeps (never pickle).

A class may define ``__replicated_state__(self)``, returning JSON data that the codec
carries, and ``__replicated_restore__(self, state)``, which puts such data back into
the object in place. Without them the state is ``vars(obj)``, accepted only if it is
such data already (lists and dicts with str keys, no tuples or sets: those would come
back as something else); otherwise a LocalError says to define the two methods.
The state handed out is a copy: changing the object later does not change it.
"""

from __future__ import annotations

import json
import math
from typing import Any

from mailroom.core.errors import LocalError
from mailroom.core.messages import Payload
from mailroom.replicated.operations import INT_LIMIT, carried_text

STATE = "__replicated_state__"
RESTORE = "__replicated_restore__"
_HINT = (
    "define __replicated_state__() returning JSON data and "
    "__replicated_restore__(state) putting it back"
)


def take_state(obj: object) -> tuple[Payload, str]:
    """``obj``'s state as data (a private copy) and its compact JSON text."""
    hook = getattr(obj, STATE, None)
    if hook is not None:
        data = hook()
    elif hasattr(obj, "__dict__"):
        data = dict(vars(obj))
    else:
        raise LocalError(f"{type(obj).__name__} has no __dict__ to take as its state", hint=_HINT)
    try:
        text = carried_text(data, f"the state of {type(obj).__name__}")
    except LocalError as exc:
        raise LocalError(f"{exc}; {_HINT}", hint=_HINT) from None
    return json.loads(text), text


def keeps_attributes(obj: object) -> bool:
    """Is ``obj``'s state its attributes (``vars``), not what ``__replicated_state__`` says?"""
    return getattr(obj, STATE, None) is None and hasattr(obj, "__dict__")


# How many numbers the per-call look reads inside lists and dicts: a state that holds
# more is looked at attribute by attribute only (its nested numbers are found when the
# state is next taken). A bound on the cost per call, and the same at every replica,
# since the walk follows the state's own order (lists, and dicts in insertion order).
NESTED_LOOK = 256


def uncarried_number(obj: object) -> str | None:
    """The first number in ``obj``'s attributes the codec cannot carry (a float that is
    not finite, an int beyond 64 bits), said in words; None if none does.

    A replicated method's arguments are checked, but what it computes from them is not:
    two ``add(1e308)`` make a float attribute ``inf``, and such a state could no longer
    be taken (compaction, a joiner's state). The replica asks this after every call that
    took effect, for an object whose state is its attributes. Each attribute is looked
    at; numbers inside its lists and dicts are looked at too while the state holds at
    most ``NESTED_LOOK`` of them, so a call costs a bounded look, never the size of a
    large state (there a nested number is found when the state is next taken: see
    ``Replica``)."""
    attributes = vars(obj)
    for name, value in attributes.items():
        if (bad := _uncarried_scalar(value)) is not None:
            return f"{name} became {bad}"
    containers = [value for value in attributes.values() if type(value) in (list, dict)]
    if sum(map(len, containers)) > NESTED_LOOK:  # a large state: no look inside at all
        return None
    budget = [NESTED_LOOK]
    for name, value in attributes.items():
        kind = type(value)
        if kind is list or kind is dict:
            found = _uncarried_inside(value, budget)
            if found is not None:
                return f"{name} holds {found}"
            if budget[0] < 0:
                return None
    return None


def _uncarried_scalar(value: object) -> str | None:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, int) and not -INT_LIMIT <= value < INT_LIMIT:
        return "an int beyond 64 bits"
    return None


def _uncarried_inside(container: list[Any] | dict[Any, Any], budget: list[int]) -> str | None:
    """The first uncarried number inside ``container``, spending ``budget[0]`` on each
    item looked at; once it is spent (below zero) the look stops and says None."""
    items = container.values() if type(container) is dict else container
    for value in items:
        budget[0] -= 1
        if budget[0] < 0:
            return None
        kind = type(value)
        if kind is list or kind is dict:
            found = _uncarried_inside(value, budget)
        else:
            found = _uncarried_scalar(value)
        if found is not None or budget[0] < 0:
            return found
    return None


def put_state(obj: object, data: Payload) -> None:
    """Put ``data`` (as ``take_state`` gave it) back into ``obj``, in place."""
    copy = json.loads(json.dumps(data))
    hook = getattr(obj, RESTORE, None)
    if hook is not None:
        hook(copy)
        return
    if getattr(obj, STATE, None) is not None:
        raise LocalError(f"{type(obj).__name__} defines {STATE} but not {RESTORE}", hint=_HINT)
    if type(copy) is not dict:
        raise LocalError(f"the state of a {type(obj).__name__} must be a dict of its attributes")
    attributes: dict[str, Any] = vars(obj)
    attributes.clear()
    attributes.update(copy)


__all__ = [
    "NESTED_LOOK",
    "keeps_attributes",
    "put_state",
    "take_state",
    "uncarried_number",
]
