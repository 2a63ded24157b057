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
from typing import Any

from mailroom.core.errors import LocalError
from mailroom.core.messages import Payload
from mailroom.replicated.operations import carried_text

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


__all__ = ["put_state", "take_state"]
