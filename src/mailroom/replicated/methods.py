"""Which methods of an object are replicated, and how a call names and binds one.

A method marked ``@replicated`` changes the object: a call becomes an operation that
every replica applies in the same order. Every other public method (or attribute)
is a read: local (this replica's state, at once) or ordered (evaluated at the
caller's replica at its place in the operation order). Methods are named by their
attribute path from the replica's object (``"add"``, or ``"counter.add"`` for an
object held in an attribute of another, as ``Bundle`` does); names starting with an
underscore are never reachable.

Rules for a replicated method: deterministic (no clock, no randomness, no network,
no iteration over a plain ``set`` of strings, whose order differs between
processes: pass such values in as arguments), and it either returns or raises the
same on every replica, given the same state and arguments.
"""

from __future__ import annotations

import inspect
import sys
import types
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, overload

import attrs

from mailroom.core.errors import LocalError
from mailroom.replicated.operations import CALL, scalars_only

F = TypeVar("F", bound=Callable[..., Any])

#: The attribute ``@replicated`` sets on a function: its ``MethodSpec``.
MARK = "__mailroom_replicated__"
#: The keyword a ``caller=True`` method is given the calling member in.
CALLER = "caller"


@attrs.frozen
class MethodSpec:
    """How a replicated method is applied.

    ``checks_first``: the method raises only before it changes anything, so a raise
    needs no rollback (the batteries' methods all check their arguments first).
    ``caller``: the method takes keyword ``caller``, the ``Caller`` whose operation it is.
    """

    checks_first: bool = False
    caller: bool = False


@attrs.frozen
class Caller:
    """The member whose operation is being applied: its pid and incarnation (a process
    that rejoins the group is a new incarnation of its pid)."""

    pid: int
    incarnation: int


@overload
def replicated(fn: F, /) -> F: ...


@overload
def replicated(*, checks_first: bool = False, caller: bool = False) -> Callable[[F], F]: ...


def replicated(
    fn: F | None = None, /, *, checks_first: bool = False, caller: bool = False
) -> F | Callable[[F], F]:
    """Mark a method as replicated: ``@replicated`` or ``@replicated(checks_first=True)``."""

    def mark(f: F) -> F:
        if not callable(f):
            raise LocalError(f"@replicated marks methods, not {type(f).__name__}")
        if caller and CALLER not in inspect.signature(f).parameters:
            raise LocalError(f"{f.__name__} is marked caller=True but takes no 'caller' keyword")
        setattr(f, MARK, MethodSpec(checks_first, caller))
        return f

    return mark if fn is None else mark(fn)


def spec_of(method: object) -> MethodSpec | None:
    """The ``MethodSpec`` of a replicated method (bound or not), or None for a read."""
    spec = getattr(method, MARK, None)
    return spec if isinstance(spec, MethodSpec) else None


#: Names already found public, split into their parts (bounded: a peer names methods).
_paths: dict[str, tuple[str, ...]] = {}
_PATHS_KEPT = 4096


def _parts(path: object) -> tuple[str, ...]:
    """``path``'s parts; LocalError unless it is a dotted public name."""
    if type(path) is not str or not path:
        raise LocalError(f"a method is named by a non-empty string, not {path!r}")
    parts = _paths.get(path)
    if parts is None:
        parts = tuple(path.split("."))
        if not all(part.isidentifier() and not part.startswith("_") for part in parts):
            raise LocalError(f"{path!r} is not a public method name")
        if len(_paths) < _PATHS_KEPT:
            _paths[path] = parts
    return parts


def resolve(obj: object, path: object) -> Any:
    """The attribute ``path`` (dotted) of ``obj``; LocalError if it is not a public one."""
    target: Any = obj
    for part in _parts(path):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise LocalError(f"{type(obj).__name__} has no method {path!r}") from None
    return target


#: What a dotted read may reach that runs C code: a builtin method of a list, dict or set
#: (``items.append``, ``tags.clear``) would change the replica it is read at alone.
_BUILTINS = (
    types.BuiltinMethodType,
    types.MethodWrapperType,
    types.MethodDescriptorType,
    types.WrapperDescriptorType,
    types.ClassMethodDescriptorType,
)


def refuse_builtin(path: object, fn: Any) -> None:
    """LocalError if the read ``path`` names a builtin method (``items.append``): a read
    runs at one replica (a local read, or an ordered read's caller), and such a method
    may change what it is called on, so that replica would differ from the others."""
    if isinstance(fn, _BUILTINS):
        raise LocalError(
            f"{path!r} is a builtin method: a read calls only methods written in Python",
            hint="define a method on the class that returns what you need",
        )


_signatures: dict[Any, inspect.Signature] = {}


def _signature(method: Any, spec: MethodSpec | None) -> inspect.Signature:
    """The signature a caller binds against (without ``caller``), cached per function."""
    key = getattr(method, "__func__", method)
    sig = _signatures.get(key)
    if sig is None:
        sig = inspect.signature(method)
        if spec is not None and spec.caller:
            sig = sig.replace(parameters=[p for p in sig.parameters.values() if p.name != CALLER])
        _signatures[key] = sig
    return sig


