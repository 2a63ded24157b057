"""The sans-IO replica: calls become operations, delivered operations are applied in order.

A ``Replica`` wraps any object. Its host (the simulator's, or the asyncio one over
``mailroom.net``) owns a ``Group`` endpoint over a total-order protocol and does the
I/O; the replica only turns calls into payloads and deliveries into outcomes:

- ``submit(mid, "add", 5)``: checks the call (a ``@replicated`` method, arguments
  that fit its signature and the codec, the size limit) and returns the payload the
  host broadcasts as message ``mid`` (the id the group will give it: the endpoint's
  ``sent_count + 1``). Nothing is sent when it raises. ``submit_read`` does the same
  for an ordered read; ``read`` is a local read, at once.
- ``prepare("add", 5)`` (``prepare_read``) checks a call the same way without an id;
  ``batch(mid, calls)`` is then the payload of message ``mid`` carrying several
  prepared calls (operation ``k`` of it is ``(origin, seq, k)``): how a host sends
  the calls of one turn as one group message.
- ``deliver(message)``: applies the operation (every replica, in delivery order) and
  returns the ``Outcome`` of this replica's own calls: the method's result, or the
  exception it raised. A method that raises leaves the object as it was on every
  replica: the replica rebuilds it from its journal's base and redoes the log (a
  method declared ``checks_first`` raises only before it changes anything, so it
  needs none of that).
- ``view_changed(change)``: a view installed here (the object's ``on_view`` sees the
  members), or, at a joiner, the transferred state; ``state()`` is what a
  ``StateRequest`` asks for; ``excluded()`` fails the pending calls (their outcome is
  unknown: the group may or may not apply them).
- ``checkpoint()`` / ``Replica.restart(obj, pid, data)``: base plus log.

``history``, if given, is called with one dict per event (see ``mailroom.replicated.history``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from mailroom._mypyc import mypyc_attr
from mailroom.core.actions import View, ViewChange
from mailroom.core.errors import LocalError, MailroomError, RemoteError
from mailroom.core.messages import Message, MessageId, Payload
from mailroom.replicated.journal import (
    COMPACT_BYTES,
    SKIPPED_BYTES,
    Entry,
    OperationLog,
    applied_entry,
    checked_base,
    skipped_entry,
)
from mailroom.replicated.journal import checked_checkpoint as _checkpoint_parts
from mailroom.replicated.methods import (
    CALLER,
    Caller,
    MethodSpec,
    MethodTable,
    bind,
    fits,
    refuse_builtin,
)
from mailroom.replicated.operations import (
    CALL,
    HELLO,
    MAX_OPERATION_BYTES,
    READ,
    Operation,
    carried_text,
    operation_payload,
    owned,
    parse,
    parse_batch,
    scalar_size,
    scalars_only,
)
from mailroom.replicated.state import keeps_attributes, put_state, take_state, uncarried_number

log = logging.getLogger("mailroom.replicated")

Row = dict[str, Any]


class OutcomeUnknown(MailroomError):
    """The replica left the group (excluded, or closed) before the call's operation was
    delivered here: the others may or may not have applied it. Read the state to know."""


#: An operation's key: (origin, seq) of the message carrying it alone, or (origin,
#: seq, k) for operation k of a batch (the ``op`` of history rows).
OpKey = tuple[int, ...]


def op_key(mid: MessageId, part: int | None) -> OpKey:
    return (mid.origin, mid.seq) if part is None else (mid.origin, mid.seq, part)


@attrs.frozen
class Outcome:
    """What the caller of operation ``id`` is told: ``value``, or ``error`` raised;
    ``part`` is the operation's place in its batch (None: the message held it alone)."""

    id: MessageId
    value: Any = None
    error: BaseException | None = None
    part: int | None = None

    @property
    def key(self) -> OpKey:
        return op_key(self.id, self.part)

    def result(self) -> Any:
        """The value, or raise the error."""
        if self.error is not None:
            raise self.error
        return self.value


