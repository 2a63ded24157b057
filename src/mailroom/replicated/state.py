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


def uncarried_number(obj: object) -> str | None:
    """The first attribute of ``obj`` holding a number the codec cannot carry (a float
    that is not finite, an int beyond 64 bits), said in words; None if none does.

    A replicated method's arguments are checked, but what it computes from them is not:
    two ``add(1e308)`` make a float attribute ``inf``, and such a state could no longer
    be taken (compaction, a joiner's state). The replica asks this after every call that
    took effect, for an object whose state is its attributes; it costs one look per
    attribute, not the state's size (a number inside a list or dict is found when the
    state is next taken: see ``Replica``)."""
    for name, value in vars(obj).items():
        kind = type(value)
        if kind is float and not math.isfinite(value):
            return f"{name} became {value!r}"
        if kind is int and not -INT_LIMIT <= value < INT_LIMIT:
            return f"{name} became an int beyond 64 bits"
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


__all__ = ["keeps_attributes", "put_state", "take_state", "uncarried_number"]