def bind(
    method: Any, spec: MethodSpec | None, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[list[Any], dict[str, Any]]:
    """``args`` and ``kwargs`` as the method takes them (keywords that can go by
    position do); LocalError if the call does not fit the method's signature."""
    if spec is not None and spec.caller and CALLER in kwargs:
        raise LocalError("'caller' is filled in by the replica, not by the caller")
    if not kwargs and fits(method, spec, args, {}):  # by position alone: as bind gives it
        return list(args), {}
    try:
        bound = _signature(method, spec).bind(*args, **kwargs)
    except TypeError as exc:
        raise LocalError(f"{getattr(method, '__name__', method)}: {exc}") from None
    return list(bound.args), dict(bound.kwargs)


@attrs.frozen
class _Arity:
    """What a signature accepts, for a check cheaper than ``Signature.bind``."""

    required: int
    positional: int  # -1: any number (``*args``)
    names: frozenset[str]  # keywords it takes
    needed: frozenset[str]  # keyword-only parameters without a default
    any_keyword: bool

    @classmethod
    def of(cls, sig: inspect.Signature) -> _Arity:
        kinds = inspect.Parameter
        params = list(sig.parameters.values())
        by_position = [
            p for p in params if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)
        ]
        star = any(p.kind is kinds.VAR_POSITIONAL for p in params)
        return cls(
            sum(1 for p in by_position if p.default is p.empty),
            -1 if star else len(by_position),
            frozenset(
                p.name
                for p in params
                if p.kind in (kinds.POSITIONAL_OR_KEYWORD, kinds.KEYWORD_ONLY)
            ),
            frozenset(
                p.name for p in params if p.kind is kinds.KEYWORD_ONLY and p.default is p.empty
            ),
            any(p.kind is kinds.VAR_KEYWORD for p in params),
        )

    def fits(self, args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
        """True if a call of ``args`` (positional) and ``kwargs`` binds, as ``bind`` left
        them (keywords that could go by position went by position)."""
        if len(args) < self.required or 0 <= self.positional < len(args):
            return False
        if not self.any_keyword and not kwargs.keys() <= self.names:
            return False
        return self.needed <= kwargs.keys()


_arities: dict[Any, _Arity] = {}


def _arity(method: Any, spec: MethodSpec | None) -> _Arity:
    """What ``method``'s signature accepts (cached per function)."""
    key = getattr(method, "__func__", method)
    arity = _arities.get(key)
    if arity is None:
        arity = _arities[key] = _Arity.of(_signature(method, spec))
    return arity


def fits(method: Any, spec: MethodSpec | None, args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
    """Do ``args`` and ``kwargs``, as ``bind`` returns them, fit the method (cached)?"""
    return _arity(method, spec).fits(args, kwargs)


class MethodTable:
    """``obj``'s methods by name, a replicated one found once: a replica looks the method
    of every operation up, so a name's checks, the lookup and the signature's arity are
    paid at its first operation (bounded: a peer names methods). A dotted name, a read
    and a method the instance itself holds are looked up each time."""

    def __init__(self, obj: object) -> None:
        self.obj = obj
        #: name -> (method, spec, lo, hi): a call of lo..hi scalar arguments by position
        #: alone fits it (lo > hi: none goes the fast way, a ``caller`` or keyword needed)
        self._found: dict[str, tuple[Any, MethodSpec, int, int]] = {}

    def find(self, path: object) -> tuple[Any, MethodSpec | None]:
        """The attribute ``path`` of the object and its spec (None: not @replicated)."""
        hit = self._found.get(path) if type(path) is str else None
        if hit is not None:
            return hit[0], hit[1]
        fn = resolve(self.obj, path)
        spec = spec_of(fn)
        if spec is not None and self._keeps(path, fn):
            assert type(path) is str
            arity = _arity(fn, spec)
            hi = arity.positional if arity.positional >= 0 else sys.maxsize
            if spec.caller or arity.needed:
                hi = -1
            self._found[path] = (fn, spec, arity.required, hi)
        return fn, spec

    def plain(self, payload: object) -> tuple[Any, MethodSpec] | None:
        """The method and spec of ``payload`` if it is the common operation, a call
        ``[CALL, incarnation, name, args]`` of scalar arguments that fit a replicated
        method found before, which takes no caller; else None (the general path, which
        parses and checks it, decides)."""
        if type(payload) is not list or len(payload) != 4 or payload[0] != CALL:
            return None
        incarnation, path, args = payload[1], payload[2], payload[3]
        hit = self._found.get(path) if type(path) is str else None
        if (
            hit is None
            or type(incarnation) is not int
            or incarnation < 0
            or type(args) is not list
            or not hit[2] <= len(args) <= hit[3]
            or not scalars_only(args, {})
        ):
            return None
        return hit[0], hit[1]

    def takes(self, path: str, count: int) -> bool:
        """Does the replicated method ``path``, found before, take ``count`` arguments by
        position alone (and no ``caller``)? False: ask ``bind``."""
        hit = self._found.get(path)
        return hit is not None and hit[2] <= count <= hit[3]

    def _keeps(self, path: object, fn: Any) -> bool:
        """Keep ``fn``: a plain name, a method of the object's class, room in the table."""
        return (
            type(path) is str
            and "." not in path
            and getattr(fn, "__self__", None) is self.obj
            and path not in getattr(self.obj, "__dict__", {})
            and len(self._found) < _PATHS_KEPT
        )


__all__ = [
    "Caller",
    "MethodSpec",
    "MethodTable",
    "refuse_builtin",
    "replicated",
    "resolve",
    "spec_of",
]