@attrs.frozen
class Members:
    """What ``on_view`` is told: the view, and the latest incarnation known of each
    pid (a member that rejoined is a new incarnation: what the old one held is gone)."""

    view: View
    incarnations: dict[int, int]

    def current(self, pid: int, incarnation: int) -> bool:
        """Is (pid, incarnation) a member now (not left, not replaced by a later one)?"""
        return pid in self.view.members and incarnation >= self.incarnations.get(pid, 0)


def jsonable(value: Any) -> Any:
    """``value`` as JSON data for a history row (repr for what JSON cannot hold)."""
    if type(value) in (str, int, bool, type(None)):
        return value
    return json.loads(json.dumps(value, default=repr))


def error_data(error: BaseException) -> list[str]:
    return [type(error).__name__, str(error)]


@attrs.frozen
class Prepared:
    """A call (or ordered read) checked at the caller and not sent yet: its kind and
    method, its payload (a copy the caller does not hold) and that payload's JSON text."""

    kind: str
    method: str
    payload: list[Any]
    text: str

    @property
    def incarnation(self) -> int:
        """The incarnation of the replica that prepared it (the payload carries it)."""
        return int(self.payload[1])


#: Interpreted subclasses (``mailroom.replicated.testing``'s known-buggy variants, and
#: an application's) stay possible in the compiled build (docs/compiled.md).
@mypyc_attr(allow_interpreted_subclasses=True)
class Replica:
    """Replica ``pid`` of ``obj``: a member of ``view`` (a founder) or, with ``view``
    None, a joiner waiting for the group's state."""

    def __init__(
        self,
        obj: object,
        pid: int,
        *,
        view: View | None = None,
        incarnation: int = 0,
        history: Callable[[Row], None] | None = None,
        max_operation_bytes: int = MAX_OPERATION_BYTES,
        compact_bytes: int = COMPACT_BYTES,
    ) -> None:
        if type(max_operation_bytes) is not int or max_operation_bytes < 16:
            raise LocalError(f"max_operation_bytes must be an int >= 16: {max_operation_bytes!r}")
        self.obj = obj
        self._methods = MethodTable(obj)
        self.pid = pid
        self.incarnation = incarnation
        self.max_operation_bytes = max_operation_bytes
        self.view: View | None = view
        self.applied = 0
        #: the latest incarnation applied of each pid (0 if none was seen)
        self.incarnations: dict[int, int] = {}
        #: this replica's calls sent and not yet applied: operation key -> kind
        self.pending: dict[OpKey, str] = {}
        #: a rejoined member owes the group a hello (``hello()``)
        self._owes_hello = False
        self._history = history
        self._hook: Callable[[Members], None] | None = getattr(obj, "on_view", None)
        #: the state is the object's attributes: each call's numbers are looked at
        self._numbers = keeps_attributes(obj)
        base, size = self._base() if view is not None else ({}, 0)
        self.journal = OperationLog(base, size, compact_bytes)
        if view is not None:
            self._started()

    # -- the caller's side ----------------------------------------------------------------
    def submit(self, mid: MessageId, method: str, *args: Any, **kwargs: Any) -> Payload:
        """The payload to broadcast as message ``mid`` for the call ``method(*args)``."""
        return self._expect(mid, self.prepare(method, *args, **kwargs))

    def submit_read(self, mid: MessageId, method: str, *args: Any, **kwargs: Any) -> Payload:
        """The payload of an ordered read: evaluated here at its place in the order."""
        return self._expect(mid, self.prepare_read(method, *args, **kwargs))

    def prepare(self, method: str, *args: Any, **kwargs: Any) -> Prepared:
        """The call ``method(*args)`` checked, for ``batch`` (LocalError: not sendable)."""
        fn, spec = self._method(method)
        if spec is None:
            raise LocalError(
                f"{method} is not @replicated", hint="read it with read() or an ordered read"
            )
        if not kwargs and self._methods.takes(method, len(args)):
            return self._prepared(CALL, method, (list(args), {}))  # as bind gives it
        return self._prepared(CALL, method, bind(fn, spec, args, kwargs))

    def prepare_read(self, method: str, *args: Any, **kwargs: Any) -> Prepared:
        """An ordered read checked, for ``batch``: evaluated here at its place in the order."""
        fn, spec = self._method(method)
        if spec is not None:
            raise LocalError(f"{method} is @replicated: it is a call, not a read")
        refuse_builtin(method, fn)
        if not callable(fn):
            if args or kwargs:
                raise LocalError(f"{method} is an attribute: it takes no arguments")
            return self._prepared(READ, method, ([], {}))
        return self._prepared(READ, method, bind(fn, None, args, kwargs))

    def batch(self, mid: MessageId, calls: Sequence[Prepared]) -> Payload:
        """The payload of message ``mid`` carrying ``calls`` (operation k is ``calls[k]``):
        a batch's text. The host cuts its calls with ``cut_batches`` to keep it short."""
        if not calls:
            raise LocalError("a batch carries at least one call")
        for call in calls:
            self._check_current(call)
        self._check_unused(mid)
        for part, call in enumerate(calls):
            self._pend(op_key(mid, part), call)
        return "[" + ",".join(call.text for call in calls) + "]"

    def withdraw(self, mid: MessageId) -> None:
        """The host could not send ``mid``: forget its call (or the calls of its batch)."""
        for key in [k for k in self.pending if k[0] == mid.origin and k[1] == mid.seq]:
            del self.pending[key]
            self._note("result", op=list(key), withdrawn=True)

    def read(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """A local read: ``method(*args)`` (or the attribute ``method``) on this replica now.
        Do not change what it returns: it may be the replica's own data."""
        fn, spec = self._method(method)
        if spec is not None:
            raise LocalError(f"{method} is @replicated: calling it here alone would diverge")
        refuse_builtin(method, fn)
        return fn(*args, **kwargs) if callable(fn) else fn

    def _method(self, method: str) -> tuple[Any, MethodSpec | None]:
        if self.view is None:
            raise LocalError(
                f"replica P{self.pid} is not a member of the group now",
                hint="wait until it has joined (its first ViewChange brings the state)",
            )
        return self._methods.find(method)

    def _prepared(
        self, kind: str, method: str, bound: tuple[list[Any], dict[str, Any]]
    ) -> Prepared:
        payload = operation_payload(kind, self.incarnation, method, *bound)
        scalars = scalars_only(*bound)
        text = carried_text(
            payload, f"the call {method}", self.max_operation_bytes, scalars=scalars
        )
        if not scalars:
            payload = json.loads(text)  # the caller may change its arguments afterwards
        return Prepared(kind, method, payload, text)

    def _expect(self, mid: MessageId, call: Prepared) -> Payload:
        """``call`` as message ``mid`` alone."""
        self._check_current(call)
        self._check_unused(mid)
        self._pend(op_key(mid, None), call)
        return call.payload

    def _check_current(self, call: Prepared) -> None:
        """LocalError if ``call`` was prepared by an incarnation that is no longer a
        member (excluded since, or rejoined as a new one): sent now, it would carry the
        dead incarnation's name and its outcome would reach the wrong caller."""
        if self.view is None or call.incarnation != self.incarnation:
            raise LocalError(
                f"P{self.pid} left the group since the call {call.method} was prepared: not sent",
                hint="its outcome is known: it was never sent; call again once joined",
            )

    def _check_unused(self, mid: MessageId) -> None:
        """LocalError if message ``mid`` already carries a pending call (alone, or a batch)."""
        if op_key(mid, None) in self.pending or op_key(mid, 0) in self.pending:
            raise LocalError(f"{mid} is already a pending call")

    def _pend(self, key: OpKey, call: Prepared) -> None:
        self.pending[key] = call.kind
        if self._history is not None:
            self._note("call", op=list(key), payload=call.payload)

    # -- the group's side -----------------------------------------------------------------------
    def deliver(self, message: Message) -> list[Outcome]:
        """Apply the delivered operation (each of a batch's, in order); the outcomes of
        those that are this replica's calls."""
        if self.view is None:
            raise LocalError(f"replica P{self.pid} got a delivery while not a member")
        mid, payload = message.id, message.payload
        if type(payload) is not str:
            out = self._deliver_one(mid, None, payload)
        else:
            try:
                ops: list[Any] = parse_batch(payload)
            except RemoteError:
                ops = [None]  # one operation that changes nothing, at every replica alike
            mine = mid.origin == self.pid  # another's batch holds none of this one's calls
            out = []
            for part, op in enumerate(ops):
                out += self._deliver_one(mid, part, op, mine)
        self._compact_if_due()
        return out

    def _deliver_one(
        self, mid: MessageId, part: int | None, payload: Payload, mine: bool = True
    ) -> list[Outcome]:
        kind = self.pending.pop(op_key(mid, part), None) if mine else None
        value, error, entry, size = self._apply(mid, payload, kind == READ)
        index = self.applied
        self.applied += 1
        self.journal.add(entry, size)
        if self._history is not None:  # (the rows are built only for a history)
            key = op_key(mid, part)
            self._note("apply", index=index, op=list(key))
            if kind is not None and error is not None:
                self._note("result", op=list(key), error=error_data(error))
            elif kind is not None:
                self._note("result", op=list(key), value=jsonable(value))
        return [] if kind is None else [Outcome(mid, value, error, part)]

    def _compact_if_due(self) -> None:
        """The log as large as its base: the state now is the new base (after a message).
        A state that cannot be taken (a method put a value the codec cannot carry inside
        a list or dict) postpones it: delivery goes on, base plus log still hold the state,
        and every replica holds the same; a joiner cannot be given it until it is fixed."""
        if self.journal.due():
            try:
                base = self._base()
            except LocalError as exc:
                self.journal.postpone()
                log.warning("replica P%d: compaction postponed: %s", self.pid, exc)
                return
            self.journal.rebase(*base)

    def replay(self, message: Message) -> Outcome:
        """Apply ``message`` as if this replica had made the call, and return its outcome
        (how the history checker replays a delivered order)."""
        payload = message.payload
        read = type(payload) is list and payload[:1] == [READ]
        self.pending[op_key(message.id, None)] = READ if read else CALL
        outcome = self._deliver_one(message.id, None, payload)[0]
        self._compact_if_due()
        return outcome

    def _apply(
        self, mid: MessageId, payload: Payload, evaluate: bool
    ) -> tuple[Any, BaseException | None, Entry, int]:
        """Apply one operation: (value, error, journal entry, its size in bytes)."""
        origin, seq = mid.origin, mid.seq
        plain = self._methods.plain(payload) if self.view is not None else None
        if plain is not None:  # the common call, checked by ``plain``: parse's rules hold
            assert type(payload) is list
            method, how = plain
            if payload[1] > self.incarnations.get(origin, 0):
                self._meet(origin, payload[1])
            try:
                value = method(*payload[3])
            except Exception as exc:
                self._raised(how, origin, payload[1])
                return None, exc, skipped_entry(origin, seq, payload[1]), SKIPPED_BYTES
            if self._numbers and (bad := uncarried_number(self.obj)) is not None:
                return self._undone(payload[2], bad, origin, seq, payload[1])
            return value, None, applied_entry(origin, seq, payload), scalar_size(*payload[2:])
        try:
            op = parse(payload)
        except RemoteError as exc:
            return None, exc, skipped_entry(origin, seq, 0), SKIPPED_BYTES
        skip = skipped_entry(origin, seq, op.incarnation)
        self._meet(origin, op.incarnation)
        if op.kind == HELLO:
            return None, None, skip, SKIPPED_BYTES
        if op.kind == READ:
            if not evaluate:
                return None, None, skip, SKIPPED_BYTES
            try:
                return self.read(op.method, *op.args, **op.kwargs), None, skip, SKIPPED_BYTES
            except Exception as exc:
                return None, exc, skip, SKIPPED_BYTES
        try:
            fn, spec = self._method(op.method)
            if spec is None:
                raise LocalError(f"{op.method} is not @replicated")
            if not fits(fn, spec, op.args, op.kwargs):
                bind(fn, spec, tuple(op.args), op.kwargs)  # raises, saying why
                raise LocalError(f"{op.method} does not take {op.args!r:.60}, {op.kwargs!r:.60}")
        except LocalError as exc:
            return None, exc, skip, SKIPPED_BYTES
        try:
            value, size = self._call(fn, spec, origin, op)
        except Exception as exc:
            self._raised(spec, origin, op.incarnation)
            return None, exc, skip, SKIPPED_BYTES
        if self._numbers and (bad := uncarried_number(self.obj)) is not None:
            return self._undone(op.method, bad, origin, seq, op.incarnation)
        return value, None, applied_entry(origin, seq, payload), size

    def _undone(
        self, method: str, bad: str, origin: int, seq: int, incarnation: int
    ) -> tuple[Any, BaseException | None, Entry, int]:
        """A call left a number the codec cannot carry: it is undone, as if it had raised
        (every replica finds the same, at the same operation), and its caller told why."""
        self.rebuild()  # even a ``checks_first`` method: it did change the object
        self._meet(origin, incarnation)
        error = LocalError(
            f"{method}: its effect cannot be carried ({bad}): undone on every replica",
            hint="keep replicated numbers finite and within 64 bits",
        )
        return None, error, skipped_entry(origin, seq, incarnation), SKIPPED_BYTES

    def _raised(self, spec: MethodSpec, origin: int, incarnation: int) -> None:
        """A method raised: undo what it changed (unless it checks before it changes)."""
        if not spec.checks_first:
            self.rebuild()
            self._meet(origin, incarnation)

    @staticmethod
    def _call(fn: Any, spec: MethodSpec, origin: int, op: Operation) -> tuple[Any, int]:
        """Apply ``op`` of member ``origin``: the method's value and the operation's size."""
        args, kwargs, size = owned(op)
        if spec.caller:
            kwargs[CALLER] = Caller(origin, op.incarnation)
        return fn(*args, **kwargs), size

    def _meet(self, pid: int, incarnation: int) -> None:
        """An operation of (pid, incarnation): a later incarnation replaces the earlier."""
        if incarnation > self.incarnations.get(pid, 0):
            self.incarnations[pid] = incarnation
            if self._hook is not None and self.view is not None:
                self._hook(Members(self.view, dict(self.incarnations)))

    def view_changed(self, change: ViewChange, *, incarnation: int | None = None) -> list[Outcome]:
        """``change`` is installed here; at a joiner (``change.state`` set) the state
        arrives, and ``incarnation`` is the joiner's (its endpoint's) incarnation."""
        if change.state is not None:
            self._joined(change, self.incarnation if incarnation is None else incarnation)
            return []
        if self.view is None:
            raise LocalError(f"replica P{self.pid} got a ViewChange without state while out")
        self._install(change.view)
        members = list(change.view.members)
        self.journal.add(["v", change.view.id, members], 16 + 4 * len(members))
        self._note("view", after=self.applied, view=change.view.id, members=members)
        return []

    def _install(self, view: View) -> None:
        self.view = view
        if self._hook is not None:
            self._hook(Members(view, dict(self.incarnations)))

    def _joined(self, change: ViewChange, incarnation: int) -> None:
        base = checked_base(change.state)
        self.incarnation = incarnation
        self._load(base)
        self.view = change.view
        self.journal.rebase(*self._base())
        self._started()
        self._owes_hello = incarnation > self.incarnations.get(self.pid, 0)

    def hello(self, mid: MessageId) -> Payload | None:
        """After a rejoin, the payload the host broadcasts as ``mid``: it tells every
        replica, at one point of the order, that this pid's older incarnation is gone
        (its locks, say, are released). None when nothing is owed."""
        if not self._owes_hello or self.view is None:
            return None
        self._owes_hello = False
        payload = Operation(HELLO, self.incarnation).payload()
        self._note("call", op=[mid.origin, mid.seq], payload=payload)
        return payload

    def state(self) -> Payload:
        """The replica's state as data, for a joiner (a ``StateRequest``): it also
        becomes the journal's base, since it was taken anyway."""
        base, size = self._base()
        self.journal.rebase(base, size)
        return base

    def excluded(self) -> list[Outcome]:
        """This member is out of the group: its pending calls' outcome is unknown."""
        self.view = None
        out = []
        for key in self.pending:
            mid = MessageId(key[0], key[1])
            part = key[2] if len(key) > 2 else None
            error = OutcomeUnknown(
                f"P{self.pid} left the group before operation {key} was delivered here"
            )
            out.append(Outcome(mid, None, error, part))
            self._note("result", op=list(key), unknown=True)
        self.pending = {}
        self._note("out")
        return out

    # -- base, log, checkpoint -------------------------------------------------------------------
    def _base(self) -> tuple[dict[str, Any], int]:
        assert self.view is not None
        state, text = take_state(self.obj)
        incs = [[p, k] for p, k in sorted(self.incarnations.items())]
        base = {
            "object": state,
            "applied": self.applied,
            "view": [self.view.id, list(self.view.members)],
            "incarnations": incs,
        }
        return base, len(text) + 32 + 8 * len(incs) + 4 * len(self.view.members)

    def _load(self, base: dict[str, Any]) -> None:
        put_state(self.obj, base["object"])
        self.applied = base["applied"]
        self.view = View(base["view"][0], tuple(base["view"][1]))
        self.incarnations = {p: k for p, k in base["incarnations"]}

    def rebuild(self) -> None:
        """Back to the journal's base, then redo its log (after a method raised)."""
        applied = self.applied
        self._load(self.journal.base)
        try:
            for entry in self.journal.log:
                self._redo(entry)
        except Exception as exc:
            raise LocalError(
                f"replica P{self.pid}: redoing its log raised {type(exc).__name__}: {exc}",
                hint="replicated methods must be deterministic",
            ) from exc
        self.applied = applied

    def _redo(self, entry: Entry) -> None:
        if entry[0] == "v":
            self._install(View(entry[1], tuple(entry[2])))
        elif entry[0] == "x":
            self._meet(entry[1], entry[3])
        else:
            op = parse(entry[3])
            self._meet(entry[1], op.incarnation)
            if op.kind == CALL:
                fn, spec = self._method(op.method)
                assert spec is not None
                self._call(fn, spec, entry[1], op)

    def checkpoint(self) -> dict[str, Any]:
        """Base plus log, as data: ``Replica.restart`` resumes from it."""
        data = self.journal.checkpoint()
        data["replica"] = [self.pid, self.incarnation]
        return data

    @classmethod
    def restart(cls, obj: object, pid: int, data: object, **options: Any) -> Replica:
        """A replica of ``obj`` resumed from ``checkpoint()`` data; LocalError if the data
        is not a checkpoint (``obj``, as built fresh, is left as the checkpoint says)."""
        base, log = _checkpoint_parts(data)
        assert isinstance(data, dict)
        who = data.get("replica")
        if who is not None and (type(who) is not list or who[:1] != [pid]):
            raise LocalError(f"the checkpoint is of replica {who!r}, not P{pid}")
        incarnation = int(who[1]) if who is not None else 0
        replica = cls(obj, pid, incarnation=incarnation, **options)
        replica._resume_from(base, log)
        return replica

    def _resume_from(self, base: dict[str, Any], log: list[Any]) -> None:
        """Restarting (``restart``): the state ``base``, then each entry of ``log`` again."""
        self._load(base)
        self.journal.rebase(base, len(json.dumps(base)))
        for entry in log:
            self._redo(entry)
            self.journal.add(entry, len(json.dumps(entry)))
            if entry[0] != "v":
                self.applied += 1
        self._started()

    # -- history ------------------------------------------------------------------------------
    def _started(self) -> None:
        assert self.view is not None
        self._note(
            "start", applied=self.applied, view=self.view.id, members=list(self.view.members)
        )

    def record_history(self, history: Callable[[Row], None] | None) -> None:
        """From now on, hand each history row to ``history`` (None: keep none). A
        replica restarted to rejoin records on where its earlier life did, without the
        start row its restart wrote elsewhere."""
        self._history = history

    def _note(self, row: str, **fields: Any) -> None:
        if self._history is not None:
            self._history({"row": row, "replica": self.pid, "inc": self.incarnation, **fields})


__all__ = ["Members", "OpKey", "Outcome", "OutcomeUnknown", "Prepared", "Replica", "op_key"]
